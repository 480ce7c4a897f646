"""Megatron-Core's exposed host time per local expert (workloads/training.
MOE_HOST_S_PER_LOCAL_EXPERT), fitted to the published MoE training rows, and how well it
carries to rows it was not fitted on.

    python -m workbench.calibrate.training_host     # the fit, its held-out errors, per row

The rows are the reference points (calibrate/data/reference_points.yaml) of kind training
whose model has routed experts: the MoE rows of the Megatron-Bridge 25.11 performance table
(FIT_TABLE: NM05-NM08, NM12-NM16, NM20-NM26) on DGX-H100, DGX-B200, GB200 and GB300. The MoE
rows of the next release's table (26.02.01, NN01-NN18 and the hybrid Nemotron-3-Nano's
NN28-NN31: newer software and recipes, and the B300 no 25.11 row has) are never fitted:
`next_release` scores the constant on them. Every row is predicted once over the whole grid
of candidates (predict.training's `moe_host_s_per_local_expert` swept: a step grows linearly
with it once the launches outlast the experts' GEMMs) and the fits below reuse those
predictions. The constant minimises the median |speed error| (the figure the training rows
are reported by), on a grid of HOST_STEP_S up to HOST_MAX_S. Held out three ways: each row
with the constant fitted on the others, each model's rows with it fitted on the other
models', each GPU's rows with it fitted on the other GPUs'.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

HOST_STEP_S, HOST_MAX_S = 1e-5, 1.5e-3  # the candidates: 10 us steps up to 1.5 ms per local expert
FIT_TABLE, NEXT_TABLE = "NM", "NN"  # id prefixes: Megatron-Bridge 25.11 (fitted), 26.02.01 (held out)


def moe_rows(table: str = FIT_TABLE) -> pd.DataFrame:
    """The MoE training reference points of one table (id prefix `table`): id, hardware,
    model, metric, measured value, config."""
    from ..specs import load_model
    from .gap import reference_points
    pts = reference_points()
    pts = pts[(pts["kind"] == "training") & pts["id"].str.startswith(table)]
    moe = [isinstance(c.get("model"), str) and load_model(c["model"]).is_moe for c in pts["config"]]
    out = pts[moe][["id", "hardware", "metric", "value_si", "config"]].reset_index(drop=True)
    out["model"] = [c["model"] for c in out["config"]]
    return out


def grid_errors(rows: pd.DataFrame, grid=None) -> pd.DataFrame:
    """Speed error (model / measured - 1) of every row (index: id) at every candidate
    constant (columns), each row one predict.training call swept over the candidates."""
    from .. import predict
    from .gap import speed_error
    grid = np.arange(0.0, HOST_MAX_S + HOST_STEP_S / 2, HOST_STEP_S) if grid is None else np.asarray(grid, float)
    sweep = xr.DataArray(grid, dims="candidate")
    errs = {}
    for r in rows.itertuples():
        ds = predict.training(**r.config, moe_host_s_per_local_expert=sweep)
        errs[r.id] = speed_error(ds[r.metric].transpose("candidate").values, r.value_si, r.metric)
    return pd.DataFrame(errs, index=grid).T


def best(errors: pd.DataFrame) -> float:
    """The candidate with the least median |error| over the rows given (the smallest on a tie)."""
    return float(errors.columns[int(np.argmin(np.median(np.abs(errors.to_numpy()), axis=0)))])


def held_out(errors: pd.DataFrame, groups: pd.Series) -> pd.Series:
    """Each row's error with the constant fitted on the rows of the other groups."""
    out = pd.Series(np.nan, index=errors.index)
    for _, ids in groups.groupby(groups).groups.items():
        rest = errors.drop(index=ids)
        if len(rest):
            out.loc[ids] = errors.loc[ids, best(rest)]
    return out


def fit(rows: pd.DataFrame | None = None) -> dict:
    """The constant, the rows' errors with it and without it, and the held-out errors
    (per row, per model, per GPU), with their median |error|."""
    rows = moe_rows() if rows is None else rows
    errors = grid_errors(rows)
    c = best(errors)
    by = rows.set_index("id")
    rows_as_groups = pd.Series(errors.index, errors.index)
    table = pd.DataFrame({"hardware": by["hardware"], "model": by["model"], "without": errors[0.0],
                          "fitted": errors[c], "leave_one_row_out": held_out(errors, rows_as_groups),
                          "leave_one_model_out": held_out(errors, by["model"]),
                          "leave_one_gpu_out": held_out(errors, by["hardware"])})
    med = {k: float(np.median(np.abs(table[k]))) for k in ("without", "fitted", "leave_one_row_out",
                                                            "leave_one_model_out", "leave_one_gpu_out")}
    return {"moe_host_s_per_local_expert": c, "rows": table, "median_abs_err": med}


def next_release(constant: float) -> pd.DataFrame:
    """Speed error of the next release's MoE rows (NEXT_TABLE, never fitted) without the term
    and with `constant` (index: id)."""
    rows = moe_rows(NEXT_TABLE)
    errors = grid_errors(rows, grid=[0.0, constant])
    by = rows.set_index("id")
    return pd.DataFrame({"hardware": by["hardware"], "model": by["model"], "without": errors[0.0],
                         "with": errors[float(constant)]})


def main() -> None:
    f = fit()
    with pd.option_context("display.width", 200, "display.float_format", "{:+.1%}".format):
        print(f["rows"])
    print(f"moe_host_s_per_local_expert = {f['moe_host_s_per_local_expert']:.2e} s; median |speed error| "
          + ", ".join(f"{k} {v:.1%}" for k, v in f["median_abs_err"].items()))
    nxt = next_release(f["moe_host_s_per_local_expert"])
    with pd.option_context("display.width", 200, "display.float_format", "{:+.1%}".format):
        print(nxt)
    print(f"next release ({len(nxt)} MoE rows, not fitted): median |speed error| without "
          f"{np.median(np.abs(nxt['without'])):.1%}, with {np.median(np.abs(nxt['with'])):.1%}")


if __name__ == "__main__":
    main()
