"""Timing of device work: warm-up, repetitions, CUDA events on a GPU, perf_counter with
synchronize elsewhere, and the median with its spread.

A repetition runs the work `inner` times back to back and reports the time per run, so a
kernel shorter than the timer's resolution (a launch, a tiny copy) is still measured.
"""
from __future__ import annotations

import time

import numpy as np


def synchronize(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_fn(torch, fn, *, device: str, warmup: int = 3, reps: int = 10, inner: int = 1) -> np.ndarray:
    """Seconds per call of `fn()` for each of `reps` repetitions (after `warmup` calls)."""
    for _ in range(warmup):
        fn()
    synchronize(torch, device)
    out = np.empty(reps)
    if device.startswith("cuda"):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            for _ in range(inner):
                fn()
            ends[i].record()
        torch.cuda.synchronize(device)
        for i in range(reps):
            out[i] = starts[i].elapsed_time(ends[i]) * 1e-3 / inner  # elapsed_time is in ms
        return out
    for i in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        synchronize(torch, device)
        out[i] = (time.perf_counter() - t0) / inner
    return out


def summary(samples) -> dict:
    """Median, quartiles and minimum of a sample of times, in the schema's names."""
    s = np.asarray(samples, dtype=float)
    p25, med, p75 = np.percentile(s, [25, 50, 75])
    return {"time_s": float(med), "time_p25_s": float(p25), "time_p75_s": float(p75),
            "time_min_s": float(s.min()), "n_reps": float(s.size)}


def inner_for(estimate_s: float, target_s: float = 2e-4, cap: int = 1000) -> int:
    """Back-to-back runs per repetition so that one repetition lasts about `target_s`."""
    return int(np.clip(np.ceil(target_s / max(estimate_s, 1e-9)), 1, cap))


def measure(torch, fn, *, device: str, warmup: int = 3, reps: int = 10, target_s: float = 2e-4) -> dict:
    """Warm up, estimate one call, pick back-to-back runs per repetition, time, summarize."""
    for _ in range(warmup):
        fn()
    synchronize(torch, device)
    t0 = time.perf_counter()
    fn()
    synchronize(torch, device)
    inner = inner_for(time.perf_counter() - t0, target_s)
    return summary(time_fn(torch, fn, device=device, warmup=1, reps=reps, inner=inner))
