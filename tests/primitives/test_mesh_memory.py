"""What the mesh kernels hold in a PE's SRAM, and when the memory ports, not the SIMD width,
bound a PE's vector work (primitives/mesh.py)."""
from __future__ import annotations

import dataclasses

import pytest

from workbench.backends import as_numbers
from workbench.primitives.mesh import (ACC_BYTES, gemm_bytes_per_pe, gemv_bytes_per_pe, memory_port_bound, mesh_gemv,
                                       tiles)


def test_gemv_holds_its_weight_tile_and_each_rows_operands():
    """ceil(k/P) x ceil(n/P) weights (mesh_gemv's weight_bytes_per_pe) plus, per row, its x
    tile and its partial sums."""
    w = as_numbers("wse2")
    P, k, n = 64.0, 16384, 16384
    one = gemv_bytes_per_pe(P=P, k=k, n=n)
    assert one == 256 * 256 * 2.0 + 256 * 2.0 + 256 * ACC_BYTES
    assert one - 2 * 256 - 256 * ACC_BYTES == pytest.approx(float(mesh_gemv(w, P=P, k=k, n=n)["weight_bytes_per_pe"]))
    assert gemv_bytes_per_pe(P=P, k=k, n=n, rows=5.0) - one == pytest.approx(4 * (256 * 2.0 + 256 * ACC_BYTES))


@pytest.mark.parametrize("P,m,k,n", [(16.0, 100, 300, 70), (750.0, 4096, 8192, 8192), (3.0, 5, 5, 5)])
def test_gemm_holds_three_tiles_and_the_two_shifted_ones(P, m, k, n):
    mt, kt, nt = tiles(m, P), tiles(k, P), tiles(n, P)
    assert gemm_bytes_per_pe(P=P, m=m, k=k, n=n) == 2 * (mt * kt + kt * nt) * 2.0 + mt * nt * ACC_BYTES


def test_a_single_pe_needs_no_receive_buffers():
    assert gemm_bytes_per_pe(P=1.0, m=4, k=4, n=4) == (16 + 16) * 2.0 + 16 * ACC_BYTES


def test_the_memory_ports_bound_wse3_fp16_but_not_wse2():
    """An FMA element reads 2 x 2 B; WSE-3's 8-wide fp16 unit would need 32 B/cycle against
    its 16 B/cycle port, WSE-2's 4-wide exactly 16 (wse_facts.md §1)."""
    assert bool(memory_port_bound(as_numbers("wse3"), "fp16"))
    assert not bool(memory_port_bound(as_numbers("wse2"), "fp16"))
    wide = dataclasses.replace(as_numbers("wse3"), mem_read_bytes_per_cycle=32.0)
    assert not bool(memory_port_bound(wide, "fp16"))
