"""Hybrid linear attention (Gated DeltaNet: Qwen3-Next, Qwen3.5): the layer kind counts its
parameters in closed form and matches the published totals, its state is fixed per sequence
while the softmax layers' KV cache grows, its kernel's FLOPs and bytes are the chunked
gated delta rule's, decode time grows with context only through the softmax layers, and the
measured Qwen3.5 serving runs (an unseen family for every fitted constant) come out within
the stated tolerance. GPU and wafer training split a hybrid's layers by kind."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.primitives.attention import linear_attention
from workbench.primitives.kernel_fits import LINEAR_CHUNK
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.inference import kv_bytes_per_sequence


def test_parameters_in_closed_form_and_published():
    """Qwen3.5-397B-A17B (config.json): 15 full-attention layers (q + gate, k, v, o) and 45
    Gated DeltaNet layers (qkvz, ba, out); the card's 397B total, 17B activated."""
    m = load_model("qwen3_5_397b_a17b")
    assert (m.n_layers, m.n_linear_layers, m.n_full_attention_layers) == (60, 45, 15)
    D = 4096
    full = D * 32 * 256 * 2 + 2 * D * 2 * 256 + 32 * 256 * D
    qkv = 2 * 16 * 128 + 64 * 128
    linear = D * (qkv + 64 * 128) + D * 2 * 64 + 64 * 128 * D  # the convolution's taps not counted
    assert m.attn_params == 15 * full + 45 * linear
    assert m.n_params == pytest.approx(397e9, rel=0.01) and m.n_params_active == pytest.approx(17e9, rel=0.03)
    # the one table of operations carries the same weights, each matmul over its share of layers
    mm = ops.attention_matmuls(m)
    assert sum(x.params for x in mm) * m.n_layers == pytest.approx(m.attn_params, rel=1e-12)


def test_state_is_fixed_and_only_softmax_layers_grow():
    m = load_model("qwen3_5_397b_a17b")
    state = 45 * (64 * 128 * 128 * 4.0 + (2 * 16 * 128 + 64 * 128) * 3 * 2.0)
    assert m.linear_state_bytes_per_sequence == state
    a, b = (kv_bytes_per_sequence(m, tokens=t, tp=1.0, pp=1.0, kv_bytes=2.0) for t in (1000.0, 9000.0))
    assert b - a == pytest.approx(8000 * 15 * 2 * 256 * 2 * 2.0)  # K and V of 2 KV heads in 15 layers
    assert a == pytest.approx(1000 * 15 * 2 * 256 * 2 * 2.0 + state)


def test_kernel_flops_and_bytes():
    hw = numbers("h200_sxm")
    dec = linear_attention(hw=hw, tokens=8.0, sequences=8.0, heads=64.0, key_dim=128.0, value_dim=128.0,
                           qkv_width=8192.0, conv_kernel=4.0)
    assert dec["flops"] == pytest.approx(2 * 8 * 64 * (1 * 384 + 2 * 128 * 128))
    state = 8 * 64 * 128 * 128 * 4.0
    assert dec["bytes"] == pytest.approx(8 * (8192 + 2 * 64 * 128 + 128) * 2 + 2 * (state + 8 * 8192 * 3 * 2))
    assert dec["memory_s"] > dec["compute_s"]  # decode reads and rewrites the state: memory-bound
    pre = linear_attention(hw=hw, tokens=8192.0, sequences=1.0, heads=64.0, key_dim=128.0, value_dim=128.0,
                           qkv_width=8192.0, conv_kernel=4.0)
    assert pre["flops"] == pytest.approx(2 * 8192 * 64 * (LINEAR_CHUNK * 384 + 2 * 128 * 128))


def test_decode_grows_with_context_only_through_softmax_layers():
    """TPOT at one request: a longer context adds the softmax layers' KV reads only, so
    the hybrid's increase is far below a same-size model whose every layer attends."""
    kw = dict(hardware="h200_sxm", tp=1, concurrency=1, generate=256, weights="fp8", framework="trtllm")
    hyb = predict.serving(model="qwen3_5_27b", prompt=[1024, 32768], **kw).tpot_s.values
    dense = predict.serving(model="qwen3_32b", prompt=[1024, 32768], **kw).tpot_s.values
    assert 0 < hyb[1] - hyb[0] < 0.5 * (dense[1] - dense[0])


def test_wafer_training_of_a_hybrid_splits_its_layers_by_kind():
    """Weight-streaming training of a hybrid (Qwen3.5-27B) on CS-3: a layer's forward cycles
    are the softmax share of an all-softmax layer's attention plus the linear layers' chunked
    rule (wafer_layers.prefill_layer, the inference path: forward_s is its cycles and the LM
    head's per micro-batch, exactly); at 32k tokens the hybrid's layer costs less per token
    than the all-softmax one, and the saving per token grows with the sequence (the chunked
    rule is linear in it, softmax quadratic). The wafer keeps each linear layer's chunk states for the
    backward (heads x d_k x d_v x 4 bytes per 64 tokens: 48 x 128 x 128 x 4 / 64 = 49,152
    bytes per token for Qwen3.5-27B), so one sequence needs more SRAM than with its linear
    layers all softmax, as the recomputed block holds them."""
    from workbench.backends import numbers
    from workbench.primitives.mesh import mesh_gemm
    from workbench.workloads.wafer_layers import prefill_layer
    from workbench.workloads.wafer_training import checkpoint_bytes_per_sequence, chunk_state_bytes_per_token
    w = numbers("cs3")
    hyb = load_model("qwen3_5_27b")
    soft = dataclasses.replace(hyb, n_linear_layers=0)
    r = predict.training(hardware="cs3", devices=4, model="qwen3_5_27b", seq_len=4096, global_batch=64)
    assert bool(r.fits) and str(r.reason.values) == "" and 0.0 < float(r.mfu) < 1.0
    P, micro = float(r.pe_grid), float(r.micro_batch)
    layer = float(prefill_layer(w, hyb, P=P, batch=micro, prompt=4096.0)["cycles"])
    head = float(mesh_gemm(w, P=P, m=micro * 4096.0, k=hyb.d_model, n=hyb.vocab_size)["cycles"])
    assert float(r.forward_s) == pytest.approx(float(r.n_micro_batches) * (hyb.n_layers * layer + head) / w.clock_hz,
                                               rel=1e-9)
    per_token = {}
    for m in (hyb, soft):
        for seq in (4096.0, 32768.0):
            per_token[m.n_linear_layers, seq] = float(prefill_layer(w, m, P=P, batch=1.0, prompt=seq)["cycles"]) / seq
    assert per_token[48, 32768.0] < per_token[0, 32768.0]
    saving = {seq: per_token[0, seq] - per_token[48, seq] for seq in (4096.0, 32768.0)}
    assert saving[32768.0] > 3.0 * saving[4096.0] > 0.0  # softmax work per token grows with the sequence
    assert chunk_state_bytes_per_token(hyb, 4096.0) == pytest.approx(48 * 128 * 128 * 4 / 64)
    assert chunk_state_bytes_per_token(soft, 4096.0) == 0.0
    assert checkpoint_bytes_per_sequence(hyb, seq_len=4096.0, recompute="full") == pytest.approx(
        checkpoint_bytes_per_sequence(soft, seq_len=4096.0, recompute="full") + 4096.0 * 48 * 128 * 128 * 4 / 64)


def test_gpu_training_of_a_hybrid_splits_its_layers_by_kind():
    """GPU training of a hybrid (Qwen3.5-27B: 48 Gated DeltaNet and 16 softmax layers of 64):
    its attention FLOPs are the softmax layers' share of a full model's plus the linear
    layers' chunked rule (workloads/layers.linear_layers, the inference primitive), exactly;
    far fewer than the same layers all softmax at 32k tokens, and growing with the sequence
    more slowly (the chunked rule is linear in it, softmax quadratic); the backward of the
    linear part is LINEAR_BACKWARD (FlashAttention's 2.5) times its forward."""
    from workbench.backends import backend_for
    from workbench.specs import load_hardware
    from workbench.workloads.layers import linear_layers
    from workbench.workloads.training import LINEAR_BACKWARD, layer_forward
    spec = load_hardware("h100_sxm")
    hw = backend_for(spec).numbers(spec, {})
    hyb = load_model("qwen3_5_27b")
    soft = dataclasses.replace(hyb, n_linear_layers=0)  # every layer softmax
    assert (hyb.n_linear_layers, hyb.n_full_attention_layers) == (48, 16)
    kw = dict(tp=8, cp=1, math="bf16", moe=False)
    for seq in (4096, 32768):
        f_h, f_s = (layer_forward(hw, m, tokens=seq, seq=seq, **kw) for m in (hyb, soft))
        lin = linear_layers(hw, hyb, tokens=seq, sequences=1.0, tp=8, math="bf16", a_bytes=2.0)
        assert f_h["attention_flops"] == pytest.approx(16 / 64 * f_s["attention_flops"] + lin["flops"], rel=1e-12)
        assert f_h["attention_backward_s"] - 16 / 64 * f_s["attention_backward_s"] == pytest.approx(
            LINEAR_BACKWARD * lin["time_s"] + lin["overhead_s"], rel=1e-9)
    assert LINEAR_BACKWARD == 2.5
    big = layer_forward(hw, hyb, tokens=32768, seq=32768, **kw)["attention_flops"]
    assert big < 0.5 * layer_forward(hw, soft, tokens=32768, seq=32768, **kw)["attention_flops"]
    # tp 4: training holds whole KV heads a rank (4 of them; Megatron-Core's query groups)
    t = predict.training(hardware="h100_sxm", devices=64, model="qwen3_5_27b", tp=4, seq_len=4096,
                         global_batch=256, micro_batch=1)
    assert bool(t.fits) and 0.0 < float(t.mfu) < 1.0
    # memory: every layer's activations, and each linear layer's chunk states (48 value heads
    # x 128 x 128 x 4 bytes per 64 tokens, split over TP) unless fully recomputed
    from workbench.workloads.training import activation_bytes_per_token_layer
    per_token = activation_bytes_per_token_layer(hyb, tp=4, cp=1, recompute="none", seq=4096) \
        + 48 / 64 * (48 * 128 * 128 * 4 / 64) / 4
    logits = 4096 * hyb.vocab_size / 4 * 4.0
    assert float(t.activations_per_device_bytes) == pytest.approx(per_token * 4096 * 64 + logits, rel=1e-12)


def test_measured_qwen3_5_serving_runs():
    """The Qwen3.5-397B-A17B rows of the serving benchmarks (SGLang on B200 and H200): TPOT
    median |error| 17% before any fitted constant saw them, 11% with the constants refitted
    on every answered row (as committed); tolerance 25%."""
    from workbench.calibrate import serving_rows
    rows = serving_rows.load()
    rows = rows[rows.model_path.str.contains("Qwen3.5")]
    res = serving_rows.predict_rows(rows).dropna(subset=["tpot_s"])
    assert len(res) >= 70
    assert np.median(np.abs(res.tpot_err)) <= 0.25


def test_measured_gdn_kernels_under_a_framework():
    """Under TensorRT-LLM on H100 a Qwen3.5 layer's GDN mixing comes from the measured GDN
    kernels (kernel_fits.gdn_roofline x a fitted efficiency): never below its roofline; one
    decode token per sequence reads the state, so its time grows with the sequences, not
    with the context; framework "none" keeps the analytical kernel."""
    from workbench.backends import numbers
    hw = numbers("h100_sxm", framework="trtllm")
    shape = dict(heads=32.0, key_dim=128.0, value_dim=128.0, qkv_width=2 * 16 * 128 + 32 * 128, conv_kernel=4.0)
    dec = linear_attention(hw=hw, tokens=np.array([1.0, 8.0, 64.0]), sequences=np.array([1.0, 8.0, 64.0]), **shape)
    pre = linear_attention(hw=hw, tokens=8192.0, sequences=1.0, **shape)
    none = linear_attention(hw=numbers("h100_sxm", framework="none"), tokens=8192.0, sequences=1.0, **shape)
    roof = np.maximum(pre["flops"] / hw.peak("bf16"), pre["bytes"] / hw.hbm_bandwidth_bytes_per_s)
    assert float(pre["time_s"]) >= roof and float(pre["time_s"]) != float(none["time_s"])
    assert (np.diff(dec["time_s"]) > 0).all() and dec["time_s"][0] > 1e-6
