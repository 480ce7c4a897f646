"""One transformer layer on a P x P PE region of a wafer, in clock cycles: decode (one
token per sequence: GEMVs and mesh reductions) and prefill (MeshGEMMs).

Operations per layer (WaferLLM's decode and prefill kernels): RMSNorm (local sum of
squares, an allreduce of the row sums, a scale), fused QKV projection, rotary, attention
(scores against the KV cache, softmax max and sum, weighted sum of values), output
projection, residual, RMSNorm, fused gate/up projection, activation, down projection,
residual. The projections are the layer's matmuls from the one table (ops.layer_matmuls:
fused QKV or MLA's low-rank projections, the MLP or the MoE router, experts and shared
experts); a token's routed experts run side by side as one wider GEMV (ops.active_shape)
while the weights of all experts stay resident. Attention over the cache is computed in
full (no causal skipping), as the WaferLLM kernels do. A model with dense and MoE layers
(DeepSeek-V3) reports the mean layer: L times it is the sum over the layers.
"""
from __future__ import annotations

import numpy as np

from ..primitives.mesh import elementwise_cycles, kv_spread, line_allreduce, mesh_gemm, mesh_gemv, tiles
from ..specs import ModelSpec
from . import ops
from ..primitives.hardware_numbers import WaferNumbers

REDUCE_BYTES = 4.0  # fp32 row statistics (norm sums, softmax max/sum)


def _sum(parts: list[dict], key: str):
    return sum(p.get(key, 0.0) for p in parts)


def _mean_layer(model: ModelSpec, one_kind) -> dict:
    """The per-layer mean of `one_kind(moe)` over the model's dense and MoE layers."""
    kinds = ops.layer_kinds(model)
    parts = [(n / model.n_layers, one_kind(moe)) for n, moe in kinds]
    if len(parts) == 1:
        return parts[0][1]
    out = {k: sum(f * p[k] for f, p in parts) for k in parts[0][1] if k != "colors"}
    out["colors"] = np.maximum.reduce([p["colors"] for _, p in parts])
    return out


def decode_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, context, mapping="mesh") -> dict:
    """Cycles of one decode step of one layer for `batch` sequences at `context` tokens."""
    H, h, hv = model.n_heads, model.head_dim, model.v_dim
    b = batch
    gemv = dict(P=P, rows=b, mapping=mapping)
    # Attention against the cache [context, K·(h+hv)] spread over the region: scores are a
    # GEMV over the head dims, the weighted sum a GEMV over the context, with the softmax
    # max and sum allreduced in between (decode.csl score_matvec_mult, softmax_score,
    # output_matvec_mult).
    ctx = model.attention_context(context) / model.n_layers
    scores = mesh_gemv(w, k=H * h, n=ctx, **gemv)
    pv = mesh_gemv(w, k=ctx, n=H * hv, **gemv)
    # two norms' row sums, then the softmax max and sum
    reductions = [line_allreduce(w, P=P, nbytes=b * REDUCE_BYTES, mapping=mapping) for _ in range(4)]

    def one_kind(moe):
        mats = [mesh_gemv(w, k=k, n=n, **gemv) for k, n in
                (ops.active_shape(mm, model.n_active_experts) for mm in ops.layer_matmuls(model, moe=moe))]
        local = elementwise_cycles(w, n=b * (6 * tiles(model.d_model, P) + 2 * tiles(ops.qk_width(model), P)
                                             + 2 * tiles(ops.mlp_width(model, moe=moe), P) + 3 * tiles(ctx, P)))
        gemvs = mats + [scores, pv]
        compute = _sum(gemvs, "compute_cycles") + local
        comm = _sum(gemvs, "comm_cycles") + _sum(reductions, "cycles")
        return {"cycles": compute + comm, "compute_cycles": compute, "reduce_cycles": comm,
                "hops": _sum(gemvs, "hops") + _sum(reductions, "hops"),
                "colors": np.maximum(mats[0]["colors"], 0.0), "flops": _sum(gemvs, "flops")}
    return _mean_layer(model, one_kind)


def prefill_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, prompt, mapping="mesh", context=None) -> dict:
    """Cycles of one layer's prefill of `batch` x `prompt` tokens with MeshGEMM. `context`
    (default `prompt`): the keys each of these tokens attends to, when they are a chunk of
    a longer prompt whose earlier chunks are already in the KV cache."""
    H, h, hv = model.n_heads, model.head_dim, model.v_dim
    M = batch * prompt
    g = dict(P=P, mapping=mapping)
    # Attention per sequence: scores [L, H·h] x [H·h, L], then [L, L] x [L, H·hv].
    # Sequences are independent in attention: `batch` of them run side by side, each on a
    # sub-grid of P/sqrt(batch) (the whole grid for one sequence, as WaferLLM measured).
    Pa = np.maximum(np.floor(P / np.sqrt(batch)), 1.0)
    ga = dict(P=Pa, mapping=mapping)
    keys = prompt if context is None else context
    att = [mesh_gemm(w, m=prompt, k=H * h, n=keys, **ga), mesh_gemm(w, m=prompt, k=keys, n=H * hv, **ga)]
    rows = tiles(M, P)
    reductions = [line_allreduce(w, P=P, nbytes=rows * REDUCE_BYTES, mapping=mapping) for _ in range(2)]
    reductions += [line_allreduce(w, P=P, nbytes=batch * tiles(prompt, P) * REDUCE_BYTES, mapping=mapping)
                   for _ in range(2)]  # softmax max and sum per score row

    def one_kind(moe):
        gemms = [mesh_gemm(w, m=M, k=k, n=n, **g) for k, n in
                 (ops.active_shape(mm, model.n_active_experts) for mm in ops.layer_matmuls(model, moe=moe))]
        local = elementwise_cycles(w, n=rows * (6 * tiles(model.d_model, P) + 2 * tiles(ops.qk_width(model), P)
                                                + 2 * tiles(ops.mlp_width(model, moe=moe), P))
                                   + batch * tiles(prompt, P) * tiles(keys, P) * 3)
        compute = _sum(gemms, "compute_cycles") + _sum(att, "compute_cycles") + local
        gemm_cycles = _sum(gemms, "cycles") + _sum(att, "cycles")
        comm = _sum(reductions, "cycles")
        return {"cycles": gemm_cycles + local + comm, "compute_cycles": compute,
                "reduce_cycles": comm + (gemm_cycles - _sum(gemms, "compute_cycles") - _sum(att, "compute_cycles")),
                "flops": _sum(gemms, "flops") + batch * _sum(att, "flops"), "colors": 0.0}
    out = _mean_layer(model, one_kind)
    out.pop("colors")
    return out


def layer_weight_matrices(model: ModelSpec, *, moe: bool | None = None) -> list[tuple[int, int, int]]:
    """The weight matrices one layer's region holds, as (rows k, columns n, count): every
    matmul of ops.layer_matmuls, all experts resident. `moe` picks the layer kind
    (default: the model's widest, its MoE layers when it has them)."""
    moe = model.is_moe if moe is None else moe
    return [(mm.k, mm.n, mm.count) for mm in ops.layer_matmuls(model, moe=moe)]


def layer_memory_per_pe(w: WaferNumbers, model: ModelSpec, *, P, batch, tokens, w_bytes, kv_bytes,
                        generated=0.0, mapping="mesh", rows_in_flight=None) -> dict:
    """Bytes per PE of one layer's region: weights, KV cache, activations.
    Each weight matrix is tiled over the P x P PEs in whole tiles (ceil(k/P) x ceil(n/P),
    as mesh_gemv holds it), so the weights are those of the fullest PE, not the mean.
    Shift-based KV (mesh; T10's balanced partitions) spreads every token over P² PEs;
    concat-based (gpu_style, Ladder) spreads the prompt but appends generated tokens to one
    line of P PEs (mesh.KV_PLACEMENT). Activation buffers hold the `rows_in_flight` a region
    computes at once (default: the whole batch; a pipelined decode's micro-batch)."""
    D = model.d_model
    per_kind = [sum(c * tiles(k, P) * tiles(n, P) for k, n, c in layer_weight_matrices(model, moe=moe))
                for _, moe in ops.layer_kinds(model)]
    weights = np.maximum.reduce(per_kind) * w_bytes  # the fullest layer's region
    per_token = model.kv_elements_per_token_per_layer * kv_bytes
    ctx = model.attention_context(tokens) / model.n_layers
    if kv_spread(mapping):
        kv = batch * ctx * per_token / (P * P)
    else:
        gen = np.minimum(generated, ctx)
        kv = batch * ((ctx - gen) * per_token / (P * P) + gen * per_token / P)
    rows = batch if rows_in_flight is None else rows_in_flight
    act = rows * (4 * tiles(D, P) + 2 * tiles(ops.qkv_width(model), P) + 2 * tiles(ops.widest_mlp(model), P)) * 2.0
    return {"weights_bytes": weights, "kv_bytes": kv, "activation_bytes": act,
            "total_bytes": weights + kv + act + w.sram_reserved_per_pe_bytes}
