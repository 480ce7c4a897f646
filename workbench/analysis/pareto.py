"""Pareto frontiers of a sweep: the points that no other point of their group beats.

    from workbench.analysis import pareto
    front = pareto(ds, minimize=["tpot_s"], maximize=["output_tokens_per_s_per_device"],
                   by=["hardware"], where=ds.fits)

Point a dominates point b when a is no worse than b in every objective and strictly
better in at least one. Identical points do not dominate each other, so ties are all on
the frontier. A point is on the frontier of its group when it is valid (`where` is True
and every objective is finite) and no valid point of the same group dominates it.
Invalid points are never on the frontier and never dominate.

The answer is exact (no tolerance). One or two objectives: one lexicographic sort of
all groups together, O(n log n). Three or more: pairwise dominance, vectorized over the
groups and over blocks of candidate points, O(n^2) per group.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError

# Booleans compared per numpy block in the pairwise (three or more objectives) path.
_BLOCK_ELEMENTS = 1 << 22


def pareto(ds: xr.Dataset, minimize=(), maximize=(), over=None, by=None, where=None) -> xr.DataArray:
    """True where a point is on the Pareto frontier of its group.

    ds: the sweep. minimize, maximize: names of numeric variables of `ds` (a name or a
    list; at least one objective in all). over: the dims a frontier is taken across.
    by: the dims whose combinations are separate groups. Defaults: `over` is every dim
    of the objectives not in `by`, and `by` is every dim not in `over` (neither given:
    one frontier over everything). Both given: together they must name every dim once.
    where: a boolean DataArray (or the name of a boolean variable, e.g. "fits") over a
    subset of the objectives' dims; False points are excluded. Points where an
    objective is NaN or infinite are excluded too.

    Returns a boolean DataArray with the dims and coordinates of the objectives
    (broadcast against each other).
    """
    if not isinstance(ds, xr.Dataset):
        raise InputError(f"ds={type(ds).__name__} is not allowed; allowed: an xarray.Dataset")
    mins, maxs = _names("minimize", minimize), _names("maximize", maximize)
    both = [n for n in mins if n in maxs]
    if both:
        raise InputError(f"objective {both[0]!r} is in both minimize and maximize; allowed: each "
                         "objective in one list")
    if not mins and not maxs:
        raise InputError("minimize=[] and maximize=[] is not allowed; allowed: at least one variable "
                         f"of the dataset: {', '.join(map(str, ds.data_vars))}")
    mins, maxs = list(dict.fromkeys(mins)), list(dict.fromkeys(maxs))
    objectives = [_objective(ds, n, "minimize") for n in mins] + [_objective(ds, n, "maximize") for n in maxs]
    objectives = list(xr.broadcast(*objectives))
    template = objectives[0]
    dims = tuple(template.dims)
    over_dims, by_dims = _groups(dims, over, by)

    mask = _mask(ds, where, template)
    order = list(by_dims) + list(over_dims)
    shape = tuple(template.sizes[d] for d in order)
    n_groups = int(np.prod([template.sizes[d] for d in by_dims], dtype=np.int64))
    n_points = int(np.prod([template.sizes[d] for d in over_dims], dtype=np.int64))
    signs = np.array([1.0] * len(mins) + [-1.0] * len(maxs))
    values = np.stack([np.asarray(o.transpose(*order).values, dtype=float) for o in objectives], axis=-1)
    values = (values * signs).reshape(n_groups, n_points, len(signs))
    valid = np.asarray(mask.transpose(*order).values, dtype=bool).reshape(n_groups, n_points)
    valid = valid & np.isfinite(values).all(axis=-1)

    on = _frontier_sorted(values, valid) if len(signs) <= 2 else _frontier_pairwise(values, valid)

    out = template.transpose(*order).copy(data=on.reshape(shape)).transpose(*dims)
    out.name = "pareto"
    out.attrs = {"long_name": "on the Pareto frontier", "minimize": ", ".join(mins),
                 "maximize": ", ".join(maxs), "over": ", ".join(over_dims), "by": ", ".join(by_dims)}
    return out


def _names(arg: str, value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    names = list(value)
    for v in names:
        if not isinstance(v, str):
            raise InputError(f"{arg}={v!r} is not allowed; allowed: a name or a list of names")
    return names


def _objective(ds: xr.Dataset, name: str, arg: str) -> xr.DataArray:
    if name not in ds.data_vars:
        raise InputError(f"{arg}={name!r} is not a variable of the dataset; allowed: "
                         f"{', '.join(map(str, ds.data_vars))}")
    da = ds[name]
    if not (np.issubdtype(da.dtype, np.number) or np.issubdtype(da.dtype, np.bool_)):
        numeric = [str(v) for v in ds.data_vars if np.issubdtype(ds[v].dtype, np.number)]
        raise InputError(f"{arg}={name!r} has dtype {da.dtype}, not a number; allowed: {', '.join(numeric)}")
    return da


def _groups(dims: tuple, over, by) -> tuple[list, list]:
    """The `over` and `by` dims, checked against the objectives' dims."""
    over_l, by_l = _names("over", over), _names("by", by)
    for arg, names in (("over", over_l), ("by", by_l)):
        for d in names:
            if d not in dims:
                raise InputError(f"{arg}={d!r} is not a dimension of the objectives; allowed: "
                                 f"{', '.join(map(str, dims)) or '(none: the objectives are scalars)'}")
    if over is None:
        over_l = [d for d in dims if d not in by_l]
    elif by is None:
        by_l = [d for d in dims if d not in over_l]
    else:
        overlap = [d for d in over_l if d in by_l]
        if overlap:
            raise InputError(f"dimension {overlap[0]!r} is in both over and by; allowed: each dim in one")
        missing = [d for d in dims if d not in over_l and d not in by_l]
        if missing:
            raise InputError(f"dimension {missing[0]!r} is in neither over nor by; allowed: give every "
                             f"dim of the objectives ({', '.join(map(str, dims))}) to one of them, or "
                             "give only one of over and by")
    # Keep the objectives' order of dims, whatever order they were named in.
    return [d for d in dims if d in over_l], [d for d in dims if d in by_l]


def where_variable(ds: xr.Dataset, where, forms: str) -> xr.DataArray:
    """`where` given as a boolean variable's name or a boolean DataArray, checked (pareto's and
    scaling's); `forms` names what the caller allows."""
    named = isinstance(where, str)
    if named:
        if where not in ds.data_vars:
            raise InputError(f"where={where!r} is not a variable of the dataset; allowed: "
                             f"{', '.join(map(str, ds.data_vars))}")
        where = ds[where]
    elif not isinstance(where, xr.DataArray):
        raise InputError(f"where={type(where).__name__} is not allowed; allowed: {forms}")
    if where.dtype != bool:
        said = f"={where.name!r}" if named else ""
        raise InputError(f"where{said} has dtype {where.dtype}; allowed: booleans (True: a point to use, e.g. fits)")
    return where


def _mask(ds: xr.Dataset, where, template: xr.DataArray) -> xr.DataArray:
    if where is None:
        return xr.ones_like(template, dtype=bool)
    where = where_variable(ds, where, "a boolean DataArray or the name of a boolean variable")
    extra = [d for d in where.dims if d not in template.dims]
    if extra:
        raise InputError(f"where has dimension {extra[0]!r}, which the objectives do not have; allowed: "
                         f"{', '.join(map(str, template.dims)) or '(none)'}")
    try:
        xr.align(where, template, join="exact")
    except ValueError as err:
        raise InputError(f"where's coordinates differ from the objectives' ({err})") from None
    return where.broadcast_like(template)


def _frontier_sorted(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Frontier for one or two objectives (minimized), all groups in one sort.

    Sorted by (group, f1, f2), a point (a, b) is dominated exactly when an earlier point
    of its group with a strictly smaller f1 has f2 <= b, or a point with the same f1 has
    f2 < b. So it is on the frontier when b is the smallest f2 of its (group, f1) block
    and the running minimum of f2 over the group's earlier blocks is > b. f2 is replaced
    by its integer rank so that the segmented running minimum is exact."""
    n_groups, n_points, k = values.shape
    g_idx, p_idx = np.nonzero(valid)
    on = np.zeros((n_groups, n_points), dtype=bool)
    if g_idx.size == 0:
        return on
    f1 = values[g_idx, p_idx, 0]
    f2 = values[g_idx, p_idx, 1] if k == 2 else np.zeros_like(f1)
    order = np.lexsort((f2, f1, g_idx))
    g, a = g_idx[order], f1[order]
    rank = np.unique(f2[order], return_inverse=True)[1].astype(np.int64).ravel()
    n_ranks = int(rank.max()) + 1
    m = order.size
    positions = np.arange(m)
    new_group = np.ones(m, dtype=bool)
    new_group[1:] = g[1:] != g[:-1]
    new_block = new_group.copy()
    new_block[1:] |= a[1:] != a[:-1]
    block_start = np.maximum.accumulate(np.where(new_block, positions, 0))
    # Segmented running minimum of the rank: earlier groups get larger offsets, so the
    # running minimum restarts at each group; the offset is removed afterwards.
    offset = (n_groups - 1 - g.astype(np.int64)) * n_ranks
    running = np.minimum.accumulate(rank + offset) - offset
    before = running[np.maximum(block_start - 1, 0)]
    before = np.where(new_group[block_start], n_ranks, before)  # the group's first block
    on_sorted = (rank == rank[block_start]) & (before > rank)
    on[g, p_idx[order]] = on_sorted
    return on


def _frontier_pairwise(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Frontier for any number of objectives (minimized): every valid point against
    every valid point of its group, vectorized over groups and blocks of candidates."""
    n_groups, n_points, k = values.shape
    v = np.where(valid[..., None], values, np.nan)  # NaN compares False: never dominates
    dominated = np.zeros((n_groups, n_points), dtype=bool)
    step = max(1, _BLOCK_ELEMENTS // max(1, n_groups * n_points))
    for start in range(0, n_points, step):
        stop = min(start + step, n_points)
        no_worse = np.ones((n_groups, stop - start, n_points), dtype=bool)
        equal = np.ones_like(no_worse)
        for j in range(k):  # one objective at a time: no (groups, block, points, k) array
            cand, other = v[:, start:stop, None, j], v[:, None, :, j]
            no_worse &= other <= cand
            equal &= other == cand
        dominated[:, start:stop] = (no_worse & ~equal).any(axis=-1)
    return valid & ~dominated
