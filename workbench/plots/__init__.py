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
from .charts import breakdown, heatmap, pareto_front, scaling_curve
from .labels import DECODE_PARTS, PREFILL_PARTS, _log_ticks, label, si_scale  # noqa: F401
from .roofline import roofline, roofline_points

__all__ = ["DECODE_PARTS", "PREFILL_PARTS", "breakdown", "heatmap", "label", "pareto_front",
           "roofline", "roofline_points", "scaling_curve", "si_scale"]

