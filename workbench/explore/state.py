"""Explorer state: controls, validation, the vectorized computation and the summary table."""
from __future__ import annotations

import functools
import html
import numbers

import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr

from .. import predict
from ..costs import add_costs, catalog_prices
from ..errors import InputError, brief, check_choice
from ..backends import backend_for
from ..specs import list_gpus, list_models
from ..units import DENSE_DTYPES, DTYPES, unit_attrs

WAFERS = ("cs3", "cs2")
HARDWARE = tuple(list_gpus()) + WAFERS
WEIGHTS = tuple(d for d in DTYPES if d != "tf32")
ACTIVATIONS = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "fp4")
# The format of every matmul but the routed experts' ("same": the weights'; GPUs only,
# predict.inference(attention_weights=)): gpt-oss keeps BF16 attention beside MXFP4 experts.
ATTENTION_WEIGHTS = ("same",) + tuple(d for d in DENSE_DTYPES if d != "tf32")
KV = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
POWERS = {"batch": tuple(2 ** i for i in range(11)), "prompt": tuple(2 ** i for i in range(7, 18)),
          "generate": tuple(2 ** i for i in range(4, 15))}
RANGES = {"tp": (1, 16), "pp": (1, 8), "systems": (0, 16)}  # systems 0: the fewest that hold the model
DEFAULTS = {"hardware": ("h100_sxm", "h200_sxm", "cs3"), "model": "llama_3_1_70b", "weights": "fp8",
            "attention_weights": "same", "activations": "auto", "kv": "auto", "batch": 8, "prompt": 2048,
            "generate": 256, "tp": 8, "pp": 1, "systems": 0}
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


def complete_state(defaults: dict, state: dict | None, overrides: dict) -> dict:
    """`state` and `overrides` over `defaults`, with the checks every explorer shares:
    no unknown control, one or more known hardware names (a tuple, duplicates dropped),
    a known model. Raises InputError naming the control and what is allowed."""
    s = dict(defaults, **(state or {}), **overrides)
    unknown = [k for k in s if k not in defaults]
    if unknown:
        raise InputError(f"control {unknown[0]!r} is not known; allowed: {', '.join(defaults)}")
    hw = (s["hardware"],) if isinstance(s["hardware"], str) else tuple(s["hardware"])
    if not hw:
        raise InputError("hardware=() is not allowed; allowed: one or more of " + ", ".join(HARDWARE))
    check_choice("hardware", list(hw), HARDWARE)
    s["hardware"] = tuple(dict.fromkeys(hw))
    check_choice("model", s["model"], list_models())
    return s


def join_groups(parts: list, problems: list, hardware) -> xr.Dataset:
    """The GPU and wafer results joined along `hardware` in the order asked for (a wafer's
    `devices` dimension named `systems`); InputError with every problem when none ran."""
    if not parts:
        raise InputError("; ".join(problems))
    ds = parts[0] if len(parts) == 1 else xr.concat(parts, dim="hardware", data_vars="all", join="outer",
                                                    coords="different", compat="equals")
    if "devices" in ds.dims:
        ds = ds.rename(devices="systems")
    return ds.sel(hardware=[h for h in hardware if h in ds.hardware.values])


def normalize_state(state: dict | None = None, **overrides) -> dict:
    """`state` (and keyword overrides) completed with DEFAULTS and checked: names that
    are not controls, unknown hardware / model / precisions and sizes that are not
    positive integers raise InputError naming the control and what is allowed."""
    s = complete_state(DEFAULTS, state, overrides)
    for key, allowed in (("weights", WEIGHTS), ("attention_weights", ATTENTION_WEIGHTS), ("activations", ACTIVATIONS),
                         ("kv", KV)):
        check_choice(key, s[key], allowed)
    for key in SWEEPABLE:
        v, low = s[key], RANGES.get(key, (1,))[0]
        allowed = "a positive integer" + (" or 0 (the fewest systems that hold the model)" if low == 0 else "")
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):  # '8' too: a str is never a number
            raise InputError(f"{key}={brief(v)} is not a number; allowed: {allowed}")
        if not float(v).is_integer() or v < low:
            raise InputError(f"{key}={brief(v)} is not allowed; allowed: {allowed}")
        s[key] = int(v)
    return s


def wafer_devices(systems):
    """The `devices` a wafer is given for the systems control: 0 is devices="min"."""
    return "min" if np.ndim(systems) == 0 and systems == 0 else systems


def _kinds(hardware) -> tuple[list, list]:
    """(hardware laid out by tp/pp, hardware laid out by systems): the controls each
    backend takes (backends.*.layout_args), so a new family joins the group it fits."""
    by_devices = [h for h in hardware if "tp" not in backend_for(h).layout_args]
    return [h for h in hardware if h not in by_devices], by_devices


def _run(state: dict, hardware, **sizes) -> xr.Dataset:
    """predict.inference for `hardware` (GPUs in one call, wafers in another), joined on
    `hardware` in the order given, with costs. `sizes` override the state's (lists sweep).
    A separate attention format reaches the GPUs; the wafers keep `weights` and say so."""
    sz = {k: sizes.get(k, state[k]) for k in SWEEPABLE}
    auto = {k: None if state[k] == "auto" else state[k] for k in ("activations", "kv")}
    common = dict(model=state["model"], batch=sz["batch"], prompt=sz["prompt"], generate=sz["generate"],
                  weights=state["weights"], **auto)
    gpus, wafers = _kinds(hardware)
    parts, problems = [], []
    attention = {} if state["attention_weights"] == "same" else {"attention_weights": state["attention_weights"]}
    if attention and wafers:
        problems.append(f"{', '.join(wafers)}: attention_weights={state['attention_weights']} applies to GPUs; "
                        f"a wafer's layers keep weights={state['weights']}")
    for group, kwargs in ((gpus, dict(tp=sz["tp"], pp=sz["pp"], **attention)),
                          (wafers, dict(devices=wafer_devices(sz["systems"])))):
        if not group:
            continue
        try:
            ds = _group(tuple(group), _frozen(dict(kwargs, **common))).copy()
        except InputError as err:
            problems.append(f"{', '.join(group)}: {err}")
            continue
        parts.append(ds)
    # a chip without a known price (0, as predict.inference reports it) costs NaN, the others still show
    ds = add_costs(join_groups(parts, problems, hardware), prices=dict.fromkeys(unpriced_hardware(hardware), 0.0))
    for name in ds.data_vars:
        if "units" not in ds[name].attrs:
            ds[name].attrs.update(unit_attrs(name))
    ds.attrs["problems"] = problems
    return ds


def _frozen(kwargs: dict) -> tuple:
    """Keyword arguments as a hashable key (lists of a sweep as tuples)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items()))


@functools.lru_cache(maxsize=32)
def _group(hardware: tuple, kwargs: tuple) -> xr.Dataset:
    """predict.inference of one group of chips (GPUs or wafers), remembered: a change of a
    control recomputes only the groups it reaches (tp and pp the GPUs, systems the wafers),
    and returning to a setting recomputes nothing. Callers copy before changing it."""
    args = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs}
    ds = predict.inference(hardware=list(hardware), **args)
    return ds.drop_vars([c for c in ("mapping", "placement") if c in ds.coords])


def compute(state: dict) -> xr.Dataset:
    """The operating point of every selected chip: a predict.inference Dataset over
    `hardware` with costs (costs.add_costs). ds.attrs["problems"] lists the groups that
    could not be computed and why; InputError when none could."""
    s = normalize_state(state)
    return _run(s, s["hardware"]).assign_attrs(state=repr(s))


def unpriced_hardware(hardware) -> list[str]:
    """The chips of `hardware` whose price per device-hour is not known (costs.catalog_prices)."""
    known = catalog_prices()
    return [str(h) for h in np.atleast_1d(hardware) if str(h) not in known]


def price_notes(ds: xr.Dataset) -> list[str]:
    """'<hardware>: price per device-hour not known; no cost per M tokens' for each chip of `ds`."""
    return [f"{h}: price per device-hour not known; no cost per M tokens"
            for h in unpriced_hardware(ds.hardware.values)]


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
    rows that do not fit marked, "price not known" for the cost of a chip without a price;
    each cell carries data-var and its SI data-value."""
    head = "".join(f"<th>{t}" + (f"<br>[{u}]" if u else "") + "</th>" for _, t, _, u in COLUMNS)
    rows, unpriced = [], unpriced_hardware(df.index.values)
    for hw, r in df.iterrows():
        cells = "".join(f'<td data-var="{c}" data-value="{float(r[c])!r}">'
                        + ("price not known" if c == "cost_per_million_tokens_usd" and hw in unpriced
                           else _cell(float(r[c]) / s)) + "</td>" for c, _, s, _ in COLUMNS)
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


