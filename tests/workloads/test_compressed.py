"""DeepSeek-V4's compressed attention (workloads/compressed.py, ModelSpec's CSA / HCA fields):
its parameters, cache and per-token work against closed forms written from the technical
report and transformers' modeling_deepseek_v4.py, the pair count against a brute-force
enumeration of the masks, and the report's headline ratios against DeepSeek-V3.2."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.compressed import prefill_pairs

FLASH, PRO = load_model("deepseek_v4_flash"), load_model("deepseek_v4_pro")


def test_flash_shape_from_its_config():
    # config.json: 43 layers, compress_ratios [0, 0, 4, 128, 4, ..., 4] (then the MTP layer's 0)
    m = FLASH
    assert (m.n_layers, m.n_csa_layers, m.n_hca_layers, m.csa_ratio, m.hca_ratio) == (43, 21, 20, 4, 128)
    assert (m.sliding_window, m.n_sliding_layers, m.n_kv_heads, m.head_dim, m.key_is_value) == (128, 43, 1, 512, True)
    assert (m.o_groups, m.o_lora_rank, m.q_lora_rank, m.hc_mult, m.index_topk) == (8, 1024, 1024, 4, 512)
    assert PRO.index_topk == 1024 and (PRO.n_csa_layers, PRO.n_hca_layers) == (30, 31)  # ratios [128, 128, 4, 128, ...]


def test_active_parameters_match_the_card():
    # model cards: V4-Flash 13B active, V4-Pro 49B active (the lm_head counted once, as they do)
    for m, active in ((FLASH, 13e9), (PRO, 49e9)):
        assert (m.n_params_active - m.vocab_size * m.d_model) / active == pytest.approx(1.0, abs=0.03)


def test_attention_weights_closed_form():
    # modeling_deepseek_v4.py: q_a D x r_q, q_b r_q x H h, kv_proj D x h, o_a H h x r_o (block-diagonal
    # over g groups), o_b g r_o x D; CSA compressor D x 4h, indexer q_b r_q x 64 x 128, its compressor
    # D x 4 x 128, weights_proj D x 64; HCA compressor D x 2h; mHC fn (2 + 4) 4 x 4 D twice per layer
    m, D, h, H = FLASH, 4096, 512, 64
    layer = D * 1024 + 1024 * H * h + D * h + H * h * 1024 + 8 * 1024 * D
    csa = D * 4 * h + 1024 * 64 * 128 + D * 4 * 128 + D * 64
    assert m.softmax_attn_params == 43 * layer
    assert m.compressor_params == 21 * csa + 20 * D * 2 * h
    assert m.hyper_connection_params == 43 * 2 * 24 * 4 * D
    table = {mm.name: mm for mm in ops.attention_matmuls(m)}
    assert (table["attn_out_group"].k, table["attn_out_group"].n, table["attn_out_group"].split) == (H * h // 8, 8 * 1024, "n")
    assert table["kv"].split == "none" and table["compress_kv"].share == pytest.approx(21 / 43)


def test_cache_closed_form():
    # every layer: its last 128 tokens of one 512-wide vector; CSA: one 512-wide entry and one
    # 128-wide index key per 4 tokens; HCA: one 512-wide entry per 128 tokens
    c = np.array([64.0, 128.0, 8192.0, 2.0 ** 20])
    expect = 43 * np.minimum(c, 128) * 512 + 21 * c / 4 * (512 + 128) + 20 * c / 128 * 512
    assert np.allclose(FLASH.kv_elements_held(c), expect)
    # compressor buffers in fp32 (aiconfigurator-core sdk/models/deepseek_v4.py): CSA 2 x 4 x 2 x (512 + 128)
    # x 4 B, HCA 2 x 128 x 512 x 4 B per layer; a fixed state per sequence
    assert FLASH.compressor_state_bytes_per_sequence == 21 * 2 * 4 * 2 * 640 * 4 + 20 * 2 * 128 * 512 * 4
    assert FLASH.kv_cache_bytes(context=c, dtype="fp8") == pytest.approx(expect + FLASH.compressor_state_bytes_per_sequence)


def test_attended_and_held_keys():
    c = np.array([100.0, 4096.0, 65536.0])
    attended = 43 * np.minimum(c, 128) + 21 * np.minimum(c / 4, 512) + 20 * c / 128
    assert np.allclose(FLASH.attention_context(c), attended)
    assert np.allclose(FLASH.keys_held(c), 43 * np.minimum(c, 128) + 21 * c / 4 + 20 * c / 128)
    # the CSA layers' selection caps their attended entries: past 2048 tokens only HCA's grow
    grow = np.diff(FLASH.attention_context(np.array([1e5, 2e5])))[0]
    assert grow == pytest.approx(20 * 1e5 / 128)


def _enumerated_pairs(m, T):
    """Brute force: each query i (1-based) attends keys i - w + 1 .. i of its window, the
    min(i // r, k) selected CSA entries, or i // r HCA entries (the masks of
    modeling_deepseek_v4.py: entry j is visible once query position >= (j + 1) r - 1)."""
    total = 0
    for i in range(1, T + 1):
        total += m.n_layers * min(i, m.sliding_window)
        total += m.n_csa_layers * min(i // m.csa_ratio, m.index_topk)
        total += m.n_hca_layers * (i // m.hca_ratio)
    return total / m.n_layers


@pytest.mark.parametrize("T", [256, 1024, 4096])
def test_prefill_pairs_against_enumeration(T):
    # the closed form counts i / r entries where the masks see floor(i / r): within 3%
    got = float(prefill_pairs(FLASH, np.array(float(T))))
    want = _enumerated_pairs(FLASH, T)
    assert got == pytest.approx(want, rel=0.03)
    assert got >= want  # never below the pairs the masks keep


def _per_token_flops(m, context):
    """Forward FLOPs of one new token at `context` (matmuls 2 x active weights, core attention,
    the indexer's 2 x heads x dim per scored key)."""
    att = m.attention_flops_per_token(np.array(context))
    if m.is_compressed:
        index = m.n_csa_layers * 2 * m.index_n_heads * m.index_head_dim * context / m.csa_ratio
    else:  # DeepSeek-V3.2: MLA decode absorbed, 2 H (2 latent + rope) per key over the top-k, indexer over all
        att = m.n_layers * 2 * m.n_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) * min(context, m.index_topk)
        index = m.n_layers * 2 * m.index_n_heads * m.index_head_dim * context
    return m.flops_per_token + att + index


def test_report_ratios_against_v3_2_at_one_million_tokens():
    # DeepSeek-V4 technical report, as quoted by rishipython.github.io/2026/04/27/deepseek-v4-csa-mhc.html
    # and website-1bb.pages.dev/resources/technical/compressed-sparse-attention-deepseek-v4/: at 1M
    # tokens V4-Pro needs 27% of V3.2's single-token FLOPs and 10% of its KV cache; V4-Flash 10% and 7%.
    # The report stores the index keys in FP4 and the rope dims in BF16; here one KV dtype: the cache
    # ratios come out ~15% above the report's, hence the 25% tolerance.
    v32, c = load_model("deepseek_v3_2"), 2.0 ** 20
    for m, flops, cache in ((PRO, 0.27, 0.10), (FLASH, 0.10, 0.07)):
        kv = float(m.kv_elements_held(np.array(c))) / float(v32.kv_elements_held(np.array(c)))
        assert kv == pytest.approx(cache, rel=0.25), (m.name, kv)
        f = float(_per_token_flops(m, c) / _per_token_flops(v32, c))
        assert f == pytest.approx(flops, rel=0.30), (m.name, f)


def test_serving_runs_and_decode_grows_slower_than_dsa():
    kw = dict(hardware="b200", tp=8, concurrency=16, prompt=[4096, 32768], generate=1024, weights="fp8", kv="fp8")
    r, dsa = predict.serving(model="deepseek_v4_flash", **kw), predict.serving(model="deepseek_v3_2", **kw)
    assert bool(np.all(r["fits"]))
    tpot, tpot_dsa = r["tpot_s"].values, dsa["tpot_s"].values
    # 8x the context: V4's window is fixed and only its compressed entries and indexer grow; DeepSeek-V3.2's
    # indexer scores every cached key of every layer (B200 TensorRT-LLM module tables: 1.8x against 2.7x)
    assert tpot[0] < tpot[1] and tpot[1] / tpot[0] < tpot_dsa[1] / tpot_dsa[0]
    assert float(r["ttft_s"][1]) > 4 * float(r["ttft_s"][0])  # prefill grows faster than linearly


def test_measured_block_where_the_framework_has_one():
    from workbench.backends import numbers
    from workbench.workloads.layers import attention_block, layer_elementwise
    shape = dict(phase="decode", batch=16, new=1.0, prefix=8192.0, tp=8, math="fp8_block", w_bytes=1.0, kv_bytes=1.0)
    # B200 TensorRT-LLM has DeepSeek-V4 CSA and HCA module tables; H100 TensorRT-LLM has none (composed)
    measured = attention_block(numbers("b200", framework="trtllm"), FLASH, **shape)
    assert measured is not None and float(measured["time_s"]) > 0
    assert attention_block(numbers("h100_sxm", framework="trtllm"), FLASH, **shape) is None
    # the block holds its projections: tens of microseconds per layer at batch 16 (the tables: ~0.06-0.12 ms)
    assert 20e-6 < float(measured["time_s"]) < 200e-6
    # mHC from its tables where measured, composed from its bytes otherwise: at 8k tokens and more the
    # tables run ~2x the composed bytes' time (their fused kernels keep fp32 mixing weights and iterate
    # Sinkhorn); at 16 tokens their four kernels' fixed latency is most of it
    for tokens, low, high in ((8192.0, 1.2, 3.0), (65536.0, 1.2, 3.0), (16.0, 3.0, 30.0)):
        with_table = layer_elementwise(numbers("b200", framework="trtllm"), FLASH, tokens=tokens, tp=8, a_bytes=1.0,
                                       moe=True)
        composed = layer_elementwise(numbers("b200"), FLASH, tokens=tokens, tp=8, a_bytes=1.0, moe=True)
        assert low < float(with_table["time_s"]) / float(composed["time_s"]) < high, tokens

