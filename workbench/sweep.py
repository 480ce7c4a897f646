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
import threading
from pathlib import Path
from typing import Callable

import numpy as np
import xarray as xr

from . import __version__
from .errors import InputError
from .units import unit_attrs

BYTES_PER_VALUE = 8  # float64 / object pointer per output variable per point
# HDF5 (under netCDF4) is not thread-safe: blocks compute in parallel, write one at a time.
_NETCDF_LOCK = threading.Lock()
WORKING_SET_FACTOR = 2.0  # temporaries of a vectorized call, relative to its outputs (measured)


def grid(**axes) -> dict:
    """Each axis becomes a 1-D DataArray along a dimension of its own name."""
    out = {}
    for name, values in axes.items():
        values = np.asarray(values if isinstance(values, (list, tuple, np.ndarray)) else [values])
        if values.ndim != 1 or values.size == 0:
            raise InputError(f"axis {name}={values!r} is not allowed; allowed: a non-empty 1-D list")
        out[name] = xr.DataArray(values, dims=[name], coords={name: values})
    return out


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


def evaluate(fn: Callable, axes: dict, *, fixed: dict | None = None, variables=None,
             memory_budget_bytes: float = 1e9, scheduler: str | None = None, out: str | None = None,
             progress: bool = False) -> xr.Dataset:
    """Evaluate `fn(**axes, **fixed)` over the grid `axes` (from `grid`).

    In memory when the output fits `memory_budget_bytes`; otherwise in blocks through
    dask (threaded, or the distributed scheduler at `scheduler` / $DASK_SCHEDULER_ADDRESS).
    `variables` keeps a subset of the outputs. `out` (a .nc or .zarr path) writes the
    result there; blocks stream to disk, and the returned Dataset is opened lazily."""
    fixed = dict(fixed or {})
    axes = {k: (v if isinstance(v, xr.DataArray) else grid(**{k: v})[k]) for k, v in axes.items()}
    attrs = provenance(fn, axes, fixed)
    sizes = {k: int(v.size) for k, v in axes.items()}
    probe = fn(**{k: v.isel({k: slice(0, 1)}) for k, v in axes.items()}, **fixed)
    n_vars = len(variables) if variables else len(probe.data_vars)
    total = float(np.prod(list(sizes.values()))) * n_vars * BYTES_PER_VALUE
    # A block holds every output of fn (before `variables` selects) plus its temporaries.
    working_bytes_per_point = WORKING_SET_FACTOR * len(probe.data_vars) * BYTES_PER_VALUE
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if total <= memory_budget_bytes and out is None and scheduler is None:
        return _finish(fn(**axes, **fixed), variables, attrs, order=list(axes))
    workers = os.cpu_count() or 1
    split_dims, splits = _blocks(sizes, working_bytes_per_point, memory_budget_bytes / workers)
    return _evaluate_blocks(fn, axes, fixed, variables, attrs, split_dims, splits, scheduler, out, progress)


def _evaluate_blocks(fn, axes, fixed, variables, attrs, split_dims, splits, scheduler, out, progress):
    import dask

    parts_dir = None
    if out is not None:
        parts_dir = Path(str(out) + ".parts")
        shutil.rmtree(parts_dir, ignore_errors=True)
        parts_dir.mkdir(parents=True)

    combos = list(itertools.product(*(range(len(splits[d])) for d in split_dims)))
    tasks = [dask.delayed(_run_block)(fn, axes, fixed, variables, parts_dir and str(parts_dir), idx,
                                      {d: splits[d][i] for d, i in zip(split_dims, idx)}) for idx in combos]
    results = _compute(tasks, scheduler, progress)
    nested = _nest(results, [len(splits[d]) for d in split_dims])
    if parts_dir is None:
        ds = xr.combine_nested(nested, concat_dim=split_dims, combine_attrs="drop_conflicts") if split_dims \
            else nested
        ds.attrs.update(attrs)
        return ds
    if split_dims:
        ds = xr.open_mfdataset(nested, combine="nested", concat_dim=split_dims, combine_attrs="drop_conflicts")
    else:  # one block
        ds = xr.open_dataset(nested, chunks={})
    ds.attrs.update(attrs)
    target = Path(out)
    if target.suffix == ".zarr":
        ds.to_zarr(target, mode="w")
        result = xr.open_zarr(target)
    else:
        tmp = target.with_suffix(target.suffix + ".tmp")
        ds.to_netcdf(tmp)
        os.replace(tmp, target)
        result = xr.open_dataset(target, chunks={})
    ds.close()
    shutil.rmtree(parts_dir, ignore_errors=True)
    return result


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
