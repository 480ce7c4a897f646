"""Inference on Cerebras systems: the model laid out layer by layer on P x P PE regions of
one or more wafers (weights resident in SRAM), prefill then static-batch decode.

Placement: each transformer layer owns a region of P x P PEs, and the lm_head as many regions
as its weights need; the regions tile the program rectangle of each wafer, and a model
larger than one wafer is pipelined across `devices` systems (activations cross the
system I/O). A token's decode step runs every layer in turn, so the step is the sum of
the layers' times plus the crossings. Prefill and decode may use different grids
(WaferLLM re-lays the weights out between phases; that cost is not modelled). Without
`pe_grid`, each phase takes the fastest grid side that fits, searched over every integer
side (decode: the whole step, layers and lm_head; prefill: the layers). Concurrent
batches pipelined through the layer regions are not modelled: throughput is batch /
step time.
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..primitives.mesh import mesh_gemv
from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from .wafer_layers import decode_layer, layer_memory_per_pe, prefill_layer

GRID_CHUNK = 64  # candidate grid sides evaluated together (bounds the search's memory)


def grid_candidates(w: WaferNumbers):
    """Every integer grid side that fits in the program rectangle: tile padding makes the
    cost jump between neighbouring sides, so a coarser ladder misses the fastest."""
    return np.arange(1, np.max(w.max_square_grid) + 1, dtype=float)


def regions(w: WaferNumbers, P):
    """Layer regions of P² PEs in one wafer's program rectangle. Regions need not be
    square (a P x P grid may be laid out as any rectangle of the same area), so the
    count is by area; the tiling loss of real layouts is not modelled."""
    return np.floor(w.program_pes / (P * P))


def _lm_head_bytes(model: ModelSpec, w_bytes):
    return model.vocab_size * model.d_model * (1 if model.tied_embeddings else 2) * w_bytes


def _lm_head_regions(model: ModelSpec, P, free_per_pe, w_bytes):
    return np.ceil(_lm_head_bytes(model, w_bytes) / np.maximum(P * P * free_per_pe, 1.0))


def placement(w: WaferNumbers, model: ModelSpec, *, P, devices, batch, tokens, generated, w_bytes,
              kv_bytes, mapping) -> dict:
    """Per-PE memory of a layer region and whether all regions fit on `devices` wafers."""
    mem = layer_memory_per_pe(w, model, P=P, batch=batch, tokens=tokens, generated=generated,
                              w_bytes=w_bytes, kv_bytes=kv_bytes, mapping=mapping)
    free = w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes - mem["activation_bytes"]
    needed = model.n_layers + _lm_head_regions(model, P, free, w_bytes)
    fits_pe = mem["total_bytes"] <= w.sram_per_pe_bytes
    fits_regions = (needed <= devices * regions(w, P)) & (P <= w.max_square_grid)
    return {"pe_bytes": mem["total_bytes"], "regions_needed": needed, "fits_pe": fits_pe,
            "fits_regions": fits_regions, "fits": fits_pe & fits_regions}


def _best_grid(cost, candidates, shape):
    """The fastest feasible grid side for every point of `shape` (NaN where none fits).
    `cost(P)` -> (cycles, feasible) for P along a trailing axis; the candidates go in
    chunks of GRID_CHUNK (a loop over chunks, not points), keeping a running minimum;
    ties go to the smaller side."""
    best_cycles, best = np.full(shape, np.inf), np.full(shape, np.nan)
    for start in range(0, len(candidates), GRID_CHUNK):
        cand = candidates[start:start + GRID_CHUNK]
        cycles, feasible = cost(cand.reshape((1,) * len(shape) + (-1,)))
        masked = np.where(feasible, cycles, np.inf)
        masked = np.broadcast_to(masked, shape + (len(cand),))
        low = np.min(masked, axis=-1)
        better = low < best_cycles
        best = np.where(better, np.take(cand, np.argmin(masked, axis=-1)), best)
        best_cycles = np.minimum(best_cycles, low)
    return best


def wafer_inference(*, w: WaferNumbers, model: ModelSpec, devices, batch, prompt,
                    generate, weights: str, kv: str, pe_grid=None, prefill_pe_grid=None,
                    mapping: str = "mesh", clock_hz=None) -> dict:
    """Prefill + static-batch decode on `devices` CS systems. Sizes are ndarrays."""
    clock = clock_hz if clock_hz is not None else w.clock_hz
    w_bytes, kv_bytes = DTYPE_BYTES[weights], DTYPE_BYTES[kv]
    context = prompt + generate / 2.0  # mean decode context (steps are linear in it)
    shape = np.broadcast_shapes(np.broadcast(devices, batch, prompt, generate, 0.0 if pe_grid is None else pe_grid,
                                             0.0 if prefill_pe_grid is None else prefill_pe_grid).shape, w.shape)
    kw = dict(devices=devices, batch=batch, tokens=prompt + generate, generated=generate,
              w_bytes=w_bytes, kv_bytes=kv_bytes, mapping=mapping)

    def decode_parts(P, b, c, w=w):  # one layer's decode step and the lm_head GEMV
        return (decode_layer(w, model, P=P, batch=b, context=c, mapping=mapping),
                mesh_gemv(w, P=P, k=model.d_model, n=model.vocab_size, rows=b, mapping=mapping))

    if pe_grid is None:
        cand = grid_candidates(w)
        ex = lambda a: np.expand_dims(np.asarray(a, dtype=float), -1)  # noqa: E731
        kwc = {k: (v if isinstance(v, (float, str)) else ex(v)) for k, v in kw.items()}
        wc = w.with_trailing_axis()  # knob arrays broadcast against the candidate axis

        def decode_cost(Pc):  # the whole decode step: every layer and the lm_head
            layer, head = decode_parts(Pc, ex(batch), ex(context), wc)
            return model.n_layers * layer["cycles"] + head["cycles"], placement(wc, model, P=Pc, **kwc)["fits"]

        def prefill_cost(Pc):
            pre = prefill_layer(wc, model, P=Pc, batch=ex(batch), prompt=ex(prompt), mapping=mapping)
            return pre["cycles"], placement(wc, model, P=Pc, **kwc)["fits"]

        # Where nothing fits, report the largest grid (the closest to fitting) as infeasible.
        P_dec = np.nan_to_num(_best_grid(decode_cost, cand, shape), nan=cand[-1])
        P_pre = np.nan_to_num(_best_grid(prefill_cost, cand, shape), nan=cand[-1])
    else:
        P_dec = np.asarray(pe_grid, dtype=float)
        P_pre = P_dec if prefill_pe_grid is None else np.asarray(prefill_pe_grid, float)
    P_dec = np.broadcast_to(P_dec, shape) * 1.0
    P_pre = np.broadcast_to(P_pre, shape) * 1.0

    layer, head = decode_parts(P_dec, batch, context)
    pre = prefill_layer(w, model, P=P_pre, batch=batch, prompt=prompt, mapping=mapping)
    place = placement(w, model, P=P_dec, **kw)
    place_pre = placement(w, model, P=P_pre, **kw)

    # Crossing between systems: one activation row per sequence per crossing.
    crossings = devices - 1.0
    act_bytes = model.d_model * 2.0
    io_dec = crossings * (w.io_latency_s + batch * act_bytes / w.io_bytes_per_s)
    io_pre = crossings * (w.io_latency_s + batch * prompt * act_bytes / w.io_bytes_per_s)

    L = model.n_layers
    dec_compute_s = (L * layer["compute_cycles"] + head["compute_cycles"]) / clock
    dec_reduce_s = (L * layer["reduce_cycles"] + head["comm_cycles"]) / clock
    tpot = dec_compute_s + dec_reduce_s + io_dec
    pre_s = (L * pre["cycles"] + head["cycles"]) / clock
    ttft = pre_s + io_pre
    e2e = ttft + (generate - 1.0) * tpot
    out_tokens = batch * generate

    fits = place["fits"] & place_pre["fits"]
    reason = choose([(~place["fits_pe"], "a layer's weights + KV + buffers exceed the SRAM of its PEs"),
                     (~place["fits_regions"], "the layer regions do not fit on the wafers"),
                     (~place_pre["fits"], "the prefill grid does not fit")], "")
    # A PE's FMA vector reads a weight and a partial sum per element: when that exceeds the
    # memory ports' rate the SIMD unit idles and local memory bandwidth is the bound.
    port_bound = 2 * 2.0 / w.mem_read_bytes_per_cycle > 1.0 / w.fmas_per_cycle("fp16")
    bound = choose([(~fits, "capacity"), (io_dec >= np.maximum(dec_compute_s, dec_reduce_s), "inter_system_io"),
                    (dec_reduce_s >= dec_compute_s, "mesh_reduction"), (port_bound, "local_memory")], "compute")
    pes_used = place["regions_needed"] * P_dec * P_dec
    return {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
        "output_tokens_per_s": out_tokens / e2e,
        "output_tokens_per_s_per_device": out_tokens / e2e / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        "memory_per_device_bytes": place["pe_bytes"] * pes_used / devices,
        "memory_capacity_bytes": w.sram_per_pe_bytes * w.program_pes + 0.0 * tpot,
        "fits": fits, "reason": reason, "bound": bound,
        "decode_compute_s": dec_compute_s, "decode_comm_s": dec_reduce_s, "decode_io_s": io_dec,
        "prefill_io_s": io_pre,
        "pe_grid_decode": P_dec, "pe_grid_prefill": P_pre, "n_pes_used": pes_used,
        "pe_memory_used_bytes": place["pe_bytes"],
        "n_hops_per_token": L * layer["hops"],
        "batch": batch * 1.0 + 0.0 * tpot, "devices": devices * 1.0 + 0.0 * tpot,
    }


def wafer_max_batch(*, w: WaferNumbers, model: ModelSpec, devices, prompt, generate,
                    weights: str, kv: str, pe_grid=None, mapping: str = "mesh", **_) -> np.ndarray:
    """Largest batch whose layer regions fit: per-PE bytes are linear in the batch, so for
    each grid side the bound is closed form, and so is the bound from the lm_head, whose
    regions have fewer free bytes per PE as the activations grow with the batch; the
    best grid side is taken (0: none fits)."""
    shape = np.broadcast_shapes(np.broadcast(devices, prompt, generate, 0.0 if pe_grid is None else pe_grid).shape,
                                w.shape)
    cand = grid_candidates(w) if pe_grid is None else np.atleast_1d(np.asarray(pe_grid, float))
    P = cand.reshape((1,) * len(shape) + (-1,)) if pe_grid is None else np.expand_dims(
        np.broadcast_to(np.asarray(pe_grid, float), shape), -1)
    ex = lambda a: np.expand_dims(np.broadcast_to(np.asarray(a, float), shape), -1)  # noqa: E731
    w = w.with_trailing_axis()  # knob arrays broadcast against the candidate axis
    kw = dict(P=P, tokens=ex(prompt + generate), generated=ex(generate), w_bytes=DTYPE_BYTES[weights],
              kv_bytes=DTYPE_BYTES[kv], mapping=mapping)
    one = layer_memory_per_pe(w, model, batch=1.0, **kw)
    zero = layer_memory_per_pe(w, model, batch=0.0, **kw)
    per_seq = one["total_bytes"] - zero["total_bytes"]
    b_pe = np.floor((w.sram_per_pe_bytes - zero["total_bytes"]) / per_seq)
    # The lm_head takes the regions the layers leave: ceil(head / (P² free)) <= spare holds
    # while free >= head / (spare P²), and free = SRAM - reserve - batch x activations.
    spare = ex(devices) * regions(w, P) - model.n_layers
    act_per_seq = one["activation_bytes"] - zero["activation_bytes"]
    free_needed = _lm_head_bytes(model, DTYPE_BYTES[weights]) / (np.maximum(spare, 1.0) * P * P)
    b_head = np.where(spare >= 1.0, np.floor((w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes
                                              - free_needed) / act_per_seq), 0.0)
    b = np.maximum(np.minimum(b_pe, b_head), 0.0)
    # The closed forms can land one past the boundary by rounding: check and step back.
    ok = placement(w, model, P=P, devices=ex(devices), batch=np.maximum(b, 1.0), tokens=ex(prompt + generate),
                   generated=ex(generate), w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv],
                   mapping=mapping)["fits"]
    return np.max(np.where(ok, b, np.maximum(b - 1.0, 0.0)), axis=-1)
