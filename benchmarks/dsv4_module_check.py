"""DeepSeek-V4's fitted attention-block and mHC surfaces against the measured module tables.

aiconfigurator-core times a DeepSeek-V4 layer's whole attention block per GPU, framework,
phase and compress ratio (dsv4_{csa,hca}_{generation,context}_module_perf: projections,
compressor, the CSA layers' indexer, attention over the window and the compressed entries,
the grouped output projection) and its hyper-connections (mhc_module_perf: pre and post at
both sites of a layer). This prints, per GPU and framework, for each table: its rows, the
median and p90 of roof / measured (the analytical roofline's efficiency, dsv4_work.py),
and the median signed, median absolute and p90 absolute error of the block timed by the
committed surface (primitives/dsv4.py: fitted_dsv4, fitted_mhc; in-sample, the table's own
launch path: no CUDA-graph saving; the held-out scores are in
workbench/specs/kernels/<gpu>-<framework>.json). Then the check that a row times the
block of its heads: at equal heads on the GPU the DeepSeek-V4-Flash (TP 1) and -Pro (TP 2)
rows differ as their rooflines do (measured Pro / Flash against roofline Pro / Flash).
Nothing is fitted here.

    .venv/bin/python benchmarks/dsv4_module_check.py [h200_sxm ...]   # needs the silicon extra
"""
from __future__ import annotations

import sys

import numpy as np

from workbench.calibrate import aiconfigurator
from workbench.calibrate.kernel_features import dsv4_features
from workbench.primitives.dsv4 import dsv4_row_dims, fitted_dsv4, fitted_mhc
from workbench.primitives.dsv4_work import mhc_roofline

from _module_check import block_errors, newest_tables, shape_ratio, summary

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server")
MHC = "mhc_module_perf"


def _block(hw, spec, rows, phase, ratio):
    """(roof / measured, fitted / measured - 1) of the block rows of one table."""
    kind = "csa" if ratio == 4 else "hca"

    def fitted(r, math, w_bytes, kv_bytes):
        return fitted_dsv4(hw=hw, phase=phase, ratio=ratio, batch=r.batch.values, new=r.seq_len.values,
                           prefix=r.context.values, heads=r.n_heads.values, dims=dsv4_row_dims(r), math=math,
                           w_bytes=w_bytes, kv_bytes=kv_bytes)
    return block_errors(rows, spec, dsv4_features, lambda dtype, kv: f"{phase}/{kind}/{dtype}/{kv}", fitted)


def _tp_check(spec, rows, phase, ratio) -> str:
    """Median of (measured Pro / Flash) / (roofline Pro / Flash) over the shapes both models
    were timed at with 64 heads on the GPU (Flash TP 1, Pro TP 2)."""
    r = rows[(rows.n_heads == 64) & (rows.dtype == "fp8_block") & (rows.kv_dtype == "fp8")]
    kind = "csa" if ratio == 4 else "hca"
    ratios = shape_ratio(r[r.k == 4096], r[r.k == 7168], spec, dsv4_features,
                         lambda fl: f"{phase}/{kind}/fp8_block/{fl.kv_dtype.iloc[0]}")
    if ratios is None:
        return ""
    return f"; 64 heads Pro/Flash measured {ratios[0]:.2f}x, roofline {ratios[1]:.2f}x"


def _mhc(hw_name, spec, fw, hw, rows) -> None:
    """Print the roofline efficiency and the surface's error of each hyper-connection op."""
    for op, r in rows.groupby(np.where(rows.op.str.contains("post"), "post", "pre")):
        roof, _ = mhc_roofline(tokens=r.m.values, hidden=r.k.values, hc_mult=r.hc_mult.values, op=op,
                               peak=spec.peak("bf16"), bandwidth=spec.hbm.bandwidth_bytes_per_s)
        eff = roof / r.time_s.to_numpy()
        out = fitted_mhc(hw=hw, tokens=r.m.values, hidden=r.k.values, hc_mult=r.hc_mult.values)
        err = np.full(len(r), np.nan) if out is None else out[f"{op}_s"] / r.time_s.to_numpy() - 1.0
        print(f"{hw_name:12s} {fw:7s} mhc {op:4s}    {len(r):6d} rows: roofline eff median "
              f"{np.median(eff):.2f} p90 {np.quantile(eff, 0.9):.2f}; surface {summary(err)}")


def main(gpus=GPUS) -> None:
    for hw_name, spec, fw, hw, stem, rows in newest_tables(gpus, aiconfigurator.DSV4_TABLES + (MHC,)):
        if stem == MHC:
            _mhc(hw_name, spec, fw, hw, rows)
            continue
        phase = "decode" if "generation" in stem else "prefill"
        ratio = 4 if "_csa_" in stem else 128
        eff, err = _block(hw, spec, rows, phase, ratio)
        print(f"{hw_name:12s} {fw:7s} {phase:7s} {'csa' if ratio == 4 else 'hca'} {len(rows):6d} rows: "
              f"roofline eff median {np.median(eff):.2f} p90 {np.quantile(eff, 0.9):.2f}; surface "
              f"{summary(err)}{_tp_check(spec, rows, phase, ratio)}")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or GPUS)
