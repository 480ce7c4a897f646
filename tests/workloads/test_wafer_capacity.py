"""What fits on wafers (workloads/wafer_capacity.py) and speculative decoding on wafers:
devices="min", generate="max", a draft model in regions beside the target."""
import dataclasses

import numpy as np
import pytest

from workbench import predict
from workbench.calibrate.measurements import wse_row
from workbench.calibrate.wafer_fit import fit_sram_reserved
from workbench.backends import numbers
from workbench.specs import load_model
from workbench.workloads.speculative import expected_tokens_per_step, per_token_s

SERVICE = dict(hardware="cs3", batch=1, prompt=1024, generate=256, weights="fp16", kv="fp16")


@pytest.mark.parametrize("model", ["llama_3_1_8b", "llama_3_1_70b", "qwen3_32b", "llama_3_1_405b"])
def test_min_devices_is_the_smallest_count_that_fits(model):
    """devices="min" fits, and one system fewer does not (at any grid side)."""
    r = predict.inference(model=model, devices="min", **SERVICE)
    d = int(r.devices)
    assert bool(r.fits) and d >= 1
    if d > 1:
        fewer = predict.inference(model=model, devices=d - 1, **SERVICE)
        assert not bool(fewer.fits)
    assert bool(predict.inference(model=model, devices=d, **SERVICE).fits)


def test_min_devices_of_llama_70b_is_the_four_systems_cerebras_used():
    """The Register (Hot Chips 2024; wse_facts.md section 6): Llama 3.1 70B served on four
    CS-3. 140 GB of 16-bit weights over 44 GB wafers needs at least 4 (weights alone: 3.2);
    the placement (whole square regions per layer, SRAM reserve) gives exactly 4."""
    assert int(predict.inference(model="llama_3_1_70b", devices="min", **SERVICE).devices) == 4


def test_min_devices_grows_with_batch_and_context():
    r = predict.inference(model="llama_3_1_70b", devices="min", hardware="cs3", batch=[1, 16, 64],
                          prompt=[1024, 32768], generate=1024, weights="fp16", kv="fp16")
    d = r.devices.transpose("batch", "prompt").values
    assert np.all(np.diff(d, axis=0) >= 0) and np.all(np.diff(d, axis=1) >= 0)
    assert d[-1, -1] > d[0, 0]


def test_a_layer_larger_than_a_wafer_is_flagged():
    """A dense layer is held by one region (only a MoE layer's experts go to regions beside
    it: test_wafer_expert_regions.py): a layer 65,536 wide with a 262,144-wide gated MLP
    holds 3 x 65,536 x 262,144 x 2 B = 103 GB of 16-bit MLP weights, more than the 44 GB of
    SRAM of a whole WSE-3 (wse_facts.md)."""
    wide = dict(name="too_wide", n_layers=2, d_model=65536, n_heads=64, n_kv_heads=8, head_dim=1024, d_ff=262144,
                vocab_size=32000, gated_mlp=True, tied_embeddings=True)
    r = predict.inference(model=wide, devices="min", **SERVICE)
    assert not bool(r.fits) and "larger than a wafer" in str(r.reason.values)


def _one_layer_waferllm(max_seq_len=10**6):
    """WaferLLM's padded Llama3-8B layer (dim 4320, one head) as a one-layer model with a
    small vocabulary, so a single 360 x 360 region holds it (WaferLLM Table 5's setting)."""
    return dict(name="waferllm_layer", n_layers=1, d_model=4320, n_heads=1, n_kv_heads=1, head_dim=4320,
                d_ff=14400, vocab_size=1024, gated_mlp=True, tied_embeddings=True, max_seq_len=max_seq_len)


def test_generate_max_reproduces_waferllm_kv_capacity():
    """WaferLLM Table 5, decode grid 360 x 360 on WSE-2: concat-based KV (gpu_style) holds
    382 generated tokens (C121, from which the SRAM reserve is derived: in sample) and
    shift-based (mesh) 137,548 (C122: held out). generate="max" at that grid: 1 token and
    2% for the held-out row (the prompt token and the lm_head's regions aside)."""
    reserve = fit_sram_reserved(numbers("wse2"), wse_row("C121")["value"])  # WaferLLM's kernels' reserve
    r = predict.inference(hardware="wse2", model=_one_layer_waferllm(), devices=1, batch=1, prompt=1,
                          generate="max", pe_grid=360, mapping=["mesh", "gpu_style"], weights="fp16", kv="fp16",
                          hardware_overrides={"sram_reserved_per_pe_bytes": reserve})
    gen = r.generate.to_series()
    assert gen["gpu_style"] == pytest.approx(wse_row("C121")["value"], abs=2)
    assert gen["mesh"] == pytest.approx(wse_row("C122")["value"], rel=0.02)


def test_generate_max_is_the_last_length_that_fits():
    """(the model's context limit lifted, so the KV capacity binds)"""
    long = dataclasses.replace(load_model("llama_3_1_70b"), name="llama_70b_long", max_seq_len=10**8)
    r = predict.inference(model=long, hardware="cs3", devices=6, batch=[1, 8], prompt=2048,
                          generate="max", weights="fp16", kv="fp16")
    for b in (1, 8):
        g, P = int(r.generate.sel(batch=b)), int(r.pe_grid_decode.sel(batch=b))
        assert bool(r.fits.sel(batch=b)) and g > 0
        kw = dict(model=long, hardware="cs3", devices=6, batch=b, prompt=2048, pe_grid=P, weights="fp16",
                  kv="fp16")
        assert bool(predict.inference(generate=g, **kw).fits)
        assert not bool(predict.inference(generate=g + max(1, g // 1000), **kw).fits)
    assert int(r.generate.sel(batch=1)) > int(r.generate.sel(batch=8))


def test_generate_max_is_capped_by_the_model_context():
    r = predict.inference(model="llama_3_1_8b", devices=1, hardware="cs3", prompt=1024, generate="max",
                          weights="fp16", kv="fp16")
    assert int(r.generate) == 131072 - 1024 and bool(r.fits)


def test_speculative_per_token_closed_form():
    """(k draft + verify) / E, E = (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023, eq. 1)."""
    assert float(expected_tokens_per_step(acceptance=0.8, draft_len=3)) == pytest.approx((1 - 0.8 ** 4) / 0.2)
    assert float(per_token_s(draft_step_s=1.0, verify_step_s=4.0, draft_len=3, acceptance=0.8)) == \
        pytest.approx(7.0 / 2.952)
    assert float(per_token_s(draft_step_s=1.0, verify_step_s=4.0, draft_len=0, acceptance=0.3)) == 4.0


def test_wafer_speculative_decoding_monotone_and_bounded():
    """With a draft on the same wafers: more acceptance is never slower; k=0 is the plain
    step; the draft's regions can only add systems; at perfect acceptance the time per
    token is at least the verify step over k+1 tokens."""
    base = predict.inference(model="llama_3_1_70b", devices=6, pe_grid=205, **SERVICE)
    r = predict.inference(model="llama_3_1_70b", devices=6, pe_grid=205, draft_model="llama_3_2_1b",
                          draft_len=[0, 1, 3], acceptance=[0.5, 0.8, 1.0], **SERVICE)
    assert bool(r.fits.all())
    tpot = r.tpot_s.transpose("draft_len", "acceptance").values
    assert np.all(np.diff(tpot, axis=1) <= 1e-15)
    assert tpot[0, 0] == pytest.approx(float(base.tpot_s), rel=1e-9)
    # perfect acceptance: k+1 tokens per (k drafts + verify) >= verify / (k+1) >= step / (k+1)
    assert np.all(tpot[1:, -1] >= float(base.tpot_s) / np.array([2.0, 4.0]))
    mins = [int(predict.inference(model="llama_3_1_70b", devices="min", **SERVICE,
                                  **extra).devices) for extra in ({}, {"draft_model": "llama_3_1_8b", "draft_len": 3})]
    assert mins[1] >= mins[0]


def test_wafer_only_settings_are_refused_on_gpus():
    from workbench.errors import InputError
    for extra in ({"devices": "min"}, {"generate": "max"}, {"prefill_pe_grid": 100}):
        kw = dict(hardware="h100_sxm", model="llama_3_1_8b", **extra)
        with pytest.raises(InputError, match="not allowed on 'h100_sxm'"):
            predict.inference(**kw)
    with pytest.raises(InputError, match="draft_len=-1 is not allowed"):
        predict.inference(hardware="cs3", model="llama_3_1_8b", draft_len=-1)
