"""How far the measured serving runs agree with themselves: the same stated deployment
measured more than once with different results, a model-free reference for the serving
model's error (as kernel_roughness and kernel_repeatability are for the kernel surfaces).

A deployment is everything a row of reference/serving_silicon.csv states about a run: the
model's architecture (checkpoints of one architecture, such as DeepSeek-R1 and DeepSeek-V3,
whose catalog specs differ only by name, count as one), GPU, framework, mode, prompt and
output lengths, concurrency, weight formats and every layout column of both pools. Rows
whose TTFT and TPOT are identical are one measurement under several ids (the reference
README says so) and count once. A deployment with two or more distinct measurements is a
repeat; each of its measurements is compared with the group's geometric mean, |x / gm - 1|:
no model of the stated deployment, however exact, can be closer to all of them at once (a
single prediction p has max(|a/p - 1|, |b/p - 1|) >= the geometric mean's for a pair).

What differs between the repeats is what the rows do not state: the framework version
(`backend_version`, listed per group), and with it settings such as speculative decoding
(TensorRT-LLM's DeepSeek-R1 1.2.0rc6.post3 runs decode 1.25-2x faster than post2 at the
same deployment, the shrinking-with-batch gain that multi-token prediction gives), the
benchmark client, arrivals and prefix caching.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .serving_rows import load

# The columns that state a run's deployment (the reference README's), besides the model.
DEPLOYMENT = ("system", "backend", "mode", "isl", "osl", "concurrency", "precision", "gemm_quant_mode",
              "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size",
              "moe_ep_size", "prefill_batch_size", "prefill_num_workers", "prefill_tp_size", "prefill_pp_size",
              "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size", "decode_batch_size",
              "decode_num_workers", "decode_tp_size", "decode_pp_size", "decode_attention_dp_size",
              "decode_moe_tp_size", "decode_moe_ep_size")
MEASURED = ("silicon_ttft_ms", "silicon_tpot_ms")


def architecture(model_path: str) -> str:
    """One name per model architecture: the first catalog entry with an equal spec (name and
    source aside), the Hugging Face id itself for a model the catalog lacks."""
    from ..specs import catalog_name, load_model
    if catalog_name(model_path) is None:
        return model_path
    spec = load_model(model_path)
    return repr([(f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec)
                 if f.compare and f.name not in ("name", "source")])


def repeats(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every distinct measurement of a deployment measured more than once: the row's id,
    `group` (a number per deployment), `backend_version`, the measured TTFT and TPOT in
    seconds, their group's geometric means and each measurement's deviation from them
    (x / gm - 1). Empty when no deployment repeats."""
    df = load() if df is None else df
    d = df.copy()
    d["architecture"] = d.model_path.map({m: architecture(m) for m in d.model_path.unique()})
    keys = ["architecture", *[c for c in DEPLOYMENT if c in d.columns]]
    d[keys] = d[keys].astype(object).where(d[keys].notna(), "-").astype(str)  # an empty column matches an empty one
    d = d.drop_duplicates(keys + list(MEASURED))  # the same measurement under several ids counts once
    d["group"] = d.groupby(keys, sort=True, dropna=False).ngroup()
    d = d[d.groupby("group")["group"].transform("size") > 1]
    out = pd.DataFrame({"id": d.id, "group": d.group, "model": d.model_path, "system": d.system,
                        "backend": d.backend, "backend_version": d.backend_version, "mode": d["mode"],
                        "concurrency": pd.to_numeric(d.concurrency), "isl": pd.to_numeric(d.isl),
                        "osl": pd.to_numeric(d.osl)})
    for m in ("ttft", "tpot"):
        x = pd.to_numeric(d[f"silicon_{m}_ms"]) / 1e3
        gm = np.exp(np.log(x).groupby(d.group).transform("mean"))
        out[f"measured_{m}_s"], out[f"group_{m}_s"], out[f"{m}_dev"] = x, gm, x / gm - 1.0
    return out.reset_index(drop=True)


def summary(rep: pd.DataFrame, res: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per mode and overall: repeated deployments, their distinct measurements, how many of
    the deployments' measurements of TPOT (TTFT) differ by more than 10% (max / min), and
    the median and 90th-percentile |deviation| from the group's geometric mean; with `res`
    (serving_rows.predict_rows) also the model's median |error| on the same measurements
    (the rows it answers)."""
    def one(r: pd.DataFrame) -> dict:
        row = {"deployments": r.group.nunique(), "measurements": len(r)}
        for m in ("tpot", "ttft"):
            a = r[f"{m}_dev"].abs()
            x = r.groupby("group")[f"measured_{m}_s"]
            row[f"{m}_differ_10pct"] = int((x.max() / x.min() > 1.1).sum())
            row[f"{m}_median_abs_dev"], row[f"{m}_p90_abs_dev"] = a.median(), a.quantile(0.9)
            if res is not None:
                err = r.id.map(res.set_index("id")[f"{m}_err"])
                row[f"{m}_model_median_abs_err"] = err.abs().median()
        return row
    parts = {mode: one(g) for mode, g in rep.groupby("mode")}
    parts["all"] = one(rep)
    return pd.DataFrame.from_dict(parts, orient="index")


def widest(rep: pd.DataFrame, n: int = 10, metric: str = "tpot") -> pd.DataFrame:
    """The n deployments whose measurements of `metric` differ most (max / min), one line
    each: model, GPU, framework, the lengths and concurrency, the versions and the values."""
    g = rep.groupby("group")
    spread = g[f"measured_{metric}_s"].max() / g[f"measured_{metric}_s"].min()
    top = spread.sort_values(ascending=False).head(n)
    rows = []
    for grp, ratio in top.items():
        r = rep[rep.group == grp].sort_values(f"measured_{metric}_s")
        f = r.iloc[0]
        rows.append({"model": f.model.split("/")[-1], "GPU": f.system, "framework": f.backend, "mode": f["mode"],
                     "isl/osl": f"{f.isl}/{f.osl}", "concurrency": int(f.concurrency),
                     "versions": ", ".join(str(v) for v in r.backend_version),
                     f"{metric} [ms]": ", ".join(f"{v * 1e3:.3g}" for v in r[f"measured_{metric}_s"]),
                     "max/min": ratio})
    return pd.DataFrame(rows)


def explained_by_deployment(res: pd.DataFrame, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """How much of the model's error on the aggregated rows the stated deployment could
    explain: per framework and metric (TTFT, TPOT), the median |ln(measured / model)| of the
    answered rows, and the same after the least-squares correction of ln(measured / model)
    linear in the row's stated deployment (log2 of concurrency, prompt and output length,
    attention TP, attention-DP and EP as the row ran, serving_rows.layout; an MoE flag; one
    level per GPU), fitted on those very rows by least squares. In-sample, so a correction of
    that form does no better on rows it has not seen (least squares weighs the large errors:
    a median may even grow); what it leaves is error the stated deployment does not
    determine (versions, settings and harness the rows do not state, and noise)."""
    from .serving_rows import layout, load as load_rows
    rows = load_rows() if rows is None else rows
    a = res[(res["mode"] == "agg")].dropna(subset=["ttft_s", "tpot_s"])
    stated = rows.set_index("id").loc[a["id"]]
    lay = np.array([layout(r) for r in stated.itertuples()], float).reshape(-1, 3)
    x = pd.DataFrame({"concurrency": a["concurrency"], "isl": a["isl"], "osl": a["osl"], "tp": lay[:, 0],
                      "attention_dp": lay[:, 1], "ep": lay[:, 2]}, index=a.index).astype(float).pipe(np.log2)
    x["moe"] = (a["moe"] == "moe").astype(float)
    x = x.join(pd.get_dummies(a["system"], dtype=float))  # one level per GPU (the intercept among them)
    out = []
    for fw, g in a.groupby("backend"):
        row = {"backend": fw, "rows": len(g), "features": x.shape[1]}
        for m in ("ttft", "tpot"):
            y = np.log(g[f"measured_{m}_s"] / g[f"{m}_s"]).to_numpy()
            coef, *_ = np.linalg.lstsq(x.loc[g.index].to_numpy(), y, rcond=None)
            row[f"{m}_median_abs_log_err"] = float(np.median(np.abs(y)))
            row[f"{m}_after_linear_correction"] = float(np.median(np.abs(y - x.loc[g.index].to_numpy() @ coef)))
        out.append(row)
    return pd.DataFrame(out).set_index("backend")
