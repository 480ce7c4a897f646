"""Speed of the PE-mesh simulator (workbench/simulate): a 64 x 64 MeshGEMV (4,096 PEs, the K-tree
allreduce) on two tile shapes, and a 32 x 32 Cannon MeshGEMM; wall time, simulated cycles and
simulated cycles per second (and PE-cycles per second: cycles x PEs).

    .venv/bin/python benchmarks/bench_simulate.py [--repeat 3]
"""
from __future__ import annotations

import argparse

from workbench.simulate import run

from _report import best_time

CASES = [("gemv", "mesh", 64, dict(k=64 * 12, n=64 * 80), "Llama 3.1 8B up-projection tiles (12 x 80 per PE)"),
         ("gemv", "mesh", 64, dict(k=64 * 64, n=64 * 64), "64 x 64 tiles"),
         ("gemv", "gpu_style", 64, dict(k=64 * 12, n=64 * 18), "the chain allreduce, QKV tiles (12 x 18)"),
         ("gemm", "mesh", 32, dict(m=32 * 9, k=32 * 9, n=32 * 9), "Cannon, prefill tiles (9 x 9 x 9)")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    run("gemv", "mesh", P=4, k=16, n=16)  # warm imports
    for kernel, mapping, P, shape, what in CASES:
        r, s = best_time(lambda: run(kernel, mapping, P=P, **shape), repeat=args.repeat)
        assert r.correct
        print(f"{kernel} {mapping} {P}x{P} ({what}): {s:.2f} s for {r.cycles:,} cycles = "
              f"{r.cycles / s:,.0f} cycles/s, {r.cycles * P * P / s / 1e6:,.1f} M PE-cycles/s")


if __name__ == "__main__":
    main()
