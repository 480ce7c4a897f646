"""Precision per part (workloads/ops.part_formats, `attention_weights=` on predict.inference,
predict.serving and predict.disaggregated): the routed experts in `weights`, every other
matmul (attention projections, dense MLPs, shared experts, router) in `attention_weights`.
Checks that cannot be faked: a dense model has no routed experts, so its weights are all
`attention_weights`; the experts' parameter count and the bytes on a device in closed form;
mixed formats fall between the two uniform ones; bad input is one clear line."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench import predict
from workbench.calibrate import serving_rows
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads import ops
from workbench.workloads.inference import weight_bytes

SERVE = dict(prompt=1024, generate=256, concurrency=[4, 64], framework="trtllm")


def test_part_formats_is_none_where_the_parts_agree():
    layer, routed = ops.part_formats(weights="fp4", activations="fp4")
    nvfp4 = 0.5 + 1 / 16  # two E2M1 values per byte, one E4M3 scale per 16 (units.DTYPE_BYTES)
    assert routed is None and layer == {"math": "fp4", "w_bytes": nvfp4, "a_bytes": nvfp4}
    assert ops.part_formats(weights="fp4", activations="fp4", attention_weights="fp4")[1] is None
    layer, routed = ops.part_formats(weights="fp4", activations="fp4", attention_weights="bf16",
                                     attention_activations="bf16")
    assert layer == {"math": "bf16", "w_bytes": 2.0, "a_bytes": 2.0}
    assert routed == {"math": "fp4", "w_bytes": nvfp4, "a_bytes": nvfp4}


def test_routed_parameters_in_closed_form():
    """gpt-oss-120b (config.json: 36 layers, 128 experts of hidden 2880 and intermediate
    2880, gated): 36 x 128 x 3 x 2880^2 routed parameters."""
    spec = load_model("gpt_oss_120b")
    assert ops.routed_params(spec) == pytest.approx(36 * 128 * 3 * 2880.0 ** 2, rel=1e-12)
    assert ops.routed_params(load_model("llama_3_1_70b")) == 0.0


@pytest.mark.parametrize("fn", ["serving", "inference"])
def test_a_dense_model_takes_attention_weights_for_all(fn):
    """No routed experts: weights=fp8 beside attention_weights=bf16 is the bf16 model."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=4)
    kw.update(SERVE if fn == "serving" else dict(batch=[1, 32], prompt=1024, generate=256, framework="trtllm"))
    mixed = getattr(predict, fn)(weights="fp8", attention_weights="bf16", **kw)
    plain = getattr(predict, fn)(weights="bf16", **kw)
    for name in ("tpot_s", "ttft_s", "weights_per_device_bytes"):
        np.testing.assert_allclose(mixed[name].values, plain[name].values, rtol=1e-12)


def test_attention_weights_equal_to_weights_changes_nothing():
    kw = dict(hardware="b200", model="gpt_oss_120b", tp=2, weights="fp4", **SERVE)
    a, b = predict.serving(**kw), predict.serving(attention_weights="fp4", **kw)
    for name in ("tpot_s", "ttft_s", "weights_per_device_bytes", "running_limit"):
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_weights_on_a_device_in_closed_form():
    """fp4 experts split over the instance's tp x attention_dp GPUs, the rest in bf16 over
    the replica's tp (embeddings and LM head 16-bit whatever the format)."""
    spec = load_model("gpt_oss_120b")
    tp, dp = 2, 2
    ds = predict.serving(hardware="b200", model="gpt_oss_120b", tp=tp, attention_dp=dp, weights="fp4",
                         attention_weights="bf16", **SERVE)
    experts = 36 * 128 * 3 * 2880.0 ** 2
    expected = experts * DTYPE_BYTES["fp4"] / (tp * dp) + weight_bytes(spec, 2.0, spec.n_params - experts) / tp
    np.testing.assert_allclose(ds.weights_per_device_bytes.values, expected, rtol=1e-12)
    static = predict.inference(hardware="b200", model="gpt_oss_120b", tp=tp, batch=1, weights="fp4",
                               attention_weights="bf16", framework="trtllm")
    assert float(static.weights_per_device_bytes) == pytest.approx(
        (experts * DTYPE_BYTES["fp4"] + weight_bytes(spec, 2.0, spec.n_params - experts)) / tp, rel=1e-12)


def test_mixed_formats_fall_between_the_uniform_ones():
    """BF16 attention beside FP4 experts (gpt-oss as published): the weights held and the
    bytes a decode step reads lie between all-FP4's and all-BF16's. (Time need not: the
    measured NVFP4 GEMMs at one row carry the activations' quantization and run slower
    than BF16's on B200, kernel tables.)"""
    kw = dict(hardware="b200", model="gpt_oss_120b", tp=2, batch=[1, 64], prompt=1024, generate=256,
              framework="trtllm")
    fp4 = predict.inference(weights="fp4", **kw)
    mixed = predict.inference(weights="fp4", attention_weights="bf16", **kw)
    bf16 = predict.inference(weights="bf16", **kw)
    for name in ("weights_per_device_bytes", "decode_step_bytes_per_device"):
        lo, mid, hi = fp4[name].values, mixed[name].values, bf16[name].values
        assert np.all(lo < mid) and np.all(mid < hi), (name, lo, mid, hi)


def test_fixed_pools_take_attention_weights():
    kw = dict(prefill_hardware="b200", decode_hardware="b200", model="deepseek_r1", concurrency=64, prompt=1024,
              generate=1024, weights="fp4", prefill_tp=8, decode_tp=8)
    mixed = predict.disaggregated(attention_weights="fp8", **kw)
    fp4 = predict.disaggregated(**kw)
    assert bool(mixed.fits) and float(mixed.tpot_s) > float(fp4.tpot_s)
    assert float(predict.disaggregated(attention_weights="fp4", **kw).tpot_s) == float(fp4.tpot_s)


@pytest.mark.parametrize("call,match", [
    (lambda: predict.serving(hardware="b200", model="gpt_oss_120b", weights="fp4", attention_weights="fp3", **SERVE),
     r"attention_weights='fp3' is not known; allowed: .*bf16"),
    (lambda: predict.serving(hardware="b200", model="gpt_oss_120b", weights="fp4", attention_weights="fp8_2:4",
                             **SERVE), r"attention_weights='fp8_2:4' is not known"),
    (lambda: predict.inference(hardware="cs3", model="llama_3_1_8b", weights="fp16", attention_weights="fp8"),
     r"attention_weights='fp8' is not allowed on 'cs3'; allowed: None"),
])
def test_bad_attention_weights_is_one_clear_line(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_sparse_weights_beside_attention_weights_are_flagged():
    ds = predict.serving(hardware="b200", model="llama_3_1_8b", weights="fp8_2:4", attention_weights="bf16", **SERVE)
    assert not ds.fits.any() and "beside 2:4-sparse weights" in str(ds.reason.values.ravel()[0])


def test_serving_rows_read_the_gemm_format_beside_the_experts():
    """A row recording per-tensor FP8 GEMMs beside block-FP8 experts (SGLang's DeepSeek rows)
    is predicted with attention_weights='fp8'; one format for both, without."""
    row = pd.Series({"gemm_quant_mode": "fp8", "moe_quant_mode": "fp8_block"})
    assert serving_rows.attention_weights(row) == "fp8"
    assert serving_rows.attention_weights(pd.Series({"gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"})) is None
    assert serving_rows.attention_weights(pd.Series({"gemm_quant_mode": np.nan, "moe_quant_mode": "fp8"})) is None
