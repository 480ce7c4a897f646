"""The analytical work of MiniMax-M3's attention block, MiniMax Sparse Attention (MSA), as
the serving frameworks' measured module tables time it (aiconfigurator-core's
msa_{generation,context}_module_perf): FLOPs and bytes per part and the coordinates of its
fitted surface (kernel_fits.ROOFLINES["msa_module"]; fitted by calibrate/kernel_fit.py,
read by primitives/msa.py).

MSA (MiniMax-M3 config.json sparse_attention_config; aiconfigurator-core 0.12.0
sdk/operations/msa.py: "structurally a GQA version of DSA") is GQA attention (64 query heads,
4 KV heads of 128) behind an indexer: index_heads x index_dim queries and one index_dim-wide
key per token, projected from the hidden state, score every cached key; a block of
MSA_BLOCK_TOKENS keys scores as its best key (sparse_score_type "max"), and each query
attends the keys of its top sparse_topk_blocks = 16 blocks plus its local block
(sparse_local_block 1): index_topk = 17 x 128 = 2176 keys.

Self-contained (numpy only) so that kernel_fits can register this roofline without an
import cycle.
"""
from __future__ import annotations

import numpy as np

# MiniMax-M3 config.json sparse_attention_config.sparse_block_size: keys per scored block.
MSA_BLOCK_TOKENS = 128.0
# Bytes of a block score the top-k reads (the indexer's scores in FP32, as DSA's lightning
# indexer keeps its logits: DeepSeek-V3.2-Exp inference/kernel.py fp8_index, FP32 output).
MSA_SCORE_BYTES = 4.0


def _bound(flops, nbytes, peak, bandwidth):
    return np.maximum(flops / peak, nbytes / bandwidth)


def _capped_sum(n, k):
    """sum over p = 1..n of min(p, k) (n, k >= 0): the keys the first n queries of a
    sequence attend to when each keeps at most k."""
    m = np.minimum(n, k)
    return m * (m + 1.0) / 2.0 + (n - m) * k


def msa_kv_heads(heads, n_heads, n_kv_heads):
    """KV heads on a GPU holding `heads` of the model's n_heads query heads: its share of
    the n_kv_heads, at least one (a KV head is replicated where the GPUs outnumber them;
    the tables' 128-head rows carry 8, TensorRT-LLM's collection notes: "num_index_heads (4)
    must be divisible by num_kv_heads (8)")."""
    return np.maximum(heads * n_kv_heads / n_heads, 1.0)


def msa_module_work(*, batch, new, prefix, heads, kv_heads, hidden, head_dim, index_heads, index_dim, topk, w_bytes,
                    kv_bytes, act_bytes=2.0, block=MSA_BLOCK_TOKENS, **_):
    """[(FLOPs, bytes)] of the three parts of an MSA layer's attention block on one GPU, and
    its coordinates: `batch` sequences each adding `new` tokens (decode: 1) after `prefix`
    cached ones, `heads` query heads and `kv_heads` KV heads (of head_dim) on the GPU.

    - projections (weights read once, at w_bytes; 2 FLOPs per weight and token): per query
      head its query and output slices (2 hidden x head_dim), per KV head its key and value
      (2 hidden x head_dim), replicated the indexer's queries (hidden x index_heads x
      index_dim), key (hidden x index_dim) and head weights (hidden x index_heads: the
      catalog's count, specs/model.py indexer_params_per_layer); the hidden state in and
      out per token;
    - the indexer: every (query, visible key) pair scored by index_heads x index_dim
      products (decode: the query against all prefix + 1 keys; prefill: new x prefix +
      new (new + 1) / 2 pairs per sequence), each score folded into its block's maximum (one
      comparison), the block scores (FP32) written and read by the block top-k; each
      sequence's index keys read once at the cache's kv_bytes, the index queries in;
    - GQA attention (2 x 2 head_dim FLOPs per query head and key: scores and values) over
      min(visible keys, topk) keys per query; each KV head's selected keys read once per
      sequence (decode: min(keys, topk); prefill: at most the keys its queries select),
      the new tokens' keys, values and index keys written, the queries and outputs at
      act_bytes.
    Coordinates as dsa_module's: sequences, new tokens each, keys visible to the last token
    (prefix + new), heads on the GPU."""
    tokens = batch * new
    keys = prefix + new
    replicated = hidden * (index_heads * index_dim + index_dim + index_heads)
    weights = replicated + 2.0 * hidden * head_dim * (heads + kv_heads)
    proj = (2.0 * tokens * weights, weights * w_bytes + tokens * 2.0 * hidden * act_bytes)
    scored = batch * (new * prefix + new * (new + 1.0) / 2.0)
    block_scores = index_heads * scored / block
    indexer = ((2.0 * index_dim + 1.0) * index_heads * scored,
               batch * keys * index_dim * kv_bytes + tokens * index_heads * index_dim * act_bytes
               + 2.0 * MSA_SCORE_BYTES * block_scores)
    attended = batch * (_capped_sum(keys, topk) - _capped_sum(prefix, topk))
    read = batch * kv_heads * np.minimum(keys, new * topk) * 2.0 * head_dim * kv_bytes
    written = tokens * (2.0 * kv_heads * head_dim + index_dim) * kv_bytes
    attention = (4.0 * heads * head_dim * attended, read + written + tokens * heads * 2.0 * head_dim * act_bytes)
    coords = {"sequences": batch, "new": new, "keys": keys, "heads": heads}
    return [proj, indexer, attention], {k: v + 0.0 * tokens for k, v in coords.items()}


def msa_peaks(hw, units: str) -> dict:
    """The peaks an MSA block's parts run at on `hw` (a spec or its numbers): the
    projections at the GEMM format's math units, the indexer's scores and the attention in
    16-bit (the tables' kernels: Triton sparse kernels on Hopper, Ada and in SGLang, whose
    collection notes time its prefill kernel against the B200's bf16 peak; fmha_sm100 on
    Blackwell in TensorRT-LLM and vLLM)."""
    return dict(peak=hw.peak(units), index_peak=hw.peak("bf16"), attention_peak=hw.peak("bf16"))


def msa_module_roofline(*, peak, index_peak, attention_peak, bandwidth, **shape):
    """The block's parts run one after another: the sum of their rooflines, the projections
    at the GEMM format's peak, the indexer at `index_peak`, the attention at
    `attention_peak` (msa_peaks gives the three)."""
    parts, coords = msa_module_work(**shape)
    return sum(_bound(f, b, p, bandwidth) for (f, b), p in zip(parts, (peak, index_peak, attention_peak))), coords
