"""What the module-table checks share (dsa_module_check.py, dsv4_module_check.py,
msa_module_check.py): the newest table of each GPU, framework and stem, the error summary
line, the roofline efficiency and fitted error of a table's block rows, and the ratio of two
sets of rows timed at the same shapes, measured against the roofline's."""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.backends import numbers
from workbench.calibrate import aiconfigurator
from workbench.specs import load_hardware

# The tables' GEMM types: (math dtype, weight bytes) of the layer they time.
MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}


def newest_tables(gpus, stems):
    """(hardware name, its spec, framework, numbers, stem, imported rows) of the newest
    collection of each table `stems` names, per GPU of `gpus` (the package's names) and
    framework with fitted tables; the numbers without the CUDA-graph saving (the tables'
    own launch path)."""
    tables = aiconfigurator.available()
    for gpu in gpus:
        hw_name = aiconfigurator.HARDWARE.get(gpu, gpu)
        spec = load_hardware(hw_name)
        for fw in aiconfigurator.FRAMEWORKS:
            try:
                hw = dataclasses.replace(numbers(hw_name, framework=fw), graph_saving_s=0.0)
            except Exception:  # noqa: BLE001  (no fitted tables for this framework)
                continue
            for stem in stems:
                path, version = aiconfigurator.newest_file(gpu, fw, stem, tables)
                if path is None:
                    continue
                yield hw_name, spec, fw, hw, stem, aiconfigurator._read(path, hw_name, fw, version,
                                                                       aiconfigurator.data_root())


def summary(err, median: str = "err median", abs_median: str = "|err| median") -> str:
    """'<median> signed, <abs_median> absolute, p90 absolute' of the finite relative errors
    `err` (the labels as given), or 'no surface' where none is finite."""
    err = np.asarray(err)[np.isfinite(err)]
    if not len(err):
        return "no surface"
    return (f"{median} {np.median(err):+.1%}, {abs_median} {np.median(np.abs(err)):.1%}, "
            f"p90 {np.quantile(np.abs(err), 0.9):.1%}")


def block_errors(rows, spec, features, variant, fitted):
    """(roof / measured, fitted / measured - 1) of the block rows of one table, per (dtype,
    kv_dtype) group of a GEMM type in MATH: the roofline `features(group, spec,
    variant(dtype, kv_dtype))` gives, and the time_s of `fitted(group, math, w_bytes,
    kv_bytes)` (NaN where it is None)."""
    eff, err = [], []
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        if dtype not in MATH:
            continue
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        roof, _ = features(r, spec, variant(dtype, kv))
        eff.append(roof / r.time_s.to_numpy())
        out = fitted(r, math, w_bytes, kv_bytes)
        err.append(np.full(len(r), np.nan) if out is None else out["time_s"] / r.time_s.to_numpy() - 1.0)
    return np.concatenate(eff or [[]]), np.concatenate(err or [[]])


def shape_ratio(lo, hi, spec, features, variant):
    """(median measured hi / lo, median roofline hi / lo) over the shapes (batch, seq_len,
    context) both sets of rows were timed at, the roofline `features(rows, spec,
    variant(lo))` gives (lo at the shared shapes); None where they share none."""
    key = ["batch", "seq_len", "context"]
    # one row per shape on each side (a table may time a shape with several kernel sources)
    lo, hi = lo.drop_duplicates(key).set_index(key), hi.drop_duplicates(key).set_index(key)
    both = lo.index.intersection(hi.index)
    if not len(both):
        return None
    lo, hi = lo.loc[both].reset_index(), hi.loc[both].reset_index()
    v = variant(lo)
    measured = hi.time_s.to_numpy() / lo.time_s.to_numpy()
    roof = features(hi, spec, v)[0] / features(lo, spec, v)[0]
    return np.median(measured), np.median(roof)
