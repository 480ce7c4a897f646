"""Speed and memory of the co-design analyses (issue 19): the elasticities of a
100,000-point inference sweep to six hardware knobs (analysis.sensitivity: one
vectorized call per knob, each over two knob values), and the HBM bandwidth a TPOT
target needs at every point of the same sweep (analysis.requirement: one call per
bisection step over the whole grid).

    .venv/bin/python benchmarks/bench_codesign.py [--points 100000] [--steps N]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from workbench import analysis, predict

KNOBS = ["hbm_bandwidth_bytes_per_s", "peak_flops_per_s_fp8", "hbm_capacity_bytes", "scale_up_bandwidth_bytes_per_s",
         "kernel_launch_s", "price_usd_per_hour"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=None, help="bisection steps of the requirement (default: to 1e-4)")
    args = ap.parse_args()
    side = round(args.points ** (1 / 3))
    batch = np.unique(np.geomspace(1, 512, side).round()).tolist()
    prompt = np.linspace(128, 32768, side).round().tolist()
    generate = np.linspace(16, 4096, max(args.points // (len(batch) * len(prompt)), 1)).round().tolist()
    call = dict(hardware="h100_sxm", model="llama_3_1_70b", devices=8, tp=8, weights="fp8", kv="fp8",
                batch=batch, prompt=prompt, generate=generate)
    n = len(call["batch"]) * len(call["prompt"]) * len(call["generate"])
    predict.inference(**{**call, "batch": 8, "prompt": 128, "generate": 16})  # warm caches

    t0 = time.perf_counter()
    e = analysis.sensitivity(predict.inference, knobs=KNOBS, **call)
    sens_s = time.perf_counter() - t0
    assert e.tpot_s.size == n * len(KNOBS)
    t0 = time.perf_counter()
    r = analysis.requirement(predict.inference, metric="tpot_s", target=0.02, knob="hbm_bandwidth_bytes_per_s",
                             steps=args.steps, **call)
    req_s = time.perf_counter() - t0
    met = int(np.isfinite(r.required).sum())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"sensitivity: {n:,} points x {len(KNOBS)} knobs in {sens_s:.2f} s = {n * len(KNOBS) / sens_s:,.0f} "
          "elasticity points/s (every metric)")
    print(f"requirement: {n:,} points, {args.steps or 'default'} bisection steps, in {req_s:.2f} s = {n / req_s:,.0f} points/s; "
          f"{met:,} points reachable")
    print(f"peak RSS {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
