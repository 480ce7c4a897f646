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

import dataclasses
import sys

import numpy as np

from workbench.backends import numbers
from workbench.calibrate import aiconfigurator
from workbench.calibrate.kernel_features import msa_features
from workbench.primitives.msa import fitted_msa, msa_dims
from workbench.specs import load_hardware, load_model

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "l40s", "rtx_pro_6000_server")
MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}
DIMS = msa_dims(load_model("minimax_m3"))


def _newest(tables, gpu, fw, stem):
    t = tables[(tables.gpu == gpu) & (tables.framework == fw) & tables.file.str.endswith(f"/{stem}.parquet")]
    if not len(t):
        return None, None
    v = max(t.version, key=aiconfigurator._version_key)
    return aiconfigurator.data_root().parents[1] / t[t.version == v].iloc[0].file, v


def _summary(err) -> str:
    err = np.asarray(err)[np.isfinite(err)]
    if not len(err):
        return "no surface"
    return (f"err median {np.median(err):+.1%}, |err| median {np.median(np.abs(err)):.1%}, "
            f"p90 {np.quantile(np.abs(err), 0.9):.1%}")


def _block(hw, spec, rows, phase):
    """(roof / measured, fitted / measured - 1) of the block rows of one table."""
    eff, err = [], []
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        if dtype not in MATH:
            continue
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        roof, _ = msa_features(r, spec, f"{phase}/{dtype}/{kv}")
        eff.append(roof / r.time_s.to_numpy())
        out = fitted_msa(hw=hw, phase=phase, batch=r.batch.values, new=r.seq_len.values, prefix=r.context.values,
                         heads=r.n_heads.values, dims=DIMS, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)
        err.append(np.full(len(r), np.nan) if out is None else out["time_s"] / r.time_s.to_numpy() - 1.0)
    return np.concatenate(eff or [[]]), np.concatenate(err or [[]])


def _heads_check(spec, rows, phase) -> str:
    """Median of (measured 64 heads / 8 heads) against the roofline's, over the shapes timed
    at both in the table's first format."""
    dtype, kv = rows.dtype.iloc[0], rows.kv_dtype.iloc[0]
    r = rows[(rows.dtype == dtype) & (rows.kv_dtype == kv)]
    key = ["batch", "seq_len", "context"]
    lo, hi = r[r.n_heads == 8].set_index(key), r[r.n_heads == 64].set_index(key)
    both = lo.index.intersection(hi.index)
    if not len(both):
        return ""
    lo, hi = lo.loc[both].reset_index(), hi.loc[both].reset_index()
    variant = f"{phase}/{dtype}/{kv}"
    measured = hi.time_s.to_numpy() / lo.time_s.to_numpy()
    roof = msa_features(hi, spec, variant)[0] / msa_features(lo, spec, variant)[0]
    return f"; 64/8 heads measured {np.median(measured):.2f}x, roofline {np.median(roof):.2f}x"


def main(gpus=GPUS) -> None:
    tables = aiconfigurator.available()
    for gpu in gpus:
        hw_name = aiconfigurator.HARDWARE.get(gpu, gpu)
        spec = load_hardware(hw_name)
        for fw in aiconfigurator.FRAMEWORKS:
            try:
                hw = dataclasses.replace(numbers(hw_name, framework=fw), graph_saving_s=0.0)
            except Exception:  # noqa: BLE001  (no fitted tables for this framework)
                continue
            for stem in aiconfigurator.MSA_TABLES:
                path, version = _newest(tables, gpu, fw, stem)
                if path is None:
                    continue
                rows = aiconfigurator._read(path, hw_name, fw, version, aiconfigurator.data_root())
                phase = "decode" if "generation" in stem else "prefill"
                eff, err = _block(hw, spec, rows, phase)
                print(f"{hw_name:12s} {fw:7s} {phase:7s} {len(rows):6d} rows: roofline eff median {np.median(eff):.2f} "
                      f"p90 {np.quantile(eff, 0.9):.2f}; surface {_summary(err)}{_heads_check(spec, rows, phase)}")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or GPUS)
