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

from ..primitives.kernel_fits import KEY_PASSES, LINEAR_CHUNK
from ..primitives.mesh import (VALUES_PER_WAVELET, block_input_cycles, elementwise_cycles, kv_spread, line_allreduce,
                               mesh_gemm, mesh_gemv, tiles, unified_weight_cycles, vector_cycles)
from ..specs import ModelSpec
from . import ops
from .compressed import prefill_pairs
from ..primitives.hardware_numbers import WaferNumbers

REDUCE_BYTES = 4.0  # fp32 row statistics (norm sums, softmax max/sum)


def _weighted(parts: list[tuple[float, dict]], key: str):
    """Sum of a key over (share of the layers, part) pairs: each part counted in the share
    of the layers that have it (a hybrid's softmax and linear-attention layers)."""
    return sum(share * p.get(key, 0.0) for share, p in parts)


def _fetch_cycles(w: WaferNumbers, model: ModelSpec, mms, *, P, tokens, moe, mapping):
    """Operands reaching a layer's region from elsewhere (Ladder's unified memory; 0 under
    the other mappings): each block's input, two blocks a layer with an MLP (the token
    mixer's, the MLP's), and the weights one token multiplies by (the routed experts'
    active ones)."""
    weights = sum(mm.share * np.prod(ops.active_shape(mm, model.n_active_experts)) for mm in mms)
    return (1.0 + (moe is not None)) * block_input_cycles(w, P=P, tokens=tokens, mapping=mapping) \
        + unified_weight_cycles(w, P=P, weight_elements=weights, mapping=mapping)


def _state_dtype(model: ModelSpec) -> str:
    return "fp32" if model.linear_state_bytes_per_element >= 4 else "fp16"


def linear_mixing_decode(w: WaferNumbers, model: ModelSpec, *, P, rows, mapping="mesh") -> list[tuple[float, dict]]:
    """A linear layer's token mixing for `rows` new tokens, with each value head's d_k x d_v
    state resident in the region (tiled ceil(d_k/P) x ceil(H_v d_v/P) per PE, at
    linear_state_bytes_per_element): the delta rule (Gated DeltaNet, KDA) reads S^T k and
    the output S^T q (two GEMVs contracting d_k, each with its allreduce), Mamba-2 only its
    output C^T h (KEY_PASSES: one), then the state is decayed and rank-1-updated (two passes
    over it, read and written). As (share of the layers, part) pairs; none for a model
    without linear layers. The convolution's few taps are not counted."""
    if not model.n_linear_layers:
        return []
    share = model.n_linear_layers / model.n_layers
    dk, hv = model.linear_key_head_dim, model.linear_value_heads * model.linear_value_head_dim
    dt = _state_dtype(model)
    read = mesh_gemv(w, P=P, k=dk, n=hv, rows=rows, dtype=dt, mapping=mapping)  # S^T k, and S^T q alike
    state_pe = tiles(dk, P) * tiles(hv, P)
    update = {"compute_cycles": 2.0 * rows * vector_cycles(w, n=state_pe, dtype=dt, reads=2.0, writes=1.0,
                                                          elem_bytes=model.linear_state_bytes_per_element),
              "flops": 4.0 * rows * dk * hv}
    return [(KEY_PASSES[model.linear_kind] * share, read), (share, update)]


def linear_mixing_prefill(w: WaferNumbers, model: ModelSpec, *, P, prompt, mapping="mesh") -> list[tuple[float, dict]]:
    """The chunked recurrence over `prompt` tokens of one sequence as MeshGEMMs with its
    FLOPs (kernel_fits.gdn_work: 2 (c (p d_k + d_v) + 2 d_k d_v) per token and value head,
    c = min(LINEAR_CHUNK, prompt), p = KEY_PASSES of the kind): [T, d_k] x [d_k, H_v (p c +
    2 d_v)] (intra-chunk scores, the delta rule's WY transform, state reads and updates)
    and [T, c] x [c, H_v d_v] (the intra-chunk weighted sum)."""
    if not model.n_linear_layers:
        return []
    share = model.n_linear_layers / model.n_layers
    dk, H, dv = model.linear_key_head_dim, model.linear_value_heads, model.linear_value_head_dim
    c = np.minimum(LINEAR_CHUNK, prompt)
    g = dict(P=P, mapping=mapping)
    return [(share, mesh_gemm(w, m=prompt, k=dk, n=H * (KEY_PASSES[model.linear_kind] * c + 2.0 * dv), **g)),
            (share, mesh_gemm(w, m=prompt, k=c, n=H * dv, **g))]


def _mean_layer(model: ModelSpec, one_kind) -> dict:
    """The per-layer mean of `one_kind(moe)` over the model's dense and MoE layers."""
    kinds = ops.layer_kinds(model)
    parts = [(n / model.n_layers, one_kind(moe)) for n, moe in kinds]
    if len(parts) == 1:
        return parts[0][1]
    out = {k: sum(f * p[k] for f, p in parts) for k in parts[0][1] if k != "colors"}
    out["colors"] = np.maximum.reduce([p["colors"] for _, p in parts])
    return out


def expert_hand_off_cycles(w: WaferNumbers, model: ModelSpec, *, P, rows, expert_groups):
    """Cycles for `rows` activation rows to reach the expert regions beside a layer's region
    and the experts' outputs to come back (0 with the experts in the layer's region): each
    way a region's width in hops and the rows' d_model values over the P links of its edge,
    a value per link per cycle (mesh.VALUES_PER_WAVELET)."""
    one_way = P * w.hop_cycles + rows * tiles(model.d_model, P) / VALUES_PER_WAVELET
    return np.where(np.asarray(expert_groups, float) > 0, 2.0 * one_way, 0.0)


def decode_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, context, mapping="mesh", expert_groups=0.0) -> dict:
    """Cycles of one decode step of one layer for `batch` sequences at `context` tokens.
    With `expert_groups` > 0 (layer_memory_per_pe) the routed experts run in their own
    regions, a row's in the busiest of them (expert_pairs_per_row), after the hand-off."""
    H, h, hv = model.n_heads, model.head_dim, model.v_dim
    b = batch
    gemv = dict(P=P, rows=b, mapping=mapping)
    # Attention against the cache [context, K·(h+hv)] spread over the region: scores are a
    # GEMV over the head dims, the weighted sum a GEMV over the context, with the softmax
    # max and sum allreduced in between (decode.csl score_matvec_mult, softmax_score,
    # output_matvec_mult).
    soft = model.n_full_attention_layers / model.n_layers  # layers with softmax attention
    held = model.attention_context(context) / max(model.n_full_attention_layers, 1)  # keys per such layer
    ctx = model.attended_keys(held)  # DSA: the top-k of them
    scores = mesh_gemv(w, k=H * h, n=ctx, **gemv)
    pv = mesh_gemv(w, k=ctx, n=H * hv, **gemv)
    # DSA's lightning indexer scores every held key: a GEMV over its heads' dims (DeepSeek-V4's
    # CSA layers: every compressed entry)
    index_keys, index_share = (held, soft * model.index_share) if model.is_dsa else (context / max(model.csa_ratio, 1),
                                                                 model.n_csa_layers / model.n_layers)
    indexer = [(index_share, mesh_gemv(w, k=model.index_n_heads * model.index_head_dim, n=index_keys, **gemv))] \
        if model.index_topk else []
    # row statistics allreduced: two norms' sums (every layer), the softmax max and sum
    # (softmax layers)
    stats = [(2.0 + 2.0 * soft, line_allreduce(w, P=P, nbytes=b * REDUCE_BYTES, mapping=mapping))]
    mixing = linear_mixing_decode(w, model, P=P, rows=b, mapping=mapping)

    def one_kind(moe):
        mms = ops.layer_matmuls(model, moe=moe)
        top = expert_pairs_per_row(model, rows=b, expert_groups=expert_groups) if moe else model.n_active_experts
        mats = [(mm.share, mesh_gemv(w, k=k, n=n, **gemv)) for mm, (k, n) in
                zip(mms, (ops.active_shape(mm, top) for mm in mms))]
        local = elementwise_cycles(w, n=b * (6 * tiles(model.d_model, P) + 2 * tiles(ops.qk_width(model), P)
                                             + 2 * tiles(ops.mlp_width(model, moe=moe), P) + soft * 3 * tiles(ctx, P)))
        parts = mats + [(soft, scores), (soft, pv)] + indexer + mixing
        compute = _weighted(parts, "compute_cycles") + local
        fetch = _fetch_cycles(w, model, mms, P=P, tokens=b, moe=moe, mapping=mapping)
        if moe:
            fetch = fetch + expert_hand_off_cycles(w, model, P=P, rows=b, expert_groups=expert_groups)
        comm = _weighted(parts, "comm_cycles") + _weighted(stats, "cycles") + fetch
        return {"cycles": compute + comm, "compute_cycles": compute, "reduce_cycles": comm,
                "hops": _weighted(parts, "hops") + _weighted(stats, "hops"),
                "colors": np.maximum(mats[0][1]["colors"], 0.0), "flops": _weighted(parts, "flops")}
    return _mean_layer(model, one_kind)


def prefill_layer(w: WaferNumbers, model: ModelSpec, *, P, batch, prompt, mapping="mesh", context=None,
                  expert_groups=0.0) -> dict:
    """Cycles of one layer's prefill of `batch` x `prompt` tokens with MeshGEMM. `context`
    (default `prompt`): the keys each of these tokens attends to, when they are a chunk of
    a longer prompt whose earlier chunks are already in the KV cache. `expert_groups` as in
    decode_layer."""
    H, h, hv = model.n_heads, model.head_dim, model.v_dim
    M = batch * prompt
    g = dict(P=P, mapping=mapping)
    # Attention per sequence: scores [L, H·h] x [H·h, L], then [L, L] x [L, H·hv].
    # Sequences are independent in attention: `batch` of them run side by side, each on a
    # sub-grid of P/sqrt(batch) (the whole grid for one sequence, as WaferLLM measured).
    Pa = np.maximum(np.floor(P / np.sqrt(batch)), 1.0)
    ga = dict(P=Pa, mapping=mapping)
    keys = prompt if context is None else context
    soft = model.n_full_attention_layers / model.n_layers  # layers with softmax attention
    att_keys = model.attended_keys(keys)  # DSA: each query's top-k
    index_keys, index_share = keys, soft * model.index_share
    if model.is_compressed:  # DeepSeek-V4: a query's mean window and compressed keys; CSA's index keys
        att_keys = prefill_pairs(model, keys) / np.maximum(keys, 1.0)
        index_keys, index_share = keys / model.csa_ratio, model.n_csa_layers / model.n_layers
    att = [(soft, mesh_gemm(w, m=prompt, k=H * h, n=att_keys, **ga)),
           (soft, mesh_gemm(w, m=prompt, k=att_keys, n=H * hv, **ga))]
    if model.index_topk:  # the lightning indexer scores every key
        att.append((index_share, mesh_gemm(w, m=prompt, k=model.index_n_heads * model.index_head_dim, n=index_keys,
                                           **ga)))
    att += linear_mixing_prefill(w, model, P=Pa, prompt=prompt, mapping=mapping)  # per sequence, as attention
    rows = tiles(M, P)
    reductions = [(2.0, line_allreduce(w, P=P, nbytes=rows * REDUCE_BYTES, mapping=mapping)),  # two norms
                  (2.0 * soft, line_allreduce(w, P=P, nbytes=batch * tiles(prompt, P) * REDUCE_BYTES,
                                              mapping=mapping))]  # softmax max and sum per score row

    def one_kind(moe):
        mms = ops.layer_matmuls(model, moe=moe)
        top = expert_pairs_per_row(model, rows=M, expert_groups=expert_groups) if moe else model.n_active_experts
        gemms = [(mm.share, mesh_gemm(w, m=M, k=k, n=n, **g)) for mm, (k, n) in
                 zip(mms, (ops.active_shape(mm, top) for mm in mms))]
        local = elementwise_cycles(w, n=rows * (6 * tiles(model.d_model, P) + 2 * tiles(ops.qk_width(model), P)
                                                + 2 * tiles(ops.mlp_width(model, moe=moe), P))
                                   + soft * batch * tiles(prompt, P) * tiles(keys, P) * 3)
        compute = _weighted(gemms, "compute_cycles") + _weighted(att, "compute_cycles") + local
        gemm_cycles = _weighted(gemms, "cycles") + _weighted(att, "cycles")
        fetch = _fetch_cycles(w, model, mms, P=P, tokens=M, moe=moe, mapping=mapping)
        if moe:
            fetch = fetch + expert_hand_off_cycles(w, model, P=P, rows=M, expert_groups=expert_groups)
        comm = _weighted(reductions, "cycles") + fetch
        return {"cycles": gemm_cycles + local + comm, "compute_cycles": compute,
                "reduce_cycles": comm + (gemm_cycles - _weighted(gemms, "compute_cycles")
                                         - _weighted(att, "compute_cycles")),
                "flops": _weighted(gemms, "flops") + batch * _weighted(att, "flops"), "colors": 0.0}
    out = _mean_layer(model, one_kind)
    out.pop("colors")
    return out


def layer_weight_matrices(model: ModelSpec, *, moe: bool | None | str = "widest", attention: str = "softmax"
                          ) -> list[tuple[int, int, int]]:
    """The weight matrices one layer's region holds, as (rows k, columns n, count): the
    matmuls of ops.layer_matmuls, all experts resident. `moe` picks the MLP kind as
    ops.layer_kinds names it (True, False, or None: a block without an MLP), default the
    model's widest (its MoE layers when it has them); `attention` the token mixing of a
    hybrid's layer: "softmax" (its QKV and output projections) or "linear" (the Gated
    DeltaNet projections)."""
    moe = model.is_moe if moe == "widest" else moe
    linear = {mm.name for mm in ops.linear_attention_matmuls(model)} if model.n_linear_layers else set()
    mixer = [mm for mm in ops.attention_matmuls(model) if (mm.name in linear) == (attention == "linear" and
                                                                                   bool(linear))]
    kinds = [[mm for mm in mixer if mm.name.endswith("_sliding") == sl] for sl in (False, True)]
    if model.n_csa_layers:  # DeepSeek-V4: a region holds a CSA layer's compressor and indexer, the larger kind's
        mixer = [mm for mm in mixer if mm.name != "compress_kv_heavy"]
    if all(kinds):  # softmax layers of two shapes (ops.attention_matmuls): the larger kind's region
        mixer = max(kinds, key=lambda mms: sum(mm.k * mm.n * mm.count for mm in mms))
    return [(mm.k, mm.n, mm.count) for mm in mixer + ops.mlp_matmuls(model, moe=moe)]


def layer_memory_per_pe(w: WaferNumbers, model: ModelSpec, *, P, batch, tokens, w_bytes, kv_bytes,
                        generated=0.0, mapping="mesh", rows_in_flight=None, experts_beside=True) -> dict:
    """Bytes per PE of one layer's region: weights, KV cache, activations.
    Each weight matrix is tiled over the P x P PEs in whole tiles (ceil(k/P) x ceil(n/P),
    as mesh_gemv holds it), so the weights are those of the fullest PE, not the mean.
    Shift-based KV (mesh; T10's balanced partitions) spreads every token over P² PEs;
    concat-based (gpu_style, Ladder) spreads the prompt but appends generated tokens to one
    line of P PEs (mesh.KV_PLACEMENT). Activation buffers hold the `rows_in_flight` a region
    computes at once (default: the whole batch; a pipelined decode's micro-batch).

    A MoE layer that a region of side P cannot hold whole (at any side for Llama 4
    Maverick, DeepSeek-V3 or Kimi K2 in 16 bits) keeps its routed experts in
    `expert_groups` regions of the same side beside it (expert parallelism over regions,
    on one wafer or across systems), each holding as many whole experts as its PEs allow
    (no cache: the layer's own region keeps the attention, router, shared experts and the
    KV cache); 0 where the layer fits whole, or with experts_beside=False (a layer streamed
    in whole, wafer_streaming.py); an expert region's PE holds `expert_region_bytes`.
    `total_bytes` is then the fuller of the two
    region kinds. The grid search weighs both layouts: whole layers on large regions, or
    experts beside them on smaller ones (fewer systems, more hand-offs)."""
    rows = batch if rows_in_flight is None else rows_in_flight
    act = rows * activation_bytes_per_row(model, P=P)

    expert = expert_bytes_per_pe(model, P=P, w_bytes=w_bytes) if model.n_moe_layers else 0.0

    def weights_of(attention):
        """(whole, without its routed experts): the fullest region of that mixing kind over
        the MLP kinds, with and without the routed experts of its MoE layers."""
        whole = [(sum(c * tiles(k, P) * tiles(n, P) for k, n, c in
                      layer_weight_matrices(model, moe=moe, attention=attention)) * w_bytes, moe)
                 for _, moe in ops.layer_kinds(model)]
        return (np.maximum.reduce([region for region, _ in whole]),
                np.maximum.reduce([region - (model.n_experts * expert if moe else 0.0) for region, moe in whole]))
    weights, own = weights_of("softmax")
    per_token = model.kv_elements_per_token_per_layer * kv_bytes
    ctx = model.keys_held(tokens) / max(model.n_full_attention_layers, 1)  # keys cached per softmax layer
    if kv_spread(mapping):
        kv = batch * ctx * per_token / (P * P)
    else:
        gen = np.minimum(generated, ctx)
        kv = batch * ((ctx - gen) * per_token / (P * P) + gen * per_token / P)
    if model.n_linear_layers:  # a linear layer's region: its projections and each sequence's state
        hv = model.linear_value_heads * model.linear_value_head_dim
        state = batch * tiles(model.linear_key_head_dim, P) * tiles(hv, P) * model.linear_state_bytes_per_element
        lin_weights, lin_own = weights_of("linear")
        use_linear = lin_weights + state > weights + kv
        own = np.where(use_linear, lin_own, own)
        weights, kv = np.where(use_linear, lin_weights, weights), np.where(use_linear, state, kv)
    total = weights + kv + act + w.sram_reserved_per_pe_bytes
    groups = 0.0 * total
    if model.n_moe_layers and experts_beside:  # the routed experts beside the layer where it does not fit whole
        room = w.usable_sram_per_pe_bytes - act  # an expert region: no cache
        per_region = np.floor(room / expert)
        split = (total > w.sram_per_pe_bytes) & (per_region >= 1.0)
        groups = np.where(split, np.ceil(model.n_experts / np.maximum(per_region, 1.0)), 0.0)
        held = np.minimum(per_region, model.n_experts) * expert + act + w.sram_reserved_per_pe_bytes
        weights = np.where(split, own, weights)  # the layer's own region
        total = np.where(split, np.maximum(weights + kv + act + w.sram_reserved_per_pe_bytes, held), total)
    return {"weights_bytes": weights, "kv_bytes": kv, "activation_bytes": act, "total_bytes": total,
            "expert_groups": groups,
            "expert_region_bytes": held if model.n_moe_layers and experts_beside else 0.0 * total}


def activation_bytes_per_row(model: ModelSpec, *, P):
    """Bytes per PE of one activation row a layer region buffers while computing it (16-bit):
    the residual, normed input, attention output and MLP output (4 x d_model), the fused QKV
    row and the MLP's gate and up rows, each over the P PEs of a line in whole tiles."""
    return (4 * tiles(model.d_model, P) + 2 * tiles(ops.qkv_width(model), P)
            + 2 * tiles(ops.widest_mlp(model), P)) * 2.0


def expert_bytes_per_pe(model: ModelSpec, *, P, w_bytes):
    """Bytes per PE of one routed expert's matrices tiled over a P x P region (whole tiles)."""
    return sum(tiles(mm.k, P) * tiles(mm.n, P) for mm in ops.mlp_matmuls(model, moe=True) if mm.routed) * w_bytes


def expert_pairs_per_row(model: ModelSpec, *, rows, expert_groups):
    """Routed experts per row in the busiest of `expert_groups` expert regions (all of a
    row's top_k where the experts stay in the layer's region): ops.busiest_rank_experts'
    pairs over the regions, at least the even share ceil(rows k / groups) and one."""
    k = float(model.n_active_experts)
    g = np.asarray(expert_groups, float)
    if not np.any(g > 0):
        return k + 0.0 * g
    rows = np.maximum(np.asarray(rows, float), 1.0)
    pairs, _ = ops.busiest_rank_experts(n_experts=model.n_experts, top_k=k, tokens=rows, ep=np.maximum(g, 1.0))
    busiest = np.minimum(np.maximum(pairs, np.ceil(rows * k / np.maximum(g, 1.0))), rows * k)
    return np.where(g > 0, busiest / rows, k)
