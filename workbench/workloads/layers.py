"""One transformer layer's kernels on one device, for T tokens in flight: the GEMMs
(split by tensor parallelism), attention, elementwise kernels and the TP all-reduces.

Every function returns a dict of named parts (flops, bytes, compute_s, memory_s,
overhead_s, comm_s, time_s) that the workloads add up. time_s is kernel plus
communication time; overhead_s (kernel launch gaps) is kept apart. Sizes are arrays.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ..primitives._array import where
from ..primitives.attention import attention_decode, attention_prefill, linear_attention, mla_decode, sparse_indexer
from ..primitives.collectives import collective, ep_all_to_all
from ..primitives.dsa import fitted_dsa
from ..primitives.msa import fitted_msa, msa_dims
from ..primitives.gemm import elementwise, gemm
from ..primitives.moe import fitted_moe
from ..primitives.hardware_numbers import GpuNumbers
from ..primitives.kernel_fits import causal_topk_pairs
from ..specs import ModelSpec
from . import ops
from .compressed import compressed_decode, compressed_prefill, dsv4_block, hyper_connections
from .parts import PARTS, WIDE_MATH, add, attention_math  # noqa: F401  (re-exported)

def _classed(part: dict, op_class: str) -> dict:
    """Tag a part's time (kernel + launch overhead) with its operation class."""
    return dict(part, **{f"{op_class}_s": part["time_s"] + part.get("overhead_s", 0.0)})


def _gemm(hw, *, m, n, k, math, w_bytes, a_bytes, count=1.0, grouped=False):
    """A weight GEMM of the layer: on the sparse tensor cores when the weights are 2:4
    (hw.sparse_weights: the math dtype's 2:4 format, units.SPARSE_2_4)."""
    dtype = f"{math}_2:4" if hw.sparse_weights else math
    return gemm(hw=hw, m=m, n=n, k=k, dtype=dtype, a_bytes=a_bytes, b_bytes=w_bytes,
                c_bytes=a_bytes, count=count, grouped=grouped)


def _split(mm: ops.Matmul, ways):
    """(k, n) on one rank when the matmul is sharded `ways` ways as its `split` says."""
    if mm.split == "n":
        return mm.k, mm.n / ways
    if mm.split == "k":
        return mm.k / ways, mm.n
    return mm.k, mm.n


def routed_gemm(*, hw: GpuNumbers, k, n, n_experts, top_k, tokens, ep, math: str, w_bytes, a_bytes,
                imbalance=1.0) -> dict:
    """One routed matrix of an MoE layer (k x n: one expert's share on the GPU) as one grouped
    GEMM over the experts the busiest expert-parallel rank touches (ops.busiest_rank_experts),
    each with that rank's tokens per touched expert times `imbalance`."""
    pairs, touched = ops.busiest_rank_experts(n_experts=n_experts, top_k=top_k, tokens=tokens, ep=ep)
    return _gemm(hw, m=pairs / touched * imbalance, n=n, k=k, count=touched, grouped=True, math=math,
                 w_bytes=w_bytes, a_bytes=a_bytes)


def layer_gemms(hw: GpuNumbers, model: ModelSpec, *, tokens, tp, math: str, w_bytes, a_bytes,
                moe: bool, ep=1.0, imbalance=1.0, matmuls=None, routed=None) -> dict:
    """Matmuls of one layer (ops.layer_matmuls, or the `matmuls` given) on one TP rank.
    Routed experts: the tp devices hold E/ep experts each, every expert split over tp/ep
    of them, and the busiest rank sees `imbalance` x the mean routed load, in their own
    format where `routed` (math, w_bytes, a_bytes: ops.part_formats) gives one. They run as
    the framework's fused MoE kernel where its measured tables have one for the format
    (primitives/moe.py), else as one grouped GEMM per matrix."""
    T = tokens
    g = dict(hw=hw, math=math, w_bytes=w_bytes, a_bytes=a_bytes)
    gr = g if routed is None else dict(g, **routed)  # the routed experts' format
    parts = []
    mats = ops.layer_matmuls(model, moe=moe) if matmuls is None else matmuls
    fused = None
    if any(mm.routed for mm in mats) and model.mlp_matrices == 3 and not hw.sparse_weights:  # measured MoE kernel
        fused = fitted_moe(hw=hw, tokens=T * imbalance, hidden=model.expert_width, inter=model.d_ff_expert,
                           top_k=model.n_active_experts, n_experts=model.n_experts, tp=tp / ep, ep=ep,
                           math=gr["math"], w_bytes=gr["w_bytes"])
    if fused is not None:
        parts.append(fused)
        mats = [mm for mm in mats if not mm.routed]
    for mm in mats:
        if mm.routed:
            k, n = _split(mm, tp / ep)
            parts.append(routed_gemm(k=k, n=n, n_experts=mm.count, top_k=model.n_active_experts, tokens=T, ep=ep,
                                     imbalance=imbalance, **gr))
        else:
            k, n = _split(mm, tp)
            parts.append(add(_gemm(m=T, n=n, k=k, **g), scale=mm.share))  # share: of the layers that have it
    return add(*parts)


def layer_elementwise(hw: GpuNumbers, model: ModelSpec, *, tokens, tp, a_bytes, moe: bool) -> dict:
    """Norms, residual adds, rotary embedding and the MLP activation: memory-bound.
    Bytes: two norms (read + write D), two residual adds (2 reads + 1 write of D), rotary
    on Q and K (read + write), the gated activation (read 2F, write F) per token; a block
    without an MLP (moe None) one norm and one residual add."""
    F = ops.mlp_width(model, moe=moe)
    qk = ops.qk_width(model) / tp * (1.0 - _mixer_free_share(model, moe))
    blocks = (1.0 if moe is None else 2.0) - _mixer_free_share(model, moe)
    mhc = hyper_connections(hw, model, tokens=tokens)  # DeepSeek-V4's mHC, as the framework measured it
    n = model.hc_mult if mhc is None else 0
    # a block's norm (2 D), then its residual add (3 D) or, with hc_mult hyper-connection
    # streams (DeepSeek-V4), their norm and collapse before it (read 2 n D, write D) and the
    # expand-and-mix after it (read n D and D, write n D): two more kernels
    residual = (4 * n + 2) * model.d_model if n else 3 * model.d_model
    per_token = blocks * (2 * model.d_model + residual) + 2 * qk + model.mlp_matrices * F / tp
    out = elementwise(hw=hw, nbytes=tokens * per_token * a_bytes, count=(4.0 if n else 2.0) * blocks + 1.0)
    if mhc is not None:  # in place of the plain residual adds counted above
        out = add(out, {k: v for k, v in mhc.items() if k in PARTS})
    return out


def tp_allreduce(hw: GpuNumbers, model: ModelSpec, *, tokens, tp, a_bytes, moe=False) -> dict:
    """Two all-reduces of the [T, D] activations per layer (after attention and after the
    MLP) across the TP group (Megatron-LM tensor parallelism); one in a block without an
    MLP (moe None)."""
    c = collective(hw=hw, op="all_reduce", size=ops.tp_allreduce_bytes(model, tokens=tokens, a_bytes=a_bytes),
                   devices=tp)
    n = (1.0 if moe is None else 2.0) - _mixer_free_share(model, moe)  # a layer without a mixer: its MLP's
    return {"comm_s": n * c["time_s"], "time_s": n * c["time_s"]}


def _mixer_free_share(model, moe) -> float:
    """Of the layers with an MLP (moe not None), the share without a token mixer (Llama-
    Nemotron's NAS-pruned ones)."""
    return 0.0 if moe is None else model.n_mixer_free_layers / (model.n_layers - model.n_mlp_free_layers)


def expert_all_to_all(hw: GpuNumbers, model: ModelSpec, *, tokens, ep, a_bytes, tp=1.0, attention_dp=1.0) -> dict:
    """Dispatch and combine of an MoE layer across `ep` ranks: each token's hidden state
    goes to its k experts and comes back (two all-to-alls of T·k·D values). `tokens` are
    the attention replica's, held by each of its `tp` devices (tensor-parallel attention
    leaves every rank of the replica the same hidden states): a device sends its 1/tp share
    of them, and only to the experts outside its replica (1 - 1/attention_dp of them); with
    one replica (TP attention, the MoE over the same devices) nothing moves beyond the
    all-reduce that combines the experts' partial sums (tp_allreduce), as TensorRT-LLM,
    vLLM and SGLang run expert parallelism without attention data parallelism."""
    tokens = tokens * (1.0 - 1.0 / attention_dp) / tp
    # the framework's measured EP kernels (DeepEP & co.) inside the NVLink domain, with its
    # measured MoE layers (moe_mla_kernels="measured"); else two all-to-all collectives
    t = None
    if hw.measured_moe_mla and np.all(np.asarray(ep) <= hw.link("scale_up").domain_size):
        t = ep_all_to_all(hw=hw, tokens=tokens, hidden=model.expert_width, top_k=model.n_active_experts, ep=ep,
                          elem_bytes=a_bytes)
    if t is None:
        # at least one token's bytes: a zero size would leave the collective's bandwidth 0/0 (zeroed below anyway)
        size = ops.expert_dispatch_bytes(model, tokens=np.maximum(tokens, 1.0), a_bytes=a_bytes)
        t = 2.0 * collective(hw=hw, op="all_to_all", size=size, devices=ep)["time_s"]
    t = where(np.asarray(attention_dp) > 1.0, t, 0.0)  # one replica: no all-to-all, not even its latency
    return {"comm_s": t, "time_s": t}


def replica_gather(hw: GpuNumbers, model: ModelSpec, *, tokens, tp, attention_dp, ep, a_bytes) -> dict:
    """An MoE layer sharded tensor-parallel beyond its attention replica (MoE TP = tp ·
    attention_dp / ep > tp: each shard serves the tokens of g = attention_dp / ep replicas)
    gathers those replicas' hidden states before the experts and scatters the partial sums
    back after: an all-gather and a reduce-scatter of g·T·D values among g devices (vLLM's
    data-parallel MoE without expert parallelism, vllm/distributed/device_communicators/
    all2all.py: the hidden states multicast across the DP group, the outputs all-reduced
    and sliced, or its all-gather / reduce-scatter backend). None with one replica per shard."""
    g = np.maximum(attention_dp / ep, 1.0)
    size = ops.tp_allreduce_bytes(model, tokens=tokens * g, a_bytes=a_bytes)
    t = collective(hw=hw, op="all_gather", size=size, devices=g)["time_s"] \
        + collective(hw=hw, op="reduce_scatter", size=size, devices=g)["time_s"]
    t = where(g > 1.0, t, 0.0)
    return {"comm_s": t, "time_s": t}


def linear_layers(hw, model, *, tokens, sequences, tp, math, a_bytes) -> dict:
    """A hybrid's linear token mixing (Gated DeltaNet, KDA, Mamba-2), averaged over all
    layers (its share of them)."""
    r = linear_attention(hw=hw, tokens=tokens, sequences=sequences, heads=model.linear_value_heads / tp,
                         kind=model.linear_kind,
                         key_dim=model.linear_key_head_dim, value_dim=model.linear_value_head_dim,
                         qkv_width=model.linear_qkv_width / tp, conv_kernel=model.linear_conv_kernel,
                         state_bytes_per_element=model.linear_state_bytes_per_element, act_bytes=ops.stream_bytes(a_bytes),
                         dtype=attention_math(math))
    return add(r, scale=model.n_linear_layers / model.n_layers)


def _with_linear(softmax: dict, hw, model, **kw) -> dict:
    """Softmax attention over its share of the layers plus the linear layers' (hybrids);
    the softmax part alone for every other model (over its share of the layers where some
    have no token mixer)."""
    if not model.n_linear_layers:
        return add(softmax, scale=model.n_full_attention_layers / model.n_layers) if model.n_mixer_free_layers \
            else softmax
    return add(add(softmax, scale=model.n_full_attention_layers / model.n_layers), linear_layers(hw, model, **kw))


def _by_kind(model, cost) -> dict:
    """A softmax layer's attention averaged over the model's kinds of them (full and
    sliding-window layers, each its own head shapes and window): cost(shape, window)."""
    n_soft = model.n_full_attention_layers
    return add(*[add(cost(model.attention_shape(sliding=sl), w if np.isfinite(w) else 0.0), scale=n / n_soft)
                 for n, w, sl in model.softmax_kinds])


def prefill_attention(hw, model, *, batch, prompt, tp, math, a_bytes, kv_bytes) -> dict:
    """Causal flash attention of `batch` prompts of `prompt` tokens on one TP rank (a
    hybrid's linear layers: the chunked gated delta rule over the same tokens); sliding-
    window layers over their band, each kind of layer its own shape; DeepSeek-V4's
    compressed layers in workloads/compressed.py."""
    if model.is_compressed:
        return compressed_prefill(hw, model, batch=batch, prompt=prompt, tp=tp, math=math, a_bytes=a_bytes,
                                  kv_bytes=kv_bytes)
    if model.n_sliding_layers and not model.is_mla:
        att = _by_kind(model, lambda shape, w: attention_prefill(
            hw=hw, batch=batch, seq_len=prompt, n_heads=shape[0] / tp, head_dim=shape[2], v_head_dim=shape[3],
            n_kv_heads=np.maximum(shape[1] / tp, 1.0), causal=True, dtype=attention_math(math), act_bytes=a_bytes,
            kv_bytes=kv_bytes, window=w))
        return _with_linear(att, hw, model, tokens=batch * prompt, sequences=batch, tp=tp, math=math,
                            a_bytes=a_bytes)
    if model.is_mla and not model.is_dsa and _mla_prefill_16bit_kv(hw):
        kv_bytes = 2.0  # keys and values up-projected from the latent this iteration, whatever the cache holds
    att = attention_prefill(hw=hw, batch=batch, seq_len=prompt, n_heads=model.n_heads / tp,
                            head_dim=model.head_dim, v_head_dim=model.v_dim,
                            n_kv_heads=np.maximum(model.n_kv_heads / tp, 1.0), causal=True,
                            dtype=attention_math(math), act_bytes=a_bytes, kv_bytes=kv_bytes)
    if model.is_dsa:  # DSA: query i attends min(i, k) keys, and the indexer scores all i
        s = model.selected_share  # the layers a top-k selects; the others attend every key
        att = add(add(att, scale=s * _sparse_share(prompt, model.index_topk) + 1.0 - s),
                  _indexer(hw, model, queries=batch * prompt, pairs=batch * prompt * (prompt + 1.0) / 2.0,
                           cached_keys=batch * prompt, kv_bytes=kv_bytes))
    return _with_linear(att, hw, model, tokens=batch * prompt, sequences=batch, tp=tp, math=math, a_bytes=a_bytes)


@lru_cache(maxsize=None)
def _mla_frameworks() -> frozenset:
    from ..backends.kernel_tables import serving_constants
    return frozenset(serving_constants().get("mla_prefill_16bit_kv", []))


def _mla_prefill_16bit_kv(hw) -> bool:
    """Whether the framework whose engine `hw` runs prefills MLA over 16-bit keys and values
    up-projected this iteration (specs/serving/frameworks.yaml mla_prefill_16bit_kv)."""
    from ..backends.kernel_tables import framework_of
    return framework_of(hw) in _mla_frameworks()


def _sparse_share(prompt, k):
    """The share of a causal prompt's (query, key) pairs that top-k attention keeps:
    sum_i min(i, k) over sum_i i, i = 1..T."""
    T = np.asarray(prompt, float)
    return causal_topk_pairs(T, k) / (T * (T + 1.0) / 2.0)


def _indexer(hw, model, *, queries, pairs, cached_keys, kv_bytes) -> dict:
    """The lightning indexer of a DSA layer (primitives/attention.sparse_indexer), its keys at
    the KV-cache precision; replicated on every TP rank, as MLA's latent is. A model that
    shares one top-k across layers (GLM-5.2) runs it in its index_share of them."""
    return add(sparse_indexer(hw=hw, queries=queries, pairs=pairs, cached_keys=cached_keys,
                              n_heads=model.index_n_heads, head_dim=model.index_head_dim, key_bytes=kv_bytes),
               scale=model.index_share)


def decode_attention(hw, model, *, batch, context, tp, math, kv_bytes, queries=1.0) -> dict:
    """One query per sequence over its cache on one TP rank; MLA's latent (one per layer,
    shared by all heads, not split by TP: every rank reads it) instead of KV heads; a
    hybrid's linear layers read and rewrite their state instead; sliding-window layers read
    their window, each kind of layer its own shape; DeepSeek-V4's compressed layers in
    workloads/compressed.py. Its arrays are new ones, held by nothing else (layer_decode
    sums the layer into them).

    MLA decodes with absorbed weights, as every serving kernel runs it (FlashMLA,
    TensorRT-LLM's and SGLang's MLA generation kernels; DeepSeek-V2, arXiv 2405.04434,
    sec. 2.1.2: W_UK absorbed into the query, W_UV into the output): each head scores the
    latent plus its rope part (kv_lora_rank + rope) and sums latents (kv_lora_rank), the
    FLOPs kernel_fits.mla_decode_roofline counts for the measured MLA tables. `queries`
    positions per sequence (a speculative verify step's 1 + k) fold into MLA's heads: the
    latent is read once and every position's heads compute over it (with 128 heads on a GPU
    the kernel is compute-bound, so they do not ride free); other attention reads the cache
    once for them (a memory-bound kernel's few extra queries)."""
    if model.is_compressed:
        return compressed_decode(hw, model, batch=batch, context=context, tp=tp, math=math, kv_bytes=kv_bytes)
    if model.n_sliding_layers and not model.is_mla:
        att = _by_kind(model, lambda shape, w: attention_decode(
            hw=hw, batch=batch, context=context, n_heads=shape[0] / tp, head_dim=shape[2], v_head_dim=shape[3],
            n_kv_heads=np.maximum(shape[1] / tp, 1.0), dtype=attention_math(math), kv_bytes=kv_bytes, window=w))
        return _with_linear(att, hw, model, tokens=batch, sequences=batch, tp=tp, math=math, a_bytes=2.0)
    held = model.attention_context(context) / model.n_full_attention_layers  # mean over softmax layers, windows capped
    ctx = model.attended_keys(held)  # DSA: the top-k of them
    indexer = _indexer(hw, model, queries=batch, pairs=batch * held, cached_keys=batch * held,
                       kv_bytes=kv_bytes) if model.is_dsa else None
    heads = model.n_heads / tp * (queries if model.is_mla else 1.0)
    if model.is_mla:
        fitted = mla_decode(hw=hw, batch=batch, context=ctx, n_heads=heads, latent=model.kv_lora_rank,
                            rope=model.qk_rope_head_dim, dtype=attention_math(math), kv_bytes=kv_bytes)
        if fitted is not None:  # the framework's measured MLA kernels
            fitted = fitted if indexer is None else add(fitted, indexer)
            return _with_linear(fitted, hw, model, tokens=batch, sequences=batch, tp=tp, math=math, a_bytes=2.0)
        kv_heads = 1.0 + 0.0 * tp
        kv_el = model.kv_lora_rank + model.qk_rope_head_dim + 0.0 * tp
        qk_dim, v_dim = model.kv_lora_rank + model.qk_rope_head_dim, model.kv_lora_rank  # absorbed
    else:
        kv_heads = np.maximum(model.n_kv_heads / tp, 1.0)
        kv_el = kv_heads * (model.head_dim + model.v_dim)
        qk_dim, v_dim = model.head_dim, model.v_dim
    att = attention_decode(hw=hw, batch=batch, context=ctx, n_heads=heads, head_dim=qk_dim,
                           n_kv_heads=kv_heads, v_head_dim=v_dim, kv_elements_per_token=kv_el,
                           dtype=attention_math(math), kv_bytes=kv_bytes)
    att = att if indexer is None else add(att, indexer)
    return _with_linear(att, hw, model, tokens=batch, sequences=batch, tp=tp, math=math, a_bytes=2.0)


def dsa_block(hw, model, *, phase, batch, new, prefix, tp, math, w_bytes, kv_bytes) -> dict | None:
    """A DSA layer's whole attention block (its projections, the lightning indexer and the
    top-k MLA attention) from the framework's measured module tables (primitives/dsa.py),
    or None: no surface for the phase and formats, a hybrid or 2:4-sparse weights. The
    caller then composes it: the attention projections in layer_gemms, decode_attention /
    prefill_attention. The tables time the block with its indexer: a model sharing one
    top-k across layers (GLM-5.2) is charged the indexer on every layer here, on its
    index_share of them when composed."""
    if not (model.is_dsa and model.is_mla and model.q_lora_rank) or model.n_linear_layers \
            or model.n_sliding_layers or hw.sparse_weights:
        return None
    dims = dict(hidden=model.d_model, q_rank=model.q_lora_rank, kv_rank=model.kv_lora_rank,
                rope=model.qk_rope_head_dim, nope=model.head_dim - model.qk_rope_head_dim, v_dim=model.v_dim,
                index_heads=model.index_n_heads, index_dim=model.index_head_dim, topk=model.index_topk)
    return fitted_dsa(hw=hw, phase=phase, batch=batch, new=new, prefix=prefix, heads=model.n_heads / tp, dims=dims,
                      math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)


def msa_block(hw, model, *, phase, batch, new, prefix, tp, math, w_bytes, kv_bytes, a_bytes=2.0) -> dict | None:
    """MiniMax-M3's attention block, the mean over its layers: the sparse layers' whole block
    from the framework's measured MSA module tables (primitives/msa.py), its layers that
    attend every key composed beside them (the model without its indexer: projections and
    attention); None where the framework has no surface for the phase and formats."""
    if not (model.is_dsa and not model.is_mla and model.dense_unindexed_layers) or model.n_linear_layers \
            or model.n_sliding_layers or hw.sparse_weights:
        return None
    sparse = fitted_msa(hw=hw, phase=phase, batch=batch, new=new, prefix=prefix, heads=model.n_heads / tp,
                        dims=msa_dims(model), math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)
    if sparse is None:
        return None
    dense = _without_indexer(model)
    proj = layer_gemms(hw, dense, tokens=batch * new, tp=tp, math=math, w_bytes=w_bytes, a_bytes=a_bytes, moe=False,
                       matmuls=ops.attention_matmuls(dense))
    att = decode_attention(hw, dense, batch=batch, context=prefix, tp=tp, math=math, kv_bytes=kv_bytes) \
        if phase == "decode" else prefill_attention(hw, dense, batch=batch, prompt=new, tp=tp, math=math,
                                                    a_bytes=a_bytes, kv_bytes=kv_bytes)
    s = model.selected_share
    return add(add(sparse, scale=s), add(proj, att, scale=1.0 - s))


@lru_cache(maxsize=32)
def _without_indexer(model: ModelSpec) -> ModelSpec:
    """The model with every softmax layer attending every key (no indexer): MiniMax-M3's
    dense layers, built once per spec."""
    return replace(model, index_topk=0, index_n_heads=0, index_head_dim=0, index_layers=0,
                   dense_unindexed_layers=False)


def attention_block(hw, model, *, a_bytes=2.0, **kw) -> dict | None:
    """A layer's whole attention block from the framework's measured module tables: DSA's
    (dsa_block), DeepSeek-V4's (compressed.dsv4_block) or MiniMax-M3's (msa_block); None
    where the caller composes it."""
    if model.is_compressed:
        return dsv4_block(hw, model, **kw)
    if model.is_dsa and not model.is_mla:
        return msa_block(hw, model, a_bytes=a_bytes, **kw)
    return dsa_block(hw, model, **kw)


def _gemms_beside(block, model, moe):
    """The matmuls layer_gemms costs beside an attention block: all of them (None) when the
    block is composed, the MLP's alone when a measured block holds the projections."""
    return None if block is None else ops.mlp_matmuls(model, moe=moe)


def _layer_parts(hw, model, *, tokens, att, block, tp, math, w_bytes, a_bytes, moe, ep, imbalance, routed) -> list:
    """The classed parts of one layer over `tokens` tokens beside its attention `att` (the
    measured `block`, or None where composed): matmuls, attention, elementwise and the TP
    all-reduce. One attention replica: expert parallelism moves no tokens beyond the
    all-reduce (expert_all_to_all)."""
    return [_classed(layer_gemms(hw, model, tokens=tokens, tp=tp, math=math, w_bytes=w_bytes, a_bytes=a_bytes,
                                 moe=moe, ep=ep, imbalance=imbalance, matmuls=_gemms_beside(block, model, moe),
                                 routed=routed), "matmul"),
            _classed(att, "attention"),
            _classed(layer_elementwise(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe), "elementwise"),
            tp_allreduce(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe)]


def layer_prefill(hw, model, *, batch, prompt, tp, math, w_bytes, a_bytes, kv_bytes, moe, ep=1.0,
                  imbalance=1.0, routed=None) -> dict:
    """One layer's prefill of `batch` prompts of `prompt` tokens (`routed`: the routed
    experts' format where it differs, ops.part_formats)."""
    T = batch * prompt
    block = attention_block(hw, model, phase="prefill", batch=batch, new=prompt, prefix=0.0, tp=tp, math=math,
                            w_bytes=w_bytes, kv_bytes=kv_bytes, a_bytes=a_bytes)
    att = block if block is not None else prefill_attention(hw, model, batch=batch, prompt=prompt, tp=tp, math=math,
                                                            a_bytes=a_bytes, kv_bytes=kv_bytes)
    return add(*_layer_parts(hw, model, tokens=T, att=att, block=block, tp=tp, math=math, w_bytes=w_bytes,
                             a_bytes=a_bytes, moe=moe, ep=ep, imbalance=imbalance, routed=routed))


def layer_decode(hw, model, *, batch, context, tp, math, w_bytes, a_bytes, kv_bytes, moe, ep=1.0,
                 imbalance=1.0, routed=None, queries=1.0) -> dict:
    """One decode step of one layer: `batch` new tokens, each attending to `context`
    (`routed`: the routed experts' format where it differs, ops.part_formats; `queries`
    positions per sequence in its attention, decode_attention)."""
    block = attention_block(hw, model, phase="decode", batch=batch, new=1.0, prefix=context, tp=tp, math=math,
                            w_bytes=w_bytes, kv_bytes=kv_bytes, a_bytes=a_bytes)
    att = block if block is not None else decode_attention(hw, model, batch=batch, context=context, tp=tp, math=math,
                                                           kv_bytes=kv_bytes, queries=queries)
    parts = _layer_parts(hw, model, tokens=batch, att=att, block=block, tp=tp, math=math, w_bytes=w_bytes,
                         a_bytes=a_bytes, moe=moe, ep=ep, imbalance=imbalance, routed=routed)
    # decode_attention's arrays are new, the layer's own: its sums are written into them
    return add(*parts, own=1 if block is None else None)


def layer_iteration(hw, model, *, decode_batch, context, prefill_tokens, prompt, tp, math, w_bytes, a_bytes,
                    kv_bytes, moe, attention_dp=1.0, ep=1.0, imbalance=1.0, verify=1.0, routed=None) -> dict:
    """One layer of a continuous-batching iteration on one device of an attention replica:
    `decode_batch` sequences decode `verify` tokens each at `context` (one; 1 + the drafted
    tokens when speculative decoding verifies them), and `prefill_tokens` prompt tokens of
    `prompt`-token requests are prefilled (a chunk's attention is that share of a whole
    prompt's: the chunks of a prompt attend to its earlier ones). The attention
    projections, attention and dense MLP run TP-way in each of `attention_dp` replicas; an
    MoE layer gathers every replica's tokens and runs over all tp·attention_dp devices,
    experts split `ep`-way (MoE TP = tp·attention_dp / ep). A verify step's matmuls,
    norms and collectives see every position; its decode attention reads each sequence's
    cache once (decode_attention: MLA computes every position's heads over it, other
    kernels' few extra queries ride on the same KV read). `routed`: the routed experts' format
    where it differs from the rest's (ops.part_formats)."""
    decode_tokens = decode_batch * verify
    tokens = decode_tokens + prefill_tokens
    g = dict(math=math, w_bytes=w_bytes, a_bytes=a_bytes)
    blocks = dict(tp=tp, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes, a_bytes=a_bytes)
    dec_block = attention_block(hw, model, phase="decode", batch=decode_batch, new=1.0, prefix=context, **blocks)
    pre_block = attention_block(hw, model, phase="prefill", batch=prefill_tokens / prompt, new=prompt, prefix=0.0, **blocks)
    # the attention projections of the tokens whose block is composed (a measured block holds its own,
    # one token per decoding sequence: a verify step's drafted tokens are projected here)
    projected = (decode_tokens if dec_block is None else decode_tokens - decode_batch) + \
        (prefill_tokens if pre_block is None else 0.0)
    measured = dec_block is not None and pre_block is not None and not np.any(np.asarray(verify) > 1.0)
    attn_mm = {} if measured else _classed(layer_gemms(
        hw, model, tokens=projected, tp=tp, moe=moe, matmuls=ops.attention_matmuls(model), **g), "matmul")
    if dec_block is not None or pre_block is not None:
        attn_mm = {k: where(projected > 0, v, 0.0) for k, v in attn_mm.items()}
    replicas = attention_dp if moe else 1.0  # an MoE layer runs every replica's tokens over all their GPUs
    mlp = layer_gemms(hw, model, tokens=tokens * replicas, tp=tp * replicas, moe=moe, ep=ep, imbalance=imbalance,
                      matmuls=ops.mlp_matmuls(model, moe=moe), routed=routed, **g)
    dec = dec_block if dec_block is not None else decode_attention(
        hw, model, batch=decode_batch, context=context, tp=tp, math=math, kv_bytes=kv_bytes, queries=verify)
    pre = pre_block if pre_block is not None else prefill_attention(
        hw, model, batch=prefill_tokens / prompt, prompt=prompt, tp=tp, math=math, a_bytes=a_bytes,
        kv_bytes=kv_bytes)
    # no chunk (or no decoding sequence) in the iteration: no such kernel, not its fixed latency
    pre = {k: where(prefill_tokens > 0, v, 0.0) for k, v in pre.items() if k in PARTS}
    dec = {k: where(decode_batch > 0, v, 0.0) for k, v in dec.items() if k in PARTS}
    parts = [attn_mm, _classed(mlp, "matmul"), _classed(dec, "attention"), _classed(pre, "attention"),
             _classed(layer_elementwise(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe), "elementwise"),
             tp_allreduce(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe)]
    if moe:  # dispatch and combine of this device's tokens over the ep expert ranks (none at ep = 1)
        parts.append(expert_all_to_all(hw, model, tokens=tokens, ep=ep, a_bytes=a_bytes, tp=tp,
                                       attention_dp=attention_dp))
        parts.append(replica_gather(hw, model, tokens=tokens, tp=tp, attention_dp=attention_dp, ep=ep,
                                    a_bytes=a_bytes))
    return add(*parts)
