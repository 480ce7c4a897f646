"""MeshGEMV as the mesh runs it (workbench/simulate/gemv.py): every mapping computes x @ W
exactly in fp32 on every PE of each column, whatever the grid (powers of two or not, padded
tiles); its local compute is the closed form's to the cycle; it fits SRAM or says it does not;
and a 64 x 64 run takes seconds."""
from __future__ import annotations

import time

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.errors import InputError
from workbench.primitives.mesh import MAPPINGS, mesh_gemv
from workbench.simulate import DoesNotFit, run, sim_numbers
from workbench.simulate.gemv import gemv_program, gemv_sram_bytes


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("P, k, n, rows", [(1, 7, 5, 1), (2, 8, 8, 1), (3, 10, 7, 2), (5, 33, 21, 1),
                                           (8, 96, 64, 4), (12, 100, 200, 1)])
def test_result_equals_numpy_exactly(mapping, P, k, n, rows):
    r = run("gemv", mapping, P=P, k=k, n=n, rows=rows, hardware="wse2")
    assert r.correct and r.max_error == 0.0


def test_the_check_compares_every_pe_with_numpy():
    """The expected values are numpy's x @ W, each PE of column x holding that column's slice:
    perturb one PE's result and the check fails."""
    nums = sim_numbers("wse3")
    prog = gemv_program(nums, P=4, k=16, n=16, mapping="mesh")
    rng = np.random.default_rng(0)
    x, W = rng.integers(-4, 5, (1, 16)).astype(np.float32), rng.integers(-4, 5, (16, 16)).astype(np.float32)
    np.testing.assert_array_equal(prog.expected.reshape(4, 4, 4)[0, :, :].ravel(), (x @ W).ravel())
    from workbench.simulate.machine import Machine
    m = Machine(prog, nums)
    r = m.run()
    assert r.correct
    got = prog.result()
    got[5, 0] += 1.0
    assert not np.array_equal(got, prog.expected)


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_fp32_values_stay_exact_at_large_k(mapping):
    # k = 4096 products of integers in [-4, 4]: sums below 2^24, exact in fp32 in any order
    r = run("gemv", mapping, P=8, k=4096, n=64, hardware="wse3")
    assert r.correct


def test_local_compute_is_the_closed_forms_to_the_cycle():
    """The PE's multiply: per row a @map call per local x element, each an FMA vector of
    ceil(n/P): rows ceil(k/P) (c + max(nt/4, nt*4/16, nt*2/8)) cycles on WSE-2, rounded up."""
    w = numbers("wse2")
    for P, k, n, rows in ((4, 64, 64, 1), (8, 96, 200, 2)):
        r = run("gemv", "mesh", P=P, k=k, n=n, rows=rows, hardware="wse2")
        closed = float(mesh_gemv(w, P=P, k=k, n=n, rows=rows)["compute_cycles"])
        assert np.all(r.busy["compute"] == int(np.ceil(closed - 1e-9)))


def test_busy_cycles_never_exceed_the_run():
    r = run("gemv", "gpu_style", P=8, k=64, n=64)
    assert np.all(r.busy_cycles <= r.cycles) and 0 < r.utilization < 1


def test_sram_is_checked():
    # W tile 120 x 120 fp16 = 28.8 kB fits the 42 kB a WSE-3 PE has free; 160 x 160 = 51 kB does not
    assert run("gemv", "mesh", P=2, k=240, n=240).correct
    with pytest.raises(DoesNotFit, match="SRAM"):
        run("gemv", "mesh", P=2, k=320, n=320)
    assert float(gemv_sram_bytes(P=2, k=320, n=320)) > sim_numbers("wse3").sram_bytes
    # a larger SRAM knob makes it fit
    assert run("gemv", "mesh", P=2, k=320, n=320, hardware_overrides={"sram_per_pe_bytes": 98304}).correct


@pytest.mark.parametrize("kw, match", [(dict(P=0), "P=0"), (dict(P=2.5), "P=2.5"), (dict(P=1000), "P=1000"),
                                       (dict(P=4, mapping="cannon"), "mapping='cannon'"),
                                       (dict(P=4, m=3), "m=3"), (dict(P=4, dtype="fp8"), "dtype='fp8'")])
def test_bad_input_is_one_clear_error(kw, match):
    args = dict(k=16, n=16)
    mapping = kw.pop("mapping", "mesh")
    with pytest.raises(InputError, match=match):
        run("gemv", mapping, **{**args, **kw})


def test_a_64_x_64_meshgemv_takes_seconds():
    """4,096 PEs, a Llama 3.1 8B up-projection's tiles (12 x 80 per PE, as on a 360 x 360 region)
    and a square 64 x 64 tile: each well under 10 s (measured on this 2-core machine: 0.3 s and
    1.5 s; benchmarks/bench_simulate.py prints the figures)."""
    for kt, nt in ((12, 80), (64, 64)):
        t0 = time.perf_counter()
        r = run("gemv", "mesh", P=64, k=64 * kt, n=64 * nt)
        assert r.correct and time.perf_counter() - t0 < 10.0
