"""Speed and memory of predict.inference: one vectorized call over a one-million-point
grid against a loop of scalar calls of the same function.

    .venv/bin/python benchmarks/bench_inference.py [--points 1000000] [--loop 200]

Prints points per second for both and the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from workbench import predict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--loop", type=int, default=200, help="scalar calls to time")
    args = ap.parse_args()
    side = round(args.points ** (1 / 3))
    batch = np.unique(np.geomspace(1, 1024, side).round()).tolist()
    side_b = len(batch)
    prompt = np.linspace(128, 32768, side).round().tolist()
    generate = np.linspace(16, 4096, max(args.points // (side_b * side), 1)).round().tolist()
    n = len(batch) * len(prompt) * len(generate)

    predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=8, weights="fp8")  # warm caches
    vec_s = np.inf
    for _ in range(3):  # best of three: the first touch of fresh memory is noisy
        t0 = time.perf_counter()
        ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=batch,
                               prompt=prompt, generate=generate, weights="fp8", kv="fp8")
        vec_s = min(vec_s, time.perf_counter() - t0)
    assert ds.tpot_s.size == n

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8,
                          batch=int(rng.choice(batch)), prompt=int(rng.choice(prompt)),
                          generate=int(rng.choice(generate)), weights="fp8", kv="fp8")
    loop_s = time.perf_counter() - t0

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"vectorized: {n:,} points in {vec_s:.2f} s = {n / vec_s:,.0f} points/s")
    print(f"scalar loop: {args.loop} calls in {loop_s:.2f} s = {args.loop / loop_s:,.1f} points/s")
    print(f"speed-up: {(n / vec_s) / (args.loop / loop_s):,.0f}x; peak RSS {peak_mb:,.0f} MB; "
          f"dataset {ds.nbytes / 1e6:,.0f} MB with {len(ds.data_vars)} variables")


if __name__ == "__main__":
    main()
