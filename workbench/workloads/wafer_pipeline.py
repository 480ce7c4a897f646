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
points, among the units whose activation rows fit in the SRAM the layer regions' weights
and KV cache leave (a unit is c tokens of as many sequences as fit, or of one: see
pipelined_prefill); a chunk of every sequence at once (batch x c rows) was run before
whether or not its rows fit.
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


def _groups(batch, most):
    """(sequences a pipeline unit carries, units the batch splits into) when at most `most`
    sequences fit in a unit: the batch in the fewest equal groups (all of it where it fits;
    a fractional mean batch, as serving passes, stays as it is). Units are 0 where not even
    one sequence fits (the sequences are then 1, a placeholder)."""
    one = np.minimum(batch, 1.0)
    fits = most >= one
    most = np.minimum(np.maximum(np.floor(most), one), batch)
    g = np.ceil(batch / np.maximum(most, 1e-300))
    s = np.where(g > 1, np.ceil(batch / g), batch)
    return np.where(fits, s, 1.0), np.where(fits, g, 0.0)


def pipelined_prefill(w: WaferNumbers, model: ModelSpec, *, P, batch, prompt, devices, mapping="mesh",
                      expert_groups=0.0, max_rows=np.inf) -> dict:
    """Seconds from the prompt entering the first layer region to its last token leaving
    the last one, pipelined over chunks (the lm_head and request overheads are not in it).
    Also how long the busiest stage is occupied (`stage_busy_s`: every chunk's time there,
    (n - 1) max(p_mean, x) + max(p_last, x), what a decode step queued behind the prompt
    waits for), the unpipelined time (each layer's whole-prompt pass in turn, as before)
    and the compute bound (all prefill FLOPs at the peak of every PE holding a layer).

    Memory: a layer region buffers the activation rows of the unit it computes, at most
    `max_rows` a PE (what its weights and KV cache leave, wafer_inference.placement's
    `room_rows`; inf: unchecked). A unit is c tokens of s sequences: the GEMV form holds
    s x c rows on every PE of a line, MeshGEMM ceil(s x c / P) (its rows split over the
    line). For each chunk size the batch goes in the fewest equal groups of sequences that
    fit (all of it where it fits, as before) or one sequence at a time, whichever is
    faster, the units then every group's chunks in turn: n = groups x ceil(prompt / c)
    units through the same flow shop (smaller units fill the pipeline sooner). A chunk size at which
    not even one sequence's chunk fits is not a candidate; where none is, the times are NaN
    (wafer_inference flags the point). `chunk_tokens`, `chunk_sequences` and `rows_per_pe`
    report the unit taken."""
    shape = np.broadcast_shapes(np.shape(P), np.shape(batch), np.shape(prompt), np.shape(devices),
                                np.shape(max_rows), w.shape)
    prompt_a = np.broadcast_to(np.asarray(prompt, float), shape)
    batch_a = np.broadcast_to(np.asarray(batch, float), shape)
    P_a = np.broadcast_to(np.asarray(P, float), shape)
    crossings = np.asarray(devices, float) - 1.0
    L = model.n_layers
    best = np.full(shape, np.inf)
    chunk, seqs, rows_pe, busy = (np.full(shape, np.nan) for _ in range(4))
    # One chunk size at a time over every point (a loop over candidates, not points), keeping
    # the running minimum: memory stays that of one evaluation.
    longest = float(np.max(prompt_a)) if prompt_a.size else 0.0
    whole = prefill_layer(w, model, P=P, batch=batch, prompt=prompt, mapping=mapping, expert_groups=expert_groups)

    def take(ttft, c, s, rows, stream, p_last, x):
        nonlocal best, chunk, seqs, rows_pe, busy
        better = ttft < best
        chunk, seqs, rows_pe = np.where(better, c, chunk), np.where(better, s, seqs), np.where(better, rows, rows_pe)
        busy = np.where(better, stream + np.maximum(p_last, x), busy)
        best = np.where(better, ttft, best)

    def crossing(rows):
        return crossing_s(w, rows=rows, d_model=model.d_model) * (crossings > 0)

    # A chunk of at most 4,096 rows runs as GEMVs: MeshGEMM's P shift steps cost at least
    # k n / P map calls whatever the rows, more than the GEMV form's rows x k / P at these
    # sizes on the grids a layer region takes; the whole prompt takes the faster of the two.
    for size in [t for t in CHUNK_TOKENS if t < longest] + [np.inf]:  # the last candidate: the whole prompt
        c = np.minimum(size, prompt_a)
        for one in (False, True):  # the most sequences that fit, or one
            most = np.minimum(max_rows / c, 1.0) if one else max_rows / c
            s, g = _groups(batch_a, most)  # the GEMV form: s x c rows a PE
            n = g * np.ceil(prompt_a / c)
            kw = dict(P=P, batch=s, chunk=c, mapping=mapping, gemm=False, expert_groups=expert_groups)
            p_last = chunk_layer_s(w, model, context=prompt_a, **kw)
            p_mean = p_last if np.isinf(size) else chunk_layer_s(w, model, context=(prompt_a + c) / 2.0, **kw)
            x = crossing(s * c)
            stream = (n - 1.0) * np.maximum(p_mean, x)  # every unit but the last through the bottleneck
            take(np.where(g > 0, stream + L * p_last + crossings * x, np.inf), c, s, s * c, stream, p_last, x)
            if np.isinf(size):  # the whole prompt with MeshGEMM: ceil(s x prompt / P) rows a PE
                s, g = _groups(batch_a, np.minimum(most * P_a, 1.0) if one else most * P_a)
                mesh = whole if np.all(s == batch_a) else prefill_layer(
                    w, model, P=P, batch=s, prompt=prompt_a, mapping=mapping, expert_groups=expert_groups)
                p = mesh["cycles"] / w.clock_hz
                x = crossing(s * prompt_a)
                stream = (g - 1.0) * np.maximum(p, x)
                take(np.where(g > 0, stream + L * p + crossings * x, np.inf), prompt_a, s,
                     np.ceil(s * prompt_a / P_a), stream, p, x)
            if np.all(batch_a <= 1.0):  # one sequence: nothing to group
                break
    unpipelined = L * whole["cycles"] / w.clock_hz + crossings * crossing_s(
        w, rows=np.asarray(batch, float) * prompt, d_model=model.d_model)
    pes = L * np.asarray(P, float) ** 2
    bound = L * whole["flops"] / (pes * 2.0 * w.fmas_per_cycle("fp16") * w.clock_hz)
    return {"ttft_s": np.where(np.isfinite(best), best, np.nan), "chunk_tokens": chunk, "chunk_sequences": seqs,
            "rows_per_pe": rows_pe, "stage_busy_s": busy, "unpipelined_s": unpipelined, "compute_bound_s": bound}
