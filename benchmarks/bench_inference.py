"""Speed and memory of predict.inference: one vectorized call over a one-million-point
grid against a loop of scalar calls of the same function.

    .venv/bin/python benchmarks/bench_inference.py [--points 1000000] [--loop 200]

Prints points per second for both and the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from workbench import predict

from _report import best_time, summary


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
    ds, vec_s = best_time(lambda: predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=batch,
                                                    prompt=prompt, generate=generate, weights="fp8", kv="fp8"))
    assert ds.tpot_s.size == n

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8,
                          batch=int(rng.choice(batch)), prompt=int(rng.choice(prompt)),
                          generate=int(rng.choice(generate)), weights="fp8", kv="fp8")
    loop_s = time.perf_counter() - t0

    summary(n=n, vec_s=vec_s, loop_calls=args.loop, loop_s=loop_s, ds=ds)

if __name__ == "__main__":
    main()
