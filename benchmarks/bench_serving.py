"""Speed of fixed-concurrency serving (predict.serving with concurrency): one call over a
concurrency x prompt x output x tp x ep x attention-DP grid of Qwen3-235B-A22B on H200
against a loop of scalar calls; then the same concurrency x prompt x output grid at one
layout with the MTP head speculating, over draft length x acceptance; then TensorRT-LLM's
attention-DP balancing (its hold by quadrature, workloads/adp_balance.py) over the same grid at
tp = 1 with 2-8 replicas x timeout x batching wait; then its batch waiting (workloads/batch_wait.py,
in closed form) over the same grid at tp = 8 x timeout x token ratio; then the wafer's closed loop
(Llama 3.1 70B on 4 CS-3) over the concurrency x prompt x output grid.

    .venv/bin/python benchmarks/bench_serving.py [--loop 50]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from workbench import predict

from _report import best_time, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop", type=int, default=50, help="scalar calls to time")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # infeasible layouts are NaN points
    grid = dict(concurrency=np.unique(np.geomspace(1, 4096, 25).round()).tolist(),
                prompt=np.linspace(128, 16384, 20).round().tolist(), generate=np.linspace(64, 8192, 10).round().tolist(),
                tp=[1, 2, 4, 8], ep=[1, 2, 4, 8], attention_dp=[1, 2])
    common = dict(hardware="h200_sxm", model="qwen3_235b_a22b", weights="fp8")
    predict.serving(concurrency=8, tp=8, **common)  # warm caches
    ds, vec_s = best_time(lambda: predict.serving(**grid, **common))
    n = ds.tpot_s.size
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.serving(concurrency=int(rng.choice(grid["concurrency"])), prompt=int(rng.choice(grid["prompt"])),
                        generate=int(rng.choice(grid["generate"])), tp=8, ep=8, **common)
    loop_s = time.perf_counter() - t0
    summary(n=n, vec_s=vec_s, loop_calls=args.loop, loop_s=loop_s, ds=ds,
            extra=f" ({float(ds.fits.mean()):.0%} of the layouts fit)")
    # the same grid at tp = ep = 8 with the MTP head speculating: draft length x acceptance
    spec = dict(grid, tp=8, ep=8, attention_dp=1, draft_len=[0, 1, 2, 3, 4], acceptance=[0.5, 0.6, 0.7, 0.8, 0.9])
    ds, spec_s = best_time(lambda: predict.serving(**spec, **common))
    print(f"speculative: {ds.tpot_s.size:,} points in {spec_s:.2f} s ({ds.tpot_s.size / spec_s:,.0f} points/s), "
          f"best_draft_len reported at {int(ds.best_draft_len.notnull().sum()):,} points")
    balance = dict(grid, tp=1, ep=8, attention_dp=[2, 4, 8], adp_timeout_iters=[20, 60], adp_batching_iters=[0, 10])
    ds, adp_s = best_time(lambda: predict.serving(**balance, framework="trtllm", **common))
    print(f"attention-DP balancing: {ds.tpot_s.size:,} points in {adp_s:.2f} s ({ds.tpot_s.size / adp_s:,.0f} "
          "points/s)")
    waiting = dict(grid, tp=8, ep=8, attention_dp=1, batch_wait_timeout_iters=[20, 40],
                   batch_wait_max_tokens_ratio=[0.5, 0.8, 0.9])
    ds, wait_s = best_time(lambda: predict.serving(**waiting, framework="trtllm", **common))
    print(f"batch waiting: {ds.tpot_s.size:,} points in {wait_s:.2f} s ({ds.tpot_s.size / wait_s:,.0f} points/s)")
    wafer = dict(hardware="cs3", model="llama_3_1_70b", weights="fp16", kv="fp16", devices=4,
                 **{k: grid[k] for k in ("concurrency", "prompt", "generate")})
    ds, wafer_s = best_time(lambda: predict.serving(**wafer))
    print(f"cs3 closed loop: {ds.tpot_s.size:,} points in {wafer_s:.2f} s ({ds.tpot_s.size / wafer_s:,.0f} points/s), "
          f"{float(ds.fits.mean()):.0%} fit")


if __name__ == "__main__":
    main()
