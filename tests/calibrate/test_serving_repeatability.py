"""The same stated serving deployment measured more than once (calibrate/serving_repeatability.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.calibrate import serving_repeatability as sr
from workbench.calibrate.serving_rows import load


def _row(i, **kw):
    base = dict(id=f"r{i}", model_path="meta-llama/Llama-3.1-70B", system="h200_sxm", backend="trtllm",
                backend_version="1.0", mode="agg", isl=1024, osl=1024, concurrency=8, precision=np.nan,
                gemm_quant_mode="fp8", moe_quant_mode="fp8", tp_size=4.0, attention_dp_size=np.nan,
                silicon_ttft_ms=100.0, silicon_tpot_ms=10.0)
    base.update(kw)
    return base


def test_a_pair_deviates_from_its_geometric_mean_in_closed_form():
    df = pd.DataFrame([_row(0), _row(1, silicon_tpot_ms=20.0, backend_version="1.1")])
    rep = sr.repeats(df)
    assert len(rep) == 2 and rep.group.nunique() == 1
    gm = np.sqrt(10.0 * 20.0) / 1e3
    assert rep.group_tpot_s.to_numpy() == pytest.approx([gm, gm])
    assert sorted(rep.tpot_dev) == pytest.approx([10e-3 / gm - 1.0, 20e-3 / gm - 1.0])  # -29.3%, +41.4%
    assert rep.ttft_dev.to_numpy() == pytest.approx([0.0, 0.0])  # the same TTFT twice
    s = sr.summary(rep).loc["all"]
    assert s.deployments == 1 and s.measurements == 2 and s.tpot_differ_10pct == 1 and s.ttft_differ_10pct == 0
    assert s.tpot_median_abs_dev == pytest.approx((0.2929 + 0.4142) / 2, abs=1e-3)
    w = sr.widest(rep, metric="tpot").iloc[0]
    assert w["max/min"] == pytest.approx(2.0) and w["versions"] == "1.0, 1.1"


def test_one_measurement_under_two_ids_is_not_a_repeat():
    assert sr.repeats(pd.DataFrame([_row(0), _row(1)])).empty


@pytest.mark.parametrize("change", [dict(concurrency=16), dict(tp_size=8.0), dict(isl=2048), dict(backend="vllm"),
                                    dict(gemm_quant_mode="nvfp4"), dict(attention_dp_size=2.0),
                                    dict(model_path="meta-llama/Llama-3.1-8B-Instruct")])
def test_any_stated_difference_makes_another_deployment(change):
    assert sr.repeats(pd.DataFrame([_row(0), _row(1, silicon_tpot_ms=20.0, **change)])).empty


def test_checkpoints_of_one_architecture_are_one_deployment():
    # DeepSeek-R1 and DeepSeek-V3: one config.json architecture, two catalog names
    assert sr.architecture("deepseek-ai/DeepSeek-R1") == sr.architecture("deepseek-ai/DeepSeek-V3")
    assert sr.architecture("deepseek-ai/DeepSeek-R1") != sr.architecture("meta-llama/Llama-3.1-70B")
    assert sr.architecture("org/not-in-the-catalog") == "org/not-in-the-catalog"
    df = pd.DataFrame([_row(0, model_path="deepseek-ai/DeepSeek-R1"),
                       _row(1, model_path="deepseek-ai/DeepSeek-V3", silicon_tpot_ms=12.0)])
    assert sr.repeats(df).group.nunique() == 1


def test_the_reference_rows_hold_repeats_with_the_known_widest_pair():
    """TensorRT-LLM DeepSeek-R1 FP8 on 8 B200, TP8, concurrency 4, 1024/8192: 3.57 ms TPOT
    under 1.2.0rc6.post3, 7.07 ms under 1.2.0rc6.post2 (serving_silicon.csv)."""
    rep = sr.repeats(load())
    assert rep.group.nunique() >= 30
    g = rep[(rep.system == "b200_sxm") & (rep.backend == "trtllm") & (rep.concurrency == 4) & (rep.isl == 1024)
            & (rep.osl == 8192) & (rep["mode"] == "agg")]
    assert sorted(g.measured_tpot_s * 1e3) == pytest.approx([3.574, 7.071], rel=1e-3)
    assert set(g.backend_version) == {"1.2.0rc6.post2", "1.2.0rc6.post3"}
    s = sr.summary(rep)
    assert set(s.index) == {"agg", "disagg", "all"}
    assert (s.tpot_p90_abs_dev >= s.tpot_median_abs_dev).all()


@pytest.fixture(scope="module")
def predicted():
    from workbench.calibrate.serving_rows import predict_rows
    return predict_rows(load())


def test_an_error_linear_in_the_deployment_is_explained_away(predicted):
    """A model error that is a function of the stated deployment (here 0.3 x log2 of the
    prompt length plus 0.1 on the H200 rows, in ln(measured / model)) is removed exactly
    by the linear correction: what explained_by_deployment leaves is what the stated
    deployment does not determine."""
    res = predicted.dropna(subset=["ttft_s", "tpot_s"]).copy()
    shift = np.exp(0.3 * np.log2(res["isl"]) + 0.1 * (res["system"] == "h200_sxm"))
    res["measured_ttft_s"], res["measured_tpot_s"] = res["ttft_s"] * shift, res["tpot_s"] / shift
    out = sr.explained_by_deployment(res)
    assert set(out.index) == {"sglang", "trtllm", "vllm"}
    assert (out["ttft_median_abs_log_err"] > 2.0).all()
    assert (out[["ttft_after_linear_correction", "tpot_after_linear_correction"]] < 1e-9).all().all()


def test_the_models_ttft_error_is_not_a_function_of_the_stated_deployment(predicted):
    """On the aggregated rows the model answers, correcting ln(measured / model TTFT) by its
    best in-sample fit linear in the stated deployment (11 features) leaves the median
    |ln error| at 0.266 of 0.301 (SGLang), 0.275 of 0.280 (TensorRT-LLM), 0.197 of 0.203
    (vLLM), recorded at the commit that added the check: the TTFT error left is what the rows
    do not state, not a missing trend in the model. Checked: at least 85% of it stays. vLLM's
    0.234 since the request latencies come from InferenceX's runs only (its 55 runs of other
    harnesses, whose low-concurrency TTFT grows with the prompt, are the ones that moved), 0.211
    since its prefilling iterations read the measured fused-MoE tables (frameworks.yaml
    prefill_moe_kernels)."""
    out = sr.explained_by_deployment(predicted)
    assert (out["ttft_after_linear_correction"] >= 0.85 * out["ttft_median_abs_log_err"]).all()
    assert out.loc["vllm", "ttft_median_abs_log_err"] == pytest.approx(0.211, abs=0.02)
