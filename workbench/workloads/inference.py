"""GPU inference with static batching: prefill of the whole batch, then decode steps
with the KV cache growing by one token per step, under tensor and pipeline parallelism.

Static batching (TensorRT-LLM v0.5-0.7 tables): all sequences start together, the first
token comes out of prefill, then generate-1 decode steps. A decode step's time is
linear in the context it attends to (the KV read), so the sum over steps is exact in
closed form: (generate-1) · step(context = prompt + generate/2). The memory-efficiency
table is evaluated at that mean step.

Pipeline parallelism: prefill runs the batch through the pp stages one after another
(latency = all layers); decode keeps min(batch, pp) micro-batches in flight, so a
token's step time is all layers at the micro-batch size. PP buys capacity, not speed.
"""
from __future__ import annotations

import dataclasses

import functools

import numpy as np

from ..primitives._array import choose, in_place, where
from ..primitives.collectives import collective
from ..primitives.gemm import gemm
from ..primitives.kv_cache import kv_cache_bytes, kv_share_per_device
from ..primitives.hardware_numbers import GpuNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from . import ops
from .layers import add, layer_decode, layer_prefill
from .parts import add_into, times

# vLLM's default gpu_memory_utilization = 0.9 (vllm/engine/arg_utils.py): the share of
# device memory that weights, KV cache and activations may use; the rest is the CUDA
# context, library workspaces and fragmentation.
MEMORY_UTILIZATION = 0.9
# Prefill is chunked at this many tokens (TensorRT-LLM's default max_num_tokens = 8192),
# which bounds the activation working set, not the work.
MAX_PREFILL_TOKENS = 8192
LOGIT_BYTES = 4.0  # fp32 logits


def _model_pass(step, hw, model, **kw) -> dict:
    """All layers of one pass: dense-MLP layers, MoE layers and layers without an MLP
    (ops.layer_kinds). A step returns parts.add's sums, scaled in place by its layer count;
    one kind of layer is the pass (the sum of one part is that part)."""
    kinds = [times(step(hw, model, moe=moe, **kw), n) for n, moe in ops.layer_kinds(model)]
    return kinds[0] if len(kinds) == 1 else add(*kinds)


# Quantized checkpoints keep the token embeddings and the LM head in 16 bits: every FP8,
# NVFP4 and MXFP4 config aiconfigurator-core 0.12.0 ships under model_configs/ excludes
# lm_head from quantization (ModelOpt hf_quant_config.json exclude_modules / ignore,
# Qwen's and MiniMax's modules_to_not_convert, gpt-oss's modules_to_not_convert with
# model.embed_tokens); DeepSeek-V3's reference inference builds its head in the default
# 16-bit dtype (inference/model.py: ColumnParallelLinear(dim, vocab_size,
# dtype=torch.get_default_dtype())) while its layers load FP8.
HEAD_BYTES = ops.STREAM_BYTES
HEAD_MATH = ("bf16", "fp16")  # the 16-bit maths; any other runs the head in bf16


def _lm_head(hw, model, *, rows, tp, math, w_bytes, a_bytes) -> dict:
    """The logits GEMM in 16 bits whatever the layers' format (HEAD_BYTES)."""
    head = ops.lm_head(model)
    g = gemm(hw=hw, m=rows, n=head.n / tp, k=head.k, dtype=math if math in HEAD_MATH else "bf16",
             a_bytes=np.maximum(a_bytes, HEAD_BYTES), b_bytes=np.maximum(w_bytes, HEAD_BYTES), c_bytes=LOGIT_BYTES)
    out = {k: g[k] for k in ("flops", "bytes", "compute_s", "memory_s", "overhead_s", "time_s")}
    return dict(out, matmul_s=g["time_s"] + g["overhead_s"])


def pp_transfer(hw, model, *, tokens, tp, pp, stream_bytes) -> dict:
    """(pp-1) stage-to-stage activation sends; over NVLink when the whole tp·pp group is
    inside one scale-up domain, else across the scale-out network (none without stages)."""
    if not np.any(np.asarray(pp) > 1):
        return {"comm_s": 0.0, "time_s": 0.0}
    inside = tp * pp <= hw.link("scale_up").domain_size
    size = tokens * model.d_model * stream_bytes
    t = collective(hw=hw, op="send_recv", size=size,
                   devices=where(inside, 2.0, hw.link("scale_up").domain_size + 1.0))["time_s"]
    return {"comm_s": (pp - 1.0) * t, "time_s": (pp - 1.0) * t}


def weight_bytes(model: ModelSpec, w_bytes, params=None):
    """Bytes of `params` parameters (default: all) of `model` stored in a `w_bytes` format,
    its embeddings and LM head in 16 bits (HEAD_BYTES)."""
    params = model.n_params if params is None else params
    return (params - model.embedding_params) * w_bytes + model.embedding_params * np.maximum(w_bytes, HEAD_BYTES)


def part_weight_bytes(model: ModelSpec, w_bytes, routed_w_bytes=None) -> tuple:
    """(bytes of every weight but the routed experts, in `w_bytes` (weight_bytes: embeddings
    and LM head at least 16-bit); bytes of the routed experts, in `routed_w_bytes`, default
    `w_bytes`): the two parts a deployment may store in different formats and spread over
    different devices."""
    experts = ops.routed_params(model)
    return weight_bytes(model, w_bytes, model.n_params - experts), \
        experts * (w_bytes if routed_w_bytes is None else routed_w_bytes)


def kv_bytes_per_sequence(model: ModelSpec, *, tokens, tp, pp, kv_bytes):
    """KV-cache bytes one sequence of `tokens` keeps on one device (windows capped), plus a
    hybrid's linear-attention state (its heads split by TP, its layers by PP)."""
    def per_key(sliding):  # each kind of softmax layer its KV heads' split over the TP ranks
        heads = model.attention_shape(sliding=sliding)[1]
        return model.kv_elements(sliding=sliding) * kv_share_per_device(n_kv_heads=heads, tp=tp, is_mla=model.is_mla)
    # DeepSeek-V4: its compressed entries and CSA index keys, replicated on the TP ranks as the one KV head is
    held = model.sum_over_kinds(tokens, per_key, held=True) + model.index_keys_held(tokens)
    return kv_cache_bytes(batch=1.0, tokens_attended=held, kv_elements_per_token_per_layer=1.0, kv_bytes=kv_bytes,
                          pp=pp) + (model.linear_state_bytes_per_sequence / tp
                                    + model.compressor_state_bytes_per_sequence) / pp


def math_support(hw: GpuNumbers, maths) -> tuple:
    """(True where the chip has units for every math of `maths`, the first math it lacks
    everywhere or the first of them): the parts of a layer may compute in different maths
    (ops.part_formats)."""
    finite = [np.isfinite(hw.peak(m)) for m in maths]  # shapes differ where one math's peak is swept
    missing = next((m for m, f in zip(maths, finite) if not np.all(f)), maths[0])
    return functools.reduce(np.logical_and, finite), missing


def activation_bytes_per_token(model: ModelSpec, *, tp, stream_bytes):
    """Working-set bytes per token in flight on one TP rank: residual stream, norms, QKV
    and the widest MLP's gate/up."""
    return stream_bytes * (4 * model.d_model + (ops.qkv_width(model) + 2 * ops.widest_mlp(model)) / tp)


def memory_per_device(hw: GpuNumbers, model: ModelSpec, *, batch, prompt, generate, tp, pp,
                      w_bytes, kv_bytes, stream_bytes, routed_w_bytes=None) -> dict:
    """Weights, KV cache and activation bytes on one device (`routed_w_bytes`: the routed
    experts' format where it differs from the rest's `w_bytes`)."""
    weights = sum(part_weight_bytes(model, w_bytes, routed_w_bytes)) / (tp * pp)
    kv_per_seq = kv_bytes_per_sequence(model, tokens=prompt + generate, tp=tp, pp=pp, kv_bytes=kv_bytes)
    act_per_token = activation_bytes_per_token(model, tp=tp, stream_bytes=stream_bytes)
    chunk = np.minimum(batch * prompt, MAX_PREFILL_TOKENS)
    logits_per_seq = model.vocab_size / tp * LOGIT_BYTES
    act = chunk * act_per_token + batch * logits_per_seq
    return {"weights_bytes": weights, "kv_cache_bytes": batch * kv_per_seq,
            "activation_bytes": act, "kv_per_seq_bytes": kv_per_seq,
            "fixed_bytes": weights + MAX_PREFILL_TOKENS * act_per_token,
            "per_seq_bytes": kv_per_seq + logits_per_seq}


def max_batch(hw: GpuNumbers, model: ModelSpec, extra_fixed_bytes=0.0, extra_per_seq_bytes=0.0, **kw):
    """Largest batch whose weights + KV + activations fit (0 when none fits); `extra_*`: what
    a speculative draft adds beside them (its weights, its cache per sequence)."""
    m = memory_per_device(hw, model, batch=1.0, **kw)
    usable = hw.hbm_capacity_bytes * MEMORY_UTILIZATION
    return np.maximum(np.floor((usable - m["fixed_bytes"] - extra_fixed_bytes)
                               / (m["per_seq_bytes"] + extra_per_seq_bytes)), 0.0)


def eager(hw: GpuNumbers) -> GpuNumbers:
    """`hw` for an iteration that prefills: the serving engines replay CUDA graphs of decode-only
    batches only (TensorRT-LLM's cuda_graph_config captures generation-only batches, SGLang's
    graph runner decode batches), so its kernels keep their launch cost as the tables time
    them: no graph saving. Its MoE layers read the framework's measured MoE tables where
    `measured_moe_prefill` says so (specs/serving/frameworks.yaml prefill_moe_kernels)."""
    return dataclasses.replace(hw, graph_saving_s=0.0, measured_moe_mla=hw.measured_moe_mla or hw.measured_moe_prefill)


def inference(*, hw: GpuNumbers, model: ModelSpec, tp, pp, dp, batch, prompt, generate,
              weights: str, activations: str, kv: str, ep=1.0, imbalance=1.0, attention_weights=None,
              attention_activations=None, queries=1.0) -> dict:
    """Prefill + static-batch decode. Returns the public outputs and their named parts.
    `weights` / `activations`: the routed experts' format and math, and every other
    matmul's unless `attention_weights` / `attention_activations` say otherwise
    (ops.part_formats). `queries`: positions per sequence in a decode step's attention (a
    speculative verify step's k + 1; layers.decode_attention)."""
    layer, routed = ops.part_formats(weights=weights, activations=activations, attention_weights=attention_weights,
                                     attention_activations=attention_activations)
    math, w_bytes, a_bytes, kv_bytes = layer["math"], layer["w_bytes"], layer["a_bytes"], DTYPE_BYTES[kv]
    stream_bytes = ops.stream_bytes(a_bytes)  # residual stream, norms and all-reduces stay 16-bit
    common = dict(tp=tp, math=math, w_bytes=w_bytes, a_bytes=a_bytes, kv_bytes=kv_bytes, ep=ep, imbalance=imbalance,
                  routed=routed)

    prefill_hw = eager(hw)
    pre = _model_pass(layer_prefill, prefill_hw, model, batch=batch, prompt=prompt, **common)
    pre = add_into(pre, _lm_head(prefill_hw, model, rows=batch, tp=tp, math=math, w_bytes=w_bytes, a_bytes=a_bytes),
                   pp_transfer(prefill_hw, model, tokens=batch * prompt, tp=tp, pp=pp, stream_bytes=stream_bytes))

    micro = batch / np.minimum(batch, pp)
    context = prompt + generate / 2.0
    dec = _model_pass(layer_decode, hw, model, batch=micro, context=context, queries=queries, **common)
    dec = add_into(dec, _lm_head(hw, model, rows=micro, tp=tp, math=math, w_bytes=w_bytes, a_bytes=a_bytes),
                   pp_transfer(hw, model, tokens=micro, tp=tp, pp=pp, stream_bytes=stream_bytes))

    # sums and maxima into their own first temporary (in_place): a grid's fresh arrays are its cost
    ttft = pre["time_s"] + pre["overhead_s"]
    tpot = dec["time_s"] + dec["overhead_s"]
    e2e = in_place(np.add, (generate - 1.0) * tpot, ttft)  # ttft + (generate - 1) tpot
    devices = tp * pp * dp
    out_tokens = dp * batch * generate
    out_rate = out_tokens / e2e

    mem = memory_per_device(hw, model, batch=batch, prompt=prompt, generate=generate, tp=tp, pp=pp,
                            w_bytes=w_bytes, kv_bytes=kv_bytes, stream_bytes=stream_bytes,
                            routed_w_bytes=None if routed is None else routed["w_bytes"])
    used = in_place(np.add, mem["weights_bytes"] + mem["kv_cache_bytes"], mem["activation_bytes"])
    capacity = hw.hbm_capacity_bytes * MEMORY_UTILIZATION
    supported, missing = math_support(hw, (math,) if routed is None else (math, routed["math"]))
    fits = (used <= capacity) & supported

    # The decode step's dominant resource, and its lower / upper bounds.
    dec_comm = dec["comm_s"]
    dec_lower = in_place(np.maximum, np.maximum(dec["compute_s"], dec["memory_s"]), dec_comm)
    dec_upper = in_place(np.add, in_place(np.add, dec["compute_s"] + dec["memory_s"], dec_comm), dec["overhead_s"])
    # compute >= max(memory, comm), NaN anywhere False, as the two comparisons say; the launch
    # and host overhead where it exceeds all three (small models at batch 1)
    bound = choose([((dec["overhead_s"] > dec_lower), "overhead"),
                    ((dec["compute_s"] >= dec["memory_s"]) & (dec["compute_s"] >= dec_comm), "compute"),
                    (dec["memory_s"] >= dec_comm, "memory")], "communication")
    shape = np.broadcast_shapes(np.shape(used), np.shape(supported), np.shape(capacity))  # a peak or capacity knob may sweep alone
    reason = choose([(np.broadcast_to(~supported, shape), f"no {missing} math units on {hw.label}"),
                     (np.broadcast_to(used > capacity, shape), "weights + KV cache + activations exceed memory")], "")
    return {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
        "output_tokens_per_s": out_rate,
        "output_tokens_per_s_per_device": out_rate / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        "memory_per_device_bytes": used, "memory_capacity_bytes": capacity,
        "weights_per_device_bytes": mem["weights_bytes"], "kv_cache_per_device_bytes": mem["kv_cache_bytes"],
        "activations_per_device_bytes": mem["activation_bytes"],
        "fits": fits, "reason": reason, "bound": bound,
        # each stage computes, and moves the bytes of, its 1/pp of the layers
        "prefill_flops_per_device": pre["flops"] / pp, "prefill_bytes_per_device": pre["bytes"] / pp,
        "prefill_compute_s": pre["compute_s"],
        "prefill_memory_s": pre["memory_s"], "prefill_comm_s": pre["comm_s"],
        "prefill_overhead_s": pre["overhead_s"],
        "decode_step_flops_per_device": dec["flops"], "decode_step_bytes_per_device": dec["bytes"],
        "decode_compute_s": dec["compute_s"], "decode_memory_s": dec["memory_s"],
        "decode_comm_s": dec_comm, "decode_overhead_s": dec["overhead_s"],
        "decode_matmul_s": dec["matmul_s"], "decode_attention_s": dec["attention_s"],
        "decode_elementwise_s": dec["elementwise_s"],
        "prefill_matmul_s": pre["matmul_s"], "prefill_attention_s": pre["attention_s"],
        "prefill_elementwise_s": pre["elementwise_s"],
        "tpot_lower_s": dec_lower, "tpot_upper_s": dec_upper,
        "batch": batch, "devices": devices,  # broadcast to the grid by the caller
    }
