"""Speed and memory of predict.training: one vectorized call over a grid of about a million
layouts (TP x PP x DP x micro-batch x sequence length x global batch) against a loop of
scalar calls.

    .venv/bin/python benchmarks/bench_training.py [--loop 100]

Prints points per second for both and the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from workbench import predict

from _report import best_time, summary

GRID = dict(tp=[1, 2, 4, 8], pp=[1, 2, 4, 8, 16], dp=[1, 2, 4, 8, 16, 32, 64, 128],
            micro_batch=[1, 2, 4, 8], seq_len=[2048, 4096, 8192, 16384, 32768, 65536, 131072],
            global_batch=np.unique(np.geomspace(256, 65536, 260).round()).tolist())
FIXED = dict(hardware="h100_sxm", model="llama_3_70b", zero=1, recompute="selective", virtual_stages=2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop", type=int, default=100, help="scalar calls to time")
    args = ap.parse_args()
    n = int(np.prod([len(v) for v in GRID.values()]))
    predict.training(**FIXED, tp=8, pp=4, dp=8)  # warm caches
    ds, vec_s = best_time(lambda: predict.training(**FIXED, **GRID))
    assert ds.step_time_s.size == n
    feasible = float(ds.fits.mean())

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.training(**FIXED, **{k: rng.choice(v).item() for k, v in GRID.items()})
    loop_s = time.perf_counter() - t0

    summary(n=n, vec_s=vec_s, loop_calls=args.loop, loop_s=loop_s, ds=ds, what="layouts",
            extra=f" ({feasible:.0%} fit in memory)")


if __name__ == "__main__":
    main()
