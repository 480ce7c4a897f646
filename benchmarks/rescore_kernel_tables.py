"""Re-score end-to-end GPU inference with and without the measured kernel tables.

    .venv/bin/python benchmarks/rescore_kernel_tables.py

1. The static-batch inference rows of reference/measurements.csv (reference_points.yaml,
   kind inference on GPUs): predicted with framework="none" (the analytical efficiencies)
   and with each GPU's default framework (its kernel tables).
2. The rows of the serving benchmarks (workbench/calibrate/reference/serving_silicon.csv)
   that predict.inference can express: aggregated serving, no attention-DP, no pipeline,
   a catalog model, a catalog GPU (calibrate/serving_rows.config). They are fixed-concurrency runs; the
   static-batch model with batch = concurrency is the closest the current API comes (no
   continuous batching, no prefill in the decode iterations, no framework overhead), so
   the figure is the TPOT gap that the serving model of the next issue must close.

Checks, not knobs: nothing here is fitted.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import predict
from workbench.calibrate import gap
from workbench.calibrate import serving_rows as serving_rows_
from workbench.errors import InputError

def static_rows() -> pd.DataFrame:
    obs = gap.observations()
    obs = obs[(obs.kind == "inference") & (obs.category == "GPU inference")]
    out = []
    for r in obs.itertuples():
        row = {"id": r.id, "hardware": r.hardware}
        for fw in ("none", None):
            cfg = dict(r.config, framework=fw)
            ds = predict.inference(**cfg)
            value = float(ds[r.metric])
            row["default" if fw is None else "none"] = float(gap.speed_error(value, r.value_si, r.metric))
        out.append(row)
    return pd.DataFrame(out)


def serving_rows(path: Path) -> pd.DataFrame:
    d = serving_rows_.load(path)
    d = d[(d["mode"] == "agg") & (d.attention_dp_size == 1) & (d.pp_size == 1)]
    out = []
    for r in d.itertuples():
        cfg, _ = serving_rows_.config(r)  # the serving run as predict.serving would take it
        if cfg is None:
            continue
        cfg = {k: cfg[k] for k in ("hardware", "model", "tp", "ep", "prompt", "generate", "weights")} | \
            {"batch": cfg["concurrency"]}
        row = {"id": r.id, "hardware": cfg["hardware"], "backend": r.backend, "model": cfg["model"],
               "measured_tpot_s": r.silicon_tpot_ms / 1e3}
        try:
            for fw, key in (("none", "none"), (r.backend, "framework")):
                ds = predict.inference(framework=fw, **cfg)
                row[key] = float(ds.tpot_s) / row["measured_tpot_s"] - 1 if bool(ds.fits) else np.nan
        except InputError as e:  # a layout the static model refuses (e.g. ep beyond tp)
            row["skipped"] = str(e)
        out.append(row)
    return pd.DataFrame(out)


def _line(name, err):
    e = np.asarray(err, float)
    e = e[np.isfinite(e)]
    return (f"{name:34s} n={len(e):4d}  median signed {np.median(e):+.1%}  median |err| {np.median(np.abs(e)):.1%}"
            f"  p90 |err| {np.quantile(np.abs(e), 0.9):.1%}") if len(e) else f"{name:34s} n=0"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serving", default=str(serving_rows_.ROWS))
    args = ap.parse_args()
    s = static_rows()
    print("static-batch inference rows of measurements.csv (error = model speed / measured speed - 1)")
    print(_line("analytical efficiencies (none)", s["none"]))
    print(_line("kernel tables (default framework)", s["default"]))
    if Path(args.serving).exists():
        v = serving_rows(Path(args.serving))
        print(f"\nserving benchmarks expressible as static batches ({len(v)} rows; TPOT error = model / measured - 1)")
        print(_line("analytical efficiencies (none)", v["none"]))
        print(_line("kernel tables (run's framework)", v["framework"]))
        for (hw, be), g in v.groupby(["hardware", "backend"]):
            print(_line(f"  {hw} {be}: tables", g["framework"]))


if __name__ == "__main__":
    main()
