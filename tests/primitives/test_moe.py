"""The MoE layer kernel (primitives/moe.py, kernel_fits.moe_roofline) and MLA decode
(primitives/attention.mla_decode): closed-form FLOPs and
bytes of the routed experts, the experts a batch touches, the fitted surfaces evaluated
as they were fitted (in-sample against the measured TensorRT-LLM block-FP8 table of
aiconfigurator-core 0.12.0 on H200), the fastest measured source per shape, and the layer
model reading them where the framework has tables and falling back to grouped GEMMs where
it has none."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.primitives.kernel_fits import MOE_FORMATS, expected_experts_touched, moe_roofline
from workbench.primitives.moe import KERNELS_PER_OP, fitted_moe, moe_variants
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads.layers import layer_gemms

DEEPSEEK = dict(hidden=7168.0, inter=2048.0, top_k=8.0, n_experts=256.0)  # DeepSeek-V3 config.json


def test_roofline_counts_the_gated_experts_in_closed_form():
    """4096 tokens x top-8 over 8-way EP: 4096 (token, expert) pairs per GPU, three
    7168 x 2048 matrices each (2 FLOPs per multiply-add); every one of the 32 local experts
    is touched, its weights read once."""
    t, _ = moe_roofline(tokens=4096.0, tp=1.0, ep=8.0, peak=1.0, bandwidth=np.inf, w_bytes=1.0, a_bytes=1.0,
                        **DEEPSEEK)
    assert t == pytest.approx(2 * 3 * 4096 * 7168 * 2048)
    b, c = moe_roofline(tokens=4096.0, tp=1.0, ep=8.0, peak=np.inf, bandwidth=1.0, w_bytes=1.0, a_bytes=1.0,
                        **DEEPSEEK)
    touched = 256 * (1 - (1 - 8 / 256) ** 4096) / 8
    assert touched == pytest.approx(32.0)
    assert b == pytest.approx(touched * 3 * 7168 * 2048 + 4096 * (2 * 7168 + 2 * 2048))
    assert c["tokens_per_expert"] == pytest.approx(4096 / touched) and c["width"] == 2048


def test_experts_touched_limits():
    assert expected_experts_touched(n_experts=256.0, top_k=1.0, tokens=1.0) == pytest.approx(1.0)
    assert expected_experts_touched(n_experts=256.0, top_k=8.0, tokens=1e5) == pytest.approx(256.0)
    # the busiest GPU holds at least one expert with one pair: 1 token over 64-way EP
    _, c = moe_roofline(tokens=1.0, tp=1.0, ep=64.0, peak=1.0, bandwidth=1.0, w_bytes=1.0, a_bytes=1.0, **DEEPSEEK)
    assert c["experts"] == 1.0 and c["tokens_per_expert"] == 1.0


def test_formats_map_to_tables():
    assert moe_variants("bf16", 2.0) == ("bf16",)
    assert moe_variants("bf16", 0.5) == ("mxfp4_w4a16", "int4")  # 4-bit weights on 16-bit math
    assert moe_variants("fp8_block", 1.0) == ("fp8_block",) and moe_variants("fp4", 0.5) == ("fp4",)
    assert set(MOE_FORMATS) >= {"bf16", "fp8", "fp8_block", "fp4", "int4", "mxfp4_w4a16", "mxfp4_w4a8"}


def _measured_moe(gpu="h200_sxm", framework="trtllm", dtype="fp8_block"):
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from workbench.calibrate import aiconfigurator
    from workbench.microbench import schema
    ds = aiconfigurator.import_kernels(hardware=gpu, framework=framework)[(gpu, framework)]
    df = schema.to_frame(ds)
    return df[(df.kind == "moe") & (df.dtype == dtype)]


def test_fitted_moe_reproduces_the_measured_table():
    """In-sample: every measured block-FP8 MoE layer of TensorRT-LLM on H200 against the
    fitted primitive (no CUDA-graph saving: the table's own launch path). Held out by
    neighbourhood the same surface scores 5.2% median, 23% p90 (its JSON)."""
    df = _measured_moe().sample(2000, random_state=0)
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), graph_saving_s=0.0, measured_moe_mla=True)
    arr = {c: df[c].to_numpy(float) for c in ("m", "k", "n", "top_k", "n_experts", "tp", "ep")}
    t = fitted_moe(hw=hw, tokens=arr["m"], hidden=arr["k"], inter=arr["n"], top_k=arr["top_k"],
                   n_experts=arr["n_experts"], tp=arr["tp"], ep=arr["ep"], math="fp8_block", w_bytes=1.0)["time_s"]
    err = np.abs(t / df.time_s.to_numpy() - 1)
    assert np.median(err) < 0.06 and np.quantile(err, 0.9) < 0.25


def test_fastest_source_and_graph_saving():
    """The time is the least over the format's measured sources; the served op (CUDA graph)
    is KERNELS_PER_OP launch savings faster, never below its roofline."""
    hw0 = dataclasses.replace(numbers("h200_sxm", framework="vllm"), graph_saving_s=0.0, measured_moe_mla=True)
    kw = dict(tokens=np.array([1.0, 64.0, 8192.0]), tp=1.0, ep=1.0, math="fp8_block", w_bytes=1.0, **DEEPSEEK)
    t0 = fitted_moe(hw=hw0, **kw)["time_s"]
    sources = [v for (c, v) in hw0.kernels.grids if c == "moe" and v.split("@")[0] == "fp8_block"]
    assert len(sources) >= 2
    for v in sources:  # each source alone is no faster
        alone = dataclasses.replace(hw0, kernels=dataclasses.replace(
            hw0.kernels, grids={k: g for k, g in hw0.kernels.grids.items() if k[0] != "moe" or k[1] == v}))
        assert np.all(fitted_moe(hw=alone, **kw)["time_s"] >= t0 - 1e-15)
    hw1 = dataclasses.replace(hw0, graph_saving_s=2e-6)
    r1 = fitted_moe(hw=hw1, **kw)
    roof = np.maximum(r1["compute_s"], r1["memory_s"])
    assert np.all(r1["time_s"] >= np.minimum(t0, roof) - 1e-15)
    assert np.all(r1["time_s"] >= t0 - KERNELS_PER_OP * 2e-6 - 1e-15)
    assert np.all(np.diff(t0) > 0)  # more tokens, more time



def test_no_shape_runs_faster_than_its_tables_fastest_row():
    """TensorRT-LLM's MXFP4 W4A16 MoE tables on H200 time gpt-oss's 2880-wide experts unsplit
    (moe_tp 1) only, their fastest row 70 us (one token, 128-way EP): the op's five launches.
    Split TP 8 (width 360, beyond the table's knots) the surface carried by the BF16 one had
    timed 8 tokens at 39 us; the op is no faster than the fastest row its table measured
    (the `fastest_s` the fit stores with each MoE surface)."""
    from workbench.units import FOUR_BIT_BYTES
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), graph_saving_s=0.0, measured_moe_mla=True)
    fastest = hw.fitted_param("moe", "mxfp4_w4a16", "fastest_s")
    assert 60e-6 < fastest < 80e-6
    kw = dict(hidden=2880.0, inter=2880.0, top_k=4.0, n_experts=128.0, math="bf16", w_bytes=FOUR_BIT_BYTES[1])
    for tp, ep in ((8.0, 1.0), (1.0, 8.0), (4.0, 4.0), (1.0, 1.0)):
        t = fitted_moe(hw=hw, tokens=np.array([1.0, 8.0, 64.0]), tp=tp, ep=ep, **kw)["time_s"]
        assert np.all(t >= fastest * (1 - 1e-12))
    # served from a CUDA graph the five launches' saving still comes off
    served = fitted_moe(hw=dataclasses.replace(hw, graph_saving_s=8e-6), tokens=np.array(8.0), tp=8.0, ep=1.0, **kw)
    assert float(served["time_s"]) == pytest.approx(fastest - KERNELS_PER_OP * 8e-6, rel=1e-9)

def test_layers_read_the_moe_tables_and_fall_back_without_them():
    model = load_model("deepseek_v3")
    kw = dict(model=model, tokens=64.0, tp=8.0, math="fp8_block", w_bytes=1.0, a_bytes=1.0, moe=True, ep=1.0)
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), measured_moe_mla=True)
    with_tables = layer_gemms(hw, **kw)
    moe = fitted_moe(hw=hw, tokens=64.0, hidden=7168.0, inter=2048.0, top_k=8.0, n_experts=256.0, tp=8.0, ep=1.0,
                     math="fp8_block", w_bytes=1.0)
    assert with_tables["time_s"] > moe["time_s"]  # the routed experts plus attention projections, router, shared
    no_moe = dataclasses.replace(hw, kernels=dataclasses.replace(
        hw.kernels, grids={k: g for k, g in hw.kernels.grids.items() if k[0] != "moe"}))
    fallback = layer_gemms(no_moe, **kw)
    assert np.isfinite(fallback["time_s"]) and fallback["time_s"] != with_tables["time_s"]
    dense = layer_gemms(hw, **dict(kw, moe=False))
    assert dense["time_s"] == layer_gemms(no_moe, **dict(kw, moe=False))["time_s"]  # dense layers unaffected
    composed = layer_gemms(dataclasses.replace(hw, measured_moe_mla=False), **kw)  # the default: grouped GEMMs
    assert composed["time_s"] == fallback["time_s"]


def test_serving_takes_the_measured_kernels_when_asked():
    """predict.serving(moe_mla_kernels=...): "composed" and "measured" differ for an
    MLA + MoE model and agree for a dense one; a bad value is one clear line."""
    from workbench import predict
    from workbench.errors import InputError
    kw = dict(hardware="b200", tp=8, concurrency=32, prompt=1024, generate=512, weights="fp8",
              framework="trtllm", moe_mla_kernels=["composed", "measured"])
    ds = predict.serving(model="deepseek_v3", **kw)
    assert ds.sizes["moe_mla_kernels"] == 2 and bool(ds.fits.all())
    assert float(ds.tpot_s.sel(moe_mla_kernels="composed")) != float(ds.tpot_s.sel(moe_mla_kernels="measured"))
    dense = predict.serving(model="llama_3_1_70b", **kw)
    assert float(dense.tpot_s.sel(moe_mla_kernels="composed")) == float(dense.tpot_s.sel(moe_mla_kernels="measured"))
    with pytest.raises(InputError, match="moe_mla_kernels='fused' is not known; allowed: framework, composed, measured"):
        predict.serving(model="deepseek_v3", **dict(kw, moe_mla_kernels="fused"))


def test_framework_default_times_prefill_moe_by_the_framework_rule():
    """The default moe_mla_kernels="framework" composes decode-only iterations under every
    framework and, in iterations that prefill, follows specs/serving/frameworks.yaml
    prefill_moe_kernels: TensorRT-LLM's ("composed") predicts exactly what "composed" does;
    vLLM's ("measured") prefills slower than the composition (the fused MoE tables at prefill sizes run
    1.2-10x the composed experts, benchmarks/moe_composed_vs_tables.py), so its TTFT is above
    the composed path's; every prefill (closed loop, prefill pools, static) takes the rule
    through inference.eager; a dense model does not see it."""
    from workbench import predict
    from workbench.backends.kernel_tables import serving_constants
    rule = serving_constants()["prefill_moe_kernels"]
    assert set(rule) == {"trtllm", "vllm", "sglang", "none"} and set(rule.values()) <= {"composed", "measured"}
    assert rule["trtllm"] == "composed" and rule["vllm"] == "measured"
    kw = dict(hardware="h200_sxm", model="qwen3_235b_a22b", tp=8, concurrency=64, prompt=4096, generate=256,
              weights="fp8_block", moe_mla_kernels=["framework", "composed", "measured"])
    trt = predict.serving(framework="trtllm", **kw)
    assert float(trt.ttft_s.sel(moe_mla_kernels="framework")) == float(trt.ttft_s.sel(moe_mla_kernels="composed"))
    assert float(trt.tpot_s.sel(moe_mla_kernels="framework")) == float(trt.tpot_s.sel(moe_mla_kernels="composed"))
    vllm = predict.serving(framework="vllm", **kw)
    assert float(vllm.ttft_s.sel(moe_mla_kernels="framework")) > float(vllm.ttft_s.sel(moe_mla_kernels="composed"))
    from workbench.backends import numbers
    from workbench.workloads.inference import eager  # every prefill: the closed loop's, the pools', the static one's
    assert numbers("h200_sxm", framework="vllm").measured_moe_prefill
    assert eager(numbers("h200_sxm", framework="vllm")).measured_moe_mla
    assert not eager(numbers("h200_sxm", framework="trtllm")).measured_moe_mla
    dense = predict.serving(framework="vllm", **dict(kw, model="llama_3_1_70b", weights="fp8"))
    assert float(dense.ttft_s.sel(moe_mla_kernels="framework")) == float(dense.ttft_s.sel(moe_mla_kernels="composed"))


def test_measured_mode_takes_the_ep_kernels_for_dispatch_and_combine():
    """With moe_mla_kernels="measured" an EP-8 MoE decode on 8 H100s moves its tokens with
    the framework's measured EP kernels (collectives.ep_all_to_all), composed mode with two
    all-to-all collectives: the communication differs, and the measured one is what the
    primitive gives for the tokens of one decode step per rank."""
    from workbench import predict
    kw = dict(hardware="h100_sxm", model="qwen3_235b_a22b", tp=1, attention_dp=8, ep=8, concurrency=64,
              prompt=1024, generate=256, weights="fp8", framework="trtllm")
    comm = {m: float(predict.serving(**kw, moe_mla_kernels=m).decode_comm_s) for m in ("composed", "measured")}
    assert comm["composed"] != comm["measured"] and comm["measured"] > 0


# ---- MLA decode (the same measured-kernel path for DeepSeek's latent attention) ----------

def test_mla_roofline_in_closed_form():
    from workbench.primitives.kernel_fits import mla_decode_roofline
    t, c = mla_decode_roofline(batch=8.0, kv_len=4096.0, n_heads=16.0, latent=512.0, rope=64.0, peak=1.0,
                               bandwidth=np.inf, act_bytes=2.0, kv_bytes=1.0)
    assert t == pytest.approx(2 * 8 * 16 * (2 * 512 + 64) * 4096)
    b, _ = mla_decode_roofline(batch=8.0, kv_len=4096.0, n_heads=16.0, latent=512.0, rope=64.0, peak=np.inf,
                               bandwidth=1.0, act_bytes=2.0, kv_bytes=1.0)
    assert b == pytest.approx(8 * (4096 * 576 * 1 + 16 * (2 * 512 + 64) * 2)) and c == {"batch": 8.0, "keys": 4096.0,
                                                                                         "heads": 16.0}


def test_mla_decode_reproduces_the_measured_table_and_the_layer_reads_it():
    """In-sample against TensorRT-LLM's measured MLA generation kernels on H200 (bf16 math,
    bf16 cache); a DeepSeek decode layer under that framework takes its attention from them."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from workbench.calibrate import aiconfigurator
    from workbench.microbench import schema
    from workbench.primitives.attention import mla_decode
    from workbench.workloads.layers import decode_attention
    ds = aiconfigurator.import_kernels(hardware="h200_sxm", framework="trtllm")[("h200_sxm", "trtllm")]
    df = schema.to_frame(ds)
    df = df[(df.kind == "mla_decode") & (df.kv_dtype == "bf16")]
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), graph_saving_s=0.0, measured_moe_mla=True)
    t = mla_decode(hw=hw, batch=df.batch.to_numpy(float), context=df.context.to_numpy(float) + 1.0,
                   n_heads=df.n_heads.to_numpy(float), latent=512.0, rope=64.0, dtype="bf16", kv_bytes=2.0)["time_s"]
    err = np.abs(t / df.time_s.to_numpy() - 1)
    assert np.median(err) < 0.06 and np.quantile(err, 0.9) < 0.25
    model = load_model("deepseek_v3")
    layer = decode_attention(hw, model, batch=32.0, context=4096.0, tp=8.0, math="bf16", kv_bytes=2.0)
    direct = mla_decode(hw=hw, batch=32.0, context=model.attention_context(4096.0) / model.n_layers, n_heads=16.0,
                        latent=512.0, rope=64.0, dtype="bf16", kv_bytes=2.0)
    assert layer["time_s"] == pytest.approx(direct["time_s"])
    none = decode_attention(numbers("h200_sxm", framework="none"), model, batch=32.0, context=4096.0, tp=8.0,
                            math="bf16", kv_bytes=2.0)
    assert np.isfinite(none["time_s"]) and none["time_s"] != layer["time_s"]  # no tables: the analytical kernel


def test_a_surface_beyond_its_tables_shapes_carries_the_bf16_surfaces_trend():
    """TensorRT-LLM's MXFP4 W4A16 MoE table on H200 holds gpt-oss's shapes at MoE TP 1 only
    (expert width 2880): at TP 8 (width 360) its surface alone keeps 2880's efficiency, so the
    layer's time would fall 8x with the weights it reads. Carried, the efficiency at 360 is
    the edge's times the framework's BF16 MoE surface's change from the edge to 360 (which
    fell 0.71 -> 0.41 when this was written); inside the table's shapes nothing changes."""
    from workbench.primitives.moe import carried_efficiency
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), graph_saving_s=0.0, measured_moe_mla=True)
    w4, _ = hw.fitted("moe", "mxfp4_w4a16")
    bf16, _ = hw.fitted("moe", "bf16")
    lo, hi = 2.0 ** np.array(w4.knots[w4.axes.index("width")])[[0, -1]]
    assert lo <= 2880 <= hi and 360 < lo  # the table's width span holds gpt-oss's width alone
    at = dict(tokens_per_expert=np.array([1.0, 2.0, 16.0]), hidden=2880.0, experts=np.array([4.0, 8.0, 32.0]))
    inside = carried_efficiency(w4, bf16, dict(at, width=2880.0))
    np.testing.assert_allclose(inside, w4(**dict(at, width=2880.0)), rtol=1e-12)
    beyond = carried_efficiency(w4, bf16, dict(at, width=360.0))
    trend = bf16(**dict(at, width=360.0)) / bf16(**dict(at, width=lo))
    np.testing.assert_allclose(beyond / w4(**dict(at, width=lo)), trend, rtol=1e-12)
    assert np.all(trend < 0.9)  # narrower experts run further below their roofline
    np.testing.assert_allclose(carried_efficiency(w4, None, dict(at, width=360.0)), w4(**dict(at, width=360.0)))
    gpt_oss = dict(hidden=2880.0, inter=2880.0, top_k=4.0, n_experts=128.0, ep=1.0, math="bf16",
                   w_bytes=DTYPE_BYTES["fp4"])  # 4-bit experts on 16-bit math: the W4A16 tables
    t1 = fitted_moe(hw=hw, tokens=8.0, tp=1.0, **gpt_oss)["time_s"]
    t8 = fitted_moe(hw=hw, tokens=8.0, tp=8.0, **gpt_oss)["time_s"]
    assert t8 > t1 / 8.0 * 1.1  # TP 8 no longer divides the layer's time by 8
