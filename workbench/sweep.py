"""Sweeps: a grid of axes evaluated by one vectorized call, or by dask in blocks when the
result outgrows a memory budget, returned as an xr.Dataset with units and provenance.

    from workbench import predict, sweep
    g = sweep.grid(hardware=["h100_sxm", "cs3"], batch=[1, 8, 64], prompt=[512, 2048, 8192])
    ds = sweep.evaluate(predict.inference, g, fixed=dict(model="llama_3_1_8b"))

Blocks are hyper-rectangles of the grid (split along the largest axes first); each is one
vectorized call. They run on dask's threaded scheduler, or on a dask.distributed cluster
when `scheduler` (or DASK_SCHEDULER_ADDRESS) names one; with `out`, each block is written
to disk as it finishes, so a sweep larger than memory streams to netCDF (or zarr).
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Callable

import numpy as np
import xarray as xr

from . import __version__, _broadcast
from .errors import InputError, brief, check_positive
from .units import unit_attrs

BYTES_PER_VALUE = 8  # float64 / object pointer per output variable per point
# HDF5 (under netCDF4) is not thread-safe: blocks compute in parallel, write one at a time.
_NETCDF_LOCK = threading.Lock()
WORKING_SET_FACTOR = 2.0  # temporaries of a vectorized call, relative to its outputs (measured)


def grid(**axes) -> dict:
    """Each axis becomes a 1-D DataArray along a dimension of its own name."""
    out = {}
    for name, values in axes.items():
        _broadcast.check_not_mixed(name, values)
        try:
            values = np.asarray(values if isinstance(values, (list, tuple, np.ndarray)) else [values])
        except (TypeError, ValueError):
            values = np.asarray(values, dtype=object)  # ragged: refused below
        if values.ndim != 1 or values.size == 0:
            raise InputError(f"axis {name}={brief(values.tolist())} is not allowed; allowed: a non-empty 1-D list")
        _broadcast.check_distinct(name, values.tolist())
        out[name] = xr.DataArray(values, dims=[name], coords={name: values})
    return out


def _check_arguments(fn: Callable, axes: dict, fixed: dict) -> None:
    """Every axis and fixed argument must be an argument of `fn`, and each given once."""
    import inspect
    if not isinstance(fixed, dict):
        raise InputError(f"fixed={brief(fixed)} is not allowed; allowed: a mapping of argument -> value")
    both = sorted(set(axes) & set(fixed), key=str)
    if both:
        raise InputError(f"{both[0]} is both an axis and fixed; allowed: one of axes, fixed")
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for kind, names in (("axis", axes), ("fixed argument", fixed)):
        for name in names:
            if name not in known:
                raise InputError(f"{kind} {brief(name)} is not an argument of {getattr(fn, '__name__', fn)}; "
                                 f"allowed: {', '.join(known)}")
    required = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                and p.default is p.empty and n not in axes and n not in fixed]
    if required:
        raise InputError(f"{required[0]} is missing; allowed: give it under axes or fixed (a required argument of "
                         f"{getattr(fn, '__name__', fn)})")
    for name, value in {**fixed, **axes}.items():
        if name == "hardware_overrides" and value is not None and not isinstance(value, dict):
            raise InputError(f"hardware_overrides={brief(value)} is not allowed; allowed: a mapping of knob -> value "
                             "(its lists sweep), under fixed")


def git_sha() -> str:
    try:
        here = Path(__file__).resolve().parent
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(fn: Callable, axes: dict, fixed: dict) -> dict:
    """Attributes that say how a Dataset was made (netCDF-safe: strings and numbers)."""
    def brief(v):
        v = np.asarray(getattr(v, "values", v))
        items = v.tolist() if v.size <= 20 else [v[0].item(), "...", v[-1].item(), f"({v.size} values)"]
        return items
    return {
        "workbench_version": __version__, "git_sha": git_sha(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "function": f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', str(fn))}",
        "axes": json.dumps({k: brief(v) for k, v in axes.items()}, default=str),
        "fixed": json.dumps(fixed, default=str),
    }


def _finish(ds: xr.Dataset, variables, attrs: dict, order=()) -> xr.Dataset:
    ds = ds.transpose(*[d for d in order if d in ds.dims], ...)
    if variables:
        missing = [v for v in variables if v not in ds.data_vars]
        if missing:
            raise InputError(f"variables={missing} are not outputs; allowed: {sorted(ds.data_vars)}")
        ds = ds[list(variables)]
    for name in ds.data_vars:
        for key, value in unit_attrs(name).items():
            ds[name].attrs.setdefault(key, value)
    ds.attrs.update(attrs)
    return ds


def _blocks(sizes: dict, bytes_per_point: float, block_budget: float) -> tuple[list, dict]:
    """Split the largest axes until a block's output fits the block budget. Returns the
    split dims in order and, per split dim, the list of index slices."""
    splits: dict = {}
    block = dict(sizes)
    for dim in sorted(sizes, key=lambda d: -sizes[d]):
        current = float(np.prod(list(block.values()))) * bytes_per_point
        if current <= block_budget:
            break
        step = max(1, int(block_budget / (current / block[dim])))
        splits[dim] = [slice(i, min(i + step, sizes[dim])) for i in range(0, sizes[dim], step)]
        block[dim] = step
    return list(splits), splits


def check_out(out) -> None:
    """`out` must be a .nc file (netCDF) or a .zarr store (zarr installed) in an existing,
    writable folder, and not a folder other than a .zarr store: checked before a sweep runs.
    An existing file is replaced (the CLI asks for --force first)."""
    path = os.fspath(out) if isinstance(out, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path.strip():
        raise InputError(f"out={brief(out)} is not allowed; allowed: a .nc file path (netCDF), or a .zarr store")
    out = path
    suffix = os.path.splitext(out.rstrip("/\\"))[1].lower()
    if os.path.isdir(out) and suffix != ".zarr":
        raise InputError(f"out={out!r} is a directory; allowed: a .nc file (or a .zarr store)")
    if suffix not in (".nc", ".zarr"):
        raise InputError(f"out={out!r} is not allowed; allowed: a .nc file (netCDF), or a .zarr store")
    if suffix == ".zarr":
        import importlib.util
        if importlib.util.find_spec("zarr") is None:
            raise InputError(f"out={out!r} needs the zarr package, which is not installed; allowed: a .nc file, or "
                             "pip install zarr")
    parent = os.path.dirname(os.path.abspath(out.rstrip("/\\")))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise InputError(f"out={out!r} cannot be written (its folder is missing or read-only); "
                         "allowed: a path in a writable folder")


def _is_zarr(target: Path) -> bool:
    return target.suffix.lower() == ".zarr"


def _free_string_widths(ds: xr.Dataset) -> None:
    """Forget the string width each variable's encoding took from the first block read
    (xarray would write every block's strings cut to it): the whole sweep's strings set it."""
    for var in ds.variables.values():
        if var.dtype.kind in "OUS" or np.dtype(var.encoding.get("dtype", "f8")).kind in "OUS":
            var.encoding.pop("dtype", None)


def evaluate(fn: Callable, axes: dict, *, fixed: dict | None = None, variables=None,
             memory_budget_bytes: float = 1e9, scheduler: str | None = None, out: str | None = None,
             progress: bool = False) -> xr.Dataset:
    """Evaluate `fn(**axes, **fixed)` over the grid `axes` (from `grid`).

    In memory when the output fits `memory_budget_bytes`; otherwise in blocks through
    dask (threaded, or the distributed scheduler at `scheduler` / $DASK_SCHEDULER_ADDRESS).
    `variables` keeps a subset of the outputs. `out` (a .nc or .zarr path, checked before
    anything runs: `check_out`) writes the result there, replacing a file of that name;
    blocks stream to disk, and the returned Dataset is opened lazily."""
    fixed = {} if fixed is None else fixed
    if not isinstance(axes, dict) or not axes:
        raise InputError(f"axes={brief(axes)} is not allowed; allowed: a non-empty mapping of argument -> values")
    _check_arguments(fn, axes, fixed)
    fixed = dict(fixed)
    check_positive("memory_budget_bytes", memory_budget_bytes)
    if out is not None:
        check_out(out)
    if variables is not None and (isinstance(variables, str) or not all(isinstance(v, str) for v in variables)):
        raise InputError(f"variables={brief(variables)} is not allowed; allowed: a list of output names")
    axes = {k: (v if isinstance(v, xr.DataArray) else grid(**{k: v})[k]) for k, v in axes.items()}
    attrs = provenance(fn, axes, fixed)
    sizes = {k: int(v.size) for k, v in axes.items()}
    probe = fn(**{k: v.isel({k: slice(0, 1)}) for k, v in axes.items()}, **fixed)
    n_vars = len(variables) if variables else len(probe.data_vars)
    points = float(np.prod(list(sizes.values())))
    per_point = max(float(np.prod(list(probe.sizes.values()))), 1.0)  # points of fn per grid point (fixed lists)
    total = points * n_vars * BYTES_PER_VALUE
    # A block holds every output of fn (before `variables` selects) plus its temporaries,
    # and is one dense call: within _broadcast.MAX_DENSE_POINTS.
    working_bytes_per_point = WORKING_SET_FACTOR * len(probe.data_vars) * BYTES_PER_VALUE * per_point
    dense_limit = _broadcast.MAX_DENSE_POINTS / per_point
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if total <= memory_budget_bytes and points <= dense_limit and out is None and scheduler is None:
        return _finish(fn(**axes, **fixed), variables, attrs, order=list(axes))
    workers = os.cpu_count() or 1
    block_budget = min(memory_budget_bytes / workers, dense_limit * working_bytes_per_point)
    split_dims, splits = _blocks(sizes, working_bytes_per_point, block_budget)
    return _evaluate_blocks(fn, axes, fixed, variables, attrs, split_dims, splits, scheduler, out, progress)


def _evaluate_blocks(fn, axes, fixed, variables, attrs, split_dims, splits, scheduler, out, progress):
    import dask

    combos = list(itertools.product(*(range(len(splits[d])) for d in split_dims)))
    shape = [len(splits[d]) for d in split_dims]

    def tasks(parts_dir):
        return [dask.delayed(_run_block)(fn, axes, fixed, variables, parts_dir, idx,
                                         {d: splits[d][i] for d, i in zip(split_dims, idx)}) for idx in combos]
    if out is None:
        nested = _nest(_compute(tasks(None), scheduler, progress), shape)
        ds = xr.combine_nested(nested, concat_dim=split_dims, combine_attrs="drop_conflicts") if split_dims \
            else nested
        ds.attrs.update(attrs)
        return ds
    # The parts and the netCDF being written are ours alone (fresh names beside `out`)
    # and go whatever happens: an interrupted or failed sweep leaves nothing behind.
    target = Path(out)
    parts_dir = tempfile.mkdtemp(prefix=f".{target.name}.parts-", dir=target.parent)
    tmp = None
    try:
        nested = _nest(_compute(tasks(parts_dir), scheduler, progress), shape)
        if split_dims:
            ds = xr.open_mfdataset(nested, combine="nested", concat_dim=split_dims, combine_attrs="drop_conflicts")
        else:  # one block
            ds = xr.open_dataset(nested, chunks={})
        with ds:
            ds.attrs.update(attrs)
            _free_string_widths(ds)
            if _is_zarr(target):
                ds.to_zarr(target, mode="w")
            else:
                tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"  # the default file mode
                ds.to_netcdf(tmp)
                os.replace(tmp, target)
                tmp = None
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
    return xr.open_zarr(target) if _is_zarr(target) else xr.open_dataset(target, chunks={})


def _run_block(fn, axes, fixed, variables, parts_dir, index, sel):
    """One block: a vectorized call on a sub-grid, kept in memory or written to disk.
    Module-level so that a distributed scheduler can pickle it."""
    sub = {k: (v.isel({k: sel[k]}) if k in sel else v) for k, v in axes.items()}
    ds = _finish(fn(**sub, **fixed), variables, {}, order=list(axes))
    if parts_dir is None:
        return ds
    path = Path(parts_dir) / ("part-" + "-".join(f"{i:05d}" for i in index) + ".nc")
    with _NETCDF_LOCK:
        ds.to_netcdf(path)
    return str(path)


def _compute(tasks, scheduler, progress):
    import dask
    if scheduler:
        from dask.distributed import Client, progress as dist_progress
        with Client(scheduler) as client:
            futures = client.compute(tasks)
            if progress:
                dist_progress(futures)
            return client.gather(futures)
    if progress:
        from dask.diagnostics import ProgressBar
        with ProgressBar():
            return list(dask.compute(*tasks, scheduler="threads"))
    return list(dask.compute(*tasks, scheduler="threads"))


def _nest(flat: list, shape: list):
    if not shape:
        return flat[0]
    step = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
