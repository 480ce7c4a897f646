"""Where the time of a phase goes: share per resource and per operation class.

    bottleneck(ds, phase="decode")

Resources are the named parts a workload returns, `{phase}_{resource}_s` for resource
in compute, memory, comm (communication), overhead, io (wafer systems: the transfers
between systems). Each share is that time over the sum of the phase's resource times
present in the dataset, i.e. of the serial upper bound (no overlap); the model's own
estimate sits between the largest term and that sum (DESIGN.md, "Cost primitives").
The resources are a breakdown of the phase only when its work is among them (compute or
memory): a comm, overhead or io time alone is one part of the phase, not the whole of it
(predict.serving's `decode_comm_s` is an operation class), and gives no resource shares.

Operation classes, when the workload returns them, are `{phase}_{class}_s` for class in
matmul, attention, elementwise, comm; they partition the phase's time a second way. Where
the dataset also gives the whole step, `{phase}_iteration_s` (predict.serving), the step's
other parts join them, so that the shares are of the whole step: `draft` (its
`{phase}_draft_s`, speculative decoding's draft passes) and `overhead` (the rest of the
step beyond its kernels: the host's per-iteration and per-sequence overhead).

A term that is NaN at a point (a mixed GPU / wafer sweep: GPUs have no `io`, wafers no
`memory`) is absent at that point: its share is NaN and the others sum to 1. A phase
with neither breakdown is refused.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError

RESOURCES = ("compute", "memory", "comm", "overhead", "io")
CLASSES = ("matmul", "attention", "elementwise", "comm")
WORK = ("compute", "memory")  # a resource breakdown holds the phase's work: one of these at least
KERNELS = ("matmul", "attention", "elementwise")  # a class breakdown holds one of these at least
STEP_PARTS = ("draft", "overhead")  # the parts of `{phase}_iteration_s` beside its kernel classes
NONE = "none"  # `dominant` where no term of a point is a finite time with a positive sum


def bottleneck(ds: xr.Dataset, phase: str = "decode") -> xr.Dataset:
    """Share of the phase's time per resource and per operation class.

    Returns a Dataset with, when the phase's resources are a breakdown (WORK among them),
    for each resource present `{resource}_share` (units "1"); `dominant`, the resource
    with the largest share (the first in RESOURCES order on a tie, "none" where no share
    is defined); `total_s`, the sum of the resource times. When `{phase}_matmul_s`,
    `{phase}_attention_s` or `{phase}_elementwise_s` exist: `{class}_class_share` for each
    class present (comm included, and STEP_PARTS with `{phase}_iteration_s`),
    `dominant_class` and `class_total_s`.
    """
    if not isinstance(ds, xr.Dataset):
        raise InputError(f"ds={type(ds).__name__} is not allowed; allowed: an xarray.Dataset")
    phases = _phases(ds)
    if not isinstance(phase, str) or phase not in phases:
        expected = ", ".join(f"{phase}_{r}_s" for r in WORK + KERNELS)
        raise InputError(f"phase={phase!r} is not allowed: the dataset has none of {expected}; allowed: "
                         f"{', '.join(phases) or '(none: no variable is a phase time <phase>_<part>_s of its work)'}")
    present = [r for r in RESOURCES if f"{phase}_{r}_s" in ds.data_vars]
    classes = [c for c in CLASSES if f"{phase}_{c}_s" in ds.data_vars]
    resources = present if set(present) & set(WORK) else []
    by_class = bool(set(classes) & set(KERNELS))
    out = xr.Dataset()
    if resources:
        out = _shares(phase, {r: _seconds(ds, f"{phase}_{r}_s") for r in resources}, suffix="_share",
                      dominant="dominant", total="total_s", what="resource")
    if by_class:
        times = {c: _seconds(ds, f"{phase}_{c}_s") for c in classes}
        if f"{phase}_iteration_s" in ds.data_vars:
            times.update(_step_rest(ds, phase, times))
        classes = list(times)
        out.update(_shares(phase, times, suffix="_class_share", dominant="dominant_class",
                           total="class_total_s", what="operation class"))
    out.attrs = {**ds.attrs, "phase": phase, "resources": ", ".join(resources),
                 "classes": ", ".join(classes) if by_class else ""}
    return out


def _step_rest(ds: xr.Dataset, phase: str, kernels: dict) -> dict:
    """The step's parts beside its kernel classes: `draft` (when given) and `overhead`,
    the rest of `{phase}_iteration_s` (>= 0: a rounding below the kernels' sum is none)."""
    step = _seconds(ds, f"{phase}_iteration_s")
    rest = {"draft": _seconds(ds, f"{phase}_draft_s")} if f"{phase}_draft_s" in ds.data_vars else {}
    summed = sum(kernels.values()) + sum(rest.values())
    rest["overhead"] = np.maximum(step - summed, 0.0)
    return rest


def _seconds(ds: xr.Dataset, name: str) -> xr.DataArray:
    if not np.issubdtype(ds[name].dtype, np.number):
        raise InputError(f"{name} has dtype {ds[name].dtype}; allowed: a time in seconds (a number)")
    return ds[name].astype(float)


def _phases(ds: xr.Dataset) -> list[str]:
    """The phases with a breakdown: a `{phase}_{part}_s` of their work (WORK or KERNELS)."""
    found = []
    for name in map(str, ds.data_vars):
        for part in WORK + KERNELS:
            suffix = f"_{part}_s"
            if name.endswith(suffix) and len(name) > len(suffix) and name[: -len(suffix)] not in found:
                found.append(name[: -len(suffix)])
    return found


def _shares(phase: str, terms: dict, *, suffix: str, dominant: str, total: str, what: str) -> xr.Dataset:
    parts = list(terms)  # each a time in seconds (_seconds checked the dataset's)
    times = list(xr.broadcast(*terms.values()))
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
