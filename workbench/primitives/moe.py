"""The routed experts of an MoE layer as the serving frameworks run them: one fused kernel
(routing, the gated grouped GEMMs, activation, combine) timed by the framework's measured
MoE tables (kernel_fits.ROOFLINES["moe"], fitted by calibrate/kernel_fit.py). Where the
numbers carry no such surface the caller falls back to grouped GEMMs (workloads/layers)."""
from __future__ import annotations

import numpy as np

from ..units import FOUR_BIT_BYTES
from .hardware_numbers import GpuNumbers
from .kernel_fits import MOE_FORMATS, attribute, moe_roofline, served_time

# Kernels one MoE op launches: routing (top-k), permutation of the tokens to their experts,
# the gate/up grouped GEMM (activation fused), the down grouped GEMM, and the weighted
# un-permutation (TensorRT-LLM's CUTLASS fused-MoE runner; vLLM's and SGLang's fused_moe
# run the same stages).
KERNELS_PER_OP = 5.0
W4A16 = ("mxfp4_w4a16", "int4")  # 4-bit weights on 16-bit math: MXFP4 first (gpt-oss), then INT4


def moe_variants(math: str, w_bytes: float) -> tuple:
    """The MoE tables a layer in `math` with `w_bytes` weights may read, in order."""
    if math in ("bf16", "fp16"):
        return ("bf16",) if w_bytes >= 2.0 else W4A16 if w_bytes in FOUR_BIT_BYTES else ()
    return (math,) if math in MOE_FORMATS else ()


def _sources(hw: GpuNumbers, math: str, w_bytes: float) -> list:
    """(variant, grid, fixed_s) of every measured MoE kernel source for the format: the
    first format of moe_variants with tables, its default source and its 'variant@source'
    alternatives."""
    if hw.kernels is None or not hw.measured_moe_mla:
        return []
    for fmt in moe_variants(math, w_bytes):
        found = [(v, *hw.fitted("moe", v)) for (c, v) in hw.kernels.grids if c == "moe" and v.split("@")[0] == fmt]
        if found:
            return found
    return []


def carried_efficiency(grid, sibling, coords: dict):
    """A surface's efficiency at `coords`, carried beyond the shapes its table measured: where
    the point lies outside the surface's knots along an axis, its efficiency at the edge
    times the `sibling` surface's change from that edge to the point (the framework's BF16
    MoE surface on the same GPU, fitted over every model's shapes, where a format's table may
    hold one checkpoint's: TensorRT-LLM's MXFP4 W4A16 tables on H200 span gpt-oss's expert
    width alone, so at TP 8 (width 360) its surface held 2880's efficiency, 0.16, where the
    BF16 surface falls from 0.71 to 0.41 over that range). Inside the knots, or without a
    sibling, the surface's own."""
    eff = grid(**coords)
    if sibling is None or sibling is grid:
        return eff
    edge = {n: 2.0 ** np.clip(np.log2(np.maximum(np.asarray(coords[n], float), 1e-30)), kn[0], kn[-1])
            for n, kn in zip(grid.axes, grid.knots)}
    if not any(np.any(edge[n] != np.asarray(coords[n], float)) for n in grid.axes):
        return eff
    return eff * sibling(**coords) / sibling(**{**coords, **edge})


def fitted_moe(*, hw: GpuNumbers, tokens, hidden, inter, top_k, n_experts, tp, ep, math: str, w_bytes) -> dict | None:
    """Named parts of one gated MoE layer's routed experts on the busiest of its tp x ep
    GPUs (tokens: the tokens entering the layer), or None without a surface for it. A
    framework times several MoE backends for a format; it runs the fastest it has for the
    shape (the frameworks select their MoE backend per GPU and format and autotune its
    tiles), so each point takes the least time over the measured sources."""
    sources = _sources(hw, math, float(np.max(w_bytes)))
    if not sources:
        return None
    wb, ab, units = MOE_FORMATS[sources[0][0].split("@")[0]]
    peak, bw = hw.peak(units), hw.hbm_bandwidth_bytes_per_s
    shape = dict(tokens=tokens, hidden=hidden, inter=inter, top_k=top_k, n_experts=n_experts, tp=tp, ep=ep,
                 w_bytes=wb, a_bytes=ab)
    compute_ideal, coords = moe_roofline(peak=peak, bandwidth=np.inf, **shape)  # FLOPs / peak
    memory_ideal, _ = moe_roofline(peak=np.inf, bandwidth=bw, **shape)  # bytes / bandwidth
    roof = np.maximum(compute_ideal, memory_ideal)
    sibling, _ = hw.fitted("moe", "bf16")
    table_s = None
    for variant, grid, fixed_s in sources:
        t = fixed_s + roof / carried_efficiency(grid, sibling, coords)
        # never faster than the fastest row its table measured: the op's five launches
        # bound it whatever the shape, where a surface carried to narrower experts (a
        # TP-split width its table never ran) would shrink that floor with the roofline
        t = np.maximum(t, hw.fitted_param("moe", variant, "fastest_s"))
        table_s = t if table_s is None else np.minimum(table_s, t)
    # the op is several kernels, each launched on its own in the table and replayed from a
    # CUDA graph when served
    time_s = served_time(table_s, roof, KERNELS_PER_OP * hw.graph_saving_s)
    compute_s, memory_s = attribute(time_s, compute_ideal, memory_ideal)
    return {"flops": compute_ideal * peak, "bytes": memory_ideal * bw, "compute_s": compute_s, "memory_s": memory_s,
            "overhead_s": 0.0 * time_s, "time_s": time_s, "compute_bound": compute_ideal >= memory_ideal}
