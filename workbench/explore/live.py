"""Live explorer figures (bqplot): built once per page and updated by setting their marks'
data, so a change of a control sends a few numbers to the browser instead of re-rendering
matplotlib figures to SVG (about 0.25 s for the three figures of a page on this 2-core
machine; setting the marks takes a few milliseconds: benchmarks/bench_explorer.py).

Chosen by measurement over plotly's FigureWidget and ipympl: bqplot is an ipywidgets
library (its figures are DOM widgets voila renders with no extra server), its marks take
numpy arrays as traits and a change of one is a small JSON diff; ipympl still renders
every frame with Agg on the server (tens of ms a figure), plotly's widget needs anywidget
and ships a several-MB bundle. The static reports keep matplotlib (figures.py), which
these views follow: the same parts, colours and units.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import xarray as xr

import seaborn as sns
from matplotlib.colors import to_hex


from ..plots.roofline import roof_lines, roofline_points
from ..specs import load_hardware
from .state import GPU_PARTS, PART_COLORS, WAFER_PARTS, _kinds

SIZE = dict(width="500px", height="330px")
MARGIN = dict(top=45, bottom=50, left=70, right=20)


def _figure(marks, axes, title: str, **kw):
    import bqplot as bq
    import ipywidgets as w
    return bq.Figure(marks=marks, axes=axes, title=title, animation_duration=0, fig_margin=MARGIN,
                     layout=w.Layout(**kw.pop("size", SIZE)), legend_text={"font-size": "10px"},
                     title_style={"font-size": "13px"}, **kw)


class LiveStacked:
    """Stacked bars per hardware (`parts`: variable -> (label, colour)) with the total as a
    black tick; a part no chip has is left out of the legend. Bars of points that do not
    fit are drawn faint and named in the title."""

    def __init__(self, parts: dict, total: str, ylabel: str, title: str):
        import bqplot as bq
        self.parts, self.total, self.base_title = parts, total, title
        self.x, self.y = bq.OrdinalScale(), bq.LinearScale(min=0.0)
        self.bars = bq.Bars(x=["-"], y=np.zeros((len(parts), 1)), type="stacked", padding=0.35,
                            scales={"x": self.x, "y": self.y}, display_legend=True,
                            colors=[to_hex(c) for _, c in parts.values()], labels=[t for t, _ in parts.values()])
        # the total: a rectangle marker turned flat (rotation 90) across the bar
        self.tick = bq.Scatter(x=["-"], y=[0.0], marker="rectangle", default_size=260, colors=["black"],
                               scales={"x": self.x, "y": self.y, "rotation": bq.LinearScale(min=0.0, max=180.0)},
                               rotation=[90.0], labels=["total"], display_legend=True)
        self.axis_y = bq.Axis(scale=self.y, orientation="vertical", label=ylabel, tick_format=".3~s")
        self.figure = _figure([self.bars, self.tick], [bq.Axis(scale=self.x), self.axis_y], title,
                              legend_location="top-left")  # long labels: the legend grows rightwards, inside

    def update(self, ds: xr.Dataset, *, scale: float = 1.0, unit: str = "", own=None, note: str = "") -> None:
        """Bars of `ds` (one value per hardware); `own(part)` lists the chips that report a
        part (others count 0)."""
        names = [str(h) for h in np.atleast_1d(ds.hardware.values)]
        fits = np.atleast_1d(ds.fits.values).astype(bool)
        ys = []
        for part in self.parts:
            v = np.atleast_1d(ds[part].values).astype(float) if part in ds else np.zeros(len(names))
            if own is not None:
                v = np.where(np.isin(names, own(part)), v, 0.0)
            ys.append(np.nan_to_num(v) / scale)
        total = np.nan_to_num(np.atleast_1d(ds[self.total].values).astype(float)) / scale
        bad = [n for n, ok in zip(names, fits) if not ok]
        used = self.used(ys) or [0]  # the legend lists the parts some chip has
        specs = list(self.parts.values())
        with self.figure.hold_sync(), self.bars.hold_sync(), self.tick.hold_sync():
            self.bars.x, self.bars.y = names, np.array([ys[i] for i in used])
            self.bars.colors = [to_hex(specs[i][1]) for i in used]
            self.bars.labels = [specs[i][0] for i in used]
            self.bars.opacities = [1.0 if ok else 0.35 for ok in fits]
            self.tick.x, self.tick.y, self.tick.rotation = names, total, [90.0] * len(names)
            top = float(max(np.max(np.sum(ys, axis=0), initial=0.0), total.max(initial=0.0)))
            self.y.max = top * (1.3 + 0.2 * len(used)) or 1.0  # room above the bars for the legend
            self.axis_y.label = f"{self.axis_y.label.split(' [')[0]} [{unit}]" if unit else self.axis_y.label
            self.figure.title = self.base_title + note + (f" (faint: does not fit: {', '.join(bad)})" if bad else "")

    @staticmethod
    def used(ys) -> list[int]:
        """The series with a non-zero bar."""
        return [i for i, y in enumerate(ys) if np.any(y)]

    def clear(self, text: str) -> None:
        with self.figure.hold_sync():
            self.bars.x, self.bars.y = ["-"], np.zeros((len(self.parts), 1))
            self.tick.x, self.tick.y = ["-"], [0.0]
            self.figure.title = text


class LiveMemory:
    """Memory per device stacked by `split` ((variable, label, colour)) against capacity
    (black marker), in GB, one bar per hardware; `rest_label` draws the total of chips
    that report no part (a wafer's on-wafer SRAM). Labels: total / capacity, red where the
    point does not fit."""

    def __init__(self, split, rest_label: str | None = None):
        import bqplot as bq
        self.split = list(split) + ([("_rest", rest_label, "#8c8c8c")] if rest_label else [])
        self.cat, self.gb = bq.OrdinalScale(reverse=True), bq.LinearScale(min=0.0)
        self.bars = bq.Bars(x=["-"], y=np.zeros((len(self.split), 1)), type="stacked", orientation="horizontal",
                            padding=0.4, scales={"x": self.cat, "y": self.gb}, display_legend=True,
                            colors=[c for _, _, c in self.split], labels=[t for _, t, _ in self.split])
        self.cap = bq.Scatter(x=[0.0], y=["-"], marker="rectangle", default_size=200, colors=["black"],
                              scales={"x": self.gb, "y": self.cat})
        self.text = bq.Label(x=[0.0], y=["-"], text=[""], scales={"x": self.gb, "y": self.cat}, default_size=11,
                             x_offset=6, align="start", colors=["black"])
        axes = [bq.Axis(scale=self.cat, orientation="vertical"),
                bq.Axis(scale=self.gb, label="memory per device [GB] (black: capacity)", tick_format=".3~s")]
        self.figure = _figure([self.bars, self.cap, self.text], axes, "Memory per device against capacity",
                              legend_location="bottom-right", size=dict(width="500px", height="300px"))

    def update(self, ds: xr.Dataset) -> None:
        names = [str(h) for h in np.atleast_1d(ds.hardware.values)]
        cap = np.atleast_1d(ds.memory_capacity_bytes.values).astype(float) / 1e9
        total = np.atleast_1d(ds.memory_per_device_bytes.values).astype(float) / 1e9
        fits = np.atleast_1d(ds.fits.values).astype(bool)
        xs, acc = [], np.zeros(len(names))
        for var, _, _ in self.split:
            if var == "_rest":
                part = np.where(acc > 0, 0.0, np.nan_to_num(total))
            else:
                part = np.nan_to_num(np.atleast_1d(ds[var].values).astype(float) / 1e9 if var in ds
                                     else np.zeros(len(names)))
            xs.append(part)
            acc = acc + part
        labels = [f"{t:,.1f} / {c:,.1f} GB" + ("" if ok else (" does not fit" if t > c else " infeasible"))
                  for t, c, ok in zip(total, cap, fits)]
        with self.figure.hold_sync(), self.bars.hold_sync(), self.cap.hold_sync(), self.text.hold_sync():
            self.bars.x, self.bars.y = names, np.array(xs)
            self.cap.x, self.cap.y = cap, names
            self.text.x, self.text.y, self.text.text = np.fmax(np.nan_to_num(total), cap), names, labels
            self.text.colors = ["black" if ok else "#b71c1c" for ok in fits]
            self.gb.max = float(np.nanmax(np.concatenate([cap, np.nan_to_num(total)]))) / 0.45  # room: labels, legend

    def clear(self, text: str) -> None:
        with self.figure.hold_sync():
            self.bars.x, self.bars.y = ["-"], np.zeros((len(self.split), 1))
            self.cap.x, self.cap.y = [0.0], ["-"]
            self.text.x, self.text.y, self.text.text, self.text.colors = [0.0], ["-"], [text], ["#555555"]


class LiveRoofline:
    """Roofline of the selected GPUs at the most common activations dtype (solid: peak
    and HBM bandwidth; dashed: the achievable roof, as plots.roofline draws it), each
    GPU's prefill (circle) and decode (triangle) operating point; chips not on this roof
    (wafers, another math dtype) named in the title."""

    def __init__(self):
        import bqplot as bq
        self.x, self.y = bq.LogScale(), bq.LogScale()
        s = {"x": self.x, "y": self.y}
        self.roof = bq.Lines(x=[1.0, 2.0], y=[1.0, 2.0], scales=s, stroke_width=2, display_legend=True)
        self.achievable = bq.Lines(x=[1.0, 2.0], y=[1.0, 2.0], scales=s, stroke_width=1, line_style="dashed")
        self.prefill = bq.Scatter(x=[1.0], y=[1.0], scales=s, marker="circle", default_size=70, display_names=False)
        self.decode = bq.Scatter(x=[1.0], y=[1.0], scales=s, marker="triangle-up", default_size=90,
                                 display_names=False)
        axes = [bq.Axis(scale=self.x, label="arithmetic intensity [FLOP/B]", tick_format=".2~s"),
                bq.Axis(scale=self.y, orientation="vertical", label="FLOP/s per device", tick_format=".2~s")]
        self.figure = _figure([self.roof, self.achievable, self.prefill, self.decode], axes, "Roofline",
                              legend_location="bottom-right")

    def update(self, ds: xr.Dataset) -> None:
        gpus, wafers = _kinds([str(h) for h in np.atleast_1d(ds.hardware.values)])
        acts = {h: str(np.atleast_1d(ds.activations.sel(hardware=h).values)[0]) for h in gpus}
        dtype = Counter(acts.values()).most_common(1)[0][0] if gpus else None
        on = [h for h in gpus if acts[h] == dtype and np.isfinite(load_hardware(h).peak(dtype))]
        off = [f"{h} (wafer)" for h in wafers] + [f"{h} ({acts[h]})" for h in gpus if h not in on]
        if not on:
            self.clear("Roofline: no GPU on it" + (f" (not on a GPU roof: {', '.join(off)})" if off else ""))
            return
        specs = [load_hardware(h) for h in on]
        colors = [to_hex(c) for c in sns.color_palette("deep", len(on))]
        pts = roofline_points(ds.sel(hardware=on))
        pts = pts[np.isfinite(pts.intensity_flops_per_byte) & np.isfinite(pts.flops_per_s)]
        _, _, lines = roof_lines(specs, dtype, pts.intensity_flops_per_byte)
        color_of = dict(zip(on, colors))
        with self.figure.hold_sync():
            for mark, which in ((self.roof, 0), (self.achievable, 1)):
                with mark.hold_sync():
                    mark.x = np.array([line[which][0] for line in lines])
                    mark.y, mark.colors = np.array([line[which][1] for line in lines]), colors
            self.roof.labels = [f"{h} {dtype}" for h in on]
            for mark, phase in ((self.prefill, "prefill"), (self.decode, "decode")):
                p = pts[pts.phase == phase]
                with mark.hold_sync():
                    mark.x, mark.y = p.intensity_flops_per_byte.to_numpy(float), p.flops_per_s.to_numpy(float)
                    mark.colors = [color_of[h] for h in p.hardware] or ["black"]
                    mark.names = [f"{h} {phase}" for h in p.hardware]
            self.figure.title = (f"Roofline ({dtype}): circle prefill, triangle decode"
                                 + (f"; not on this roof: {', '.join(off)}" if off else ""))

    def clear(self, text: str) -> None:
        with self.figure.hold_sync():
            for mark in (self.prefill, self.decode):
                with mark.hold_sync():
                    mark.x, mark.y, mark.names, mark.colors = [], [], [], ["black"]
            self.figure.title = text


def inference_parts() -> dict:
    """The decode-step parts of the breakdown: variable -> (label, colour)."""
    return {name: (name.removeprefix("decode_").removesuffix("_s"), color) for name, color in PART_COLORS.items()}


def owned_parts(ds: xr.Dataset):
    """`own(part)`: the chips that report an inference part (GPU kernels on GPUs, wafer
    terms on wafers, comm on both)."""
    gpus, wafers = _kinds([str(h) for h in np.atleast_1d(ds.hardware.values)])
    return lambda part: wafers if part in WAFER_PARTS else gpus if part in GPU_PARTS else gpus + wafers
