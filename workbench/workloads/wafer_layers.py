"""One transformer layer on a P x P PE region of a wafer, in clock cycles: decode (one
token per sequence: GEMVs and mesh reductions) and prefill (MeshGEMMs).

Operations per layer (WaferLLM's decode and prefill kernels): RMSNorm (local sum of
squares, an allreduce of the row sums, a scale), fused QKV projection, rotary, attention
(scores against the KV cache, softmax max and sum, weighted sum of values), output
projection, residual, RMSNorm, fused gate/up projection, activation, down projection,
residual. Attention over the cache is computed in full (no causal skipping), as the
WaferLLM kernels do. MoE layers count the active experts' matmuls (weights of all
experts stay resident).
"""
from __future__ import annotations

import numpy as np

from ..primitives.mesh import elementwise_cycles, line_allreduce, mesh_gemm, mesh_gemv, tiles
from ..specs import ModelSpec
from ..primitives.hardware_numbers import WaferNumbers

REDUCE_BYTES = 4.0  # fp32 row statistics (norm sums, softmax max/sum)


def _mlp_width(model: ModelSpec) -> float:
    if model.is_moe:
        return model.d_ff_expert * (model.n_active_experts + model.n_shared_experts)
    return model.d_ff


def _sum(parts: list[dict], key: str):
    return sum(p.get(key, 0.0) for p in parts)


def decode_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, context, mapping="mesh") -> dict:
    """Cycles of one decode step of one layer for `batch` sequences at `context` tokens."""
    D, H, K, h, hv = model.d_model, model.n_heads, model.n_kv_heads, model.head_dim, model.v_dim
    F = _mlp_width(model)
    b = batch
    gemv = dict(P=P, rows=b, mapping=mapping)
    qkv = mesh_gemv(w, k=D, n=(H + 2 * K) * h, **gemv)
    o = mesh_gemv(w, k=H * hv, n=D, **gemv)
    up = mesh_gemv(w, k=D, n=(model.mlp_matrices - 1) * F, **gemv)
    down = mesh_gemv(w, k=F, n=D, **gemv)
    norms = [line_allreduce(w, P=P, nbytes=b * REDUCE_BYTES, mapping=mapping) for _ in range(2)]
    # Attention against the cache [context, K·(h+hv)] spread over the region: scores are a
    # GEMV over the head dims, the weighted sum a GEMV over the context, with the softmax
    # max and sum allreduced in between (decode.csl score_matvec_mult, softmax_score,
    # output_matvec_mult).
    ctx = model.attention_context(context) / model.n_layers
    scores = mesh_gemv(w, k=H * h, n=ctx, **gemv)
    pv = mesh_gemv(w, k=ctx, n=H * hv, **gemv)
    softmax = [line_allreduce(w, P=P, nbytes=b * REDUCE_BYTES, mapping=mapping) for _ in range(2)]
    local = elementwise_cycles(w, n=b * (6 * tiles(D, P) + 2 * tiles((H + K) * h, P)
                                         + 2 * tiles(F, P) + 3 * tiles(ctx, P)))
    gemvs = [qkv, scores, pv, o, up, down]
    reductions = norms + softmax
    compute = _sum(gemvs, "compute_cycles") + local
    comm = _sum(gemvs, "comm_cycles") + _sum(reductions, "cycles")
    return {"cycles": compute + comm, "compute_cycles": compute, "reduce_cycles": comm,
            "hops": _sum(gemvs, "hops") + _sum(reductions, "hops"),
            "colors": np.maximum(qkv["colors"], 0.0),
            "flops": _sum(gemvs, "flops")}


def prefill_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, prompt, mapping="mesh") -> dict:
    """Cycles of one layer's prefill of `batch` x `prompt` tokens with MeshGEMM."""
    D, H, K, h, hv = model.d_model, model.n_heads, model.n_kv_heads, model.head_dim, model.v_dim
    F = _mlp_width(model)
    M = batch * prompt
    g = dict(P=P, mapping=mapping)
    gemms = [mesh_gemm(w, m=M, k=D, n=(H + 2 * K) * h, **g), mesh_gemm(w, m=M, k=H * hv, n=D, **g),
             mesh_gemm(w, m=M, k=D, n=(model.mlp_matrices - 1) * F, **g), mesh_gemm(w, m=M, k=F, n=D, **g)]
    # Attention per sequence: scores [L, H·h] x [H·h, L], then [L, L] x [L, H·hv].
    # Sequences are independent in attention: `batch` of them run side by side, each on a
    # sub-grid of P/sqrt(batch) (the whole grid for one sequence, as WaferLLM measured).
    Pa = np.maximum(np.floor(P / np.sqrt(batch)), 1.0)
    ga = dict(P=Pa, mapping=mapping)
    att = [mesh_gemm(w, m=prompt, k=H * h, n=prompt, **ga), mesh_gemm(w, m=prompt, k=prompt, n=H * hv, **ga)]
    rows = tiles(M, P)
    reductions = [line_allreduce(w, P=P, nbytes=rows * REDUCE_BYTES, mapping=mapping) for _ in range(2)]
    reductions += [line_allreduce(w, P=P, nbytes=batch * tiles(prompt, P) * REDUCE_BYTES, mapping=mapping)
                   for _ in range(2)]  # softmax max and sum per score row
    local = elementwise_cycles(w, n=rows * (6 * tiles(D, P) + 2 * tiles((H + K) * h, P) + 2 * tiles(F, P))
                               + batch * tiles(prompt, P) * tiles(prompt, P) * 3)
    compute = _sum(gemms, "compute_cycles") + _sum(att, "compute_cycles") + local
    gemm_cycles = _sum(gemms, "cycles") + _sum(att, "cycles")
    comm = _sum(reductions, "cycles")
    return {"cycles": gemm_cycles + local + comm, "compute_cycles": compute,
            "reduce_cycles": comm + (gemm_cycles - _sum(gemms, "compute_cycles") - _sum(att, "compute_cycles")),
            "flops": _sum(gemms, "flops") + batch * _sum(att, "flops")}


def layer_weight_matrices(model: ModelSpec) -> list[tuple[int, int, int]]:
    """The weight matrices one layer's region holds, as (rows k, columns n, count): the
    attention projections and the MLP (every expert of an MoE layer stays resident; the
    router is not counted). sum(k * n * count) == attn_params_per_layer + MLP params."""
    D, H, K, h = model.d_model, model.n_heads, model.n_kv_heads, model.head_dim
    if model.is_mla:
        r_q, r_kv, rope, hv = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim, model.v_dim
        q = [(D, r_q, 1), (r_q, H * h, 1)] if r_q else [(D, H * h, 1)]
        attn = q + [(D, r_kv + rope, 1), (r_kv, H * ((h - rope) + hv), 1), (H * hv, D, 1)]
    else:
        attn = [(D, H * h, 1), (D, K * h, 2), (H * h, D, 1)]
    if model.is_moe:
        F, count = model.d_ff_expert, model.n_experts + model.n_shared_experts
    else:
        F, count = model.d_ff, 1
    return attn + [(D, F, (model.mlp_matrices - 1) * count), (F, D, count)]


def layer_memory_per_pe(w: WaferNumbers, model: ModelSpec, *, P, batch, tokens, w_bytes, kv_bytes,
                        generated=0.0, mapping="mesh") -> dict:
    """Bytes per PE of one layer's region: weights, KV cache, activations.
    Each weight matrix is tiled over the P x P PEs in whole tiles (ceil(k/P) x ceil(n/P),
    as mesh_gemv holds it), so the weights are those of the fullest PE, not the mean.
    Shift-based KV (mesh) spreads every token over P² PEs; concat-based (gpu_style)
    spreads the prompt but appends generated tokens to one line of P PEs."""
    D, H, K, h = model.d_model, model.n_heads, model.n_kv_heads, model.head_dim
    weights = sum(c * tiles(k, P) * tiles(n, P) for k, n, c in layer_weight_matrices(model)) * w_bytes
    per_token = model.kv_elements_per_token_per_layer * kv_bytes
    ctx = model.attention_context(tokens) / model.n_layers
    if mapping == "mesh":
        kv = batch * ctx * per_token / (P * P)
    else:
        gen = np.minimum(generated, ctx)
        kv = batch * ((ctx - gen) * per_token / (P * P) + gen * per_token / P)
    act = batch * (4 * tiles(D, P) + 2 * tiles((H + 2 * K) * h, P) + 2 * tiles(_mlp_width(model), P)) * 2.0
    return {"weights_bytes": weights, "kv_bytes": kv, "activation_bytes": act,
            "total_bytes": weights + kv + act + w.sram_reserved_per_pe_bytes}
