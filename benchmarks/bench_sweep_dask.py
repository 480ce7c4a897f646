"""A sweep larger than memory: 100 million points of predict.inference through dask in
blocks, streamed to netCDF, with the peak resident memory of the process.

    .venv/bin/python benchmarks/bench_sweep_dask.py [--points 1e8] [--budget 1e9] [--out /tmp/sweep.nc]
"""
from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from workbench import predict, sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=float, default=1e8)
    ap.add_argument("--budget", type=float, default=1e9, help="memory budget in bytes")
    ap.add_argument("--out", default="/tmp/workbench_sweep_100m.nc")
    args = ap.parse_args()
    n_batch, n_gen = 1000, 100
    n_prompt = max(int(args.points / (n_batch * n_gen)), 1)
    g = sweep.grid(batch=np.arange(1, n_batch + 1), prompt=np.linspace(128, 131072, n_prompt).round(),
                   generate=np.linspace(16, 8192, n_gen).round())
    n = n_batch * n_prompt * n_gen
    t0 = time.perf_counter()
    ds = sweep.evaluate(predict.inference, g, fixed=dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8,
                                                          weights="fp8", kv="fp8"),
                        variables=["ttft_s", "tpot_s", "output_tokens_per_s_per_device", "fits"],
                        memory_budget_bytes=args.budget, out=args.out)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size_gb = os.path.getsize(args.out) / 1e9
    print(f"{n:,} points in {seconds:.1f} s = {n / seconds:,.0f} points/s (compute + write), "
          f"peak RSS {peak_mb:,.0f} MB, budget {args.budget / 1e9:.1f} GB, {args.out} {size_gb:.2f} GB")
    print(f"check: tpot_s at batch 1, prompt {float(ds.prompt[0]):.0f}, generate {float(ds.generate[0]):.0f}:"
          f" {float(ds.tpot_s[0, 0, 0]) * 1e3:.2f} ms")
    ds.close()


if __name__ == "__main__":
    main()
