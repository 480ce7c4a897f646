"""Plots of workbench Datasets: roofline, Pareto front, time breakdown, heatmap, scaling.

Every function takes an optional matplotlib `ax` and returns the Figure. Without `ax` a
new `matplotlib.figure.Figure` is made directly (no pyplot state, Agg-safe: nothing is
shown, nothing leaks between calls); in a notebook, return it as the cell's last value
or pass `ax=` from your own `plt.subplots()`.

Axis labels come from the variables' attrs (`long_name`, `units`) with an SI prefix
chosen for the data range: seconds of 3e-3 read "ms", FLOP/s of 1e15 read "TFLOP/s"
(see `si_scale`, `label`). Points that do not fit in memory (`fits` False) are left out
of heatmaps, scaling curves and Pareto fronts unless `only_fits=False`; breakdown bars
of such points are hatched.
"""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, NullLocator

from .errors import InputError
from .specs import HardwareSpec, load_hardware

__all__ = ["DECODE_PARTS", "PREFILL_PARTS", "breakdown", "heatmap", "label", "pareto_front",
           "roofline", "roofline_points", "scaling_curve", "si_scale"]

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


def _gpu(hardware) -> HardwareSpec:
    spec = load_hardware(hardware)
    if not isinstance(spec, HardwareSpec):
        raise InputError(f"hardware={getattr(spec, 'name', hardware)!r} is a wafer; the roofline "
                         "needs a GPU spec with an HBM tier")
    return spec


def _points_frame(points) -> pd.DataFrame | None:
    if points is None:
        return None
    if isinstance(points, dict) and all(np.ndim(v) == 0 for v in points.values()):
        points = [points]
    df = pd.DataFrame(points)
    missing = [c for c in POINT_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"points: columns {missing} are missing; allowed: a dict or DataFrame "
                         f"with {', '.join(POINT_COLUMNS)}")
    return df


def roofline(hardware, points=None, dtype: str = "bf16", ax=None) -> Figure:
    """Log-log roofline of one GPU (or a list of GPUs): attainable FLOP/s per device
    against arithmetic intensity (FLOP/byte), min(peak, bandwidth · intensity) with the
    knee at peak / bandwidth (H100 bf16: 989.4e12 / 3.35e12 = 295 FLOP/B). Dashed: the
    achievable roof, peak · gemm_peak_eff and bandwidth · memory_eff(1 GB). `points`
    (dict or DataFrame with label, intensity_flops_per_byte, flops_per_s; see
    `roofline_points`) are drawn as labelled markers, hollow where `fits` is False. Roof lines carry gid
    'roof:<name>' and 'achievable:<name>'."""
    names = [hardware] if isinstance(hardware, (str, HardwareSpec)) else list(hardware)
    specs = [_gpu(h) for h in names]
    for s in specs:
        if not np.isfinite(s.peak(dtype)):
            raise InputError(f"dtype={dtype!r} has no peak on {s.name}; allowed: "
                             f"{', '.join(s.peak_flops_per_s)}")
    pts = _points_frame(points)
    ridges = [s.peak(dtype) / s.hbm.bandwidth_bytes_per_s for s in specs]
    lo, hi = min(ridges) / 300.0, max(ridges) * 30.0
    if pts is not None and len(pts):
        inten = pts["intensity_flops_per_byte"].to_numpy(float)
        inten = inten[np.isfinite(inten) & (inten > 0)]
        if inten.size:
            lo, hi = min(lo, inten.min() / 3.0), max(hi, inten.max() * 3.0)
    yscale, yunit = si_scale([s.peak(dtype) for s in specs], "FLOP/s")

    fig, ax = _axes(ax)
    colors = sns.color_palette("deep", n_colors=max(len(specs), 1))
    for s, ridge, c in zip(specs, ridges, colors):
        peak, bw = s.peak(dtype), s.hbm.bandwidth_bytes_per_s
        ax.plot([lo, ridge, hi], np.array([bw * lo, peak, peak]) / yscale, color=c, lw=2,
                label=f"{s.name} {dtype} peak (ridge {ridge:.0f} FLOP/B)", gid=f"roof:{s.name}")
        peak_a = peak * s.gemm_peak_eff_for(dtype)
        bw_a = bw * float(s.memory_eff(MEMORY_EFF_AT_BYTES))
        ridge_a = peak_a / bw_a
        ax.plot([lo, ridge_a, hi], np.array([bw_a * lo, peak_a, peak_a]) / yscale, color=c, lw=1.2,
                ls="--", label=f"{s.name} achievable", gid=f"achievable:{s.name}")
        ax.plot([ridge], [peak / yscale], marker="o", ms=4, color=c)
    labels = []
    if pts is not None and len(pts):
        marks = sns.color_palette("dark", n_colors=len(pts))
        for (_, row), c in zip(pts.iterrows(), marks):
            x, y = float(row["intensity_flops_per_byte"]), float(row["flops_per_s"]) / yscale
            fits = bool(row.get("fits", True))
            ax.scatter([x], [y], s=50, color=c if fits else "none", edgecolor="black" if fits else c,
                       lw=0.6 if fits else 1.5, zorder=3)
            labels.append((x, y, str(row["label"]) + ("" if fits else " (does not fit)"), c))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=max(s.peak(dtype) for s in specs) / yscale * 1.8)
    _side_labels(ax, labels, fontsize=8)
    _log_ticks(ax, "x")
    _log_ticks(ax, "y")
    ax.set_xlabel("arithmetic intensity [FLOP/B]")
    ax.set_ylabel(f"attainable FLOP/s per device [{yunit}]")
    ax.set_title(f"Roofline, {dtype} math: {', '.join(s.name for s in specs)}")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def roofline_points(ds: xr.Dataset, hardware=None) -> pd.DataFrame:
    """Prefill and decode operating points of a predict.inference Dataset, one row each
    per point of the grid: prefill FLOP/s = prefill_flops_per_device / ttft_s at intensity
    prefill_flops_per_device / (prefill_memory_s · HBM bandwidth); decode FLOP/s =
    decode_step_flops_per_device / tpot_s at intensity decode_step_flops_per_device /
    decode_step_bytes_per_device. The bandwidth comes from `hardware` or from the
    Dataset's `hardware` coordinate. Columns: label, phase, intensity_flops_per_byte,
    flops_per_s, the grid's dims and `fits` when the Dataset has it."""
    need = ("prefill_flops_per_device", "prefill_memory_s", "ttft_s",
            "decode_step_flops_per_device", "decode_step_bytes_per_device", "tpot_s")
    for v in need:
        _var(ds, v)
    if hardware is not None:
        bw = _gpu(hardware).hbm.bandwidth_bytes_per_s
    elif "hardware" in ds.variables:
        hw = ds["hardware"]
        bw = xr.DataArray(np.vectorize(lambda n: _gpu(n).hbm.bandwidth_bytes_per_s, otypes=[float])(hw.values),
                          dims=hw.dims, coords=hw.coords)
    else:
        raise InputError("hardware=None: the Dataset has no 'hardware' coordinate; pass hardware=<name>")
    pre_flops = ds["prefill_flops_per_device"]
    phases = {
        "prefill": (pre_flops / (ds["prefill_memory_s"] * bw), pre_flops / ds["ttft_s"]),
        "decode": (ds["decode_step_flops_per_device"] / ds["decode_step_bytes_per_device"],
                   ds["decode_step_flops_per_device"] / ds["tpot_s"]),
    }
    frames = []
    for phase, (inten, fps) in phases.items():
        parts = {"intensity_flops_per_byte": inten, "flops_per_s": fps}
        if "fits" in ds:
            parts["fits"] = ds["fits"]
        sub = xr.Dataset({k: v.drop_vars([c for c in v.coords if c not in v.dims]) for k, v in parts.items()})
        dims = list(sub.dims)
        df = (sub if dims else sub.expand_dims("point")).to_dataframe().reset_index()
        df = df.drop(columns=[c for c in ("point",) if c in df.columns])
        df.insert(0, "phase", phase)
        df.insert(0, "label", [phase + (" " + ", ".join(f"{d}={_tick(r[d])}" for d in dims) if dims else "")
                               for _, r in df.iterrows()])
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------- Pareto


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
