"""How noisy the measured GEMM tables are: the floor under any smooth fit's error.

    .venv/bin/python benchmarks/gemm_table_noise.py --tables DIR [--hardware b200]

DIR holds the netCDF tables `workbench calibrate import-kernels --source aiconfigurator
--out DIR` writes. Two checks, neither fitted:

1. Non-physical steps: along each (m, n) line of a table, a GEMM with more k does more work
   and moves more bytes, so its time should not fall. The share of neighbouring k where the
   time falls by more than 5% is noise (or a different kernel picked: either way, what a
   surface that is smooth in k cannot follow).
2. The same kernel timed by two harnesses: calibrate/kernel_repeatability.py (every
   framework's bf16 table times torch.nn.functional.linear, cuBLAS, on the same shapes; the
   committed figures: workbench calibrate kernel-repeatability), printed here per GPU.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import xarray as xr

from workbench.calibrate.kernel_repeatability import repeatability

FRAMEWORKS = ("trtllm", "vllm", "sglang")


def gemm_rows(path: Path) -> pd.DataFrame:
    df = xr.open_dataset(path).to_dataframe().reset_index()
    return df[df["kind"] == "gemm"][["dtype", "op", "m", "n", "k", "time_s"]]


def falling_share(g: pd.DataFrame, drop: float = 0.05) -> float:
    """Share of neighbouring-k pairs (same kernel, m, n) whose time falls by more than `drop`."""
    g = g.groupby(["op", "m", "n", "k"], as_index=False).time_s.median().sort_values(["op", "m", "n", "k"])
    ratio = g.time_s / g.groupby(["op", "m", "n"]).time_s.shift(1)  # each time over the one at the next smaller k
    return float((ratio.dropna() < 1.0 - drop).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=Path, required=True)
    ap.add_argument("--hardware", default=None, help="one catalog name (file prefix); default all")
    args = ap.parse_args()
    files = sorted(args.tables.glob(f"{args.hardware or '*'}-*.nc"))
    tables = {}
    for f in files:
        hw, fw = f.stem.rsplit("-", 1)
        if fw in FRAMEWORKS:
            tables[(hw, fw)] = gemm_rows(f)
    print("non-physical steps: share of neighbouring k whose time falls by > 5%")
    for (hw, fw), g in sorted(tables.items()):
        for dtype, gd in g.groupby("dtype"):
            print(f"  {hw:13s} {fw:7s} {dtype:10s} {len(gd):6d} rows  {falling_share(gd):6.1%}")
    print("the same library kernel timed by two harnesses: |ln ratio| median / p90 (floor p90 of one table)")
    rep = repeatability(args.tables)
    for r in rep[rep.hardware.isin({hw for hw, _ in tables})].itertuples():
        print(f"  {r.hardware:13s} {r.kernel_class} {r.variant:9s} {r.frameworks:14s} {r.shapes:6d} shapes  "
              f"{r.median_abs_log_ratio:.3f} / {r.p90_abs_log_ratio:.3f} ({r.floor_p90_abs_err:.1%})")

if __name__ == "__main__":
    main()
