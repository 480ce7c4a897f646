"""Knob overrides pass the checks their spec's YAML passes (backends.check_knobs): integers,
the rules between fields, zero where the spec allows it, at every combination a sweep makes;
a knob nothing reads is no knob, and one only some workloads read is refused by the others."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.backends import check_knobs, knobs
from workbench.errors import InputError
from workbench.specs import load_hardware

GPU = dict(hardware="h100_sxm", model="llama_3_1_8b", batch=1)
WAFER = dict(hardware="cs3", model="llama_3_1_8b", devices=1, batch=1, weights="fp16")


@pytest.mark.parametrize("call, overrides, message", [
    # below the 6144 B the runtime reserves: 8.65e18 B per PE came out
    (WAFER, {"sram_per_pe_bytes": 4096},
     "sram_per_pe_bytes=4096 (then sram_reserved_per_pe_bytes=6144) is not allowed on hardware='cs3'; allowed: "
     "sram_reserved_per_pe_bytes < sram_per_pe_bytes = 4096"),
    (WAFER, {"sram_reserved_per_pe_bytes": 60000},
     "sram_reserved_per_pe_bytes=60000 is not allowed on hardware='cs3'; allowed: sram_reserved_per_pe_bytes "
     "< sram_per_pe_bytes = 49152"),
    (WAFER, {"mesh_width": 7.5}, "mesh_width=7.5 is not allowed on hardware='cs3'; allowed: mesh_width a positive"),
    (GPU, {"collective_sms": [24, 200]},
     "collective_sms=200 is not allowed on hardware='h100_sxm'; allowed: collective_sms an integer in [0, n_sms=132)"),
    (GPU, {"n_sms": 0.5}, "n_sms=0.5 is not allowed on hardware='h100_sxm'; allowed: n_sms a positive integer"),
    (GPU, {"n_sms": 16}, "n_sms=16 (then collective_sms=24) is not allowed"),
    (GPU, {"scale_up_domain_size": 7.5}, "scale_up_domain_size=7.5 is not allowed on hardware='h100_sxm'; allowed: "
                                         "scale_up_domain_size a positive integer"),
    (GPU, {"price_usd_per_hour": -1.0}, "price_usd_per_hour=-1 is not allowed"),
    (GPU, {"tdp_w": float("inf")}, "tdp_w=inf is not allowed; allowed: finite numbers (W)"),
])
def test_an_override_passes_the_checks_its_yaml_passes(call, overrides, message):
    with pytest.raises(InputError) as e:
        predict.inference(**call, hardware_overrides=overrides)
    assert message in str(e.value) and len(str(e.value).splitlines()) == 1


def test_every_combination_of_a_sweep_is_checked():
    """Two swept knobs are two dimensions: 40000 B reserved of 36864 B is one of their four points."""
    with pytest.raises(InputError, match=r"sram_reserved_per_pe_bytes=40000, sram_per_pe_bytes=36864 is not allowed"):
        predict.inference(**WAFER, hardware_overrides={"sram_reserved_per_pe_bytes": [6144, 40000],
                                                       "sram_per_pe_bytes": [49152, 36864]})
    spec = load_hardware("h100_sxm")
    per_point = {"n_sms": xr.DataArray([132.0, 20.0], dims="x"), "collective_sms": xr.DataArray([24.0, 16.0], dims="x")}
    check_knobs(spec, per_point)  # zipped on one dimension: (132, 24) and (20, 16) both hold
    with pytest.raises(InputError, match=r"n_sms=20, collective_sms=24"):
        check_knobs(spec, {"n_sms": [132.0, 20.0], "collective_sms": [24.0, 16.0]})  # crossed: (20, 24) does not


@pytest.mark.parametrize("call, knob", [(GPU, "collective_sms"), (GPU, "price_usd_per_hour"),
                                        (WAFER, "sram_reserved_per_pe_bytes"), (WAFER, "stage_cycles")])
def test_zero_is_allowed_where_the_spec_allows_it(call, knob):
    """They were refused as 'positive numbers' though their spec holds 0 (no collective SMs, no
    reserve, no routing cost; a price of 0 is 'not known', its cost outputs NaN)."""
    ds = predict.inference(**call, hardware_overrides={knob: 0})
    assert bool(ds.fits) and np.isfinite(float(ds.tpot_s))


def test_a_what_if_clock_or_mesh_beyond_the_chip_carries_its_bounds():
    ds = predict.inference(**WAFER, hardware_overrides={"clock_hz": [1.1e9, 2.2e9], "mesh_width": [757, 900]})
    assert bool(ds.fits.all())


def test_the_scale_out_domain_size_is_no_knob():
    """It was read by nothing (an all-reduce on 1024 GPUs the same at 16 and 1e6) and refused its
    own listed value 0."""
    assert "scale_out_domain_size" not in knobs("h100_sxm", every=True)
    with pytest.raises(InputError, match="'scale_out_domain_size' is not a knob of hardware='h100_sxm'"):
        predict.collective(hardware="h100_sxm", op="all_reduce", devices=1024, size_bytes=1e9,
                           hardware_overrides={"scale_out_domain_size": [16, 1e6]})


@pytest.mark.parametrize("fn, call", [
    (predict.inference, GPU),
    (predict.training, dict(hardware="h100_sxm", model="llama_3_1_8b", devices=8, tp=8, seq_len=2048, global_batch=8)),
    (predict.gemm, dict(hardware="h100_sxm", m=1, n=1024, k=1024)),
    (predict.serving, dict(hardware="h100_sxm", model="llama_3_1_8b", arrival_rate=1.0)),
])
def test_framework_overhead_is_refused_where_nothing_reads_it(fn, call):
    """predict.inference and predict.training took it and changed nothing (TPOT the same at 0
    and 10 ms); the serving closed loop alone reads it."""
    with pytest.raises(InputError, match=r"framework_overhead_s=0.01 has no effect on predict\.\w+.*allowed: it in "
                                         r"predict.serving with concurrency, the only call that reads it"):
        fn(**call, hardware_overrides={"framework_overhead_s": 0.01})
    ds = predict.serving(hardware="h100_sxm", model="llama_3_1_8b", concurrency=1,
                         hardware_overrides={"framework_overhead_s": [0.0, 0.01]})
    assert float(ds.tpot_s.isel(framework_overhead_s=1) - ds.tpot_s.isel(framework_overhead_s=0)) > 0.009
