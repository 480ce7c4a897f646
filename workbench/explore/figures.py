"""Explorer figures and the sweep / Pareto view: pure functions of the computed Dataset."""
from __future__ import annotations

import io
import re
from collections import Counter

import matplotlib
import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from .. import plots
from ..analysis import pareto
from ..errors import InputError, check_choice
from ..specs import load_hardware, load_model

from .state import *  # noqa: F401,F403
from .state import _kinds, _run  # noqa: F401

def _fixed(fig: Figure, size=(6.0, 3.9), left=0.75, right=0.12, bottom=0.5, top=0.4) -> Figure:
    """Fixed margins (inches) instead of constrained layout: one draw per PNG, about
    half the rendering time, which is most of an update."""
    fig.set_layout_engine(None)
    fig.set_size_inches(*size)
    w, h = size
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    return fig


def _empty(text: str, size=(6.0, 3.9)) -> Figure:
    fig = Figure(figsize=size)
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color="#555555", wrap=True)
    return fig


def roofline_figure(ds: xr.Dataset, state: dict | None = None) -> Figure:
    """Roofline of the selected GPUs at the activations' math dtype with each GPU's
    prefill and decode operating points; chips not on that roof (wafers, other math
    dtype, no such units) are listed in the corner with their bound."""
    gpus, wafers = _kinds(list(ds.hardware.values))
    acts = {h: str(ds.activations.sel(hardware=h).values.ravel()[0]) for h in gpus}
    dtype = Counter(acts.values()).most_common(1)[0][0] if gpus else None
    on = [h for h in gpus if acts[h] == dtype and np.isfinite(load_hardware(h).peak(dtype))]
    left = [f"{h} (wafer, bound: {ds.bound.sel(hardware=h).values.ravel()[0]})" for h in wafers]
    left += [f"{h} ({acts[h]}: no such math units)" if acts[h] == dtype else f"{h} ({acts[h]} math)"
             for h in gpus if h not in on]
    if not on:
        asked = _kinds(state["hardware"])[0] if state else gpus
        head = "Roofline: no GPU result (see the message above)" if asked else "Roofline: no GPU selected"
        return _empty(head + "\n" + "\n".join(left))
    sub = ds.sel(hardware=on)
    pts = plots.roofline_points(sub)
    pts = pts[np.isfinite(pts.intensity_flops_per_byte) & np.isfinite(pts.flops_per_s)]
    pts["label"] = pts["hardware"].astype(str) + " " + pts["phase"]
    fig = _fixed(plots.roofline(on, points=pts, dtype=dtype), left=0.7, top=0.3)
    if left:
        fig.axes[0].text(0.02, 0.97, "not on this roof:\n" + "\n".join(left), transform=fig.axes[0].transAxes,
                         va="top", fontsize=7.5, color="#555555")
    return fig


def breakdown_figure(ds: xr.Dataset) -> Figure:
    """Stacked decode-step time per hardware: matmul, attention, elementwise and comm on
    GPUs, compute, comm and I/O on wafers; the black tick is the TPOT estimate; hatched
    bars do not fit."""
    gpus, wafers = _kinds(list(ds.hardware.values))
    parts = {}
    for name in PART_COLORS:
        if name not in ds:
            continue
        own = wafers if name in WAFER_PARTS else gpus if name in GPU_PARTS else gpus + wafers
        da = ds[name].where(ds.hardware.isin(own))
        if np.isfinite(da.values).any() and np.nanmax(da.values) > 0:
            parts[name] = da.assign_attrs(ds[name].attrs)
    sub = xr.Dataset(dict(parts, tpot_s=ds.tpot_s, fits=ds.fits))
    fig = _fixed(plots.breakdown(sub, parts=list(parts), by="hardware", total="tpot_s"), left=0.6, top=0.5)
    ax = fig.axes[0]
    for bars, name in zip(ax.containers, parts):  # the same colour for a part whatever is selected
        for bar in bars:
            bar.set_facecolor(PART_COLORS[name])
    ax.legend(fontsize=8, loc="upper left", ncols=min(len(parts) + 1, 5))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
    return fig


def memory_bars(ds: xr.Dataset, split, rest_label: str | None = None) -> Figure:
    """Memory per device stacked by `split` ((variable, label, colour); a variable the
    dataset lacks counts zero) against the device's capacity (black bar), in GB; where no
    part is given the total is drawn as `rest_label`. "does not fit" in red where the total
    exceeds the capacity, "infeasible" where the point fails for another reason (the table
    says which); bars of such points hatched."""
    names = [str(h) for h in np.atleast_1d(ds.hardware.values)]
    cap = np.atleast_1d(ds.memory_capacity_bytes.values) / 1e9
    total = np.atleast_1d(ds.memory_per_device_bytes.values) / 1e9
    fits = np.atleast_1d(ds.fits.values)
    hatch = [None if ok else "//" for ok in fits]
    fig = _fixed(Figure(), size=(5.2, 1.45 + 0.5 * len(names)), left=1.05, right=0.1, bottom=0.8, top=0.3)
    ax = fig.add_subplot()
    y = np.arange(len(names))
    left, legend = np.zeros(len(names)), []
    for var, text, color in split:
        part = np.nan_to_num(np.atleast_1d(ds[var].values) / 1e9 if var in ds else np.zeros(len(names)))
        ax.barh(y, part, left=left, height=0.55, color=color, hatch=hatch)
        legend += [Patch(color=color, label=text)] if part.any() else []
        left += part
    if rest_label:
        rest = np.where(left > 0, 0.0, total)
        ax.barh(y, rest, height=0.55, color="#8c8c8c", hatch=hatch)
        legend += [Patch(color="#8c8c8c", label=rest_label)] if rest.any() else []
    hi = float(np.nanmax(np.concatenate([cap, total]))) / 0.75  # room for the numbers
    for i in range(len(names)):
        ax.plot([cap[i]] * 2, [i - 0.38, i + 0.38], color="black", lw=2.5)
        ax.text(max(total[i], cap[i]) + hi * 0.01, i, f"{total[i]:,.1f} / {cap[i]:,.1f} GB", va="center",
                fontsize=8, color="black" if fits[i] else "#b71c1c")
    marks = ["" if ok else "does not fit" if t > c else "infeasible" for ok, t, c in zip(fits, total, cap)]
    ax.set_yticks(y, [f"{n}\n{m}" if m else n for n, m in zip(names, marks)], fontsize=9)
    for tick, ok in zip(ax.get_yticklabels(), fits):
        if not ok:
            tick.set_color("#b71c1c")
            tick.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlim(0, hi)
    ax.set_xlabel("memory per device [GB] (black bar: capacity)")
    ax.set_title("Memory per device against capacity", fontsize=10)
    fig.legend(handles=legend, fontsize=7, loc="lower center", ncols=4, frameon=False)
    return fig


# Memory per device of the inference page: (variable, label, colour), static and live figures alike
MEMORY_SPLIT = (("weights_per_device_bytes", "weights", "#4c72b0"), ("kv_cache_per_device_bytes", "KV cache", "#dd8452"),
                ("activations_per_device_bytes", "activations", "#55a868"))


def memory_figure(ds: xr.Dataset) -> Figure:
    """Memory per device (weights, KV cache, activations where the model splits it; the
    wafer's on-wafer SRAM total otherwise) against capacity (memory_bars)."""
    return memory_bars(ds, MEMORY_SPLIT, rest_label="on-wafer SRAM")


def figures(ds: xr.Dataset, state: dict | None = None) -> dict[str, Figure]:
    """The operating-point figures of a `compute` result: roofline, breakdown, memory."""
    return {"roofline": roofline_figure(ds, state), "breakdown": breakdown_figure(ds), "memory": memory_figure(ds)}


# --------------------------------------------------------------------------- sweep


def sweep_values(state: dict, control: str) -> list[int]:
    """The range a control is swept over: powers of two for batch, prompt and
    generated tokens; tp over the divisors of the model's heads up to 16; pp up to the
    layers; systems 1..16 (the control's 0, the fewest that hold the model, is not a count)."""
    check_choice("control", control, SWEEPABLE)
    if control in POWERS:
        return list(POWERS[control])
    lo, hi = RANGES[control]
    spec = load_model(state["model"])
    if control == "tp":
        return [t for t in range(lo, hi + 1) if spec.n_heads % t == 0]
    if control == "pp":
        return [p for p in (1, 2, 4, 8) if p <= spec.n_layers]
    return list(range(max(lo, 1), hi + 1))


def sweep(state: dict, control: str) -> xr.Dataset:
    """`compute` over the whole range of `control` (dim named after it) for every
    selected chip it applies to: tp and pp sweep the GPUs, systems the wafers."""
    s = normalize_state(state)
    values = sweep_values(s, control)
    gpus, wafers = _kinds(s["hardware"])
    hw = gpus if control in ("tp", "pp") else wafers if control == "systems" else list(s["hardware"])
    if not hw:
        kind = "a GPU" if control in ("tp", "pp") else "a wafer (cs3, cs2)"
        raise InputError(f"sweeping {control} needs {kind} among the selected hardware")
    return _run(s, hw, **{control: values})


def sweep_view(state: dict, control: str, metric_x: str, metric_y: str) -> dict[str, Figure]:
    """Figures of `sweep(state, control)`: "sweep", metric_x and metric_y against the
    control (one line per chip, the current value marked, points that do not fit hollow),
    and "pareto", the Pareto frontier of metric_y against metric_x per chip (better of
    each as METRICS says) with the current point starred. The current point of systems 0
    ("min") is at the systems each wafer resolved to (current_points)."""
    for arg, m in (("metric_x", metric_x), ("metric_y", metric_y)):
        check_choice(arg, m, METRICS)
    s = normalize_state(state)
    ds = sweep(s, control)
    for m in dict.fromkeys((metric_x, metric_y)):  # a log axis needs a positive value: say why there is none
        if not bool((ds[m] > 0).any()):
            why = sorted({str(r) for r in np.ravel(ds.reason.values) if str(r)})
            why += price_notes(ds) if m == "cost_per_million_tokens_usd" else []
            raise InputError(f"{m} has no value at any point of the sweep of {control}"
                             + (f": {'; '.join(why)}" if why else ""))
    current = current_points(s, control, ds.hardware.values)
    return {"sweep": _sweep_figure(ds, s, control, (metric_x, metric_y), current),
            "pareto": _pareto_figure(ds, s, control, metric_x, metric_y, current)}


def current_points(s: dict, control: str, hardware) -> dict:
    """hardware -> the value of `control` at the state's point: the state's value, or for
    systems 0 ("min") the systems each wafer resolved to (NaN where none holds the model)."""
    if control != "systems" or s["systems"] != 0:
        return {str(h): s[control] for h in hardware}
    ds = _run(s, [str(h) for h in hardware])
    return dict(zip(map(str, ds.hardware.values), ds.devices.values.astype(float).ravel()))


def current_text(s: dict, control: str, current: dict) -> str:
    """The current value as the captions write it: '32', or 'min = 3' / 'min (cs3 3, cs2 5)'."""
    if control != "systems" or s["systems"] != 0:
        return str(s[control])
    counts = {h: ("none holds the model" if np.isnan(x) else f"{x:g}") for h, x in current.items()}
    if len(set(counts.values())) == 1:
        return f"min = {next(iter(counts.values()))}"
    return "min (" + ", ".join(f"{h} {c}" for h, c in counts.items()) + ")"


NO_VALUE = "hollow: does not fit; hollow on the bottom edge: does not fit, no value"


def mark_points(ax, xs, ys, ok, color, x_now=None) -> None:
    """Hollow markers at the points that do not fit (on the bottom edge of the axes where
    the point has no value, NaN, instead of being left out) and a star at x_now (the
    current point; on the bottom edge too where it has no value)."""
    edge = ax.get_xaxis_transform()  # x in data, y in axes coordinates
    ys = np.asarray(ys, dtype=float)
    shown, none = ~ok & np.isfinite(ys), ~ok & ~np.isfinite(ys)
    ax.scatter(xs[shown], ys[shown], marker="o", s=22, facecolor="none", edgecolor=color, lw=1)
    if none.any():
        ax.scatter(xs[none], np.full(none.sum(), 0.04), marker="o", s=22, facecolor="none", edgecolor=color, lw=1,
                   transform=edge, zorder=3)
    i = np.flatnonzero(xs == x_now)[:1] if x_now is not None else []
    if len(i) and (np.isfinite(ys[i[0]]) or not ok[i[0]]):  # a point that fits without a value (no price): none
        y = ys[i[0]]
        at = dict(transform=edge) if not np.isfinite(y) else {}
        ax.scatter([x_now], [y if np.isfinite(y) else 0.04], marker="*", s=160, color=color, edgecolor="black",
                   lw=0.6, zorder=4, **at)


def _sweep_figure(ds, s, control, metrics, current: dict) -> Figure:
    """`current`: hardware -> the control's value at the state's point (current_points)."""
    fig = _fixed(Figure(), size=(6.0, 4.6), left=0.6, bottom=0.62, top=0.45)
    axes = fig.subplots(len(metrics), 1, sharex=True)
    fig.subplots_adjust(hspace=0.3)
    xs = ds[control].values
    colors = sns.color_palette("deep", n_colors=ds.sizes["hardware"])
    unpriced = unpriced_hardware(ds.hardware.values)
    for ax, metric in zip(axes, metrics):
        da = ds[metric].transpose("hardware", control)
        scale, _ = plots.si_scale(da.where(ds.fits), da.attrs.get("units"))
        for h, c in zip(ds.hardware.values, colors):
            ys, ok = da.sel(hardware=h).values / scale, ds.fits.sel(hardware=h).values
            ax.plot(xs, np.where(ok, ys, np.nan), marker="o", ms=4, color=c, label=str(h))
            mark_points(ax, xs, ys, ok, c, current[str(h)])
        for x in sorted({x for x in current.values() if np.isfinite(x)}):
            ax.axvline(x, color="#555555", ls="--", lw=1)
        ax.set_yscale("log")
        plots._log_ticks(ax, "y")
        ax.tick_params(labelsize=7, which="both")
        priced = metric != "cost_per_million_tokens_usd" or not unpriced
        note = "" if priced else f" (price not known: {', '.join(unpriced)})"
        ax.set_title(plots.label(da, da.where(ds.fits)) + note, fontsize=8, loc="left")
    if control != "systems":
        axes[-1].set_xscale("log", base=2)
        axes[-1].xaxis.set_minor_locator(NullLocator())
    axes[-1].set_xticks(xs, [str(int(x)) for x in xs])
    axes[-1].set_xlabel(f"{control} (dashed: current {current_text(s, control, current)}; star: current point)\n"
                        + NO_VALUE, fontsize=8)
    axes[0].legend(fontsize=7, ncols=min(4, ds.sizes["hardware"]), loc="best")
    fig.suptitle(f"Sweep of {control}: {s['model']}, weights {s['weights']}", fontsize=10)
    return fig


def _pareto_figure(ds, s, control, metric_x, metric_y, current: dict) -> Figure:
    """`current` as _sweep_figure's."""
    goals = {"minimize": [], "maximize": []}
    for m in dict.fromkeys((metric_x, metric_y)):
        goals["minimize" if METRICS[m][0] == "min" else "maximize"].append(m)
    front = pareto(ds, **goals, over=[control], by=["hardware"], where="fits")
    fig = _fixed(plots.pareto_front(ds, metric_x, metric_y, hue="hardware", mask=front, log=True),
                 size=(6.0, 4.6), left=0.7, bottom=0.55, top=0.5)
    ax = fig.axes[0]
    now = [(h, x) for h, x in current.items() if x in ds[control].values]
    text = current_text(s, control, current)
    sep = ": " if text.startswith("min") else "="
    if now:
        sx, _ = plots.si_scale(ds[metric_x].where(ds.fits), ds[metric_x].attrs.get("units"))
        sy, _ = plots.si_scale(ds[metric_y].where(ds.fits), ds[metric_y].attrs.get("units"))
        cur = {m: np.array([float(ds[m].sel(hardware=h, **{control: x})) for h, x in now])
               for m in (metric_x, metric_y)}
        ax.scatter(cur[metric_x] / sx, cur[metric_y] / sy, marker="*", s=180, color="gold",
                   edgecolor="black", lw=0.7, zorder=5, label=f"current {control}{sep}{text}")
        ax.legend(title="hardware", fontsize=7, title_fontsize=7)
    unpriced = unpriced_hardware(ds.hardware.values)
    if unpriced and "cost_per_million_tokens_usd" in (metric_x, metric_y):
        ax.text(0.99, 0.01, f"price not known, no cost: {', '.join(unpriced)}", transform=ax.transAxes, ha="right",
                va="bottom", fontsize=7, color="#8a4b00")
    return fig


def png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def svg(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as SVG bytes with text kept as text (what the Image widgets show):
    about a third faster than PNG, since no glyph is rasterized, and sharp at any zoom.
    Shown at `dpi` pixels per inch, the size png() would have."""
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "workbench"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    size = re.compile(rb'(width|height)="([0-9.]+)pt"')
    px = lambda m: b'%s="%.1fpx"' % (m.group(1), float(m.group(2)) * dpi / 72)  # noqa: E731
    return re.sub(rb"<svg [^>]*>", lambda tag: size.sub(px, tag.group(0)), buf.getvalue(), count=1)


# --------------------------------------------------------------------------- widgets


