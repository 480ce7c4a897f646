"""Backends: one per hardware kind, registered by the spec's `kind` (gpu; wafer and system
for Cerebras). A backend turns a spec and the user's knob overrides into the numbers the
primitives read (primitives/hardware_numbers.py), checks a layout, and evaluates each
predict.* workload on that hardware. predict resolves specs, checks input and dispatches
here; it never asks which kind a chip is.

A new chip family is a backend module that calls `register` plus its YAML files.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, brief
from ..specs import kind_of, load_hardware

BACKENDS: dict = {}


def per_spec(fn):
    """Remember `fn(spec, every=False)` per spec object (specs are frozen and the catalog's are
    loaded once): a scalar prediction asks for a chip's knob table three times. The spec is
    kept with its entry, so its id is not reused while cached; each call gets its own dict."""
    cache: dict = {}

    def wrapped(spec, every: bool = False) -> dict:
        key = (id(spec), every)
        hit = cache.get(key)
        if hit is None or hit[0] is not spec:
            if len(cache) > 256:
                cache.clear()
            hit = cache[key] = (spec, fn(spec, every))
        return dict(hit[1])
    wrapped.__doc__ = fn.__doc__
    return wrapped


def register(backend, *kinds: str) -> None:
    """Make `backend` evaluate specs whose `kind` is one of `kinds` (through _Checked)."""
    for k in kinds:
        BACKENDS[k] = _Checked(backend)


# Knobs that only some workloads read: knob -> (the backend methods that read it, the call
# that reaches them). Elsewhere it would change nothing, so it is refused there by name.
KNOB_READERS = {"framework_overhead_s": (("closed_loop",), "predict.serving with concurrency")}
WORKLOADS = ("inference", "training", "closed_loop", "gemm", "attention", "collective")


class _Checked:
    """A backend as predict calls it: the backend's own attributes, each workload method first
    refusing a KNOB_READERS knob (set on the numbers it is given) that it does not read."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name not in WORKLOADS:
            return attr

        def run(hw, *args, **kwargs):
            for knob, (readers, reader) in KNOB_READERS.items():
                if name not in readers and getattr(hw, knob, None) is not None:
                    also = " (nor predict.serving without concurrency, which runs it)" if name == "inference" else ""
                    given = np.unique(np.asarray(getattr(hw, knob), float))
                    shown = _number(given[0]) if given.size == 1 else brief(given.tolist())
                    raise InputError(f"hardware_overrides {knob}={shown} has no effect on "
                                     f"predict.{name}{also}; allowed: it in {reader}, the only call that reads it")
            return attr(hw, *args, **kwargs)
        return run


def backend_for(hardware):
    """The backend of a catalog name, YAML path or spec object."""
    spec = load_hardware(hardware)
    kind = kind_of(spec)
    if kind not in BACKENDS:
        raise InputError(f"hardware={getattr(spec, 'name', spec)!r} has kind {kind!r}; allowed kinds: "
                         f"{', '.join(sorted(BACKENDS))}")
    return BACKENDS[kind]


def knobs(hardware, every: bool = False) -> dict:
    """Knob name -> (unit, value) of a hardware spec, as its backend reads them (`every`: also
    the ones it has no value for, a math it lacks, settable as a hypothetical unit)."""
    spec = load_hardware(hardware)
    return backend_for(spec).knobs(spec, every=every)


def list_knobs(hardware) -> list[tuple[str, str, float]]:
    """(name, unit, current value) of every knob of `hardware`, for `workbench list knobs`."""
    return [(k, unit, v) for k, (unit, v) in knobs(hardware).items()]


def numbers(hardware, overrides: dict | None = None, framework: str | None = "none"):
    """The numbers record of `hardware` with `overrides` (knob -> value or array) set and
    the kernel tables of `framework` (None: the spec's default; "none": no tables)."""
    from .kernel_tables import resolve
    spec = load_hardware(hardware)
    be = backend_for(spec)
    overrides = dict(overrides or {})
    check_knobs(spec, overrides)
    return be.numbers(spec, overrides, resolve(spec, framework) if be.kind == "gpu" else "none")


def as_numbers(hardware):
    """A numbers record as it is; anything else (name, path, spec) through `numbers`."""
    from ..primitives.hardware_numbers import GpuNumbers, WaferNumbers
    return hardware if isinstance(hardware, (GpuNumbers, WaferNumbers)) else numbers(hardware)


def check_knobs(spec, overrides: dict, *, arg: str = "hardware_overrides") -> None:
    """Every key must be a knob of this hardware and every value a finite number: positive, or
    >= 0 for a time (a knob in seconds: a host overhead or latency of zero is a what-if). A
    knob that is a field of the spec (a count, SRAM, a price: _spec_with) passes instead the
    checks its YAML file passes (integers, the spec's ranges, the rules between fields:
    collective_sms < n_sms, reserved SRAM < SRAM), at every combination of the swept values."""
    own = backend_for(spec).knobs(spec, every=True)
    fields = {}
    for k, v in overrides.items():
        if k not in own:
            raise InputError(f"{arg} key {k!r} is not a knob of hardware={spec.name!r}; allowed: "
                             f"{', '.join(own)}")
        raw = np.asarray(getattr(v, "values", v))
        time = own[k][0] == "s"
        field = not time and k in field_knobs()
        allowed = f"{'numbers >= 0' if time else 'finite numbers' if field else 'positive numbers'} ({own[k][0]})"
        if raw.dtype == bool or raw.dtype.kind not in "iuf" or raw.size == 0:
            raise InputError(f"{arg} {k}={v!r} is not allowed; allowed: {allowed}")
        bad = ~np.isfinite(raw) | (False if field else (raw < 0) if time else (raw <= 0))
        if np.any(bad):
            raise InputError(f"{arg} {k}={raw.ravel()[np.argmax(bad.ravel())].item()!r} is not allowed; allowed: {allowed}")
        if field:
            fields[k] = v
    if fields:
        _check_as_spec(spec, fields, arg)


# The GPU knobs that are fields of HardwareSpec (backends/gpu.py); scale_up_domain_size is its
# scale-up link's domain_size
_GPU_FIELDS = ("n_sms", "collective_sms", "tdp_w", "price_usd_per_hour")


def _wafer_fields() -> dict:
    """knob -> WaferSpec or SystemSpec field of the wafer knobs (backends/wafer.py)."""
    from .wafer import _SYSTEM_KNOBS, _WAFER_KNOBS
    return {k: f for k, (_, f) in {**_WAFER_KNOBS, **_SYSTEM_KNOBS}.items()}


def field_knobs() -> set:
    """Knobs that are fields of the spec, checked as the spec checks them (a knob in seconds
    keeps the knob rule: a what-if time may be 0 where a spec's may not)."""
    return {*_GPU_FIELDS, "scale_up_domain_size", *_wafer_fields(), "power_w"}


def _spec_with(spec, values: dict):
    """`spec` with the knobs in `values` (one number each) set as its fields:
    dataclasses.replace runs the checks its YAML file passes. A count is given as an integer
    when it is one (7.5 SMs is not); a what-if clock or program mesh brings the clock range or
    fabric that bounds it along (a faster or larger chip is a what-if, not an error)."""
    import dataclasses
    from ..specs import HardwareSpec, SystemSpec, system_of
    v = {k: int(x) if float(x).is_integer() else float(x) for k, x in values.items()}
    if isinstance(spec, HardwareSpec):
        changes = {k: v[k] for k in _GPU_FIELDS if k in v}
        if "scale_up_domain_size" in v:
            changes["links"] = tuple(dataclasses.replace(ln, domain_size=v["scale_up_domain_size"])
                                     if ln.scope == "scale_up" else ln for ln in spec.links)
        return dataclasses.replace(spec, **changes)
    from .wafer import _SYSTEM_KNOBS, _WAFER_KNOBS
    system, wafer = system_of(spec)
    to_field = _wafer_fields()
    w = {to_field[k]: x for k, x in v.items() if k in _WAFER_KNOBS}
    if "clock_hz" in w:
        w.update(clock_min_hz=min(wafer.clock_min_hz, w["clock_hz"]),
                 clock_max_hz=max(wafer.clock_max_hz, w["clock_hz"]))
    for side in ("cols", "rows"):
        if f"program_{side}" in w and isinstance(w[f"program_{side}"], int):
            w[f"fabric_{side}"] = max(getattr(wafer, f"fabric_{side}"), w[f"program_{side}"])
    wafer = dataclasses.replace(wafer, **w)
    sysv = {to_field.get(k, k): x for k, x in v.items() if k in _SYSTEM_KNOBS or k in ("power_w", "price_usd_per_hour")}
    system = dataclasses.replace(system, **sysv)
    return system if isinstance(spec, SystemSpec) else wafer


def _check_as_spec(spec, overrides: dict, arg: str) -> None:
    """The spec's own checks at each distinct combination of the overridden field knobs, as the
    prediction broadcasts them (a list is a dimension of its own, a DataArray keeps its dims);
    the first that fails: one line naming the values and what is allowed."""
    import xarray as xr
    from ..specs import SpecError
    arrays = [v if isinstance(v, xr.DataArray) else xr.DataArray(np.asarray(v, float).reshape(-1), dims=[k])
              if np.ndim(v) else xr.DataArray(float(np.asarray(v))) for k, v in overrides.items()]
    rows = np.unique(np.stack([np.asarray(a.values, float).ravel() for a in xr.broadcast(*arrays)], axis=1), axis=0)
    for row in rows:
        combo = dict(zip(overrides, row.tolist()))
        try:
            _spec_with(spec, combo)
        except SpecError as e:
            knob = _field_knob(spec, e.field)
            value = _number(e.value) if isinstance(e.value, (int, float)) else repr(e.value)
            given = ", ".join(f"{k}={_number(x)}" for k, x in combo.items())
            what = given if knob in combo else f"{given} (then {knob}={value})"
            raise InputError(f"{arg} {what} is not allowed on hardware={spec.name!r}; allowed: {knob} "
                             f"{e.allowed}") from None


def _field_knob(spec, field: str) -> str:
    """The knob name of a spec field (mesh_width for program_cols), for an error message."""
    from ..specs import HardwareSpec
    if isinstance(spec, HardwareSpec):
        return "scale_up_domain_size" if field == "domain_size" else field
    return {f: k for k, f in _wafer_fields().items()}.get(field, field)


def flag_invalid(result: dict, invalid, reason: str, keep=("batch", "devices"), nan: bool = True) -> dict:
    """Mark the points where `invalid` holds (a layout that cannot run) as fits=False with
    `reason` (ahead of any other reason), their float outputs NaN: they are no
    configuration, so they must not be plotted as one. With nan=False the numbers stay
    (a configuration that is computed but cannot be served, as one beyond memory)."""
    invalid = np.asarray(invalid, dtype=bool)
    if not invalid.any():
        return result
    out = {}
    for k, v in result.items():
        a = np.asarray(v)
        if k == "fits":
            out[k] = a & ~invalid
        elif k == "reason":
            out[k] = np.where(invalid, reason, a).astype(object)
        elif nan and a.dtype.kind == "f" and k not in keep:
            out[k] = np.where(invalid, np.nan, a)
        else:
            out[k] = v
    return out


def flag_each(result: dict, invalid, values: dict, message, nan: bool = True) -> dict:
    """flag_invalid once per distinct combination of `values` (name -> array) among the
    invalid points, the reason `message(**combination)` naming them (tp=3, not tp)."""
    invalid = np.asarray(invalid, dtype=bool)
    if not invalid.any():
        return result
    arrays = {k: np.broadcast_to(np.asarray(v, float), invalid.shape).ravel() for k, v in values.items()}
    flat = invalid.ravel()
    combos = {tuple(a[i] for a in arrays.values()) for i in np.flatnonzero(flat)}
    for combo in sorted(combos):
        here = flat.copy()
        for a, v in zip(arrays.values(), combo):
            here &= a == v
        text = message(**{k: _number(v) for k, v in zip(arrays, combo)})
        result = flag_invalid(result, here.reshape(invalid.shape), text, nan=nan)
    return result


def _number(v: float) -> str:
    """3, 0.5, 1000000 (not 1e+06: a count is shown whole)."""
    return f"{v:.0f}" if np.isfinite(v) and v == round(v) and abs(v) < 1e15 else f"{v:g}"


def flag_problems(result: dict, problems: list) -> dict:
    """Each layout.Problem as flagged points, the first listed shown where several hold.
    The points are the broadcast of the result and every size the problems depend on."""
    sizes = [np.asarray(v if v is not None else 0.0, dtype=float) for p in problems for v in p.values.values()]
    shape = np.broadcast_shapes(np.shape(result["fits"]), *(np.shape(p.where) for p in problems),
                                *(np.shape(v) for v in sizes))
    for p in reversed(problems):
        result = flag_each(result, np.broadcast_to(p.where, shape), p.values, p.message, nan=not p.keep_numbers)
    return result


def _register_builtins() -> None:
    from . import gpu, wafer
    register(gpu.BACKEND, "gpu")
    register(wafer.BACKEND, "wafer", "system")


_register_builtins()
