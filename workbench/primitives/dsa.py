"""A DeepSeek Sparse Attention layer's whole attention block (DeepSeek-V3.2, GLM-5: the MLA
projections, the lightning indexer with its top-k, MLA attention over the selected keys) as
the serving frameworks run it, timed by their measured module tables
(kernel_fits.ROOFLINES["dsa_module"], fitted by calibrate/kernel_fit.py). Where the numbers
carry no such surface the caller composes the block from GEMMs and attention kernels
(workloads/layers)."""
from __future__ import annotations

import numpy as np

from .hardware_numbers import GpuNumbers
from .kernel_fits import MOE_FORMATS, dsa_module_roofline, dsa_module_work, dsa_peaks
from .module_tables import module_block, module_sources

# Kernels the block launches, as the composition counts them: the eight weight GEMMs of an
# MLA layer with an indexer (workloads/ops.attention_matmuls: q down/up, kv down/up, output,
# the indexer's query, key and head weights), the indexer's scoring (its top-k rides on it:
# attention.sparse_indexer) and the attention; each is a launch a CUDA-graph replay saves.
KERNELS_PER_OP = 10.0
# The tables' GEMM formats (aiconfigurator's gemm_type bfloat16, fp8_block, nvfp4), by the
# layer's math dtype; their weight bytes and math units are MOE_FORMATS', as in the fit.
GEMM_FORMATS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8_block", "fp8_block": "fp8_block", "fp4": "fp4"}


def dsa_variant(phase: str, math: str, w_bytes, kv_bytes) -> str | None:
    """'decode|prefill/<GEMM format>/<KV dtype>' of a layer in `math` with `w_bytes`
    weights, or None where the tables time no such format (16-bit math over narrower
    weights)."""
    fmt = GEMM_FORMATS.get(math)
    if fmt is None or (fmt == "bf16" and np.any(np.asarray(w_bytes) < 2.0)):
        return None
    return f"{phase}/{fmt}/{'fp8' if np.all(np.asarray(kv_bytes) <= 1.0) else 'bf16'}"


def fitted_dsa(*, hw: GpuNumbers, phase: str, batch, new, prefix, heads, dims: dict, math: str, w_bytes,
               kv_bytes) -> dict | None:
    """Named parts of the block on one GPU: `batch` sequences each adding `new` tokens
    (decode: 1) after `prefix` cached ones, `heads` query heads on the GPU, the model's
    `dims` (hidden, q_rank, kv_rank, rope, nope, v_dim, index_heads, index_dim, topk); None
    without a surface for the phase and formats. Used whenever the framework's tables have
    one (unlike the MoE and MLA-decode surfaces, behind moe_mla_kernels="measured"): the
    composition it replaces is 11-89% optimistic against these tables
    (benchmarks/dsa_module_check.py) and no serving constant was fitted on a DSA model.
    Several sources of one variant: the least time (as the MoE layer)."""
    variant = dsa_variant(phase, math, w_bytes, kv_bytes)
    sources = module_sources(hw, "dsa_module", variant)
    if not sources:
        return None
    wb, _, units = MOE_FORMATS[variant.split("/")[1]]
    peaks = dsa_peaks(hw, units)
    shape = dict(batch=batch, new=new, prefix=prefix, heads=heads, w_bytes=wb, kv_bytes=kv_bytes, **dims)
    parts, _ = dsa_module_work(**shape)
    roof, coords = dsa_module_roofline(bandwidth=hw.hbm_bandwidth_bytes_per_s, **peaks, **shape)  # what was fitted
    return module_block(hw=hw, sources=sources, parts=parts, peaks=peaks, roof=roof, coords=coords,
                        kernels=KERNELS_PER_OP)
