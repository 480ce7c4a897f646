"""Inference with weight streaming: one layer at a time runs on the whole wafer (a
pe_grid x pe_grid region, default the largest square) while the next layer's weights
stream in from MemoryX over the system I/O; the KV cache of every layer stays on the
wafer. `devices` systems run as data-parallel replicas, each with `batch` sequences: batch
means sequences per replica, as on GPUs (`devices` beyond tp x pp run replicas of `batch`
each, workloads/inference.py) and under placement "regions" (one replica pipelined over
the `devices` systems), so the throughput outputs count every replica (`replicas` x
`batch` sequences) and TPOT is one replica's; `replicas` reports how many.

This is how Cerebras trains models larger than a wafer; for decode it shows why
inference keeps weights resident: every token must stream all weights through the
1.2 Tb/s I/O (about 9 tokens/s for an 8B model in 16-bit).
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..primitives.mesh import memory_port_bound, mesh_gemv
from ..primitives.weight_streaming import streamed_layer
from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from .wafer_inference import no_times_where, usable_sram_bytes
from .wafer_layers import decode_layer, layer_memory_per_pe, prefill_layer


def streaming_inference(*, w: WaferNumbers, model: ModelSpec, devices, batch, prompt,
                        generate, weights: str, kv: str, pe_grid=None, mapping: str = "mesh", **_) -> dict:
    clock = w.clock_hz
    w_bytes, kv_bytes = DTYPE_BYTES[weights], DTYPE_BYTES[kv]
    shape = np.broadcast_shapes(np.broadcast(devices, batch, prompt, generate,
                                             0.0 if pe_grid is None else pe_grid).shape, w.shape)
    P = np.broadcast_to(np.asarray(w.max_square_grid if pe_grid is None else pe_grid, float), shape) * 1.0
    layer_bytes = (model.n_params - model.embedding_params) / model.n_layers * w_bytes
    head_bytes = model.vocab_size * model.d_model * w_bytes
    io = dict(io_bytes_per_s=np.minimum(w.io_bytes_per_s, w.weight_store_bandwidth_bytes_per_s))

    dec = decode_layer(w, model, P=P, batch=batch, context=prompt + generate / 2.0, mapping=mapping)
    head = mesh_gemv(w, P=P, k=model.d_model, n=model.vocab_size, rows=batch, mapping=mapping)
    dec_layer = streamed_layer(compute_s=dec["cycles"] / clock, weight_bytes=layer_bytes, **io)
    dec_head = streamed_layer(compute_s=head["cycles"] / clock, weight_bytes=head_bytes, **io)
    tpot = model.n_layers * dec_layer["time_s"] + dec_head["time_s"]
    pre = prefill_layer(w, model, P=P, batch=batch, prompt=prompt, mapping=mapping)
    pre_layer = streamed_layer(compute_s=pre["cycles"] / clock, weight_bytes=layer_bytes, **io)
    ttft = model.n_layers * pre_layer["time_s"] + dec_head["time_s"]
    e2e = ttft + (generate - 1.0) * tpot

    # On the wafer: every layer's KV cache, activations, and two layers' weights (the one
    # computing and the one arriving).
    mem = layer_memory_per_pe(w, model, P=P, batch=batch, tokens=prompt + generate, generated=generate,
                              w_bytes=w_bytes, kv_bytes=kv_bytes, mapping=mapping, experts_beside=False)
    pe_bytes = model.n_layers * mem["kv_bytes"] + 2 * mem["weights_bytes"] + mem["activation_bytes"] \
        + w.sram_reserved_per_pe_bytes
    fits = (pe_bytes <= w.sram_per_pe_bytes) & (P <= w.max_square_grid)
    io_s = model.n_layers * dec_layer["io_s"] + dec_head["io_s"]
    compute_s = (model.n_layers * dec["compute_cycles"] + head["compute_cycles"]) / clock
    comm_s = (model.n_layers * dec["reduce_cycles"] + head["comm_cycles"]) / clock
    bound = choose([(~fits, "capacity"), (io_s >= np.maximum(compute_s, comm_s), "weight_streaming_io"),
                    (comm_s >= compute_s, "mesh_reduction"), (memory_port_bound(w), "local_memory")], "compute")
    out_tokens = batch * generate * devices  # every replica's
    zero = np.zeros(np.shape(tpot))  # counts and sizes broadcast to every point
    return no_times_where({
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
        "output_tokens_per_s": out_tokens / e2e, "output_tokens_per_s_per_device": out_tokens / e2e / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        "memory_per_device_bytes": (pe_bytes - w.sram_reserved_per_pe_bytes) * P * P,  # as usable_sram_bytes
        "memory_capacity_bytes": usable_sram_bytes(w) + zero,
        "fits": fits, "reason": choose([(~fits, "KV cache of all layers + two layers' weights exceed SRAM")], ""),
        "bound": bound, "decode_compute_s": compute_s, "decode_comm_s": comm_s, "decode_io_s": io_s,
        "pe_grid_decode": P, "pe_grid_prefill": P, "n_pes_used": P * P, "pe_memory_used_bytes": pe_bytes,
        "batch": batch * 1.0 + zero, "devices": devices * 1.0 + zero,
        "replicas": devices * 1.0 + zero,
    }, ~fits)
