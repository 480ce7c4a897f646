"""The analytical work of DeepSeek-V4's attention block and of its manifold-constrained
hyper-connections (mHC), as the serving frameworks' measured module tables time them
(aiconfigurator-core's dsv4_{csa,hca}_{generation,context}_module_perf and
mhc_module_perf): FLOPs and bytes per part and the coordinates of their fitted surfaces
(kernel_fits.ROOFLINES["dsv4_module"], ["mhc"]; fitted by calibrate/kernel_fit.py, read by
primitives/dsv4.py).

Self-contained (numpy only) so that kernel_fits can register these rooflines without an
import cycle.
"""
from __future__ import annotations

import numpy as np

from ._array import where

# DeepSeek-V4 config.json compress_ratios (huggingface.co/deepseek-ai/DeepSeek-V4-Flash, as
# shipped in aiconfigurator-core 0.12.0 model_configs/): 4 for the Compressed Sparse Attention
# layers (two overlapping compressor series and the lightning indexer, transformers'
# modeling_deepseek_v4.py), 128 for the Heavily Compressed ones (one series, no indexer).
DSV4_CSA_RATIO = 4.0
DSV4_HCA_RATIO = 128.0
# DeepSeek-V4's indexer keys: FP4, index_head_dim x 0.5 bytes per compressed entry
# (aiconfigurator-core 0.12.0 sdk/common.py, deepseek_v4_indexer_cache_entry_bytes).
DSV4_INDEX_KEY_BYTES = 0.5
# DeepSeek-V4 config.json qk_rope_head_dim: the rotary part of each 512-wide head (inside
# head_dim: it costs nothing extra here; kept for callers that split the head).
DSV4_ROPE_DIM = 64.0
_UNCAPPED = 1e30  # a cap no sequence reaches (HCA attends every compressed entry)


def _bound(flops, nbytes, peak, bandwidth):
    return np.maximum(flops / peak, nbytes / bandwidth)


def _capped_sum(n, k):
    """sum over p = 1..n of min(p, k) (n, k >= 0; k may be _UNCAPPED)."""
    m = np.minimum(n, k)
    return m * (m + 1.0) / 2.0 + (n - m) * k


def dsv4_module_work(*, batch, new, prefix, heads, hidden, n_heads, q_rank, head_dim, o_groups, o_rank, index_heads,
                     index_dim, topk, window, ratio, w_bytes, kv_bytes, act_bytes=2.0, **_):
    """[(FLOPs, bytes)] of the three parts of a DeepSeek-V4 layer's attention block on one
    GPU, and its coordinates: `batch` sequences each adding `new` tokens (decode: 1) after
    `prefix` cached ones, `heads` of the model's `n_heads` query heads on the GPU, a layer
    of compress `ratio` (DSV4_CSA_RATIO: CSA, with the indexer; DSV4_HCA_RATIO: HCA).

    - projections (weights read once, at w_bytes; 2 FLOPs per weight and token): replicated
      the query latent (hidden x q_rank), the one shared key-value vector (hidden x
      head_dim), the compressor (kv and gate of two overlapping series in CSA: hidden x
      4 head_dim; of one in HCA: hidden x 2 head_dim) and in CSA the indexer's query
      (q_rank x index_heads x index_dim), compressor (hidden x 4 index_dim) and head weights
      (hidden x index_heads); per head the query up-projection (q_rank x head_dim) and its
      share of the grouped output (head_dim x o_rank), per output group on the GPU (whole
      groups of n_heads / o_groups heads, at least one) o_rank x hidden; the hidden state
      in and out per token;
    - the indexer (CSA): each query scores the compressed index keys visible to it (one per
      `ratio` tokens: new x prefix / ratio + new (new + 1) / (2 ratio) pairs, prefill from
      empty T^2 / 8 at ratio 4) with index_heads x index_dim products; each sequence's index
      keys read once (FP4), its queries in;
    - core attention (shared-KV MQA: key = value, 2 x 2 head_dim FLOPs per head and key):
      each query over the last `window` tokens and its compressed entries, the top-k of
      them in CSA, all (keys / ratio) in HCA; each sequence's window and the entries its
      queries select read once, the new tokens' cache entries written, the queries and
      outputs at act_bytes.
    Coordinates as dsa_module's: sequences, new tokens each, keys visible to the last token
    (prefix + new), heads on the GPU."""
    tokens = batch * new
    keys = prefix + new
    csa = ratio == DSV4_CSA_RATIO
    series = where(csa, 2.0, 1.0)
    groups = np.maximum(heads * o_groups / n_heads, 1.0)
    index_w = q_rank * index_heads * index_dim + hidden * (4.0 * index_dim + index_heads)
    replicated = hidden * (q_rank + head_dim + 2.0 * series * head_dim) + where(csa, index_w, 0.0)
    weights = replicated + heads * head_dim * (q_rank + o_rank) + groups * o_rank * hidden
    proj = (2.0 * tokens * weights, weights * w_bytes + tokens * 2.0 * hidden * act_bytes)
    scored = batch * (new * prefix + new * (new + 1.0) / 2.0) / ratio
    indexer = (where(csa, 2.0 * index_heads * index_dim * scored, 0.0),
               where(csa, batch * keys / ratio * index_dim * DSV4_INDEX_KEY_BYTES
                     + tokens * index_heads * index_dim * act_bytes, 0.0))
    cap = where(csa, topk * ratio, _UNCAPPED)  # entries per query: min(visible / ratio, topk)
    pairs = batch * (_capped_sum(keys, window) - _capped_sum(prefix, window)
                     + (_capped_sum(keys, cap) - _capped_sum(prefix, cap)) / ratio)
    entries = where(csa, np.minimum(keys / ratio, new * topk), keys / ratio)
    cache = batch * (np.minimum(keys, new + window) + entries) + tokens * (1.0 + 1.0 / ratio)
    attention = (4.0 * heads * head_dim * pairs,
                 cache * head_dim * kv_bytes + tokens * heads * 2.0 * head_dim * act_bytes)
    coords = {"sequences": batch, "new": new, "keys": keys, "heads": heads}
    return [proj, indexer, attention], {k: v + 0.0 * tokens for k, v in coords.items()}


def dsv4_module_roofline(*, peak, index_peak, attention_peak, bandwidth, **shape):
    """The block's parts run one after another: the sum of their rooflines, the projections
    at the GEMM format's peak, the indexer's scores at `index_peak`, the attention at
    `attention_peak` (kernel_fits.dsa_peaks gives the three)."""
    parts, coords = dsv4_module_work(**shape)
    return sum(_bound(f, b, p, bandwidth) for (f, b), p in zip(parts, (peak, index_peak, attention_peak))), coords


MHC_SITES = 2.0  # hyper-connection sites per layer: before the attention and before the MoE (the tables' num_sites)
MHC_SINKHORN_ITERS = 20.0  # DeepSeek-V4 config.json hc_sinkhorn_iters


def mhc_work(*, tokens, hidden, hc_mult, op, sites=MHC_SITES, sinkhorn_iters=MHC_SINKHORN_ITERS, act_bytes=2.0,
             **_):
    """(FLOPs, bytes, coordinates) of one layer's hyper-connection `op` ('pre' or 'post')
    at its `sites` on one GPU, `tokens` tokens, hc_mult streams of `hidden` (n = hc_mult):

    - pre: the RMSNorm of the n x hidden flattened streams and their projection to the
      (2 + n) n pre, post and mixing weights (2 n hidden (2 + n) n FLOPs), the sigmoid and
      the Sinkhorn normalization of the n x n mixing matrix (4 n^2 FLOPs per iteration:
      a row and a column pass), the collapse to the block's input (2 n hidden); reads the
      streams, writes the input;
    - post: the block's output expanded into the streams and the streams mixed (2 n
      hidden (n + 1) FLOPs); reads the streams and the output, writes the streams.
    Activations and the projection's weights (read once per site) at act_bytes.
    Coordinates: tokens (a size), hidden (a class)."""
    n = hc_mult
    if op == "pre":
        per_token = 2.0 * n * hidden * (2.0 + n) * n + 4.0 * n * n * sinkhorn_iters + 2.0 * n * hidden
        moved = tokens * (n + 1.0) * hidden * act_bytes + n * hidden * (2.0 + n) * n * act_bytes
    elif op == "post":
        per_token = 2.0 * n * hidden * (n + 1.0)
        moved = tokens * (2.0 * n + 1.0) * hidden * act_bytes
    else:
        raise ValueError(f"op={op!r} is not an mHC op; allowed: pre, post")
    coords = {"tokens": tokens + 0.0 * hidden, "hidden": hidden + 0.0 * tokens}
    return sites * tokens * per_token, sites * moved, coords


def mhc_roofline(*, peak, bandwidth, **shape):
    """The roofline of mhc_work's FLOPs (at `peak`) and bytes, and its coordinates."""
    flops, nbytes, coords = mhc_work(**shape)
    return _bound(flops, nbytes, peak, bandwidth), coords
