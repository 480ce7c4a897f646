"""The two array operations that numpy does not dispatch to xarray: `where` and a
table lookup. Everything else in the primitives is plain ufunc arithmetic, which
broadcasts a DataArray by dimension name."""
from __future__ import annotations

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
    nested string np.where on large grids."""
    conds = [np.asarray(c, dtype=bool) for c, _ in cases]
    labels = np.array([label for _, label in cases] + [default], dtype=object)
    shape = np.broadcast_shapes(*(c.shape for c in conds)) if conds else ()
    codes = np.full(shape, len(cases), dtype=np.int8)
    for i in range(len(conds) - 1, -1, -1):  # earlier cases win: write them last
        codes[np.broadcast_to(conds[i], shape)] = i
    return np.take(labels, codes)
