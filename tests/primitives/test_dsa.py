"""DeepSeek Sparse Attention's whole attention block (kernel_fits.dsa_module_roofline,
primitives/dsa.py, layers.dsa_block): the closed-form FLOPs and bytes of the block on one
DeepSeek-V3.2 shape, the indexer's term growing linearly with the context beyond the top-k,
the knots of a surface read back as their coordinates, and the layers costing the block
from the framework's fitted surface (projections included, so not counted twice) where it
has one and composing it elsewhere."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.calibrate.kernel_features import dsa_features
from workbench.primitives.dsa import dsa_variant, fitted_dsa
from workbench.primitives.kernel_fits import DSA_INDEX_KEY_BYTES, dsa_module_roofline
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.layers import dsa_block, layer_decode, layer_gemms, layer_iteration, layer_prefill

# DeepSeek-V3.2 config.json (workbench/specs/models/deepseek_v3_2.yaml): hidden_size 7168,
# q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128 (head_dim
# 192 - rope 64), v_head_dim 128, index_n_heads 64, index_head_dim 128, index_topk 2048
V32 = dict(hidden=7168.0, q_rank=1536.0, kv_rank=512.0, rope=64.0, nope=128.0, v_dim=128.0, index_heads=64.0,
           index_dim=128.0, topk=2048.0)


def test_dims_are_the_model_specs():
    m = load_model("deepseek_v3_2")
    assert (m.d_model, m.q_lora_rank, m.kv_lora_rank, m.qk_rope_head_dim, m.head_dim - m.qk_rope_head_dim, m.v_dim,
            m.index_n_heads, m.index_head_dim, m.index_topk) == tuple(V32.values())


def test_roofline_flops_and_bytes_in_closed_form():
    """One decode token after 4095 cached ones (4096 keys), 16 heads on the GPU (TP 8),
    FP8 weights and cache, 16-bit activations."""
    # weights: replicated 7168 (1536 + 512 + 64) + 1536 x 64 x 128 + 7168 (128 + 64) = 29,097,984;
    # per head 1536 (128 + 64) + 512 (128 + 128) + 128 x 7168 = 1,343,488, x 16 = 21,495,808
    weights = 29_097_984 + 21_495_808
    proj_f, proj_b = 2 * weights, weights * 1 + 2 * 7168 * 2
    idx_f = 2 * 64 * 128 * 4096  # every visible key scored
    idx_b = 4096 * 128 * (1 + 4 / 128) + 64 * 128 * 2  # FP8 keys with their scales, the query
    att_f = 2 * 16 * (2 * 512 + 64) * 2048  # the top-k keys only
    att_b = 2048 * (512 + 64) * 1 + 16 * (2 * 512 + 64) * 2
    shape = dict(batch=1.0, new=1.0, prefix=4095.0, heads=16.0, w_bytes=1.0, kv_bytes=1.0, **V32)
    flops, coords = dsa_module_roofline(peak=1.0, index_peak=1.0, attention_peak=1.0, bandwidth=np.inf, **shape)
    nbytes, _ = dsa_module_roofline(peak=np.inf, index_peak=np.inf, attention_peak=np.inf, bandwidth=1.0, **shape)
    assert DSA_INDEX_KEY_BYTES == 1 + 4 / 128
    assert flops == pytest.approx(proj_f + idx_f + att_f, rel=1e-12)
    assert nbytes == pytest.approx(proj_b + idx_b + att_b, rel=1e-12)
    assert coords == {"sequences": 1.0, "new": 1.0, "keys": 4096.0, "heads": 16.0}
    # the roofline sums the parts' bounds (they run one after another)
    t, _ = dsa_module_roofline(peak=2e15, index_peak=2e15, attention_peak=1e15, bandwidth=4.8e12, **shape)
    parts = [max(proj_f / 2e15, proj_b / 4.8e12), max(idx_f / 2e15, idx_b / 4.8e12), max(att_f / 1e15, att_b / 4.8e12)]
    assert t == pytest.approx(sum(parts))


def test_decode_grows_linearly_with_context_beyond_the_topk():
    """At a fixed top-k the attention stops growing at 2048 keys; the indexer keeps scoring
    (and reading) every key, so the block's FLOPs, bytes and roofline are affine in the
    context beyond it, and the time the surfaces give grows with it."""
    ctx = np.array([4096.0, 8192.0, 12288.0, 16384.0, 20480.0])
    shape = dict(batch=64.0, new=1.0, prefix=ctx, heads=16.0, w_bytes=1.0, kv_bytes=1.0, **V32)
    flops, _ = dsa_module_roofline(peak=1.0, index_peak=1.0, attention_peak=1.0, bandwidth=np.inf, **shape)
    nbytes, _ = dsa_module_roofline(peak=np.inf, index_peak=np.inf, attention_peak=np.inf, bandwidth=1.0, **shape)
    roof, _ = dsa_module_roofline(peak=2e15, index_peak=2e15, attention_peak=1e15, bandwidth=4.8e12, **shape)
    for y in (flops, nbytes, roof):
        assert np.allclose(np.diff(y, 2), 0.0, atol=1e-9 * y.max()) and np.all(np.diff(y) > 0)
    assert np.diff(flops)[0] == pytest.approx(64 * 4096 * 2 * 64 * 128)  # the indexer's term alone
    below = dsa_module_roofline(peak=1.0, index_peak=1.0, attention_peak=1.0, bandwidth=np.inf,
                                **dict(shape, prefix=np.array([1023.0, 2047.0])))[0]
    assert np.diff(below)[0] > np.diff(flops)[0] / 4  # below the top-k the attention grows too
    hw = dataclasses.replace(numbers("h200_sxm", framework="trtllm"), measured_moe_mla=True)
    t = fitted_dsa(hw=hw, phase="decode", batch=64.0, new=1.0, prefix=ctx, heads=16.0,
                   dims={**V32}, math="fp8", w_bytes=1.0, kv_bytes=2.0)["time_s"]
    assert np.all(np.diff(t) > 0)


def test_knots_read_back_as_their_coordinates(knots_read_back):
    """knot_frame's rows, through the features the fit evaluates, sit on the knots."""
    knots_read_back("dsa_module", dsa_features, "prefill/fp8_block/fp8")


def test_variants_of_the_layer_formats():
    assert dsa_variant("decode", "fp8", 1.0, 1.0) == "decode/fp8_block/fp8"
    assert dsa_variant("prefill", "bf16", 2.0, 2.0) == "prefill/bf16/bf16"
    assert dsa_variant("decode", "fp4", 0.5, 1.0) == "decode/fp4/fp8"
    assert dsa_variant("decode", "bf16", 1.0, 1.0) is None  # 16-bit math over FP8 weights: no table


KW = dict(tp=8.0, math="fp8", w_bytes=1.0, a_bytes=1.0, kv_bytes=1.0, moe=True)


def _hw(gpu="h200_sxm", framework="vllm", measured=True):
    return dataclasses.replace(numbers(gpu, framework=framework), measured_moe_mla=measured)


def test_layers_cost_the_block_from_the_surface_once():
    """With the framework's tables the decode layer's attention is the block (projections
    inside), and its matmuls are the MLP's alone; without tables the block is composed."""
    model = load_model("deepseek_v3_2")
    hw = _hw()
    b, ctx = np.array([1.0, 64.0, 512.0]), 8192.0
    block = dsa_block(hw, model, phase="decode", batch=b, new=1.0, prefix=ctx, tp=8.0, math="fp8", w_bytes=1.0,
                      kv_bytes=1.0)
    assert block is not None
    layer = layer_decode(hw, model, batch=b, context=ctx, **KW)
    assert np.allclose(layer["attention_s"], block["time_s"])
    mlp = layer_gemms(hw, model, tokens=b, tp=8.0, math="fp8", w_bytes=1.0, a_bytes=1.0, moe=True,
                      matmuls=ops.mlp_matmuls(model, moe=True))
    assert np.allclose(layer["matmul_s"], mlp["time_s"] + mlp["overhead_s"])
    bare = numbers("h200_sxm", framework="none")
    assert dsa_block(bare, model, phase="decode", batch=b, new=1.0, prefix=ctx, tp=8.0, math="fp8", w_bytes=1.0,
                     kv_bytes=1.0) is None
    composed = layer_decode(bare, model, batch=b, context=ctx, **KW)
    all_mm = layer_gemms(bare, model, tokens=b, tp=8.0, math="fp8", w_bytes=1.0, a_bytes=1.0, moe=True)
    assert np.allclose(composed["matmul_s"], all_mm["time_s"] + all_mm["overhead_s"])
    assert np.all(layer["time_s"] != composed["time_s"])
    # prefill: the same exchange
    pre = layer_prefill(hw, model, batch=2.0, prompt=4096.0, **KW)
    blk = dsa_block(hw, model, phase="prefill", batch=2.0, new=4096.0, prefix=0.0, tp=8.0, math="fp8", w_bytes=1.0,
                    kv_bytes=1.0)
    assert pre["attention_s"] == pytest.approx(float(blk["time_s"]))


def test_iteration_counts_each_token_projection_once():
    """A mixed iteration: each phase's block holds its tokens' projections, so no attention
    projection GEMM is left; a phase without tokens costs nothing."""
    model = load_model("deepseek_v3_2")
    hw = _hw()
    kw = dict(context=4096.0, prompt=2048.0, attention_dp=1.0, **KW)
    both = layer_iteration(hw, model, decode_batch=32.0, prefill_tokens=1024.0, **kw)
    dec = dsa_block(hw, model, phase="decode", batch=32.0, new=1.0, prefix=4096.0, tp=8.0, math="fp8", w_bytes=1.0,
                    kv_bytes=1.0)
    pre = dsa_block(hw, model, phase="prefill", batch=0.5, new=2048.0, prefix=0.0, tp=8.0, math="fp8", w_bytes=1.0,
                    kv_bytes=1.0)
    assert both["attention_s"] == pytest.approx(float(dec["time_s"] + pre["time_s"]))
    mlp = layer_gemms(hw, model, tokens=1056.0, tp=8.0, math="fp8", w_bytes=1.0, a_bytes=1.0, moe=True,
                      matmuls=ops.mlp_matmuls(model, moe=True))
    assert both["matmul_s"] == pytest.approx(float(mlp["time_s"] + mlp["overhead_s"]))
    only_decode = layer_iteration(hw, model, decode_batch=32.0, prefill_tokens=0.0, **kw)
    assert only_decode["attention_s"] == pytest.approx(float(dec["time_s"]))


def test_chips_without_the_surface_keep_the_composition():
    model = load_model("deepseek_v3_2")
    for hw in (_hw("a100_sxm", "trtllm"), numbers("h200_sxm", framework="none")):
        assert dsa_block(hw, model, phase="decode", batch=8.0, new=1.0, prefix=4096.0, tp=8.0, math="fp8",
                         w_bytes=1.0, kv_bytes=1.0) is None
    dense = load_model("deepseek_v3")  # MLA without the indexer
    assert dsa_block(_hw(), dense, phase="decode", batch=8.0, new=1.0, prefix=4096.0, tp=8.0, math="fp8",
                     w_bytes=1.0, kv_bytes=1.0) is None
    no_dsa = dataclasses.replace(_hw(), kernels=dataclasses.replace(
        _hw().kernels, grids={k: g for k, g in _hw().kernels.grids.items() if k[0] != "dsa_module"}))
    assert dsa_block(no_dsa, model, phase="decode", batch=8.0, new=1.0, prefix=4096.0, tp=8.0, math="fp8",
                     w_bytes=1.0, kv_bytes=1.0) is None
    composed = layer_decode(no_dsa, model, batch=8.0, context=4096.0, **KW)
    assert np.isfinite(composed["time_s"])
