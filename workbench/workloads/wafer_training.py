"""Training on Cerebras systems with weight streaming: activations stay on the wafer,
each layer's weights stream in from MemoryX for the forward and again for the backward,
gradients stream out to MemoryX (reduced across systems by SwarmX), where the optimizer
runs. `devices` systems split the global batch (data parallel). Each system runs its share
in the fewest equal micro-batches whose activations fit in the wafer's SRAM (Cerebras
modelzoo micro_batch_size "auto"); the weights stream in again for every micro-batch.

Per layer, compute runs on the whole wafer (MeshGEMM shapes from wafer_layers, forward;
backward counted as twice the forward, as for the GEMMs); it overlaps the streaming, so a
layer takes max(compute, I/O) (weight_streaming.streamed_layer). The optimizer step in
MemoryX overlaps the next step and is not counted.
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice
from ..primitives._array import choose
from ..primitives.mesh import mesh_gemm
from ..primitives.weight_streaming import streamed_layer
from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from . import ops
from .training import RECOMPUTE, activation_bytes_per_token_layer
from .wafer_inference import grid_candidates
from .wafer_layers import prefill_layer

BACKWARD_FACTOR = 2.0  # backward GEMMs: dgrad + wgrad


def wafer_training(*, w: WaferNumbers, model: ModelSpec, devices, seq_len, global_batch,
                   precision: str = "bf16", recompute: str = "none", **_) -> dict:
    check_choice("recompute", recompute, RECOMPUTE)
    per_system = global_batch / devices
    act_per_seq = activation_bytes_per_token_layer(model, tp=1.0, cp=1.0, recompute=recompute) \
        * seq_len * model.n_layers
    capacity = (w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes) * w.program_pes
    fits = act_per_seq <= capacity
    n_micro = np.ceil(per_system / np.maximum(np.floor(capacity / act_per_seq), 1.0))
    micro = per_system / n_micro  # sequences per micro-batch, equal split
    # The layer runs on the square grid that makes it fastest (small widths waste most of a
    # large grid's tiles); candidates along a trailing axis, one vectorized call.
    cand = grid_candidates(w)
    ex = lambda a: np.expand_dims(np.asarray(a, dtype=float), -1)  # noqa: E731
    wc = w.with_trailing_axis()  # knob arrays broadcast against the candidate axis
    cycles = prefill_layer(wc, model, P=cand, batch=ex(micro), prompt=ex(seq_len))["cycles"]
    cycles = np.where(cand <= wc.max_square_grid, cycles, np.inf)  # sides the mesh holds
    P = np.take(cand, np.argmin(cycles, axis=-1))
    fwd_cycles = np.min(cycles, axis=-1)
    head = mesh_gemm(w, P=P, m=micro * seq_len, k=model.d_model, n=model.vocab_size)  # logits of every token
    stream_bw = np.minimum(w.io_bytes_per_s, w.weight_store_bandwidth_bytes_per_s)  # weights and gradients
    layer_params = (model.n_params - model.embedding_params) / model.n_layers
    passes = 1.0 + BACKWARD_FACTOR + (1.0 if recompute == "full" else 0.0)  # forward, backward, recompute
    layer = streamed_layer(compute_s=passes * fwd_cycles / w.clock_hz,
                           weight_bytes=2 * 2.0 * layer_params, gradient_bytes=2.0 * layer_params,
                           io_bytes_per_s=stream_bw)
    head_params = model.vocab_size * model.d_model
    head_t = streamed_layer(compute_s=(1.0 + BACKWARD_FACTOR) * head["cycles"] / w.clock_hz,
                            weight_bytes=2 * 2.0 * head_params, gradient_bytes=2.0 * head_params,
                            io_bytes_per_s=stream_bw)
    step = n_micro * (model.n_layers * layer["time_s"] + head_t["time_s"])
    tokens = global_batch * seq_len
    model_flops, _ = ops.training_model_flops(model, tokens=tokens, seq_len=seq_len)
    recompute_flops = model_flops / 3.0 if recompute == "full" else 0.0  # one more forward, as on GPUs
    peak = w.peak("fp16")
    act = act_per_seq * micro
    io_s = n_micro * (model.n_layers * layer["io_s"] + head_t["io_s"])
    compute_s = n_micro * (model.n_layers * layer["compute_s"] + head_t["compute_s"])
    return {
        "step_time_s": step, "tokens_per_s": tokens / step, "tokens_per_s_per_device": tokens / step / devices,
        "samples_per_s": global_batch / step,
        "model_flops_per_s_per_device": model_flops / step / devices,
        "hardware_flops_per_s_per_device": (model_flops + recompute_flops) / step / devices,
        "mfu": model_flops / step / devices / peak, "hfu": (model_flops + recompute_flops) / step / devices / peak,
        "memory_per_device_bytes": act, "memory_capacity_bytes": capacity,
        "activations_per_device_bytes": act, "fits": fits,
        "reason": choose([(~fits, "one sequence's activations exceed the wafer's SRAM")], ""),
        "bound": choose([(io_s > compute_s, "weight_streaming_io")], "compute"),
        "forward_s": compute_s / passes, "backward_s": compute_s * BACKWARD_FACTOR / passes, "pe_grid": P,
        "recompute_s": compute_s / passes * (recompute == "full"),
        # The GPU step's other parts, zero here: no pipeline across systems (data parallel),
        # SwarmX reduces the gradients on their way to MemoryX, where the optimizer runs
        # during the next step.
        "pipeline_bubble_s": 0.0 * step, "dp_comm_exposed_s": 0.0 * step, "optimizer_s": 0.0 * step,
        "weight_streaming_io_s": io_s, "devices": devices, "model_flops": model_flops,
        # a layer takes max(compute, I/O): the step beyond the compute is the I/O not hidden
        "weight_streaming_exposed_s": np.maximum(step - compute_s, 0.0),
        "n_micro_batches": n_micro, "micro_batch": micro,
    }
