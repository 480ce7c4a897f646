"""Decode speed per user at batch 1: CS-3 against H100 and B200, each at the parallelism
that serves it best, with the term that bounds each (issue: wafer-scale engine model).

    .venv/bin/python benchmarks/wse_vs_gpu_decode.py

GPUs sweep TP in {1, 2, 4, 8} (one HGX node); CS-3 sweeps 1, 2, 4 and 8 systems with the
model's own best PE grid. 16-bit weights and KV everywhere (Cerebras serves 16-bit), plus
GPU FP8 for reference. Prompt 2048, 256 generated tokens.
"""
from __future__ import annotations

import time

import numpy as np

from workbench import predict

MODELS = ["llama_3_1_8b", "llama_3_1_70b"]
COLS = ["output_tokens_per_s_per_user", "tpot_s", "bound", "fits"]


def best(ds, dim):
    """The point along `dim` with the highest per-user speed among those that fit."""
    speed = ds.output_tokens_per_s_per_user.where(ds.fits)
    if not bool(np.isfinite(speed).any()):
        return None
    return ds.isel({dim: int(speed.fillna(-1).argmax(dim))})


def main() -> None:
    t0 = time.perf_counter()
    rows = []
    for model in MODELS:
        for hw, weights in (("h100_sxm", "bf16"), ("b200", "bf16"), ("h100_sxm", "fp8"), ("b200", "fp8")):
            ds = predict.inference(hardware=hw, model=model, tp=[1, 2, 4, 8], batch=1, prompt=2048,
                                   generate=256, weights=weights, kv="bf16")
            b = best(ds, "tp")
            rows.append((model, f"{hw} {weights}", f"TP{int(b.tp)}" if b is not None else "-", b))
        ds = predict.inference(hardware="cs3", model=model, devices=[1, 2, 4, 8], batch=1, prompt=2048,
                               generate=256, weights="fp16", kv="fp16")
        b = best(ds, "devices")
        label = f"{int(b.devices)} CS-3, grid {int(b.pe_grid_decode)}" if b is not None else "-"
        rows.append((model, "cs3 fp16", label, b))
    print(f"{'model':15s} {'hardware':14s} {'layout':22s} {'tok/s/user':>10s} {'TPOT ms':>8s}  bound")
    for model, hw, layout, b in rows:
        if b is None:
            print(f"{model:15s} {hw:14s} {'does not fit':22s}")
            continue
        print(f"{model:15s} {hw:14s} {layout:22s} {float(b.output_tokens_per_s_per_user):10.0f} "
              f"{float(b.tpot_s) * 1e3:8.2f}  {b.bound.item()}")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
