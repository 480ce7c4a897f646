"""A MiniMax-M3 sparse layer's whole attention block, MiniMax Sparse Attention (the Q, K, V
and output projections, the indexer's projections and block scoring with its top-k, GQA
attention over the selected blocks), as the serving frameworks run it, timed by their
measured module tables (kernel_fits.ROOFLINES["msa_module"], roofline in msa_work.py,
fitted by calibrate/kernel_fit.py). Where the numbers carry no such surface this returns
None and the caller composes the block."""
from __future__ import annotations

from .dsa import dsa_variant
from .hardware_numbers import GpuNumbers
from .kernel_fits import MOE_FORMATS
from .module_tables import module_block, module_sources
from .msa_work import msa_kv_heads, msa_module_roofline, msa_module_work, msa_peaks

# Kernels the block launches, as the composition counts them: the fused QKV and the output
# GEMMs (workloads/ops.attention_matmuls), the indexer's query, key and head weights
# (ops.indexer_matmuls), its scoring, the block top-k (SGLang's tables name its decode
# top-k kernels: sglang_minimax_decode_triton_sparse_topk_{split,radix}) and the attention;
# each is a launch a CUDA-graph replay saves.
KERNELS_PER_OP = 8.0


def msa_dims(model) -> dict:
    """The dimensions fitted_msa reads from a MiniMax-M3 model spec (its total query and KV
    heads too: they size the GPU's share of the KV heads)."""
    return {"hidden": model.d_model, "n_heads": model.n_heads, "n_kv_heads": model.n_kv_heads,
            "head_dim": model.head_dim, "index_heads": model.index_n_heads, "index_dim": model.index_head_dim,
            "topk": model.index_topk}


def msa_variant(phase: str, math: str, w_bytes, kv_bytes) -> str | None:
    """'decode|prefill/<GEMM format>/<KV dtype>' (as a DSA block's), or None where the
    tables time no such format (16-bit math over narrower weights)."""
    return dsa_variant(phase, math, w_bytes, kv_bytes)


def fitted_msa(*, hw: GpuNumbers, phase: str, batch, new, prefix, heads, dims: dict, math: str, w_bytes,
               kv_bytes) -> dict | None:
    """Named parts of one MSA layer's attention block on one GPU: `batch` sequences each
    adding `new` tokens (decode: 1) after `prefix` cached ones, `heads` query heads on the
    GPU (its KV heads their share of the model's, at least one), the model's `dims`
    (msa_dims); phase 'decode' or 'prefill'. None without a surface for the phase and
    formats. Several sources of one variant: the least time."""
    variant = msa_variant(phase, math, w_bytes, kv_bytes)
    sources = module_sources(hw, "msa_module", variant)
    if not sources:
        return None
    wb, _, units = MOE_FORMATS[variant.split("/")[1]]
    peaks = msa_peaks(hw, units)
    kv_heads = msa_kv_heads(heads, dims["n_heads"], dims["n_kv_heads"])
    model = {k: v for k, v in dims.items() if k not in ("n_heads", "n_kv_heads")}
    shape = dict(batch=batch, new=new, prefix=prefix, heads=heads, kv_heads=kv_heads, w_bytes=wb, kv_bytes=kv_bytes,
                 **model)
    parts, _ = msa_module_work(**shape)
    roof, coords = msa_module_roofline(bandwidth=hw.hbm_bandwidth_bytes_per_s, **peaks, **shape)  # what was fitted
    return module_block(hw=hw, sources=sources, parts=parts, peaks=peaks, roof=roof, coords=coords,
                        kernels=KERNELS_PER_OP)
