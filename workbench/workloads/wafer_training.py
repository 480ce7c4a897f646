"""Training on Cerebras systems with weight streaming, as Cerebras describes it: activations
stay on the wafer, each layer's weights stream in from MemoryX for the forward and again
for the backward, gradients stream out to MemoryX (reduced across systems by SwarmX), where
the optimizer runs. `devices` systems split the global batch (data parallel).

The step, per system, is

    n_micro x (L x layer + LM head)  +  exposed optimizer  +  step_fixed_s
      + n_micro x 2 (L + 1) x layer_stream_latency_s

- Activation checkpointing (`recompute`, default CEREBRAS_RECOMPUTE = "full"): the
  compiler keeps each transformer block's input (2·D bytes per token and layer) and
  recomputes the block in the backward, holding that block's intermediates meanwhile.
  Evidence that this, not keeping every intermediate, is what Cerebras runs: its compiler
  applies a recompute algorithm from checkpoints (Cerebras modelzoo
  common/utils/model/recompute_api.py: "the compiler will determine which operation should
  be recomputed from user-specified checkpoints"); the R2.3.0 GPT-2 small run on one CS-2
  compiled the full batch of 112 sequences of 2,048 tokens as one micro-batch (github
  augustuszzq/Regular-DABench-LLM cerebras/scripts/new_llm/gpt2_train_bf16.log: "trying
  full batch size 112"), which keeping every intermediate (20 kB per token and layer)
  cannot hold (49 at most; block checkpoints: 351), and modelzoo R2.3.0 runs GPT-3 XL 1.3B
  at micro-batch 88 x 2,048 tokens on a CS-2 (params_gpt3_xl.yaml, "will lead to best
  performance"; block checkpoints: 93 fit, every intermediate: 9). One modelzoo comment
  does not fit this accounting: Cerebras_GPT/590m.yaml "264 global = (264 micro)*(1
  csx)*(1 grad accum step)" (145 fit here, 283 without the recomputed
  block's intermediates). "none" and "selective" keep every intermediate (no attention scores
  are materialized on the wafer).
- Micro-batch (modelzoo micro_batch_size "auto", the default when none is given,
  training-docs.cerebras.ai rel-2.5.0 "Optimize performance with automatic
  microbatching"): each system runs its share in the fewest micro-batches whose checkpoints
  fit in the PEs' SRAM; the weights stream in again for every micro-batch. The compiler's
  "auto" times candidate sizes and may pick a smaller one (the GPT-2 small log: 28 or 56 of
  112); the model, in which a larger micro-batch is never slower, takes the largest that
  fits. As the same page defines them: a system's batch is ceil(global batch / systems)
  sequences, the micro-batch size a whole number of sequences, NumMicroBatches =
  ceil(system's batch / micro-batch size), the workload spread evenly when the one does not
  divide the other (128 sequences in micro-batches of at most 42 run as 4 of 32; 128 in 3
  of at most 43 as 43, 43, 42): the step's time is that of the system's batch in
  NumMicroBatches equal shares, `micro_batch` the largest micro-batch.
- A layer: compute on one square grid of the wafer (MeshGEMM shapes from
  wafer_layers.prefill_layer on the square that makes it fastest, its side at most the
  program rectangle's short side; forward; backward twice the forward as for the GEMMs; the
  recompute one more forward) overlapped with the streaming of its weights (in) and
  gradients (out) over min(system I/O, MemoryX) (weight_streaming.streamed_layer). The
  square, not the whole rectangle, is what the CS-2 rows support: laying a grid out as any
  rectangle of its area (as inference counts regions) lets WSE-2's layers run on 863 x 863
  PEs' worth instead of 750, and with the stream latency refitted (4.2 ms) the held-out GPT-3
  2.7B-20B rows T001-T008 go from -16..+12% (median |err| 4%) to -10..+25% (12%), C181/C182
  from +0.5% to +23%. A consequence to read results by: WSE-3's short side (757) is WSE-2's
  (750) and its PE's 8-wide SIMD is held to WSE-2's rate by the same 16 B/cycle memory port
  (wse3.yaml), so CS-3 trains as fast as CS-2 here, its MFU against its larger peak 0.4x
  CS-2's; no CS-3 training step is published to test it (cs3.yaml).
- Optimizer: AdamW in MemoryX (ADAM_BYTES_PER_PARAM per parameter at MemoryX's rate,
  weight_store_bandwidth_bytes_per_s), started on each layer's gradients as they arrive
  ("new weights are calculated and begin streaming even before the final gradient vector
  is completed", A. Feldman, The Gradient podcast): overlapped with the backward of the
  last micro-batch (the gradients are complete only then) for as long as that backward
  streams: the micro-batch's streamed time (each layer the larger of compute and I/O) less
  its forward compute, so an I/O-bound step hides the update under its streaming and a
  faster clock never makes a step slower; only what outlasts it is exposed (optimizer_s; zero on every measured row).
- step_fixed_s (a system knob): what a step costs whatever its batch, the update at the
  step boundary that MemoryX cannot overlap (cerebras.net/glossary/memoryx) and the step's
  host synchronization; fitted on C181/C182 (cs2.yaml).
- layer_stream_latency_s (a system knob): each time a layer's weights stream in (forward
  and backward, every micro-batch; the LM head as one more layer) the wafer waits a
  latency the streaming of the layer before does not hide. Fitted on the small-model CS-2
  rows (cs2.yaml, calibrate/wafer_fit.fit_layer_stream_latency): 1.9 ms.

Against the CS-2 rows (tests/workloads/test_wafer_training.py): keeping every intermediate
made the micro-batch shrink with the width (GPT-3 590M ran 8-16 micro-batches of 16
sequences, GPT-2 small 3 of 37), the wrong width trend of the earlier model; with block
checkpoints every row runs 1-2 micro-batches. What remained was a width trend: the
production runs' hardware FLOP rate rises with the width (23% of the 6.56 PFLOP/s peak at
D=768, 36% at 1536, 41% from 4096 on; Zhang et al. Table V and C191), which the layer model
alone missed by +30% (GPT-2 small), +38..44% (256M), +13% (590M), +8..28% (2.7B-13B), -10%
(20B). The time it left out is 2.0-3.5 ms per streamed layer on the small models (GPT-2,
256M, 590M: a few ms per layer and micro-batch, whatever the batch) and ~2 ms on 13B: a
latency per streamed layer, which weighs most where a layer's compute is smallest. With it
every CS-2 row is within 16% (tests/workloads/test_wafer_training.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice
from ..primitives._array import choose
from ..primitives.mesh import memory_port_bound, mesh_gemm
from ..primitives.weight_streaming import memoryx_update, streamed_layer
from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from . import ops
from .training import (ADAM_BYTES_PER_PARAM, RECOMPUTE, activation_bytes_per_token_layer, chunk_state_bytes_per_token,
                       linear_state_bytes_per_token_layer, step_rates)
from .wafer_inference import grid_candidates, usable_sram_bytes
from .wafer_layers import prefill_layer

BACKWARD_FACTOR = 2.0  # backward GEMMs: dgrad + wgrad
CEREBRAS_RECOMPUTE = "full"  # Cerebras' default checkpointing: each block's input (module docstring)
WEIGHT_BYTES = 2.0  # bf16 weights streamed in (cbfloat16 / bfloat16 mixed precision)
GRADIENT_BYTES = 2.0  # 16-bit gradients streamed out


def checkpoint_bytes_per_sequence(model: ModelSpec, *, seq_len, recompute: str):
    """Bytes one sequence needs on the wafer at the peak of the backward: what every layer
    keeps for it, and under "full" also the intermediates of the one layer being
    recomputed (the usual full-recomputation peak, Korthikanti et al. 2022 Sec. 5); a
    hybrid's linear layers keep their chunk states as well (every one of them without
    full recomputation, the recomputed one with it)."""
    kept = (activation_bytes_per_token_layer(model, tp=1.0, cp=1.0, recompute=recompute)
            + linear_state_bytes_per_token_layer(model, seq_len=seq_len, recompute=recompute)) * model.n_layers
    working = (activation_bytes_per_token_layer(model, tp=1.0, cp=1.0, recompute="none")
               + chunk_state_bytes_per_token(model, seq_len)) * (recompute == "full")  # a linear block's, in full
    return (kept + working) * seq_len


def auto_micro_batch(w: WaferNumbers, model: ModelSpec, *, per_system, seq_len, recompute: str) -> dict:
    """Modelzoo micro_batch_size "auto" as modelled: the fewest equal micro-batches whose
    checkpoints fit in the PEs' SRAM (less what each PE reserves)."""
    per_seq = checkpoint_bytes_per_sequence(model, seq_len=seq_len, recompute=recompute)
    capacity = usable_sram_bytes(w)
    largest = np.floor(capacity / per_seq)
    n_micro = np.ceil(per_system / np.maximum(largest, 1.0))
    return {"n_micro": n_micro, "micro": per_system / n_micro, "micro_size": np.ceil(per_system / n_micro),
            "largest": largest, "per_sequence_bytes": per_seq, "capacity_bytes": capacity}


def wafer_training(*, w: WaferNumbers, model: ModelSpec, devices, seq_len, global_batch,
                   precision: str = "bf16", recompute: str = CEREBRAS_RECOMPUTE, **_) -> dict:
    check_choice("recompute", recompute, RECOMPUTE)
    per_system = np.ceil(global_batch / devices)  # whole sequences per system (module doc)
    mb = auto_micro_batch(w, model, per_system=per_system, seq_len=seq_len, recompute=recompute)
    n_micro, micro, capacity = mb["n_micro"], mb["micro"], mb["capacity_bytes"]
    fits = mb["largest"] >= 1
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
    rec = 1.0 if recompute == "full" else 0.0
    passes = 1.0 + BACKWARD_FACTOR + rec  # forward, backward, recompute

    def streamed(params, compute_s, n_in):  # weights in n_in times (forward, backward), gradients out once
        return streamed_layer(compute_s=compute_s, weight_bytes=n_in * WEIGHT_BYTES * params,
                              gradient_bytes=GRADIENT_BYTES * params, io_bytes_per_s=stream_bw)
    layer = streamed(layer_params, passes * fwd_cycles / w.clock_hz, 2.0)
    head_t = streamed(model.vocab_size * model.d_model, (1.0 + BACKWARD_FACTOR) * head["cycles"] / w.clock_hz, 2.0)
    layer_fwd_s = fwd_cycles / w.clock_hz
    forward_s = n_micro * (model.n_layers * layer_fwd_s + head["cycles"] / w.clock_hz)
    backward_s = BACKWARD_FACTOR * forward_s
    recompute_s = n_micro * model.n_layers * layer_fwd_s * rec
    compute_s = forward_s + backward_s + recompute_s
    streamed_s = n_micro * (model.n_layers * layer["time_s"] + head_t["time_s"])  # max(compute, I/O) per layer
    io_s = n_micro * (model.n_layers * layer["io_s"] + head_t["io_s"])
    # A layer's gradient is complete, and its update can start, in the last micro-batch's
    # backward, which lasts as long as the micro-batch streams (per layer the larger of
    # compute and I/O) less its forward compute: compute-bound, the backward and recompute;
    # I/O-bound, the streaming beyond the forward.
    last_backward_s = model.n_layers * (layer["time_s"] - layer_fwd_s) + head_t["time_s"] - head["cycles"] / w.clock_hz
    opt = memoryx_update(params=model.n_params, bytes_per_param=ADAM_BYTES_PER_PARAM,
                         bytes_per_s=w.weight_store_bandwidth_bytes_per_s, overlap_s=last_backward_s)
    fixed = w.step_fixed_s + 0.0 * streamed_s
    # each layer's weights (and the LM head's) stream in twice per micro-batch, each time
    # after a latency the previous layer's streaming does not hide
    stream_latency_s = n_micro * 2.0 * (model.n_layers + 1.0) * w.layer_stream_latency_s
    step = streamed_s + opt["exposed_s"] + fixed + stream_latency_s
    tokens = global_batch * seq_len
    model_flops, _ = ops.training_model_flops(model, tokens=tokens, seq_len=seq_len)
    recompute_flops = model_flops / 3.0 * rec  # one more forward, as on GPUs
    peak = w.peak("fp16")
    act = mb["per_sequence_bytes"] * mb["micro_size"]  # the largest micro-batch's checkpoints
    return {
        **step_rates(step=step, tokens=tokens, samples=global_batch, devices=devices, model_flops=model_flops,
                     recompute_flops=recompute_flops, peak=peak),
        "memory_per_device_bytes": act, "memory_capacity_bytes": capacity + 0.0 * act,
        "activations_per_device_bytes": act, "fits": fits,
        "reason": choose([(~fits, "one sequence's activations exceed the wafer's SRAM")], ""),
        # the layer's MeshGEMMs are FMA vectors: bound by local memory where the ports hold
        # the SIMD unit back (mesh.memory_port_bound), as inference names it
        "bound": choose([(~fits, "capacity"), (io_s > compute_s, "weight_streaming_io"),
                         (memory_port_bound(w), "local_memory")], "compute"),
        # The parts add up to the step: forward + backward + recompute + the streaming not
        # hidden under them + the optimizer not hidden under the backward + the fixed part +
        # the latency of each streamed layer.
        "forward_s": forward_s, "backward_s": backward_s, "recompute_s": recompute_s,
        "weight_streaming_exposed_s": np.maximum(streamed_s - compute_s, 0.0),
        "optimizer_s": opt["exposed_s"], "step_fixed_s": fixed, "layer_stream_latency_s": stream_latency_s,
        # No pipeline across systems (data parallel); SwarmX reduces the gradients on their
        # way to MemoryX, under the streaming.
        "pipeline_bubble_s": 0.0 * step, "dp_comm_exposed_s": 0.0 * step,
        "weight_streaming_io_s": io_s, "optimizer_update_s": opt["update_s"], "devices": devices,
        "model_flops": model_flops, "pe_grid": P, "n_micro_batches": n_micro, "micro_batch": mb["micro_size"],
    }
