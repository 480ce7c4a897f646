"""Wafer-scale mesh primitives (the PLMR view of WaferLLM, OSDI'25), in clock cycles.

A P x P region of processing elements (PEs) holds each operand in tiles; every term is
a pure array function of the grid side P and the problem size:

- Parallelism: per-PE work is the problem divided over P² PEs, padded to whole tiles
  (`grid_utilization` is what the padding costs);
- Latency: one cycle per router hop (alpha = hop_cycles) plus a software cost per
  routing stage (beta = stage_cycles: receive, add, forward);
- Memory: a vector op is bound by the SIMD width or by the PE's memory ports;
- Routing: a reduction tree needs a color per level; 24 exist.

Four mappings:
- `mesh` (WaferLLM): bounded-hop K-tree allreduce (K=2: log2 P stages, P-1 hops in all),
  Cannon-style GEMM shifting tiles two hops per step, shift-based KV cache.
- `gpu_style` (what a shared-memory design does when ported): reductions and panel
  broadcasts as chains through every PE (a software stage per hop), concat-based KV.
- `t10` and `ladder`: the two compiler baselines WaferLLM re-implemented on WSE-2 (He et
  al., OSDI'25, §7 "We compare WaferLLM with two DNN compilers"), each by the mechanism
  WaferLLM describes for it on the mesh (see `line_allreduce` and `mesh_gemm`):
  T10 (Liu et al., SOSP'24): "treating each core as part of a distributed memory system
  interconnected by a crossbar, despite the actual mesh topology. T10 maps data to core
  IDs and fetches data from local SRAM as required" (§7); compute-shift with balanced
  memory (§3.2: it addresses M and R, fails L and P). Ladder (Wang et al., OSDI'24): "we
  treated the distributed memory architecture of the chip, interconnected by mesh, as
  unified memory, requiring collective communication over the NoC to access data" (§7);
  a shared-memory tile schedule (§3.2: fails P, L, M and R), concat-based KV (§4.3, Table 5).

The two baselines add one number the hardware spec has no field for, RELAY_BYTES_PER_CYCLE
(a message forwarded in software by an intermediate PE), fitted on ONE measured row.
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice
from .hardware_numbers import WaferNumbers

MAPPINGS = ("mesh", "gpu_style", "t10", "ladder")
# Where each mapping keeps the KV cache. "spread": every token over all P² PEs (WaferLLM's
# shift-based KV, §4.3; T10 partitions every tensor evenly over its cores, §3.2 "T10 handles
# small local memory"); "concat": generated tokens appended to one line of P PEs (the
# concatenate-based management of shared-memory systems, §4.3 and Table 5 "Concat-based
# (PagedAttention)": gpu_style and Ladder).
KV_PLACEMENT = {"mesh": "spread", "gpu_style": "concat", "t10": "spread", "ladder": "concat"}
# Bytes per cycle an intermediate PE moves when it forwards a message in software (receives
# it whole into SRAM, then re-sends it), as the baselines' long transfers are on the mesh.
# No datasheet gives it: fitted on ONE row, WaferLLM's T10 prefill on 480 x 480 (C031),
# with every other T10 and Ladder row held out (tests/workloads/test_wafer_baselines.py
# re-derives it; held out: T10 prefill on 600 and 720 within 1%, T10 decode within 19%, T10
# end-to-end within 10%). 1.5 B/cycle is below the 4 B/cycle link, as a store-and-forward
# relay that receives and re-sends each word through the PE's memory would be (a reading,
# not a published figure).
RELAY_BYTES_PER_CYCLE = 1.5


def _check_mapping(mapping: str) -> None:
    """An unknown mapping is an error, never the other mapping by an `else`."""
    check_choice("mapping", mapping, MAPPINGS)


def kv_spread(mapping: str) -> bool:
    """True where the mapping spreads every KV token over all P² PEs (KV_PLACEMENT)."""
    _check_mapping(mapping)
    return KV_PLACEMENT[mapping] == "spread"


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
    t10: the partial sums shift from neighbour to neighbour to one end of the line, each
    PE adding its own, and the sum shifts back: 2(P-1) one-hop shifts, each one hop and one
    @map-driven step (the add on the way in, the copy into the operand on the way back),
    the message streaming through each leg once. WaferLLM §7.1: "the dist-GEMV allreduce
    operation in decode only requires traversal across cores in the same row or column,
    without enforcing a strict access order ... T10's compute-shift paradigm ... still
    accounts for distributed memory, which allows performance gains when memory
    (communication) accesses are order-independent": no wrap-around, neighbour routes only
    (T10 addresses R, §3.2), so no software routing stage.
    ladder: ring allreduce, the GPU default (WaferLLM §6.1 (2): "commonly used in GPU pod
    systems, where it is the default ... a communication latency of O[(2α + β)N]"):
    reduce-scatter then all-gather, 2(P-1) steps, each moving one chunk of ceil(n/P)
    partial sums two hops (α each) with one software stage (β), adding it on the first P-1.
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
        colors = levels
    elif mapping == "gpu_style":
        hops = 2.0 * (P - 1.0)
        stages = hops
        # A line of one PE has nothing to exchange: the message term vanishes with the hops.
        cycles = stages * (w.hop_cycles + w.stage_cycles) + (P - 1.0) * add + 2.0 * msg * (P > 1)
        colors = levels
    elif mapping == "t10":
        hops = 2.0 * (P - 1.0)
        stages = 0.0 * P
        cycles = hops * (w.hop_cycles + w.map_call_cycles) + (P - 1.0) * add + 2.0 * msg * (P > 1)
        colors = 2.0 * (P > 1)  # one route each way between neighbours
    else:  # ladder
        chunk = np.ceil(nbytes / ACC_BYTES / P) * ACC_BYTES  # whole partial sums per ring step
        steps = 2.0 * (P - 1.0)
        hops = 2.0 * steps
        stages = steps
        cycles = steps * (2.0 * w.hop_cycles + w.stage_cycles + chunk / w.link_bytes_per_cycle) \
            + (P - 1.0) * vector_cycles(w, n=chunk / ACC_BYTES, reads=2.0, writes=1.0)
        colors = 2.0 * (P > 1)
    return {"cycles": cycles, "hops": hops, "stages": stages, "colors": colors}


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


def relay_cycles(w: WaferNumbers, *, hops, nbytes):
    """A message of `nbytes` forwarded in software through `hops` PEs: each hop the router
    hop (alpha), a routing stage (beta: header parsing and re-sending by software, PLMR §3.1
    "if the number of routing paths exceeds hardware limits, messages must be relayed
    through multiple intermediate cores, introducing additional β latency") and the message
    received whole and re-sent at RELAY_BYTES_PER_CYCLE (store and forward)."""
    return hops * (w.hop_cycles + w.stage_cycles + nbytes / RELAY_BYTES_PER_CYCLE)


def mesh_gemm(w: WaferNumbers, *, P, m, k, n, dtype="fp16", mapping="mesh") -> dict:
    """C[m, n] = A[m, k] @ B[k, n] on P x P PEs in P shift steps (MeshGEMM / Cannon).

    Per step each PE multiplies its tiles: ceil(k/P) x ceil(n/P) vector FMAs of length
    ceil(m/P), each issued by a @map call costing map_call_cycles; meanwhile the A and B
    tiles move: two hops (mesh: interleaved placement) or a chain across the line
    (gpu_style: SUMMA-like panel broadcast forwarded PE by PE). Steps overlap compute and
    communication: step = max(compute, comm).

    t10 (compute-shift, T10 SOSP'24): the A tile rotates along the row and the B tile
    along the column of T10's logical ring, laid out in core-ID order as on a crossbar
    (WaferLLM §7: "treating each core as part of a distributed memory system
    interconnected by a crossbar, despite the actual mesh topology"). The ring's head-to-tail
    link spans the P-1 hops of the line (WaferLLM §5.1 (3), the flattened circle) and no
    route is reserved for it, so each step's critical path is each tile relayed through
    P-1 PEs in software (relay_cycles); WaferLLM §7.1: "dist-GEMM computations ... require
    each data element to traverse cores along the same row or column sequentially". Steps
    are bulk-synchronous as on the IPU T10 targets (compute, then shift): step = compute
    + comm.
    ladder (GEMM via allgather, WaferLLM §5.1 (1), the GPU/TPU-pod GEMM a shared-memory
    tile schedule becomes over unified memory): each of the P steps gathers the next A
    tile of the row panel and B tile of the column panel "from the farthest cores",
    "step-by-step ... via intermediate cores, introducing a communication latency of
    O[(α + β)N]" (relay_cycles over P-1 hops each); load, then compute (a tile schedule's
    load-compute-store): step = compute + comm. Its working set is the gathered panels,
    O(1/N) per core (§5.1), where T10 keeps O(1/N²). On the mesh the two critical paths
    cost the same."""
    mt, kt, nt = tiles(m, P), tiles(k, P), tiles(n, P)
    compute = kt * nt * (w.map_call_cycles + vector_cycles(w, n=mt, dtype=dtype))
    data = np.maximum(mt * kt, kt * nt) * 2.0 / w.link_bytes_per_cycle
    shifts = P > 1  # a single PE holds every tile: nothing moves
    _check_mapping(mapping)
    if mapping == "mesh":
        comm = (2.0 * w.hop_cycles + w.stage_cycles + data) * shifts
        hops = 2.0 * P * shifts
    elif mapping == "gpu_style":
        comm = ((P - 1.0) * (w.hop_cycles + w.stage_cycles) + data) * shifts
        hops = P * (P - 1.0)
    else:  # t10, ladder: both tiles relayed across the line every step
        comm = (relay_cycles(w, hops=P - 1.0, nbytes=mt * kt * 2.0)
                + relay_cycles(w, hops=P - 1.0, nbytes=kt * nt * 2.0)) * shifts
        hops = 2.0 * P * (P - 1.0)
    step = np.maximum(compute, comm) if mapping in ("mesh", "gpu_style") else compute + comm
    return {"cycles": P * step, "compute_cycles": P * compute, "comm_cycles": P * comm,
            "hops": hops, "flops": 2.0 * m * k * n,
            "grid_utilization": grid_utilization(P=P, dims=(m, k, n))}


def elementwise_cycles(w: WaferNumbers, *, n, reads=1.0, writes=1.0):
    """A local vector op (norm scale, residual add, rotary, activation) over n elements."""
    return vector_cycles(w, n=n, reads=reads, writes=writes)


def kv_capacity_tokens(*, free_bytes_per_pe, P, kv_bytes_per_token_per_layer, mapping="mesh"):
    """Tokens of KV cache one layer's P x P region can hold. Shift-based placement (mesh)
    and T10's balanced partitions spread every token over all P² PEs; concat-based
    (gpu_style, Ladder) appends new tokens to one line of P PEs, so the first full PE ends
    the sequence: P times fewer (KV_PLACEMENT)."""
    spread = P * P if kv_spread(mapping) else P
    return np.floor(free_bytes_per_pe * spread / kv_bytes_per_token_per_layer)
