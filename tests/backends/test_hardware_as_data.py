"""Hardware is data (issue 13): predict.* takes a catalog name, a spec object or a YAML
path, and `hardware_overrides` sets named knobs, a list becoming a dimension named after
the knob; the model responds to each knob as the physics says it must."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from workbench import predict
from workbench.backends import knobs, list_knobs, numbers
from workbench.errors import InputError
from workbench.specs import HARDWARE_DIR, load_hardware

DECODE = dict(model="llama_3_1_8b", batch=1, prompt=128, generate=16, weights="bf16")


def test_spec_object_and_yaml_path_equal_the_catalog_name(tmp_path):
    by_name = predict.inference(hardware="h100_sxm", **DECODE)
    by_spec = predict.inference(hardware=load_hardware("h100_sxm"), **DECODE)
    path = tmp_path / "h100_copy.yaml"
    path.write_text((HARDWARE_DIR / "h100_sxm.yaml").read_text())
    by_path = predict.inference(hardware=str(path), **DECODE)
    for ds in (by_spec, by_path):
        assert float(ds.tpot_s) == float(by_name.tpot_s)
        assert str(ds.hardware.values) == "h100_sxm"  # the spec's own name labels it


def test_a_hypothetical_chip_from_yaml_equals_the_same_knob_override(tmp_path):
    data = yaml.safe_load((HARDWARE_DIR / "h100_sxm.yaml").read_text())
    data["name"] = "h100_2x_hbm"
    data["memory"][0]["bandwidth_bytes_per_s"] = 6.7e12
    path = tmp_path / "h100_2x_hbm.yaml"
    path.write_text(yaml.safe_dump(data))
    from_file = predict.inference(hardware=str(path), **DECODE)
    from_knob = predict.inference(hardware="h100_sxm", hardware_overrides={"hbm_bandwidth_bytes_per_s": 6.7e12},
                                  **DECODE)
    assert float(from_file.tpot_s) == pytest.approx(float(from_knob.tpot_s), rel=1e-12)
    assert str(from_file.hardware.values) == "h100_2x_hbm"


def test_a_modified_spec_object_is_accepted():
    spec = load_hardware("h100_sxm")
    faster = dataclasses.replace(spec, name="h100_fast_launch", kernel_launch_s=spec.kernel_launch_s / 4)
    ds = predict.inference(hardware=[spec, faster], **DECODE)
    assert list(ds.hardware.values) == ["h100_sxm", "h100_fast_launch"]
    assert float(ds.tpot_s.sel(hardware="h100_fast_launch")) < float(ds.tpot_s.sel(hardware="h100_sxm"))


def test_a_knob_list_is_a_dimension_named_after_it():
    bw = [2e12, 4e12, 8e12]
    # the analytical efficiencies (framework none): the tables add fixed kernel latencies that no
    # bandwidth changes (tests/backends/test_kernel_tables.py checks their roofline scaling)
    ds = predict.inference(hardware="h100_sxm", hardware_overrides={"hbm_bandwidth_bytes_per_s": bw}, framework="none",
                           **DECODE)
    assert "hbm_bandwidth_bytes_per_s" in ds.dims
    assert list(ds.hbm_bandwidth_bytes_per_s.values) == bw


def test_gpu_batch1_decode_falls_as_one_over_hbm_bandwidth_until_compute_bound():
    """Batch-1 decode reads every weight once per token: its kernel time (the step less the
    fixed launch gaps) halves with each doubling of HBM bandwidth while memory-bound; past
    the ridge, where the matmuls' tensor-core time dominates, it stops falling."""
    bw = np.array([0.25e12, 0.5e12, 1e12, 2e12, 4e12, 1e15, 2e15, 4e15])
    # the analytical efficiencies (framework none): the tables add fixed kernel latencies that no
    # bandwidth changes (tests/backends/test_kernel_tables.py checks their roofline scaling)
    ds = predict.inference(hardware="h100_sxm", hardware_overrides={"hbm_bandwidth_bytes_per_s": bw}, framework="none",
                           **DECODE)
    kernel = (ds.tpot_s - ds.decode_overhead_s - ds.decode_comm_s).values.ravel()
    low = kernel[:5]
    # memory-bound: each doubling halves it (within 3%: the per-slice DRAM latency of the
    # KV read and the tiny compute-bound kernels do not scale with bandwidth)
    np.testing.assert_allclose(low[:-1] / low[1:], 2.0, rtol=0.03)
    assert ds.bound.values.ravel()[0] == "memory"
    # compute-bound at 1-4 PB/s: flat, and never below the matmul FLOPs at tensor-core peak
    high = kernel[5:]
    assert high.max() / high.min() < 1.01
    peak = load_hardware("h100_sxm").peak("bf16")
    assert high.min() >= float(ds.decode_step_flops_per_device.values.ravel()[-1]) / peak
    assert np.all(np.diff(kernel) <= 0)


def test_wafer_decode_responds_to_sram_per_pe_only_through_what_fits():
    """At a fixed PE grid, SRAM per PE changes what fits, never the speed; with the grid
    searched, more SRAM can only open smaller (or equal) grids, so decode never slows."""
    sram = [24576.0, 36864.0, 49152.0, 98304.0]
    kw = dict(hardware="cs3", model="llama_3_1_8b", batch=1, prompt=512, generate=64, weights="fp16")
    fixed = predict.inference(pe_grid=120, hardware_overrides={"sram_per_pe_bytes": sram}, **kw)
    fits = fixed.fits.values.ravel()
    assert not fits[0] and fits[-1]
    assert np.ptp(fixed.tpot_s.values.ravel()[fits]) == 0.0
    searched = predict.inference(hardware_overrides={"sram_per_pe_bytes": sram[1:]}, **kw)
    t = searched.tpot_s.values.ravel()
    assert searched.fits.values.all() and np.all(np.diff(t) <= 0)
    # the same as a fresh search on a spec with that SRAM: the knob is the spec's number
    spec = dataclasses.replace(load_hardware("wse3"), name="wse3_96k", sram_per_pe_bytes=98304.0)
    one = predict.inference(**{**kw, "hardware": spec})
    assert float(one.tpot_s) == pytest.approx(t[-1], rel=1e-12)


def test_wafer_mesh_knobs_are_arrays_too():
    kw = dict(hardware="cs3", model="llama_3_1_8b", batch=1, prompt=512, generate=64, weights="fp16")
    ds = predict.inference(hardware_overrides={"mesh_width": [400.0, 757.0], "clock_hz": [0.9e9, 1.8e9]}, **kw)
    assert set(ds.tpot_s.dims) >= {"mesh_width", "clock_hz"}
    t = ds.tpot_s.sel(mesh_width=757.0).values
    assert t[1] == pytest.approx(t[0] / 2, rel=1e-9)  # every cycle term halves at twice the clock
    assert np.all(ds.pe_grid_decode.sel(mesh_width=400.0).values <= 400)


def test_knobs_listed_with_units_and_values():
    rows = {name: (unit, value) for name, unit, value in list_knobs("h100_sxm")}
    for k in ("peak_flops_per_s_bf16", "hbm_bandwidth_bytes_per_s", "hbm_capacity_bytes",
              "scale_up_bandwidth_bytes_per_s", "scale_up_domain_size", "scale_out_bandwidth_bytes_per_s",
              "kernel_launch_s"):
        assert k in rows
    assert rows["hbm_bandwidth_bytes_per_s"] == ("B/s", 3.35e12)  # h100_sxm.yaml, measurements.csv A17b
    wafer = dict((n, v) for n, _, v in list_knobs("cs3"))
    for k in ("sram_per_pe_bytes", "mesh_width", "mesh_height", "clock_hz", "io_bytes_per_s",
              "weight_store_bandwidth_bytes_per_s"):
        assert k in wafer
    assert wafer["mesh_width"] == 757 and wafer["sram_per_pe_bytes"] == 49152  # wse3.yaml
    assert set(knobs("wse3")) == set(knobs("cs3"))  # a bare wafer runs in its system


def test_a_knob_that_does_not_apply_is_an_error_naming_it():
    with pytest.raises(InputError, match="sram_per_pe_bytes.*h100_sxm"):
        predict.inference(hardware="h100_sxm", hardware_overrides={"sram_per_pe_bytes": 1e5}, **DECODE)
    with pytest.raises(InputError, match="hbm_bandwidth_bytes_per_s.*cs3"):
        predict.inference(hardware=["h100_sxm", "cs3"], hardware_overrides={"hbm_bandwidth_bytes_per_s": 4e12},
                          **DECODE)
    with pytest.raises(InputError, match="hbm_bandwidth_bytes_per_s"):
        predict.inference(hardware="h100_sxm", hardware_overrides={"hbm_bandwidth_bytes_per_s": -1.0}, **DECODE)


def test_a_new_dtype_peak_is_a_hypothetical_unit():
    """H100 has no FP4 units: giving it a peak makes fp4 GEMMs computable."""
    plain = predict.gemm(hardware="h100_sxm", m=8192, n=8192, k=8192, dtype="fp4")
    assert np.isnan(float(plain.time_s))
    hypo = predict.gemm(hardware="h100_sxm", m=8192, n=8192, k=8192, dtype="fp4",
                        hardware_overrides={"peak_flops_per_s_fp4": 3.96e15})
    fp8 = predict.gemm(hardware="h100_sxm", m=8192, n=8192, k=8192, dtype="fp8")
    assert float(hypo.time_s) < float(fp8.time_s)


def test_scale_up_domain_knob_moves_the_collective():
    ds = predict.collective(hardware="h100_sxm", devices=16, op="all_reduce", size_bytes=1e9,
                            hardware_overrides={"scale_up_domain_size": [8, 16]})
    t = ds.time_s.values.ravel()
    assert t[1] < t[0]  # 16 GPUs in one NVLink domain: no NIC crossing


def test_numbers_records_carry_the_spec_values():
    n = numbers("h100_sxm")
    spec = load_hardware("h100_sxm")
    assert n.hbm_bandwidth_bytes_per_s == spec.hbm.bandwidth_bytes_per_s
    assert n.peak("bf16") == spec.peak("bf16") and np.isnan(n.peak("fp4"))
    w = numbers("cs3")
    assert w.program_pes == load_hardware("wse3").program_pes


def test_model_overrides_sweep_model_size():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=1, prompt=128, generate=16,
                           model_overrides={"n_layers": [16, 32, 64]})
    assert "n_layers" in ds.dims
    w = ds.weights_per_device_bytes.values.ravel()
    assert w[0] < w[1] < w[2]
    with pytest.raises(InputError, match="model_overrides"):
        predict.inference(hardware="h100_sxm", model="llama_3_1_8b", model_overrides={"n_wheels": 3})


@pytest.mark.parametrize("call", [
    # DeepSeek Sparse Attention's indexer picks FP8 or 16-bit units by the FP8 peak
    dict(fn="inference", hardware="h200_sxm", model="deepseek_v3_2", batch=16, tp=8, weights="fp8",
         hardware_overrides={"peak_flops_per_s_fp8": [1.98e15, 7.92e15]}),
    # the fixed-concurrency loop's math-support flag against a cache bound that has no peak axis
    dict(fn="serving", hardware="gb200", model="llama_3_1_8b", concurrency=[1, 32],
         hardware_overrides={"peak_flops_per_s_bf16": [1.25e15, 5e15]}),
])
def test_a_swept_peak_runs_through_every_part(call):
    """A peak swept as a knob (a dimension) reaches parts that branch on whether the chip has
    the math units at all (np.isfinite of the peak): they branched on the whole array ("the
    truth value of an array ... is ambiguous", the DSA indexer's FP8-or-16-bit choice) or
    broadcast the flag to a shape without the knob's axis (serving's reason). A higher peak
    never slows a point, and the outputs are finite where they fit."""
    call = dict(call)
    ds = getattr(predict, call.pop("fn"))(prompt=1024, generate=128, **call)
    (knob,) = call["hardware_overrides"]
    t = ds.ttft_s.transpose(knob, ...).values
    assert ds.sizes[knob] == 2 and bool(ds.fits.all()) and np.isfinite(t).all()
    assert np.all(t[1] <= t[0] * (1 + 1e-12))


def test_a_swept_peak_of_one_math_of_a_mixed_precision_model():
    """gpt-oss computes its experts in FP4 and its attention in BF16 (ops.part_formats):
    sweeping one of the two peaks broadcasts against the other's scalar (it raised a
    ValueError of inhomogeneous shapes). A faster FP4 peak never slows the prefill and leaves
    the memory-bound decode step alone."""
    ds = predict.serving(hardware="b200", model="openai/gpt-oss-120b", concurrency=8,
                         hardware_overrides={"peak_flops_per_s_fp4": [4.5e15, 9e15]})
    assert bool(ds.fits.all())
    assert float(ds.ttft_s.isel(peak_flops_per_s_fp4=1)) <= float(ds.ttft_s.isel(peak_flops_per_s_fp4=0))
    inf = predict.inference(hardware="b200", model="openai/gpt-oss-120b", batch=8,
                            hardware_overrides={"peak_flops_per_s_bf16": [1.1e15, 2.2e15]})
    assert np.all(np.isfinite(inf.tpot_s.values))


def test_a_time_knob_may_be_zero_and_a_bad_value_is_named_alone():
    """A host overhead of zero is a what-if (a knob in seconds may be 0; it was refused as not
    positive); a negative bandwidth in a list is refused naming that value, not the list."""
    ds = predict.serving(hardware="b200", model="llama_3_1_8b", concurrency=8,
                         hardware_overrides={"framework_overhead_s": [0.0, 1e-3]})
    t = ds.tpot_s.values
    assert t[0] < t[1] and t[1] - t[0] == pytest.approx(1e-3, rel=0.05)
    with pytest.raises(InputError, match=r"hbm_bandwidth_bytes_per_s=-1.0 is not allowed; allowed: positive"):
        predict.inference(hardware="b200", model="llama_3_1_8b", batch=1,
                          hardware_overrides={"hbm_bandwidth_bytes_per_s": [8e12, -1.0]})


def test_the_scale_up_latency_knob_moves_a_tabled_collective():
    """On the framework's measured collective tables a hypothetical link latency adds its
    change from the spec's (1 us on H100) per ring step (2 (p - 1) for an all-reduce): at the
    spec's value nothing moves, 10 us adds 14 x 9 us to each of Llama 3.1 70B's decode
    all-reduces on 8 GPUs (it was ignored: decode_comm_s stayed 0.572 ms at every value)."""
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=1, weights="fp8",
                           hardware_overrides={"scale_up_latency_s": [1e-7, 1e-6, 1e-5]})
    comm = ds.decode_comm_s.values
    assert comm[0] < comm[1] < comm[2]
    base = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=1, weights="fp8")
    assert comm[1] == pytest.approx(float(base.decode_comm_s), rel=1e-12)
    per_reduce = 14 * 9e-6
    assert (comm[2] - comm[1]) / per_reduce == pytest.approx(round((comm[2] - comm[1]) / per_reduce), rel=1e-6)
