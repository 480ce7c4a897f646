"""DeepSeek-V4's compressed attention on one GPU (its technical report, section 2.3;
transformers' modeling_deepseek_v4.py), averaged over the model's layers as the other
attention costs in workloads/layers are: every layer's queries attend its last
sliding_window tokens; a CSA layer also attends the index_topk compressed entries (one per
csa_ratio tokens) its lightning indexer picks after scoring all of them, an HCA layer every
compressed entry (one per hca_ratio tokens). One cached vector is key and value (shared-KV
MQA over head_dim = 512), so the core attention is a sparse-MLA-style kernel; its heads split
by TP, the cache and the indexer replicated on every rank (as MLA's latent is). The
compressors' pooling (a softmax over each window's 2 x ratio gated rows) reads a few head_dim
rows per token, next to the q_b projection's H x head_dim: not counted."""
from __future__ import annotations

import numpy as np

from ..primitives.attention import attention_decode, gathered_attention, mla_decode, sparse_indexer
from ..primitives.dsv4 import dsv4_dims, fitted_dsv4, fitted_mhc
from ..primitives.kernel_fits import causal_topk_pairs
from .parts import add, attention_math


def _indexer(hw, model, *, queries, pairs, cached_keys, kv_bytes) -> dict:
    """The CSA layers' lightning indexer over their compressed index keys, on their share of
    the layers."""
    return add(sparse_indexer(hw=hw, queries=queries, pairs=pairs, cached_keys=cached_keys,
                              n_heads=model.index_n_heads, head_dim=model.index_head_dim, key_bytes=kv_bytes),
               scale=model.n_csa_layers / model.n_layers)


def prefill_pairs(model, prompt):
    """(query, key) pairs of one prompt of `prompt` tokens in one layer, the mean over the
    layers: query i's min(i, window) keys (the kernel gathers each query's own keys, so no
    tile of the band is wasted: causal_topk_pairs) plus, in a CSA layer, its
    min(i / ratio, top-k) entries (sum_i min(i/r, k) = causal_topk_pairs(T, r k) / r), in an
    HCA layer its i / ratio entries (T (T + 1) / 2 / r)."""
    T = np.asarray(prompt, float)
    pairs = causal_topk_pairs(T, model.sliding_window) * model.n_sliding_layers
    if model.n_csa_layers:
        r = model.csa_ratio
        pairs = pairs + model.n_csa_layers * causal_topk_pairs(T, r * model.index_topk) / r
    if model.n_hca_layers:
        pairs = pairs + model.n_hca_layers * T * (T + 1.0) / 2.0 / model.hca_ratio
    return pairs / model.n_layers


def compressed_prefill(hw, model, *, batch, prompt, tp, math, a_bytes, kv_bytes) -> dict:
    """`batch` prompts of `prompt` tokens: the core attention over each query's gathered keys
    (gathered_attention: every key read once per sequence, window and compressed entries) and
    the CSA indexer's causal scoring (query i against its i / ratio index keys)."""
    T, dt = np.asarray(prompt, float), attention_math(math)
    held = model.keys_held(T) / model.n_layers  # keys cached per layer, the mean
    att = gathered_attention(hw=hw, queries=batch * T, pairs=batch * prefill_pairs(model, T), keys_read=batch * held,
                             n_heads=model.n_heads / tp, head_dim=model.head_dim, key_bytes=kv_bytes,
                             act_bytes=a_bytes, dtype=dt)
    if not model.n_csa_layers:
        return att
    r = model.csa_ratio
    return add(att, _indexer(hw, model, queries=batch * T, pairs=batch * T * (T + 1.0) / 2.0 / r,
                             cached_keys=batch * T / r, kv_bytes=kv_bytes))


def compressed_decode(hw, model, *, batch, context, tp, math, kv_bytes) -> dict:
    """One query per sequence over its window and selected compressed entries (the mean over
    the layers): the framework's measured MLA decode kernel at this shape (a 512-wide latent
    that is key and value, no rope part) where it has one, else the decode roofline; the CSA
    indexer scoring every compressed index key."""
    keys = model.attention_context(context) / model.n_layers
    dt = attention_math(math)
    att = mla_decode(hw=hw, batch=batch, context=keys, n_heads=model.n_heads / tp, latent=model.head_dim, rope=0.0,
                     dtype=dt, kv_bytes=kv_bytes)
    if att is None:
        att = attention_decode(hw=hw, batch=batch, context=keys, n_heads=model.n_heads / tp, head_dim=model.head_dim,
                               n_kv_heads=1.0, v_head_dim=model.head_dim,
                               kv_elements_per_token=float(model.kv_elements(sliding=True)),
                               dtype=dt, kv_bytes=kv_bytes)
    if not model.n_csa_layers:
        return att
    entries = np.asarray(context, float) / model.csa_ratio
    return add(att, _indexer(hw, model, queries=batch, pairs=batch * entries, cached_keys=batch * entries,
                             kv_bytes=kv_bytes))


def dsv4_block(hw, model, *, phase, batch, new, prefix, tp, math, w_bytes, kv_bytes) -> dict | None:
    """A DeepSeek-V4 layer's whole attention block (projections, compressor, indexer, window
    and compressed attention, grouped output), the mean over the layers, from the framework's
    measured module tables (primitives/dsv4.py), or None where a kind of layer has no
    surface (the caller composes: ops.compressed_attention_matmuls, compressed_prefill /
    compressed_decode). A window-only layer has no table: it is timed as an HCA layer, as
    aiconfigurator-core's deepseek_v4.py does (its compressed entries, one per 128 tokens,
    are what it lacks)."""
    if not model.is_compressed or hw.sparse_weights:
        return None
    L, dims = model.n_layers, dsv4_dims(model)
    hca = model.n_layers - model.n_csa_layers  # HCA layers and the window-only ones
    parts = []
    for n, ratio in ((model.n_csa_layers, model.csa_ratio), (hca, model.hca_ratio)):
        if not n:
            continue
        r = fitted_dsv4(hw=hw, phase=phase, ratio=ratio, batch=batch, new=new, prefix=prefix, heads=model.n_heads / tp,
                        dims=dims, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)
        if r is None:
            return None
        parts.append(add(r, scale=n / L))
    return add(*parts)


def hyper_connections(hw, model, *, tokens) -> dict | None:
    """One layer's mHC (pre and post at both sites) from the framework's measured tables, or
    None (no hyper-connections, or no surface: layers.layer_elementwise composes them)."""
    if not model.hc_mult:
        return None
    return fitted_mhc(hw=hw, tokens=tokens, hidden=model.d_model, hc_mult=model.hc_mult)
