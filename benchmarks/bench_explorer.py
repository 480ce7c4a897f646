"""Explorer update time as a user feels it: the real widgets of both pages (inference and
training), headless, driven through 20 slider changes each for three chips (two GPUs and a
CS-3); each change runs the page's callback (model, table, live figures) as a slider
release does in the browser. Prints the median and 90th percentile of an update, split into
the model (predict calls, costs, join) and the drawing (table html, the bqplot marks' data).

    .venv/bin/python benchmarks/bench_explorer.py [--changes 20]

Issue 20's targets: median <= 100 ms and p90 <= 150 ms on both pages.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from workbench.explore import Explorer, TrainingExplorer
from workbench.explore.state import _group
from workbench.explore.training import _training_group

HARDWARE = ["h100_sxm", "b200", "cs3"]
# (page, the slider moved and the values it steps through: every change reaches every chip)
PAGES = {"inference": (Explorer, "batch"), "training": (TrainingExplorer, "global_batch")}


def drive(page, control: str, changes: int) -> dict:
    """Step `control` through its options `changes` times; the update times in seconds."""
    options = list(page.controls[control].options)
    total, model, drawing = [], [], []
    for i in range(changes):
        value = options[(options.index(page.controls[control].value) + 1) % len(options)]
        _group.cache_clear()  # every change computed afresh (a value seen before would come from the cache)
        _training_group.cache_clear()
        t0 = time.perf_counter()
        page.controls[control].value = value  # the widget's observer runs the update
        total.append(time.perf_counter() - t0)
        model.append(page.timings["compute_s"])
        drawing.append(page.timings["figures_s"])
    return {"update": np.array(total), "model": np.array(model), "drawing": np.array(drawing)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=20)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    for name, (cls, control) in PAGES.items():
        page = cls(hardware=HARDWARE)
        t = drive(page, control, args.changes)
        print(f"{name} page, {args.changes} changes of {control} for {', '.join(HARDWARE)}: update median "
              f"{np.median(t['update']) * 1e3:.0f} ms, p90 {np.quantile(t['update'], 0.9) * 1e3:.0f} ms "
              f"(model {np.median(t['model']) * 1e3:.0f} ms, drawing {np.median(t['drawing']) * 1e3:.0f} ms)")


if __name__ == "__main__":
    main()
