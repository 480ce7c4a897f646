"""Speed and memory of predict.inference on a wafer (Llama 3.1 70B on CS-3 systems):
- a fixed grid side: one vectorized call over batch x prompt x generate x devices;
- the grid search (pe_grid=None: every integer side per point, pipelined prefill chunk
  choice and decode micro-batching included): a smaller grid;
- scalar calls with the service rules: devices="min", batch="max", generate="max".

    .venv/bin/python benchmarks/bench_wafer.py [--points 1000000] [--search-points 4000] [--loop 30]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from workbench import predict
from workbench.backends import as_numbers
from workbench.workloads.wafer_inference import grid_candidates

from _report import best_time, summary

KW = dict(hardware="cs3", model="llama_3_1_70b", weights="fp16", kv="fp16")


def axes(points: int) -> dict:
    side = max(round((points / 4) ** (1 / 3)), 2)
    return dict(batch=np.unique(np.geomspace(1, 512, side).round()).tolist(),
                prompt=np.linspace(128, 32768, side).round().tolist(),
                generate=np.linspace(16, 4096, side).round().tolist(), devices=[4, 6, 8, 16])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--search-points", type=int, default=4_000)
    ap.add_argument("--loop", type=int, default=30)
    args = ap.parse_args()
    predict.inference(devices=4, **KW)  # warm caches

    grid = axes(args.points)
    n = int(np.prod([len(v) for v in grid.values()]))
    ds, vec_s = best_time(lambda: predict.inference(pe_grid=300, **grid, **KW), repeat=2)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.inference(pe_grid=300, **{k: int(rng.choice(v)) for k, v in grid.items()}, **KW)
    summary(n=n, vec_s=vec_s, loop_calls=args.loop, loop_s=time.perf_counter() - t0, ds=ds,
            extra=" (pe_grid fixed at 300)")

    search = axes(args.search_points)
    m = int(np.prod([len(v) for v in search.values()]))
    ds, s = best_time(lambda: predict.inference(**search, **KW), repeat=1)
    sides = len(grid_candidates(as_numbers(KW["hardware"])))
    print(f"grid search: {m:,} points x {sides} grid sides in {s:.2f} s = {m / s:,.0f} points/s")

    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.inference(devices="min", batch="max", generate="max", prompt=int(rng.choice(grid["prompt"])), **KW)
    s = (time.perf_counter() - t0) / args.loop
    print(f"scalar devices='min', batch='max', generate='max': {s * 1e3:.0f} ms per call")


if __name__ == "__main__":
    main()
