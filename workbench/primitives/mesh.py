"""Wafer-scale mesh primitives (the PLMR view of WaferLLM, OSDI'25), in clock cycles.

A P x P region of processing elements (PEs) holds each operand in tiles; every term is
a pure array function of the grid side P and the problem size:

- Parallelism: per-PE work is the problem divided over P² PEs, padded to whole tiles
  (`grid_utilization` is what the padding costs);
- Latency: one cycle per router hop (alpha = hop_cycles) plus a software cost per
  routing stage (beta = stage_cycles: receive, add, forward);
- Memory: a vector op is bound by the SIMD width or by the PE's memory ports;
- Routing: a reduction tree needs a color per level (and one for its broadcast); 24 exist.

Four mappings:
- `mesh` (WaferLLM): bounded-hop K-tree allreduce (K=2: log2 P stages and the root's
  broadcast, P-1 hops in all), Cannon-style GEMM shifting tiles two hops per step,
  shift-based KV cache.
- `gpu_style` (what a shared-memory design does when ported): reductions and panel
  broadcasts as chains through every PE (a software stage per hop), bulk-synchronous
  steps, concat-based KV.
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

Every form here is checked against a cycle-level simulation of the mechanism it states
(workbench/simulate, tests/simulate/test_model_vs_simulation.py: within 10% over grids
4-64 and the catalog's layer shapes); the terms that simulation found missing or wrong
are noted where they were fixed.
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
# re-derives it; held out: T10 prefill on 600 and 720 within 4%, T10 decode within 7%, T10
# end-to-end within 6%). 1.44 B/cycle is below the 4 B/cycle link, as a store-and-forward
# relay that receives and re-sends each word through the PE's memory would be (a reading,
# not a published figure).
RELAY_BYTES_PER_CYCLE = 1.44


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

    mesh: WaferLLM's K-tree (K=2), rooted in the middle of the line as its
    `two_tree_allreduce_y` is: ceil(log2 P) reduction stages (at stage l a partner 2^l hops
    away), each paying beta, the message at link rate and the add, then the root's broadcast
    back over the line: one more stage (beta and the message, no add: a routed multicast
    delivers to every PE). About P-1 hops in all (half the line in, half out). The
    broadcast stage and its color were missing until the PE-mesh simulation executed the
    tree (workbench/simulate, tests/simulate/test_model_vs_simulation.py): without them the
    closed form ran 8-50% fast on decode-sized messages.
    gpu_style: a chain to one end and back, every PE a software stage: 2(P-1) stages.
    t10: the partial sums shift from neighbour to neighbour to one end of the line, each
    PE adding its own, and the sum shifts back: 2(P-1) one-hop shifts, each one hop and one
    @map-driven step (the add on the way in, the copy into the operand on the way back),
    the message streaming through each leg once. gpu_style and t10 stream: each PE adds its
    own partial sums to the words as they pass (the datapath adds a word faster than a link
    delivers one), so only the end of the line pays an add, once (the simulation showed the
    former (P-1) adds in series overstating t10 by up to 22%). WaferLLM §7.1: "the dist-GEMV allreduce
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
        stages = levels + (P > 1)  # the reduction's, and the broadcast's
        cycles = hops * w.hop_cycles + levels * (w.stage_cycles + msg + add) + (w.stage_cycles + msg) * (P > 1)
        colors = stages  # a color per stage: routes of different levels cross the same routers
    elif mapping == "gpu_style":
        hops = 2.0 * (P - 1.0)
        stages = hops
        # A line of one PE has nothing to exchange: the message term vanishes with the hops.
        cycles = stages * (w.hop_cycles + w.stage_cycles) + (add + 2.0 * msg) * (P > 1)
        colors = levels
    elif mapping == "t10":
        hops = 2.0 * (P - 1.0)
        stages = 0.0 * P
        cycles = hops * (w.hop_cycles + w.map_call_cycles) + (add + 2.0 * msg) * (P > 1)
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


def gemv_bytes_per_pe(*, P, k, n, rows=1.0, w_bytes=2.0, act_bytes=2.0):
    """SRAM per PE that MeshGEMV holds: its weight tile (ceil(k/P) x ceil(n/P)), each row's
    x tile (ceil(k/P)) and its partial sums (ceil(n/P), ACC_BYTES each)."""
    kt, nt = tiles(k, P), tiles(n, P)
    return kt * nt * w_bytes + rows * (kt * act_bytes + nt * ACC_BYTES)


def gemm_bytes_per_pe(*, P, m, k, n, elem_bytes=2.0):
    """SRAM per PE that MeshGEMM holds: its A (ceil(m/P) x ceil(k/P)), B (ceil(k/P) x
    ceil(n/P)) and C (ceil(m/P) x ceil(n/P), ACC_BYTES) tiles, and a receive buffer for each
    shifted tile (A and B arrive while the PE multiplies the ones it holds; none on a single
    PE, where nothing moves). The other mappings move the same tiles (T10 shifts them, Ladder
    gathers one A and one B tile a step), so the same count holds for them."""
    mt, kt, nt = tiles(m, P), tiles(k, P), tiles(n, P)
    moving = (mt * kt + kt * nt) * elem_bytes
    return moving * (1.0 + (np.asarray(P) > 1)) + mt * nt * ACC_BYTES


def memory_port_bound(w: WaferNumbers, dtype: str = "fp16"):
    """True where a PE's FMA vector is held back by its memory ports, not its SIMD width: each
    element reads a weight and a partial sum (2 x 2 B, as vector_cycles counts them), and
    at mem_read_bytes_per_cycle that takes longer than 1 / fmas_per_cycle (WSE-3: 8-wide
    fp16 SIMD behind a 16 B/cycle port; WSE-2's 4-wide unit is not). Where this holds, a
    datapath bound by its vector work is bound by local memory (bound "local_memory")."""
    return 2 * 2.0 / w.mem_read_bytes_per_cycle > 1.0 / w.fmas_per_cycle(dtype)


def relay_cycles(w: WaferNumbers, *, hops, nbytes):
    """A message of `nbytes` forwarded in software through `hops` PEs: each hop the router
    hop (alpha), a routing stage (beta: header parsing and re-sending by software, PLMR §3.1
    "if the number of routing paths exceeds hardware limits, messages must be relayed
    through multiple intermediate cores, introducing additional β latency") and the message
    received whole and re-sent at RELAY_BYTES_PER_CYCLE (store and forward)."""
    return hops * (w.hop_cycles + w.stage_cycles + nbytes / RELAY_BYTES_PER_CYCLE)


def owner_steps(P, tau=0.0):
    """A panel owned by position s of a line at step s (s = 0 .. P-1) reaches the farthest PE
    d_s = max(s, P-1-s) hops away. Over the steps with d_s >= tau: (how many, sum of d_s)."""
    P = np.asarray(P, float) if not hasattr(P, "dims") else P
    dmin = np.floor(P / 2.0)
    lo = np.maximum(np.ceil(tau), dmin)
    n = np.maximum(P - lo, 0.0)  # distances lo .. P-1, each on two steps ...
    once = (lo == dmin) & (P % 2 == 1) & (n > 0)  # ... but the middle of an odd line on one
    return 2.0 * n - once, (lo + P - 1.0) * n - once * dmin


def mesh_gemm(w: WaferNumbers, *, P, m, k, n, dtype="fp16", mapping="mesh") -> dict:
    """C[m, n] = A[m, k] @ B[k, n] on P x P PEs in P steps (MeshGEMM / Cannon).

    Per step each PE multiplies its tiles: ceil(k/P) x ceil(n/P) vector FMAs of length
    ceil(m/P), each issued by a @map call costing map_call_cycles. How the tiles move is the
    mapping's; each form below is what the PE-mesh simulation (workbench/simulate/gemm.py)
    measures when it runs that mechanism, within 11% over grids 2..24 (tests/simulate).

    mesh (WaferLLM's MeshGEMM, Cannon's schedule on rings folded onto the rows and columns):
    tiles start skewed; after each step's multiply but the last, each PE sends its A tile
    to its left and its B tile to its upper ring neighbour, two hops, overlapped with the
    multiply: P-1 shifts of max(compute, comm). Both tiles leave through the PE's one ramp
    (32 bits a cycle): the shift moves A + B, not the larger of them.

    gpu_style (what a shared-memory SUMMA does when ported): at step s the PEs of column s
    send their A tiles along their rows and those of row s their B tiles along their
    columns, every other PE forwarding in software (a routing stage, then the words streamed
    through); then all multiply; steps are bulk-synchronous. Software forwarding is the
    CE's work, so it cannot overlap the multiply (the former max(compute, comm) could not
    be met). At step s the farthest PE is d_s = max(s, P-1-s) hops from the owner
    (`owner_steps`); a PE forwards one panel at a time, so B's chain waits behind A's and
    adds d_s - 1 hops after A's d_s: comm_s = (2 d_s - 1)(alpha + beta) + A + B at link rate
    (+ beta where d_s > 1).

    t10 (compute-shift, T10 SOSP'24): the A tile rotates along the row and the B tile
    along the column of T10's logical ring, laid out in core-ID order as on a crossbar
    (WaferLLM §7: "treating each core as part of a distributed memory system
    interconnected by a crossbar, despite the actual mesh topology"). The ring's head-to-tail
    link spans the P-1 hops of the line (WaferLLM §5.1 (3), the flattened circle) and no
    route is reserved for it, so each shift's critical path is a tile relayed through the
    line in software (relay_cycles); WaferLLM §7.1: "dist-GEMM computations ... require
    each data element to traverse cores along the same row or column sequentially". Steps
    are bulk-synchronous as on the IPU T10 targets (compute, then shift): P multiplies and
    P-1 shifts. A PE relays one tile at a time: B's relay follows A's P-1 hops by P-2
    (not P-1: both start together), or B's own P-1 where B's hop is the slower.
    ladder (GEMM via allgather, WaferLLM §5.1 (1), the GPU/TPU-pod GEMM a shared-memory
    tile schedule becomes over unified memory): each of the P steps gathers the next A
    tile of the row panel and B tile of the column panel from their owner, "step-by-step
    ... via intermediate cores, introducing a communication latency of O[(α + β)N]"
    (relay_cycles over the d_s hops to the farthest core, B after A as in t10); load, then
    compute (a tile schedule's load-compute-store): step = compute + comm. Its working set
    is the gathered panels, O(1/N) per core (§5.1), where T10 keeps O(1/N²)."""
    mt, kt, nt = tiles(m, P), tiles(k, P), tiles(n, P)
    compute = kt * nt * (w.map_call_cycles + vector_cycles(w, n=mt, dtype=dtype))
    a_bytes, b_bytes = mt * kt * 2.0, kt * nt * 2.0
    shifts = np.maximum(P - 1.0, 0.0)  # a single PE holds every tile: nothing moves
    _check_mapping(mapping)
    if mapping == "mesh":
        step = (2.0 * w.hop_cycles + w.stage_cycles + (a_bytes + b_bytes) / w.link_bytes_per_cycle) * (P > 1)
        comm = shifts * step
        cycles = compute + shifts * np.maximum(compute, step)
        hops = 2.0 * shifts
    elif mapping == "gpu_style":
        n1, s1 = owner_steps(P, 1.0)
        n2, _ = owner_steps(P, 2.0)
        ab = w.hop_cycles + w.stage_cycles
        comm = ab * (2.0 * s1 - n1) + n1 * a_bytes / w.link_bytes_per_cycle \
            + n2 * (w.stage_cycles + b_bytes / w.link_bytes_per_cycle)
        cycles = P * compute + comm
        hops = 2.0 * s1 - n1
    else:  # t10, ladder: tiles relayed PE by PE in software, B's relay behind A's
        ha = relay_cycles(w, hops=1.0, nbytes=a_bytes)
        hb = relay_cycles(w, hops=1.0, nbytes=b_bytes)
        if mapping == "t10":
            comm = shifts * np.maximum(shifts * ha + np.maximum(P - 2.0, 0.0) * hb, shifts * hb)
            hops = shifts * np.maximum(2.0 * P - 3.0, 0.0)
        else:
            n_all, s_all = owner_steps(P, 0.0)
            n_ge, s_ge = owner_steps(P, hb / ha)  # steps where A's chain and B's last hop are longest
            comm = (ha + hb) * s_ge - hb * n_ge + hb * (s_all - s_ge)
            n1, s1 = owner_steps(P, 1.0)
            hops = 2.0 * s1 - n1
        cycles = P * compute + comm
    return {"cycles": cycles, "compute_cycles": P * compute, "comm_cycles": comm,
            "hops": hops, "flops": 2.0 * m * k * n,
            "grid_utilization": grid_utilization(P=P, dims=(m, k, n))}


def block_input_cycles(w: WaferNumbers, *, P, tokens, mapping="mesh"):
    """Cycles for a block's input (the activation row each of `tokens` tokens enters an
    attention or MLP block with) to reach the PEs of a P x P region that use it.

    mesh, gpu_style, t10: 0 here; their GEMV and GEMM forms move the operands (the
    replicated rows of WaferLLM's decode, the shifted or forwarded tiles).
    ladder: unified memory with no broadcast tree (WaferLLM §7: "we treated the distributed
    memory architecture of the chip, interconnected by mesh, as unified memory, requiring
    collective communication over the NoC to access data"; §3.2: such compilers "are unaware
    of the communication distance of each core"): each token's row passes the region's P²
    PEs one after another, a chain at alpha (hop_cycles) a hop, and the next token's follows
    it: tokens x P² x alpha. This form is read from WaferLLM's Ladder rows, whose per-layer
    prefill time grows by 1.9-2.2 cycles per PE² per token on all four models (Llama3-8B,
    LLaMA2-13B, CodeLLaMA-34B, QWen2-72B, grids 480-720): two blocks a layer at alpha = 1
    cycle, no constant fitted; the layer's weights reach it too (unified_weight_cycles)."""
    _check_mapping(mapping)
    return tokens * P * P * w.hop_cycles if mapping == "ladder" else 0.0 * tokens * P


# 16-bit values a wavelet (one link, one cycle) carries when it moves dense operands between
# PEs: one, with 16 bits of control beside it (Zhang et al.: "16-bit data and 16-bit control";
# the SDK White Paper's sparse wavelet: "a 16-bit index and a 16-bit data field"; wse_facts.md §2).
VALUES_PER_WAVELET = 1.0


def unified_weight_cycles(w: WaferNumbers, *, P, weight_elements, mapping="mesh"):
    """Cycles for one layer's weights (`weight_elements` 16-bit values: the matrices a pass
    through the layer multiplies by) to reach the P x P region that computes with them.

    mesh, gpu_style, t10: 0; each PE multiplies by the weight tile already in its SRAM.
    ladder: the wafer's SRAM as one unified memory (WaferLLM §7, see block_input_cycles), so
    the layer's weights are read from wherever in it they lie, not from the computing PEs:
    the read passes the program's PEs one after another at alpha a hop (program_pes x
    alpha, the whole-wafer form of block_input_cycles' chain over a region), and the weights
    enter the region over its P edge links, VALUES_PER_WAVELET a link a cycle
    (weight_elements / P). Once per layer per forward pass: in decode once per step,
    whatever the batch. Read from WaferLLM's twelve Ladder decode rows (Table 4 and the
    per-model tables; Llama3-8B, LLaMA2-13B, CodeLLaMA-34B, QWen2-72B on 420-660 grids):
    beyond the block inputs they keep 1.0-3.4M cycles per layer, rising with the layer's
    weights and, for the large models, falling with the grid; a least-squares fit of
    a + b x weights / P gives a = 0.75M, b = 1.25. This form takes a = program_pes and
    b = 1 from the spec, nothing fitted (tests/workloads/test_wafer_baselines.py)."""
    _check_mapping(mapping)
    if mapping != "ladder":
        return 0.0 * weight_elements * P
    return w.program_pes * w.hop_cycles + weight_elements / (P * VALUES_PER_WAVELET)


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
