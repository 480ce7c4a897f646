"""The measured serving runs as predict calls (calibrate/serving_rows.py): layouts read back as
they ran, every weight format and system read, refused rows with their reason, and the TTFT
constants' fit (request latencies, least_median_shift)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.calibrate import serving_rows


def test_layout_multiplied_by_ep_is_read_back():
    """serving_silicon.csv records one run twice (identical TTFT and TPOT): id
    2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_0_ep8_0_1262 as tp_size 8,
    moe 1 x 8, and id 2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_957
    as tp_size 64, moe 8 x 8 (tp multiplied by ep); likewise attention_dp_size 64 for the
    attention-DP run ..._c256_tp8_0_ep8_0_992 / ..._c256_tp8_ep8_980. Both read back as the
    layout that ran; a genuine layout inside one HGX board is kept."""
    rows = serving_rows.load().set_index("id", drop=False)
    pairs = [("2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_957",
              "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_0_ep8_0_1262", (8, 1, 8)),
             ("2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x8192_c256_tp8_ep8_980",
              "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x8192_c256_tp8_0_ep8_0_992", (1, 8, 8))]
    for multiplied, plain, expected in pairs:
        a, b = rows.loc[multiplied], rows.loc[plain]
        assert np.allclose([a.silicon_ttft_ms, a.silicon_tpot_ms], [b.silicon_ttft_ms, b.silicon_tpot_ms], rtol=1e-9)
        assert a.tp_size * a.attention_dp_size == 64  # the recorded layout: 64 devices
        assert serving_rows.layout(a) == serving_rows.layout(b) == expected
    # MiniMax-M2.5 tp 4 x attention-DP 4 with experts 1 x 16: its MoE TP is 1, nothing to undo
    mm = rows[(rows.model_path == "MiniMaxAI/MiniMax-M2.5") & (rows.moe_ep_size == 16)].iloc[0]
    assert serving_rows.layout(mm) == (4, 4, 16)


def test_vllm_moe_tp_beyond_the_attention_tp_is_attention_dp():
    """vLLM shards MoE layers over data-parallel x tensor-parallel ranks (fused_moe/config.py,
    flatten_tp_across_dp), so a Qwen3-235B-FP8 row at tp_size 1 with moe_tp_size 2 ran two
    attention replicas on two H200 (one would not hold the 235 GB of weights), and the same
    benchmark at tp 2 with moe_tp 4 ran on four GPUs, measured faster (39.5 against 53.5 ms
    TPOT at tp 2, moe_tp 2). Dense models' MoE columns mean nothing and are left alone."""
    rows = serving_rows.load().set_index("id", drop=False)
    stem = "qwen_qwen3_235b_a22b_fp8_qwen_qwen3_235b_a22b_fp8_h200_sxm_vllm_agg_"
    two, four = rows.loc[stem + "8000x500_c7_tp2_epnone_39"], rows.loc[stem + "8000x500_c7_tp2_epnone_40"]
    assert serving_rows.layout(two) == (2, 1, 1) and serving_rows.layout(four) == (2, 2, 1)
    assert four.silicon_tpot_ms < 0.8 * two.silicon_tpot_ms
    assert serving_rows.layout(rows.loc[stem + "1000x100_c8_tp1_epnone_2"]) == (1, 2, 1)
    dense = rows[(rows.model_path == "Qwen/Qwen3-32B") & (rows.moe_tp_size == 0)].iloc[0]
    assert serving_rows.layout(dense)[1] == 1


def test_a_dense_rows_moe_columns_describe_nothing():
    """A dense model has no MoE layers, so a MoE split written in its row (the measured rows
    write 0 or 1; a harness could write the device count) is read as ep = 1, aggregated and
    disaggregated, and the row is answered instead of refused ("a dense model has no experts")."""
    rows = serving_rows.load().set_index("id", drop=False)
    agg = rows[(rows.model_path == "Qwen/Qwen3-32B") & (rows["mode"] == "agg") & (rows.tp_size == 4)].iloc[0].copy()
    agg["moe_tp_size"], agg["moe_ep_size"] = 1.0, 4.0
    cfg, why = serving_rows.config(_row(agg))
    assert why == "" and cfg["ep"] == 1 and cfg["tp"] == 4 and cfg["attention_dp"] == 1
    dis = rows.loc["qwen3_32b_qwen3_32b_h100_sxm_vllm_disagg_4000x1000_c_tp_epnone_2"].copy()
    dis["prefill_moe_ep_size"], dis["decode_moe_ep_size"] = 4.0, 4.0
    cfg, why = serving_rows.config(_row(dis))
    assert why == "" and cfg["prefill_ep"] == 1 and cfg["decode_ep"] == 1
    res = serving_rows.predict_rows(pd.DataFrame([agg, dis]))
    assert (res.not_answered == "").all() and res.tpot_s.notna().all()


def test_concurrency_beyond_the_engine_batch_is_spread_over_replicas():
    """A row whose concurrency is a whole multiple (>= 2) of batch_size x attention_dp_size
    ran that many engines (serving_rows.replicas): the three TensorRT-LLM 1.3.0rc5 rows, 32
    engines of nvidia/Qwen3-32B-NVFP4 on GB200 (batch 14, concurrency 448) and 8 of
    nvidia/DeepSeek-V3.1-NVFP4 on B200 (batch 56, concurrency 448), measured a TTFT under
    1 s that one engine with 448 requests queued for 14 or 56 slots could not show; read as
    replicas they come within 30% of TPOT and 40% of TTFT (a single engine put their TTFT at
    150 s and 2.6 s and their TPOT 4.8x and 2.3x the measured; their harness is not
    InferenceX's, whose request latencies they are predicted with: TTFT 16-36% short). Rows
    whose batch_size is per attention-DP rank (MiniMax-M2.5 on vLLM, batch 16 x DP 4 =
    concurrency 64) run one engine."""
    rows = serving_rows.load().set_index("id", drop=False)
    rc5 = rows[rows.backend_version == "1.3.0rc5"]
    assert sorted(serving_rows.replicas(r) for r in rc5[rc5["mode"] == "agg"].itertuples()) == [8, 32, 32]
    res = serving_rows.predict_rows(rc5[rc5["mode"] == "agg"])
    assert (res.tpot_err.abs() <= 0.30).all() and (res.ttft_err.abs() <= 0.40).all(), res[["id", "ttft_err", "tpot_err"]]
    mm = rows[(rows.model_path == "MiniMaxAI/MiniMax-M2.5") & (rows.batch_size * rows.attention_dp_size
                                                               == rows.concurrency) & (rows.batch_size > 1)]
    assert len(mm) and all(serving_rows.replicas(r) == 1 for r in mm.itertuples())
    dense = rows[(rows["mode"] == "agg") & (rows.batch_size == rows.concurrency)]
    assert all(serving_rows.replicas(r) == 1 for r in dense.head(50).itertuples())


def test_least_median_shift():
    """The fitted shift recovers a constant offset exactly (to its 10 us grid), and on rows
    whose gaps differ it scores no worse than the median gap it replaced."""
    rng = np.random.default_rng(0)
    base = rng.uniform(2e-3, 40e-3, 300)
    assert abs(serving_rows.least_median_shift(base, base + 2e-3) - 2e-3) <= serving_rows.OVERHEAD_STEP_S
    # a per-layer latency: offset 1.5 ms x layers
    layers = rng.choice([32.0, 61.0, 80.0], 300)
    assert abs(serving_rows.least_median_shift(base, base + 1.5e-3 * layers, layers) - 1.5e-3) <= 1e-5
    measured = base * rng.uniform(0.8, 1.3, 300) + rng.uniform(0.0, 6e-3, 300)
    h = serving_rows.least_median_shift(base, measured)
    gap = max(float(np.median(measured - base)), 0.0)
    score = lambda x: float(np.median(np.abs((base + x) / measured - 1.0)))  # noqa: E731
    assert h >= 0.0 and score(h) <= score(gap)
    assert serving_rows.least_median_shift(base, base * 0.5) == 0.0  # never negative


def test_least_median_shift_two_terms():
    """Two scales (layers without routed experts, MoE layers) recover both per-layer
    latencies of rows built from them, to the grid step."""
    rng = np.random.default_rng(1)
    dense = rng.choice([3.0, 32.0, 80.0, 0.0], 400)
    moe = np.where(dense == 3.0, 58.0, np.where(dense == 0.0, 36.0, 0.0))
    base = rng.uniform(0.02, 1.0, 400)
    measured = base + 0.4e-3 * dense + 2.5e-3 * moe
    h_dense, h_moe = serving_rows.least_median_shift(base, measured, np.stack([dense, moe], 1), step=1e-4)
    assert abs(h_dense - 0.4e-3) <= 1e-4 and abs(h_moe - 2.5e-3) <= 1e-4


def _latency_rows(rng, backend, model, n, concurrency, per_dense_s, per_moe_s, distort=1.0, harness="inferencex"):
    """Synthetic aggregated rows of one catalog model: TTFT = (base + its layers' latencies) x distort."""
    dense, moe = serving_rows._layer_counts(model)
    base = rng.uniform(0.02, 0.5, n)
    return pd.DataFrame({"mode": "agg", "backend": backend, "model": model, "concurrency": concurrency,
                         "steady_ttft_s": base, "first_wave_ttft_s": base, "request_latency_s": 0.0,
                         "harness": harness,
                         "measured_ttft_s": (base + per_dense_s * dense + per_moe_s * moe) * distort})


def test_request_latencies_come_from_the_known_harness_only():
    """Rows of another harness (aiconfigurator's own collection: client and engine settings
    unstated) at low concurrency, here 3 ms per layer slower, leave the latencies where
    InferenceX's rows put them (LATENCY_FIT_HARNESS); every row still counts for the waves
    and the held-out scores."""
    rng = np.random.default_rng(5)
    known = _latency_rows(rng, "trtllm", "meta-llama/Llama-3.1-70B", 60, 4, 0.2e-3, 0.0)
    other = _latency_rows(rng, "trtllm", "meta-llama/Llama-3.1-8B", 60, 4, 3.2e-3, 0.0, harness="other")
    _, fit = serving_rows.fit_ttft_constants(pd.concat([known, other], ignore_index=True))
    assert abs(fit["frameworks"]["trtllm"]["request_latency_s_per_layer"] - 0.2e-3) <= 1e-4
    assert fit["frameworks"]["trtllm"]["rows"] == 120


def test_request_latencies_come_from_low_concurrency_rows():
    """The latencies are recovered from the rows at concurrency <= LATENCY_FIT_MAX_CONCURRENCY;
    rows above it (here 3x off, as a burst the schedule misses would be) do not move them, and
    a framework without a dense model among its low-concurrency rows keeps 0 per dense layer
    (DeepSeek-R1: 3 dense + 58 MoE layers, Qwen3-235B: 94 MoE, Llama-3.1-8B/70B: 32/80 dense)."""
    rng = np.random.default_rng(3)
    low = serving_rows.LATENCY_FIT_MAX_CONCURRENCY
    rows = pd.concat([
        _latency_rows(rng, "trtllm", "meta-llama/Llama-3.1-70B", 60, 4, 0.5e-3, 1.5e-3),
        _latency_rows(rng, "trtllm", "deepseek-ai/DeepSeek-R1", 60, 8, 0.5e-3, 1.5e-3),
        _latency_rows(rng, "sglang", "deepseek-ai/DeepSeek-R1", 60, low, 0.0, 2.0e-3),
        _latency_rows(rng, "sglang", "Qwen/Qwen3-235B-A22B", 60, 4, 0.0, 2.0e-3),
        _latency_rows(rng, "sglang", "meta-llama/Llama-3.1-8B", 80, 4 * low, 0.0, 0.0, distort=3.0),
    ], ignore_index=True)
    _, fit = serving_rows.fit_ttft_constants(rows)
    trt, sgl = fit["frameworks"]["trtllm"], fit["frameworks"]["sglang"]
    assert abs(trt["request_latency_s_per_layer"] - 0.5e-3) <= 1e-4
    assert abs(trt["request_latency_s_per_moe_layer"] - 1.5e-3) <= 1e-4
    assert sgl["request_latency_s_per_layer"] == 0.0
    assert abs(sgl["request_latency_s_per_moe_layer"] - 2.0e-3) <= 1e-4
    assert "loo_gpu_median_abs_err" not in fit or np.isnan(fit["loo_gpu_median_abs_err"])  # no GPUs named


def test_request_latencies_held_out_by_gpu():
    """Rows on two GPUs with the same latencies: each GPU's rows predicted with the latencies
    fitted on the other's are exact (within the 0.1 ms grid); when the B200 rows' harness
    adds 40 ms to every request, their held-out TTFTs miss by it and the leave-one-GPU-out
    error grows while the fit on all rows cannot tell."""
    rng = np.random.default_rng(4)
    same = pd.concat([
        _latency_rows(rng, "trtllm", "meta-llama/Llama-3.1-70B", 40, 4, 0.5e-3, 1.5e-3).assign(system="h200_sxm"),
        _latency_rows(rng, "trtllm", "deepseek-ai/DeepSeek-R1", 40, 8, 0.5e-3, 1.5e-3).assign(system="h200_sxm"),
        _latency_rows(rng, "trtllm", "meta-llama/Llama-3.1-70B", 40, 4, 0.5e-3, 1.5e-3).assign(system="b200"),
        _latency_rows(rng, "trtllm", "deepseek-ai/DeepSeek-R1", 40, 8, 0.5e-3, 1.5e-3).assign(system="b200"),
    ], ignore_index=True)
    _, fit = serving_rows.fit_ttft_constants(same)
    assert fit["loo_gpu_median_abs_err"] < 0.01
    off = same.copy()
    off.loc[off["system"] == "b200", "measured_ttft_s"] += 0.040
    _, fit_off = serving_rows.fit_ttft_constants(off)
    assert fit_off["loo_gpu_median_abs_err"] > fit["loo_gpu_median_abs_err"] + 0.02


def test_request_latency_splits_dense_and_moe_layers():
    """request_latency_s = per layer x layers without routed experts + per MoE layer x MoE
    layers, with the constants of specs/serving/frameworks.yaml."""
    from workbench.backends.kernel_tables import request_latency_s, serving_constants
    from workbench.specs import load_model
    c = serving_constants()
    dense, moe = load_model("llama_3_1_70b"), load_model("deepseek_r1")
    assert request_latency_s("vllm", dense) == c["request_latency_s_per_layer"]["vllm"] * 80
    assert moe.n_moe_layers == 58 and moe.n_layers == 61  # DeepSeek-R1 config.json: first_k_dense_replace 3
    assert np.isclose(request_latency_s("vllm", moe), c["request_latency_s_per_layer"]["vllm"] * 3
                      + c["request_latency_s_per_moe_layer"]["vllm"] * 58)
    assert request_latency_s("none", moe) == 0.0


def test_every_weight_format_of_the_benchmarks_is_read():
    """Each weight format aiconfigurator-core names (sdk/common.py GEMMQuantMode and
    MoEQuantMode members, listed here as of 0.12.0) maps to a catalog format and math, and a
    row in it is answered on Hopper and Blackwell; a format not listed is refused with its
    name, never read as bf16. Weight-only formats compute in bf16, w4a8 in fp8."""
    gemm = ["bfloat16", "int8_wo", "int4_wo", "fp8", "fp8_static", "sq", "fp8_block", "fp8_ootb", "nvfp4",
            "nvfp4_wo", "w4a16_nvfp4"]
    moe = ["bfloat16", "fp8", "int4_wo", "fp8_block", "w4afp8", "nvfp4", "nvfp4_wo", "w4a16_mxfp4",
           "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm", "w4a16_mxfp4_cutlass", "w4a16_nvfp4"]
    assert set(gemm + moe) <= set(serving_rows.QUANT)
    assert serving_rows.QUANT["int8_wo"] == ("int8", "bf16") and serving_rows.QUANT["w4afp8"] == ("int4", "fp8")
    base = serving_rows.load().iloc[0].copy()
    base[["system", "model_path", "mode", "backend"]] = ["h100_sxm", "Qwen/Qwen3-30B-A3B", "agg", "trtllm"]
    base[["tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "concurrency", "isl", "osl"]] = \
        [2, 1, 1, 2, 8, 1024, 256]
    for system in ("h100_sxm", "b200_sxm"):
        for mode in sorted(set(gemm + moe)):
            r = base.copy()
            r[["system", "gemm_quant_mode", "moe_quant_mode"]] = [system, mode, mode]
            cfg, why = serving_rows.config(_row(r))
            assert why == "" and (cfg["weights"], cfg["activations"]) == serving_rows.QUANT[mode]
            out, why = serving_rows._one(dict(cfg))
            assert why == "" and out["tpot_s"] > 0, (system, mode, why)
    r = base.copy()
    r[["gemm_quant_mode", "moe_quant_mode"]] = ["int2_wo", "int2_wo"]
    cfg, why = serving_rows.config(_row(r))
    assert cfg is None and "weight format 'int2_wo' is not known" in why
    r[["gemm_quant_mode", "moe_quant_mode", "precision"]] = [float("nan"), float("nan"), "fp8"]
    assert serving_rows.config(_row(r))[0]["weights"] == "fp8"  # no format: the row's precision


def _row(series):
    """A row as predict_rows reads it (itertuples: `mode` a field, not Series.mode)."""
    return next(pd.DataFrame([series]).itertuples())


def test_every_system_of_the_benchmarks_is_a_catalog_gpu():
    """aiconfigurator-core 0.12.0's systems/*.yaml (every GPU it has data for) each name a
    catalog GPU, so a measured run on any of them can be predicted."""
    from workbench.backends import backend_for
    from workbench.specs import load_hardware
    systems = ["a100_pcie", "a100_sxm", "a30", "b200_sxm", "b300_sxm", "b60", "gb200", "gb300", "h100_pcie",
               "h100_sxm", "h200_sxm", "l4", "l40s", "rtx_pro_6000_server"]
    assert all(serving_rows.system(s) is not None for s in systems)
    for s in systems:
        assert backend_for(load_hardware(serving_rows.system(s))).kind == "gpu"


def test_pipelined_rows_run_their_stages():
    """An aggregated row with pp_size 2 is predicted with its two pipeline stages (not as if
    its devices ran tensor-parallel); so is a disaggregated pool with stages."""
    rows = serving_rows.load()
    r = rows[rows["mode"] == "agg"].iloc[0].copy()
    r["pp_size"] = 2
    cfg, why = serving_rows.config(_row(r))
    assert why == "" and cfg["pp"] == 2 and cfg["tp"] == serving_rows.config(_row(rows[rows["mode"] == "agg"].iloc[0]))[0]["tp"]
    d = rows[(rows["mode"] == "disagg") & rows.decode_num_workers.notna()].iloc[0].copy()
    d["decode_pp_size"] = 2
    cfg, why = serving_rows.config(_row(d))
    assert why == "" and cfg["decode_pp"] == 2 and cfg["prefill_pp"] == 1


def test_a_row_group_the_api_refuses_leaves_the_others_answered():
    """TensorRT-LLM on the Intel B60 (kernel tables for vLLM only; NVIDIA's engine does not run
    on Intel GPUs) is refused with the API's reason; the other rows of the same call are still
    predicted."""
    rows = serving_rows.load()
    rows = rows[rows["mode"] == "agg"].head(1)
    refused = rows.assign(id="b60-trtllm", system="b60", backend="trtllm")
    res = serving_rows.predict_rows(pd.concat([rows, refused], ignore_index=True))
    assert "framework='trtllm' has no kernel tables for 'b60' and does not run on intel GPUs" in \
        res.loc[1, "not_answered"]
    assert np.isnan(res.loc[1, "tpot_s"]) and np.isfinite(res.loc[0, "tpot_s"]) and res.loc[0, "not_answered"] == ""


def test_a_system_named_as_vendors_write_it_is_the_catalog_gpu():
    """A row's `system` outside the benchmarks' names resolves as hardware names do
    (specs/hardware_names): "NVIDIA H200 SXM" is h200_sxm, predicted exactly as the row that
    says h200_sxm; "mi300x" under vLLM runs vLLM's engine on the analytical kernels; a system
    the catalog lacks stays unanswered with that reason."""
    rows = serving_rows.load()
    base = rows[(rows["mode"] == "agg") & (rows["system"] == "h200_sxm") & (rows["backend"] == "vllm")].head(1)
    named = base.assign(id="named", system="NVIDIA H200 SXM")
    amd = base.assign(id="amd", system="mi300x")
    tpu = base.assign(id="tpu", system="tpu_v5p")
    res = serving_rows.predict_rows(pd.concat([base, named, amd, tpu], ignore_index=True)).set_index("id")
    first = base["id"].iloc[0]
    assert res.loc["named", "tpot_s"] == res.loc[first, "tpot_s"]
    assert res.loc["named", "ttft_s"] == res.loc[first, "ttft_s"]
    assert res.loc["amd", "not_answered"] == "" and np.isfinite(res.loc["amd", "tpot_s"])
    assert res.loc["tpu", "not_answered"] == "system tpu_v5p is not in the catalog"


def test_a_row_the_model_fails_on_is_that_row_s_failure(monkeypatch):
    """A row whose reading or prediction raises something other than the API's InputError
    (a defect) is reported unanswered with the error, the batch's other rows still predicted:
    here every Mixtral call fails and a row of malformed layout fails its reading."""
    from workbench import predict
    rows = serving_rows.load()
    rows = rows[rows["mode"] == "agg"].head(1)
    other = rows.assign(id="failing", model_path="mistralai/Mixtral-8x7B-v0.1")
    unreadable = rows.assign(id="unreadable", tp_size="eight")
    real = predict.serving

    def serving(**kw):
        if "Mixtral" in str(kw["model"]):
            raise RuntimeError("boom")
        return real(**kw)
    monkeypatch.setattr(predict, "serving", serving)
    res = serving_rows.predict_rows(pd.concat([rows, other, unreadable], ignore_index=True)).set_index("id")
    assert res.loc["failing", "not_answered"] == f"{serving_rows.FAILED}: RuntimeError: boom"
    assert res.loc["unreadable", "not_answered"].startswith(f"{serving_rows.FAILED}: ")
    first = rows["id"].iloc[0]
    assert res.loc[first, "not_answered"] == "" and np.isfinite(res.loc[first, "tpot_s"])
    assert np.isnan(res.loc["failing", "tpot_s"]) and np.isnan(res.loc["unreadable", "tpot_s"])


def test_a_failing_row_leaves_the_rest_of_its_group_predicted(monkeypatch):
    """Rows of one hardware, model and format are one vectorized call: where it raises, each
    row is tried alone and only the one the model fails on is reported failed."""
    from workbench import predict
    rows = serving_rows.load()
    rows = rows[(rows["mode"] == "agg") & (rows["system"] == "h200_sxm") & (rows["backend"] == "vllm")].head(1)
    bad = rows.assign(id="bad", concurrency=777.0, batch_size=777.0)
    real = predict.serving

    def serving(**kw):
        if 777.0 in np.atleast_1d(np.asarray(kw["concurrency"], float)):
            raise RuntimeError("boom")
        return real(**kw)
    monkeypatch.setattr(predict, "serving", serving)
    res = serving_rows.predict_rows(pd.concat([rows, bad], ignore_index=True)).set_index("id")
    assert res.loc["bad", "not_answered"] == f"{serving_rows.FAILED}: RuntimeError: boom"
    first = rows["id"].iloc[0]
    assert res.loc[first, "not_answered"] == "" and np.isfinite(res.loc[first, "tpot_s"])
