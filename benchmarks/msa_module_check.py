"""MiniMax-M3's fitted sparse-attention-block (MSA) surfaces against the measured module tables.

aiconfigurator-core times a MiniMax-M3 sparse layer's whole attention block per GPU,
framework and phase (msa_{generation,context}_module_perf: Q, K, V and output projections,
the indexer's projections, block scoring and top-k, GQA attention over the selected blocks).
This prints, per GPU and framework, for each table: its rows, the median and p90 of roof /
measured (the analytical roofline's efficiency, msa_work.py), and the median signed, median
absolute and p90 absolute error of the block timed by the committed surface
(primitives/msa.py: fitted_msa; in-sample, the table's own launch path: no CUDA-graph
saving; the held-out scores are in workbench/specs/kernels/<gpu>-<framework>.json; "no
surface" where the rows are not fitted, kernel_features.MSA_UNFIT). Then the check that a row
times the block of its heads: measured time at 64 heads on the GPU over that at 8, against
the roofline's ratio, over the shapes timed at both (SGLang: TP 1 against TP 8). Nothing is
fitted here.

    .venv/bin/python benchmarks/msa_module_check.py [h200_sxm ...]   # needs the silicon extra
"""
from __future__ import annotations

import sys

import numpy as np

from workbench.calibrate import aiconfigurator
from workbench.calibrate.kernel_features import msa_features
from workbench.primitives.msa import fitted_msa, msa_dims
from workbench.specs import load_model

from _module_check import block_errors, newest_tables, shape_ratio, summary

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "l40s", "rtx_pro_6000_server")
DIMS = msa_dims(load_model("minimax_m3"))


def _block(hw, spec, rows, phase):
    """(roof / measured, fitted / measured - 1) of the block rows of one table."""
    def fitted(r, math, w_bytes, kv_bytes):
        return fitted_msa(hw=hw, phase=phase, batch=r.batch.values, new=r.seq_len.values, prefix=r.context.values,
                          heads=r.n_heads.values, dims=DIMS, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)
    return block_errors(rows, spec, msa_features, lambda dtype, kv: f"{phase}/{dtype}/{kv}", fitted)


def _heads_check(spec, rows, phase) -> str:
    """Median of (measured 64 heads / 8 heads) against the roofline's, over the shapes timed
    at both in the table's first format."""
    dtype, kv = rows.dtype.iloc[0], rows.kv_dtype.iloc[0]
    r = rows[(rows.dtype == dtype) & (rows.kv_dtype == kv)]
    ratios = shape_ratio(r[r.n_heads == 8], r[r.n_heads == 64], spec, msa_features, lambda _: f"{phase}/{dtype}/{kv}")
    if ratios is None:
        return ""
    return f"; 64/8 heads measured {ratios[0]:.2f}x, roofline {ratios[1]:.2f}x"


def main(gpus=GPUS) -> None:
    for hw_name, spec, fw, hw, stem, rows in newest_tables(gpus, aiconfigurator.MSA_TABLES):
        phase = "decode" if "generation" in stem else "prefill"
        eff, err = _block(hw, spec, rows, phase)
        print(f"{hw_name:12s} {fw:7s} {phase:7s} {len(rows):6d} rows: roofline eff median {np.median(eff):.2f} "
              f"p90 {np.quantile(eff, 0.9):.2f}; surface {summary(err)}{_heads_check(spec, rows, phase)}")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or GPUS)
