"""Allreduces along every column of a P x P region at once, as operations for machine.py:
after them every PE of column x holds the sum over the column of `mem[buf]` (n, elems).

Each follows the mechanism primitives/mesh.py's `line_allreduce` states for its mapping:
- `ktree` (mesh, WaferLLM's K-tree with K=2): ceil(log2 P) stages rooted in the middle row
  (as WaferLLM's `two_tree_allreduce_y` roots its second phase): each half reduces toward
  the middle in levels (at level l the PEs 2^l (2j + 1) rows from their half's root send
  their partial sums 2^l hops; a software stage, the message, the receiver's add), the top
  half's sum joins the root, which then multicasts the total up and down the column (one
  routed broadcast, both ways: every router forwards and delivers). About P hops in all; a
  color per level, one for the root's stage and one for the broadcast;
- `chain` (gpu_style; t10 with a @map call instead of a routing stage per PE): from the last
  row to row 0 and back, one hop at a time, every PE in between streaming the message
  through its CE (adding its own on the way in, keeping a copy on the way out);
- `ring` (ladder): reduce-scatter then all-gather around a ring folded onto the column
  (logical neighbours at most two hops apart, WaferLLM's interleaving), 2(P-1) steps, each
  moving a chunk of ceil(elems / P) values and adding it on the first P-1.
"""
from __future__ import annotations

import numpy as np

from .machine import Compute, Forward, Recv, Send, Wait

ALLREDUCES = ("ktree", "chain", "ring")


def fold(P: int) -> np.ndarray:
    """Physical position of each logical ring position on a line of P PEs, interleaved so
    that ring neighbours are at most two hops apart: 0, 2, 4, ..., then back ..., 3, 1."""
    ell = np.arange(P)
    half = (P + 1) // 2
    return np.where(ell < half, 2 * ell, 2 * (P - 1 - ell) + 1)


def ring_transfers(P: int, step: int, axis: str):
    """For each logical position l, the transfer from fold(P)[l] to fold(P)[(l + step) % P] along
    `axis` ("x": a row, "y": a column): (source position, direction, hops, group suffix).
    Transfers of one group never share a router (the suffix separates them)."""
    phys = fold(P)
    src, dst = phys, phys[(np.arange(P) + step) % P]
    fwd = dst > src
    dirs = np.where(fwd, "E" if axis == "x" else "S", "W" if axis == "x" else "N")
    hops = np.abs(dst - src)
    names = np.array([f"{d}{h}_{s % 4}" for d, h, s in zip(dirs, hops, src)], dtype=object)
    return src, dirs, hops, names


def _grid(P):
    n = P * P
    return np.arange(n) % P, np.arange(n) // P  # x (column), y (row)


def allreduce(kind: str, *, P: int, mem: dict, buf: str, elems: int, nums, dtype="fp16", elem_bytes=2.0,
              setup="stage") -> tuple[dict, list]:
    """(routes, operations) of an allreduce of mem[buf] along every column."""
    if P == 1:
        return {}, []
    return {"ktree": _ktree, "chain": _chain, "ring": _ring}[kind](P, mem, buf, elems, nums, dtype, elem_bytes,
                                                                   setup)


def _add(nums, elems, dtype, elem_bytes):
    return float(nums.vector_op_cycles(elems, dtype=dtype, reads=2.0, writes=1.0, elem_bytes=elem_bytes))


def _ktree(P, mem, buf, elems, nums, dtype, eb, setup):
    X, Y = _grid(P)
    c = P // 2  # the root: the middle row (WaferLLM's root_2nd_phase)
    mem["tmp"] = np.zeros_like(mem[buf])
    add = _add(nums, elems, dtype, eb)
    routes, ops = {}, []

    def tmp_into(idx, v):
        mem["tmp"][idx] = v

    def add_tmp(idx):
        mem[buf][idx] += mem["tmp"][idx]

    def stage(name, snd, rcv, direction, hops):
        routes[name] = dict(x=X[snd], y=Y[snd], direction=direction[snd] if np.ndim(direction) else direction,
                            hops=hops)
        return [Send(snd, name, elems, payload=lambda idx: mem[buf][idx], setup=setup),
                Recv(rcv, name, elems, into=tmp_into, tag="tree"), Wait(rcv, ("tree",)),
                Compute(rcv, add, effect=add_tmp, kind="add")]
    # each half reduces toward the middle: rows c-1 (top half, sending south) and c (bottom
    # half, sending north), at distance r from their half's root; level l: r = 2^l (2j + 1) send
    top = Y < c
    r = np.where(top, c - 1 - Y, Y - c)
    size = np.where(top, c, P - c)
    direction = np.where(top, "S", "N").astype(object)
    for lev in range(int(np.ceil(np.log2(max(P - c, 1))))):
        d = 2 ** lev
        snd = r % (2 * d) == d
        rcv = (r % (2 * d) == 0) & (r + d < size)
        ops += stage(f"tree{lev}", snd, rcv, direction, d)
    if c >= 1:  # the top half's sum joins the bottom half's at the root
        ops += stage("tree_root", Y == c - 1, Y == c, "S", 1)
    root = Y == c

    def keep(idx, v):
        mem[buf][idx] = v
    # the root multicasts the sum up and down its column: one routed broadcast, both ways
    up, down = root & (c >= 1), root & (c < P - 1)
    routes["bcast"] = dict(x=np.r_[X[up], X[down]], y=np.r_[Y[up], Y[down]],
                           direction=["N"] * int(up.sum()) + ["S"] * int(down.sum()),
                           hops=np.r_[np.full(int(up.sum()), c), np.full(int(down.sum()), P - 1 - c)],
                           deliver_all=True)
    ops += [Send(root, "bcast", elems, payload=lambda idx: mem[buf][idx], setup=setup),
            Recv(~root, "bcast", elems, into=keep, tag="bcast"), Wait(~root, ("bcast",))]
    return routes, ops


def _chain(P, mem, buf, elems, nums, dtype, eb, setup):
    X, Y = _grid(P)
    mem["tmp"] = np.zeros_like(mem[buf])
    routes = {}
    for par in (0, 1):
        up = (Y >= 1) & (Y % 2 == par)
        dn = (Y <= P - 2) & (Y % 2 == par)
        if up.any():
            routes[f"up{par}"] = dict(x=X[up], y=Y[up], direction="N", hops=1)
        if dn.any():
            routes[f"dn{par}"] = dict(x=X[dn], y=Y[dn], direction="S", hops=1)
    name = np.vectorize(lambda s, p: f"{s}{p}", otypes=[object])
    mid = (Y >= 1) & (Y <= P - 2)
    last, top = Y == P - 1, Y == 0
    add_rate = nums.stream_words_per_cycle(dtype=dtype, elem_bytes=eb, reads=1.0)
    copy_rate = nums.stream_words_per_cycle(dtype=dtype, elem_bytes=eb, writes=1.0)

    def tmp_into(idx, v):
        mem["tmp"][idx] = v

    def add_tmp(idx):
        mem[buf][idx] += mem["tmp"][idx]

    def keep(idx, v):
        mem[buf][idx] = v
    ops = [Send(last, name("up", Y % 2), elems, payload=lambda idx: mem[buf][idx], setup=setup),
           Forward(mid, name("up", (Y + 1) % 2), name("up", Y % 2), elems,
                   combine=lambda idx, v: v + mem[buf][idx], setup=setup, rate=add_rate),
           Recv(top, "up1", elems, into=tmp_into, tag="up"), Wait(top, ("up",)),
           Compute(top, _add(nums, elems, dtype, eb), effect=add_tmp, kind="add"),
           Send(top, "dn0", elems, payload=lambda idx: mem[buf][idx], setup=setup),
           Forward(mid, name("dn", (Y - 1) % 2), name("dn", Y % 2), elems, combine=lambda idx, v: v, into=keep,
                   setup=setup, rate=copy_rate),
           Recv(last, name("dn", (Y - 1) % 2), elems, into=keep, tag="dn"), Wait(last, ("dn",))]
    return routes, ops


def _ring(P, mem, buf, elems, nums, dtype, eb, setup):
    X, Y = _grid(P)
    ch = int(np.ceil(elems / P))
    mem["_ring"] = np.zeros((P * P, P, ch), np.float32)
    mem["tmp"] = np.zeros((P * P, ch), np.float32)

    def load(idx):  # the partial sums as P chunks of ch (zero padded)
        v = np.zeros((len(idx), P * ch), np.float32)
        v[:, :elems] = mem[buf][idx].reshape(len(idx), -1)
        mem["_ring"][idx] = v.reshape(len(idx), P, ch)
    src, dirs, hops, names = ring_transfers(P, +1, "y")
    routes = {}
    for g in np.unique(names):
        sel = names == g
        pos = src[sel]
        routes[g] = dict(x=np.repeat(np.arange(P), len(pos)), y=np.tile(pos, P), direction=dirs[sel][0],
                         hops=hops[sel][0])
    ell = np.empty(P, int)
    ell[fold(P)] = np.arange(P)
    L = ell[Y]  # each PE's ring position
    out = names[L]  # the group it sends on
    inn = names[(L - 1) % P]  # the group its predecessor sends on
    allpe = np.ones(P * P, bool)
    ops = [Compute(allpe, 0.0, effect=load)]
    add = _add(nums, ch, dtype, eb)

    def chunk_of(offset):
        return lambda idx: mem["_ring"][idx, (L[idx] + offset) % P]

    def tmp_into(idx, v):
        mem["tmp"][idx] = v

    for s in range(P - 1):
        def add_chunk(idx, s=s):
            mem["_ring"][idx, (L[idx] - s - 1) % P] += mem["tmp"][idx]
        ops += [Recv(allpe, inn, ch, into=tmp_into, tag="ring"), Send(allpe, out, ch, payload=chunk_of(-s), setup=setup),
                Wait(allpe, ("ring",)), Compute(allpe, add, effect=add_chunk, kind="add")]
    for s in range(P - 1):
        def store(idx, v, s=s):
            mem["_ring"][idx, (L[idx] - s) % P] = v
        ops += [Recv(allpe, inn, ch, into=store, tag="ring"), Send(allpe, out, ch, payload=chunk_of(1 - s), setup=setup),
                Wait(allpe, ("ring",))]

    def unpad(idx):
        mem[buf][idx] = mem["_ring"][idx].reshape(len(idx), -1)[:, :elems].reshape(mem[buf][idx].shape)
    ops.append(Compute(allpe, 0.0, effect=unpad))
    return routes, ops
