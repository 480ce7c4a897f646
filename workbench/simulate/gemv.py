"""MeshGEMV as a program: y[rows, n] = x[rows, k] @ W[k, n] with W tiled over P x P PEs.

PE (x, y) holds the W tile of k-rows y and n-columns x (ceil(k/P) x ceil(n/P), zero padded)
and the x tile of its k-rows; it computes its partial sums as WaferLLM's decode kernel does
(`vecmat_computation`: per row, a @map call per local x element, each one FMA vector of
length ceil(n/P)), then the partial sums are allreduced along the column (collectives.py)
by the mapping's mechanism: mesh (K-tree), gpu_style (chain), t10 (chain of neighbour
shifts, a @map call per hop), ladder (ring). Afterwards every PE of column x holds that
column's y, which is checked against numpy's x @ W exactly: the data are small integers in
fp32, so every order of the adds gives the same sums and only wrong data movement differs.
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice, check_positive
from .collectives import allreduce
from .machine import Compute, Program

GEMV_ALLREDUCE = {"mesh": ("ktree", "stage"), "gpu_style": ("chain", "stage"), "t10": ("chain", "map_call"),
                  "ladder": ("ring", "stage")}
ACC_BYTES = 2.0  # fp16 partial sums, as primitives/mesh.py and WaferLLM's kernels keep them


def exact_data(rng, *shape) -> np.ndarray:
    """Small integers in fp32: every sum of products stays exact in fp32 (below 2^24)."""
    return rng.integers(-4, 5, size=shape).astype(np.float32)


def tile_grid(M: np.ndarray, P: int, rt: int, ct: int) -> np.ndarray:
    """(P*rt, P*ct) -> (P*P, rt, ct): PE y*P + x gets block row y, block column x."""
    return M.reshape(P, rt, P, ct).transpose(0, 2, 1, 3).reshape(P * P, rt, ct)


def pad_to(M: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), np.float32)
    out[:M.shape[0], :M.shape[1]] = M
    return out


def gemv_sram_bytes(*, P, k, n, rows=1, mapping="mesh", dtype="fp16"):
    """Bytes of buffers a PE of the GEMV holds: its W tile and x tile (at the dtype's width),
    its partial sums (fp16, ACC_BYTES) and the allreduce's receive buffer (the tree's and the
    chain's: one message; the ring's: its P chunks and one chunk)."""
    eb = 4.0 if dtype == "fp32" else 2.0
    kt, nt = np.ceil(np.asarray(k, float) / P), np.ceil(np.asarray(n, float) / P)
    acc = rows * nt * ACC_BYTES
    chunk = np.ceil(rows * nt / P)
    extra = (P * chunk + chunk) * ACC_BYTES if GEMV_ALLREDUCE[mapping][0] == "ring" else acc
    return kt * nt * eb + rows * kt * eb + acc + extra


def gemv_program(nums, *, P: int, k: int, n: int, rows: int = 1, mapping: str = "mesh", dtype: str = "fp16",
                 seed: int = 0) -> Program:
    check_choice("mapping", mapping, GEMV_ALLREDUCE)
    for name, v in (("P", P), ("k", k), ("n", n), ("rows", rows)):
        check_positive(name, v, integer=True)
    P, k, n, rows = int(P), int(k), int(n), int(rows)
    kt, nt = -(-k // P), -(-n // P)
    eb = 4.0 if dtype == "fp32" else 2.0
    rng = np.random.default_rng(seed)
    x, W = exact_data(rng, rows, k), exact_data(rng, k, n)
    xp, Wp = pad_to(x, rows, P * kt), pad_to(W, P * kt, P * nt)
    Y = np.arange(P * P) // P
    mem = {"W": tile_grid(Wp, P, kt, nt), "x": xp.reshape(rows, P, kt).transpose(1, 0, 2)[Y],
           "y": np.zeros((P * P, rows * nt), np.float32)}
    elems = rows * nt
    fma = float(nums.vector_op_cycles(nt, dtype=dtype, reads=2.0, writes=1.0, elem_bytes=eb))

    def partial(idx):
        mem["y"][idx] = np.matmul(mem["x"][idx], mem["W"][idx]).reshape(len(idx), -1)
    ops = [Compute(np.ones(P * P, bool), rows * kt * (nums.map_call_cycles + fma), effect=partial)]
    kind, setup = GEMV_ALLREDUCE[mapping]
    routes, red = allreduce(kind, P=P, mem=mem, buf="y", elems=elems, nums=nums, dtype=dtype, elem_bytes=eb,
                            setup=setup)
    ops += red
    full = xp @ Wp  # (rows, P * nt)
    X = np.arange(P * P) % P
    expected = full.reshape(rows, P, nt).transpose(1, 0, 2)[X].reshape(P * P, -1)
    sram = gemv_sram_bytes(P=P, k=k, n=n, rows=rows, mapping=mapping, dtype=dtype)
    info = dict(kernel="gemv", mapping=mapping, P=P, k=k, n=n, rows=rows, dtype=dtype, allreduce=kind)
    return Program(name=f"gemv_{mapping}_{P}", width=P, height=P, routes=routes, ops=ops,
                   sram_bytes=np.full(P * P, sram), result=lambda: mem["y"], expected=expected, dtype=dtype,
                   elem_bytes=eb if kind != "ring" else ACC_BYTES, info=info)
