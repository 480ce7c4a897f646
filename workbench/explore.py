"""What-if explorer: pure callbacks of the control values, and a thin ipywidgets front.

    from workbench import explore
    state = explore.normalize_state({"hardware": ["h100_sxm", "cs3"], "batch": 16})
    ds = explore.compute(state)              # predict.inference + costs, dim `hardware`
    explore.summary_table(ds)                # TTFT, TPOT, tokens/s, $/M tokens (SI units)
    explore.figures(ds, state)               # {"roofline", "breakdown", "memory"}: Figures
    explore.sweep(state, "batch")            # the same over the control's range
    explore.sweep_view(state, "batch", "output_tokens_per_s_per_user",
                       "output_tokens_per_s_per_device")   # {"sweep", "pareto"}: Figures
    explore.Explorer(hardware=["h100_sxm", "cs3"]).widget   # the page (JupyterLab, voila)

A state holds the hardware (GPUs and wafer systems side by side), the model, weight /
activation / KV precision ("auto": the API's default for the weights), batch, prompt and
generated tokens, tp and pp (GPUs; devices = tp·pp) and systems (wafers: CS systems the
model is pipelined across). GPUs are evaluated in one vectorized predict.inference call
and wafers in another (the API takes tp/pp on GPUs and devices on wafers); the results
are joined along `hardware`. An invalid setting for one group (tp not dividing the heads,
fp8 activations on a wafer) becomes a message in ds.attrs["problems"] while the other
group is still shown; a point that does not fit stays in the result with fits=False and
its reason. Only when nothing can be computed does `compute` raise InputError.

Time per update, measured on a busy 2-core machine (3 chips: h100_sxm, h200_sxm, cs3):
median 0.27 s, of which the model (two predict.inference calls, costs) is 45 ms and
drawing the three figures as SVG 0.22 s; the sweep tab 0.4 s; all 7 chips 0.35-0.55 s.
Explorer.timings holds the last measurement and the page shows it under the outputs.
"""
from __future__ import annotations

import functools
import html
import io
import logging
import re
import time
from collections import Counter

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from . import plots, predict
from .analysis import pareto
from .costs import add_costs
from .errors import InputError, check_choice
from .specs import is_wafer, list_gpus, list_models, load_hardware, load_model
from .units import DTYPES, unit_attrs

WAFERS = ("cs3", "cs2")
HARDWARE = tuple(list_gpus()) + WAFERS
WEIGHTS = tuple(d for d in DTYPES if d != "tf32")
ACTIVATIONS = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "fp4")
KV = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
POWERS = {"batch": tuple(2 ** i for i in range(11)), "prompt": tuple(2 ** i for i in range(7, 18)),
          "generate": tuple(2 ** i for i in range(4, 15))}
RANGES = {"tp": (1, 16), "pp": (1, 8), "systems": (1, 16)}
DEFAULTS = {"hardware": ("h100_sxm", "h200_sxm", "cs3"), "model": "llama_3_1_70b", "weights": "fp8",
            "activations": "auto", "kv": "auto", "batch": 8, "prompt": 2048, "generate": 256,
            "tp": 8, "pp": 1, "systems": 4}
CONTROLS = tuple(DEFAULTS)
SWEEPABLE = ("batch", "prompt", "generate", "tp", "pp", "systems")
# Metrics offered for the sweep and Pareto views: (the better direction, label).
METRICS = {"ttft_s": ("min", "TTFT"), "tpot_s": ("min", "TPOT"), "e2e_s": ("min", "end-to-end latency"),
           "output_tokens_per_s_per_user": ("max", "tokens/s per user"),
           "output_tokens_per_s_per_device": ("max", "tokens/s per device"),
           "output_tokens_per_s": ("max", "tokens/s (all devices)"),
           "cost_per_million_tokens_usd": ("min", "cost per M tokens"), "tokens_per_j": ("max", "tokens per joule"),
           "memory_per_device_bytes": ("min", "memory per device")}
# Summary table: variable, header, scale shown, unit shown.
COLUMNS = (("ttft_s", "TTFT", 1e-3, "ms"), ("tpot_s", "TPOT", 1e-3, "ms"),
           ("output_tokens_per_s_per_user", "tokens/s<br>per user", 1.0, ""),
           ("output_tokens_per_s_per_device", "tokens/s<br>per device", 1.0, ""),
           ("cost_per_million_tokens_usd", "cost per<br>M tokens", 1.0, "USD"),
           ("memory_per_device_bytes", "memory<br>per device", 1e9, "GB"),
           ("memory_capacity_bytes", "capacity", 1e9, "GB"))
# Decode step parts stacked in the breakdown: GPU kernels, wafer terms, shared comm.
GPU_PARTS = ("decode_matmul_s", "decode_attention_s", "decode_elementwise_s")
WAFER_PARTS = ("decode_compute_s", "decode_io_s")
PART_COLORS = dict(zip(GPU_PARTS + ("decode_comm_s",) + WAFER_PARTS, sns.color_palette("deep", 6)))
DPI = 90


# --------------------------------------------------------------------------- state


def normalize_state(state: dict | None = None, **overrides) -> dict:
    """`state` (and keyword overrides) completed with DEFAULTS and checked: names that
    are not controls, unknown hardware / model / precisions and sizes that are not
    positive integers raise InputError naming the control and what is allowed."""
    s = dict(DEFAULTS, **(state or {}), **overrides)
    unknown = [k for k in s if k not in DEFAULTS]
    if unknown:
        raise InputError(f"control {unknown[0]!r} is not known; allowed: {', '.join(CONTROLS)}")
    hw = (s["hardware"],) if isinstance(s["hardware"], str) else tuple(s["hardware"])
    if not hw:
        raise InputError("hardware=() is not allowed; allowed: one or more of " + ", ".join(HARDWARE))
    check_choice("hardware", list(hw), HARDWARE)
    s["hardware"] = tuple(dict.fromkeys(hw))
    check_choice("model", s["model"], list_models())
    for key, allowed in (("weights", WEIGHTS), ("activations", ACTIVATIONS), ("kv", KV)):
        check_choice(key, s[key], allowed)
    for key in SWEEPABLE:
        v = s[key]
        if isinstance(v, bool) or not float(v).is_integer() or v < 1:
            raise InputError(f"{key}={v!r} is not allowed; allowed: a positive integer")
        s[key] = int(v)
    return s


def _kinds(hardware) -> tuple[list, list]:
    wafer = [h for h in hardware if is_wafer(load_hardware(h))]
    return [h for h in hardware if h not in wafer], wafer


def _run(state: dict, hardware, **sizes) -> xr.Dataset:
    """predict.inference for `hardware` (GPUs in one call, wafers in another), joined on
    `hardware` in the order given, with costs. `sizes` override the state's (lists sweep)."""
    sz = {k: sizes.get(k, state[k]) for k in SWEEPABLE}
    auto = {k: None if state[k] == "auto" else state[k] for k in ("activations", "kv")}
    common = dict(model=state["model"], batch=sz["batch"], prompt=sz["prompt"], generate=sz["generate"],
                  weights=state["weights"], **auto)
    gpus, wafers = _kinds(hardware)
    parts, problems = [], []
    for group, kwargs in ((gpus, dict(tp=sz["tp"], pp=sz["pp"])), (wafers, dict(devices=sz["systems"]))):
        if not group:
            continue
        try:
            ds = predict.inference(hardware=list(group), **kwargs, **common)
        except InputError as err:
            problems.append(f"{', '.join(group)}: {err}")
            continue
        parts.append(ds.drop_vars([c for c in ("mapping", "placement") if c in ds.coords]))
    if not parts:
        raise InputError("; ".join(problems))
    ds = parts[0] if len(parts) == 1 else xr.concat(parts, dim="hardware", data_vars="all", join="outer",
                                                    coords="different", compat="equals")
    if "devices" in ds.dims:
        ds = ds.rename(devices="systems")
    order = [h for h in hardware if h in ds.hardware.values]
    ds = add_costs(ds.sel(hardware=order))
    for name in ds.data_vars:
        if "units" not in ds[name].attrs:
            ds[name].attrs.update(unit_attrs(name))
    ds.attrs["problems"] = problems
    return ds


def compute(state: dict) -> xr.Dataset:
    """The operating point of every selected chip: a predict.inference Dataset over
    `hardware` with costs (costs.add_costs). ds.attrs["problems"] lists the groups that
    could not be computed and why; InputError when none could."""
    s = normalize_state(state)
    return _run(s, s["hardware"]).assign_attrs(state=repr(s))


def infeasible(ds: xr.Dataset) -> list[str]:
    """'<hardware>: does not fit (<reason>)' for every point of `ds` with fits False."""
    out = []
    for h in np.atleast_1d(ds.hardware.values):
        row = ds.sel(hardware=h)
        if not bool(np.all(row.fits.values)):
            reasons = sorted({str(r) for r in np.atleast_1d(row.reason.values[~row.fits.values]) if str(r)})
            out.append(f"{h}: does not fit ({'; '.join(reasons) or 'infeasible'})")
    return out


# --------------------------------------------------------------------------- table


def summary_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per hardware of `ds` (a `compute` result): ttft_s, tpot_s, tokens/s per
    user and per device, cost per million tokens, memory per device and capacity (SI
    units, as predict returns them), fits, bound and reason."""
    extra = [d for d in ds.dims if d != "hardware"]
    if extra:
        raise InputError(f"summary_table: dims {extra} have more than one value; allowed: a compute() result")
    cols = [c for c, *_ in COLUMNS] + ["fits", "bound", "reason"]
    df = pd.DataFrame({c: np.atleast_1d(ds[c].values) for c in cols},
                      index=pd.Index(np.atleast_1d(ds.hardware.values), name="hardware"))
    df["fits"] = df["fits"].astype(bool)
    return df


def _cell(v: float) -> str:
    if not np.isfinite(v):
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:.4g}"


def table_html(df: pd.DataFrame) -> str:
    """The summary table as HTML: numbers in the header's unit (4 significant digits),
    rows that do not fit marked; each cell carries data-var and its SI data-value."""
    head = "".join(f"<th>{t}" + (f"<br>[{u}]" if u else "") + "</th>" for _, t, _, u in COLUMNS)
    rows = []
    for hw, r in df.iterrows():
        cells = "".join(f'<td data-var="{c}" data-value="{float(r[c])!r}">{_cell(float(r[c]) / s)}</td>'
                        for c, _, s, _ in COLUMNS)
        status = ("fits" if r["fits"] else
                  f'<span class="wb-nofit">does not fit: {html.escape(str(r["reason"]))}</span>')
        rows.append(f'<tr data-hardware="{hw}" class="{"" if r["fits"] else "wb-row-nofit"}">'
                    f"<th>{hw}</th>{cells}<td>{html.escape(str(r['bound']))}</td><td>{status}</td></tr>")
    return (f"{_STYLE}<table class='wb-summary'><thead><tr><th>hardware</th>{head}<th>bound</th>"
            f"<th>status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


_STYLE = """<style>
.wb-summary {border-collapse: collapse; font-size: 12px; margin: 4px 0;}
.wb-summary th, .wb-summary td {padding: 3px 6px; border-bottom: 1px solid #ddd; text-align: right;
  white-space: nowrap; line-height: 1.3;} .wb-summary thead th {vertical-align: bottom;}
.wb-summary tbody th {text-align: left;} .wb-summary td:last-child, .wb-summary th:last-child {text-align: left;}
.wb-row-nofit td, .wb-row-nofit th {background: #fdecea;} .wb-nofit {color: #b71c1c; font-weight: 600;}
.wb-msg {padding: 4px 10px; margin: 2px 0; border-radius: 3px; font-size: 13px;}
.wb-error {background: #fdecea; color: #b71c1c;} .wb-warn {background: #fff4e5; color: #8a4b00;}
</style>"""


def messages_html(errors=(), warnings=()) -> str:
    """Errors (red) and does-not-fit notes (orange) as HTML; empty when there are none."""
    items = [f'<div class="wb-msg wb-error">{html.escape(str(e))}</div>' for e in errors]
    items += [f'<div class="wb-msg wb-warn">{html.escape(str(w))}</div>' for w in warnings]
    return _STYLE + f'<div class="wb-messages">{"".join(items)}</div>' if items else ""


# --------------------------------------------------------------------------- figures


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


def memory_figure(ds: xr.Dataset) -> Figure:
    """Memory per device (weights, KV cache, activations where the model splits it)
    against the device's capacity (black bar); "does not fit" in red where it exceeds
    it, "infeasible" where the point fails for another reason (the table says which);
    bars of such points hatched."""
    names = [str(h) for h in np.atleast_1d(ds.hardware.values)]
    cap = np.atleast_1d(ds.memory_capacity_bytes.values) / 1e9
    total = np.atleast_1d(ds.memory_per_device_bytes.values) / 1e9
    fits = np.atleast_1d(ds.fits.values)
    fig = _fixed(Figure(), size=(5.2, 1.45 + 0.5 * len(names)), left=1.05, right=0.1, bottom=0.8, top=0.3)
    ax = fig.add_subplot()
    y = np.arange(len(names))
    split = [("weights_per_device_bytes", "weights", "#4c72b0"), ("kv_cache_per_device_bytes", "KV cache", "#dd8452"),
             ("activations_per_device_bytes", "activations", "#55a868")]
    left, legend = np.zeros(len(names)), []
    for var, text, color in split:
        part = np.nan_to_num(np.atleast_1d(ds[var].values) / 1e9 if var in ds else np.zeros(len(names)))
        ax.barh(y, part, left=left, height=0.55, color=color, hatch=[None if ok else "//" for ok in fits])
        legend += [Patch(color=color, label=text)] if part.any() else []
        left += part
    rest = np.where(left > 0, 0.0, total)
    ax.barh(y, rest, height=0.55, color="#8c8c8c", hatch=[None if ok else "//" for ok in fits])
    legend += [Patch(color="#8c8c8c", label="on-wafer SRAM")] if rest.any() else []
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


def figures(ds: xr.Dataset, state: dict | None = None) -> dict[str, Figure]:
    """The operating-point figures of a `compute` result: roofline, breakdown, memory."""
    return {"roofline": roofline_figure(ds, state), "breakdown": breakdown_figure(ds), "memory": memory_figure(ds)}


# --------------------------------------------------------------------------- sweep


def sweep_values(state: dict, control: str) -> list[int]:
    """The range a control is swept over: powers of two for batch, prompt and
    generated tokens; tp over the divisors of the model's heads up to 16; pp up to the
    layers; systems 1..16."""
    check_choice("control", control, SWEEPABLE)
    if control in POWERS:
        return list(POWERS[control])
    lo, hi = RANGES[control]
    spec = load_model(state["model"])
    if control == "tp":
        return [t for t in range(lo, hi + 1) if spec.n_heads % t == 0]
    if control == "pp":
        return [p for p in (1, 2, 4, 8) if p <= spec.n_layers]
    return list(range(lo, hi + 1))


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
    each as METRICS says) with the current point starred."""
    for arg, m in (("metric_x", metric_x), ("metric_y", metric_y)):
        check_choice(arg, m, METRICS)
    s = normalize_state(state)
    ds = sweep(s, control)
    return {"sweep": _sweep_figure(ds, s, control, (metric_x, metric_y)),
            "pareto": _pareto_figure(ds, s, control, metric_x, metric_y)}


def _sweep_figure(ds, s, control, metrics) -> Figure:
    fig = _fixed(Figure(), size=(6.0, 4.6), left=0.6, bottom=0.5, top=0.45)
    axes = fig.subplots(len(metrics), 1, sharex=True)
    fig.subplots_adjust(hspace=0.3)
    xs = ds[control].values
    colors = sns.color_palette("deep", n_colors=ds.sizes["hardware"])
    for ax, metric in zip(axes, metrics):
        da = ds[metric].transpose("hardware", control)
        scale, _ = plots.si_scale(da.where(ds.fits), da.attrs.get("units"))
        for h, c in zip(ds.hardware.values, colors):
            ys, ok = da.sel(hardware=h).values / scale, ds.fits.sel(hardware=h).values
            ax.plot(xs, np.where(ok, ys, np.nan), marker="o", ms=4, color=c, label=str(h))
            ax.scatter(xs[~ok], ys[~ok], marker="o", s=22, facecolor="none", edgecolor=c, lw=1)
            if s[control] in xs:
                i = int(np.flatnonzero(xs == s[control])[0])
                ax.scatter([xs[i]], [ys[i]], marker="*", s=160, color=c, edgecolor="black", lw=0.6, zorder=4)
        ax.axvline(s[control], color="#555555", ls="--", lw=1)
        ax.set_yscale("log")
        plots._log_ticks(ax, "y")
        ax.tick_params(labelsize=7, which="both")
        ax.set_title(plots.label(da, da.where(ds.fits)), fontsize=8, loc="left")
    if control != "systems":
        axes[-1].set_xscale("log", base=2)
        axes[-1].xaxis.set_minor_locator(NullLocator())
    axes[-1].set_xticks(xs, [str(int(x)) for x in xs])
    axes[-1].set_xlabel(f"{control} (dashed: current {s[control]}; star: current point; hollow: does not fit)",
                        fontsize=8)
    axes[0].legend(fontsize=7, ncols=min(4, ds.sizes["hardware"]), loc="best")
    fig.suptitle(f"Sweep of {control}: {s['model']}, weights {s['weights']}", fontsize=10)
    return fig


def _pareto_figure(ds, s, control, metric_x, metric_y) -> Figure:
    goals = {"minimize": [], "maximize": []}
    for m in dict.fromkeys((metric_x, metric_y)):
        goals["minimize" if METRICS[m][0] == "min" else "maximize"].append(m)
    front = pareto(ds, **goals, over=[control], by=["hardware"], where="fits")
    fig = _fixed(plots.pareto_front(ds, metric_x, metric_y, hue="hardware", mask=front, log=True),
                 size=(6.0, 4.6), left=0.7, bottom=0.55, top=0.5)
    ax = fig.axes[0]
    if s[control] in ds[control].values:
        cur = ds.sel({control: s[control]})
        sx, _ = plots.si_scale(ds[metric_x].where(ds.fits), ds[metric_x].attrs.get("units"))
        sy, _ = plots.si_scale(ds[metric_y].where(ds.fits), ds[metric_y].attrs.get("units"))
        ax.scatter(cur[metric_x].values / sx, cur[metric_y].values / sy, marker="*", s=180, color="gold",
                   edgecolor="black", lw=0.7, zorder=5, label=f"current {control}={s[control]}")
        ax.legend(title="hardware", fontsize=7, title_fontsize=7)
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


class Explorer:
    """Widget wiring: `.controls` (name -> widget; the state's controls plus "sweep",
    "metric_x", "metric_y"), `.outputs` (name -> HTML or Image widget), `.widget` (the
    page). Every change of a control recomputes through the pure callbacks; the sweep
    tab is recomputed when it is shown. Errors become messages, never tracebacks."""

    def __init__(self, sweep_control: str = "batch", metric_x: str = "output_tokens_per_s_per_user",
                 metric_y: str = "output_tokens_per_s_per_device", **state):
        import ipywidgets as w

        s = normalize_state(state)
        look = dict(layout=w.Layout(width="300px"), style={"description_width": "95px"})
        labels = [(f"{h} (wafer)" if h in WAFERS else h, h) for h in HARDWARE]
        c = {"hardware": w.SelectMultiple(options=labels, value=s["hardware"], rows=len(HARDWARE),
                                          description="hardware", **dict(look, layout=w.Layout(width="200px")))}
        metric = [(label, m) for m, (_, label) in METRICS.items()]
        for key, opts, value, text in (("model", list_models(), s["model"], "model"),
                                       ("weights", WEIGHTS, s["weights"], "weights"),
                                       ("activations", ACTIVATIONS, s["activations"], "activations"),
                                       ("kv", KV, s["kv"], "KV cache"), ("sweep", SWEEPABLE, sweep_control, "sweep"),
                                       ("metric_x", metric, metric_x, "metric x"),
                                       ("metric_y", metric, metric_y, "metric y")):
            c[key] = w.Dropdown(options=opts, value=value, description=text, **look)
        for key, opts in POWERS.items():
            c[key] = w.SelectionSlider(options=sorted(set(opts) | {s[key]}), value=s[key], description=key,
                                       continuous_update=False, **look)
        for key, (lo, hi) in RANGES.items():
            text = {"tp": "TP (GPUs)", "pp": "PP (GPUs)", "systems": "CS systems"}[key]
            c[key] = w.IntSlider(min=lo, max=max(hi, s[key]), value=s[key], description=text,
                                 continuous_update=False, **look)
        for name, widget in c.items():
            widget.add_class(f"wb-{name}")
        self.controls = c
        img = dict(format="svg+xml", layout=w.Layout(max_width="100%", height="auto"))
        self.outputs = {"messages": w.HTML(), "table": w.HTML(), "timing": w.HTML(),
                        **{k: w.Image(**img) for k in ("roofline", "breakdown", "memory", "sweep", "pareto")}}
        for name, widget in self.outputs.items():
            widget.add_class(f"wb-out-{name}")
        o = self.outputs
        row = dict(layout=w.Layout(flex_flow="row wrap", align_items="flex-start", grid_gap="12px"))
        point = w.VBox([w.HBox([o["roofline"], o["breakdown"]], **row), w.HBox([o["table"], o["memory"]], **row)])
        sweep_box = w.VBox([w.HBox([c["sweep"], c["metric_x"], c["metric_y"]], **row),
                            w.HBox([o["sweep"], o["pareto"]], **row)])
        self.tabs = w.Tab(children=[point, sweep_box], titles=("Operating point", "Sweep and Pareto"))
        controls = w.HBox([c["hardware"],
                           w.VBox([c[k] for k in ("model", "weights", "activations", "kv")]),
                           w.VBox([c[k] for k in ("batch", "prompt", "generate")]),
                           w.VBox([c[k] for k in ("tp", "pp", "systems")])],
                          layout=w.Layout(flex_flow="row wrap", grid_gap="8px"))
        self.widget = w.VBox([controls, o["messages"], self.tabs, o["timing"]])
        self.widget.add_class("wb-explorer")
        self.ds: xr.Dataset | None = None
        self.timings: dict[str, float] = {}
        self._sweep_stale = True
        for name in CONTROLS:
            c[name].observe(self._on_change, names="value")
        for name in ("sweep", "metric_x", "metric_y"):
            c[name].observe(self._on_sweep_change, names="value")
        self.tabs.observe(self._on_tab, names="selected_index")
        self.update()

    @property
    def state(self) -> dict:
        return {k: self.controls[k].value for k in CONTROLS}

    def _ipython_display_(self):  # `explorer` as a cell's last value shows the page
        from IPython.display import display
        display(self.widget)

    def _on_change(self, _change=None) -> None:
        self._sweep_stale = True
        self.update()

    def _on_sweep_change(self, _change=None) -> None:
        self._sweep_stale = True
        if self.tabs.selected_index == 1:
            self.update_sweep()

    def _on_tab(self, change) -> None:
        if change["new"] == 1 and self._sweep_stale:
            self.update_sweep()

    def update(self) -> None:
        """Recompute the operating point and redraw the table, figures and messages."""
        t0 = time.perf_counter()
        errors, warnings = [], []
        try:
            ds = compute(self.state)
            t1 = time.perf_counter()
            errors, warnings = list(ds.attrs["problems"]), infeasible(ds)
            images = {k: svg(f) for k, f in figures(ds, self.state).items()}
            self.ds = ds
            self.outputs["table"].value = table_html(summary_table(ds))
        except Exception as err:  # noqa: BLE001 - a message in the page, never a traceback
            t1 = time.perf_counter()
            self.ds = None
            errors.append(_message(err))
            images = {k: _placeholder() for k in ("roofline", "breakdown", "memory")}
            self.outputs["table"].value = "<i>no result for this setting (see the message above)</i>"
        for k, v in images.items():
            self.outputs[k].value = v
        self.outputs["messages"].value = messages_html(errors, warnings)
        t2 = time.perf_counter()
        self.timings = {"compute_s": t1 - t0, "figures_s": t2 - t1, "update_s": t2 - t0}
        self._show_timing()
        if self.tabs.selected_index == 1:
            self.update_sweep()

    def update_sweep(self) -> None:
        """Recompute the sweep view for the current controls."""
        t0 = time.perf_counter()
        c = self.controls
        try:
            figs = sweep_view(self.state, c["sweep"].value, c["metric_x"].value, c["metric_y"].value)
            self.outputs["sweep"].value, self.outputs["pareto"].value = svg(figs["sweep"]), svg(figs["pareto"])
        except Exception as err:  # noqa: BLE001
            self.outputs["sweep"].value = svg(_empty("Sweep: " + _message(err)))
            self.outputs["pareto"].value = _placeholder()
        self._sweep_stale = False
        self.timings["sweep_s"] = time.perf_counter() - t0
        self._show_timing()

    def _show_timing(self) -> None:
        t = self.timings
        text = (f"updated in {t.get('update_s', 0):.2f} s (model {t.get('compute_s', 0) * 1e3:.0f} ms, "
                f"figures {t.get('figures_s', 0):.2f} s)")
        if "sweep_s" in t:
            text += f"; sweep view {t['sweep_s']:.2f} s"
        self.outputs["timing"].value = f'<span style="color:#777;font-size:11px">{text}</span>'


def _message(err: Exception) -> str:
    """An InputError's own words; anything else is logged (kernel log) and named."""
    if isinstance(err, InputError):
        return str(err)
    logging.getLogger(__name__).exception("explorer update failed")
    return f"unexpected error: {type(err).__name__}: {err}"


@functools.lru_cache(maxsize=1)
def _placeholder() -> bytes:
    return svg(_empty("no result for this setting", size=(4.0, 1.0)))
