"""Wafer mesh primitives (workbench/primitives/mesh.py) against their closed forms.

Every expected value is derived here from the spec fields (wse2.yaml / wse3.yaml) and the
algorithm the docstring names, not read back from the function under test:

- K-tree allreduce with K=2 (WaferLLM, OSDI'25; wse_facts.md §8 "K-tree with K=2 is used in
  the paper"): ceil(log2 P) reduction stages, stage l with a partner 2^l hops away, then the
  root's broadcast back (one more stage, no add), about P - 1 hops in all (the model charges
  P - 1 for every P). The broadcast stage is what the PE-mesh simulation showed missing
  (tests/simulate/test_model_vs_simulation.py checks every form here against execution);
- MeshGEMV: W[k, n] tiled ceil(k/P) x ceil(n/P) per PE; MeshGEMM: Cannon, P shift steps;
- a vector op is bound by the SIMD width (§1 SIMD table) or by the memory ports (§1:
  16 B read + 8 B write per cycle).
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench.primitives import mesh
from workbench.primitives.mesh import (ACC_BYTES, elementwise_cycles, grid_utilization, kv_capacity_tokens,
                                       line_allreduce, mesh_gemm, mesh_gemv, tiles, vector_cycles)
from workbench.backends import numbers
from workbench.specs import load_hardware

WSE2 = numbers("wse2")
WSE3 = numbers("wse3")
PS = [1, 2, 3, 5, 7, 8, 12, 100, 255, 256, 257, 360, 750]  # powers of two and not


# ---- tiles and grid utilization ---------------------------------------------------------
@pytest.mark.parametrize("n, P, expected", [(10, 3, 4), (9, 3, 3), (1, 5, 1), (4096, 64, 64), (4096, 65, 64),
                                            (14336, 360, 40), (8192, 1, 8192)])
def test_tiles_is_the_ceiling_of_n_over_P(n, P, expected):
    # ceil(10/3) = 4, ceil(9/3) = 3, ceil(1/5) = 1, ceil(4096/65) = ceil(63.02) = 64,
    # ceil(14336/360) = ceil(39.8) = 40.
    assert tiles(n, P) == expected


def test_tiles_cover_the_dimension_and_no_tile_is_wasted_whole():
    # P tiles of ceil(n/P) cover n; one fewer element per tile would not (ceil is minimal).
    for n in (1, 7, 64, 1000, 4096, 14336):
        for P in (1, 2, 3, 7, 64, 65, 360):
            t = tiles(n, P)
            assert P * t >= n and P * (t - 1) < n


def test_grid_utilization_closed_form():
    # prod over dims of (n/P) / ceil(n/P): 1 when P divides every dim.
    assert grid_utilization(P=64, dims=(4096, 8192, 128)) == 1.0
    assert grid_utilization(P=3, dims=(10,)) == pytest.approx((10 / 3) / 4)
    assert grid_utilization(P=3, dims=(10, 9)) == pytest.approx((10 / 3) / 4 * 1.0)


# ---- vector ops ---------------------------------------------------------------------------
def test_vector_cycles_is_the_max_of_simd_and_memory_port_bounds():
    n = 1000.0
    # WSE-2 fp16 FMA: SIMD 4 (§1) -> n/4; reads 2 operands x 2 B / 16 B/cycle -> n/4;
    # writes 1 x 2 B / 8 B/cycle -> n/4: all three bounds meet.
    assert vector_cycles(WSE2, n=n) == n / 4
    # WSE-3 fp16: SIMD 8 (§1, §6) -> n/8, but the ports are unchanged (wse3.yaml): n/4.
    # The 8-wide SIMD does not help an op that streams two operands from SRAM.
    assert vector_cycles(WSE3, n=n) == n / 4
    assert vector_cycles(WSE3, n=n, reads=1.0, writes=0.5) == n / 8  # now SIMD-bound
    # WSE-2 fp32: SIMD 1 (§1) -> n; ports 2 x 4 B / 16 -> n/2, 4 B / 8 -> n/2: SIMD-bound.
    assert vector_cycles(WSE2, n=n, dtype="fp32", elem_bytes=4.0) == n
    # A write-heavy op on WSE-2: 2 writes x 2 B / 8 B/cycle = n/2 > n/4.
    assert vector_cycles(WSE2, n=n, writes=2.0) == n / 2


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
def test_vector_cycles_against_the_three_bounds_on_a_grid(w):
    rng = np.random.default_rng(0)
    n = rng.integers(1, 10_000, 50).astype(float)
    reads, writes = rng.uniform(0, 4, 50), rng.uniform(0, 4, 50)
    for dtype, eb in (("fp16", 2.0), ("fp32", 4.0)):
        simd = w.fmas_per_cycle_by_dtype[dtype]
        expected = np.maximum.reduce([n / simd, n * reads * eb / w.mem_read_bytes_per_cycle,
                                      n * writes * eb / w.mem_write_bytes_per_cycle])
        got = vector_cycles(w, n=n, dtype=dtype, reads=reads, writes=writes, elem_bytes=eb)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        assert np.all(got >= n / simd)  # never faster than the SIMD width


def test_elementwise_is_a_one_read_one_write_vector_op():
    assert elementwise_cycles(WSE2, n=800.0) == vector_cycles(WSE2, n=800.0, reads=1.0, writes=1.0)
    # one write of 2 B per element at 8 B/cycle: n/4 (WSE-2 SIMD n/4 too).
    assert elementwise_cycles(WSE2, n=800.0) == 200.0


# ---- line allreduce -----------------------------------------------------------------------
def _add(w, nbytes):
    """Adding two fp16 partial-sum vectors of nbytes: n = nbytes / 2 elements, 2 reads + 1 write."""
    n = nbytes / ACC_BYTES
    return max(n / w.fmas_per_cycle("fp16"), n * 2 * 2 / w.mem_read_bytes_per_cycle,
               n * 1 * 2 / w.mem_write_bytes_per_cycle)


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("nbytes", [4.0, 96.0, 2048.0])
def test_mesh_allreduce_closed_form(w, P, nbytes):
    r = line_allreduce(w, P=float(P), nbytes=nbytes)
    levels = int(np.ceil(np.log2(P))) if P > 1 else 0  # K-tree, K=2
    bcast = 1 if P > 1 else 0  # the root's broadcast back: a stage, no add
    assert r["hops"] == P - 1
    assert r["stages"] == levels + bcast
    assert r["colors"] == levels + bcast  # one color per stage (PLMR "Routing")
    msg = nbytes / w.link_bytes_per_cycle
    expected = (P - 1) * w.hop_cycles + levels * (w.stage_cycles + msg + _add(w, nbytes)) \
        + bcast * (w.stage_cycles + msg)
    assert r["cycles"] == pytest.approx(expected, rel=1e-12)


def test_allreduce_on_one_pe_is_free():
    # Nothing to exchange on a line of one PE: zero cycles, hops and stages, both mappings.
    for mapping in mesh.MAPPINGS:
        r = line_allreduce(WSE2, P=1.0, nbytes=4096.0, mapping=mapping)
        assert (r["cycles"], r["hops"], r["stages"]) == (0.0, 0.0, 0.0), mapping


@pytest.mark.parametrize("P", PS)
def test_gpu_style_allreduce_closed_form(P):
    # A chain to one end and back, every PE a software stage: 2(P-1) hops and stages, each
    # paying hop + beta; the message streams through the chain (twice), each PE adding its
    # own to the words as they pass, so one add (at the end of the line) is left in series.
    nbytes = 96.0
    r = line_allreduce(WSE2, P=float(P), nbytes=nbytes, mapping="gpu_style")
    assert r["hops"] == r["stages"] == 2 * (P - 1)
    expected = 2 * (P - 1) * (WSE2.hop_cycles + WSE2.stage_cycles) \
        + (_add(WSE2, nbytes) + 2 * nbytes / WSE2.link_bytes_per_cycle if P > 1 else 0.0)
    assert r["cycles"] == pytest.approx(expected, rel=1e-12)


def test_the_tree_needs_no_more_colors_than_the_router_has():
    # §2: 24 routable colors; the largest square grid on either wafer needs ceil(log2 757) = 10,
    # and one for the broadcast.
    for w in (WSE2, WSE3):
        assert line_allreduce(w, P=float(w.max_square_grid), nbytes=4.0)["colors"] <= load_hardware(w.label).routing_colors  # 24 colors (wse_facts.md)


# Decode reductions are small: a norm or softmax statistic is 4 B per sequence, a GEMV's
# partial sums rows x ceil(n/P) x 2 B (e.g. 1 x ceil(14336/160) x 2 = 180 B).
LATENCY_BOUND_BYTES = [4.0, 96.0, 512.0, 2048.0]


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
@pytest.mark.parametrize("nbytes, from_P", [(4.0, 2), (96.0, 2), (512.0, 7), (2048.0, 35)])
def test_gpu_style_allreduce_is_slower_from_a_line_length_on(w, nbytes, from_P):
    """Decode-sized messages (a 4 B statistic, up to ~140 B of GEMV partial sums): the chain is
    slower for every P >= 2. A larger message streams through the chain once each way while
    the tree sends it whole at each of its stages, so the chain wins on short lines: up to
    P = 6 at 512 B and P = 34 at 2 KB (both wafers: the same NoC and software costs)."""
    P = np.arange(2, 1025, dtype=float)
    mesh_c = line_allreduce(w, P=P, nbytes=nbytes)["cycles"]
    gpu_c = line_allreduce(w, P=P, nbytes=nbytes, mapping="gpu_style")["cycles"]
    assert np.all(gpu_c[P >= from_P] > mesh_c[P >= from_P])
    assert np.all(gpu_c[P == from_P - 1] <= mesh_c[P == from_P - 1])


def test_gpu_style_chain_can_win_for_a_large_message_on_a_short_line():
    """Not every P for every size: the chain streams the message twice in all, while the tree
    sends the whole message at each of its ceil(log2 P) stages and its broadcast. At 4 KB on a
    line of 5 (3 stages) the mesh pays 4 + 3 x (62.5 + 1024 + 512) + (62.5 + 1024) = 5886
    cycles and the chain 8 x 63.5 + 512 + 2 x 1024 = 3068: a bandwidth-bound message on a
    short line. Decode reductions are latency-bound (test above); recorded so the regime is
    explicit."""
    m = line_allreduce(WSE2, P=5.0, nbytes=4096.0)["cycles"]
    g = line_allreduce(WSE2, P=5.0, nbytes=4096.0, mapping="gpu_style")["cycles"]
    assert m == pytest.approx(4 + 3 * (62.5 + 1024 + 512) + (62.5 + 1024))
    assert g == pytest.approx(8 * 63.5 + 512 + 2 * 1024)
    assert g < m
    # Longer lines restore the order at this size too.
    P = np.arange(79, 1025, dtype=float)
    assert np.all(line_allreduce(WSE2, P=P, nbytes=4096.0, mapping="gpu_style")["cycles"]
                  > line_allreduce(WSE2, P=P, nbytes=4096.0)["cycles"])


@pytest.mark.parametrize("nbytes", LATENCY_BOUND_BYTES)
def test_gpu_style_to_mesh_ratio_grows_with_P(nbytes):
    """The chain's stages grow as P, the tree's as log2 P: the ratio grows between powers of
    two and from one power of two to the next. It dips by design just past a power of two,
    where the tree adds a stage (P = 2^k + 1): also asserted, so the shape is explicit. At
    2 KB the short lines are bandwidth-bound (the tree sends the message at every stage, the
    chain streams it once each way: the ratio falls from P = 4 to 8), so from P = 8 on."""
    ratio = lambda P: (line_allreduce(WSE2, P=P, nbytes=nbytes, mapping="gpu_style")["cycles"]  # noqa: E731
                       / line_allreduce(WSE2, P=P, nbytes=nbytes)["cycles"])
    powers = 2.0 ** np.arange(2 if nbytes <= 512 else 3, 11)  # 4 (8) .. 1024
    assert np.all(np.diff(ratio(powers)) > 0)
    for k in range(2, 10):  # within one stage count, (2^k, 2^(k+1)]
        band = np.arange(2 ** k + 1, 2 ** (k + 1) + 1, dtype=float)
        assert np.all(np.diff(ratio(band)) > 0), k
        assert ratio(2.0 ** k + 1) < ratio(2.0 ** k)  # the added stage
    assert ratio(1024.0) > 10 * ratio(powers[0]) / 2


# ---- MeshGEMV -----------------------------------------------------------------------------
GEMV_CASES = [(1, 4096, 4096, 64), (1, 4096, 14336, 360), (4, 8192, 1024, 205), (1, 1000, 3000, 7),
              (16, 64, 128, 3), (1, 128256, 4096, 160), (2, 50, 50, 1)]


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
@pytest.mark.parametrize("rows, k, n, P", GEMV_CASES)
def test_mesh_gemv_closed_form(w, rows, k, n, P):
    g = mesh_gemv(w, P=float(P), k=k, n=n, rows=rows)
    kt, nt = int(np.ceil(k / P)), int(np.ceil(n / P))
    assert g["flops"] == 2 * rows * k * n
    assert g["weight_bytes_per_pe"] == kt * nt * 2.0
    vec = max(nt / w.fmas_per_cycle("fp16"), nt * 2 * 2 / w.mem_read_bytes_per_cycle,
              nt * 2 / w.mem_write_bytes_per_cycle)  # FMA over ceil(n/P): 2 reads, 1 write
    assert g["compute_cycles"] == pytest.approx(rows * kt * (w.map_call_cycles + vec), rel=1e-12)
    red = line_allreduce(w, P=float(P), nbytes=rows * nt * ACC_BYTES)
    assert g["comm_cycles"] == red["cycles"]
    assert g["cycles"] == g["compute_cycles"] + g["comm_cycles"]


@pytest.mark.parametrize("rows, k, n, P", GEMV_CASES)
def test_mesh_gemv_weights_are_conserved_over_the_grid(rows, k, n, P):
    # P² PEs each holding a ceil(k/P) x ceil(n/P) tile hold at least all k x n weights,
    # exactly all of them when P divides both k and n.
    for w_bytes in (2.0, 1.0, 0.5):
        g = mesh_gemv(WSE2, P=float(P), k=k, n=n, rows=rows, w_bytes=w_bytes)
        total = P * P * g["weight_bytes_per_pe"]
        assert total >= k * n * w_bytes
        if k % P == 0 and n % P == 0:
            assert total == k * n * w_bytes
        # and the padding is less than one tile row and column per PE line
        assert total < (k + P) * (n + P) * w_bytes


def test_mesh_gemv_compute_falls_and_the_reduction_path_grows_with_P():
    # Per-PE work ~ kn/P² falls; the reduction crosses P-1 hops in ceil(log2 P) stages and a
    # broadcast. Its cycles need not rise: the message, ceil(n/P) partial sums, shrinks as P
    # grows (16K: 1675 cycles at P=64, 1183 at 256, 1314 at 512); with a fixed message they do.
    P = np.array([64.0, 128.0, 256.0, 512.0])
    g = mesh_gemv(WSE2, P=P, k=16384, n=16384)
    assert np.all(np.diff(g["compute_cycles"]) < 0)
    np.testing.assert_array_equal(g["hops"], P - 1)
    np.testing.assert_array_equal(g["stages"], np.log2(P) + 1)
    assert np.all(np.diff(line_allreduce(WSE2, P=P, nbytes=64.0)["cycles"]) > 0)


# ---- MeshGEMM -----------------------------------------------------------------------------
GEMM_CASES = [(4096, 4096, 4096, 64), (4096, 4096, 4096, 65), (2048, 4096, 14336, 480), (100, 300, 70, 7),
              (64, 64, 64, 1), (1, 4096, 4096, 16)]


@pytest.mark.parametrize("mapping", ["mesh", "gpu_style"])
@pytest.mark.parametrize("m, k, n, P", GEMM_CASES)
def test_mesh_gemm_closed_form(m, k, n, P, mapping):
    w = WSE2
    g = mesh_gemm(w, P=float(P), m=m, k=k, n=n, mapping=mapping)
    mt, kt, nt = (int(np.ceil(x / P)) for x in (m, k, n))
    vec = max(mt / 4, mt * 2 * 2 / 16, mt * 2 / 8)  # WSE-2 fp16 FMA of length ceil(m/P)
    step_compute = kt * nt * (w.map_call_cycles + vec)
    a_msg, b_msg = mt * kt * 2.0 / w.link_bytes_per_cycle, kt * nt * 2.0 / w.link_bytes_per_cycle
    ab = w.hop_cycles + w.stage_cycles
    assert g["compute_cycles"] == pytest.approx(P * step_compute, rel=1e-12)
    if mapping == "mesh":
        # Cannon: P multiplies, P-1 shifts of both tiles (two hops each, through the PE's one
        # ramp: A + B words), each shift overlapped with the multiply before it
        step_comm = (2 * w.hop_cycles + w.stage_cycles + a_msg + b_msg) if P > 1 else 0.0
        assert g["comm_cycles"] == pytest.approx((P - 1) * step_comm, rel=1e-12)
        assert g["cycles"] == pytest.approx(step_compute + (P - 1) * max(step_compute, step_comm), rel=1e-12)
    else:
        # bulk-synchronous SUMMA: at step s the panels travel d = max(s, P-1-s) hops from their
        # owner, each PE forwarding in software, B's chain d - 1 hops behind A's
        comm = 0.0
        for step in range(P):
            d = max(step, P - 1 - step)
            if d >= 1:
                comm += (2 * d - 1) * ab + a_msg + (w.stage_cycles + b_msg if d >= 2 else 0.0)
        assert g["comm_cycles"] == pytest.approx(comm, rel=1e-12)
        assert g["cycles"] == pytest.approx(P * step_compute + comm, rel=1e-12)
    assert g["flops"] == 2 * m * k * n
    divides = m % P == 0 and k % P == 0 and n % P == 0
    assert (g["grid_utilization"] == 1.0) == divides
    assert 0 < g["grid_utilization"] <= 1.0


def test_mesh_gemm_on_one_pe_moves_nothing():
    for mapping in mesh.MAPPINGS:
        g = mesh_gemm(WSE2, P=1.0, m=64, k=64, n=64, mapping=mapping)
        assert g["comm_cycles"] == 0.0 and g["hops"] == 0.0, mapping
        assert g["cycles"] == g["compute_cycles"]


def test_mesh_gemm_grid_utilization_below_one_when_padding():
    g = mesh_gemm(WSE2, P=65.0, m=4096, k=4096, n=4096)
    # ceil(4096/65) = 64: (4096/65/64)^3 = 0.9538
    assert g["grid_utilization"] == pytest.approx((4096 / 65 / 64) ** 3)
    assert g["grid_utilization"] < 1.0


@pytest.mark.parametrize("m, k, n", [(4096, 4096, 4096), (5040, 5040, 5040), (5040, 10080, 2520)])
def test_more_pes_never_increase_mesh_gemm_compute_when_P_divides_the_dims(m, k, n):
    # With P | m, k, n: compute = P x (k/P)(n/P)(c + m/(4P)) = kn c / P + mkn / (4P²): falls with P.
    Ps = np.array([p for p in range(1, 1025) if m % p == 0 and k % p == 0 and n % p == 0], dtype=float)
    assert len(Ps) > 5
    c = mesh_gemm(WSE2, P=Ps, m=m, k=k, n=n)["compute_cycles"]
    assert np.all(np.diff(c) <= 0)
    # and it equals the closed form above
    np.testing.assert_allclose(c, k * n * WSE2.map_call_cycles / Ps + m * k * n / (4 * Ps**2), rtol=1e-12)


def test_more_pes_can_increase_mesh_gemm_compute_when_tiles_are_padded():
    """Not for every P: on 65 x 65 PEs a 4096 dim still needs 64-wide tiles (ceil(4096/65) =
    64; the 65th line holds nothing) and Cannon takes 65 steps instead of 64, so compute
    grows by 65/64. This is the padding cost grid_utilization reports; the grid search in
    wafer_inference avoids such sides. Recorded so the non-monotonicity is explicit."""
    g64 = mesh_gemm(WSE2, P=64.0, m=4096, k=4096, n=4096)
    g65 = mesh_gemm(WSE2, P=65.0, m=4096, k=4096, n=4096)
    assert g65["compute_cycles"] / g64["compute_cycles"] == pytest.approx(65 / 64)
    # Over a long range the trend is still down: 4 x the PEs on a side, < 1/4 the compute.
    g256 = mesh_gemm(WSE2, P=256.0, m=4096, k=4096, n=4096)
    assert g256["compute_cycles"] < g64["compute_cycles"] / 4


def test_gpu_style_gemm_is_no_faster_than_mesh():
    P = np.arange(2, 760, dtype=float)
    for m, k, n in ((4096, 4096, 4096), (2048, 4096, 14336)):
        a = mesh_gemm(WSE2, P=P, m=m, k=k, n=n)
        b = mesh_gemm(WSE2, P=P, m=m, k=k, n=n, mapping="gpu_style")
        assert np.all(b["cycles"] >= a["cycles"])
        np.testing.assert_array_equal(a["compute_cycles"], b["compute_cycles"])


# ---- KV capacity ----------------------------------------------------------------------------
@pytest.mark.parametrize("P", [1, 2, 3, 360, 757])
def test_shift_based_kv_holds_P_times_the_concat_based(P):
    # mesh: floor(f P² / b); gpu_style: floor(f P / b). With f / b whole (6400 / 64 = 100
    # tokens per PE line) the floors are exact and the ratio is P exactly.
    f, b = 6400.0, 64.0
    shift = kv_capacity_tokens(free_bytes_per_pe=f, P=float(P), kv_bytes_per_token_per_layer=b)
    concat = kv_capacity_tokens(free_bytes_per_pe=f, P=float(P), kv_bytes_per_token_per_layer=b,
                                mapping="gpu_style")
    assert shift == 100 * P * P and concat == 100 * P
    assert shift / concat == P


def test_shift_based_kv_holds_at_least_P_times_the_concat_based_in_general():
    # floor(P x) >= P floor(x) for any x >= 0.
    rng = np.random.default_rng(1)
    f, b, P = rng.uniform(0, 40000, 200), rng.uniform(1, 5000, 200), rng.integers(1, 760, 200).astype(float)
    shift = kv_capacity_tokens(free_bytes_per_pe=f, P=P, kv_bytes_per_token_per_layer=b)
    concat = kv_capacity_tokens(free_bytes_per_pe=f, P=P, kv_bytes_per_token_per_layer=b, mapping="gpu_style")
    assert np.all(shift >= P * concat)
    np.testing.assert_array_equal(shift, np.floor(f * P * P / b))


# ---- one function, every input type ---------------------------------------------------------
def _calls():
    """(name, fn(P) -> dict or array) for every primitive that takes the grid side."""
    return [
        ("tiles", lambda P: {"t": tiles(14336, P)}),
        ("grid_utilization", lambda P: {"u": grid_utilization(P=P, dims=(4096, 14336))}),
        ("line_allreduce_mesh", lambda P: line_allreduce(WSE2, P=P, nbytes=96.0)),
        ("line_allreduce_gpu", lambda P: line_allreduce(WSE2, P=P, nbytes=96.0, mapping="gpu_style")),
        ("mesh_gemv", lambda P: mesh_gemv(WSE3, P=P, k=4096, n=14336, rows=2.0)),
        ("mesh_gemv_gpu", lambda P: mesh_gemv(WSE3, P=P, k=4096, n=14336, mapping="gpu_style")),
        ("mesh_gemm", lambda P: mesh_gemm(WSE2, P=P, m=2048, k=4096, n=4096)),
        ("mesh_gemm_gpu", lambda P: mesh_gemm(WSE2, P=P, m=2048, k=4096, n=4096, mapping="gpu_style")),
        ("line_allreduce_t10", lambda P: line_allreduce(WSE2, P=P, nbytes=96.0, mapping="t10")),
        ("line_allreduce_ladder", lambda P: line_allreduce(WSE2, P=P, nbytes=96.0, mapping="ladder")),
        ("mesh_gemv_t10", lambda P: mesh_gemv(WSE3, P=P, k=4096, n=14336, mapping="t10")),
        ("mesh_gemm_t10", lambda P: mesh_gemm(WSE2, P=P, m=2048, k=4096, n=4096, mapping="t10")),
        ("mesh_gemm_ladder", lambda P: mesh_gemm(WSE2, P=P, m=2048, k=4096, n=4096, mapping="ladder")),
        ("kv_ladder", lambda P: {"k": kv_capacity_tokens(free_bytes_per_pe=30000.0, P=P,
                                                         kv_bytes_per_token_per_layer=2048.0, mapping="ladder")}),
        ("kv_shift", lambda P: {"k": kv_capacity_tokens(free_bytes_per_pe=30000.0, P=P,
                                                        kv_bytes_per_token_per_layer=2048.0)}),
        ("kv_concat", lambda P: {"k": kv_capacity_tokens(free_bytes_per_pe=30000.0, P=P,
                                                         kv_bytes_per_token_per_layer=2048.0,
                                                         mapping="gpu_style")}),
        ("vector_cycles", lambda P: {"v": vector_cycles(WSE3, n=P * 3.0)}),
        ("elementwise_cycles", lambda P: {"v": elementwise_cycles(WSE2, n=P * 3.0)}),
    ]


GRID = [1.0, 2.0, 7.0, 160.0, 360.0, 757.0]


@pytest.mark.parametrize("name, fn", _calls(), ids=[c[0] for c in _calls()])
def test_float_ndarray_and_dataarray_give_the_same_result(name, fn):
    arr = fn(np.asarray(GRID))
    da = fn(xr.DataArray(GRID, dims="pe_grid", coords={"pe_grid": GRID}))
    for i, P in enumerate(GRID):
        scalar = fn(P)
        for key, v in scalar.items():
            assert np.ndim(v) == 0, (name, key)
            assert float(np.asarray(arr[key]).ravel()[i] if np.ndim(arr[key]) else arr[key]) == float(v), (name, key, P)
    for key, v in da.items():
        if not isinstance(v, xr.DataArray):  # a term independent of P (e.g. flops) stays a scalar
            assert np.ndim(v) == 0 and float(v) == float(fn(GRID[0])[key]), (name, key)
            continue
        assert v.dims == ("pe_grid",), (name, key)
        np.testing.assert_array_equal(v.coords["pe_grid"].values, GRID)
        np.testing.assert_array_equal(v.values, np.broadcast_to(arr[key], (len(GRID),)), err_msg=f"{name}.{key}")


def test_a_dataarray_P_broadcasts_by_name_against_a_dataarray_size():
    P = xr.DataArray([64.0, 128.0, 256.0], dims="pe_grid")
    k = xr.DataArray([4096.0, 8192.0], dims="k")
    g = mesh_gemv(WSE2, P=P, k=k, n=8192.0)
    assert set(g["cycles"].dims) == {"pe_grid", "k"}
    one = mesh_gemv(WSE2, P=128.0, k=8192.0, n=8192.0)
    assert float(g["cycles"].isel(k=1, pe_grid=1)) == one["cycles"]
    r = line_allreduce(WSE2, P=P, nbytes=xr.DataArray([4.0, 96.0], dims="nbytes"))
    assert set(r["cycles"].dims) == {"pe_grid", "nbytes"}
    gm = mesh_gemm(WSE2, P=P, m=k, k=4096.0, n=4096.0)
    assert set(gm["cycles"].dims) == {"pe_grid", "k"}


# ---- WaferLLM's compiler baselines: T10 and Ladder (He et al., OSDI'25 §7) ----------------------
# Closed forms from the mechanism each docstring quotes, with the spec's alpha (hop_cycles),
# beta (stage_cycles), c (map_call_cycles), the 4 B/cycle link, and mesh.RELAY_BYTES_PER_CYCLE
# (fitted on one row, C031; see tests/workloads/test_wafer_baselines.py).
ALPHA, BETA, C, LINK, RELAY = (WSE2.hop_cycles, WSE2.stage_cycles, WSE2.map_call_cycles,
                               WSE2.link_bytes_per_cycle, mesh.RELAY_BYTES_PER_CYCLE)


def test_the_four_mappings_and_an_unknown_one_is_an_error():
    from workbench.errors import InputError
    assert mesh.MAPPINGS == ("mesh", "gpu_style", "t10", "ladder")
    for call in (lambda: line_allreduce(WSE2, P=8.0, nbytes=4.0, mapping="cannon"),
                 lambda: mesh_gemv(WSE2, P=8.0, k=64, n=64, mapping="cannon"),
                 lambda: mesh_gemm(WSE2, P=8.0, m=64, k=64, n=64, mapping="T10"),
                 lambda: kv_capacity_tokens(free_bytes_per_pe=1.0, P=8.0, kv_bytes_per_token_per_layer=1.0,
                                            mapping="summa")):
        with pytest.raises(InputError, match="mapping"):
            call()


@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("nbytes", [4.0, 96.0, 2048.0])
def test_t10_allreduce_closed_form(P, nbytes):
    """Neighbour shifts to one end of the line and back: 2(P-1) one-hop shifts, each one hop
    and one @map-driven step, the message streamed once per leg with each PE's add on the way
    (one add left in series, at the end of the line); no routing stage (no beta: no
    wrap-around, neighbour routes only)."""
    r = line_allreduce(WSE2, P=float(P), nbytes=nbytes, mapping="t10")
    assert r["hops"] == 2 * (P - 1) and r["stages"] == 0
    expected = 2 * (P - 1) * (ALPHA + C) + (_add(WSE2, nbytes) + 2 * nbytes / LINK if P > 1 else 0.0)
    assert r["cycles"] == pytest.approx(expected, rel=1e-12)
    assert r["colors"] == (2 if P > 1 else 0)


def test_t10_allreduce_pays_no_routing_stage():
    # beta does not enter: the same cycles with stage_cycles 0 or 1000.
    import dataclasses
    P = np.arange(1, 760, dtype=float)
    for beta in (0.0, 1000.0):
        w = dataclasses.replace(WSE2, stage_cycles=beta)
        np.testing.assert_array_equal(line_allreduce(w, P=P, nbytes=96.0, mapping="t10")["cycles"],
                                      line_allreduce(WSE2, P=P, nbytes=96.0, mapping="t10")["cycles"])


@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("nbytes", [4.0, 96.0, 2048.0])
def test_ladder_ring_allreduce_closed_form(P, nbytes):
    """WaferLLM §6.1 (2), ring allreduce, O[(2 alpha + beta) N]: 2(P-1) steps, each a chunk of
    ceil(n/P) partial sums two hops with one software stage; the first P-1 steps add it."""
    r = line_allreduce(WSE2, P=float(P), nbytes=nbytes, mapping="ladder")
    chunk = np.ceil(nbytes / 2 / P) * 2  # whole fp16 partial sums
    assert r["hops"] == 4 * (P - 1) and r["stages"] == 2 * (P - 1)
    expected = 2 * (P - 1) * (2 * ALPHA + BETA + chunk / LINK) + (P - 1) * _add(WSE2, chunk)
    assert r["cycles"] == pytest.approx(expected, rel=1e-12)


def test_baseline_allreduce_on_a_tiny_line_by_hand():
    # P = 3, 96 B (48 fp16 partial sums). add(96 B) = max(48/4, 48*4/16, 48*2/8) = 12.
    # t10: 4 shifts x (1 + 8.96) + one add (streamed: only the end of the line's) of 12
    # + 2 x 96/4 = 39.84 + 12 + 48 = 99.84
    assert line_allreduce(WSE2, P=3.0, nbytes=96.0, mapping="t10")["cycles"] == pytest.approx(99.84)
    # ladder: chunk ceil(48/3) = 16 sums = 32 B; 4 steps x (2 + 62.5 + 8) + 2 adds of 16 (= 4) = 298
    assert line_allreduce(WSE2, P=3.0, nbytes=96.0, mapping="ladder")["cycles"] == pytest.approx(298.0)
    # mesh for reference: 2 hops + 2 stages x (62.5 + 24 + 12) + the broadcast (62.5 + 24) = 285.5
    assert line_allreduce(WSE2, P=3.0, nbytes=96.0)["cycles"] == pytest.approx(285.5)


@pytest.mark.parametrize("nbytes, t10_from, ladder_from", [(4.0, 22, 2), (96.0, 34, 3), (512.0, 89, 7),
                                                           (2048.0, 359, 35)])
def test_baseline_allreduces_grow_with_P_and_cost_more_than_the_tree_on_long_lines(nbytes, t10_from, ladder_from):
    """Both baselines cross the line PE by PE: cycles grow with P (a latency-bound message)
    and exceed the K-tree's from a line length on (the larger the message, the later: the
    tree sends it whole at each stage). Not on short lines: T10's neighbour steps (alpha + c
    = 9.96 cycles) undercut the tree's stages (beta = 62.5) up to P = 21 at 4 B, e.g. P = 8:
    t10 14 x 9.96 + one streamed add (0.5) + 2 x 1 = 141.94 against the tree's 7 + 3 x (62.5
    + 1 + 0.5) + (62.5 + 1) = 262.5; recorded so the regime is explicit."""
    P = np.arange(2, 1025, dtype=float)
    tree = line_allreduce(WSE2, P=P, nbytes=nbytes)["cycles"]
    for mapping, from_P in (("t10", t10_from), ("ladder", ladder_from)):
        c = line_allreduce(WSE2, P=P, nbytes=nbytes, mapping=mapping)["cycles"]
        if nbytes <= 96.0:
            assert np.all(np.diff(c) > 0), mapping
        assert np.all(c[P >= from_P] > tree[P >= from_P]), mapping
        assert np.all(c[P == from_P - 1] <= tree[P == from_P - 1]), mapping
    assert line_allreduce(WSE2, P=8.0, nbytes=4.0, mapping="t10")["cycles"] == pytest.approx(14 * 9.96 + 0.5 + 2)
    assert line_allreduce(WSE2, P=8.0, nbytes=4.0)["cycles"] == pytest.approx(7 + 3 * (62.5 + 1 + 0.5) + 63.5)


def test_ladder_ring_costs_more_than_t10_neighbour_shifts_for_decode_sizes():
    """O[(2 alpha + beta) N] against (alpha + c) per shift: for the messages of decode (a 4 B
    norm or softmax statistic; a GEMV's partial sums, 20-140 B on WaferLLM's 420-660 grids)
    the ring costs more on every line. For a bandwidth-bound message too, but on the
    shortest lines: T10 streams all n once each way with its adds on the way, the ring moves
    ceil(n/P) per step, so at 2 KB the ring wins only on lines of 2 and 3 PEs."""
    P = np.arange(2, 1025, dtype=float)
    for nbytes in (4.0, 96.0, 140.0):
        assert np.all(line_allreduce(WSE2, P=P, nbytes=nbytes, mapping="ladder")["cycles"]
                      > line_allreduce(WSE2, P=P, nbytes=nbytes, mapping="t10")["cycles"])
    ring = line_allreduce(WSE2, P=P, nbytes=2048.0, mapping="ladder")["cycles"]
    t10 = line_allreduce(WSE2, P=P, nbytes=2048.0, mapping="t10")["cycles"]
    np.testing.assert_array_equal(P[ring <= t10], [2.0, 3.0])


def test_relay_is_store_and_forward_per_hop():
    # hops x (alpha + beta + bytes / RELAY): linear in hops and in bytes; slower than the link.
    assert mesh.relay_cycles(WSE2, hops=0.0, nbytes=1e6) == 0.0
    assert mesh.relay_cycles(WSE2, hops=1.0, nbytes=0.0) == pytest.approx(ALPHA + BETA)
    assert mesh.relay_cycles(WSE2, hops=7.0, nbytes=300.0) == pytest.approx(7 * (ALPHA + BETA + 300 / RELAY))
    assert 0 < RELAY < LINK


@pytest.mark.parametrize("mapping", ["t10", "ladder"])
@pytest.mark.parametrize("m, k, n, P", GEMM_CASES)
def test_baseline_gemm_closed_form(m, k, n, P, mapping):
    """Bulk-synchronous steps (compute, then comm), tiles relayed PE by PE, each hop alpha +
    beta + the tile at RELAY_BYTES_PER_CYCLE. T10: P multiplies and P-1 shifts; each shift
    relays A over the ring's head-to-tail link (P-1 hops) and B after it, P-2 more hops (a PE
    relays one tile at a time and both start together), or B's own P-1 if its hop is the
    slower. Ladder: P steps; step s gathers from the owner (position s) to the farthest core,
    d = max(s, P-1-s) hops, B behind A in the same way."""
    g = mesh_gemm(WSE2, P=float(P), m=m, k=k, n=n, mapping=mapping)
    mt, kt, nt = (int(np.ceil(x / P)) for x in (m, k, n))
    vec = max(mt / 4, mt * 2 * 2 / 16, mt * 2 / 8)
    step_compute = kt * nt * (C + vec)
    ha, hb = (ALPHA + BETA + tile * 2.0 / RELAY for tile in (mt * kt, kt * nt))
    if mapping == "t10":
        comm = (P - 1) * max((P - 1) * ha + max(P - 2, 0) * hb, (P - 1) * hb)
        hops = (P - 1) * max(2 * P - 3, 0)
    else:
        dists = [max(s, P - 1 - s) for s in range(P)]
        comm = sum(max(d * ha + (d - 1) * hb, d * hb) for d in dists if d >= 1)
        hops = sum(2 * d - 1 for d in dists if d >= 1)
    assert g["compute_cycles"] == pytest.approx(P * step_compute, rel=1e-12)
    assert g["comm_cycles"] == pytest.approx(comm, rel=1e-12)
    assert g["cycles"] == pytest.approx(P * step_compute + comm, rel=1e-12)  # no overlap
    assert g["hops"] == hops
    assert g["flops"] == 2 * m * k * n


def test_baseline_gemm_on_a_tiny_grid_by_hand():
    # P = 3, 6 x 6 x 6: 2 x 2 tiles. compute/step = 2 x 2 x (8.96 + max(2/4, 8/16, 4/8)) = 37.84;
    # an 8 B tile's relay hop h = 1 + 62.5 + 8 / 1.44 = 69.0556.
    h = 1 + 62.5 + 8 / 1.44
    # t10: 3 multiplies, 2 shifts of A over 2 hops then B 1 more: 2 x 3h
    assert mesh_gemm(WSE2, P=3.0, m=6, k=6, n=6, mapping="t10")["cycles"] == pytest.approx(3 * 37.84 + 6 * h)
    # ladder: owners at 0, 1, 2 reach 2, 1, 2 hops: (2 + 1)h + h + (2 + 1)h = 7h
    assert mesh_gemm(WSE2, P=3.0, m=6, k=6, n=6, mapping="ladder")["cycles"] == pytest.approx(3 * 37.84 + 7 * h)
    # the mesh: 37.84 + 2 shifts x max(37.84, 2 + 62.5 + (8 + 8)/4) = 37.84 + 2 x 68.5
    assert mesh_gemm(WSE2, P=3.0, m=6, k=6, n=6)["cycles"] == pytest.approx(37.84 + 2 * 68.5)


@pytest.mark.parametrize("mapping", ["t10", "ladder"])
def test_baseline_gemm_is_no_faster_than_mesh_and_its_critical_path_grows_as_P(mapping):
    P = np.arange(2, 760, dtype=float)
    for m, k, n in ((4096, 4096, 4096), (2048, 4096, 14336), (64, 64, 64), (1, 4096, 4096)):
        a = mesh_gemm(WSE2, P=P, m=m, k=k, n=n)
        b = mesh_gemm(WSE2, P=P, m=m, k=k, n=n, mapping=mapping)
        assert np.all(b["cycles"] >= a["cycles"])
        np.testing.assert_array_equal(a["compute_cycles"], b["compute_cycles"])  # the same kernel
        n1, s1 = mesh.owner_steps(P, 1.0)
        np.testing.assert_array_equal(b["hops"], (P - 1) * (2 * P - 3) if mapping == "t10" else 2 * s1 - n1)
    # Where P divides the dims (A and B tiles alike) the relayed bytes per hop shrink as 1/P²
    # while the hops grow as P², so comm grows: t10 (P-1)(2P-3) hops, Ladder sum(2 d_s - 1).
    m = k = n = 5040
    Ps = np.array([p for p in range(2, 760) if m % p == 0], dtype=float)
    comm = mesh_gemm(WSE2, P=Ps, m=m, k=k, n=n, mapping=mapping)["comm_cycles"]
    assert np.all(np.diff(comm) > 0)
    h = ALPHA + BETA + (m / Ps) * (k / Ps) * 2 / RELAY
    n1, s1 = mesh.owner_steps(Ps, 1.0)
    hops = (Ps - 1) * (2 * Ps - 3) if mapping == "t10" else 2 * s1 - n1
    np.testing.assert_allclose(comm, hops * h, rtol=1e-12)


def test_owner_steps_counts_the_farthest_distances():
    # d_s = max(s, P-1-s): P = 4 -> 3, 2, 2, 3; P = 5 -> 4, 3, 2, 3, 4; P = 1 -> 0
    for P, d in ((1, [0]), (2, [1, 1]), (3, [2, 1, 2]), (4, [3, 2, 2, 3]), (5, [4, 3, 2, 3, 4])):
        for tau in (0, 1, 2, 2.5, 3, 5):
            n, s = mesh.owner_steps(float(P), tau)
            assert (n, s) == (sum(x >= tau for x in d), sum(x for x in d if x >= tau)), (P, tau)


def test_kv_placement_of_the_baselines():
    # T10 spreads every tensor evenly (as mesh); Ladder appends tokens to one line (as gpu_style).
    f, b, P = 6400.0, 64.0, 360.0
    cap = {m: kv_capacity_tokens(free_bytes_per_pe=f, P=P, kv_bytes_per_token_per_layer=b, mapping=m)
           for m in mesh.MAPPINGS}
    assert cap["t10"] == cap["mesh"] == 100 * P * P
    assert cap["ladder"] == cap["gpu_style"] == 100 * P
    assert [mesh.kv_spread(m) for m in mesh.MAPPINGS] == [True, False, True, False]


@pytest.mark.parametrize("P", [1.0, 8.0, 480.0, 720.0])
def test_block_inputs_pass_every_pe_under_ladder_only(P):
    """Ladder's unified memory: each token's block input passes the region's P^2 PEs one
    after another at alpha a hop (tokens x P^2 x hop_cycles); the other mappings move their
    operands inside their GEMV and GEMM forms (0 here)."""
    tokens = np.array([1.0, 4096.0])
    got = mesh.block_input_cycles(WSE2, P=P, tokens=tokens, mapping="ladder")
    np.testing.assert_allclose(got, tokens * P * P * WSE2.hop_cycles, rtol=0, atol=0)
    for other in ("mesh", "gpu_style", "t10"):
        assert np.all(mesh.block_input_cycles(WSE2, P=P, tokens=tokens, mapping=other) == 0.0)
    with pytest.raises(Exception, match="mapping"):
        mesh.block_input_cycles(WSE2, P=P, tokens=tokens, mapping="torus")


def test_a_ladder_layer_adds_two_block_inputs_per_token(monkeypatch):
    """A dense layer has two blocks (the token mixer, the MLP): its Ladder prefill and decode
    cycles exceed the same layer without the term by exactly 2 x tokens x P^2 x alpha, and
    the term grows as P^2 (WaferLLM's Ladder rows: ~2 cycles per PE^2 per token a layer)."""
    from workbench.specs import load_model
    from workbench.workloads import wafer_layers
    model = load_model("llama_3_1_8b")
    kw = dict(P=480.0, batch=1.0)
    with_term = (wafer_layers.prefill_layer(WSE2, model, prompt=4096.0, mapping="ladder", **kw)["cycles"],
                 wafer_layers.decode_layer(WSE2, model, context=4096.0, mapping="ladder", **kw)["cycles"])
    monkeypatch.setattr(wafer_layers, "block_input_cycles", lambda w, *, P, tokens, mapping: 0.0 * tokens)
    without = (wafer_layers.prefill_layer(WSE2, model, prompt=4096.0, mapping="ladder", **kw)["cycles"],
               wafer_layers.decode_layer(WSE2, model, context=4096.0, mapping="ladder", **kw)["cycles"])
    assert with_term[0] - without[0] == pytest.approx(2.0 * 4096.0 * 480.0 ** 2 * WSE2.hop_cycles, rel=1e-12)
    assert with_term[1] - without[1] == pytest.approx(2.0 * 480.0 ** 2 * WSE2.hop_cycles, rel=1e-12)


@pytest.mark.parametrize("P", [1.0, 8.0, 420.0, 660.0])
def test_layer_weights_cross_the_unified_memory_under_ladder_only(P):
    """Ladder's unified memory: a layer's W weights are read through the program's PEs (one
    chain, program_pes x alpha) and enter the region over its P edge links, one 16-bit value
    per wavelet a cycle (W / P); the other mappings compute on the tiles in their PEs (0)."""
    weights = np.array([1.0e6, 218.1e6, 878.0e6])
    got = mesh.unified_weight_cycles(WSE2, P=P, weight_elements=weights, mapping="ladder")
    np.testing.assert_allclose(got, 750 * 994 * 1.0 + weights / P, rtol=1e-12)  # WSE-2: 750 x 994 program PEs, 1-cycle hops
    assert mesh.VALUES_PER_WAVELET == 1.0
    for other in ("mesh", "gpu_style", "t10"):
        assert np.all(mesh.unified_weight_cycles(WSE2, P=P, weight_elements=weights, mapping=other) == 0.0)
    with pytest.raises(Exception, match="mapping"):
        mesh.unified_weight_cycles(WSE2, P=P, weight_elements=weights, mapping="torus")


def test_a_ladder_layer_reads_its_weights_once_per_pass(monkeypatch):
    """The weight term enters a Ladder layer once per forward pass: prefill and decode of one
    dense Llama-3.1-8B layer (218.1M weights: 4096 x 6144 QKV, 4096^2 out, 3 x 4096 x 14336
    MLP) exceed the same layer without it by exactly program_pes + W / P, independent of the
    batch and the prompt."""
    from workbench.specs import load_model
    from workbench.workloads import wafer_layers
    model = load_model("llama_3_1_8b")
    W = 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336
    P = 540.0

    def cycles():
        return (wafer_layers.prefill_layer(WSE2, model, P=P, batch=1.0, prompt=4096.0, mapping="ladder")["cycles"],
                wafer_layers.decode_layer(WSE2, model, P=P, batch=1.0, context=4096.0, mapping="ladder")["cycles"],
                wafer_layers.decode_layer(WSE2, model, P=P, batch=4.0, context=4096.0, mapping="ladder")["cycles"])
    with_term = cycles()
    monkeypatch.setattr(wafer_layers, "unified_weight_cycles", lambda w, *, P, weight_elements, mapping: 0.0 * P)
    without = cycles()
    for a, b in zip(with_term, without):
        assert a - b == pytest.approx(750 * 994 + W / P, rel=1e-12)
