"""Training what-if: the state, one vectorized computation, the summary table, the figures
and the sweep, all pure functions of the control values (the page: training_widgets.py).

A state holds the hardware (GPUs and CS systems side by side), the model, precision,
sequence length and global batch (sequences), and the GPU layout: micro-batch, tp, pp, dp
(devices = tp·pp·dp), ZeRO stage, recomputation, attention kernel and virtual pipeline
stages. Wafers take `systems` (CS systems splitting the batch, weight streaming) and
ignore the GPU layout and the precision (they compute in 16 bits; a note says so). GPUs
are evaluated in one vectorized predict.training call and wafers in another, joined along
`hardware`; a group that cannot be computed (tp not dividing the heads) becomes a message
in ds.attrs["problems"] while the other is still shown; a point that does not fit stays
with fits=False and its reason.

The step-time parts add up to step_time_s on every chip. GPUs: forward_s and backward_s
(TP comm included), recompute_s, pipeline_bubble_s, dp_comm_exposed_s,
overlap_contention_s, optimizer_s, moe_host_s (the host launches of an MoE model's local
experts, workloads/training.MOE_HOST_S_PER_LOCAL_EXPERT), and the comm inside the
micro-batch slots (predict.training's slot_comm_s) split in two: pp_send_recv_s, the PP
send/recv (the part of pp_comm_s outside the bubble, 0 at pp=1), and ep_comm_s, an MoE
model's expert all-to-all (`ep`, default 8, the Megatron-Bridge recipes' usual EP; 0 for a
dense model, which trains at ep 1 whatever it says). Wafers:
forward_s, backward_s, recompute_s (the extra forward under full recompute) and
weight_streaming_exposed_s, the part of weight_streaming_io_s that compute does not hide.

Time per update, default state (h100_sxm, b200, cs3), median of 5 on a 2-core machine:
compute_training + training_figures 65 ms (model 35 ms, building the two figures 30 ms);
0.13-0.15 s with the SVG the page draws (TrainingExplorer.timings); the sweep tab 0.16 s
(0.3 s served by voila).
"""
from __future__ import annotations

import functools
import html

import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from .. import plots, predict
from ..errors import InputError, check_choice, check_positive
from ..primitives.attention import ATTENTION_KERNELS
from ..specs import load_model
from ..units import unit_attrs
from ..workloads.training import PRECISIONS, RECOMPUTE
from .figures import NO_VALUE, _fixed, mark_points, memory_bars
from .state import _STYLE, _cell, _frozen, _kinds, complete_state, join_groups

TRAINING_DEFAULTS = {"hardware": ("h100_sxm", "b200", "cs3"), "model": "llama_3_8b", "precision": "bf16",
                     "seq_len": 4096, "global_batch": 512, "micro_batch": 1, "tp": 1, "pp": 1, "dp": 64, "ep": 8,
                     "zero": 1, "recompute": "full", "attention": "measured", "virtual_stages": 1, "systems": 4}
# ep 8: the expert parallelism of most Megatron-Bridge 25.11 MoE recipes (scripts/performance/configs:
# Qwen3-30B-A3B's base config, Qwen3-235B-A22B and DeepSeek-V3 on B200, GPT-OSS-120B on H100)
TRAINING_CONTROLS = tuple(TRAINING_DEFAULTS)
CHOICES = {"precision": PRECISIONS, "zero": (0, 1, 2, 3), "recompute": RECOMPUTE,
           # "measured": the GPU framework's kernel from its tables (flash2 on a GPU without tables),
           # as predict.training's attention=None; or an analytical kernel by name
           "attention": ("measured",) + tuple(k for k in ATTENTION_KERNELS if k != "framework")}
SIZES = ("seq_len", "global_batch", "micro_batch", "tp", "pp", "dp", "ep", "virtual_stages", "systems")
# Sweep ranges (tp and pp follow the model: see training_sweep_values) and who they apply to.
TRAINING_POWERS = {"seq_len": tuple(2 ** i for i in range(10, 18)),
                   "global_batch": tuple(2 ** i for i in range(5, 14)),
                   "micro_batch": tuple(2 ** i for i in range(6)), "dp": tuple(2 ** i for i in range(11)),
                   "ep": tuple(2 ** i for i in range(8))}
TRAINING_SWEEPABLE = ("dp", "ep", "micro_batch", "seq_len", "global_batch", "tp", "pp", "systems")
GPU_ONLY, WAFER_ONLY = ("micro_batch", "tp", "pp", "dp", "ep"), ("systems",)
# Step-time parts stacked in the breakdown (see the module docstring), with their labels.
PARTS = {"forward_s": "forward (incl. TP comm)", "backward_s": "backward (incl. TP comm)", "recompute_s": "recompute",
         "pipeline_bubble_s": "pipeline bubble", "pp_send_recv_s": "PP send/recv",
         "ep_comm_s": "EP all-to-all (MoE experts)",
         "dp_comm_exposed_s": "DP comm (exposed)", "overlap_contention_s": "overlap contention",
         "optimizer_s": "optimizer", "moe_host_s": "MoE expert launches (host)",
         "weight_streaming_exposed_s": "weight streaming (not hidden)",
         "step_fixed_s": "fixed per step (weight update, host)",
         "layer_stream_latency_s": "latency per streamed layer"}
GPU_PARTS = ("forward_s", "backward_s", "recompute_s", "pipeline_bubble_s", "dp_comm_exposed_s",
             "overlap_contention_s", "optimizer_s", "moe_host_s")  # what predict.training returns of them
# ten "deep" colours, then "dark" ones: a palette of ten repeats its first colour on the eleventh part
PART_COLORS = dict(zip(PARTS, list(sns.color_palette("deep", 10)) + list(sns.color_palette("dark", 10))))
MEMORY = (("weights_per_device_bytes", "weights", "#4c72b0"), ("grads_per_device_bytes", "gradients", "#dd8452"),
          ("optimizer_per_device_bytes", "optimizer", "#8172b3"),
          ("activations_per_device_bytes", "activations", "#55a868"))
# Summary table: variable, header, scale shown, unit shown.
COLUMNS = (("step_time_s", "step time", 1.0, "s"), ("tokens_per_s_per_device", "tokens/s<br>per device", 1.0, ""),
           ("mfu", "MFU", 1e-2, "%"), ("devices", "devices", 1.0, ""),
           ("memory_per_device_bytes", "memory<br>per device", 1e9, "GB"),
           ("memory_capacity_bytes", "capacity", 1e9, "GB"))


def normalize_training_state(state: dict | None = None, **overrides) -> dict:
    """`state` (and keyword overrides) completed with TRAINING_DEFAULTS and checked:
    unknown controls, hardware, models and choices, and sizes that are not positive
    integers raise InputError naming the control, the value and what is allowed."""
    s = complete_state(TRAINING_DEFAULTS, state, overrides)
    for key, allowed in CHOICES.items():
        check_choice(key, s[key], allowed)
    s["zero"] = int(s["zero"])
    for key in SIZES:
        check_positive(key, s[key], integer=True)
        s[key] = int(s[key])
    return s


def _gpu_parts(ds: xr.Dataset) -> xr.Dataset:
    """The comm inside the micro-batch slots (slot_comm_s) as its two parts: the PP
    send/recv (pp_send_recv_s) and the EP all-to-all, which predict.training reports as
    ep_comm_s (0 for a dense model)."""
    pp = np.maximum(ds.slot_comm_s - ds.ep_comm_s, 0.0).assign_attrs(ds.slot_comm_s.attrs)
    return ds.drop_vars("slot_comm_s").assign(pp_send_recv_s=pp)


def _wafer_parts(ds: xr.Dataset) -> xr.Dataset:
    return ds.drop_vars("attention", errors="ignore")


def _run_training(s: dict, hardware, **sizes) -> xr.Dataset:
    """predict.training for `hardware` (GPUs in one call, wafers in another) joined on
    `hardware` in the order given. `sizes` override the state's (lists sweep)."""
    sz = {k: sizes.get(k, s[k]) for k in SIZES}
    common = dict(model=s["model"], seq_len=sz["seq_len"], global_batch=sz["global_batch"], recompute=s["recompute"])
    # precision and zero go to the GPUs only: a wafer refuses them (it computes bf16; no ZeRO)
    # expert parallelism applies to a model with routed experts (a dense model trains at ep 1)
    ep = sz["ep"] if load_model(s["model"]).is_moe else 1
    attention = None if s["attention"] == "measured" else s["attention"]  # None: predict.training's measured kernel
    layout = dict(tp=sz["tp"], pp=sz["pp"], dp=sz["dp"], ep=ep, micro_batch=sz["micro_batch"], zero=s["zero"],
                  attention=attention, virtual_stages=sz["virtual_stages"], precision=s["precision"])
    gpus, wafers = _kinds(hardware)
    parts, problems = [], []
    for group, kwargs, finish in ((gpus, layout, _gpu_parts), (wafers, dict(devices=sz["systems"]), _wafer_parts)):
        if not group:
            continue
        try:
            parts.append(finish(_training_group(tuple(group), _frozen(dict(kwargs, **common))).copy()))
        except InputError as err:
            problems.append(f"{', '.join(group)}: {err}")
    ds = join_groups(parts, problems, hardware)
    for name in ds.data_vars:
        ds[name].attrs = ds[name].attrs or unit_attrs(name)
    notes = [f"{h}: precision={s['precision']!r} does not apply to wafers (computed in 16 bits)"
             for h in wafers if s["precision"] != "bf16" and h in ds.hardware.values]
    return ds.assign_attrs(problems=problems, notes=notes)


@functools.lru_cache(maxsize=32)
def _training_group(hardware: tuple, kwargs: tuple) -> xr.Dataset:
    """predict.training of one group of chips, remembered as explore.state._group does for
    inference: a GPU-layout control recomputes only the GPUs, systems only the wafers."""
    return predict.training(hardware=list(hardware), **{k: list(v) if isinstance(v, tuple) else v for k, v in kwargs})


def compute_training(state: dict) -> xr.Dataset:
    """One training step of every selected chip: a predict.training Dataset over
    `hardware` with the breakdown completed (module docstring). ds.attrs["problems"]
    lists the groups that could not be computed and why, ds.attrs["notes"] settings a
    chip ignores; InputError when nothing could be computed."""
    s = normalize_training_state(state)
    return _run_training(s, s["hardware"]).assign_attrs(state=repr(s))


def training_summary_table(ds: xr.Dataset) -> str:
    """The summary as HTML, one row per hardware of a `compute_training` result: step
    time, tokens/s per device, MFU, devices, memory per device and capacity (4
    significant digits in the header's unit), fits or why not. Each cell carries
    data-var and its SI data-value."""
    extra = [d for d in ds.dims if d != "hardware"]
    if extra:
        raise InputError(f"training_summary_table: dims {extra} have more than one value; "
                         "allowed: a compute_training() result")
    head = "".join(f"<th>{t}" + (f"<br>[{u}]" if u else "") + "</th>" for _, t, _, u in COLUMNS)
    rows = []
    for hw in np.atleast_1d(ds.hardware.values):
        r = ds.sel(hardware=hw)
        cells = "".join(f'<td data-var="{c}" data-value="{float(r[c])!r}">{_cell(float(r[c]) / k)}</td>'
                        for c, _, k, _ in COLUMNS)
        ok = bool(r.fits)
        status = "fits" if ok else f'<span class="wb-nofit">does not fit: {html.escape(str(r.reason.values))}</span>'
        rows.append(f'<tr data-hardware="{hw}" class="{"" if ok else "wb-row-nofit"}"><th>{hw}</th>{cells}'
                    f"<td>{status}</td></tr>")
    return (_STYLE.replace("wb-summary", "wb-train-summary") + "<table class='wb-train-summary'><thead><tr>"
            f"<th>hardware</th>{head}<th>status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def training_breakdown_figure(ds: xr.Dataset, state: dict | None = None) -> Figure:
    """Stacked step time per hardware (PARTS; a chip lacking a part counts 0); the black
    tick is step_time_s, which the parts add up to; hatched bars do not fit. The title
    names the state's model, sizes and layout when given."""
    names = [str(h) for h in np.atleast_1d(ds.hardware.values)]
    fits = np.atleast_1d(ds.fits.values)
    step = np.atleast_1d(ds.step_time_s.values)
    scale, unit = plots.si_scale(step, "s")
    fig = _fixed(Figure(), left=0.6, top=0.5)
    ax = fig.add_subplot()
    x, bottom, legend = np.arange(len(names)), np.zeros(len(names)), []
    for name in (p for p in PARTS if p in ds):
        part = np.nan_to_num(np.atleast_1d(ds[name].values)) / scale
        if part.any():
            ax.bar(x, part, bottom=bottom, width=0.6, color=PART_COLORS[name],
                   hatch=[None if ok else "//" for ok in fits], edgecolor="white", lw=0.5)
            legend.append(Patch(color=PART_COLORS[name], label=PARTS[name]))
            bottom += part
    legend.append(ax.scatter(x, step / scale, marker="_", s=500, lw=2.5, color="black", zorder=3, label="step time"))
    ax.set_xticks(x, names)
    ax.set_ylabel(f"time per step [{unit}]")
    rows = -(-len(legend) // 2)  # the legend's rows above the bars, two columns (long labels)
    ax.set_ylim(0, np.nanmax(np.append(bottom, 0.0)) * (1.15 + 0.1 * rows) or 1.0)
    ax.legend(handles=legend, fontsize=7, loc="upper left", ncols=2)
    gpus, wafers = _kinds(names)
    sizes = ("tp", "pp", "dp") + (("ep",) if state and load_model(state["model"]).is_moe else ())
    layout = f"{'·'.join(sizes)} {'·'.join(str(state[k]) for k in sizes)}" if state else ""
    context = "".join([f"\n{state['model']}, seq {state['seq_len']}, batch {state['global_batch']}"]
                      + [f", GPUs {layout}"] * bool(gpus)
                      + [f", {state['systems']} CS systems"] * bool(wafers) if state else [])
    ax.set_title("Training step time breakdown" + ("" if fits.all() else " (hatched: does not fit)") + context,
                 fontsize=9)
    return fig


def training_memory_figure(ds: xr.Dataset) -> Figure:
    """Memory per device (weights, gradients, optimizer states, activations; wafers:
    activations in SRAM) against capacity (figures.memory_bars)."""
    return memory_bars(ds, MEMORY)


def training_figures(ds: xr.Dataset, state: dict | None = None) -> dict[str, Figure]:
    """The step figures of a `compute_training` result: "breakdown", "memory"."""
    return {"breakdown": training_breakdown_figure(ds, state), "memory": training_memory_figure(ds)}


def training_sweep_values(state: dict, control: str) -> list[int]:
    """A control's range: powers of two (TRAINING_POWERS), tp over the divisors of the
    model's heads up to 16, pp over powers of two up to 16 and the layers, systems 1..16."""
    check_choice("control", control, TRAINING_SWEEPABLE)
    spec = load_model(state["model"])
    if control == "tp":
        return [t for t in range(1, 17) if spec.n_heads % t == 0]
    if control == "pp":
        return [p for p in (1, 2, 4, 8, 16) if p <= spec.n_layers]
    return list(TRAINING_POWERS.get(control, range(1, 17)))


def training_sweep(state: dict, control: str) -> xr.Dataset:
    """`compute_training` over the range of `control` (dim named after it) for the chips
    it applies to: the GPU layout sweeps the GPUs, systems the wafers, the rest both."""
    s = normalize_training_state(state)
    values = training_sweep_values(s, control)
    gpus, wafers = _kinds(s["hardware"])
    hw = gpus if control in GPU_ONLY else wafers if control in WAFER_ONLY else list(s["hardware"])
    if not hw:
        raise InputError(f"sweeping {control} needs {'a GPU' if control in GPU_ONLY else 'a wafer (cs3, cs2)'} "
                         "among the selected hardware")
    if control == "ep" and not load_model(s["model"]).is_moe:
        raise InputError(f"sweeping ep needs a MoE model; allowed: a model with experts ({s['model']} is dense)")
    return _run_training(s, hw, **{control: values})


def training_sweep_view(state: dict, control: str) -> Figure:
    """MFU and step time against `control` (one line per chip, points that do not fit
    hollow, on the bottom edge where they have no value; the current value dashed and
    starred; the log step-time axis in plain numbers, plots._log_ticks)."""
    s = normalize_training_state(state)
    ds = training_sweep(s, control)
    fig = _fixed(Figure(), size=(6.0, 4.6), left=0.6, bottom=0.62, top=0.45)
    axes = fig.subplots(2, 1, sharex=True)
    xs = ds[control].values
    colors = sns.color_palette("deep", n_colors=ds.sizes["hardware"])
    for ax, var, scale, text in ((axes[0], "mfu", 1e-2, "MFU [%]"), (axes[1], "step_time_s", 1.0, "step time [s]")):
        for h, c in zip(ds.hardware.values, colors):
            ys, ok = ds[var].sel(hardware=h).values / scale, ds.fits.sel(hardware=h).values
            ax.plot(xs, np.where(ok, ys, np.nan), marker="o", ms=4, color=c, label=str(h))
            mark_points(ax, xs, ys, ok, c, s[control])
        ax.axvline(s[control], color="#555555", ls="--", lw=1)
        ax.set_title(text, fontsize=8, loc="left")
    if (ds.step_time_s > 0).any():  # all NaN (no math units): linear
        axes[1].set_yscale("log")
        plots._log_ticks(axes[1], "y")  # 30, 60 as the inference sweep writes them, not 3x10^1
    for ax in axes:
        ax.tick_params(labelsize=7, which="both")
    if control != "systems":
        axes[1].set_xscale("log", base=2)
        axes[1].xaxis.set_minor_locator(NullLocator())
    axes[1].set_xticks(xs, [str(int(x)) for x in xs])
    axes[1].set_xlabel(f"{control} (dashed: current {s[control]}; star: current point)\n{NO_VALUE}", fontsize=8)
    axes[0].legend(fontsize=7, ncols=min(4, ds.sizes["hardware"]), loc="best")
    fig.suptitle(f"Sweep of {control}: {s['model']}, {s['precision']}", fontsize=10)
    return fig

