"""The two array operations that numpy does not dispatch to xarray: `where` and a
table lookup. Everything else in the primitives is plain ufunc arithmetic, which
broadcasts a DataArray by dimension name.

On a million-point grid a fresh array costs more than the arithmetic that fills it (its
pages are new memory) and a chain of operations streams each 8 MB temporary through
memory: `blocks` / `blockwise` run an elementwise chain over cache-sized blocks of the
grid, `in_place` writes into a temporary the caller owns, `zero_of` keeps a constant zero
a number. Every point's numbers are those of the plain expressions, bit for bit."""
from __future__ import annotations

import itertools

import numpy as np
import xarray as xr


_XR = (xr.DataArray, xr.Dataset)


def _is_xr(*xs) -> bool:
    for x in xs:
        if isinstance(x, _XR):
            return True
    return False


_POINT = (bool, int, float, np.bool_, np.number)


def where(cond, a, b):
    """np.where that keeps DataArray dimensions (one point of plain numbers: the branch)."""
    if isinstance(cond, _POINT) and isinstance(a, _POINT) and isinstance(b, _POINT):
        both_bool = isinstance(a, (bool, np.bool_)) and isinstance(b, (bool, np.bool_))
        pick = a if cond else b
        return np.bool_(pick) if both_bool else np.float64(pick)
    return xr.where(cond, a, b) if _is_xr(cond, a, b) else np.where(cond, a, b)


def elementwise(fn, x):
    """Apply an ndarray function `fn` to x, keeping DataArray dimensions."""
    return xr.apply_ufunc(fn, x) if _is_xr(x) else fn(np.asarray(x, dtype=float))


def choose(cases, default: str):
    """A label per point: the first (condition, label) in `cases` that holds, else
    `default`. Built as small integer codes, then one take into an object array of the
    labels (8 bytes a point, the strings shared), an order of magnitude faster than
    nested string np.where on large grids; one label at every point of a grid is that
    label broadcast (a read-only view, as the grid's other constant outputs are)."""
    conds = [np.asarray(c, dtype=bool) for c, _ in cases]
    labels = np.array([label for _, label in cases] + [default], dtype=object)
    shape = np.broadcast_shapes(*(c.shape for c in conds)) if conds else ()
    codes = np.full(shape, len(cases), dtype=np.int8)
    for i in range(len(conds) - 1, -1, -1):  # earlier cases win: write them last
        if not codes.ndim:
            np.copyto(codes, np.int8(i), where=conds[i])
        else:  # i where the case holds, without a branch per point
            codes -= (codes - np.int8(i)) * np.broadcast_to(conds[i], shape)
    if not codes.ndim:
        return np.take(labels, codes)
    masks = [codes == i for i in range(len(labels))]
    counts = [int(np.count_nonzero(m)) for m in masks]
    common = int(np.argmax(counts))
    if counts[common] == codes.size:
        return np.broadcast_to(labels[common:common + 1].reshape(()), shape)
    out = np.empty(shape, dtype=object)
    out.fill(labels[common])  # the commonest label everywhere, then the others where they hold
    for i, m in enumerate(masks):
        if counts[i] and i != common:
            out[m] = labels[i]
    return out


def zero_of(x):
    """0.0 * x (0 where x is finite, -0 where it is negative, NaN where it is not), as one
    plain 0.0 where x is finite and not negative at every point: it broadcasts the same,
    without a grid of zeros."""
    x = np.asarray(x, float)
    if x.ndim and np.isfinite(x).all() and not np.signbit(x).any():
        return 0.0
    return 0.0 * x


# Points per block of a blocked elementwise chain: its temporaries (256 kB each) stay in a
# core's cache, where a million-point grid's (8 MB each) stream through main memory.
BLOCK_POINTS = 1 << 15


def blocks(shape: tuple, points: int = BLOCK_POINTS):
    """Index tuples (slices of the leading axes) that tile an array of `shape` in blocks of
    about `points` elements: the trailing axes whole, the axis before them cut. An
    elementwise chain run block by block gives the same numbers, element by element."""
    ax, inner = len(shape), 1
    while ax and inner * shape[ax - 1] <= points:
        ax -= 1
        inner *= shape[ax]
    if not ax:
        yield ()
        return
    step = max(points // inner, 1)
    for lead in itertools.product(*(range(n) for n in shape[:ax - 1])):
        for start in range(0, shape[ax - 1], step):
            yield tuple(slice(i, i + 1) for i in lead) + (slice(start, start + step),)


def block(a: np.ndarray, at: tuple, ndim: int) -> np.ndarray:
    """The part of `a` (broadcasting against an `ndim`-d grid) in the grid's block `at`."""
    lead = ndim - a.ndim
    return a[tuple(at[j + lead] if a.shape[j] > 1 else slice(None) for j in range(max(len(at) - lead, 0)))]


def blockwise(fn, **arrays) -> dict:
    """fn(**arrays) -> dict of arrays, run block by block over the grid the arrays broadcast
    to (blocks): each array that varies over the grid sliced to the block, the results
    written into arrays of the grid's shape. For an elementwise fn that reads the grid only
    through its arguments (no other array, no reduction choosing a branch) the numbers are
    the same as one call's, and its temporaries stay in cache; a grid of one block (or
    DataArrays) is one call."""
    if not any(type(v) is np.ndarray and v.size > 1 for v in arrays.values()) or _is_xr(*arrays.values()):
        return fn(**arrays)
    shape = np.broadcast_shapes(*(np.shape(v) for v in arrays.values()))
    at_all = list(blocks(shape))
    if len(at_all) == 1:
        return fn(**arrays)
    out = {}
    for at in at_all:
        part = fn(**{k: block(v, at, len(shape)) if isinstance(v, np.ndarray) and v.ndim else v
                     for k, v in arrays.items()})
        for k, v in part.items():
            if k not in out:
                out[k] = np.empty(shape, np.result_type(v))
            out[k][at] = v
    return out


def in_place(op, a, b):
    """op(a, b), written into `a` where it is an array of the result's shape and dtype (a
    temporary of the caller's: a grid's fresh arrays cost more than their arithmetic)."""
    if _fits_into(a, b):
        return op(a, b, out=a)
    return op(a, b)


def _fits_into(a, b) -> bool:
    return isinstance(a, np.ndarray) and a.ndim and a.flags.writeable and isinstance(b, (np.ndarray, float, int)) \
        and np.result_type(a, b) == a.dtype and np.broadcast_shapes(a.shape, np.shape(b)) == a.shape
