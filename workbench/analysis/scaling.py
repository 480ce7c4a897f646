"""Scaling exponents and regime crossovers of a sweep along one dimension.

    scaling(ds, "tpot_s", "batch")            local and asymptotic exponents p of tpot ~ a·batch^p
    crossovers(ds, "batch")                   where `bound` changes along batch
    crossover_where(ds, "decode_compute_s", "decode_memory_s", "batch")
                                              the batch where the two terms are equal

All three are vectorized over the other dimensions: the arithmetic runs on whole arrays
with `dim` as the last axis. Log-log quantities need a positive numeric coordinate on
`dim`; a dim whose coordinate is not increasing is sorted first.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import InputError
from .pareto import where_variable


def scaling(ds: xr.Dataset, var: str, dim: str, tail: float = 0.3, where=None) -> xr.Dataset:
    """Power-law exponents of `var` along `dim`.

    local_exponent: d log(var) / d log(dim) at every point (np.gradient on the logs:
        second-order central differences inside, one-sided at the ends; exact for a
        power law), same dims as `var`.
    asymptotic_exponent, asymptotic_prefactor: p and a of the least-squares fit
        log(var) = log(a) + p·log(dim) over the last `tail` fraction of the dim's points
        that `where` keeps (at least 2; points where var is NaN or <= 0 are left out of
        the fit, and the result is NaN where fewer than 2 remain). Dims: those of `var`
        except `dim`.
    where: the points the fit may use: None (the default) keeps the points where the
        dataset's `fits` is True (every point when it has no `fits`: a point that does not
        fit in memory is no point of the curve), True every point, or a boolean variable
        (its name, or a DataArray) whose dims are among those of `var` (a dim of `where`
        that `var` lacks must hold at every point of it).
    fit_points, left_out_points, fit_from, fit_to: per series, the points in the fit, the
        points `where` left out, and the first and last coordinate of the fit. Attributes
        `left_out` (points left out, all series), `where`, and `tail_points`, `tail_from`,
        `tail_to` (the fit's span over all series).
    Points where var <= 0 have no logarithm: their local exponents (and their
    neighbours') are NaN.
    """
    da = _variable(ds, var, "var", numeric=True)
    da = _sorted_along(da, dim, "var", var)
    x = _log_coordinate(da, dim)
    if isinstance(tail, bool) or not isinstance(tail, (int, float, np.number)) or not 0 < tail <= 1:
        raise InputError(f"tail={tail!r} is not allowed; allowed: a fraction in (0, 1]")
    other = [d for d in da.dims if d != dim]
    keep, where_text = _kept(ds, da, where, dim)
    keep = np.asarray(keep.transpose(*other, dim).values, dtype=bool)
    ly = _log(np.asarray(da.transpose(*other, dim).values, dtype=float))
    local = np.gradient(ly, x, axis=-1)

    # the tail of each series: the last ceil(tail·n) of its n kept points (2 at least)
    n_kept = keep.sum(axis=-1)
    m = np.minimum(n_kept, np.maximum(2, np.ceil(tail * n_kept - 1e-9).astype(int)))
    from_end = np.cumsum(keep[..., ::-1], axis=-1)[..., ::-1]  # kept points at or after each one
    in_tail = keep & (from_end <= m[..., None])
    slope, intercept = _fit_line(x, np.where(in_tail, ly, np.nan))

    units = da.attrs.get("units", "")
    flat = da.isel({dim: 0}, drop=True)
    local_da = da.transpose(*other, dim).copy(data=local).transpose(*da.dims)
    local_da.attrs = {"units": "1", "long_name": f"local exponent d log {var} / d log {dim}"}
    exponent = flat.copy(data=slope)
    exponent.attrs = {"units": "1", "long_name": f"asymptotic exponent p of {var} ~ a·{dim}^p"}
    prefactor = flat.copy(data=np.exp(intercept))
    prefactor.attrs = {"units": f"{units or '1'} / {dim}^p",
                       "long_name": f"asymptotic prefactor a of {var} ~ a·{dim}^p"}
    coord = np.asarray(da[dim].values, dtype=float)
    fitted = in_tail & np.isfinite(ly)
    with np.errstate(invalid="ignore"):
        first = np.where(fitted.any(-1), coord[np.argmax(fitted, axis=-1)], np.nan)
        last = np.where(fitted.any(-1), coord[coord.size - 1 - np.argmax(fitted[..., ::-1], axis=-1)], np.nan)
    counts = {"fit_points": (fitted.sum(axis=-1), f"points of {var} in the fit"),
              "left_out_points": ((~keep).sum(axis=-1), f"points left out of the fit by where ({where_text})"),
              "fit_from": (first, f"first {dim} in the fit"), "fit_to": (last, f"last {dim} in the fit")}
    out = {"local_exponent": local_da, "asymptotic_exponent": exponent, "asymptotic_prefactor": prefactor}
    for name, (values, long_name) in counts.items():
        out[name] = flat.copy(data=values)
        out[name].attrs = {"long_name": long_name, **({"units": "1"} if name.endswith("points") else {})}
    span = coord[in_tail.any(axis=tuple(range(in_tail.ndim - 1)))] if in_tail.any() else np.array([np.nan])
    return xr.Dataset(out, attrs={**ds.attrs, "var": var, "dim": dim, "tail": float(tail),
                                  "tail_points": int(m.max(initial=0)), "tail_from": float(span[0]),
                                  "tail_to": float(span[-1]), "where": where_text,
                                  "left_out": int((~keep).sum())})


def _kept(ds: xr.Dataset, da: xr.DataArray, where, dim: str) -> tuple[xr.DataArray, str]:
    """The points the fit may use, as a boolean array like `da`, and what chose them."""
    if where is None:
        if "fits" not in ds.data_vars:
            return xr.ones_like(da, dtype=bool), "every point (the dataset has no fits)"
        where, text = ds["fits"], "fits"
    elif where is True:
        return xr.ones_like(da, dtype=bool), "every point"
    else:
        text = where if isinstance(where, str) else str(getattr(where, "name", None) or "the where array")
        where = where_variable(ds, where, "None (fits where the dataset has it), True (every point), a boolean "
                                          "variable's name or a boolean DataArray")
    extra = [d for d in where.dims if d not in da.dims]
    if extra:
        where = where.all(extra)
    if dim in where.dims and dim in where.coords:
        where = xr.align(where, da, join="right", fill_value=False)[0]
    return xr.broadcast(where, da)[0].astype(bool), text


def crossovers(ds, dim: str, label: str = "bound") -> pd.DataFrame:
    """Every place along `dim` where `label` changes, for every combination of the
    other dims.

    ds: a Dataset (the label is ds[label]) or the label DataArray itself. Two missing
    labels (NaN, None) in a row are no change. Returns a DataFrame with one row per
    change, ordered by the other dims then `dim`: a column per other dim (its
    coordinate), `{dim}_before` and `{dim}_after` (the two neighbouring coordinates that
    bracket the change), `from` and `to` (the labels there).
    """
    lab = ds if isinstance(ds, xr.DataArray) else _variable(ds, label, "label", numeric=False)
    lab = _sorted_along(lab, dim, "label", label)
    other = [d for d in lab.dims if d != dim]
    a = np.asarray(lab.transpose(*other, dim).values)
    missing = np.asarray(pd.isna(a), dtype=bool)
    change = np.asarray(a[..., 1:] != a[..., :-1], dtype=bool) & ~(missing[..., 1:] & missing[..., :-1])
    where = np.nonzero(change)
    pos = where[-1]
    columns = {d: _coordinate(lab, d)[i] for d, i in zip(other, where[:-1])}
    x = _coordinate(lab, dim)
    columns[f"{dim}_before"] = x[pos]
    columns[f"{dim}_after"] = x[pos + 1]
    columns["from"] = a[where]
    columns["to"] = a[where[:-1] + (pos + 1,)]
    return pd.DataFrame(columns)


def crossover_where(ds: xr.Dataset, var_a: str, var_b: str, dim: str) -> xr.DataArray:
    """The value of `dim` where var_a = var_b, interpolated linearly in log-log between
    the two grid points that bracket the first sign change of log(var_a / var_b) (exact
    for two power laws); a grid point where they are equal is its own answer. NaN where
    they do not cross inside the grid (or a term is NaN or <= 0 at every bracket). Dims:
    those of var_a and var_b together, except `dim`."""
    a = _variable(ds, var_a, "var_a", numeric=True)
    b = _variable(ds, var_b, "var_b", numeric=True)
    a, b = xr.broadcast(a, b)
    a = _sorted_along(a, dim, "var_a", var_a)
    b = b.sortby(dim) if dim in b.coords else b
    x = _log_coordinate(a, dim)
    other = [d for d in a.dims if d != dim]
    d = _log(np.asarray(a.transpose(*other, dim).values, dtype=float)) - \
        _log(np.asarray(b.transpose(*other, dim).values, dtype=float))
    d0, d1 = d[..., :-1], d[..., 1:]
    hit = (np.sign(d0) * np.sign(d1) <= 0) & np.isfinite(d0) & np.isfinite(d1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d0 == d1, 0.0, d0 / (d0 - d1))
    lx = x[:-1] + t * np.diff(x)
    first = np.argmax(hit, axis=-1)[..., None]
    value = np.where(hit.any(axis=-1), np.exp(np.take_along_axis(lx, first, axis=-1)[..., 0]), np.nan)
    out = a.isel({dim: 0}, drop=True).copy(data=value)
    out.name = f"{dim}_crossover"
    out.attrs = {"long_name": f"{dim} where {var_a} = {var_b}"}
    if "units" in a[dim].attrs:
        out.attrs["units"] = a[dim].attrs["units"]
    return out


# ---- helpers ---------------------------------------------------------------------------------
def _variable(ds, name: str, arg: str, *, numeric: bool) -> xr.DataArray:
    if not isinstance(ds, xr.Dataset):
        raise InputError(f"ds={type(ds).__name__} is not allowed; allowed: an xarray.Dataset")
    if name not in ds.data_vars:
        raise InputError(f"{arg}={name!r} is not a variable of the dataset; allowed: "
                         f"{', '.join(map(str, ds.data_vars))}")
    da = ds[name]
    if numeric and not np.issubdtype(da.dtype, np.number):
        allowed = [str(v) for v in ds.data_vars if np.issubdtype(ds[v].dtype, np.number)]
        raise InputError(f"{arg}={name!r} has dtype {da.dtype}, not a number; allowed: {', '.join(allowed)}")
    return da


def _sorted_along(da: xr.DataArray, dim: str, arg: str, name) -> xr.DataArray:
    """`da` with `dim` checked, and sorted when its coordinate is numeric and unsorted."""
    if dim not in da.dims:
        raise InputError(f"dim={dim!r} is not a dimension of {arg} {name!r}; allowed: "
                         f"{', '.join(map(str, da.dims)) or '(none: it is a scalar)'}")
    if da.sizes[dim] < 2:
        raise InputError(f"dim={dim!r} has {da.sizes[dim]} point; allowed: a dim with at least 2 points")
    if dim in da.coords and np.issubdtype(da[dim].dtype, np.number):
        x = np.asarray(da[dim].values, dtype=float)
        if np.any(np.diff(x) == 0) or np.unique(x).size != x.size:
            raise InputError(f"dim={dim!r} has repeated coordinate values; allowed: distinct values")
        if np.any(np.diff(x) < 0):
            da = da.sortby(dim)
    return da


def _log_coordinate(da: xr.DataArray, dim: str) -> np.ndarray:
    if dim not in da.coords or not np.issubdtype(da[dim].dtype, np.number):
        raise InputError(f"dim={dim!r} has no numeric coordinate; allowed: a dim whose coordinate "
                         "is positive numbers (log-log needs them)")
    x = np.asarray(da[dim].values, dtype=float)
    if not np.all(np.isfinite(x) & (x > 0)):
        bad = x[~(np.isfinite(x) & (x > 0))][0]
        raise InputError(f"dim={dim!r} has coordinate {bad:g}; allowed: positive finite values "
                         "(log-log needs them)")
    return np.log(x)


def _coordinate(da: xr.DataArray, dim: str) -> np.ndarray:
    return np.asarray(da[dim].values) if dim in da.coords else np.arange(da.sizes[dim])


def _log(y: np.ndarray) -> np.ndarray:
    """log(y) where y > 0, NaN elsewhere (and where y is NaN)."""
    positive = y > 0
    return np.where(positive, np.log(np.where(positive, y, 1.0)), np.nan)


def _fit_line(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope and intercept of y = intercept + slope·x along the last axis,
    leaving out the non-finite y of each series; NaN with fewer than 2 points left."""
    ok = np.isfinite(y)
    count = ok.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_mean = np.where(ok, x, 0.0).sum(axis=-1) / count
        y_mean = np.where(ok, y, 0.0).sum(axis=-1) / count
        dx = np.where(ok, x - x_mean[..., None], 0.0)
        dy = np.where(ok, y - y_mean[..., None], 0.0)
        sxx = (dx * dx).sum(axis=-1)
        slope = np.where((count >= 2) & (sxx > 0), (dx * dy).sum(axis=-1) / sxx, np.nan)
    return slope, y_mean - slope * x_mean
