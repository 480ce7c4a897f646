"""predict.gemm on a wafer (backends/wafer.WaferBackend.gemm): the faster of MeshGEMV and
MeshGEMM among those whose tiles fit in a PE's usable SRAM, and a flagged point where
neither does."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import as_numbers
from workbench.primitives.mesh import gemm_bytes_per_pe, gemv_bytes_per_pe, mesh_gemm, mesh_gemv


def test_tiles_beyond_a_pes_sram_are_flagged():
    """A 16384 x 16384 fp16 weight on a 16 x 16 grid is 1024 x 1024 x 2 B = 2 MB a PE, on
    64 x 64 128 KB: more than a PE's 48 KB (wse_facts.md §1) for either kernel, flagged
    with the reason and no time; on 512 x 512 (32 x 32 tiles, 2 KB) it runs."""
    ds = predict.gemm(hardware="wse2", m=1, n=16384, k=16384, dtype="fp16", pe_grid=[16, 64, 512])
    w = as_numbers("wse2")
    usable = w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes
    assert list(ds.fits.values) == [False, False, True]
    assert "exceed a PE's usable SRAM" in str(ds.reason.sel(pe_grid=16).values)
    assert np.isnan(float(ds.time_s.sel(pe_grid=64))) and np.isfinite(float(ds.time_s.sel(pe_grid=512)))
    assert float(ds.pe_memory_used_bytes.sel(pe_grid=64)) > usable
    assert float(ds.pe_memory_used_bytes.sel(pe_grid=512)) <= usable
    assert list(ds.bound.values[:2]) == ["capacity", "capacity"]


def test_the_faster_kernel_that_fits_is_taken():
    """m = 2 and 64 rows of a 4096 x 4096 fp16 GEMM on WSE-3's largest square (757): one
    GEMV per row (1.51 us at m = 2, 7.76 us at 64) beats MeshGEMM's 757 shift steps (228 us),
    which m > 1 always took; at m = 4096 the rows' x tiles and partial sums no longer fit a
    PE (GEMV form) and MeshGEMM runs."""
    w = as_numbers("wse3")
    ds = predict.gemm(hardware="wse3", m=[1, 2, 64], n=4096, k=4096, dtype="fp16")
    gv = [float(mesh_gemv(w, P=757.0, k=4096, n=4096, rows=m)["cycles"]) / w.clock_hz for m in (1, 2, 64)]
    assert ds.time_s.values == pytest.approx(gv, rel=1e-12)
    assert list(ds.kernel.values) == ["mesh_gemv"] * 3
    assert float(ds.time_s.sel(m=2)) < 2e-6  # it was 228 us
    big = predict.gemm(hardware="wse2", m=4096, n=8192, k=8192, dtype="fp16")
    w2 = as_numbers("wse2")
    usable = w2.sram_per_pe_bytes - w2.sram_reserved_per_pe_bytes
    assert float(gemv_bytes_per_pe(P=750.0, k=8192, n=8192, rows=4096)) > usable
    assert float(gemm_bytes_per_pe(P=750.0, m=4096, k=8192, n=8192)) <= usable
    assert str(big.kernel.values) == "mesh_gemm" and bool(big.fits)
    assert float(big.time_s) == pytest.approx(float(mesh_gemm(w2, P=750.0, m=4096, k=8192, n=8192)["cycles"])
                                              / w2.clock_hz, rel=1e-12)


def test_a_side_beyond_the_program_mesh_is_flagged_not_clamped():
    """WSE-2's largest square is 750 PEs a side: pe_grid=800 was clamped to 750 silently."""
    ds = predict.gemm(hardware="wse2", m=1, n=8192, k=8192, dtype="fp16", pe_grid=[750, 800])
    assert bool(ds.fits.sel(pe_grid=750)) and not bool(ds.fits.sel(pe_grid=800))
    assert "pe_grid=800" in str(ds.reason.sel(pe_grid=800).values)
