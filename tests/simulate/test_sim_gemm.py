"""MeshGEMM as the mesh runs it (workbench/simulate/gemm.py): Cannon on folded rings (mesh),
bulk-synchronous SUMMA with panels forwarded in software (gpu_style), T10's core-ID ring with a
relayed wrap-around, Ladder's relayed panel gather: each computes A @ B exactly in fp32."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.primitives.mesh import MAPPINGS, mesh_gemm
from workbench.backends import numbers
from workbench.simulate import DoesNotFit, run
from workbench.simulate.collectives import fold, ring_transfers
from workbench.simulate.gemm import gemm_sram_bytes


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("P, m, k, n", [(1, 3, 4, 5), (2, 4, 4, 4), (3, 5, 7, 6), (4, 8, 12, 16), (5, 10, 10, 3),
                                        (6, 12, 12, 12)])
def test_result_equals_numpy_exactly(mapping, P, m, k, n):
    r = run("gemm", mapping, P=P, m=m, k=k, n=n, hardware="wse2")
    assert r.correct and r.max_error == 0.0


def test_fold_puts_ring_neighbours_at_most_two_hops_apart():
    for P in range(2, 40):
        phys = fold(P)
        assert sorted(phys.tolist()) == list(range(P))
        assert np.abs(np.diff(np.r_[phys, phys[0]])).max() <= 2
        src, dirs, hops, names = ring_transfers(P, -1, "x")
        assert hops.max() <= 2 and set(dirs) <= {"E", "W"}


def test_cannon_uses_few_colors_and_its_compute_is_the_closed_forms():
    w = numbers("wse3")
    r = run("gemm", "mesh", P=8, m=64, k=64, n=64)
    assert r.colors <= 12  # a handful of groups per ring direction, rows and columns apart
    closed = float(mesh_gemm(w, P=8.0, m=64, k=64, n=64)["compute_cycles"])
    step = int(np.ceil(closed / 8 - 1e-9))
    assert np.all(r.busy["compute"] == 8 * step)  # P multiplies of kt x nt @map calls
    assert r.cycles == pytest.approx(float(mesh_gemm(w, P=8.0, m=64, k=64, n=64)["cycles"]), rel=0.01)


def test_sram_plans_count_each_mappings_buffers():
    # Cannon keeps two A and two B tiles; SUMMA its own and two panel buffers of each
    assert float(gemm_sram_bytes(P=4, m=8, k=8, n=8)) == (2 * 4 + 2 * 4 + 4) * 2
    assert float(gemm_sram_bytes(P=4, m=8, k=8, n=8, mapping="gpu_style")) == (3 * 4 + 3 * 4 + 4) * 2
    with pytest.raises(DoesNotFit, match="SRAM"):
        run("gemm", "mesh", P=2, m=256, k=256, n=256)
