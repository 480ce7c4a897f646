"""Re-score end-to-end GPU inference with and without the measured kernel tables.

    .venv/bin/python benchmarks/rescore_kernel_tables.py

1. The static-batch inference rows of reference/measurements.csv (reference_points.yaml,
   kind inference on GPUs): predicted with framework="none" (the analytical efficiencies)
   and with each GPU's default framework (its kernel tables).
2. The rows of the serving benchmarks (shared reference serving_silicon.csv, copied into
   workbench/calibrate/reference/ only as far as the tests use it; here read from the
   path given) that predict.inference can express: aggregated serving, no attention-DP,
   no pipeline, a catalog model, a catalog GPU. They are fixed-concurrency runs; the
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
from workbench.errors import InputError

MODELS = {"meta-llama/Llama-3.1-70B": "llama_3_1_70b", "meta-llama/Llama-3.1-8B-Instruct": "llama_3_1_8b",
          "nvidia/Llama-3.1-8B-Instruct-FP8": "llama_3_1_8b", "Qwen/Qwen3-32B": "qwen3_32b",
          "openai/gpt-oss-120b": "gpt_oss_120b", "Qwen/Qwen3-235B-A22B-FP8": "qwen3_235b_a22b",
          "deepseek-ai/DeepSeek-V3": "deepseek_v3", "deepseek-ai/DeepSeek-R1": "deepseek_r1"}
SYSTEMS = {"h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm", "b200_sxm": "b200", "gb200": "gb200"}
WEIGHTS = {"fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4", "bf16": "bf16", "int4_wo": "int4", "float16": "fp16"}


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
    d = pd.read_csv(path)
    d = d[(d["mode"] == "agg") & (d.attention_dp_size == 1) & (d.pp_size == 1) & d.model_path.isin(list(MODELS))
          & d.system.isin(list(SYSTEMS))]
    out = []
    for r in d.itertuples():
        cfg = dict(hardware=SYSTEMS[r.system], model=MODELS[r.model_path], tp=int(r.tp_size),
                   ep=int(r.moe_ep_size) if r.moe_ep_size == r.moe_ep_size else 1, batch=int(r.concurrency),
                   prompt=int(r.isl), generate=int(r.osl), weights=WEIGHTS.get(r.gemm_quant_mode, "bf16"))
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
    ap.add_argument("--serving", default=str(Path(__file__).resolve().parents[2] / "shared" / "reference"
                                             / "serving_silicon.csv"))
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
