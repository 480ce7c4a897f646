"""Explorer widget wiring (ipywidgets 8): thin, every callback goes through state and figures."""
from __future__ import annotations

import functools
import logging
import time

import xarray as xr

from ..errors import InputError
from ..specs import list_models

from ..plots import si_scale
from .state import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .figures import _empty  # noqa: F401
from .figures import MEMORY_SPLIT
from .live import LiveMemory, LiveRoofline, LiveStacked, inference_parts, owned_parts

def add_sliders(c: dict, s: dict, powers: dict, ranges: dict, look: dict, labels: dict | None = None) -> None:
    """Into the controls `c`: a selection slider over each of `powers` (name -> values, the
    state's value added) and an integer slider over each of `ranges` (name -> (low, high,
    label))."""
    import ipywidgets as w

    for key, opts in powers.items():
        c[key] = w.SelectionSlider(options=sorted(set(opts) | {s[key]}), value=s[key],
                                   description=(labels or {}).get(key, key), continuous_update=False, **look)
    for key, (lo, hi, text) in ranges.items():
        c[key] = w.IntSlider(min=lo, max=max(hi, s[key]), value=s[key], description=text,
                             continuous_update=False, **look)


def image_outputs(figures) -> dict:
    """The page's outputs: messages, table and timing (HTML) and one SVG image per figure."""
    import ipywidgets as w

    img = dict(format="svg+xml", layout=w.Layout(max_width="100%", height="auto"))
    return {"messages": w.HTML(), "table": w.HTML(), "timing": w.HTML(), **{k: w.Image(**img) for k in figures}}


def tag(widgets: dict, prefix: str) -> dict:
    """Give each widget the CSS class `{prefix}-{name}` (the browser tests select on it)."""
    for name, widget in widgets.items():
        widget.add_class(f"{prefix}-{name}")
    return widgets


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
                                       ("attention_weights", ATTENTION_WEIGHTS, s["attention_weights"],
                                        "attention wts"),
                                       ("activations", ACTIVATIONS, s["activations"], "activations"),
                                       ("kv", KV, s["kv"], "KV cache"), ("sweep", SWEEPABLE, sweep_control, "sweep"),
                                       ("metric_x", metric, metric_x, "metric x"),
                                       ("metric_y", metric, metric_y, "metric y")):
            c[key] = w.Dropdown(options=opts, value=value, description=text, **look)
        text = {"tp": "TP (GPUs)", "pp": "PP (GPUs)", "systems": "CS systems"}  # fits the 95 px label
        add_sliders(c, s, POWERS, {k: (lo, hi, text[k]) for k, (lo, hi) in RANGES.items()}, look)
        c["systems"].tooltip = "0: the fewest systems that hold the model"
        self.controls = tag(c, "wb")
        self.live = {"roofline": LiveRoofline(),
                     "breakdown": LiveStacked(inference_parts(), "tpot_s", "time per decode step",
                                              "Decode step breakdown (black: TPOT)"),
                     "memory": LiveMemory(MEMORY_SPLIT, rest_label="on-wafer SRAM")}
        self.outputs = tag({**image_outputs(("sweep", "pareto")), **{k: f.figure for k, f in self.live.items()}},
                           "wb-out")
        o = self.outputs
        row = dict(layout=w.Layout(flex_flow="row wrap", align_items="flex-start", grid_gap="12px"))
        point = w.VBox([w.HBox([o["roofline"], o["breakdown"]], **row), w.HBox([o["table"], o["memory"]], **row)])
        sweep_box = w.VBox([w.HBox([c["sweep"], c["metric_x"], c["metric_y"]], **row),
                            w.HBox([o["sweep"], o["pareto"]], **row)])
        self.tabs = w.Tab(children=[point, sweep_box], titles=("Operating point", "Sweep and Pareto"))
        controls = w.HBox([c["hardware"],
                           w.VBox([c[k] for k in ("model", "weights", "attention_weights", "activations", "kv")]),
                           w.VBox([c[k] for k in ("batch", "prompt", "generate")]),
                           w.VBox([c[k] for k in ("tp", "pp", "systems")])],
                          layout=w.Layout(flex_flow="row wrap", grid_gap="8px"))
        self._assemble(controls, "wb-explorer", CONTROLS, ("sweep", "metric_x", "metric_y"))

    def _assemble(self, controls, css_class: str, watched, sweep_controls) -> None:
        """The page (controls, messages, tabs, timing) and its wiring: a change of a control
        in `watched` recomputes, of one in `sweep_controls` redraws the sweep tab."""
        import ipywidgets as w

        o = self.outputs
        self.widget = w.VBox([controls, o["messages"], self.tabs, o["timing"]])
        self.widget.add_class(css_class)
        self.ds: xr.Dataset | None = None
        self.timings: dict[str, float] = {}
        self._sweep_stale = True
        for name in watched:
            self.controls[name].observe(self._on_change, names="value")
        for name in sweep_controls:
            self.controls[name].observe(self._on_sweep_change, names="value")
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

    FIGURES = ("roofline", "breakdown", "memory")  # outputs drawn by _draw
    SWEEP_OUTPUTS = ("sweep", "pareto")  # outputs drawn by _draw_sweep, the first shows errors

    def _compute(self):
        """(dataset, errors, warnings) for the current controls."""
        ds = compute(self.state)
        return ds, list(ds.attrs["problems"]), infeasible(ds) + price_notes(ds)

    def _draw(self, ds) -> str:
        """Set the live figures' data to a computed dataset; its summary table's html."""
        scale, unit = si_scale(ds.tpot_s, "s")
        self.live["roofline"].update(ds)
        self.live["breakdown"].update(ds, scale=scale, unit=unit, own=owned_parts(ds))
        self.live["memory"].update(ds)
        return table_html(summary_table(ds))

    def _draw_sweep(self) -> dict:
        c = self.controls
        figs = sweep_view(self.state, c["sweep"].value, c["metric_x"].value, c["metric_y"].value)
        return {k: svg(figs[k]) for k in self.SWEEP_OUTPUTS}

    def update(self) -> None:
        """Recompute the operating point and redraw the table, figures and messages."""
        t0 = time.perf_counter()
        errors, warnings = [], []
        try:
            ds, errors, warnings = self._compute()
            t1 = time.perf_counter()
            table = self._draw(ds)
            self.ds = ds
            self.outputs["table"].value = table
        except Exception as err:  # noqa: BLE001 - a message in the page, never a traceback
            t1 = time.perf_counter()
            self.ds = None
            errors.append(_message(err))
            for fig in self.live.values():
                fig.clear("no result for this setting (see the message above)")
            self.outputs["table"].value = "<i>no result for this setting (see the message above)</i>"
        self.outputs["messages"].value = messages_html(errors, warnings)
        t2 = time.perf_counter()
        self.timings = {"compute_s": t1 - t0, "figures_s": t2 - t1, "update_s": t2 - t0}
        self._show_timing()
        if self.tabs.selected_index == 1:
            self.update_sweep()

    def update_sweep(self) -> None:
        """Recompute the sweep view for the current controls."""
        t0 = time.perf_counter()
        try:
            for k, v in self._draw_sweep().items():
                self.outputs[k].value = v
        except Exception as err:  # noqa: BLE001
            first, *rest = self.SWEEP_OUTPUTS
            self.outputs[first].value = svg(_empty("Sweep: " + _message(err)))
            for k in rest:
                self.outputs[k].value = _placeholder()
        self._sweep_stale = False
        self.timings["sweep_s"] = time.perf_counter() - t0
        self._show_timing()

    def _show_timing(self) -> None:
        t = self.timings
        text = (f"updated in {t.get('update_s', 0):.2f} s (model {t.get('compute_s', 0) * 1e3:.0f} ms, "
                f"figures {t.get('figures_s', 0) * 1e3:.0f} ms)")
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

