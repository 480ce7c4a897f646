"""Sensitivities: the elasticity d log(metric) / d log(knob) of a prediction's outputs to
hardware knobs, at every point of the prediction.

    analysis.sensitivity(predict.inference, knobs=["hbm_bandwidth_bytes_per_s",
                         "peak_flops_per_s_bf16"], hardware="h100_sxm", model="llama_3_1_8b",
                         batch=[1, 64], prompt=[512, 32768])

Each knob is moved by a factor (1 - h) and (1 + h) about its value (the spec's, or the
override the call already gives) on a knob axis of two points, so the whole sweep is one
call per knob; the elasticity is the central difference of the logs,
(log m+ - log m-) / (log k+ - log k-). A count (a knob whose spec field is an integer: SMs,
the scale-up domain, the wafer's program mesh) moves to the nearest integers h apart, at
least 1 either side (one-sided at 1). -1 means the metric (a time) falls in proportion as
the knob rises (the resource binds); 0 means the knob does not matter there.
Knobs are those `workbench list knobs HW` names, and any the call's `hardware_overrides`
sets (a hypothetical unit, e.g. FP4 math on a chip without it); `hardware` must be one name.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..backends import backend_for
from ..errors import InputError, brief, check_range
from ..specs import load_hardware

METRICS = ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s_per_device", "output_tokens_per_s_per_user",
           "memory_per_device_bytes", "step_time_s", "tokens_per_s_per_device", "mfu")


def knob_table(call: dict) -> tuple:
    """(hardware name, knob -> (unit, value), the overrides the call gives, the integer
    knobs), the overrides popped from `call`: one chip per call, since each has its own knob
    values. A hypothetical knob (one the chip has no value for) is a knob when the call's
    overrides set it."""
    hardware = call.get("hardware")
    if not isinstance(hardware, str):
        raise InputError(f"hardware={brief(hardware)} is not allowed; allowed: one hardware name (call once per "
                         "chip: each has its own knob values)")
    spec = load_hardware(hardware)
    given = call.pop("hardware_overrides", None) or {}
    if not isinstance(given, dict):
        raise InputError(f"hardware_overrides={brief(given)} is not allowed; allowed: a mapping of knob -> value")
    table = dict(backend_for(spec).knobs(spec))
    every = backend_for(spec).knobs(spec, every=True)
    table.update({k: (every[k][0], v) for k, v in given.items() if k not in table and k in every})
    return hardware, table, dict(given), integer_knobs()


def integer_knobs() -> set:
    """The knobs that are counts: those that set a spec field declared an int (SMs, the
    scale-up domain, the wafer's program mesh); a fractional value of one is refused."""
    import dataclasses
    from ..backends import _wafer_fields, field_knobs
    from ..specs import HardwareSpec, Link, SystemSpec, WaferSpec
    ints = {f.name for cls in (HardwareSpec, Link, WaferSpec, SystemSpec) for f in dataclasses.fields(cls)
            if f.type in ("int", int)}
    field_of = {**_wafer_fields(), "scale_up_domain_size": "domain_size"}  # the knob -> field renames
    return {k for k in field_knobs() if field_of.get(k, k) in ints}


def integer_ends(base: float, rel_step: float) -> tuple[float, float]:
    """A count's two ends about `base`: the integers rel_step apart, at least 1 either side,
    the lower one no less than 1."""
    step = max(1.0, float(np.round(rel_step * base)))
    return max(base - step, 1.0), base + step


def numeric_outputs(ds) -> list[str]:
    """The outputs of a prediction that are numbers (not fits, bound or reason): the metrics
    an analysis can differentiate or solve for."""
    return [str(v) for v in ds.data_vars if np.issubdtype(ds[v].dtype, np.number)]


def knob_value(knob: str, hardware: str, table: dict, given: dict, purpose: str, counts=()) -> float:
    """The knob's value in the call (its override, else the spec's): one positive number, a
    whole one for a knob among `counts` (integer_knobs)."""
    if not isinstance(knob, str):
        raise InputError(f"knob={brief(knob)} is not allowed; allowed: one knob name of {hardware!r}, e.g. "
                         f"{next(iter(table))!r}")
    if knob not in table:
        raise InputError(f"knob {knob!r} is not a knob of {hardware!r}; allowed: {', '.join(table)} (or a "
                         "hypothetical knob the call sets in hardware_overrides)")
    base = given.get(knob, table[knob][1])
    if np.ndim(base) or not np.isfinite(base) or base <= 0:
        raise InputError(f"knob {knob!r} = {brief(base)} on {hardware!r} is not allowed; allowed: a positive scalar "
                         f"{purpose}")
    if knob in counts and float(base) != np.round(base):
        raise InputError(f"knob {knob!r} = {base:g} on {hardware!r} is not allowed; allowed: an integer (it is "
                         "a count)")
    return base


def sensitivity(fn, *, knobs, rel_step: float = 0.02, metrics=None, **call) -> xr.Dataset:
    """Elasticity of each metric to each knob, at every point of fn(**call): a Dataset with
    the call's dimensions and a `knob` dimension, one variable per metric (those of METRICS
    the prediction returns, or `metrics`). Points where a metric is not a positive number
    at either end (does not fit, NaN) are NaN."""
    check_range("rel_step", rel_step, low=1e-6, high=0.5, allowed="a relative step in (0, 0.5]")
    knobs = [knobs] if isinstance(knobs, str) else list(knobs)
    hardware, table, given, counts = knob_table(call)
    if not knobs:
        raise InputError("knobs=[] is not allowed; allowed: one or more of " + ", ".join(table))
    parts = []
    for knob in knobs:
        base = knob_value(knob, hardware, table, given, "to move about", counts)
        moved = list(integer_ends(float(base), rel_step)) if knob in counts else \
            [base * (1.0 - rel_step), base * (1.0 + rel_step)]
        ds = fn(**call, hardware_overrides={**given, knob: moved})
        numeric = numeric_outputs(ds)
        unknown = [m for m in (metrics or []) if m not in numeric]
        if unknown:
            raise InputError(f"metrics={brief(unknown[0])} is not a numeric output of {getattr(fn, '__name__', fn)}; "
                             f"allowed: {', '.join(numeric)}")
        names = [m for m in (metrics or METRICS) if m in ds.data_vars]
        lo, hi = ds[names].isel({knob: 0}, drop=True), ds[names].isel({knob: 1}, drop=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = (np.log(hi.where(hi > 0)) - np.log(lo.where(lo > 0))) / np.log(moved[1] / moved[0])
        parts.append(e.expand_dims(knob=[knob]).assign_coords(knob_low=("knob", [float(moved[0])]),
                                                             knob_high=("knob", [float(moved[1])])))
    out = xr.concat(parts, dim="knob", join="outer")
    out.attrs.update({"function": "analysis.sensitivity", "hardware": hardware, "rel_step": rel_step,
                      "meaning": "d log(metric) / d log(knob), central differences between "
                                 "knob_low and knob_high"})
    return out
