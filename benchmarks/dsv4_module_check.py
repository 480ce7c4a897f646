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

import dataclasses
import sys

import numpy as np

from workbench.backends import numbers
from workbench.calibrate import aiconfigurator
from workbench.calibrate.kernel_features import dsv4_features
from workbench.primitives.dsv4 import fitted_dsv4, fitted_mhc
from workbench.primitives.dsv4_work import mhc_roofline
from workbench.specs import load_hardware

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server")
MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}


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


def _block(hw, spec, rows, phase, ratio):
    """(roof / measured, fitted / measured - 1) of the block rows of one table."""
    eff, err = [], []
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        if dtype not in MATH:
            continue
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        roof, _ = dsv4_features(r, spec, f"{phase}/{'csa' if ratio == 4 else 'hca'}/{dtype}/{kv}")
        eff.append(roof / r.time_s.to_numpy())
        dims = dict(hidden=r.k.values, n_heads=(r.n_heads * r.tp).values, q_rank=r.q_lora_rank.values,
                    head_dim=r.head_dim.values, o_groups=r.o_groups.values, o_rank=r.o_lora_rank.values,
                    index_heads=r.index_heads.values, index_dim=r.index_head_dim.values, topk=r.top_k.values,
                    window=r.window.values)
        out = fitted_dsv4(hw=hw, phase=phase, ratio=ratio, batch=r.batch.values, new=r.seq_len.values,
                          prefix=r.context.values, heads=r.n_heads.values, dims=dims, math=math, w_bytes=w_bytes,
                          kv_bytes=kv_bytes)
        err.append(np.full(len(r), np.nan) if out is None else out["time_s"] / r.time_s.to_numpy() - 1.0)
    return np.concatenate(eff or [[]]), np.concatenate(err or [[]])


def _tp_check(spec, rows, phase, ratio) -> str:
    """Median of (measured Pro / Flash) / (roofline Pro / Flash) over the shapes both models
    were timed at with 64 heads on the GPU (Flash TP 1, Pro TP 2)."""
    r = rows[(rows.n_heads == 64) & (rows.dtype == "fp8_block")]
    key = ["batch", "seq_len", "context"]
    fl, pro = r[r.k == 4096].set_index(key), r[r.k == 7168].set_index(key)
    both = fl.index.intersection(pro.index)
    if not len(both):
        return ""
    fl, pro = fl.loc[both].reset_index(), pro.loc[both].reset_index()
    variant = f"{phase}/{'csa' if ratio == 4 else 'hca'}/fp8_block/{fl.kv_dtype.iloc[0]}"
    measured = pro.time_s.to_numpy() / fl.time_s.to_numpy()
    roof = dsv4_features(pro, spec, variant)[0] / dsv4_features(fl, spec, variant)[0]
    return f"; 64 heads Pro/Flash measured {np.median(measured):.2f}x, roofline {np.median(roof):.2f}x"


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
            for stem in aiconfigurator.DSV4_TABLES:
                path, version = _newest(tables, gpu, fw, stem)
                if path is None:
                    continue
                rows = aiconfigurator._read(path, hw_name, fw, version, aiconfigurator.data_root())
                phase = "decode" if "generation" in stem else "prefill"
                ratio = 4 if "_csa_" in stem else 128
                eff, err = _block(hw, spec, rows, phase, ratio)
                print(f"{hw_name:12s} {fw:7s} {phase:7s} {'csa' if ratio == 4 else 'hca'} {len(rows):6d} rows: "
                      f"roofline eff median {np.median(eff):.2f} p90 {np.quantile(eff, 0.9):.2f}; surface "
                      f"{_summary(err)}{_tp_check(spec, rows, phase, ratio)}")
            path, version = _newest(tables, gpu, fw, "mhc_module_perf")
            if path is None:
                continue
            rows = aiconfigurator._read(path, hw_name, fw, version, aiconfigurator.data_root())
            for op, r in rows.groupby(np.where(rows.op.str.contains("post"), "post", "pre")):
                roof, _ = mhc_roofline(tokens=r.m.values, hidden=r.k.values, hc_mult=r.hc_mult.values, op=op,
                                       peak=spec.peak("bf16"), bandwidth=spec.hbm.bandwidth_bytes_per_s)
                eff = roof / r.time_s.to_numpy()
                out = fitted_mhc(hw=hw, tokens=r.m.values, hidden=r.k.values, hc_mult=r.hc_mult.values)
                err = np.full(len(r), np.nan) if out is None else out[f"{op}_s"] / r.time_s.to_numpy() - 1.0
                print(f"{hw_name:12s} {fw:7s} mhc {op:4s}    {len(r):6d} rows: roofline eff median "
                      f"{np.median(eff):.2f} p90 {np.quantile(eff, 0.9):.2f}; surface {_summary(err)}")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or GPUS)
