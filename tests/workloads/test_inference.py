"""The inference workload's arithmetic: FLOPs and bytes against closed forms, the decode
sum over steps, bounds, and what TP and PP do to memory and time."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.specs import load_model
from workbench.workloads.inference import inference, memory_per_device
from workbench.workloads.layers import layer_decode
from workbench.backends import numbers

H100 = numbers("h100_sxm")


def _run(model, **kw):
    args = dict(hw=H100, model=load_model(model), tp=1, pp=1, dp=1, batch=4.0, prompt=1024.0,
                generate=128.0, weights="bf16", activations="bf16", kv="bf16")
    args.update(kw)
    return inference(**args)


def _attention_flops(m, new, context_before):
    """2·H·(h + h_v) per (query, key) pair, causal over the new tokens (closed form)."""
    pairs = new * new / 2 + new * context_before
    return 2 * m.n_heads * (m.head_dim + m.v_dim) * pairs * m.n_layers


@pytest.mark.parametrize("model", ["llama_3_1_8b", "qwen3_32b", "mixtral_8x7b", "deepseek_v3"])
def test_prefill_flops_closed_form(model):
    """Prefill FLOPs = 2·(active matmul params - lm_head)·tokens + 2·lm_head·batch (logits
    of the last position only) + causal attention. With TP, ranks also repeat the small
    replicated matmuls (router, MLA down-projections): the sum over ranks is at least the
    model's FLOPs and exactly them for a dense GQA model."""
    m = load_model(model)
    b, s = 4.0, 1024.0
    lm_head = m.vocab_size * m.d_model
    expected = 2 * (m.n_matmul_params_active - lm_head) * b * s + 2 * lm_head * b \
        + b * _attention_flops(m, s, 0.0)
    one = _run(model, tp=1.0, batch=b, prompt=s)
    assert float(one["prefill_flops_per_device"]) == pytest.approx(expected, rel=1e-9)
    eight = float(_run(model, tp=8.0, batch=b, prompt=s)["prefill_flops_per_device"]) * 8
    if m.is_moe or m.is_mla:
        assert expected < eight < expected * 1.25
    else:
        assert eight == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("model", ["llama_3_1_8b", "mixtral_8x7b"])
def test_decode_step_flops_closed_form(model):
    """One decode step (all layers, one TP rank = the whole model at tp=1) does
    2·N_active·batch matmul FLOPs plus attention over the mean context."""
    m = load_model(model)
    b, s, g = 16.0, 1000.0, 200.0
    r = _run(model, batch=b, prompt=s, generate=g)
    ctx = s + g / 2
    expected = 2 * m.n_matmul_params_active * b + 2 * m.n_heads * (m.head_dim + m.v_dim) * ctx * m.n_layers * b
    assert float(r["decode_step_flops_per_device"]) == pytest.approx(expected, rel=1e-9)


def test_decode_reads_every_weight_and_the_kv_cache():
    """Bytes of a dense decode step >= weights + KV cache at the mean context (conservation:
    both must cross the memory bus once per step)."""
    m = load_model("llama_3_1_8b")
    b, s, g = 8.0, 4096.0, 256.0
    r = _run("llama_3_1_8b", batch=b, prompt=s, generate=g)
    weights = m.n_matmul_params_active * 2.0
    kv = b * (s + g / 2) * m.kv_bytes_per_token("bf16")
    assert float(r["decode_step_bytes_per_device"]) >= weights + kv
    assert float(r["decode_step_bytes_per_device"]) <= (weights + kv) * 1.05  # activations are small


def test_closed_form_decode_sum_matches_a_loop_over_steps():
    """e2e uses (generate-1)·step(prompt + generate/2); summing every step explicitly
    differs only by the non-linear efficiency terms (< 1%)."""
    m = load_model("llama_3_1_8b")
    s, g, b = 2048.0, 512.0, 32.0
    r = _run("llama_3_1_8b", batch=b, prompt=s, generate=g)
    contexts = s + np.arange(1, g)  # the g-1 decode steps after the first token
    kw = dict(tp=1.0, math="bf16", w_bytes=2.0, a_bytes=2.0, kv_bytes=2.0, moe=False)
    step = layer_decode(H100, m, batch=b, context=contexts, **kw)
    # lm_head and overheads are constant per step: take them from the model's own step.
    per_step_layers = m.n_layers * (step["time_s"] + step["overhead_s"])
    one = layer_decode(H100, m, batch=b, context=s + g / 2, **kw)
    constant = float(r["tpot_s"]) - m.n_layers * float(one["time_s"] + one["overhead_s"])
    loop_total = float(np.sum(per_step_layers + constant))
    closed = float(r["e2e_s"] - r["ttft_s"])
    assert closed == pytest.approx(loop_total, rel=0.01)


def test_tpot_between_its_bounds():
    r = _run("llama_3_1_70b", tp=8.0, batch=np.array([1.0, 16.0, 256.0]), prompt=2048.0)
    assert np.all(r["tpot_lower_s"] <= r["tpot_s"] * (1 + 1e-12))
    assert np.all(r["tpot_s"] <= r["tpot_upper_s"] * (1 + 1e-12))


def test_decode_never_faster_than_the_memory_roofline():
    """A decode step cannot beat reading the weights once at peak HBM bandwidth."""
    m = load_model("llama_3_1_8b")
    r = _run("llama_3_1_8b", batch=np.array([1.0, 8.0, 64.0]))
    floor = m.n_matmul_params_active * 2.0 / H100.hbm_bandwidth_bytes_per_s
    assert np.all(r["tpot_s"] > floor)


def test_pipeline_parallel_splits_memory_not_decode_time():
    one = _run("llama_3_1_70b", tp=4.0, pp=1.0, batch=32.0)
    two = _run("llama_3_1_70b", tp=4.0, pp=2.0, batch=32.0)
    assert float(two["weights_per_device_bytes"]) == pytest.approx(float(one["weights_per_device_bytes"]) / 2)
    assert float(two["kv_cache_per_device_bytes"]) == pytest.approx(float(one["kv_cache_per_device_bytes"]) / 2)
    # Micro-batches of 16 instead of 32 cost about the same per token (weights dominate)
    assert float(two["tpot_s"]) == pytest.approx(float(one["tpot_s"]), rel=0.15)


def test_tensor_parallel_cuts_weight_time_and_adds_communication():
    one = _run("llama_3_1_70b", tp=2.0, batch=1.0)
    eight = _run("llama_3_1_70b", tp=8.0, batch=1.0)
    assert float(eight["decode_memory_s"]) < float(one["decode_memory_s"]) / 3
    assert float(eight["decode_comm_s"]) > 0


def test_memory_parts_add_up_and_kv_grows_linearly():
    m = load_model("llama_2_7b")
    mem = memory_per_device(H100, m, batch=np.array([1.0, 2.0, 4.0]), prompt=1000.0, generate=24.0,
                            tp=1.0, pp=1.0, w_bytes=2.0, kv_bytes=2.0, stream_bytes=2.0)
    # Llama-2-7B bf16: 32 layers x 2 x 4096 x 2 bytes = 524,288 B per token (closed form)
    assert mem["kv_cache_bytes"] == pytest.approx(np.array([1, 2, 4]) * 1024 * 524_288)
    assert mem["weights_bytes"] == pytest.approx(m.n_params * 2.0)


def test_sliding_window_caps_kv_cache():
    """gpt-oss-120b: half its layers keep only 128 tokens, so its KV grows at half the
    rate of a model with the same geometry and full attention everywhere."""
    m = load_model("gpt_oss_120b")
    mem = memory_per_device(H100, m, batch=1.0, prompt=np.array([10_000.0, 20_000.0]), generate=0.0,
                            tp=1.0, pp=1.0, w_bytes=0.5, kv_bytes=2.0, stream_bytes=2.0)
    per_token_full_layer = m.kv_elements_per_token_per_layer * 2.0
    growth = mem["kv_cache_bytes"][1] - mem["kv_cache_bytes"][0]
    assert growth == pytest.approx(10_000 * per_token_full_layer * (m.n_layers - m.n_sliding_layers))


@pytest.mark.parametrize("model", ["llama_3_1_70b", "mixtral_8x7b"])
def test_operation_classes_add_up_to_the_step(model):
    """Conservation: matmul + attention + elementwise + communication time = TPOT (and the
    same for prefill = TTFT), each class counting its kernels' launch overhead."""
    r = _run(model, tp=8.0, pp=1.0, batch=np.array([1.0, 64.0]))
    dec = r["decode_matmul_s"] + r["decode_attention_s"] + r["decode_elementwise_s"] + r["decode_comm_s"]
    pre = r["prefill_matmul_s"] + r["prefill_attention_s"] + r["prefill_elementwise_s"] + r["prefill_comm_s"]
    assert np.allclose(dec, r["tpot_s"], rtol=1e-12)
    assert np.allclose(pre, r["ttft_s"], rtol=1e-12)


def test_expert_parallelism_and_imbalance():
    """EP under tensor-parallel attention moves no tokens beyond the all-reduce (every rank holds
    them); with attention data parallelism the tokens of other replicas are dispatched and
    combined (two all-to-alls); a busier rank (imbalance > 1) only ever slows the step; a dense
    model refuses ep > 1 as a flagged point (as predict.serving does) and ignores imbalance."""
    from workbench import predict
    ds = predict.inference(hardware="h200_sxm", model="mixtral_8x7b", tp=8, ep=[1, 8], imbalance=[1.0, 2.0],
                           batch=64, weights="fp8")
    assert float(ds.decode_comm_s.sel(ep=8, imbalance=1.0)) == float(ds.decode_comm_s.sel(ep=1, imbalance=1.0))
    kw = dict(hardware="h200_sxm", model="mixtral_8x7b", ep=8, concurrency=64, prompt=1024, generate=256,
              weights="fp8", framework="none")
    adp = predict.serving(tp=1, attention_dp=8, **kw)
    tpa = predict.serving(tp=8, attention_dp=1, **kw)
    # TP1 replicas have no all-reduce: their communication is the all-to-alls alone; TP8 its all-reduces alone,
    # the same with or without expert parallelism
    assert float(adp.decode_comm_s) > 0.0 and float(tpa.decode_comm_s) > 0.0
    assert float(tpa.decode_comm_s) == float(predict.serving(tp=8, attention_dp=1, **{**kw, "ep": 1}).decode_comm_s)
    assert float(ds.tpot_s.sel(ep=8, imbalance=2.0)) > float(ds.tpot_s.sel(ep=8, imbalance=1.0))
    dense = predict.inference(hardware="h200_sxm", model="llama_3_1_70b", tp=8, ep=[1, 8], batch=64, weights="fp8")
    assert bool(dense.fits.sel(ep=1)) and not bool(dense.fits.sel(ep=8))  # a dense model has no experts (as serving)
    assert "ep=8 is not allowed for llama_3_1_70b" in str(dense.reason.sel(ep=8).values)


def test_a_decode_step_dominated_by_its_overhead_says_so():
    """bound names the largest of the decode step's compute, memory, communication and launch
    overhead: Qwen3-30B-A3B at batch 1 on one MI300X (analytical kernels, one launch per
    kernel) spends more on launches than on reading its 3B active parameters."""
    from workbench import predict
    ds = predict.inference(hardware="mi300x", model="qwen3_30b_a3b", tp=1, batch=1, prompt=512, weights="fp8")
    assert float(ds.decode_overhead_s) > max(float(ds.decode_compute_s), float(ds.decode_memory_s),
                                             float(ds.decode_comm_s))
    assert str(ds.bound.values) == "overhead"
    big = predict.inference(hardware="mi300x", model="qwen3_30b_a3b", tp=1, batch=256, prompt=512, weights="fp8")
    assert str(big.bound.values) in ("compute", "memory")


def test_prefill_work_per_device_is_a_stage_s_share():
    """Each of pp pipeline stages computes 1/pp of the layers: the prefill FLOPs and bytes
    per device divide by tp x pp (Llama-3.1-8B, 8 x 2,048-token prompts), as the decode
    step's do."""
    from workbench import predict
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=[1, 8], pp=[1, 8], batch=8, weights="bf16",
                           prompt=2048, generate=16)
    one = ds.sel(tp=1, pp=1)
    for tp, pp in ((1, 8), (8, 1), (8, 8)):
        p = ds.sel(tp=tp, pp=pp)
        assert float(p.prefill_flops_per_device) * tp * pp == pytest.approx(float(one.prefill_flops_per_device),
                                                                           rel=0.02), (tp, pp)
        # bytes: a stage moves its layers' share; TP ranks each read the replicated activations
        assert float(p.prefill_bytes_per_device) * pp == pytest.approx(
            float(ds.sel(tp=tp, pp=1).prefill_bytes_per_device), rel=0.02), (tp, pp)
