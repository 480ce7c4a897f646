"""Wafer-scale mesh primitives (the PLMR view of WaferLLM, OSDI'25), in clock cycles.

A P x P region of processing elements (PEs) holds each operand in tiles; every term is
a pure array function of the grid side P and the problem size:

- Parallelism: per-PE work is the problem divided over P² PEs, padded to whole tiles
  (`grid_utilization` is what the padding costs);
- Latency: one cycle per router hop (alpha = hop_cycles) plus a software cost per
  routing stage (beta = stage_cycles: receive, add, forward);
- Memory: a vector op is bound by the SIMD width or by the PE's memory ports;
- Routing: a reduction tree needs a color per level; 24 exist.

Two mappings. `mesh` (WaferLLM): bounded-hop K-tree allreduce (K=2: log2 P stages, P-1
hops in all), Cannon-style GEMM shifting tiles two hops per step, shift-based KV cache.
`gpu_style` (what a shared-memory design does when ported): reductions and panel
broadcasts as chains through every PE (a software stage per hop), concat-based KV.
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice
from .hardware_numbers import WaferNumbers

MAPPINGS = ("mesh", "gpu_style")


def _check_mapping(mapping: str) -> None:
    """An unknown mapping is an error, never the other mapping by an `else`."""
    check_choice("mapping", mapping, MAPPINGS)
ACC_BYTES = 2.0  # fp16 partial sums, as WaferLLM's kernels keep them


def tiles(n, P):
    """Elements per PE along a dimension of size n split over P PEs (whole tiles)."""
    return np.ceil(n / P)


def grid_utilization(*, P, dims):
    """Useful share of the per-PE work after padding each dimension to whole tiles."""
    u = 1.0
    for n in dims:
        u = u * (n / P) / tiles(n, P)
    return u


def vector_cycles(w: WaferNumbers, *, n, dtype="fp16", reads=2.0, writes=1.0, elem_bytes=2.0):
    """One vector instruction over n elements: bound by the SIMD width or by the memory
    ports (`reads` and `writes` operands per element from SRAM)."""
    simd = w.fmas_per_cycle(dtype)
    return np.maximum(np.maximum(n / simd, n * reads * elem_bytes / w.mem_read_bytes_per_cycle),
                      n * writes * elem_bytes / w.mem_write_bytes_per_cycle)


def line_allreduce(w: WaferNumbers, *, P, nbytes, mapping: str = "mesh") -> dict:
    """Allreduce of `nbytes` held by each PE along a line of P PEs.

    mesh: recursive doubling (WaferLLM's K-tree, K=2): stage l exchanges with the partner
    2^l hops away, so ceil(log2 P) stages and P-1 hops in all, each stage paying beta,
    the message at link rate and the add.
    gpu_style: a chain to one end and back, every PE a software stage: 2(P-1) stages.
    """
    P = np.maximum(P, 1.0)
    levels = np.ceil(np.log2(np.maximum(P, 2.0))) * (P > 1)
    msg = nbytes / w.link_bytes_per_cycle
    add = vector_cycles(w, n=nbytes / ACC_BYTES, reads=2.0, writes=1.0)
    _check_mapping(mapping)
    if mapping == "mesh":
        hops = P - 1.0
        stages = levels
        cycles = hops * w.hop_cycles + stages * (w.stage_cycles + msg + add)
    else:
        hops = 2.0 * (P - 1.0)
        stages = hops
        # A line of one PE has nothing to exchange: the message term vanishes with the hops.
        cycles = stages * (w.hop_cycles + w.stage_cycles) + (P - 1.0) * add + 2.0 * msg * (P > 1)
    return {"cycles": cycles, "hops": hops, "stages": stages, "colors": levels}


def mesh_gemv(w: WaferNumbers, *, P, k, n, rows=1.0, dtype="fp16", w_bytes=2.0, mapping="mesh") -> dict:
    """y[rows, n] = x[rows, k] @ W[k, n] with W tiled over P x P PEs (MeshGEMV, WaferLLM
    decode.csl `vecmat_computation`): per row, a @map over the ceil(k/P) local x elements,
    each issuing one FMA vector of length ceil(n/P); then the partial sums are allreduced
    along the k line."""
    kt, nt = tiles(k, P), tiles(n, P)
    compute = rows * kt * (w.map_call_cycles + vector_cycles(w, n=nt, dtype=dtype))
    red = line_allreduce(w, P=P, nbytes=rows * nt * ACC_BYTES, mapping=mapping)
    return {"cycles": compute + red["cycles"], "compute_cycles": compute, "comm_cycles": red["cycles"],
            "hops": red["hops"], "stages": red["stages"], "flops": 2.0 * rows * k * n,
            "weight_bytes_per_pe": kt * nt * w_bytes, "colors": red["colors"]}


def mesh_gemm(w: WaferNumbers, *, P, m, k, n, dtype="fp16", mapping="mesh") -> dict:
    """C[m, n] = A[m, k] @ B[k, n] on P x P PEs in P shift steps (MeshGEMM / Cannon).

    Per step each PE multiplies its tiles: ceil(k/P) x ceil(n/P) vector FMAs of length
    ceil(m/P), each issued by a @map call costing map_call_cycles; meanwhile the A and B
    tiles move: two hops (mesh: interleaved placement) or a chain across the line
    (gpu_style: SUMMA-like panel broadcast forwarded PE by PE). Steps overlap compute and
    communication: step = max(compute, comm)."""
    mt, kt, nt = tiles(m, P), tiles(k, P), tiles(n, P)
    compute = kt * nt * (w.map_call_cycles + vector_cycles(w, n=mt, dtype=dtype))
    data = np.maximum(mt * kt, kt * nt) * 2.0 / w.link_bytes_per_cycle
    shifts = P > 1  # a single PE holds every tile: nothing moves
    _check_mapping(mapping)
    if mapping == "mesh":
        comm = (2.0 * w.hop_cycles + w.stage_cycles + data) * shifts
        hops = 2.0 * P * shifts
    else:
        comm = ((P - 1.0) * (w.hop_cycles + w.stage_cycles) + data) * shifts
        hops = P * (P - 1.0)
    step = np.maximum(compute, comm)
    return {"cycles": P * step, "compute_cycles": P * compute, "comm_cycles": P * comm,
            "hops": hops, "flops": 2.0 * m * k * n,
            "grid_utilization": grid_utilization(P=P, dims=(m, k, n))}


def elementwise_cycles(w: WaferNumbers, *, n, reads=1.0, writes=1.0):
    """A local vector op (norm scale, residual add, rotary, activation) over n elements."""
    return vector_cycles(w, n=n, reads=reads, writes=writes)


def kv_capacity_tokens(*, free_bytes_per_pe, P, kv_bytes_per_token_per_layer, mapping="mesh"):
    """Tokens of KV cache one layer's P x P region can hold. Shift-based placement (mesh)
    spreads every token over all P² PEs; concat-based (gpu_style) appends new tokens to
    one line of P PEs, so the first full PE ends the sequence: P times fewer."""
    _check_mapping(mapping)
    spread = P * P if mapping == "mesh" else P
    return np.floor(free_bytes_per_pe * spread / kv_bytes_per_token_per_layer)
