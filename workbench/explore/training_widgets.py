"""Training explorer widget wiring (ipywidgets 8): thin, every callback goes through training.py."""
from __future__ import annotations

from ..plots import si_scale
from ..specs import list_models
from .figures import svg
from .live import LiveMemory, LiveStacked
from .state import HARDWARE, WAFERS, infeasible
from .training import (CHOICES, MEMORY, PART_COLORS, PARTS, TRAINING_CONTROLS, TRAINING_POWERS, TRAINING_SWEEPABLE,
                       compute_training, normalize_training_state, training_summary_table, training_sweep_view)
from .widgets import Explorer, add_sliders, image_outputs, tag

# Integer sliders: (low, high, label); the GPU layout is labelled as such.
SLIDERS = {"tp": (1, 16, "TP (GPUs)"), "pp": (1, 16, "PP (GPUs)"), "virtual_stages": (1, 8, "virtual stages"),
           "systems": (1, 16, "CS systems")}
LABELS = {"precision": "precision", "zero": "ZeRO (GPUs)", "recompute": "recompute",
          "attention": "attention (GPUs)", "seq_len": "seq len", "global_batch": "global batch",
          "micro_batch": "micro batch (GPUs)", "dp": "DP (GPUs)", "ep": "EP (GPUs, MoE)"}


class TrainingExplorer(Explorer):
    """Widget wiring: `.controls` (name -> widget; the training state's controls plus
    "sweep"), `.outputs` (name -> HTML or Image widget), `.widget` (the page). Every
    change of a control recomputes through the pure callbacks of training.py; the sweep
    tab is recomputed when it is shown. Errors become messages, never tracebacks. CSS
    classes are wb-train-* so the page can sit beside the inference Explorer, whose
    change, tab, display and timing handlers it reuses (its own __init__ builds the page)."""

    FIGURES = ("breakdown", "memory")
    SWEEP_OUTPUTS = ("sweep",)

    def __init__(self, sweep_control: str = "dp", **state):
        import ipywidgets as w

        s = normalize_training_state(state)
        look = dict(layout=w.Layout(width="320px"), style={"description_width": "130px"})
        labels = [(f"{h} (wafer)" if h in WAFERS else h, h) for h in HARDWARE]
        c = {"hardware": w.SelectMultiple(options=labels, value=s["hardware"], rows=len(HARDWARE),
                                          description="hardware", layout=w.Layout(width="200px"),
                                          style={"description_width": "70px"})}
        c["model"] = w.Dropdown(options=list_models(), value=s["model"], description="model", **look)
        for key, opts in CHOICES.items():
            c[key] = w.Dropdown(options=opts, value=s[key], description=LABELS[key], **look)
        c["sweep"] = w.Dropdown(options=TRAINING_SWEEPABLE, value=sweep_control, description="sweep", **look)
        add_sliders(c, s, TRAINING_POWERS, SLIDERS, look, labels=LABELS)
        self.controls = tag(c, "wb-train")
        self.live = {"breakdown": LiveStacked({k: (t, PART_COLORS[k]) for k, t in PARTS.items()}, "step_time_s",
                                              "time per step", "Step time (black)"),
                     "memory": LiveMemory(MEMORY)}
        self.outputs = tag({**image_outputs(("sweep",)), **{k: f.figure for k, f in self.live.items()}},
                           "wb-train-out")
        o = self.outputs
        row = dict(layout=w.Layout(flex_flow="row wrap", align_items="flex-start", grid_gap="12px"))
        step = w.VBox([o["table"], w.HBox([o["breakdown"], o["memory"]], **row)])
        sweep_box = w.VBox([c["sweep"], w.HBox([o["sweep"]], **row)])  # in a row: the figure keeps its size
        self.tabs = w.Tab(children=[step, sweep_box], titles=("Step", "Sweep"))
        controls = w.HBox([c["hardware"],
                           w.VBox([c[k] for k in ("model", "precision", "recompute", "seq_len", "global_batch")]),
                           w.VBox([c[k] for k in ("micro_batch", "tp", "pp", "dp", "ep", "zero")]),
                           w.VBox([c[k] for k in ("attention", "virtual_stages", "systems")])],
                          layout=w.Layout(flex_flow="row wrap", grid_gap="8px"))
        self._assemble(controls, "wb-train-explorer", TRAINING_CONTROLS, ("sweep",))

    @property
    def state(self) -> dict:
        return {k: self.controls[k].value for k in TRAINING_CONTROLS}

    def _compute(self):
        ds = compute_training(normalize_training_state(self.state))
        return ds, list(ds.attrs["problems"]), infeasible(ds) + list(ds.attrs["notes"])

    def _draw(self, ds) -> str:
        s = normalize_training_state(self.state)
        note = f": {s['model']}, seq {s['seq_len']}, batch {s['global_batch']}"  # the layout is in the table
        scale, unit = si_scale(ds.step_time_s, "s")
        self.live["breakdown"].update(ds, scale=scale, unit=unit, note=note)
        self.live["memory"].update(ds)
        return training_summary_table(ds)

    def _draw_sweep(self) -> dict:
        return {"sweep": svg(training_sweep_view(self.state, self.controls["sweep"].value))}
