"""The wafer backend's dispatch (backends/wafer.py): a draft_len sweep that mixes points that
draft with points that do not places the draft only where it drafts, and a region side the
program mesh cannot hold is a flagged point naming its argument."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict

SIZE = dict(hardware="cs3", model="llama_3_1_70b", weights="fp16", kv="fp16")


@pytest.mark.parametrize("devices", [4, "min"])
def test_a_non_drafting_point_of_a_sweep_is_the_call_without_a_draft(devices):
    """draft_len=0 in [0, 2] is the non-speculative deployment: same fit, grid, systems and
    TPOT as the call without a draft (before, the draft's regions were placed for every
    point once any drafted: 70B on 4 CS-3 did not fit, and devices="min" gave 5 systems)."""
    swept = predict.inference(devices=devices, draft_model="llama_3_2_1b", draft_len=[0, 2], acceptance=0.8, **SIZE)
    plain = predict.inference(devices=devices, **SIZE)
    zero = swept.sel(draft_len=0)
    assert bool(zero.fits) == bool(plain.fits)
    for name in ("tpot_s", "ttft_s", "devices", "pe_grid_decode", "memory_per_device_bytes"):
        assert zero[name].values == pytest.approx(plain[name].values), name
    drafting = swept.sel(draft_len=2)
    if devices == "min":  # the drafting point keeps its speed-up
        assert bool(drafting.fits) and float(drafting.tpot_s) < float(zero.tpot_s)
    else:  # the draft's regions do not fit beside the target's on 4 systems: flagged, no time to read
        assert not bool(drafting.fits) and np.isnan(float(drafting.tpot_s))


def test_a_non_drafting_point_of_a_serving_sweep_is_the_call_without_a_draft():
    kw = dict(devices="min", prompt=1024, generate=256, concurrency=[1, 8], **SIZE)
    swept = predict.serving(draft_model="llama_3_2_1b", draft_len=[0, 3], acceptance=0.8, **kw)
    plain = predict.serving(**kw)
    assert swept.tpot_s.sel(draft_len=0).values == pytest.approx(plain.tpot_s.values)
    assert swept.devices.sel(draft_len=0).values == pytest.approx(plain.devices.values)
    assert np.all(swept.tokens_per_step.sel(draft_len=0).values == 1.0)


def test_a_region_larger_than_the_mesh_is_flagged_by_name():
    """WSE-3's program mesh is 757 x 1172 PEs (wse3.yaml): a square region of side 5000 (or a
    prefill grid of 2000) cannot exist: NaN outputs, fits=False, the reason naming the
    argument and the largest side; a side that exists is computed."""
    ds = predict.inference(hardware="cs3", model="llama_3_1_8b", pe_grid=[161, 5000])
    assert np.isfinite(float(ds.tpot_s.sel(pe_grid=161)))
    big = ds.sel(pe_grid=5000)
    assert not bool(big.fits) and np.isnan(float(big.tpot_s))
    assert "pe_grid=5000" in str(big.reason.values) and "757" in str(big.reason.values)
    pre = predict.inference(hardware="cs3", model="llama_3_1_8b", prefill_pe_grid=2000)
    assert not bool(pre.fits) and "prefill_pe_grid=2000" in str(pre.reason.values)


def test_open_loop_serving_on_cs_systems_does_not_recover_past_saturation():
    """Under Poisson arrivals a higher rate never runs faster: TPOT is non-decreasing in the
    rate, and once a rate is beyond saturation (inf) every higher one is too or is flagged.
    Before, 70B on 8 CS-3 saturated at 66-70 req/s and came back at 72 (16.7 ms TPOT) because
    the step table's batches past the memory's reach ran on another grid, faster."""
    ds = predict.serving(hardware="cs3", model="llama_3_1_70b", devices=8, weights="fp16", kv="fp16", prompt=1024,
                         generate=256, arrival_rate=[50, 60, 66, 70, 72, 80])
    tpot = ds.tpot_s.values
    assert np.all(np.diff(tpot) >= 0)
    assert not np.any(ds.fits.values[np.argmax(~ds.fits.values):])
