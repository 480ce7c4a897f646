"""GEMM and memory-bound kernel costs: exact FLOP and byte counts, the roofline bounds over a
random grid of shapes on every chip, wave quantization, monotonicity and input types."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from workbench import predict
from workbench.primitives.gemm import (SCALED_FORMAT_MATH, elementwise, gemm, host_bound_table, memory_time,
                                       wave_efficiency)
from workbench.specs import list_gpus
from workbench.units import DTYPE_BYTES
from workbench.backends import numbers

HARDWARE = list_gpus()
N_SHAPES = 4000


def _shapes(seed=20241201, n=N_SHAPES, hi=65536):
    """Log-uniform integer shapes from 1 to 64k per dimension (decode GEMVs to big GEMMs)."""
    rng = np.random.default_rng(seed)
    m, n_, k = (np.round(np.exp(rng.uniform(0.0, np.log(hi), n))) for _ in range(3))
    return m, n_, k


def _dtypes(hw):
    """The math dtypes the chip has tensor units for (fp32 is CUDA-core math, not a GEMM dtype)."""
    return [dt for dt in ("tf32", "bf16", "fp16", "fp8", "int8", "fp4") if np.isfinite(hw.peak(dt))]


CASES = [(h, dt) for h in HARDWARE for dt in _dtypes(numbers(h))]


# ---- exact counts ----------------------------------------------------------------------------
def test_flops_and_bytes_closed_form():
    # C[m,n] = A[m,k] @ B[k,n]: m·n·k multiply-adds = 2·m·n·k FLOPs; bytes = read A and B, write C.
    m, n, k = _shapes(n=500)
    g = gemm(hw=numbers("h100_sxm"), m=m, n=n, k=k, dtype="fp8", a_bytes=1.0, b_bytes=0.5,
             c_bytes=2.0, count=3.0)
    np.testing.assert_array_equal(g["flops"], 2.0 * m * n * k * 3.0)
    np.testing.assert_array_equal(g["bytes"], (m * k * 1.0 + k * n * 0.5 + m * n * 2.0) * 3.0)
    assert gemm(hw=numbers("h100_sxm"), m=8192, n=8192, k=8192)["flops"] == 2 * 8192**3


def test_count_scales_work_and_launches_linearly():
    """count identical GEMMs: FLOPs, bytes, math time and launches scale by count; the
    memory side streams all the bytes as one transfer, at the efficiency of the total."""
    hw = numbers("h100_sxm")
    one = gemm(hw=hw, m=4096, n=4096, k=4096)
    four = gemm(hw=hw, m=4096, n=4096, k=4096, count=4.0)
    for key in ("flops", "bytes", "compute_s", "overhead_s"):
        assert float(four[key]) == pytest.approx(4.0 * float(one[key]), rel=1e-12), key
    assert float(four["memory_s"]) == pytest.approx(float(memory_time(hw=hw, nbytes=four["bytes"])), rel=1e-12)
    assert float(four["memory_s"]) <= 4.0 * float(one["memory_s"])


# ---- roofline bounds -------------------------------------------------------------------------
@pytest.mark.parametrize("hardware, dtype", CASES, ids=[f"{h}-{d}" for h, d in CASES])
def test_roofline_bounds_on_random_shapes(hardware, dtype):
    """Achieved FLOP/s never above the dtype's dense peak (nor above the best achievable
    fraction gemm_peak_eff, MAMF rows B01-B07); time never below bytes / peak bandwidth."""
    hw = numbers(hardware)
    m, n, k = _shapes()
    b = DTYPE_BYTES[dtype]
    g = gemm(hw=hw, m=m, n=n, k=k, dtype=dtype, a_bytes=b, b_bytes=b, c_bytes=b)
    achieved = g["flops"] / g["time_s"]
    peak = hw.peak(dtype)
    assert np.all(np.isfinite(g["time_s"])) and np.all(g["time_s"] > 0)
    assert np.all(achieved <= peak)
    assert np.all(achieved <= peak * hw.gemm_peak_eff_for(dtype) * (1 + 1e-12))
    assert np.all(g["compute_s"] >= g["flops"] / peak)
    assert np.all(g["memory_s"] >= g["bytes"] / hw.hbm_bandwidth_bytes_per_s)
    assert np.all(g["time_s"] >= g["bytes"] / hw.hbm_bandwidth_bytes_per_s)
    np.testing.assert_array_equal(g["time_s"], np.maximum(g["compute_s"], g["memory_s"]))
    np.testing.assert_array_equal(g["compute_bound"], g["compute_s"] >= g["memory_s"])


@pytest.mark.parametrize("hardware", HARDWARE)
def test_memory_time_bounds(hardware):
    hw = numbers(hardware)
    nbytes = np.logspace(0, 12, 500)
    t = memory_time(hw=hw, nbytes=nbytes)
    assert np.all(t >= nbytes / hw.hbm_bandwidth_bytes_per_s)
    e = elementwise(hw=hw, nbytes=nbytes, count=5.0)
    np.testing.assert_array_equal(e["time_s"], t)
    assert e["overhead_s"] == pytest.approx(5.0 * hw.kernel_launch_s)


def test_chip_without_the_dtype_gives_nan_not_a_number():
    # A100 has no FP8 tensor cores (A100 datasheet): no invented time.
    g = gemm(hw=numbers("a100_sxm"), m=4096, n=4096, k=4096, dtype="fp8")
    assert np.isnan(g["compute_s"])


# ---- wave quantization ------------------------------------------------------------------------
@pytest.mark.parametrize("hardware", HARDWARE)
def test_wave_efficiency_in_unit_interval(hardware):
    m, n, k = _shapes()
    w = wave_efficiency(hw=numbers(hardware), m=m, n=n, k=k)
    assert np.all((w > 0) & (w <= 1))


@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("waves_m, tiles_n", [(1, 1), (1, 3), (2, 1), (3, 2)])
@pytest.mark.parametrize("k", [64, 1000, 8192])
def test_wave_efficiency_is_one_on_exact_multiples(hardware, waves_m, tiles_n, k):
    """m = tile_m · n_sms · a, n = tile_n · b: no padding, and the a·b·n_sms tiles fill
    exactly a·b waves of the SMs, so no SM idles."""
    hw = numbers(hardware)
    m = hw.gemm_tile_m * hw.n_sms * waves_m
    n = hw.gemm_tile_n * tiles_n
    assert float(wave_efficiency(hw=hw, m=m, n=n, k=k)) == pytest.approx(1.0, abs=1e-12)


def test_an_empty_gemm_takes_no_math_and_raises_no_warning():
    """An iteration without prompt tokens asks for m = 0 rows (workloads/layers masks the part
    afterwards): its wave efficiency is finite, its math time 0, with no 0 / 0 on the way."""
    import warnings
    hw = numbers("h100_sxm", framework="none")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        eff = wave_efficiency(hw=hw, m=np.array([0.0, 16.0]), n=4096.0, k=4096.0)
        g = gemm(hw=hw, m=0.0, n=4096.0, k=4096.0, dtype="bf16")
    assert np.all(np.isfinite(eff)) and np.all((eff > 0) & (eff <= 1))
    assert float(g["compute_s"]) == 0.0 and np.isfinite(float(g["time_s"]))


def test_wave_efficiency_closed_form_h100_1024_cube():
    # H100: 132 SMs, 128x256 tiles. 1024^3 has 8·4 = 32 tiles; stream-K splits K in
    # floor(132/32) = 4 (k/256 = 4 allows it): 128 work units on 132 SMs = 0.9697.
    assert float(wave_efficiency(hw=numbers("h100_sxm"), m=1024, n=1024, k=1024)) == \
        pytest.approx(128 / 132, rel=1e-12)


@pytest.mark.parametrize("hardware", HARDWARE)
def test_sm_time_monotone_in_each_dimension(hardware):
    """SM-time of the best tiling, 2mnk / wave_efficiency (the FLOP slots the SMs occupy),
    never falls when m, n or k grows. Regression: K-splits were limited to floor(k/256),
    so k = 512 occupied half the SM-time of k = 511."""
    hw = numbers(hardware)
    def sm_time(m, n, k):
        return 2.0 * m * n * k / wave_efficiency(hw=hw, m=m, n=n, k=k)
    m, n, k = _shapes(n=1500)
    for step in (1.0, 7.0, 64.0):
        base = sm_time(m, n, k)
        for grown in (sm_time(m + step, n, k), sm_time(m, n + step, k), sm_time(m, n, k + step)):
            assert np.all(grown >= base * (1 - 1e-12))
    ks = np.arange(1.0, 4097.0)
    t = sm_time(256.0, 256.0, ks)  # flat where stream-K spreads k over more SMs: rounding only
    assert np.all(t[1:] >= t[:-1] * (1 - 1e-12))


@pytest.mark.parametrize("hardware", HARDWARE)
def test_time_monotone_in_m_n_k(hardware):
    """The modelled GEMM time never falls when m, n or k grows. The size ramp is keyed by
    executed FLOPs (2mnk / wave efficiency, which never falls: see the test above) and
    gemm_eff is a power law between points with log-log slope < 1, so executed / eff(executed)
    grows with it; the fastest tile choice is a minimum of such times, and memory_time is
    non-decreasing in bytes for the same reason."""
    hw = numbers(hardware)
    m, n, k = _shapes(n=3000)
    bad = []
    for dtype in ("bf16", "fp8") if np.isfinite(hw.peak("fp8")) else ("bf16",):
        base = gemm(hw=hw, m=m, n=n, k=k, dtype=dtype)["time_s"]
        for name, grown in (("m", dict(m=m + 16, n=n, k=k)), ("n", dict(m=m, n=n + 16, k=k)),
                            ("k", dict(m=m, n=n, k=k + 16))):
            t = gemm(hw=hw, dtype=dtype, **grown)["time_s"]
            if np.any(t < base * (1 - 1e-12)):
                i = int(np.argmax(base / t))
                bad.append(f"{dtype} +16 in {name}: {m[i]:.0f}x{n[i]:.0f}x{k[i]:.0f} "
                           f"{base[i]:.3g} s -> {t[i]:.3g} s")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("mn", [64.0, 128.0, 256.0])
def test_compute_time_monotone_in_k_through_split_points(hardware, mn):
    """Few output tiles, so stream-K splits K over the idle SMs; up to 2·256²·8192 = 1.1e9
    FLOPs, below the first ramp point (2.147e9), so the ramp is flat and compute time is
    SM-time. Regression: with floor(k/256) splits, compute time halved from k = 511 to 512."""
    ks = np.arange(1.0, 8193.0)
    t = gemm(hw=numbers(hardware), m=mn, n=mn, k=ks, dtype="bf16")["compute_s"]
    assert np.all(t[1:] >= t[:-1] * (1 - 1e-12))


# ---- one function, every input type -------------------------------------------------------------
def test_float_ndarray_dataarray_agree():
    """xarray's test_apply_two_inputs pattern: the same call on floats, ndarrays and
    DataArrays gives the same numbers; DataArrays broadcast by dimension name."""
    hw = numbers("h100_sxm")
    ms, ns, k = np.array([1.0, 128.0, 1000.0, 8192.0]), np.array([256.0, 4096.0, 28672.0]), 8192.0
    arr = gemm(hw=hw, m=ms[:, None], n=ns[None, :], k=k, dtype="fp8")
    da = gemm(hw=hw, m=xr.DataArray(ms, dims="m"), n=xr.DataArray(ns, dims="n"), k=k, dtype="fp8")
    for key in ("flops", "bytes", "compute_s", "memory_s", "time_s", "compute_bound"):
        assert isinstance(da[key], xr.DataArray), key
        assert da[key].dims == ("m", "n"), (key, da[key].dims)  # 2-D from two 1-D inputs
        np.testing.assert_allclose(da[key].values, arr[key], rtol=1e-12)
        for i, mi in enumerate(ms):
            for j, nj in enumerate(ns):
                scalar = gemm(hw=hw, m=float(mi), n=float(nj), k=k, dtype="fp8")[key]
                assert float(scalar) == pytest.approx(float(arr[key][i, j]), rel=1e-12)
    # Same name on both inputs: aligned, not an outer product.
    same = gemm(hw=hw, m=xr.DataArray(ms[:3], dims="x"), n=xr.DataArray(ns, dims="x"), k=k)
    assert same["time_s"].dims == ("x",)


def test_dataarray_coords_survive():
    hw = numbers("h100_sxm")
    m = xr.DataArray([64.0, 512.0], dims="batch", coords={"batch": [64, 512]})
    t = gemm(hw=hw, m=m, n=8192.0, k=8192.0)["time_s"]
    assert t.dims == ("batch",) and list(t.batch.values) == [64, 512]


def test_predict_gemm_matches_primitive_and_sweeps():
    ds = predict.gemm(hardware="h100_sxm", m=[1024, 8192], n=8192, k=8192, dtype=["bf16", "fp8"],
                      framework="none")  # the analytical primitive (tables: tests/backends/test_kernel_tables.py)
    assert dict(ds.sizes) == {"m": 2, "dtype": 2}
    g = gemm(hw=numbers("h100_sxm"), m=8192.0, n=8192.0, k=8192.0, dtype="fp8",
             a_bytes=1.0, b_bytes=1.0, c_bytes=1.0)
    point = ds.sel(m=8192, dtype="fp8")
    assert float(point.time_s) == pytest.approx(float(g["time_s"]))
    assert float(point.flops_per_s) == pytest.approx(float(g["flops"] / g["time_s"]))
    assert str(point.bound.values) == "compute"
    assert ds.flops_per_s.attrs["units"] == "FLOP/s" and ds.time_s.attrs["units"] == "s"
    assert ds.bytes.attrs["units"] == "B" and ds.flops.attrs["units"] == "FLOP"


def test_host_bound_gemm_tables_are_not_read_for_served_gemms():
    # vLLM's block-FP8 GEMM tables carry 47-240 us of fixed latency (workbench/specs/kernels/*-vllm.json,
    # score.fixed_s) where the same DeepGEMM kernel under SGLang and TensorRT-LLM carries 3.6-4.0 us: host
    # time a CUDA-graph replay leaves out. A served GEMM reads vLLM's FP8 table instead (same tensor-core math)
    import json
    from pathlib import Path
    from workbench.backends import numbers
    from workbench.primitives.gemm import HOST_BOUND_FACTOR
    doc = json.loads((Path(__file__).resolve().parents[2] / "workbench/specs/kernels/b200-vllm.json").read_text())
    fixed = {s["variant"]: s["score"]["fixed_s"] for s in doc["surfaces"] if s["class"] == "gemm"}
    assert fixed["fp8_block"] > 5 * HOST_BOUND_FACTOR * fixed["fp8"]  # 128 us against 4.2 us
    shape = dict(m=1, n=4096, k=4096, dtype="fp8_block", a_bytes=1.0, b_bytes=1.0, c_bytes=1.0)
    vllm, sglang = (float(gemm(hw=numbers("b200", framework=fw), **shape)["time_s"]) for fw in ("vllm", "sglang"))
    assert vllm < 2.0 * sglang and vllm < fixed["fp8_block"]


@pytest.mark.parametrize("hardware,framework", [("b200", "trtllm"), ("b200", "vllm"), ("h200_sxm", "sglang")])
def test_a_served_gemm_reads_the_roofline_its_surface_was_fitted_with(hardware, framework):
    """The layer model's GEMM in each weight format (its bytes from ops.part_formats, as an
    iteration passes them) takes the time the format's fitted surface gives the same shape
    through the fit's own roofline (calibrate/kernel_features.gemm_features: the tables'
    bytes with their block scales), less the CUDA-graph saving both sides apply: within 1%
    (block-FP8's activation scales, 4 B per 128 values, are the only bytes the layer model
    does not count; they move only compute-bound shapes' memory term). With NVFP4 counted as
    0.5 B the fp4 GEMMs at decode sizes ran 8% under their own tables."""
    from workbench.calibrate.kernel_features import GEMM_BYTES, gemm_features
    from workbench.primitives.kernel_fits import served_time
    from workbench.specs import load_hardware
    from workbench.workloads import ops
    # the bytes the committed fp4 surfaces were fitted with: NVFP4's values and E4M3 scales
    assert GEMM_BYTES["fp4"][:2] == (0.5 + 1 / 16, 0.5 + 1 / 16)
    hw, spec = numbers(hardware, framework=framework), load_hardware(hardware)
    m = np.array([1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 8192.0])
    shapes = pd.DataFrame({"m": np.repeat(m, 2), "n": np.tile([4096.0, 28672.0], len(m)),
                           "k": np.tile([7168.0, 4096.0], len(m))})
    checked = 0
    for fmt in ("bf16", "fp8", "fp8_block", "fp4"):
        grid, fixed_s = hw.fitted("gemm", fmt)
        if grid is None or host_bound_table(fixed_s, hw.fitted("gemm", SCALED_FORMAT_MATH.get(fmt, fmt))[1]):
            continue
        layer, _ = ops.part_formats(weights=fmt, activations=fmt)
        served = gemm(hw=hw, m=shapes.m.values, n=shapes.n.values, k=shapes.k.values, dtype=fmt,
                      a_bytes=layer["a_bytes"], b_bytes=layer["w_bytes"], c_bytes=2.0)["time_s"]
        params = {p: hw.fitted_param("gemm", fmt, p) for p in ("tile_m", "max_passes", "wave_tile_m", "wave_tile_n")}
        roof, coords = gemm_features(shapes, spec, fmt, **params)
        fitted = served_time(fixed_s + roof / grid(**coords), roof, hw.graph_saving_s)
        np.testing.assert_allclose(served, fitted, rtol=0.01, err_msg=f"{hardware} {framework} {fmt}")
        checked += 1
    assert checked >= 3


def test_an_input_quantized_upstream_skips_the_tables_quantization_latency():
    """aiconfigurator's collectors time Linear.forward on a BF16 input, so a scaled format's
    table holds its input's quantization (B200 vLLM: FP8 and NVFP4 fixed latency above the
    BF16 table's). A served model that fuses that quantization into the kernel before
    (hw.fused_input_quant: frameworks.yaml fused_activation_quant) takes the format's surface
    with the BF16 table's fixed latency: exactly the difference, BF16 GEMMs unchanged, and never
    below the roofline."""
    import dataclasses
    hw = numbers("b200", framework="vllm")
    fused = dataclasses.replace(hw, fused_input_quant=True)
    plain_fixed = hw.fitted("gemm", "bf16")[1]
    m = np.array([1.0, 16.0, 256.0])
    for fmt in ("fp8", "fp4"):
        b = DTYPE_BYTES[fmt]
        table, served = (gemm(hw=h, m=m, n=7168.0, k=4096.0, dtype=fmt, a_bytes=b, b_bytes=b, c_bytes=2.0)
                         for h in (hw, fused))
        fixed = hw.fitted("gemm", fmt)[1]
        assert fixed > plain_fixed
        np.testing.assert_allclose(table["time_s"] - served["time_s"], fixed - plain_fixed, rtol=1e-9)
        roof = np.maximum(2.0 * m * 7168 * 4096 / hw.peak(fmt),
                          (m * 4096 * b + 4096 * 7168 * b + m * 7168 * 2.0) / hw.hbm_bandwidth_bytes_per_s)
        assert np.all(served["time_s"] >= roof)
    bf16 = [gemm(hw=h, m=m, n=7168.0, k=4096.0, dtype="bf16")["time_s"] for h in (hw, fused)]
    np.testing.assert_array_equal(*bf16)


@pytest.mark.parametrize("hardware,framework,shape", [("a100_sxm", "trtllm", (32768, 512, 16384)),
                                                      ("b300", "trtllm", (32768, 16, 1024)),
                                                      ("h100_sxm", "vllm", (32768, 16, 1024))])
def test_a_fitted_gemm_never_beats_its_physical_roofline(hardware, framework, shape):
    """Past a surface's last knot its efficiency against the quantized roofline can exceed 1:
    the time is floored at every FLOP at the peak and every operand moved once at the HBM
    rate (A100 TensorRT-LLM BF16 ran 354 of 312 TFLOP/s, B300 read at 9.9 of 8 TB/s)."""
    m, n, k = shape
    ds = predict.gemm(hardware=hardware, framework=framework, dtype="bf16", m=m, n=n, k=k)
    hw = numbers(hardware)
    ideal = max(2.0 * m * n * k / hw.peak("bf16"), 2.0 * (m * k + k * n + m * n) / hw.hbm_bandwidth_bytes_per_s)
    assert float(ds.time_s) >= ideal * (1 - 1e-12)


def test_a_gemm_without_tables_takes_at_least_one_memory_round_trip():
    """The analytical GEMM (framework "none", or a format without tables) of a tiny shape takes
    one memory latency, not nanoseconds (a 1 x 1 x 1 GEMM took 3.4 ns on H100; every table's
    smallest GEMM takes microseconds); a grouped GEMM is one kernel, one round trip."""
    hw = numbers("h100_sxm", framework="none")
    one = gemm(hw=hw, m=1.0, n=1.0, k=1.0, dtype="bf16")
    assert float(one["time_s"]) == pytest.approx(hw.memory_latency_s)
    grouped = gemm(hw=hw, m=1.0, n=8.0, k=64.0, dtype="bf16", count=64.0, grouped=True)
    assert float(grouped["time_s"]) == pytest.approx(hw.memory_latency_s)
    assert float(predict.gemm(hardware="h100_sxm", m=1, n=1, k=1, framework="none").time_s) >= 1e-6


def test_fp16_takes_the_bf16_tables_where_a_framework_times_bf16_only():
    """FP16 and BF16 share the tensor cores' datapath and peak; a framework's tables time
    BF16, so an FP16 GEMM is timed by that surface (it had fallen back to the analytical
    model under the framework's name: 46.5 / 1505 us against BF16's 50.2 / 1375 us on H100)."""
    ds = predict.gemm(hardware="h100_sxm", m=[1, 8192], n=8192, k=8192, dtype=["bf16", "fp16"], framework="trtllm")
    np.testing.assert_allclose(ds.time_s.sel(dtype="fp16"), ds.time_s.sel(dtype="bf16"), rtol=1e-12)
    none = predict.gemm(hardware="h100_sxm", m=8192, n=8192, k=8192, dtype="fp16", framework="none")
    assert float(none.time_s) != pytest.approx(float(ds.time_s.sel(dtype="fp16", m=8192)), rel=1e-3)
