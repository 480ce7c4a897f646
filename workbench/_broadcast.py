"""Turn the public interface's scalars, lists and DataArrays into broadcast ndarrays, run a
pure array function per combination of categorical values, and return an xr.Dataset.

Numeric arguments broadcast inside one vectorized call; categorical ones (hardware,
model, dtype, op) are few and index specs, so each combination is one call and the
results are concatenated along that argument's dimension.
"""
from __future__ import annotations

import functools
import itertools
from typing import Callable

import numpy as np
import xarray as xr

from . import __version__
from .errors import InputError, brief
from .units import unit_attrs

# The most points one dense call evaluates (numeric grid x categorical combinations).
# predict.inference returns ~37 variables of 8 bytes a point (~300 B) and its vectorized
# temporaries about as much again (sweep.WORKING_SET_FACTOR = 2): 10 million points is
# ~3 GB of results and ~6 GB at the peak, which a laptop or CI runner holds. Past it a
# 1e9-point call would allocate until MemoryError; sweep.evaluate (`workbench sweep`)
# evaluates such grids in blocks, each below this budget.
MAX_DENSE_POINTS = 10_000_000


def as_axis(name: str, value):
    """A list, tuple or 1-D ndarray becomes a DataArray along dimension `name` (non-empty,
    flat and without repeated values: each is one coordinate); others pass through."""
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        check_not_mixed(name, value)
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):  # ragged nesting
            arr = np.asarray(value, dtype=object)
        if arr.ndim != 1 or any(isinstance(v, (list, tuple, np.ndarray)) for v in arr.tolist()):
            raise InputError(f"{name}={brief(value)} is not allowed; allowed: a value or a flat list of values")
        if arr.size == 0:
            raise InputError(f"{name}=[] is not allowed; allowed: a value or a non-empty list of values")
        check_distinct(name, arr.tolist())
        return xr.DataArray(arr, dims=[name], coords={name: arr})
    return value


def check_not_mixed(name: str, values) -> None:
    """A list mixing true/false with numbers is refused: numpy would read true as 1 (a batch
    of [true, 2] ran batches 1 and 2)."""
    if isinstance(values, (list, tuple)):
        flags = [isinstance(v, (bool, np.bool_)) for v in values]
        if any(flags) and not all(flags):
            raise InputError(f"{name}={brief(list(values))} mixes true/false with other values; allowed: numbers, "
                             "or only true/false for a yes/no argument")


def check_distinct(name: str, values: list) -> None:
    """A repeated value would become two coordinates with one label: refused."""
    seen = set()
    for v in values:
        key = (type(v) is bool, v) if isinstance(v, (int, float, bool)) else v
        try:
            if key in seen:
                raise InputError(f"{name}={brief(values)} repeats {brief(v)}; allowed: distinct values "
                                 f"(each is one coordinate of the {name!r} dimension)")
            seen.add(key)
        except TypeError:  # unhashable values (dicts of model fields): nothing to compare
            return


def values_of(value) -> list:
    """The distinct values of a scalar, list or DataArray, in order."""
    if isinstance(value, xr.DataArray):
        return list(np.atleast_1d(value.values).ravel())
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(np.asarray(value).ravel())
    return [value]


def broadcast_numeric(numeric: dict) -> tuple[dict, tuple, dict]:
    """Align numeric inputs by dimension name without materializing the grid: each
    becomes a float ndarray with its own dims in place and singleton axes elsewhere
    (orthogonal broadcasting), so work that depends on one axis is done once per value
    of that axis. Returns the arrays, the union of dims and their coordinates."""
    arrays = {k: (v if isinstance(v, xr.DataArray) else xr.DataArray(v)) for k, v in numeric.items()}
    dims: list = []
    coords: dict = {}
    sizes: dict = {}
    for a in arrays.values():
        for d in a.dims:
            if d in sizes and sizes[d] != a.sizes[d]:
                raise InputError(f"dimension {d!r} has sizes {sizes[d]} and {a.sizes[d]}; allowed: "
                                 "one size per dimension name")
            if d not in sizes:
                dims.append(d)
                sizes[d] = a.sizes[d]
            if d in a.coords and d not in coords:
                coords[d] = a.coords[d].values
    out = {}
    for k, a in arrays.items():
        order = [d for d in dims if d in a.dims]
        v = np.asarray(a.transpose(*order).values, dtype=float)
        shape = [sizes[d] if d in a.dims else 1 for d in dims]
        out[k] = v.reshape(shape)
    return out, tuple(dims), coords


def _variable(dims, values: np.ndarray) -> xr.Variable:
    """A Variable of the array as it is. Object arrays (labels: bound, reason) skip
    xarray's object inspection, which under pandas 3 round-trips them through Arrow
    strings (0.4 s per million labels); their elements are Python strings already."""
    if values.dtype == object:
        return xr.Variable(dims, values, fastpath=True)
    return xr.Variable(dims, values)


_NUMBERS = (int, float, np.integer, np.floating)


def _is_point(categorical: dict, numeric: dict) -> bool:
    """Every input one plain value (no list, array or DataArray): a single point."""
    return (all(isinstance(v, _NUMBERS) and not isinstance(v, bool) for v in numeric.values())
            and not any(isinstance(v, (list, tuple, np.ndarray, xr.DataArray)) for v in categorical.values()))


@functools.lru_cache(maxsize=None)
def _attrs_of(name: str) -> dict:
    return unit_attrs(name)


def _evaluate_point(fn: Callable, *, categorical: dict, numeric: dict, attrs: dict, hide=()) -> xr.Dataset:
    """evaluate() for one point: the same Dataset (tests/test_broadcast.py checks them
    identical), built directly from 0-d variables instead of through xarray's merge
    machinery, which costs a scalar call most of its time."""
    arrays = {k: np.asarray(float(v)) for k, v in numeric.items()}
    out = fn(**categorical, **arrays)
    variables = {}
    for k, v in out.items():
        values = np.asarray(v)
        # fastpath: a 0-d ndarray of numbers, bools or (object) Python strings needs no conversion
        variables[k] = xr.Variable((), values, attrs=dict(_attrs_of(k)), fastpath=values.dtype.kind in "fbiuO")
    coords = {k: v for k, v in categorical.items()
              if isinstance(v, (str, bool, np.str_)) and k not in variables and k not in hide}
    for k, v in coords.items():
        variables[k] = xr.Variable((), np.asarray(v))
    ds_attrs = {"workbench_version": __version__, **{k: str(v) for k, v in attrs.items()}}
    try:
        return xr.Dataset._construct_direct(variables, set(coords), {}, ds_attrs, None, {})
    except (AttributeError, TypeError):  # an xarray without the private constructor: the public one
        data = {k: v for k, v in variables.items() if k not in coords}
        return xr.Dataset(data, coords={k: variables[k] for k in coords}, attrs=ds_attrs)


def evaluate(fn: Callable, *, categorical: dict, numeric: dict, attrs: dict, hide=()) -> xr.Dataset:
    """Run `fn(**categorical_point, **numeric_arrays) -> dict of arrays` over every
    combination of categorical values; dims of lists / DataArrays are kept. `hide`: scalar
    categorical inputs not shown as coordinates (settings that say nothing for these chips)."""
    if _is_point(categorical, numeric):
        return _evaluate_point(fn, categorical=categorical, numeric=numeric, attrs=attrs, hide=hide)
    arrays, dims, coords = broadcast_numeric(numeric)
    cat_dims = [k for k, v in categorical.items() if isinstance(v, (list, tuple, xr.DataArray))]
    cat_values = {k: values_of(v) for k, v in categorical.items()}
    check_size(np.broadcast_shapes(*(a.shape for a in arrays.values())),
               [len(cat_values[d]) for d in cat_dims], attrs.get("function", "predict"))
    pieces = []
    for combo in itertools.product(*cat_values.values()):
        point = dict(zip(cat_values, combo))
        out = fn(**point, **arrays)
        shape = tuple(len(coords[d]) if d in coords else max(np.shape(a)[i] for a in arrays.values())
                      for i, d in enumerate(dims))
        data = {k: _variable(dims, np.broadcast_to(np.asarray(v), shape))
                for k, v in out.items() if k not in coords and k not in cat_dims}
        # A scalar categorical input stays visible as a 0-d coordinate (hardware="h100_sxm").
        scalars = {k: v for k, v in point.items() if k not in cat_dims and isinstance(v, (str, bool, np.str_))
                   and k not in data and k not in coords}
        if cat_dims:
            ds = xr.Dataset(data, coords=coords)
            for d in cat_dims:
                ds = ds.expand_dims({d: [point[d]]})
            pieces.append(ds.assign_coords(scalars))
        else:  # the scalars with the grid's coordinates: one Dataset built, not copied to add them
            pieces.append(xr.Dataset(data, coords={**coords, **{k: v for k, v in scalars.items() if k not in hide}}))
    ds = _combine(pieces, cat_dims, [len(cat_values[d]) for d in cat_dims])
    ds = ds.drop_vars([c for c in hide if c in ds.coords and c not in ds.dims])
    for name in ds.data_vars:
        ds.variables[name].attrs.update(unit_attrs(name))  # the Dataset's own variable, no DataArray built
    ds.attrs.update({"workbench_version": __version__, **{k: str(v) for k, v in attrs.items()}})
    return ds


def check_size(numeric_shape: tuple, categorical_sizes: list, function: str) -> None:
    """Refuse a dense call over more than MAX_DENSE_POINTS points, counted from the axes'
    lengths before anything is allocated."""
    n = float(np.prod(numeric_shape)) * float(np.prod(categorical_sizes))
    if n > MAX_DENSE_POINTS:
        raise InputError(f"{function}: a grid of {n:,.0f} points is more than one dense call evaluates "
                         f"(MAX_DENSE_POINTS={MAX_DENSE_POINTS:,}); allowed: at most {MAX_DENSE_POINTS:,} points "
                         "per call; evaluate larger grids in blocks with `workbench sweep` or sweep.evaluate")


def _combine(pieces: list, dims: list, sizes: list) -> xr.Dataset:
    """Concatenate a row-major list of Datasets back into the categorical grid."""
    if not dims:
        return pieces[0]
    step = int(np.prod(sizes[1:])) if len(sizes) > 1 else 1
    groups = [_combine(pieces[i * step:(i + 1) * step], dims[1:], sizes[1:]) for i in range(sizes[0])]
    return xr.concat(groups, dim=dims[0])
