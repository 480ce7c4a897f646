"""The KV-cache update as a program: `generate` new tokens appended to one layer's cache on a
P x P region, after `tokens` already there. A token's K and V (`kv_elems` values) are split
over the P columns (ceil(kv_elems / P) per PE, as WaferLLM's decode kernel lays the cache
out: `dim_p_pe x seq_len_p_pe`), and a new token's slice is in the bottom row (where the
QKV projection's allreduce left it). The two placements of primitives/mesh.py
(KV_PLACEMENT):

- spread (mesh, t10; WaferLLM's shift-based KV, Sec 4.3): the column's rows hold the
  sequence in order, oldest at the top, balanced (row y holds floor or ceil of T / P
  tokens, the extra ones in the top rows). The token T + 1 needs one more in row
  r = T mod P: every row below r passes its oldest token one hop up, all at once, and the
  bottom row keeps the new one. One hop, whatever P;
- concat (gpu_style, ladder; PagedAttention-style append): the bottom row keeps every new
  token (a local store); the prompt's tokens stay spread as prefill wrote them.

The PE whose buffer is fullest ends the sequence: SRAM is checked for the most tokens any
PE holds (`kv_tokens_per_pe`) plus the slice a new token lands in, so the largest
`tokens + generate` that fits is the closed form's `kv_capacity_tokens` with that slice
taken from the free bytes. The cache's contents are checked value by value.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, check_choice, check_positive
from ..primitives.mesh import KV_PLACEMENT
from .machine import Compute, Program, Recv, Send, Wait


def kv_tokens_per_pe(*, P: int, tokens: int, generate: int, mapping: str) -> int:
    """Most tokens any PE holds after the update."""
    total = tokens + generate
    if KV_PLACEMENT[mapping] == "spread":
        return -(-total // P)
    # the bottom row: its share of the prompt (the floor: extra tokens sit in the top rows) and
    # every new token; or a top row's share of the prompt, if more
    return max(-(-tokens // P), tokens // P + generate)


def kv_sram_bytes(*, P: int, kv_elems: int, tokens: int, generate: int, mapping: str, dtype: str = "fp16") -> float:
    """Bytes per PE the update's buffers take: the most tokens any PE holds, and the slice a new
    token lands in."""
    eb = 4.0 if dtype == "fp32" else 2.0
    sl = -(-int(kv_elems) // int(P))
    return (kv_tokens_per_pe(P=P, tokens=tokens, generate=generate, mapping=mapping) + 1) * sl * eb


def kv_program(nums, *, P: int, kv_elems: int, tokens: int = 0, generate: int = 4, mapping: str = "mesh",
               dtype: str = "fp16", seed: int = 0) -> Program:
    check_choice("mapping", mapping, KV_PLACEMENT)
    for name, v in (("P", P), ("kv_elems", kv_elems), ("generate", generate)):
        check_positive(name, v, integer=True)
    if not isinstance(tokens, (int, np.integer)) or tokens < max(int(P) - 1, 0):
        raise InputError(f"tokens={tokens!r} is not allowed; allowed: a whole number >= P - 1 = {int(P) - 1} "
                         "(the prompt's tokens fill every row before the shifts start)")
    P, E, T0, G = int(P), int(kv_elems), int(tokens), int(generate)
    sl = -(-E // P)
    eb = 4.0 if dtype == "fp32" else 2.0
    n = P * P
    X, Y = np.arange(n) % P, np.arange(n) // P
    rng = np.random.default_rng(seed)
    seq = rng.integers(-100, 101, size=(T0 + G, P * sl)).astype(np.float32)  # token t's values, padded
    cap = kv_tokens_per_pe(P=P, tokens=T0, generate=G, mapping=mapping)
    mem = {"kv": np.zeros((n, cap + 1, sl), np.float32), "cnt": np.zeros(n, np.int64),
           "new": np.zeros((n, sl), np.float32), "in": np.zeros((n, sl), np.float32)}
    counts = np.array([T0 // P + (y < T0 % P) for y in range(P)])  # balanced, extras at the top
    first = np.r_[0, np.cumsum(counts)[:-1]]
    for y in range(P):
        for x in range(P):
            pe = y * P + x
            mem["kv"][pe, :counts[y]] = seq[first[y]:first[y] + counts[y], x * sl:(x + 1) * sl]
            mem["cnt"][pe] = counts[y]
    spread = KV_PLACEMENT[mapping] == "spread"
    routes = {}
    for par in (0, 1):  # one hop up; rows alternate colors (a router both receives and sends)
        sel = (Y >= 1) & (Y % 2 == par)
        if spread and sel.any():
            routes[f"up{par}"] = dict(x=X[sel], y=Y[sel], direction="N", hops=1)
    up_out = np.array([f"up{y % 2}" for y in Y], dtype=object)
    up_in = np.array([f"up{(y + 1) % 2}" for y in Y], dtype=object)
    store = float(nums.vector_op_cycles(sl, dtype=dtype, reads=1.0, writes=1.0, elem_bytes=eb))
    bottom = Y == P - 1
    ops = []

    def append(idx):
        mem["kv"][idx, mem["cnt"][idx]] = mem["new"][idx]
        mem["cnt"][idx] += 1
    for g in range(G):
        T = T0 + g

        def arrive(idx, g=g):  # the new token's slice, as the QKV allreduce left it
            mem["new"][idx] = seq[T0 + g].reshape(P, sl)[X[idx]]
        ops.append(Compute(bottom, 0.0, effect=arrive))
        ops.append(Compute(bottom, store, effect=append))  # the bottom row keeps it
        r = T % P
        if spread and r < P - 1:
            give = Y > r  # rows below r pass their oldest token up
            take = (Y >= r) & (Y < P - 1)

            def oldest(idx):
                return mem["kv"][idx, 0]

            def received(idx, v):
                mem["in"][idx] = v

            def shift(idx, r=r):
                k = mem["kv"][idx]
                g_ = Y[idx] > r
                k[g_, :-1] = k[g_, 1:]  # the oldest left
                mem["cnt"][idx[g_]] -= 1
                t_ = (Y[idx] >= r) & (Y[idx] < P - 1)
                k[t_, mem["cnt"][idx[t_]]] = mem["in"][idx[t_]]
                mem["cnt"][idx[t_]] += 1
                mem["kv"][idx] = k
            ops += [Recv(take, up_in, sl, into=received, tag="kv"), Send(give, up_out, sl, payload=oldest),
                    Wait(take, ("kv",)), Compute(give | take, store, effect=shift)]

    def result():  # each column's rows concatenated, oldest first
        out = np.zeros((T0 + G, P * sl), np.float32)
        for x in range(P):
            col = [mem["kv"][y * P + x, :mem["cnt"][y * P + x]] for y in range(P)]
            vals = np.concatenate(col)
            if len(vals) != T0 + G:
                return np.full((1,), np.nan, np.float32)
            out[:, x * sl:(x + 1) * sl] = vals
        return out
    expected = seq  # the sequence in order, whichever placement
    if not spread:
        def result():  # noqa: F811  (the prompt by rows, then the bottom row's appended tokens)
            out = np.zeros((T0 + G, P * sl), np.float32)
            for x in range(P):
                col = [mem["kv"][y * P + x, :counts[y]] for y in range(P)]
                col.append(mem["kv"][(P - 1) * P + x, counts[P - 1]:mem["cnt"][(P - 1) * P + x]])
                vals = np.concatenate(col)
                if len(vals) != T0 + G:
                    return np.full((1,), np.nan, np.float32)
                out[:, x * sl:(x + 1) * sl] = vals
            return out
    info = dict(kernel="kv", mapping=mapping, P=P, kv_elems=E, tokens=T0, generate=G, dtype=dtype,
                tokens_per_pe=cap, placement=KV_PLACEMENT[mapping])
    return Program(name=f"kv_{mapping}_{P}", width=P, height=P, routes=routes, ops=ops,
                   sram_bytes=np.full(n, kv_sram_bytes(P=P, kv_elems=E, tokens=T0, generate=G, mapping=mapping,
                                                       dtype=dtype)), result=result, expected=expected, dtype=dtype,
                   elem_bytes=eb, info=info)
