"""Shared plotting helpers: unit-aware labels, SI scaling, log ticks, titles, input checks."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from ..errors import InputError


DECODE_PARTS = ("decode_compute_s", "decode_memory_s", "decode_comm_s", "decode_overhead_s")
PREFILL_PARTS = ("prefill_compute_s", "prefill_memory_s", "prefill_comm_s", "prefill_overhead_s")
POINT_COLUMNS = ("label", "intensity_flops_per_byte", "flops_per_s")
MEMORY_EFF_AT_BYTES = 1e9  # the achievable roof uses the memory efficiency of a 1 GB stream

# Units that take an SI prefix glued on ("ms", "TFLOP/s"); other units with a unit
# attribute take a spaced multiplier word ("k tokens/s", "M USD") and only upwards.
_SI_UNITS = ("s", "B", "B/s", "FLOP", "FLOP/s", "W", "J")
_UP = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_DOWN = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))
# Words that units.unit_attrs puts in brackets after the stem; the axis unit says them.
_UNIT_WORDS = ("seconds", "bytes/s", "bytes", "FLOP/s", "FLOPs", "tokens/s", "US dollars",
               "watts", "joules", "per second")


# --------------------------------------------------------------------------- labels


def si_scale(values, unit: str | None) -> tuple[float, str]:
    """(scale, shown unit) for `values` in SI `unit`: plot `values / scale` against
    `shown unit`. The prefix puts the largest finite magnitude in [1, 1000); seconds never
    go above "s"; non-SI units ("tokens/s", "USD") only scale up, from 1e5 ("k tokens/s")."""
    if not unit or unit == "1":
        return 1.0, unit or ""
    arr = np.abs(np.asarray(getattr(values, "values", values), dtype=float))
    arr = arr[np.isfinite(arr) & (arr > 0)]
    mag = float(arr.max()) if arr.size else 1.0
    si = unit in _SI_UNITS
    if mag >= (1e3 if si else 1e5) and not (si and unit == "s"):
        for scale, prefix in _UP:
            if mag >= scale:
                return scale, (prefix + unit) if si else f"{prefix} {unit}"
    if mag < 1 and si:
        for scale, prefix in _DOWN:
            if mag >= scale:
                return scale, prefix + unit
        return _DOWN[-1][0], _DOWN[-1][1] + unit
    return 1.0, unit


def _words(obj, name: str | None = None) -> str:
    """The long name without the unit words that the axis unit already says:
    'tpot (seconds)' -> 'tpot', 'output (tokens/s per device)' -> 'output per device'."""
    attrs = getattr(obj, "attrs", {}) or {}
    name = name or getattr(obj, "name", None) or ""
    text = str(attrs.get("long_name") or str(name).replace("_", " "))
    m = re.fullmatch(r"(.*?)\s*\(([^()]*)\)", text)
    if m:
        stem, inner = m.groups()
        for w in _UNIT_WORDS:
            if inner == w or inner.startswith(w + " "):
                return " ".join(p for p in (stem, inner[len(w):].strip()) if p) or text
    return text


def _label(text: str, unit: str) -> str:
    return f"{text} [{unit}]" if unit and unit != "1" else text


def label(da, values=None) -> str:
    """'long name [unit]' for a DataArray (or coordinate), the unit SI-prefixed for the
    range of `values` (default: the DataArray's own values): 'tpot [ms]'."""
    unit = (getattr(da, "attrs", {}) or {}).get("units")
    _, shown = si_scale(da if values is None else values, unit)
    return _label(_words(da), shown)


class _PlainLogFormatter(LogFormatter):
    """Log-axis tick labels as plain numbers (30, 0.1), minor ticks labelled only when
    the axis spans less than about a decade (matplotlib's own rule)."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:g}"


def _log_ticks(ax, which: str) -> None:
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(_PlainLogFormatter(labelOnlyBase=False))
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))


def _tick(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:g}"
    return str(v)


# --------------------------------------------------------------------------- helpers


def _axes(ax, figsize=(6.4, 4.4)):
    if ax is not None:
        return _root(ax), ax
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=figsize, layout="constrained")
        ax = fig.add_subplot()
    return fig, ax


def _root(ax) -> Figure:
    try:
        return ax.get_figure(root=True)
    except TypeError:  # matplotlib < 3.10: no subfigures to climb out of
        return ax.figure


def _var(ds: xr.Dataset, var: str) -> xr.DataArray:
    if var not in ds.data_vars and var not in ds.coords:
        raise InputError(f"variable {var!r} is not in the Dataset; allowed: {', '.join(map(str, ds.data_vars))}")
    da = ds[var]
    if not np.issubdtype(da.dtype, np.number):
        raise InputError(f"variable {var!r} is not numeric (dtype {da.dtype}); plot a numeric variable")
    return da


def _dim(ds: xr.Dataset, dim: str | None, arg: str) -> None:
    if dim is not None and dim not in ds.dims:
        raise InputError(f"{arg}={dim!r} is not a dimension of the Dataset; allowed: {', '.join(map(str, ds.dims))}")


def _only(ds: xr.Dataset, da: xr.DataArray, keep, what: str) -> xr.DataArray:
    """`da` over exactly the dims in `keep` (broadcast to them if needed); other dims must
    have one value (dropped) or the error names them."""
    keep = [d for d in keep if d is not None]
    for d in keep:
        if d not in da.dims:
            da = da.expand_dims({d: ds[d].values}).assign_coords({d: ds[d]})
    extra = [d for d in da.dims if d not in keep and da.sizes[d] > 1]
    if extra:
        raise InputError(f"{what}: dims {extra} have more than one value; select one first, "
                         f"e.g. ds.sel({extra[0]}=...) or ds.isel({extra[0]}=0)")
    da = da.squeeze([d for d in da.dims if d not in keep], drop=True)
    return da.transpose(*keep)


def _context(da: xr.DataArray, keep=()) -> str:
    """The single values a plot was selected at, for its title: 'hardware=h100_sxm'."""
    items = [(k, c.values.item() if c.ndim == 0 else c.values[0]) for k, c in da.coords.items()
             if k not in keep and (c.ndim == 0 or (c.ndim == 1 and c.size == 1 and k in da.dims))]
    return ", ".join(f"{k}={_tick(v)}" for k, v in items)


def _title(ax, text: str, context: str = "") -> None:
    context = textwrap.fill(context, width=72, max_lines=2, placeholder=" …") if context else ""
    ax.set_title(text + (f"\n{context}" if context else ""), fontsize=10)


def _num(v: float) -> str:
    """Cell text: 3 significant figures, thousands written out (1,150 not 1.15e+03)."""
    return f"{v:,.0f}" if 1e3 <= abs(v) < 1e7 else f"{v:.3g}"


def _feasible(ds: xr.Dataset, da: xr.DataArray, only_fits: bool) -> xr.DataArray:
    if only_fits and "fits" in ds and ds["fits"].dtype == bool:
        return da.where(ds["fits"]).assign_attrs(da.attrs)
    return da


def _coord_label(ds: xr.Dataset, dim: str) -> str:
    c = ds[dim]
    return label(c) if "units" in c.attrs else _words(c, dim)


# --------------------------------------------------------------------------- roofline


def _side_labels(ax, items, fontsize: float = 9, gap_pt: float = 11.0, near_pt: float = 120.0) -> None:
    """Write each (x, y, text, colour) right of its point; a label whose point lies
    within `near_pt` horizontally of an already placed one moves up until `gap_pt`
    separates them. Call after the scales and limits are set."""
    ax.get_xlim(), ax.get_ylim()  # settle autoscaling before reading the transform
    pt = _root(ax).dpi / 72.0
    placed: list[tuple[float, float]] = []
    for x, y, text, c in sorted(items, key=lambda t: t[1]):
        x_px, y_px = ax.transData.transform((x, y))
        want = y_px
        for px, py in placed:
            if abs(px - x_px) < near_pt * pt and want < py + gap_pt * pt:
                want = py + gap_pt * pt
        placed.append((x_px, want))
        ax.annotate(text, (x, y), xytext=(6, (want - y_px) / pt), textcoords="offset points",
                    ha="left", va="center", fontsize=fontsize, color=c)

