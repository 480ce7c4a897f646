"""Backends: one per hardware kind, registered by the spec's `kind` (gpu; wafer and system
for Cerebras). A backend turns a spec and the user's knob overrides into the numbers the
primitives read (primitives/hardware_numbers.py), checks a layout, and evaluates each
predict.* workload on that hardware. predict resolves specs, checks input and dispatches
here; it never asks which kind a chip is.

A new chip family is a backend module that calls `register` plus its YAML files.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
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
    """Make `backend` evaluate specs whose `kind` is one of `kinds`."""
    for k in kinds:
        BACKENDS[k] = backend


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
    """Every key must be a knob of this hardware and every value a positive number, or zero
    for a time (a knob in seconds: a host overhead or latency of zero is a what-if)."""
    own = backend_for(spec).knobs(spec, every=True)
    for k, v in overrides.items():
        if k not in own:
            raise InputError(f"{arg} key {k!r} is not a knob of hardware={spec.name!r}; allowed: "
                             f"{', '.join(own)}")
        raw = np.asarray(getattr(v, "values", v))
        time = own[k][0] == "s"
        allowed = f"{'numbers >= 0' if time else 'positive numbers'} ({own[k][0]})"
        if raw.dtype == bool or raw.dtype.kind not in "iuf" or raw.size == 0:
            raise InputError(f"{arg} {k}={v!r} is not allowed; allowed: {allowed}")
        bad = ~np.isfinite(raw) | ((raw < 0) if time else (raw <= 0))
        if np.any(bad):
            raise InputError(f"{arg} {k}={raw.ravel()[np.argmax(bad.ravel())].item()!r} is not allowed; allowed: {allowed}")


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
