"""Roofline of a GPU spec with the operating points of prefill and decode."""
from __future__ import annotations


import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure

from ..errors import InputError
from ..specs import HardwareSpec, load_hardware


from .labels import *  # noqa: F401,F403
from .labels import _side_labels  # noqa: F401
from .labels import _axes, _log_ticks, _tick, _var  # noqa: F401

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
    lo, hi, lines = roof_lines(specs, dtype, None if pts is None else pts["intensity_flops_per_byte"])
    yscale, yunit = si_scale([s.peak(dtype) for s in specs], "FLOP/s")

    fig, ax = _axes(ax)
    colors = sns.color_palette("deep", n_colors=max(len(specs), 1))
    for s, (roof, achievable), c in zip(specs, lines, colors):
        ridge = roof[0][1]
        ax.plot(roof[0], np.array(roof[1]) / yscale, color=c, lw=2,
                label=f"{s.name} {dtype} peak (ridge {ridge:.0f} FLOP/B)", gid=f"roof:{s.name}")
        ax.plot(achievable[0], np.array(achievable[1]) / yscale, color=c, lw=1.2,
                ls="--", label=f"{s.name} achievable", gid=f"achievable:{s.name}")
        ax.plot([ridge], [roof[1][1] / yscale], marker="o", ms=4, color=c)
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


def roof_lines(specs, dtype: str, intensities=None) -> tuple:
    """(lo, hi, [((x, y) roof, (x, y) achievable) per spec]): each roof as the three points
    (lo, bw·lo), (ridge, peak), (hi, peak) over intensities from 1/300 of the lowest ridge to
    30x the highest, widened to a third below and 3x above the finite positive
    `intensities` given; the achievable roof at peak · gemm_peak_eff and bandwidth ·
    memory_eff(1 GB). Shared by `roofline` and the explorer's live roofline."""
    ridges = [s.peak(dtype) / s.hbm.bandwidth_bytes_per_s for s in specs]
    lo, hi = min(ridges) / 300.0, max(ridges) * 30.0
    inten = np.asarray([] if intensities is None else intensities, float)
    inten = inten[np.isfinite(inten) & (inten > 0)]
    if inten.size:
        lo, hi = min(lo, inten.min() / 3.0), max(hi, inten.max() * 3.0)
    lines = []
    for s in specs:
        peak, bw = s.peak(dtype), s.hbm.bandwidth_bytes_per_s
        peak_a, bw_a = peak * s.gemm_peak_eff_for(dtype), bw * float(s.memory_eff(MEMORY_EFF_AT_BYTES))
        lines.append((([lo, peak / bw, hi], [bw * lo, peak, peak]),
                      ([lo, peak_a / bw_a, hi], [bw_a * lo, peak_a, peak_a])))
    return lo, hi, lines


def roofline_points(ds: xr.Dataset, hardware=None) -> pd.DataFrame:
    """Prefill and decode operating points of a predict.inference Dataset, one row each
    per point of the grid: prefill FLOP/s = prefill_flops_per_device / ttft_s at intensity
    prefill_flops_per_device / prefill_bytes_per_device; decode FLOP/s =
    decode_step_flops_per_device / tpot_s at intensity decode_step_flops_per_device /
    decode_step_bytes_per_device. `hardware` (or the Dataset's `hardware` coordinate)
    names the GPU whose roof they sit under. Columns: label, phase, intensity_flops_per_byte,
    flops_per_s, the grid's dims and `fits` when the Dataset has it."""
    need = ("prefill_flops_per_device", "prefill_bytes_per_device", "ttft_s",
            "decode_step_flops_per_device", "decode_step_bytes_per_device", "tpot_s")
    for v in need:
        _var(ds, v)
    if hardware is not None:
        _gpu(hardware)  # the GPU whose roof the points sit under
    elif "hardware" in ds.variables:
        for name in np.unique(ds["hardware"].values):
            _gpu(name)
    else:
        raise InputError("hardware=None: the Dataset has no 'hardware' coordinate; pass hardware=<name>")
    pre_flops = ds["prefill_flops_per_device"]
    phases = {
        "prefill": (pre_flops / ds["prefill_bytes_per_device"], pre_flops / ds["ttft_s"]),
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


