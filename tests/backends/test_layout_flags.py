"""Infeasible is a flag, never an exception (issue 13): a layout that cannot run is a
point with fits=False and a reason, NaN outputs, and the rest of the sweep is computed.
Only malformed input (unknown names, non-positive sizes, wrong types) raises."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError


def test_tp_list_on_a_64_head_model_gives_four_points():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=[1, 2, 3, 4], batch=1, prompt=512,
                           generate=32, weights="fp8")  # 64 query heads (llama_3_1_70b.yaml)
    assert ds.sizes["tp"] == 4
    fits = dict(zip(ds.tp.values.tolist(), ds.fits.values.ravel().tolist()))
    reasons = dict(zip(ds.tp.values.tolist(), ds.reason.values.ravel().tolist()))
    assert not fits[3] and "tp=3 does not divide n_heads=64" in reasons[3]
    assert np.isnan(float(ds.tpot_s.sel(tp=3)))
    assert np.isfinite(ds.tpot_s.sel(tp=[2, 4]).values).all() and fits[4]
    assert "tp" not in reasons[4]


def test_pp_beyond_the_layers_and_devices_not_a_multiple_are_flagged():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", pp=[2, 64], batch=1, prompt=128, generate=8)
    assert bool(ds.fits.sel(pp=2)) and not bool(ds.fits.sel(pp=64))
    assert "n_layers=32" in str(ds.reason.sel(pp=64).values)
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=8, devices=[8, 12, 16], batch=1,
                           prompt=128, generate=8)
    assert list(ds.fits.values.ravel()) == [True, False, True]
    assert "multiple of tp*pp" in str(ds.reason.sel(devices=12).values)


def test_ep_not_dividing_tp_is_flagged_for_moe():
    ds = predict.inference(hardware="h100_sxm", model="mixtral_8x7b", tp=8, ep=[2, 3], batch=1, prompt=128,
                           generate=8, weights="fp8")
    assert bool(ds.fits.sel(ep=2)) and not bool(ds.fits.sel(ep=3))
    assert "ep=3 does not divide tp=8" in str(ds.reason.sel(ep=3).values)


def test_training_layouts_are_flagged_not_raised():
    ds = predict.training(hardware="h100_sxm", model="llama_3_8b", tp=[3, 8], devices=48, seq_len=2048,
                          global_batch=48)
    assert not bool(ds.fits.sel(tp=3)) and "n_heads=32" in str(ds.reason.sel(tp=3).values)
    ds = predict.training(hardware="h100_sxm", model="mixtral_8x7b", tp=1, ep=[2, 3], devices=24, seq_len=2048,
                          global_batch=48)
    assert not bool(ds.fits.sel(ep=3)) and "n_experts=8" in str(ds.reason.sel(ep=3).values)
    ds = predict.training(hardware="h100_sxm", model="llama_3_8b", tp=8, dp=2, devices=[16, 24], seq_len=2048,
                          global_batch=48)
    assert list(ds.fits.values.ravel()) == [True, False]


def test_malformed_input_still_raises():
    with pytest.raises(InputError, match="tp=0"):
        predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=0)
    with pytest.raises(InputError, match="hardware='h900'"):
        predict.inference(hardware="h900", model="llama_3_1_8b")
    with pytest.raises(InputError, match="tp=8 is not allowed on 'cs3'"):
        predict.inference(hardware="cs3", model="llama_3_1_8b", tp=8)
    with pytest.raises(InputError, match="tp=8 is not allowed on 'cs3'"):
        predict.training(hardware="cs3", model="llama_3_8b", tp=8)


def test_gpu_layout_arguments_for_a_wafer_serving_pool_are_refused():
    with pytest.raises(InputError, match="tp=8 is not allowed on 'cs3'"):
        predict.serving(hardware="cs3", model="llama_3_1_8b", tp=8)
    with pytest.raises(InputError, match="decode_tp=8 is not allowed on 'cs3'"):
        predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="cs3", model="llama_3_1_8b", decode_tp=8)
