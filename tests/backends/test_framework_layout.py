"""The attention layout a serving framework runs for the one asked (backends/kernel_tables.
framework_layout, specs/serving/frameworks.yaml dp_attention_forced): SGLang's server runs a DSA
model with DP attention over every GPU of the instance (sglang/srt/server_args.py, DeepSeek NSA:
enable_dp_attention, dp_size = tp_size), so asking it for TP8 attention predicts what TP1 x DP8
predicts; other models and frameworks keep the layout asked."""
from __future__ import annotations

import pytest

from workbench import predict

KW = dict(ep=8, concurrency=64, prompt=2048, generate=512, weights="fp8")


@pytest.mark.parametrize("hardware", ["b200", "h200_sxm"])
def test_sglang_runs_a_dsa_model_with_dp_attention_whatever_is_asked(hardware):
    asked = predict.serving(hardware=hardware, model="deepseek_v3_2", tp=8, framework="sglang", **KW)
    dp = predict.serving(hardware=hardware, model="deepseek_v3_2", tp=1, attention_dp=8, framework="sglang", **KW)
    assert float(asked.tpot_s) == pytest.approx(float(dp.tpot_s), rel=1e-12)
    assert float(asked.ttft_s) == pytest.approx(float(dp.ttft_s), rel=1e-12)
    assert (float(asked.attention_tp_run), float(asked.attention_dp_run)) == (1.0, 8.0)


def test_other_frameworks_and_models_keep_the_layout_asked():
    trt = predict.serving(hardware="b200", model="deepseek_v3_2", tp=8, framework="trtllm", **KW)
    assert (float(trt.attention_tp_run), float(trt.attention_dp_run)) == (8.0, 1.0)
    dense_attention = predict.serving(hardware="b200", model="deepseek_v3", tp=8, framework="sglang", **KW)
    assert (float(dense_attention.attention_tp_run), float(dense_attention.attention_dp_run)) == (8.0, 1.0)
    tp8 = float(predict.serving(hardware="b200", model="deepseek_v3", tp=8, framework="sglang", **KW).tpot_s)
    dp8 = float(predict.serving(hardware="b200", model="deepseek_v3", tp=1, attention_dp=8, framework="sglang",
                                **KW).tpot_s)
    assert tp8 != pytest.approx(dp8, rel=1e-3)  # the rule is the DSA model's, not every model's


def test_fixed_pools_run_each_pool_as_its_framework_does():
    ds = predict.disaggregated(prefill_hardware="b200", decode_hardware="b200", model="deepseek_v3_2", concurrency=64,
                               prompt=4096, generate=512, weights="fp8", framework="sglang", prefill_tp=8, decode_tp=8,
                               prefill_ep=8, decode_ep=8, prefill_workers=1, decode_workers=1, prefill_batch=1)
    assert (ds.attrs["prefill_attention_run"], ds.attrs["decode_attention_run"]) == ("tp 1 x dp 8", "tp 1 x dp 8")
