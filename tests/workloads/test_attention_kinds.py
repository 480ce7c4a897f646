"""Softmax layers of two kinds: full and sliding-window layers, each with its own head shapes
(MiMo-V2-Flash, Gemma 4) and windows that bound what prefill and decode attend.

Closed forms from the published config.json files (as aiconfigurator-core 0.12.0 ships them):
- MiMo-V2-Flash: 48 layers, 39 sliding (hybrid_layer_pattern), window 128, 64 query heads,
  full layers 4 KV heads, sliding layers 8, head_dim 192, v_head_dim 128, hidden 4096.
- Gemma 4 26B A4B: 30 layers, 25 sliding, window 1024, 16 query heads; global layers 2 KV
  heads x 512 with values from the keys' projection (attention_k_eq_v), sliding 8 x 256.
- FlashAttention FLOPs: 2·B·H·(h + h_v) per attended (query, key) pair (Dao et al.).
"""
import numpy as np
import pytest

from workbench.backends import numbers
from workbench.primitives.attention import attention_decode, attention_prefill
from workbench.primitives.kernel_fits import ATTENTION_TILE
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.inference import kv_bytes_per_sequence
from workbench.workloads.layers import decode_attention, prefill_attention

H100 = numbers("h100_sxm")  # no kernel tables: the analytical flash kernels


def test_windowed_prefill_counts_the_band_tiles():
    kw = dict(hw=H100, batch=2.0, n_heads=8.0, head_dim=64.0, n_kv_heads=1.0, act_bytes=2.0, kv_bytes=2.0)
    S, w = 8192.0, 128.0
    band = attention_prefill(seq_len=S, window=w, **kw)
    full = attention_prefill(seq_len=S, **kw)
    assert band["flops"] == pytest.approx(2 * 2 * 8 * (64 + 64) * S * (w + ATTENTION_TILE), rel=1e-12)
    assert full["flops"] == pytest.approx(2 * 2 * 8 * (64 + 64) * S * S / 2, rel=1e-12)
    assert band["bytes"] == full["bytes"]  # every new key is still read once
    # a prompt shorter than the window: the window changes nothing
    short = attention_prefill(seq_len=100.0, window=w, **kw)
    assert short["flops"] == attention_prefill(seq_len=100.0, **kw)["flops"]
    # cached keys beyond the window are not read
    chunk = attention_prefill(seq_len=512.0, context=10_000.0, window=w, **kw)
    assert chunk["bytes"] == pytest.approx(2 * (512 * 8 * 128 * 2 + (512 + w) * 1 * 128 * 2), rel=1e-12)


def test_windowed_decode_is_constant_beyond_the_window():
    kw = dict(hw=H100, batch=16.0, n_heads=8.0, head_dim=128.0, n_kv_heads=1.0, window=128.0)
    t = [attention_decode(context=c, **kw)["time_s"] for c in (128.0, 1024.0, 100_000.0)]
    assert t[0] == pytest.approx(t[1], rel=1e-12) == pytest.approx(t[2], rel=1e-12)
    assert attention_decode(context=64.0, **kw)["bytes"] == pytest.approx(16 * 64 * 256 * 2.0)


def test_mimo_projections_per_kind():
    m = load_model("mimo_v2_flash")
    mats = {mm.name: mm for mm in ops.attention_matmuls(m)}
    assert mats["qkv"].n == 64 * 192 + 4 * 192 + 4 * 128 and mats["qkv"].share == pytest.approx(9 / 48)
    assert mats["qkv_sliding"].n == 64 * 192 + 8 * 192 + 8 * 128 and mats["qkv_sliding"].share == pytest.approx(39 / 48)
    assert mats["attn_out"].k == mats["attn_out_sliding"].k == 64 * 128
    assert sum(mm.params for mm in mats.values()) * 48 == pytest.approx(m.attn_params, rel=1e-12)


def test_gemma4_global_layers_have_no_value_projection_but_cache_values():
    m = load_model("gemma_4_26b_a4b")
    mats = {mm.name: mm for mm in ops.attention_matmuls(m)}
    assert mats["qkv"].n == 16 * 512 + 2 * 512  # Q and K only: V is K's projection
    assert mats["qkv_sliding"].n == 16 * 256 + 2 * 8 * 256
    ctx = 50_000.0
    per_token = 5 * 2 * (512 + 512) * ctx + 25 * 8 * (256 + 256) * 1024  # global + windowed sliding
    assert m.kv_cache_bytes(context=ctx, dtype="bf16") == pytest.approx(per_token * 2.0, rel=1e-12)
    # tp=4: sliding layers split their 8 KV heads 4 ways, the 2 global heads are replicated to 1 a rank
    got = kv_bytes_per_sequence(m, tokens=ctx, tp=4.0, pp=1.0, kv_bytes=2.0)
    assert got == pytest.approx(2.0 * (5 * 1 * 1024 * ctx + 25 * 2 * 512 * 1024), rel=1e-12)


def test_layer_attention_sums_its_kinds():
    m = load_model("mimo_v2_flash")
    kw = dict(tp=1.0, math="bf16")
    dec = decode_attention(H100, m, batch=8.0, context=32_768.0, kv_bytes=2.0, **kw)
    full = attention_decode(hw=H100, batch=8.0, context=32_768.0, n_heads=64.0, head_dim=192.0, v_head_dim=128.0,
                            n_kv_heads=4.0)
    band = attention_decode(hw=H100, batch=8.0, context=32_768.0, n_heads=64.0, head_dim=192.0, v_head_dim=128.0,
                            n_kv_heads=8.0, window=128.0)
    assert dec["time_s"] == pytest.approx((9 * full["time_s"] + 39 * band["time_s"]) / 48, rel=1e-12)
    # prefill: the sliding layers' band makes long prompts far cheaper than full attention everywhere
    pre = prefill_attention(H100, m, batch=1.0, prompt=32_768.0, a_bytes=2.0, kv_bytes=2.0, **kw)
    dense = attention_prefill(hw=H100, batch=1.0, seq_len=32_768.0, n_heads=64.0, head_dim=192.0, v_head_dim=128.0,
                              n_kv_heads=4.0)
    assert pre["flops"] < 0.25 * dense["flops"]
    assert np.isfinite(pre["time_s"]) and pre["time_s"] > 0
