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

    ts = explore.normalize_training_state(hardware=["h100_sxm", "cs3"], dp=32, zero=3)
    tds = explore.compute_training(ts)       # predict.training, dim `hardware` (training.py)
    explore.training_summary_table(tds)      # HTML: step time, tokens/s per device, MFU, memory
    explore.training_figures(tds, ts)        # {"breakdown", "memory"}; training_sweep_view(ts, "dp")
    explore.TrainingExplorer().widget        # the training page (GPUs: tp·pp·dp; wafers: systems)

A state holds the hardware (GPUs and wafer systems side by side), the model, weight /
activation / KV precision ("auto": the API's default for the weights), the format of the
attention and dense layers beside the experts' (attention_weights, "same": the weights';
GPUs only, a wafer says it keeps one format), batch, prompt and
generated tokens, tp and pp (GPUs; devices = tp·pp) and systems (wafers: CS systems the
model is pipelined across). GPUs are evaluated in one vectorized predict.inference call
and wafers in another (the API takes tp/pp on GPUs and devices on wafers); the results
are joined along `hardware`. An invalid setting for one group (tp not dividing the heads,
fp8 activations on a wafer) becomes a message in ds.attrs["problems"] while the other
group is still shown; a point that does not fit stays in the result with fits=False and
its reason. Only when nothing can be computed does `compute` raise InputError. A chip
without a known price (b60) costs NaN and the table, messages and cost views say so.

Time per update, measured on a busy 2-core machine (3 chips: h100_sxm, h200_sxm, cs3):
median 0.27 s, of which the model (two predict.inference calls, costs) is 45 ms and
drawing the three figures as SVG 0.22 s; the sweep tab 0.4 s; all 7 chips 0.35-0.55 s.
Explorer.timings holds the last measurement and the page shows it under the outputs.
"""
from .figures import *  # noqa: F401,F403
from .figures import _pareto_figure, _sweep_figure  # noqa: F401
from .state import *  # noqa: F401,F403
from .state import _kinds, _run  # noqa: F401
from .widgets import Explorer, _message, _placeholder  # noqa: F401
from .training import (TRAINING_CONTROLS, TRAINING_DEFAULTS, TRAINING_SWEEPABLE, compute_training,  # noqa: F401
                       normalize_training_state, training_figures, training_summary_table, training_sweep,
                       training_sweep_values, training_sweep_view)
from .training_widgets import TrainingExplorer  # noqa: F401
