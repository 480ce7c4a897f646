"""Timing helpers shared by the benchmarks: best-of-n wall time and the summary lines."""
from __future__ import annotations

import resource
import time


def best_time(fn, repeat: int = 3):
    """(result, seconds) of the fastest of `repeat` calls: the first touch of fresh memory is noisy."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def summary(*, n, vec_s, loop_calls, loop_s, ds, what="points", extra="") -> None:
    """Print vectorized and scalar-loop rates, the speed-up, peak RSS and the dataset size."""
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"vectorized: {n:,} {what} in {vec_s:.2f} s = {n / vec_s:,.0f} points/s{extra}")
    print(f"scalar loop: {loop_calls} calls in {loop_s:.2f} s = {loop_calls / loop_s:,.1f} points/s")
    print(f"speed-up: {(n / vec_s) / (loop_calls / loop_s):,.0f}x; peak RSS {peak_mb:,.0f} MB; "
          f"dataset {ds.nbytes / 1e6:,.0f} MB with {len(ds.data_vars)} variables")
