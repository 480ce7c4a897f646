"""MeshGEMM as programs: C[m, n] = A[m, k] @ B[k, n] on P x P PEs, one mt x kt tile of A, one
kt x nt tile of B and one mt x nt tile of C per PE (ceil(dim / P), zero padded). Each step a
PE multiplies the tiles it holds: ceil(k/P) x ceil(n/P) @map calls, each one FMA vector of
length ceil(m/P), as primitives/mesh.py's `mesh_gemm` and WaferLLM's prefill kernel count
it. What differs is how the tiles reach the PEs (the mechanisms mesh_gemm's docstring
quotes):

- mesh (WaferLLM's MeshGEMM): Cannon's schedule on a ring folded onto each row and column
  (logical neighbours at most two hops apart). Tiles start skewed; every step each PE sends
  its A tile to its left and its B tile to its upper ring neighbour while it computes (two
  asynchronous transfers into second buffers), then waits: step = max(compute, shift);
- gpu_style: SUMMA with the panels forwarded PE by PE: at step s the PEs of column s send
  their A tiles along their rows and those of row s their B tiles along their columns, every
  other PE receiving and forwarding in software (a routing stage each), then all compute;
- t10 (T10's compute-shift): the ring in core-ID order, as on a crossbar: A tiles move one
  PE west and B tiles one PE north each step, and the wrap-around (PE 0 to PE P-1) has no
  route, so that tile is relayed through every PE of the line in software (received whole,
  a routing stage, re-sent at the relay rate); compute, then shift (bulk-synchronous);
- ladder (GEMM via allgather over unified memory): at step s the A tile of column s and the
  B tile of row s are relayed PE by PE from their owner to every PE of the line (received
  whole, a routing stage, re-sent at the relay rate); load, then compute.

The result is checked against numpy's A @ B exactly (small integers in fp32).
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice, check_positive
from .collectives import fold, ring_transfers
from .gemv import exact_data, pad_to
from .machine import Barrier, Compute, Forward, Program, Recv, Send, Wait

GEMM_MAPPINGS = ("mesh", "gpu_style", "t10", "ladder")


def _ring_routes(P, prefix, axis, step):
    """Route groups of the folded ring's shift along every row (axis x) or column (axis y),
    and each logical position's outgoing group."""
    src, dirs, hops, names = ring_transfers(P, step, axis)
    routes = {}
    lines = np.arange(P)
    for g in np.unique(names):
        sel = names == g
        pos = src[sel]
        other = np.repeat(lines, len(pos))
        along = np.tile(pos, P)
        xy = dict(x=along, y=other) if axis == "x" else dict(x=other, y=along)
        routes[f"{prefix}{g}"] = dict(**xy, direction=dirs[sel][0], hops=hops[sel][0])
    return routes, np.array([f"{prefix}{g}" for g in names], dtype=object)


def _hop_routes(P, prefix, axis):
    """One-hop transfers along every row (x) or column (y), both ways, in parity groups:
    `{prefix}{dir}{parity}` for the transfer from position q to q +- 1."""
    routes = {}
    q = np.arange(P)
    lines = np.arange(P)
    fwd, back = ("E", "W") if axis == "x" else ("S", "N")
    for d, sel in ((fwd, q <= P - 2), (back, q >= 1)):
        for par in (0, 1):
            pos = q[sel & (q % 2 == par)]
            if not len(pos):
                continue
            other, along = np.repeat(lines, len(pos)), np.tile(pos, P)
            xy = dict(x=along, y=other) if axis == "x" else dict(x=other, y=along)
            routes[f"{prefix}{d}{par}"] = dict(**xy, direction=d, hops=1)
    return routes


# Tiles of A and of B a PE holds at once: Cannon's current and next; SUMMA's own tile and its
# two panel buffers; T10's current, next and the wrap-around tile passing through; Ladder's
# own tile and the gathered panel.
GEMM_BUFFERS = {"mesh": (2, 2), "gpu_style": (3, 3), "t10": (3, 3), "ladder": (2, 2)}


def gemm_sram_bytes(*, P, m, k, n, mapping="mesh", dtype="fp16"):
    """Bytes of buffers a PE of the GEMM holds: its A and B tiles (GEMM_BUFFERS of each) and its
    C tile."""
    eb = 4.0 if dtype == "fp32" else 2.0
    mt, kt, nt = (np.ceil(np.asarray(x, float) / P) for x in (m, k, n))
    a, b = GEMM_BUFFERS[mapping]
    return (a * mt * kt + b * kt * nt + mt * nt) * eb


def gemm_program(nums, *, P: int, m: int, k: int, n: int, mapping: str = "mesh", dtype: str = "fp16",
                 seed: int = 0) -> Program:
    check_choice("mapping", mapping, GEMM_MAPPINGS)
    for name, v in (("P", P), ("m", m), ("k", k), ("n", n)):
        check_positive(name, v, integer=True)
    P, m, k, n = int(P), int(m), int(k), int(n)
    mt, kt, nt = -(-m // P), -(-k // P), -(-n // P)
    eb = 4.0 if dtype == "fp32" else 2.0
    rng = np.random.default_rng(seed)
    A, B = pad_to(exact_data(rng, m, k), P * mt, P * kt), pad_to(exact_data(rng, k, n), P * kt, P * nt)
    Ab, Bb = A.reshape(P, mt, P, kt).transpose(0, 2, 1, 3), B.reshape(P, kt, P, nt).transpose(0, 2, 1, 3)
    fma = float(nums.vector_op_cycles(mt, dtype=dtype, reads=2.0, writes=1.0, elem_bytes=eb))
    step_cycles = kt * nt * (nums.map_call_cycles + fma)
    build = {"mesh": _cannon, "gpu_style": _summa, "t10": _t10, "ladder": _ladder}[mapping]
    mem, routes, ops, li, lj = build(P, Ab, Bb, mt, kt, nt, step_cycles, nums)
    Cb = (A @ B).reshape(P, mt, P, nt).transpose(0, 2, 1, 3)  # [i, j] blocks
    expected = Cb[li, lj].reshape(P * P, -1)
    sram = gemm_sram_bytes(P=P, m=m, k=k, n=n, mapping=mapping, dtype=dtype)
    info = dict(kernel="gemm", mapping=mapping, P=P, m=m, k=k, n=n, dtype=dtype)
    return Program(name=f"gemm_{mapping}_{P}", width=P, height=P, routes=routes, ops=ops,
                   sram_bytes=np.full(P * P, sram), result=lambda: mem["C"].reshape(P * P, -1), expected=expected,
                   dtype=dtype, elem_bytes=eb, info=info)


def _mac(mem, a="A", b="B"):
    def eff(idx):
        mem["C"][idx] += np.matmul(mem[a][idx], mem[b][idx])
    return eff


def _setter(mem, key):
    def into(idx, v):
        mem[key][idx] = v.reshape(mem[key][idx].shape)
    return into


def _cannon(P, Ab, Bb, mt, kt, nt, step_cycles, nums):
    finv = np.empty(P, int)
    finv[fold(P)] = np.arange(P)
    X, Y = np.arange(P * P) % P, np.arange(P * P) // P
    i, j = finv[Y], finv[X]  # logical row and column of each PE
    q = (i + j) % P
    mem = {"A": Ab[i, q].copy(), "B": Bb[q, j].copy(), "C": np.zeros((P * P, mt, nt), np.float32)}
    mem["An"], mem["Bn"] = np.zeros_like(mem["A"]), np.zeros_like(mem["B"])
    ra, a_out = _ring_routes(P, "A", "x", -1) if P > 1 else ({}, None)
    rb, b_out = _ring_routes(P, "B", "y", -1) if P > 1 else ({}, None)
    routes = {**ra, **rb}
    every = np.ones(P * P, bool)
    ops = []
    for s in range(P):
        shift = s < P - 1 and P > 1
        if shift:
            ops += [Recv(every, a_out[(j + 1) % P], mt * kt, into=_setter(mem, "An"), tag="ra"),
                    Recv(every, b_out[(i + 1) % P], kt * nt, into=_setter(mem, "Bn"), tag="rb"),
                    Send(every, a_out[j], mt * kt, payload=lambda idx: mem["A"][idx], tag="sa"),
                    Send(every, b_out[i], kt * nt, payload=lambda idx: mem["B"][idx], tag="sb")]
        ops.append(Compute(every, step_cycles, effect=_mac(mem)))
        if shift:
            def swap(idx):
                mem["A"][idx], mem["B"][idx] = mem["An"][idx], mem["Bn"][idx]
            ops += [Wait(every, ("sa", "sb", "ra", "rb")), Compute(every, 0.0, effect=swap)]
    return mem, routes, ops, i, j


def _summa(P, Ab, Bb, mt, kt, nt, step_cycles, nums):
    X, Y = np.arange(P * P) % P, np.arange(P * P) // P
    own = {"A": Ab[Y, X].copy(), "B": Bb[Y, X].copy()}
    mem = {f"{key}{b}": np.zeros_like(own[key]) for key in "AB" for b in (0, 1)}
    mem["C"] = np.zeros((P * P, mt, nt), np.float32)
    routes = {**_hop_routes(P, "A", "x"), **_hop_routes(P, "B", "y")}
    name = np.vectorize(lambda p, d, q: f"{p}{d}{q % 2}", otypes=[object])
    rate = nums.stream_words_per_cycle(elem_bytes=2.0, writes=1.0)
    every = np.ones(P * P, bool)

    def panels(s):
        """Step s's panels into buffers s % 2: column s sends its A tiles along the rows, row s its
        B tiles along the columns, every PE between forwarding in software (after its routing
        stage) and keeping a copy; the PEs at the ends receive."""
        ops, b = [], s % 2
        for key, pos, fwd, back, size in (("A", X, "E", "W", mt * kt), ("B", Y, "S", "N", kt * nt)):
            owner = pos == s

            def mine(idx, key=key, b=b):
                mem[f"{key}{b}"][idx] = own[key][idx]
            ops.append(Compute(owner, 0.0, effect=mine))
            for d, ok in ((fwd, s <= P - 2), (back, s >= 1)):
                if ok:
                    ops.append(Send(owner, name(key, d, pos), size, payload=lambda idx, key=key: own[key][idx],
                                    tag=f"s{key}{d}{b}"))
            for d, mid, end, prev in ((fwd, (pos > s) & (pos < P - 1), (pos == P - 1) & (s < P - 1), pos - 1),
                                      (back, (pos < s) & (pos > 0), (pos == 0) & (s > 0), pos + 1)):
                ops += [Forward(mid, name(key, d, prev), name(key, d, pos), size, combine=lambda idx, v: v,
                                into=_setter(mem, f"{key}{b}"), rate=rate),
                        Recv(end, name(key, d, prev), size, into=_setter(mem, f"{key}{b}"), tag=f"r{key}{b}")]
        return ops
    ops = []
    for s in range(P):  # bulk-synchronous, as a ported shared-memory SUMMA: panels, compute, barrier
        b = s % 2
        ops += panels(s)
        ops += [Wait(every, (f"rA{b}", f"rB{b}")),
                Compute(every, step_cycles, effect=_mac(mem, f"A{b}", f"B{b}")),
                Wait(every, tuple(f"s{k}{d}{b}" for k, d in (("A", "E"), ("A", "W"), ("B", "S"), ("B", "N")))),
                Barrier(every)]
    return mem, routes, ops, Y, X


def _t10(P, Ab, Bb, mt, kt, nt, step_cycles, nums):
    X, Y = np.arange(P * P) % P, np.arange(P * P) // P
    q = (X + Y) % P  # Cannon's skew, in core-ID order
    mem = {"A": Ab[Y, q].copy(), "B": Bb[q, X].copy(), "C": np.zeros((P * P, mt, nt), np.float32)}
    mem["An"], mem["Bn"], mem["Ar"], mem["Br"] = (np.zeros_like(mem["A"]), np.zeros_like(mem["B"]),
                                                  np.zeros_like(mem["A"]), np.zeros_like(mem["B"]))
    routes = {**_hop_routes(P, "A", "x"), **_hop_routes(P, "B", "y")}
    name = np.vectorize(lambda p, d, q: f"{p}{d}{q % 2}", otypes=[object])
    every = np.ones(P * P, bool)
    ops = []
    for s in range(P):
        ops.append(Compute(every, step_cycles, effect=_mac(mem)))
        if s == P - 1 or P == 1:
            break
        lines = (("A", X, "E", "W", mt * kt), ("B", Y, "S", "N", kt * nt))
        for key, pos, fwd, back, size in lines:
            # every PE but the first sends its tile one hop back; the first's tile goes forward,
            # relayed by every PE in between to the last
            first, last, mid = pos == 0, pos == P - 1, (pos > 0) & (pos < P - 1)
            ops += [Recv(~last, name(key, back, pos + 1), size, into=_setter(mem, f"{key}n"), tag=f"r{key}"),
                    Recv(last, name(key, fwd, pos - 1), size, into=_setter(mem, f"{key}n"), tag=f"r{key}"),
                    Recv(mid, name(key, fwd, pos - 1), size, into=_setter(mem, f"{key}r"), tag=f"w{key}"),
                    Send(~first, name(key, back, pos), size, payload=lambda idx, key=key: mem[key][idx],
                         tag=f"s{key}", rate="relay"),
                    Send(first, name(key, fwd, pos), size, payload=lambda idx, key=key: mem[key][idx],
                         tag=f"s{key}", rate="relay")]
        for key, pos, fwd, back, size in lines:
            mid = (pos > 0) & (pos < P - 1)
            ops += [Wait(mid, (f"w{key}",)),
                    Send(mid, name(key, fwd, pos), size, payload=lambda idx, key=key: mem[f"{key}r"][idx],
                         rate="relay")]
        ops += [Wait(every, ("rA", "rB", "sA", "sB")), Barrier(every)]

        def swap(idx):
            mem["A"][idx], mem["B"][idx] = mem["An"][idx], mem["Bn"][idx]
        ops.append(Compute(every, 0.0, effect=swap))
    return mem, routes, ops, Y, X


def _ladder(P, Ab, Bb, mt, kt, nt, step_cycles, nums):
    X, Y = np.arange(P * P) % P, np.arange(P * P) // P
    mem = {"Aown": Ab[Y, X].copy(), "Bown": Bb[Y, X].copy(), "A": np.zeros_like(Ab[Y, X]),
           "B": np.zeros_like(Bb[Y, X]), "C": np.zeros((P * P, mt, nt), np.float32)}
    routes = {**_hop_routes(P, "A", "x"), **_hop_routes(P, "B", "y")}
    name = np.vectorize(lambda p, d, q: f"{p}{d}{q % 2}", otypes=[object])
    every = np.ones(P * P, bool)
    ops = []
    for s in range(P):
        lines = (("A", "Aown", X, "E", "W", mt * kt), ("B", "Bown", Y, "S", "N", kt * nt))
        for key, own, pos, fwd, back, size in lines:
            owner = pos == s

            def mine(idx, key=key, own=own):
                mem[key][idx] = mem[own][idx]
            ops.append(Compute(owner, 0.0, effect=mine))
            for d, ok in ((fwd, s <= P - 2), (back, s >= 1)):
                if ok:
                    ops.append(Send(owner, name(key, d, pos), size, payload=lambda idx, own=own: mem[own][idx],
                                    tag=f"s{key}{d}", rate="relay"))
            for d, away, prev in ((fwd, pos > s, pos - 1), (back, pos < s, pos + 1)):
                ops.append(Recv(away, name(key, d, prev), size, into=_setter(mem, key), tag=f"r{key}"))
        for key, own, pos, fwd, back, size in lines:
            for d, away, ends in ((fwd, pos > s, pos == P - 1), (back, pos < s, pos == 0)):
                ops += [Wait(away, (f"r{key}",)),
                        Send(away & ~ends, name(key, d, pos), size, payload=lambda idx, key=key: mem[key][idx],
                             rate="relay")]
        ops.append(Compute(every, step_cycles, effect=_mac(mem)))
        ops += [Wait(every, ("sAE", "sAW", "sBS", "sBN")), Barrier(every)]
    return mem, routes, ops, Y, X
