"""Where the time of a phase goes: share per resource and per operation class.

    bottleneck(ds, phase="decode")

Resources are the named parts a workload returns, `{phase}_{resource}_s` for resource
in compute, memory, comm (communication), overhead, io (wafer systems: the transfers
between systems). Each share is that time over the sum of the phase's resource times
present in the dataset, i.e. of the serial upper bound (no overlap); the model's own
estimate sits between the largest term and that sum (DESIGN.md, "Cost primitives").

Operation classes, when the workload returns them, are `{phase}_{class}_s` for class in
matmul, attention, elementwise, comm; they partition the phase's time a second way.

A term that is NaN at a point (a mixed GPU / wafer sweep: GPUs have no `io`, wafers no
`memory`) is absent at that point: its share is NaN and the others sum to 1.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError

RESOURCES = ("compute", "memory", "comm", "overhead", "io")
CLASSES = ("matmul", "attention", "elementwise", "comm")
NONE = "none"  # `dominant` where no term of a point is a finite time with a positive sum


def bottleneck(ds: xr.Dataset, phase: str = "decode") -> xr.Dataset:
    """Share of the phase's time per resource and per operation class.

    Returns a Dataset with, for each resource present, `{resource}_share` (units "1");
    `dominant`, the resource with the largest share (the first in RESOURCES order on a
    tie, "none" where no share is defined); `total_s`, the sum of the resource times.
    When `{phase}_matmul_s`, `{phase}_attention_s` or `{phase}_elementwise_s` exist:
    `{class}_class_share` for each class present (comm included), `dominant_class` and
    `class_total_s`.
    """
    if not isinstance(ds, xr.Dataset):
        raise InputError(f"ds={type(ds).__name__} is not allowed; allowed: an xarray.Dataset")
    phases = _phases(ds)
    if not isinstance(phase, str) or phase not in phases:
        expected = ", ".join(f"{phase}_{r}_s" for r in RESOURCES)
        raise InputError(f"phase={phase!r} is not allowed: the dataset has none of {expected}; allowed: "
                         f"{', '.join(phases) or '(none: no variable is named <phase>_<resource>_s)'}")
    present = [r for r in RESOURCES if f"{phase}_{r}_s" in ds.data_vars]
    out = _shares(ds, phase, present, suffix="_share", dominant="dominant", total="total_s",
                  what="resource")
    classes = [c for c in CLASSES if f"{phase}_{c}_s" in ds.data_vars]
    if set(classes) - {"comm"}:
        out.update(_shares(ds, phase, classes, suffix="_class_share", dominant="dominant_class",
                           total="class_total_s", what="operation class"))
    out.attrs = {**ds.attrs, "phase": phase, "resources": ", ".join(present),
                 "classes": ", ".join(classes) if set(classes) - {"comm"} else ""}
    return out


def _phases(ds: xr.Dataset) -> list[str]:
    found = []
    for name in map(str, ds.data_vars):
        for r in RESOURCES:
            suffix = f"_{r}_s"
            if name.endswith(suffix) and len(name) > len(suffix) and name[: -len(suffix)] not in found:
                found.append(name[: -len(suffix)])
    return found


def _shares(ds: xr.Dataset, phase: str, parts: list[str], *, suffix: str, dominant: str, total: str,
            what: str) -> xr.Dataset:
    times = list(xr.broadcast(*[ds[f"{phase}_{p}_s"] for p in parts]))
    for p, t in zip(parts, times):
        if not np.issubdtype(t.dtype, np.number):
            raise InputError(f"{phase}_{p}_s has dtype {t.dtype}; allowed: a time in seconds (a number)")
    values = np.stack([np.asarray(t.values, dtype=float) for t in times], axis=-1)
    finite = np.isfinite(values)
    any_finite = finite.any(axis=-1)
    sum_s = np.where(any_finite, np.where(finite, values, 0.0).sum(axis=-1), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(finite & (sum_s > 0)[..., None], values / sum_s[..., None], np.nan)
    ranked = np.where(np.isfinite(share), share, -np.inf)
    best = np.argmax(ranked, axis=-1)
    names = np.array(parts, dtype=object)[best]
    names = np.where(np.isfinite(share).any(axis=-1), names, NONE)

    template = times[0]
    out = xr.Dataset(attrs={})
    for i, p in enumerate(parts):
        da = template.copy(data=share[..., i])
        da.attrs = {"units": "1", "long_name": f"{p} share of {phase} time"}
        out[f"{p}{suffix}"] = da
    out[dominant] = template.copy(data=names)
    out[dominant].attrs = {"long_name": f"{what} with the largest share of {phase} time",
                           "allowed": ", ".join(parts + [NONE])}
    out[total] = template.copy(data=sum_s)
    out[total].attrs = {"units": "s", "long_name": f"sum of {phase} {what} times (seconds)"}
    return out
