"""Prefill as a pipeline over the layer regions of one or more wafers.

With every layer resident in its own P x P region (placement "regions"), the layers are
stages of a pipeline: the prompt is cut into chunks of c tokens and region j works on
chunk i while region j+1 works on chunk i-1, so all regions compute at once. Time to first
token is then not the sum over layers of a whole-prompt pass (each region idle while the
others work) but a pipeline's makespan. The stages are the L layer regions and, between
systems, the crossings of the system I/O (a chunk's activations, batch x c x d_model x 2 B,
plus the crossing latency).

For a flow shop whose every stage takes the same time p_i for chunk i (the layers are
alike), the makespan is sum_i p_i + (L - 1) max_i p_i; chunk i's attention reads the i·c
keys before it, so p_i grows with i and the last chunk is the slowest. With crossings as
extra stages of time x, the bottleneck of chunk i is max(p_i, x):

    TTFT ~ (n - 1) max(p_mean, x) + L p_last + (devices - 1) x

with p_mean the stage time at the mean key count ((prompt + c) / 2) and p_last at the full
prompt. tests/workloads/test_wafer_pipeline.py checks it against a simulation of the flow
shop chunk by chunk. Small chunks fill the pipeline sooner; large ones pay each stage's
fixed latency (its reductions) fewer times: the chunk size is chosen per point among
CHUNK_TOKENS and the whole prompt for the smallest TTFT, one candidate at a time over all
points.
"""
from __future__ import annotations

import numpy as np

from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from .wafer_layers import decode_layer, prefill_layer

CHUNK_TOKENS = tuple(4.0 ** np.arange(0, 7))  # 1, 4, 16 .. 4096 tokens per chunk (and the whole prompt)
ACT_BYTES = 2.0  # 16-bit activations cross the system I/O


def crossing_s(w: WaferNumbers, *, rows, d_model):
    """One crossing of the system boundary by `rows` activation rows of `d_model`."""
    return w.io_latency_s + rows * d_model * ACT_BYTES / w.io_bytes_per_s


def chunk_layer_s(w: WaferNumbers, model: ModelSpec, *, P, batch, chunk, context, mapping="mesh", gemm=True,
                  expert_groups=0.0):
    """Seconds for one layer region to run a chunk of `chunk` tokens of `batch` sequences
    attending to `context` keys: with MeshGEMM (prefill kernel, P shift steps whatever the
    rows) or as a GEMV per row (the decode kernel on batch x chunk rows), whichever is
    faster for the shape. Both are WaferLLM's kernels as calibrated (calibrate/wafer_fit.py);
    few rows favour the GEMV form, whose cost is proportional to the rows (gemm=False: the
    GEMV form only, for chunks far below P shift steps' worth of rows)."""
    gemv = decode_layer(w, model, P=P, batch=batch * chunk, context=context, mapping=mapping,
                        expert_groups=expert_groups)["cycles"]
    if not gemm:
        return gemv / w.clock_hz
    mesh = prefill_layer(w, model, P=P, batch=batch, prompt=chunk, context=context, mapping=mapping,
                         expert_groups=expert_groups)["cycles"]
    return np.minimum(mesh, gemv) / w.clock_hz


def pipelined_prefill(w: WaferNumbers, model: ModelSpec, *, P, batch, prompt, devices, mapping="mesh",
                      expert_groups=0.0) -> dict:
    """Seconds from the prompt entering the first layer region to its last token leaving
    the last one, pipelined over chunks (the lm_head and request overheads are not in it).
    Also how long the busiest stage is occupied (`stage_busy_s`: every chunk's time there,
    (n - 1) max(p_mean, x) + max(p_last, x), what a decode step queued behind the prompt
    waits for), the unpipelined time (each layer's whole-prompt pass in turn, as before)
    and the compute bound (all prefill FLOPs at the peak of every PE holding a layer)."""
    shape = np.broadcast_shapes(np.shape(P), np.shape(batch), np.shape(prompt), np.shape(devices), w.shape)
    prompt_a = np.broadcast_to(np.asarray(prompt, float), shape)
    crossings = np.asarray(devices, float) - 1.0
    L = model.n_layers
    best, chunk, busy = np.full(shape, np.inf), np.full(shape, np.nan), np.full(shape, np.nan)
    # One chunk size at a time over every point (a loop over candidates, not points), keeping
    # the running minimum: memory stays that of one evaluation.
    longest = float(np.max(prompt_a)) if prompt_a.size else 0.0
    whole = prefill_layer(w, model, P=P, batch=batch, prompt=prompt, mapping=mapping, expert_groups=expert_groups)
    # A chunk of at most 4,096 rows runs as GEMVs: MeshGEMM's P shift steps cost at least
    # k n / P map calls whatever the rows, more than the GEMV form's rows x k / P at these
    # sizes on the grids a layer region takes; the whole prompt takes the faster of the two.
    for size in [t for t in CHUNK_TOKENS if t < longest] + [np.inf]:  # the last candidate: the whole prompt
        c = np.minimum(size, prompt_a)
        n = np.ceil(prompt_a / c)
        if np.isinf(size):
            p_last = np.minimum(whole["cycles"] / w.clock_hz, chunk_layer_s(
                w, model, P=P, batch=batch, chunk=c, context=prompt_a, mapping=mapping, gemm=False,
                expert_groups=expert_groups))
            p_mean = p_last
        else:
            kw = dict(P=P, batch=batch, chunk=c, mapping=mapping, gemm=False, expert_groups=expert_groups)
            p_mean = chunk_layer_s(w, model, context=(prompt_a + c) / 2.0, **kw)
            p_last = chunk_layer_s(w, model, context=prompt_a, **kw)
        x = crossing_s(w, rows=np.asarray(batch, float) * c, d_model=model.d_model) * (crossings > 0)
        streaming = (n - 1.0) * np.maximum(p_mean, x)  # every chunk but the last through the bottleneck
        ttft = streaming + L * p_last + crossings * x
        chunk = np.where(ttft < best, c, chunk)
        busy = np.where(ttft < best, streaming + np.maximum(p_last, x), busy)
        best = np.minimum(ttft, best)
    unpipelined = L * whole["cycles"] / w.clock_hz + crossings * crossing_s(
        w, rows=np.asarray(batch, float) * prompt, d_model=model.d_model)
    pes = L * np.asarray(P, float) ** 2
    bound = L * whole["flops"] / (pes * 2.0 * w.fmas_per_cycle("fp16") * w.clock_hz)
    return {"ttft_s": best, "chunk_tokens": chunk, "stage_busy_s": busy, "unpipelined_s": unpipelined,
            "compute_bound_s": bound}
