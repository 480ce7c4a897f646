"""The two array operations that numpy does not dispatch to xarray: `where` and a
table lookup. Everything else in the primitives is plain ufunc arithmetic, which
broadcasts a DataArray by dimension name."""
from __future__ import annotations

import numpy as np
import xarray as xr


def _is_xr(*xs) -> bool:
    return any(isinstance(x, (xr.DataArray, xr.Dataset)) for x in xs)


def where(cond, a, b):
    """np.where that keeps DataArray dimensions."""
    return xr.where(cond, a, b) if _is_xr(cond, a, b) else np.where(cond, a, b)


def elementwise(fn, x):
    """Apply an ndarray function `fn` to x, keeping DataArray dimensions."""
    return xr.apply_ufunc(fn, x) if _is_xr(x) else fn(np.asarray(x, dtype=float))
