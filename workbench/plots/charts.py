"""Pareto fronts, stacked breakdowns, heatmaps and scaling curves from predict Datasets."""
from __future__ import annotations


import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..errors import InputError


from .labels import *  # noqa: F401,F403
from .labels import _side_labels  # noqa: F401
from .labels import (_axes, _context, _coord_label, _dim, _feasible, _label, _log_ticks, _num, _only,  # noqa: F401
                     _tick, _title, _var, _words)

def pareto_front(ds: xr.Dataset, x: str, y: str, hue: str | None = None, mask=None, ax=None, *,
                 where: str = "auto", log: bool = False, only_fits: bool = True) -> Figure:
    """All points of `y` against `x` (light) and the frontier points (`mask`, a boolean
    DataArray such as workbench.analysis.pareto returns) joined by a step line, one
    colour per value of dim `hue`. The step runs along the edge of the dominated region:
    `where`="auto" takes "pre" for a falling front (both axes maximized) and "post" for
    a rising one; pass "pre", "post" or "none" (straight segments) to override."""
    dx, dy = _var(ds, x), _var(ds, y)
    _dim(ds, hue, "hue")
    if where not in ("auto", "pre", "post", "none"):
        raise InputError(f"where={where!r} is not known; allowed: auto, pre, post, none")
    arrays = [_feasible(ds, dx, only_fits), _feasible(ds, dy, only_fits)]
    if mask is not None:
        if not isinstance(mask, xr.DataArray) or mask.dtype != bool:
            raise InputError(f"mask={type(mask).__name__} is not allowed; allowed: a boolean DataArray")
        extra = [d for d in mask.dims if d not in ds.dims]
        if extra:
            raise InputError(f"mask: dims {extra} are not dimensions of the Dataset")
        arrays.append(mask)
    if hue is not None:
        arrays.append(ds[hue])
    b = xr.broadcast(*arrays)
    bx, by = b[0], b[1]
    bm = b[2] if mask is not None else xr.zeros_like(bx, dtype=bool)
    xs_scale, xunit = si_scale(bx, dx.attrs.get("units"))
    ys_scale, yunit = si_scale(by, dy.attrs.get("units"))
    groups = [(None, {})] if hue is None else [(v, {hue: v}) for v in ds[hue].values]
    colors = sns.color_palette("deep", n_colors=len(groups))

    fig, ax = _axes(ax)
    for (value, sel), c in zip(groups, colors):
        gx = bx.sel(sel).values.ravel() / xs_scale
        gy = by.sel(sel).values.ravel() / ys_scale
        gm = bm.sel(sel).values.ravel()
        ok = np.isfinite(gx) & np.isfinite(gy)
        name = "all points" if value is None else _tick(value)
        ax.scatter(gx[ok], gy[ok], color=c, alpha=0.3, s=16, lw=0,
                   label=None if mask is not None else name)
        front = ok & gm
        if front.any():
            fx, fy = gx[front], gy[front]
            order = np.argsort(fx, kind="stable")
            fx, fy = fx[order], fy[order]
            w = where if where != "auto" else ("pre" if fy[-1] < fy[0] else "post")
            ax.plot(fx, fy, drawstyle="default" if w == "none" else f"steps-{w}", color=c, lw=1.8,
                    marker="o", ms=5, mec="white", mew=0.6, label=name if value is not None else "Pareto front")
    if log:
        for axis in ("x", "y"):
            getattr(ax, f"set_{axis}scale")("log")
            _log_ticks(ax, axis)
    ax.set_xlabel(_label(_words(dx), xunit))
    ax.set_ylabel(_label(_words(dy), yunit))
    _title(ax, f"Pareto front: {_words(dy)} vs {_words(dx)}", _context(dx, [hue]))
    if mask is not None:
        ax.scatter([], [], color="grey", alpha=0.3, s=16, lw=0, label="all points")
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(title=hue, fontsize=8, title_fontsize=8)
    return fig


# --------------------------------------------------------------------------- breakdown


def _common_prefix(texts: list[str]) -> tuple[str, list[str]]:
    words = [t.split() for t in texts]
    n = 0
    while all(len(w) > n + 1 for w in words) and len({w[n] for w in words}) == 1:
        n += 1
    return " ".join(words[0][:n]), [" ".join(w[n:]) for w in words]


def breakdown(ds: xr.Dataset, parts=DECODE_PARTS, by: str | None = None, ax=None, *,
              total: str | None = None) -> Figure:
    """Stacked bars of the time `parts` (default: the decode step's compute, memory,
    comm and overhead) for each value of dim `by` (default: the one dim with more than
    one value). Other dims must have one value; select them first. The parts are the
    upper bound (no overlap); `total` (e.g. "tpot_s") marks the model's estimate on each
    bar. Bars of points that do not fit (`fits` False) are hatched."""
    parts = list(parts)
    if not parts:
        raise InputError("parts=[] is not allowed; allowed: one or more variable names")
    das = [_var(ds, p) for p in parts]
    units = {d.attrs.get("units") for d in das}
    base_unit = next(iter(units))
    if len(units) > 1:
        raise InputError(f"parts have different units {sorted(map(str, units))}; stack parts of one unit")
    if by is None:
        multi = sorted({d for da in das for d in da.dims if da.sizes[d] > 1})
        if len(multi) != 1:
            raise InputError(f"by=None: cannot choose among dims {multi}; pass by=<dim>")
        by = multi[0]
    _dim(ds, by, "by")
    context = _context(das[0], [by])
    das = [_only(ds, da, [by], f"breakdown of {p} by {by!r}") for p, da in zip(parts, das)]
    stacked = np.vstack([da.values.astype(float) for da in das])
    scale, unit = si_scale(np.nansum(stacked, axis=0), base_unit)
    prefix, names = _common_prefix([_words(da, p) for da, p in zip(das, parts)])
    fits = (_only(ds, ds["fits"], [by], "fits").values if "fits" in ds and ds["fits"].dtype == bool
            else np.ones(stacked.shape[1], bool))

    fig, ax = _axes(ax)
    pos = np.arange(stacked.shape[1])
    bottom = np.zeros(stacked.shape[1])
    colors = sns.color_palette("deep", n_colors=len(parts))
    for row, name, c in zip(stacked / scale, names, colors):
        bars = ax.bar(pos, row, bottom=bottom, width=0.7, color=c, label=name or "total",
                      edgecolor="white", lw=0.5)
        for bar, ok in zip(bars, fits):
            if not ok:
                bar.set_hatch("//")
                bar.set_alpha(0.5)
        bottom = bottom + np.nan_to_num(row)
    if total is not None:
        t = _only(ds, _var(ds, total), [by], f"breakdown total {total}").values / scale
        ax.scatter(pos, t, marker="_", s=500, lw=2.5, color="black", zorder=3,
                   label=f"{_words(ds[total], total)} (estimate)")
    ax.set_xticks(pos, [_tick(v) for v in ds[by].values])
    ax.set_xlabel(_coord_label(ds, by))
    quantity = f"{prefix} time".strip() if base_unit == "s" else (prefix or "total")
    ax.set_ylabel(_label(quantity, unit))
    _title(ax, f"{prefix or 'time'} breakdown by {by}" + ("" if fits.all() else " (hatched: does not fit)"),
           context)
    ax.grid(axis="x", visible=False)
    ax.margins(y=0.15)
    ax.legend(fontsize=8, loc="upper left", ncols=min(len(parts) + (total is not None), 5))
    return fig


# --------------------------------------------------------------------------- heatmap


def heatmap(ds: xr.Dataset, var: str, x: str, y: str, ax=None, log: bool = False, *,
            annotate: bool | None = None, only_fits: bool = True) -> Figure:
    """`var` over dims `x` (columns) and `y` (rows, increasing upwards) as an image with
    a colorbar labelled from attrs; other dims must have one value. Cells are annotated
    with their value when the grid has at most 150 cells (or `annotate`=True); cells
    that do not fit are grey."""
    da = _var(ds, var)
    _dim(ds, x, "x")
    _dim(ds, y, "y")
    if x == y:
        raise InputError(f"x and y are both {x!r}; pass two different dims")
    context = _context(da, [x, y])
    da = _only(ds, _feasible(ds, da, only_fits), [y, x], f"heatmap of {var}")
    scale, unit = si_scale(da, da.attrs.get("units"))
    data = np.ma.masked_invalid(da.values.astype(float) / scale)
    if log:
        data = np.ma.masked_less_equal(data, 0)
    cmap = sns.color_palette("mako_r", as_cmap=True).with_extremes(bad="#d9d9d9")

    fig, ax = _axes(ax, figsize=(6.4, 4.8))
    ax.grid(False)
    im = ax.imshow(data, origin="lower", aspect="auto", cmap=cmap, interpolation="nearest",
                   norm=LogNorm() if log else None)
    ny, nx = data.shape
    ax.set_xticks(np.arange(nx), [_tick(v) for v in ds[x].values])
    ax.set_yticks(np.arange(ny), [_tick(v) for v in ds[y].values])
    if annotate or (annotate is None and nx * ny <= 150):
        for (i, j), v in np.ndenumerate(data.filled(np.nan)):
            text, color = ("n/a", "#555555") if not np.isfinite(v) else (_num(v), None)
            if color is None:
                r, g, b, _ = cmap(im.norm(v))
                color = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label(_label(_words(da, var), unit))
    if log:
        _log_ticks(cbar.ax, "y")
    ax.set_xlabel(_coord_label(ds, x))
    ax.set_ylabel(_coord_label(ds, y))
    _title(ax, _label(_words(da, var), unit) + ("; grey: does not fit" if np.ma.is_masked(data) else ""),
           context)
    return fig


# --------------------------------------------------------------------------- scaling


def _exponent_for(exponent, hue, value) -> float | None:
    if exponent is None:
        return None
    if isinstance(exponent, xr.DataArray):
        if exponent.ndim == 0:
            return float(exponent)
        if hue is None or set(exponent.dims) != {hue}:
            raise InputError(f"exponent has dims {list(exponent.dims)}; allowed: a float or a DataArray over hue={hue!r}")
        return float(exponent.sel({hue: value}))
    return float(exponent)


def scaling_curve(ds: xr.Dataset, var: str, dim: str, hue: str | None = None, exponent=None,
                  ax=None, *, only_fits: bool = True) -> Figure:
    """Log-log line of `var` against the numeric dim `dim`, one line per value of `hue`;
    other dims must have one value. `exponent` (a float, or a DataArray over `hue` such as
    a fitted scaling exponent) is written "∝ dim^p" at the tail of each line."""
    da = _var(ds, var)
    _dim(ds, dim, "dim")
    _dim(ds, hue, "hue")
    if hue == dim:
        raise InputError(f"hue and dim are both {dim!r}; pass two different dims")
    xs = ds[dim].values
    if not np.issubdtype(xs.dtype, np.number):
        raise InputError(f"dim={dim!r} has non-numeric values {list(xs)}; a scaling curve needs numbers")
    context = _context(da, [hue, dim])
    da = _only(ds, _feasible(ds, da, only_fits), [hue, dim] if hue else [dim], f"scaling curve of {var}")
    scale, unit = si_scale(da, da.attrs.get("units"))
    groups = [(None, da)] if hue is None else [(v, da.sel({hue: v})) for v in ds[hue].values]
    colors = sns.color_palette("deep", n_colors=len(groups))

    fig, ax = _axes(ax)
    tails = []
    for (value, line), c in zip(groups, colors):
        ys = line.values.astype(float) / scale
        ax.plot(xs, ys, marker="o", ms=4, color=c, label=None if value is None else _tick(value))
        p = _exponent_for(exponent, hue, value)
        ok = np.isfinite(ys) & (ys > 0)
        if p is not None and ok.any():
            k = np.flatnonzero(ok)[-1]
            tails.append((xs[k], ys[k], f"∝ {dim}$^{{{p:.2f}}}$", c))
    ax.set_xscale("log")
    ax.set_yscale("log")
    if tails:  # room on the right for the tail labels
        lo, hi = float(np.min(xs)), float(np.max(xs))
        ax.set_xlim(lo / (hi / lo) ** 0.05, hi * (hi / lo) ** 0.3)
    _side_labels(ax, tails)
    ax.set_xticks(xs, [_tick(v) for v in xs])
    ax.xaxis.set_minor_locator(NullLocator())
    _log_ticks(ax, "y")
    ax.set_xlabel(_coord_label(ds, dim))
    ax.set_ylabel(_label(_words(da, var), unit))
    _title(ax, f"{_label(_words(da, var), unit)} vs {dim}", context)
    if hue is not None:
        ax.legend(title=hue, fontsize=8, title_fontsize=8)
    return fig
