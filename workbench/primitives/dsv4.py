"""A DeepSeek-V4 layer's whole attention block (the query latent and up-projection, the
shared key-value vector, the compressor, in CSA layers the lightning indexer with its top-k,
attention over the sliding window and the compressed entries, the grouped output
projection) and its manifold-constrained hyper-connections (mHC), as the serving frameworks
run them, timed by their measured module tables (kernel_fits.ROOFLINES["dsv4_module"] and
["mhc"], rooflines in dsv4_work.py, fitted by calibrate/kernel_fit.py). Where the numbers
carry no such surface these return None and the caller composes the block."""
from __future__ import annotations

import numpy as np

from .dsa import GEMM_FORMATS
from .dsv4_work import DSV4_CSA_RATIO, DSV4_HCA_RATIO, dsv4_module_roofline, dsv4_module_work, mhc_roofline, mhc_work
from .hardware_numbers import GpuNumbers
from .kernel_fits import MOE_FORMATS, attribute, dsa_peaks, served_time
from .module_tables import least_table_time, module_block, module_sources

# Kernels the block launches, as workloads/ops.compressed_attention_matmuls counts its
# weight GEMMs: q_down, q_up, kv, the compressor, attn_out_group, attn_out, and the attention;
# a CSA layer adds the indexer's query, compressor and head weights and its scoring (the
# top-k rides on it). Each is a launch a CUDA-graph replay saves.
KERNELS_PER_OP = {"csa": 11.0, "hca": 7.0}
# The compress ratios with a table, by the variant's name for them.
RATIOS = {DSV4_CSA_RATIO: "csa", DSV4_HCA_RATIO: "hca"}
# One fused kernel per hyper-connection site and op (the tables' sources: sglang_tilelang_mhc_pre, ...).
MHC_KERNELS_PER_OP = 2.0


def dsv4_dims(model) -> dict:
    """The dimensions fitted_dsv4 reads from a DeepSeek-V4 model spec (the model's total
    query heads too: they size the GPU's share of the output groups)."""
    return {"hidden": model.d_model, "n_heads": model.n_heads, "q_rank": model.q_lora_rank,
            "head_dim": model.head_dim, "o_groups": model.o_groups, "o_rank": model.o_lora_rank,
            "index_heads": model.index_n_heads, "index_dim": model.index_head_dim, "topk": model.index_topk,
            "window": model.sliding_window}


def dsv4_row_dims(rows) -> dict:
    """The dimensions fitted_dsv4 reads, as arrays, from imported DeepSeek-V4 module-table
    rows (calibrate/aiconfigurator: the model's total query heads, the GPU's heads times tp)."""
    return dict(hidden=rows.k.values, n_heads=(rows.n_heads * rows.tp).values, q_rank=rows.q_lora_rank.values,
                head_dim=rows.head_dim.values, o_groups=rows.o_groups.values, o_rank=rows.o_lora_rank.values,
                index_heads=rows.index_heads.values, index_dim=rows.index_head_dim.values, topk=rows.top_k.values,
                window=rows.window.values)


def dsv4_variant(phase: str, ratio, math: str, w_bytes, kv_bytes) -> str | None:
    """'decode|prefill/csa|hca/<GEMM format>/<KV dtype>' of a layer of compress `ratio`,
    or None where no table times it (a window-only layer, ratio 0; 16-bit math over
    narrower weights)."""
    r = np.unique(np.asarray(ratio, float))  # one layer kind: one ratio
    name = RATIOS.get(float(r[0])) if r.size == 1 else None
    fmt = GEMM_FORMATS.get(math)
    if name is None or fmt is None or (fmt == "bf16" and np.any(np.asarray(w_bytes) < 2.0)):
        return None
    return f"{phase}/{name}/{fmt}/{'fp8' if np.all(np.asarray(kv_bytes) <= 1.0) else 'bf16'}"


def fitted_dsv4(*, hw: GpuNumbers, phase: str, ratio, batch, new, prefix, heads, dims: dict, math: str, w_bytes,
                kv_bytes) -> dict | None:
    """Named parts of one DeepSeek-V4 layer's attention block on one GPU: `batch` sequences
    each adding `new` tokens (decode: 1) after `prefix` cached ones, `heads` query heads on
    the GPU, a layer of compress `ratio` (4: CSA, 128: HCA), the model's `dims`
    (dsv4_dims); phase 'decode' or 'prefill'. None without a surface for the phase, ratio
    and formats (ratio 0, a window-only layer, has no table). Several sources of one
    variant: the least time."""
    variant = dsv4_variant(phase, ratio, math, w_bytes, kv_bytes)
    sources = module_sources(hw, "dsv4_module", variant)
    if not sources:
        return None
    wb, _, units = MOE_FORMATS[variant.split("/")[2]]
    peaks = dsa_peaks(hw, units)
    shape = dict(batch=batch, new=new, prefix=prefix, heads=heads, ratio=ratio, w_bytes=wb, kv_bytes=kv_bytes, **dims)
    parts, _ = dsv4_module_work(**shape)
    roof, coords = dsv4_module_roofline(bandwidth=hw.hbm_bandwidth_bytes_per_s, **peaks, **shape)  # what was fitted
    return module_block(hw=hw, sources=sources, parts=parts, peaks=peaks, roof=roof, coords=coords,
                        kernels=KERNELS_PER_OP[variant.split("/")[1]])


def fitted_mhc(*, hw: GpuNumbers, tokens, hidden, hc_mult) -> dict | None:
    """Named parts of one layer's hyper-connections on one GPU: the pre and the post op at
    both sites (before the attention, before the MoE) for `tokens` tokens, hc_mult streams
    of `hidden`; pre_s and post_s their times. None without both surfaces."""
    pre, post = module_sources(hw, "mhc", "pre"), module_sources(hw, "mhc", "post")
    if not pre or not post:
        return None
    bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.peak("bf16")
    out = {"flops": 0.0, "bytes": 0.0, "compute_ideal": 0.0}
    for op, sources in (("pre", pre), ("post", post)):
        shape = dict(tokens=tokens, hidden=hidden, hc_mult=hc_mult, op=op)
        flops, nbytes, _ = mhc_work(**shape)
        roof, coords = mhc_roofline(peak=peak, bandwidth=bw, **shape)
        table_s = least_table_time(sources, roof, coords)
        out[f"{op}_s"] = served_time(table_s, roof, MHC_KERNELS_PER_OP * hw.graph_saving_s)
        out["flops"], out["bytes"] = out["flops"] + flops, out["bytes"] + nbytes
        out["compute_ideal"] = out["compute_ideal"] + flops / peak
    time_s = out["pre_s"] + out["post_s"]
    compute_ideal, memory_ideal = out.pop("compute_ideal"), out["bytes"] / bw
    compute_s, memory_s = attribute(time_s, compute_ideal, memory_ideal)
    return {**out, "compute_s": compute_s, "memory_s": memory_s, "overhead_s": 0.0 * time_s, "time_s": time_s,
            "compute_bound": compute_ideal >= memory_ideal}
