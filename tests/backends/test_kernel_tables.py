"""The `framework` argument: kernel tables selected per GPU and serving framework, the
default stated in each spec, "none" for the analytical efficiencies, clear errors for what
cannot be; hypothetical hardware keeps the measured efficiency of each shape and moves its
roofline."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.backends import kernel_tables, numbers
from workbench.cli import main
from workbench.errors import InputError
from workbench.specs import load_hardware


def test_default_is_the_specs_framework():
    spec = load_hardware("h100_sxm")
    assert spec.default_framework == "trtllm" and kernel_tables.resolve(spec, None) == "trtllm"
    a = predict.gemm(hardware="h100_sxm", m=64, n=8192, k=8192)
    b = predict.gemm(hardware="h100_sxm", m=64, n=8192, k=8192, framework="trtllm")
    assert float(a.time_s) == float(b.time_s)
    c = predict.gemm(hardware="h100_sxm", m=64, n=8192, k=8192, framework="none")
    assert float(c.time_s) != float(a.time_s)


def test_frameworks_are_a_dimension():
    r = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=16, prompt=1024, generate=128,
                          framework=["trtllm", "vllm", "sglang", "none"])
    assert r.tpot_s.dims == ("framework",) and np.all(np.isfinite(r.tpot_s)) and len(set(r.tpot_s.values)) == 4


def test_chips_without_tables_and_wafers():
    assert kernel_tables.resolve(load_hardware("mi300x"), None) == "none"
    with pytest.raises(InputError, match=r"framework='trtllm' has no kernel tables for 'mi300x' and does not run on "
                                         r"amd GPUs; allowed: vllm, sglang, none"):
        predict.gemm(hardware="mi300x", m=64, n=64, k=64, framework="trtllm")
    with pytest.raises(InputError, match=r"framework='vllm' is not allowed on 'cs3'; allowed: none"):
        predict.inference(hardware="cs3", model="llama_3_1_8b", framework="vllm")
    with pytest.raises(InputError, match=r"framework='tensorrt' is not known; allowed: trtllm, vllm, sglang, none"):
        predict.gemm(hardware="h100_sxm", m=64, n=64, k=64, framework="tensorrt")
    with pytest.raises(InputError, match=r"kernel='framework' is not allowed on mi300x without kernel tables"):
        predict.attention(hardware="mi300x", batch=1, seq_len=1024, n_heads=32, head_dim=128, kernel="framework")


def test_training_defaults_to_the_gpus_kernel_tables():
    """predict.training runs on the GPU's default framework's tables (H100: trtllm) and that
    framework's attention kernel, says so (kernel_tables, attention_kernel), and "none" keeps
    the analytical efficiencies and flash2; a GPU without tables (MI300X) runs analytical."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_8b", devices=8, tp=8, global_batch=8)
    a = predict.training(**kw)
    b = predict.training(**kw, framework="trtllm", attention="framework")
    c = predict.training(**kw, framework="none")
    assert float(a.step_time_s) == float(b.step_time_s) != float(c.step_time_s)
    assert (a.kernel_tables.item(), a.attention_kernel.item()) == ("trtllm", "framework")
    assert (c.kernel_tables.item(), c.attention_kernel.item()) == ("none", "flash2")
    m = predict.training(**dict(kw, hardware="mi300x"))
    assert (m.kernel_tables.item(), m.attention_kernel.item()) == ("none", "flash2")
    assert np.isfinite(float(m.step_time_s))


def test_a_chip_with_twice_the_bandwidth_halves_a_memory_bound_gemm():
    """The surface keys on the shape, so on hypothetical hardware a memory-bound GEMV keeps
    its measured efficiency and its time follows the roofline: half with twice the HBM
    bandwidth (less the table's fixed latency, which is the same)."""
    hw = numbers("h100_sxm", framework="trtllm")
    fast = numbers("h100_sxm", {"hbm_bandwidth_bytes_per_s": 2 * 3.35e12}, framework="trtllm")
    from workbench.primitives.gemm import gemm
    a = gemm(hw=hw, m=1.0, n=16384.0, k=16384.0)
    b = gemm(hw=fast, m=1.0, n=16384.0, k=16384.0)
    _, fixed_s = hw.fitted("gemm", "bf16")
    assert (b["time_s"] - fixed_s) == pytest.approx((a["time_s"] - fixed_s) / 2, rel=1e-9)


def test_a_derived_spec_uses_the_tables_of_its_base():
    """A dataclasses.replace'd H100 with more SMs' worth of peak keeps kernel_tables
    'h100_sxm': the carry-over rule for a chip with no tables of its own."""
    base = load_hardware("h100_sxm")
    what_if = dataclasses.replace(base, name="h100_2x_peak",
                                  peak_flops_per_s={k: 2 * v for k, v in base.peak_flops_per_s.items()})
    assert kernel_tables.frameworks(what_if) == kernel_tables.frameworks(base)
    big = dict(m=8192, n=8192, k=8192)
    t0 = float(predict.gemm(hardware=base, **big).time_s)
    t1 = float(predict.gemm(hardware=what_if, **big).time_s)
    assert t1 == pytest.approx(t0 / 2, rel=0.02)  # compute-bound: half, less the fixed latency


def test_list_frameworks(capsys):
    assert main(["list", "frameworks", "h100_sxm"]) == 0
    out = capsys.readouterr().out
    assert "trtllm (default)" in out and "vllm" in out and "sglang" in out and "none:" in out
    assert "gemm" in out and "held-out median |err|" in out
    assert main(["list", "frameworks", "mi300x"]) == 0
    out = capsys.readouterr().out
    assert "no kernel tables" in out and "vllm: its engine" in out and "sglang: its engine" in out
    assert "trtllm" not in out  # NVIDIA's engine does not run on AMD GPUs (frameworks.yaml runs_on)


def test_flash3_and_the_framework_kernel_by_name():
    """FlashAttention-3 at long sequences reaches the paper's fraction of peak (740 of
    989 TFLOP/s BF16 forward on H100, Shah et al. 2024), above FlashAttention-2's."""
    r = predict.attention(hardware="h100_sxm", batch=4, seq_len=16384, n_heads=16, head_dim=128, causal=False,
                          kernel=["flash2", "flash3", "framework"])
    f = r.flops_per_s.sel(kernel="flash3").item()
    assert 0.6 * 989.4e12 < f <= 740e12 * 1.001
    assert f > r.flops_per_s.sel(kernel="flash2").item()
    assert np.isfinite(r.flops_per_s.sel(kernel="framework").item())


def test_a100_gemm_steps_where_its_tiles_spill_into_another_wave():
    """A100's cuBLAS BF16 GEMM (n = k = 4096) under SGLang as its kernel table measured it
    (aiconfigurator-core 0.12.0 systems/data/a100_sxm/gemm/sglang/0.5.10/gemm_perf.parquet):
    112.1 us at m = 768, 217.9 us at m = 769, 311.0 us at m = 2560, 440.6 us at m = 2561. The
    fitted surface carries the kernel's 128 x 256 tiles (kernel_fit.GEMM_WAVE_TILES: 96 tiles
    fill one wave of 108 SMs, 112 need two), so the served GEMM steps where the table steps,
    each point within 10%; a smooth efficiency surface cannot (it was 145 us at both sides of
    769, held out, before the wave tail was fitted)."""
    m = xr.DataArray([768.0, 769.0, 2560.0, 2561.0], dims="m")
    got = predict.gemm(hardware="a100_sxm", m=m, n=4096, k=4096, dtype="bf16", framework="sglang").time_s.values
    measured = np.array([112.1, 217.9, 311.0, 440.6]) * 1e-6
    np.testing.assert_allclose(got, measured, rtol=0.10)
    assert got[1] / got[0] > 1.8 and got[3] / got[2] > 1.2


def test_wave_tailed_gemm_broadcasts_by_dimension_name():
    """A sweep of m and n (two dimensions) through a wave-tailed surface (A100, SGLang) gives
    each point the time of its own scalar call, whatever the order of the dimensions."""
    m, n = xr.DataArray([768.0, 769.0, 2561.0], dims="m"), xr.DataArray([4096.0, 1024.0], dims="n")
    grid = predict.gemm(hardware="a100_sxm", m=m, n=n, k=4096, dtype="bf16", framework="sglang").time_s
    for i, mm in enumerate(m.values):
        for j, nn in enumerate(n.values):
            one = float(predict.gemm(hardware="a100_sxm", m=mm, n=nn, k=4096, dtype="bf16", framework="sglang").time_s)
            assert float(grid.isel(m=i, n=j)) == pytest.approx(one, rel=1e-12)
            assert float(grid.transpose("n", "m").isel(m=i, n=j)) == pytest.approx(one, rel=1e-12)


def test_a_framework_runs_its_engine_on_a_gpu_without_its_tables():
    """vLLM on an MI300X (no kernel tables: aiconfigurator-core times no AMD GPU) runs vLLM's
    engine over the spec's analytical kernels: at concurrency 1 its TPOT is framework none's
    plus vLLM's fitted host overhead per iteration and per sequence, exactly (the kernels are
    the same analytical ones, no CUDA-graph saving applies to them); at concurrency 16 its
    spread arrivals give another TTFT than none's clumps. A training step names the tables it
    used: none."""
    from workbench.backends.kernel_tables import serving_constants
    kw = dict(hardware="mi300x", model="llama_3_1_70b", tp=4, prompt=2048, generate=256, weights="fp8")
    vllm = predict.serving(framework="vllm", concurrency=[1, 16], **kw)
    none = predict.serving(framework="none", concurrency=[1, 16], **kw)
    c = serving_constants()
    host = c["iteration_overhead_s"]["vllm"] + c["iteration_overhead_s_per_sequence"]["vllm"]
    assert float(vllm.tpot_s[0] - none.tpot_s[0]) == pytest.approx(host, rel=1e-9)
    assert float(vllm.ttft_s[1]) != pytest.approx(float(none.ttft_s[1]), rel=0.05)
    trn = predict.training(hardware="mi300x", model="llama_3_1_8b", devices=8, seq_len=4096, global_batch=64,
                           framework="vllm")
    assert str(trn.kernel_tables.values) == "none"


def test_a_serving_prediction_states_the_held_out_error_of_each_framework_it_ran():
    """predict.serving and predict.disaggregated carry, in attrs["held_out_error"], each resolved
    framework's TPOT and TTFT median |error| on serving runs held out of its fit (frameworks.yaml
    tpot_held_out / ttft_held_out); a wafer, framework='none' (nothing fitted) or a chip without
    the framework's tables states none."""
    consts = kernel_tables.serving_constants()
    ds = predict.serving(hardware=["h100_sxm", "b200"], model="llama_3_1_8b", concurrency=8, prompt=512, generate=64,
                         framework=["vllm", "sglang"])
    held = ds.attrs["held_out_error"]
    for fw in ("vllm", "sglang"):
        for key in ("tpot_held_out", "ttft_held_out"):
            e = consts[key][fw]
            assert f"{e['leave_one_model_out']:.1%} with the run's model held out" in held
            assert f"({e['runs']} runs)" in held
    assert "trtllm" not in held
    default = predict.serving(hardware="h200_sxm", model="llama_3_1_8b", concurrency=8, prompt=512, generate=64)
    assert default.attrs["held_out_error"].split("): ")[1].startswith(f"{load_hardware('h200_sxm').default_framework}:")
    assert "held_out_error" not in predict.serving(hardware="h200_sxm", model="llama_3_1_8b", concurrency=8,
                                                   prompt=512, generate=64, framework="none").attrs
    assert "held_out_error" not in predict.serving(hardware="cs3", model="llama_3_1_8b", concurrency=8, prompt=512,
                                                   generate=64).attrs
    # vLLM runs on an Instinct GPU without tables for it: analytical kernels the fitted runs never saw
    assert "held_out_error" not in predict.serving(hardware="mi300x", model="llama_3_1_8b", concurrency=8, prompt=512,
                                                   generate=64, framework="vllm").attrs
    pools = predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="h200_sxm", model="llama_3_1_8b",
                                  concurrency=8, prompt=512, generate=64, framework="vllm")
    assert pools.attrs["held_out_error"].split("): ")[1].startswith("vllm: TPOT")


def test_a_gemm_prediction_states_its_surfaces_held_out_error():
    """predict.gemm on a GPU with tables states each dtype's surface score (median and p90
    |error| on the shapes its fit held out by fold, from specs/kernels); a chip without tables
    (the spec's analytical efficiencies) and a wafer state none."""
    ds = predict.gemm(hardware=["h200_sxm", "cs3"], m=[16, 4096], n=4096, k=4096, dtype=["bf16", "fp8"])
    fits = kernel_tables.fits_for(load_hardware("h200_sxm"), load_hardware("h200_sxm").default_framework)
    for dtype in ("bf16", "fp8"):
        sc = fits.scores[("gemm", dtype)]
        assert (f"h200_sxm {fits.framework} gemm {dtype}: median {sc['median_abs_err']:.1%}, p90 {sc['p90_abs_err']:.1%} over "
                f"{sc['rows']:,} measured shapes") in ds.attrs["held_out_error"]
    assert "cs3" not in ds.attrs["held_out_error"]
    assert "held_out_error" not in predict.gemm(hardware="mi300x", m=16, n=4096, k=4096).attrs
    assert "held_out_error" not in predict.gemm(hardware="h200_sxm", m=16, n=4096, k=4096, framework="none").attrs


def test_attention_and_collective_predictions_state_their_surfaces_held_out_error():
    """predict.attention with the framework's kernel (the default on a GPU with tables) and
    predict.collective state the scores of the surfaces they read: attention at the math's
    dtype with its cache in it, NCCL's curve and the framework's own all-reduce; a named
    FlashAttention kernel reads no table and states none."""
    fits = kernel_tables.fits_for(load_hardware("h100_sxm"), "vllm")
    att = predict.attention(hardware="h100_sxm", batch=2, seq_len=2048, n_heads=32, head_dim=128, framework="vllm")
    sc = fits.scores[("attention", "bf16/bf16")]
    assert f"h100_sxm vllm attention bf16/bf16: median {sc['median_abs_err']:.1%}" in att.attrs["held_out_error"]
    assert "held_out_error" not in predict.attention(hardware="h100_sxm", batch=2, seq_len=2048, n_heads=32,
                                                     head_dim=128, kernel="flash3").attrs
    col = predict.collective(hardware="h100_sxm", devices=8, op="all_reduce", size_bytes=1e6, framework="vllm")
    for lib in ("nccl", "vllm"):
        sc = fits.scores[("collective", f"{lib}/all_reduce")]
        assert f"h100_sxm vllm collective {lib}/all_reduce: median {sc['median_abs_err']:.1%}" in col.attrs["held_out_error"]
    assert "trtllm/all_reduce" not in col.attrs["held_out_error"] and "inside a scale-up domain" in col.attrs["held_out_error"]


def test_flash3_runs_on_hopper_only():
    """FlashAttention-3 targets Hopper (Shah et al. 2024: warpgroup MMA, TMA): on an H100 it is
    computed, on an A100 or an MI300X (and in training there) it is a flagged point naming the
    kernel and the chip (it ran MI300X at 2.7x FlashAttention-2's rate)."""
    ds = predict.attention(hardware=["a100_sxm", "h100_sxm", "mi300x"], batch=1, seq_len=16384, n_heads=32,
                           head_dim=128, kernel="flash3")
    assert list(ds.fits.values) == [False, True, False]
    assert np.isnan(ds.time_s.values[0]) and "kernel=flash3" in str(ds.reason.values[0])
    t = predict.training(hardware="a100_sxm", model="llama_3_1_8b", dp=8, devices=8, seq_len=4096, global_batch=64,
                         attention="flash3")
    assert not bool(t.fits) and "Hopper" in str(t.reason.values)


def test_kv_heads_that_do_not_group_the_query_heads_are_flagged():
    """n_kv_heads must divide n_heads (GQA: each KV head serves a whole group): 5 or 64 KV
    heads beside 32 query heads are flagged points naming both (they were computed)."""
    ds = predict.attention(hardware="h100_sxm", batch=1, seq_len=4096, n_heads=32, head_dim=128, n_kv_heads=[5, 8, 64])
    assert list(ds.fits.values) == [False, True, False]
    assert "n_kv_heads=5 does not divide n_heads=32" in str(ds.reason.values[0])


def test_a_chip_on_another_s_tables_says_whose_figures_it_states():
    """An H100 PCIe reads the H100 SXM's tables (its kernel_tables): the held-out figures it
    states are that chip's, and the note says so (it stated them as its own)."""
    pcie = predict.gemm(hardware="h100_pcie", m=4096, n=4096, k=4096).attrs["held_out_error"]
    assert "(on h100_sxm's tables; h100_pcie's own unmeasured)" in pcie
    assert "own unmeasured" not in predict.gemm(hardware="h100_sxm", m=4096, n=4096, k=4096).attrs["held_out_error"]
