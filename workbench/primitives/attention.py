"""Attention costs: flash-style prefill (scores never written to memory) and decode
(one new query per sequence reading the whole KV cache).

FLOPs follow the FlashAttention papers: 4·B·S²·H·h for a full forward (two matmuls,
QK^T and PV, each 2·B·S²·H·h), halved when causal. With a value head size h_v that
differs from h (MLA), the two matmuls are 2·B·S²·H·h and 2·B·S²·H·h_v.
"""
from __future__ import annotations

from ..errors import check_choice
from ..units import DTYPE_BYTES, DTYPES
from .hardware_numbers import GpuNumbers
from .gemm import memory_time
from ._array import blockwise, where, zero_of
from .kernel_fits import (attended_pairs, attribute, context_attention_roofline, decode_attention_coords,
                          decode_attention_roofline, gdn_work, mla_decode_roofline, served_time)
from .xqa_dispatch import FALLBACK, runs_xqa
import numpy as np


# Attention kernels. Flash generations relative to FlashAttention-2, whose efficiency the
# hardware specs carry (attention_peak_eff). FlashAttention-1 and its Triton port (MosaicML
# llm-foundry's attn_impl='triton' in 2023): 25-40% of A100 peak against FlashAttention-2's
# 50-73% (Dao 2023, FlashAttention-2 paper, abstract and section 1): 40/73 at the top end,
# where attention_peak_eff is defined. Other GPUs are assumed to keep the A100 ratio.
# "materialized": the pre-flash kernels of Megatron-LM (2021): batched GEMMs for QK^T and
# PV over every query-key pair (no causal skipping) with the scores in HBM between them.
FLASH_RELATIVE_EFF = {"flash2": 1.0, "flash1": 40.0 / 73.0}
# FlashAttention-3 (Shah et al. 2024, abstract): up to 740 TFLOP/s BF16 forward on H100
# (75% of the 989 TFLOP/s peak), close to 1.2 PFLOP/s FP8 (61% of 1979): fractions of peak
# at long sequences, ramping with size like a GEMM; written for Hopper's warpgroup MMA and
# TMA, the fractions are assumed to carry to any chip that runs it.
FLASH3_PEAK_EFF = {"bf16": 740.0 / 989.4, "fp16": 740.0 / 989.4, "fp8": 1200.0 / 1978.9}
# "framework": the serving framework's own kernel, from its measured tables (hw.kernels:
# TensorRT-LLM's FMHA / XQA, vLLM's and SGLang's FlashInfer / FlashAttention builds).
ATTENTION_KERNELS = (*FLASH_RELATIVE_EFF, "flash3", "framework", "materialized")
FLASH_BACKWARD = 2.5  # FlashAttention-2 backward: five matmuls against the forward's two
# Bytes per score element (16-bit scores, 1-byte dropout mask), Megatron-LM's kernels:
# forward QK^T writes 2, fused scale-mask-softmax reads 2 and writes 2, dropout reads 2 and
# writes 2 plus the mask 1, PV reads 2 (13); backward dP written 2, dV's GEMM reads P 2,
# dropout backward reads 2 + mask 1 and writes 2, softmax backward reads 4 and writes 2,
# dQ and dK GEMMs read dS 2 each (19).
SCORE_BYTES = {"forward": 13.0, "backward": 19.0}


def _matmul_eff(hw: GpuNumbers, flops, dtype: str, kernel: str = "flash2"):
    """Flash attention runs at its kernel's own best efficiency (attention_peak_eff, from the
    FlashAttention papers: softmax, masking and the online rescaling keep it below a GEMM),
    ramping with size like a GEMM of the same work."""
    if kernel == "flash3":
        return FLASH3_PEAK_EFF.get(dtype, FLASH3_PEAK_EFF["bf16"]) * hw.gemm_eff(flops)
    return hw.attention_peak_eff_for(dtype) * FLASH_RELATIVE_EFF[kernel] * hw.gemm_eff(flops)


def _kv_name(kv_bytes) -> str:
    return "fp8" if np.all(np.asarray(kv_bytes) <= 1.0) else "bf16"


def surface_name(dtype: str, kv_bytes) -> str:
    """The variant of a framework's attention surfaces for math `dtype` and a cache of
    `kv_bytes` per element ('math/kv': 'bf16/fp8')."""
    return f"{'fp8' if dtype == 'fp8' else 'bf16'}/{_kv_name(kv_bytes)}"


def _fitted(hw: GpuNumbers, kernel_class: str, dtype: str, kv_bytes, window=0.0, source: str = ""):
    """The framework's fitted surface for this attention, (None, 0) without one; a sliding
    window's own surface (the tables' rows with a window shorter than the keys) where the
    framework has one and the window is set; with `source` (xqa_dispatch.FALLBACK), that
    surface's fallback kernel's."""
    name = surface_name(dtype, kv_bytes)
    if np.any(np.asarray(window) > 0) and hw.fitted(kernel_class, name + "+window")[0] is not None:
        name += "+window"
    return hw.fitted(kernel_class, name + source)


def _window_keys(keys, window):
    """Keys a query reads: all of them, or at most `window` (0: no window)."""
    w = np.asarray(window, float)
    if not np.any(w > 0):
        return keys
    return where(w > 0, np.minimum(keys, np.where(w > 0, w, np.inf)), keys)


def resolve_kernel(hw: GpuNumbers, kernel):
    """kernel=None: the framework's kernel where the numbers carry its tables, else flash2."""
    if kernel is None:
        return "framework" if hw.kernels is not None else "flash2"
    return kernel


def attention_prefill(*, hw: GpuNumbers, dtype: str = "bf16", act_bytes=2.0, kv_bytes=None, kernel: str | None = None,
                      window=0.0, **shape) -> dict:
    """_attention_prefill; with a sliding window on the framework's windowed surface (fitted on
    the tables' windowed rows, windows of 128 and 8192 without a window axis): that surface
    where the window binds (shorter than the keys), never slower than the attention without
    the window, and the full-attention surface where it does not bind (it ran Mistral's 4k
    window at 4-5x full attention's time where the window cut nothing)."""
    kv = act_bytes if kv_bytes is None else kv_bytes
    kw = dict(hw=hw, dtype=dtype, act_bytes=act_bytes, kv_bytes=kv_bytes, kernel=kernel, **shape)
    if resolve_kernel(hw, kernel) == "framework" and np.any(np.asarray(window) > 0) \
            and _fitted(hw, "attention", dtype, kv, window)[0] is not _fitted(hw, "attention", dtype, kv)[0]:
        full = _attention_prefill(window=0.0, **kw)
        binds = (np.asarray(window) > 0) & (shape["seq_len"] + shape.get("context", 0.0) > window)
        return _where_binds(binds, _attention_prefill(window=where(binds, window, 0.0), **kw) if np.any(binds) else None,
                            full)
    return _attention_prefill(window=window, **kw)


def _attention_prefill(*, hw: GpuNumbers, batch, seq_len, n_heads, head_dim, n_kv_heads=None,
                       v_head_dim=None, causal=True, dtype: str = "bf16", act_bytes=2.0,
                       kv_bytes=None, context=0.0, kernel: str | None = None, window=0.0) -> dict:
    """Attention over `seq_len` new tokens per sequence that also attend to `context` cached
    tokens, by a `kernel` of ATTENTION_KERNELS (None: resolve_kernel). Memory: read Q, K, V
    (new and cached), write O; the materialized kernel also moves its scores. backward_s:
    the backward pass. "framework" is the fitted surface of the tables (its roofline:
    primitives/kernel_fits.context_attention_roofline); a framework without a table for
    this dtype falls back to flash2. A sliding `window` w > 0 caps each query's keys at w:
    the kernel executes the tiles of the band (kernel_fits.attended_pairs) and reads only
    the cached keys within w of the new ones."""
    kernel = resolve_kernel(hw, kernel)
    check_choice("kernel", kernel, ATTENTION_KERNELS)
    check_choice("dtype", dtype, DTYPES)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    v_head_dim = head_dim if v_head_dim is None else v_head_dim
    kv_bytes = act_bytes if kv_bytes is None else kv_bytes
    pairs = seq_len * seq_len * (0.5 if causal else 1.0) + seq_len * context
    keys = seq_len + context
    if np.any(np.asarray(window) > 0):  # the band's executed tiles; cached keys beyond w unread
        pairs = np.minimum(pairs, attended_pairs(seq_len, context, window, causal))
        keys = _window_keys(keys, where(np.asarray(window) > 0, window + seq_len, 0.0))
    flops = 2.0 * batch * n_heads * (head_dim + v_head_dim) * pairs
    nbytes = batch * (seq_len * n_heads * (head_dim + v_head_dim) * act_bytes
                      + keys * n_kv_heads * (head_dim + v_head_dim) * kv_bytes)
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    grid, fixed_s = _fitted(hw, "attention", dtype, kv_bytes, window) if kernel == "framework" else (None, 0.0)
    if kernel == "framework" and grid is None:
        kernel = "flash2"
    if grid is not None:
        roof, coords = context_attention_roofline(
            batch=batch, seq_len=seq_len, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
            v_head_dim=v_head_dim, peak=hw.peak(dtype), bandwidth=hw.hbm_bandwidth_bytes_per_s, act_bytes=act_bytes,
            kv_bytes=kv_bytes, n_sms=hw.n_sms, causal=causal, window=window)
        # cached context: the pairs grow, the surface's coordinates are those of the new tokens
        scale = pairs / attended_pairs(seq_len, 0.0, window, causal)
        eff = grid(**coords)
        table_s = fixed_s + roof * scale / eff
        time_s = served_time(table_s, roof * scale, hw.graph_saving_s)
        compute_s, memory_s = attribute(time_s, flops / hw.peak(dtype), nbytes / hw.hbm_bandwidth_bytes_per_s)
        return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
                "overhead_s": 0.0 * time_s, "time_s": time_s, "backward_s": FLASH_BACKWARD * time_s,
                "compute_bound": compute_s >= memory_s}
    if kernel == "materialized":
        scores = batch * n_heads * seq_len * keys  # every pair, masked ones included
        executed = 2.0 * batch * n_heads * (head_dim + v_head_dim) * seq_len * keys
        matmul_s = executed / (hw.peak(dtype) * hw.gemm_peak_eff_for(dtype) * hw.gemm_eff(executed))
        score_s = {k: memory_time(hw=hw, nbytes=scores * b) for k, b in SCORE_BYTES.items()}
        time_s, compute_s = matmul_s + score_s["forward"], matmul_s
        backward_s = 2.0 * matmul_s + score_s["backward"]
        overhead_s = 5.0 * hw.kernel_launch_s + 0.0 * flops  # QK^T, softmax, dropout, PV (+ launch of the mask)
    else:
        compute_s = flops / (hw.peak(dtype) * _matmul_eff(hw, flops, dtype, kernel))
        time_s = np.maximum(compute_s, memory_s)
        backward_s = FLASH_BACKWARD * time_s
        overhead_s = hw.kernel_launch_s + 0.0 * flops
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": overhead_s, "time_s": time_s, "backward_s": backward_s,
            "compute_bound": compute_s >= memory_s}


def linear_surface(hw: GpuNumbers, kind: str, phase: str, dtype: str):
    """(surface, fixed latency) of a linear kind's measured kernels in one phase ("prefill",
    "decode"): its own tables (Gated DeltaNet: variant 'prefill/bf16'; KDA: 'kda_prefill/bf16'),
    else the Gated DeltaNet surface of the same framework, the nearest measured kernel (the
    same chunked scan over a d_k x d_v state per head; Mamba-2's tables time only its
    convolution), else (None, 0)."""
    own = f"{phase}/{dtype}" if kind == "gdn" else f"{kind}_{phase}/{dtype}"
    grid, fixed_s = hw.fitted("gdn", own)
    return (grid, fixed_s) if grid is not None else hw.fitted("gdn", f"{phase}/{dtype}")


def linear_attention(*, hw: GpuNumbers, tokens, sequences, heads, key_dim, value_dim, qkv_width, conv_kernel,
                     state_bytes_per_element=4.0, act_bytes=2.0, kind: str = "gdn",
                     dtype: str = "bf16") -> dict:
    """A linear layer's token mixing on one GPU (`kind`: Gated DeltaNet, KDA or Mamba-2;
    `heads` value heads, `qkv_width` q, k, v columns there); FLOPs and bytes:
    kernel_fits.gdn_work. With the framework's measured kernels (the convolution plus the
    chunked rule in prefill, the recurrent update in decode: linear_surface) the time is
    the fitted surface's; else compute at the chip's flash-attention efficiency,
    memory-bound in decode, two launches (the convolution, the recurrence)."""
    shape = dict(tokens=tokens, sequences=sequences, heads=heads, key_dim=key_dim, value_dim=value_dim,
                 qkv_width=qkv_width, conv_kernel=conv_kernel, state_bytes_per_element=state_bytes_per_element,
                 act_bytes=act_bytes, kind=kind)
    flops, nbytes, coords = gdn_work(**shape)
    compute_ideal = flops / hw.peak(dtype)
    memory_ideal = nbytes / hw.hbm_bandwidth_bytes_per_s
    decode = bool(np.all(np.asarray(tokens) <= np.asarray(sequences)))
    grid, fixed_s = linear_surface(hw, kind, "decode" if decode else "prefill", dtype)
    if grid is not None:
        roof = np.maximum(compute_ideal, memory_ideal)
        time_s = served_time(fixed_s + roof / grid(**coords), roof, 2.0 * hw.graph_saving_s)
        compute_s, memory_s = attribute(time_s, compute_ideal, memory_ideal)
        return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
                "overhead_s": 0.0 * time_s, "time_s": time_s, "compute_bound": compute_ideal >= memory_ideal}
    compute_s = flops / (hw.peak(dtype) * hw.attention_peak_eff_for(dtype))
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": 2.0 * hw.kernel_launch_s + 0.0 * flops, "time_s": np.maximum(compute_s, memory_s),
            "compute_bound": compute_s >= memory_s}


def sparse_indexer(*, hw: GpuNumbers, queries, pairs, cached_keys, n_heads, head_dim, key_bytes=1.0,
                   act_bytes=2.0, dtype: str = "fp8") -> dict:
    """DeepSeek Sparse Attention's lightning indexer on one GPU: `queries` new tokens score
    their cached index keys, `pairs` (query, key) products in all (decode: a query times
    its context; causal prefill: T(T+1)/2 per prompt), with n_heads x head_dim ReLU-weighted
    dot products in FP8 (DeepSeek-V3.2 report), then pick the top-k. FLOPs 2 n_heads
    head_dim per pair; bytes: each sequence's `cached_keys` read once at `key_bytes`, and
    the queries. Compute at the chip's attention efficiency (bf16 math where the chip has
    no FP8), memory-bound in decode; one launch (the top-k selection rides on it)."""
    flops = 2.0 * pairs * n_heads * head_dim
    nbytes = cached_keys * head_dim * key_bytes + queries * n_heads * head_dim * act_bytes
    math = dtype if np.all(np.isfinite(hw.peak(dtype))) else "bf16"  # a swept peak is finite throughout
    compute_s = flops / (hw.peak(math) * hw.attention_peak_eff_for(math))
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": hw.kernel_launch_s + 0.0 * flops, "time_s": np.maximum(compute_s, memory_s),
            "compute_bound": compute_s >= memory_s}


def gathered_attention(*, hw: GpuNumbers, queries, pairs, keys_read, n_heads, head_dim, key_bytes=1.0,
                       act_bytes=2.0, dtype: str = "bf16") -> dict:
    """Attention of `queries` new tokens over keys gathered per query (DeepSeek-V4's window
    plus compressed entries: a sparse-MLA-style kernel), `pairs` (query, key) products in
    all, one shared vector per key that is key and value (head_dim wide; 2 x 2 n_heads
    head_dim FLOPs per pair). Bytes: the `keys_read` cached vectors at `key_bytes`, the
    queries and outputs. No measured table has this kernel's head_dim of 512 and gather:
    compute runs at the chip's attention peak efficiency for the dtype (the best its
    framework's context-attention tables reach), the rule for kernels without tables."""
    flops = 4.0 * pairs * n_heads * head_dim
    nbytes = keys_read * head_dim * key_bytes + 2.0 * queries * n_heads * head_dim * act_bytes
    compute_s = flops / (hw.peak(dtype) * hw.attention_peak_eff_for(dtype))
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": hw.kernel_launch_s + 0.0 * flops, "time_s": np.maximum(compute_s, memory_s),
            "compute_bound": compute_s >= memory_s}


def mla_decode(*, hw: GpuNumbers, batch, context, n_heads, latent, rope, dtype: str = "bf16", kv_bytes=2.0):
    """MLA decode attention from the framework's measured MLA kernels (absorbed weights:
    kernel_fits.mla_decode_roofline), or None where the numbers carry no such surface (the
    caller then composes it analytically). Kernel data wherever it exists: at 128 heads on a
    GPU (attention DP) the kernel is compute-bound and the tables time it 1.6-3x faster than
    the analytic flash efficiency would (GB200 TensorRT-LLM, 234 sequences at 8.7k keys: 436 us
    in BF16, 244 us over an FP8 cache, against 713 us composed)."""
    grid, fixed_s = _fitted(hw, "mla_decode", dtype, kv_bytes)
    if grid is None:
        return None
    shape = dict(batch=batch, kv_len=context, n_heads=n_heads, latent=latent, rope=rope, act_bytes=DTYPE_BYTES[dtype],
                 kv_bytes=kv_bytes)
    compute_ideal, coords = mla_decode_roofline(peak=hw.peak(dtype), bandwidth=np.inf, **shape)
    memory_ideal, _ = mla_decode_roofline(peak=np.inf, bandwidth=hw.hbm_bandwidth_bytes_per_s, **shape)
    roof = np.maximum(compute_ideal, memory_ideal)
    table_s = fixed_s + roof / grid(**coords)
    time_s = served_time(table_s, roof, hw.graph_saving_s)
    compute_s, memory_s = attribute(time_s, compute_ideal, memory_ideal)
    return {"flops": compute_ideal * hw.peak(dtype), "bytes": memory_ideal * hw.hbm_bandwidth_bytes_per_s,
            "compute_s": compute_s, "memory_s": memory_s, "overhead_s": 0.0 * time_s, "time_s": time_s,
            "compute_bound": compute_ideal >= memory_ideal}


def _fitted_decode(*, fixed_s, eff, peak, bandwidth, saving_s, batch, cache, context, n_heads, head_dim, v_head_dim,
                   n_kv_heads, kv_elements_per_token, act_bytes, kv_bytes, window) -> dict:
    """attention_decode from the efficiency `eff` of the framework's fitted surface at
    decode_attention_coords (fixed latency `fixed_s`), on a chip of `peak` FLOP/s and
    `bandwidth` B/s (its numbers passed in: blockwise slices every array it is given)."""
    flops = 2.0 * batch * n_heads * (head_dim + v_head_dim) * context
    nbytes = batch * context * kv_elements_per_token * kv_bytes
    roof, _ = decode_attention_roofline(
        batch=batch, kv_len=cache, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
        v_head_dim=v_head_dim, peak=peak, bandwidth=bandwidth, act_bytes=act_bytes, kv_bytes=kv_bytes, window=window)
    table_s = fixed_s + roof / eff
    # never below the roofline (served_time), even where the table is: a served step reads
    # every sequence's own cache cold, where TensorRT-LLM's A100 tables time batches 16-256
    # over 4k-64k keys at up to 1.7x A100's HBM bandwidth (0.34 ms for 64 x 4,096 keys x 8 KV
    # heads in BF16, 1.07 GB: 3.2 TB/s against 2.0; vLLM's and SGLang's take 0.68 and 0.87 ms),
    # keys its collector seems to serve from the 40 MB L2 (one sequence's 16.8 MB cache, not 64)
    time_s = served_time(table_s, roof, saving_s)
    compute_s, memory_s = attribute(time_s, flops / peak, nbytes / bandwidth)
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s, "time_s": time_s,
            "compute_bound": compute_s >= memory_s}


def attention_decode(*, hw: GpuNumbers, batch, context, n_heads, head_dim, n_kv_heads,
                     v_head_dim=None, kv_elements_per_token=None, dtype: str = "bf16",
                     kv_bytes=2.0, window=0.0) -> dict:
    """One decode step: each of `batch` sequences has one query attending to `context`
    cached tokens (at most `window` of them where a sliding window w > 0 is set: the
    framework's windowed surface takes the whole cache as its coordinate). The KV read
    dominates; `kv_elements_per_token` overrides the K·(h + h_v) elements per token (MLA
    caches a latent instead)."""
    cache = context
    v_head_dim = head_dim if v_head_dim is None else v_head_dim
    if kv_elements_per_token is None:
        kv_elements_per_token = n_kv_heads * (head_dim + v_head_dim)
    # a latent cache (MLA) runs its own kernels, which the tables read here do not cover
    latent = bool(np.any(np.asarray(kv_elements_per_token) != np.asarray(n_kv_heads * (head_dim + v_head_dim))))

    def run(w, keys=cache):  # the kernel over `keys` cached with window w: the framework's surface, or analytical
        grid, fixed_s = (None, 0.0) if latent else _fitted(hw, "decode_attention", dtype, kv_bytes, w)
        return _windowed_decode(cache=keys, window=w, grid=grid, fixed_s=fixed_s, hw=hw, batch=batch, n_heads=n_heads,
                                head_dim=head_dim, n_kv_heads=n_kv_heads, v_head_dim=v_head_dim,
                                kv_elements_per_token=kv_elements_per_token, dtype=dtype, kv_bytes=kv_bytes)
    windowed = np.any(np.asarray(window) > 0) and not latent and \
        _fitted(hw, "decode_attention", dtype, kv_bytes, window)[0] is not _fitted(hw, "decode_attention", dtype,
                                                                                  kv_bytes)[0]
    if windowed:  # a window's own surface where the window binds, unless it is slower than reading every key
        binds = (np.asarray(window) > 0) & (cache > window)
        if not np.any(binds):
            return run(0.0)
        # ... where a surface carried to a shape its table never ran is: then the kernel
        # without a window over the window's keys (Gemma-4-31B's 16 x 256 sliding heads on
        # H200 under TensorRT-LLM: the windowed surface took 0.30 ms at 65k cached keys,
        # reading every key 0.30 ms, 1,024 keys 18 us)
        recent = run(0.0, where(binds, window, cache))  # the plain kernel over the window's keys
        return _decode_where_binds(binds, run(where(binds, window, 0.0)), run(0.0), recent)
    return run(window)


def _where_binds(binds, windowed: dict, full: dict) -> dict:
    """Where the window binds, the faster of the windowed kernel and attention without the
    window (a window never costs more than reading every key); elsewhere the latter (all of
    it where none binds: `windowed` None)."""
    if windowed is None:
        return full
    pick = binds & (windowed["time_s"] <= full["time_s"])
    return {k: where(pick, windowed[k], full[k]) for k in full}


def _decode_where_binds(binds, windowed: dict, full: dict, recent: dict) -> dict:
    """attention_decode's choice where the window binds: the windowed kernel, or where it is
    slower than attention without the window over every key (a surface beyond its table's
    shapes) the kernel without a window over the window's `recent` keys; elsewhere
    attention without the window."""
    slower = windowed["time_s"] > full["time_s"]
    return {k: where(binds, where(slower, recent[k], windowed[k]), full[k]) for k in full}


def _windowed_decode(*, cache, window, grid, fixed_s, hw, batch, n_heads, head_dim, n_kv_heads, v_head_dim,
                     kv_elements_per_token, dtype, kv_bytes) -> dict:
    """attention_decode's kernel over `cache` keys held (at most `window` read): the fitted
    surface `grid` (fixed latency `fixed_s`), or the analytical one where it is None."""
    context = _window_keys(cache, window)
    if grid is not None:  # a point's numbers depend on that point alone: evaluated in cache-sized blocks
        coords = decode_attention_coords(batch=batch, kv_len=cache, n_heads=n_heads, n_kv_heads=n_kv_heads,
                                         head_dim=head_dim)
        eff = grid(**coords)
        fallback, fallback_fixed_s = _fitted(hw, "decode_attention", dtype, kv_bytes, window, FALLBACK)
        if fallback is not None:  # TensorRT-LLM: XQA where it fills the GPU, else its MMHA kernel
            # the tables' keys are the cached history plus the new token
            xqa = runs_xqa(slices=coords["slices"], history=coords["keys"] - 1.0, n_sms=hw.n_sms)
            eff, fixed_s = where(xqa, eff, fallback(**coords)), where(xqa, fixed_s, fallback_fixed_s)
        r = blockwise(_fitted_decode, fixed_s=fixed_s, eff=eff, peak=hw.peak(dtype),
                      bandwidth=hw.hbm_bandwidth_bytes_per_s, saving_s=hw.graph_saving_s, batch=batch, cache=cache,
                      context=context, n_heads=n_heads, head_dim=head_dim, v_head_dim=v_head_dim,
                      n_kv_heads=n_kv_heads, kv_elements_per_token=kv_elements_per_token,
                      act_bytes=DTYPE_BYTES[dtype], kv_bytes=kv_bytes, window=window)
        return {"flops": r["flops"], "bytes": r["bytes"], "compute_s": r["compute_s"], "memory_s": r["memory_s"],
                "overhead_s": zero_of(r["time_s"]), "time_s": r["time_s"], "compute_bound": r["compute_bound"]}
    flops = 2.0 * batch * n_heads * (head_dim + v_head_dim) * context
    nbytes = batch * context * kv_elements_per_token * kv_bytes
    # Decode attention is a batched GEMV: its matmuls run far from peak, so the compute
    # side uses the GEMM efficiency of its size; it is memory-bound in practice.
    compute_s = flops / (hw.peak(dtype) * _matmul_eff(hw, flops, dtype))
    # Each thread block streams one (sequence, KV head) slice of the cache and pays one
    # memory latency before its stream flows; an SM's share of the bandwidth times that
    # latency is the slice size at which half the time is lost (latency-bandwidth product).
    # The latency counts as latency_bytes more streamed per slice. (Multiplying memory_time
    # by (slice + latency_bytes) / slice instead also scaled the size ramp's own latency:
    # a 65-token context came out 5x slower than a 2k one on B200.)
    slice_bytes = context * (kv_elements_per_token / np.maximum(n_kv_heads, 1.0)) * kv_bytes
    latency_bytes = hw.hbm_bandwidth_bytes_per_s / hw.n_sms * hw.memory_latency_s
    memory_s = memory_time(hw=hw, nbytes=nbytes * (slice_bytes + latency_bytes) / slice_bytes)
    return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": hw.kernel_launch_s + 0.0 * flops,
            "time_s": np.maximum(compute_s, memory_s), "compute_bound": compute_s >= memory_s}
