"""calibrate.fit recovers known efficiency tables from measurements the model itself
generates with those tables, returns a new spec variant without touching the YAML, and
shows over-fitting through leave-one-out."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from workbench import predict
from workbench.calibrate import fit
from workbench.microbench.schema import record
from workbench.specs import EfficiencyTable, load_hardware

H100 = load_hardware("h100_sxm")
UP = H100.link("scale_up")
TRUE_RAMP = EfficiencyTable(size=H100.gemm_eff.size, eff=(0.3, 0.6, 0.8, 0.95, 1.0))
TRUE_MEMORY = EfficiencyTable(size=H100.memory_eff.size, eff=(0.05, 0.3, 0.7, 0.8, 0.82))
TRUE_BUSBW = EfficiencyTable(size=UP.busbw_eff.size, eff=(0.1, 0.35, 0.5, 0.6, 0.7, 0.72))


def truth(levels=None):
    """h100_sxm with known tables: what the synthetic silicon runs at."""
    return dataclasses.replace(
        H100, name="h100_sxm@truth", gemm_eff=TRUE_RAMP, memory_eff=TRUE_MEMORY,
        gemm_peak_eff=levels or {"bf16": 0.75, "fp8": 0.65},
        links=tuple(dataclasses.replace(ln, busbw_eff=TRUE_BUSBW) if ln is UP else ln for ln in H100.links))


def synthetic(spec, gemm_sizes=(1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768),
              memory_sizes=np.logspace(4.5, 10, 12), busbw_sizes=2.0 ** np.arange(18, 35, 2), hardware="h100_sxm"):
    rows = [record(kind="gemm", hardware=hardware, dtype=dt, m=s, n=s, k=s, devices=1, metric="flops_per_s",
                   value_si=1.0) for dt in ("fp8", "bf16") for s in gemm_sizes]
    rows += [record(kind="memory", op="triad", hardware=hardware, size_bytes=s, devices=1, metric="bytes_per_s",
                    value_si=1.0) for s in memory_sizes]
    rows += [record(kind="all_reduce", op="all_reduce", hardware=hardware, size_bytes=s, devices=8,
                    metric="bus_bandwidth_bytes_per_s", value_si=1.0) for s in busbw_sizes]
    df = pd.DataFrame(rows)
    df["value_si"] = [fit.predict_kernel(spec, r) for _, r in df.iterrows()]
    return df


@pytest.fixture(scope="module")
def recovered():
    return fit.calibrate("h100_sxm", synthetic(truth()))


def test_a_new_variant_and_the_yaml_untouched(recovered):
    assert recovered.name == "h100_sxm@calibrated"
    assert "22 GEMM, 12 memory, 9 collective" in recovered.notes
    fresh = load_hardware("h100_sxm")
    assert fresh is H100 and fresh.gemm_eff == H100.gemm_eff and fresh.name == "h100_sxm"
    assert recovered.peak_flops_per_s == H100.peak_flops_per_s and recovered.n_sms == H100.n_sms


@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_gemm_efficiency_recovered(recovered, dtype):
    """The achieved fraction of peak, level times ramp, at the known table's sizes."""
    s = np.asarray(TRUE_RAMP.size)
    got = np.asarray(recovered.gemm_eff(s)) * recovered.gemm_peak_eff[dtype]
    want = np.asarray(TRUE_RAMP.eff) * truth().gemm_peak_eff[dtype]
    np.testing.assert_allclose(got, want, rtol=0.01)


def test_ramp_itself_recovered_when_the_levels_are_known():
    t = truth(levels=dict(H100.gemm_peak_eff))
    cal = fit.calibrate("h100_sxm", synthetic(t), tables=("gemm",), gemm_levels=False)
    np.testing.assert_allclose(cal.gemm_eff(np.asarray(TRUE_RAMP.size)), TRUE_RAMP.eff, rtol=0.01)
    assert cal.gemm_peak_eff == pytest.approx(H100.gemm_peak_eff, rel=0.01)


def test_memory_and_busbw_recovered(recovered):
    np.testing.assert_allclose(recovered.memory_eff(np.asarray(TRUE_MEMORY.size)), TRUE_MEMORY.eff, rtol=0.01)
    got = recovered.link("scale_up").busbw_eff(np.asarray(TRUE_BUSBW.size))
    np.testing.assert_allclose(got, TRUE_BUSBW.eff, rtol=0.01)
    assert recovered.link("scale_out") == H100.link("scale_out")  # no scale-out rows: unchanged


def test_the_fit_reproduces_its_measurements(recovered):
    df = synthetic(truth())
    pred = np.array([fit.predict_kernel(recovered, r) for _, r in df.iterrows()])
    np.testing.assert_allclose(pred, df.value_si, rtol=0.01)


def test_fitted_tables_keep_time_monotone_and_eff_at_most_one(recovered):
    for table in (recovered.gemm_eff, recovered.memory_eff, recovered.link("scale_up").busbw_eff):
        s, e = np.asarray(table.size), np.asarray(table.eff)
        assert np.all(e <= 1) and np.all(e > 0)
        assert np.all(np.diff(np.log(e)) <= np.diff(np.log(s)) + 1e-9)  # size / eff never falls


def test_leave_one_out_shows_over_fitting():
    """Dense sweeps: every row is predicted from its neighbours (LOO ~ in-sample). Sparse
    sweeps: the end rows pin table knots alone, and leaving one out shows it."""
    dense = fit.leave_one_out("h100_sxm", synthetic(truth()), prior="spec")
    assert dense.err_in_sample.abs().max() < 0.01
    assert dense.err_loo.abs().median() < 0.02
    sparse = fit.leave_one_out("h100_sxm", synthetic(truth(), gemm_sizes=(1024, 4096, 16384),
                                                     memory_sizes=(1e5, 1e7, 1e9), busbw_sizes=(2.0**20, 2.0**30)),
                               prior="spec")
    assert sparse.err_in_sample.abs().max() < 0.02
    assert sparse.err_loo.abs().max() > 0.2
    assert (sparse.err_loo.abs() >= sparse.err_in_sample.abs() - 1e-9).all()


def test_pooled_prior_learns_from_other_hardware_only():
    """H100 with no memory rows of its own: the pooled prior is the fit to A100's rows, in
    fractions of each chip's own bandwidth; the H100 YAML table plays no part."""
    a100 = load_hardware("a100_sxm")
    a100_truth = dataclasses.replace(a100, memory_eff=TRUE_MEMORY)
    rows = synthetic(a100_truth, gemm_sizes=(), busbw_sizes=(), hardware="a100_sxm")
    cal = fit.calibrate("h100_sxm", rows, prior="pooled", tables=("memory",))
    np.testing.assert_allclose(cal.memory_eff(np.asarray(TRUE_MEMORY.size)), TRUE_MEMORY.eff, rtol=0.02)
    kept = fit.calibrate("h100_sxm", rows, prior="spec", tables=("memory",))
    assert kept.memory_eff == H100.memory_eff


def test_launch_rows_set_kernel_launch_s():
    rows = pd.DataFrame([record(kind="launch", op=op, hardware="h100_sxm", metric="time_s", value_si=v)
                         for op, v in (("graph", 2.5e-6), ("graph", 3.5e-6), ("graph", 3.0e-6), ("eager", 9e-6))])
    assert fit.calibrate("h100_sxm", rows).kernel_launch_s == pytest.approx(3.0e-6)


def test_a_calibrated_spec_goes_through_the_public_interface_as_it_is(recovered):
    args = dict(m=4096, n=4096, k=4096, dtype="fp8")
    args["framework"] = "none"  # the analytical efficiencies calibration fits (not the kernel tables)
    shipped = float(predict.gemm(hardware="h100_sxm", **args).flops_per_s)
    swapped = float(predict.gemm(hardware=recovered, **args).flops_per_s)
    assert load_hardware("h100_sxm") is not recovered  # nothing global was patched
    row = record(kind="gemm", hardware="h100_sxm", dtype="fp8", m=4096, n=4096, k=4096, metric="flops_per_s",
                 value_si=1)
    assert swapped == pytest.approx(fit.predict_kernel(recovered, row), rel=1e-12)
    assert swapped != pytest.approx(shipped, rel=1e-3)


@pytest.mark.parametrize("row,call", [
    (dict(kind="gemm", dtype="bf16", m=2048, n=8192, k=1024, metric="flops_per_s"),
     lambda: predict.gemm(hardware="a100_sxm", m=2048, n=8192, k=1024, dtype="bf16", framework="none").flops_per_s),
    (dict(kind="attention", dtype="bf16", batch=2, seq_len=4096, n_heads=32, head_dim=128, causal=1.0,
          metric="flops_per_s"),
     lambda: predict.attention(hardware="a100_sxm", batch=2, seq_len=4096, n_heads=32, head_dim=128,
                               framework="none").flops_per_s),
    (dict(kind="all_gather", size_bytes=2.0**26, devices=16, metric="bus_bandwidth_bytes_per_s"),
     lambda: predict.collective(hardware="a100_sxm", devices=16, op="all_gather",
                                size_bytes=2.0**26, framework="none").bus_bandwidth_bytes_per_s),
])
def test_predict_kernel_is_the_public_interface(row, call):
    r = record(hardware="a100_sxm", value_si=1.0, **row)
    assert fit.predict_kernel(load_hardware("a100_sxm"), r) == pytest.approx(float(call()), rel=1e-12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="prior='yaml'"):
        fit.calibrate("h100_sxm", pd.DataFrame([]), prior="yaml")
    with pytest.raises(ValueError, match="not a GPU"):
        fit.calibrate("wse2", pd.DataFrame([]))
    with pytest.raises(ValueError, match="not a kernel"):
        fit.predict_kernel(H100, record(kind="inference", metric="time_s", value_si=1.0))
