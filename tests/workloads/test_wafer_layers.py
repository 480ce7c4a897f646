"""One transformer layer on a P x P PE region (workbench/workloads/wafer_layers.py).

Memory is checked by explicit enumeration: every PE (i, j) of the grid holds, of each
weight matrix W[k, n], the rows [i t_k, (i+1) t_k) and columns [j t_n, (j+1) t_n) with
t = ceil(dim / P) (MeshGEMV's tiling, mesh.py), the last row and column of PEs holding
the remainder. WaferLLM's decode kernel lays out Q, K, V, O and UP, GATE, DOWN as separate
tiled matrices (wse_facts.md §8 "Decode kernel").
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.specs import list_models, load_model
from workbench.workloads import ops
from workbench.workloads.wafer_layers import (decode_layer, expert_bytes_per_pe, layer_memory_per_pe,
                                              layer_weight_matrices, prefill_layer)
from workbench.backends import numbers

WSE2 = numbers("wse2")
WSE3 = numbers("wse3")
TINY = dict(name="tiny", d_model=64, n_heads=4, n_kv_heads=4, head_dim=16, d_ff=128, n_layers=2, vocab_size=256)
# The same with grouped KV heads and a plain (non-gated) MLP, and with odd sizes.
TINY_GQA = {**TINY, "name": "tiny_gqa", "n_kv_heads": 1, "gated_mlp": False}
TINY_ODD = dict(name="tiny_odd", d_model=60, n_heads=3, n_kv_heads=1, head_dim=20, d_ff=170, n_layers=2,
                vocab_size=300)


def _matrices_by_hand(cfg: dict) -> list[tuple[int, int]]:
    """The layer's weight matrices written out from the config (not from the code), laid
    out as the decode GEMVs run them: Wqkv [D, (H + 2K) h] fused, Wo [H h, D], then the
    fused gate/up [D, 2F] (gated) or up [D, F], and down [F, D]."""
    D, H, K, h, F = cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["d_ff"]
    mats = [(D, (H + 2 * K) * h), (H * h, D)]
    mats += [(D, (2 if cfg.get("gated_mlp", True) else 1) * F), (F, D)]
    return mats


def _held(dim: int, P: int) -> np.ndarray:
    """Elements of a dimension held by PE index 0..P-1 under ceil tiling."""
    t = -(-dim // P)
    return np.clip(dim - np.arange(P) * t, 0, t)


def _per_pe_weight_bytes(cfg: dict, P: int, w_bytes: float) -> np.ndarray:
    """[P, P] bytes of weights on every PE, enumerated matrix by matrix."""
    grid = np.zeros((P, P))
    for k, n in _matrices_by_hand(cfg):
        rows, cols = _held(k, P), _held(n, P)
        assert rows.sum() == k and cols.sum() == n  # the tiles cover the matrix exactly once
        for i in range(P):
            for j in range(P):
                grid[i, j] += rows[i] * cols[j] * w_bytes
    return grid


@pytest.mark.parametrize("cfg", [TINY, TINY_GQA, TINY_ODD], ids=lambda c: c["name"])
@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("w_bytes", [2.0, 1.0])
def test_per_pe_weights_by_enumeration(cfg, P, w_bytes):
    model = load_model(cfg)
    grid = _per_pe_weight_bytes(cfg, P, w_bytes)
    mem = layer_memory_per_pe(WSE2, model, P=float(P), batch=1.0, tokens=16.0, w_bytes=w_bytes, kv_bytes=2.0)
    # Feasibility is decided by the fullest PE: the model's per-PE weights must cover it.
    assert grid.max() <= mem["weights_bytes"] * 1.0 + 1e-9
    # ... and not over-count: the fullest PE under ceil tiling is PE (0, 0), which holds a
    # whole tile of every matrix, and that is exactly the model's figure.
    assert grid.max() == grid[0, 0] == pytest.approx(mem["weights_bytes"], rel=1e-12)
    # Bytes are conserved: the grid holds every weight once.
    total = (model.attn_params_per_layer + model.dense_mlp_params_per_layer) * w_bytes
    assert grid.sum() == pytest.approx(total, rel=1e-12)
    # When P divides every dimension the tiles are even: every PE holds the mean.
    if all(k % P == 0 and n % P == 0 for k, n in _matrices_by_hand(cfg)):
        assert np.all(grid == total / P**2)


def test_padding_makes_the_fullest_pe_exceed_the_mean():
    # d_model 64 on P = 3: ceil(64/3) = 22 > 21.33, so PE (0, 0) holds more than the mean; a
    # memory check with the mean (params / P²) would pass points where that PE overflows.
    model = load_model(TINY)
    mean = (model.attn_params_per_layer + model.dense_mlp_params_per_layer) * 2.0 / 9
    mem = layer_memory_per_pe(WSE2, model, P=3.0, batch=1.0, tokens=16.0, w_bytes=2.0, kv_bytes=2.0)
    assert mem["weights_bytes"] > mean
    # Wqkv 22 x ceil(192/3) = 64, Wo 22 x 22, gate/up 22 x ceil(256/3) = 86, down ceil(128/3) = 43 x 22,
    # elements x 2 B
    assert mem["weights_bytes"] == (22 * 64 + 22 * 22 + 22 * 86 + 43 * 22) * 2.0


@pytest.mark.parametrize("name", list_models())
def test_layer_weight_matrices_conserve_the_parameter_count(name):
    # sum(k n count) == attention + MLP params of one layer (all experts and the router
    # resident for MoE; MLA's low-rank projections for DeepSeek), as counted by ModelSpec
    # (test_models.py checks those against the published totals).
    m = load_model(name)
    mlp = m.moe_params_per_layer if m.is_moe else m.dense_mlp_params_per_layer
    if m.n_linear_layers:  # hybrid: softmax and linear-attention regions, in their shares of the layers
        soft, lin = (sum(k * n * c for k, n, c in layer_weight_matrices(m, attention=a)) for a in ("softmax", "linear"))
        mean = (m.n_full_attention_layers * soft + m.n_linear_layers * lin) / m.n_layers
        assert mean == pytest.approx(m.attn_params / m.n_layers + mlp, rel=1e-12)
        return
    if m.is_compressed:  # DeepSeek-V4: a region holds a CSA layer's attention (its compressor and indexer)
        csa = m.softmax_params(sliding=True) + m.compressor_params_csa + m.hyper_connection_params / m.n_layers
        assert sum(k * n * c for k, n, c in layer_weight_matrices(m)) == csa + mlp
        return
    # softmax layers of two shapes (Gemma 4, MiMo-V2-Flash): a region holds the larger kind's
    attn = max(m.softmax_params(sliding=False), m.softmax_params(sliding=True)) \
        if m.n_sliding_layers and not m.is_mla else m.attn_params_per_layer
    if m.dense_unindexed_layers:  # MiniMax-M3: a region holds a sparse layer's, with its indexer
        attn += m.indexer_params_per_layer * (1.0 - m.index_share)
    assert sum(k * n * c for k, n, c in layer_weight_matrices(m)) == attn + mlp


@pytest.mark.parametrize("name", ["llama_3_8b", "llama_3_1_70b", "mixtral_8x7b", "deepseek_v3"])
def test_per_pe_weights_equal_the_sum_of_whole_tiles(name):
    m = load_model(name)
    P = np.array([100.0, 160.0, 205.0, 360.0])
    mem = layer_memory_per_pe(WSE3, m, P=P, batch=1.0, tokens=1024.0, w_bytes=2.0, kv_bytes=2.0)
    def tiled(moe="widest"):
        return sum(c * np.ceil(k / P) * np.ceil(n / P) for k, n, c in layer_weight_matrices(m, moe=moe)) * 2.0
    expected = tiled()
    whole = mem["expert_groups"] == 0  # a MoE layer on a small region keeps its experts beside it
    np.testing.assert_array_equal(mem["weights_bytes"][whole], expected[whole])
    mean = sum(c * k * n for k, n, c in layer_weight_matrices(m)) * 2.0 / P**2
    assert np.all(mem["weights_bytes"][whole] >= mean[whole])
    if not np.all(whole):  # the layer's own region: the fullest kind without its routed experts
        routed = m.n_experts * expert_bytes_per_pe(m, P=P, w_bytes=2.0)
        own = np.maximum.reduce([tiled(moe) - (routed if moe else 0.0) for _, moe in ops.layer_kinds(m)])
        np.testing.assert_array_equal(mem["weights_bytes"][~whole], own[~whole])


def test_total_bytes_are_the_sum_of_the_parts_plus_the_reserve():
    m = load_model("llama_3_8b")
    mem = layer_memory_per_pe(WSE2, m, P=200.0, batch=4.0, tokens=2048.0, generated=256.0, w_bytes=2.0,
                              kv_bytes=2.0)
    assert mem["total_bytes"] == pytest.approx(mem["weights_bytes"] + mem["kv_bytes"] + mem["activation_bytes"]
                                               + WSE2.sram_reserved_per_pe_bytes, rel=1e-12)


def test_shift_based_kv_is_the_cache_spread_over_the_region():
    # mesh: batch x context x K (h + hv) x bytes / P² (Llama 3 8B: K = 8, h = hv = 128).
    m = load_model("llama_3_8b")
    mem = layer_memory_per_pe(WSE2, m, P=200.0, batch=4.0, tokens=2048.0, w_bytes=2.0, kv_bytes=2.0)
    assert mem["kv_bytes"] == pytest.approx(4 * 2048 * 8 * 256 * 2.0 / 200**2, rel=1e-12)


@pytest.mark.parametrize("P", [2.0, 100.0, 360.0])
def test_concat_based_kv_needs_more_bytes_per_pe_than_shift_based(P):
    # gpu_style appends each generated token to one line of P PEs (P x the per-PE bytes of a
    # shift-placed token), so for the same tokens its fullest PE holds more.
    m = load_model("llama_3_8b")
    kw = dict(P=P, batch=2.0, tokens=2048.0, w_bytes=2.0, kv_bytes=2.0)
    for generated in (1.0, 256.0, 2048.0):
        shift = layer_memory_per_pe(WSE2, m, generated=generated, **kw)["kv_bytes"]
        concat = layer_memory_per_pe(WSE2, m, generated=generated, mapping="gpu_style", **kw)["kv_bytes"]
        assert concat > shift
        per_token = 8 * 256 * 2.0  # K (h + hv) x 2 B
        assert concat - shift == pytest.approx(2.0 * generated * per_token * (1 / P - 1 / P**2), rel=1e-12)
    # With nothing generated the prompt is spread the same way by both.
    assert layer_memory_per_pe(WSE2, m, generated=0.0, mapping="gpu_style", **kw)["kv_bytes"] == \
        layer_memory_per_pe(WSE2, m, generated=0.0, **kw)["kv_bytes"]


# ---- decode and prefill cycles --------------------------------------------------------------
@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
def test_decode_cycles_grow_with_P_at_large_P(w):
    # Past a few hundred PEs a side the reductions dominate (wse_facts.md §9: WaferLLM per-layer
    # cycles 12.7k at 420² -> 15.3k at 660² for Llama 3 8B).
    m = load_model("llama_3_8b")
    c = {P: float(decode_layer(w, m, P=float(P), batch=1.0, context=2048.0)["cycles"]) for P in (300, 600)}
    assert c[300] < c[600]
    d = decode_layer(w, m, P=600.0, batch=1.0, context=2048.0)
    assert d["reduce_cycles"] > d["compute_cycles"]


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
def test_prefill_cycles_fall_with_P(w):
    # MeshGEMM work per PE ~ 1/P² over P steps: compute dominates (WaferLLM Table 3: prefill
    # throughput rises 480² -> 600² -> 720²).
    m = load_model("llama_3_8b")
    c = {P: float(prefill_layer(w, m, P=float(P), batch=1.0, prompt=2048.0)["cycles"]) for P in (240, 480)}
    assert c[240] > c[480]


@pytest.mark.parametrize("w", [WSE2, WSE3], ids=["wse2", "wse3"])
@pytest.mark.parametrize("name", ["llama_3_8b", "llama_3_1_70b", "mixtral_8x7b"])
@pytest.mark.parametrize("batch", [1.0, 16.0])
def test_gpu_style_decode_is_slower_than_mesh_at_each_P(w, name, batch):
    """Every grid side from 78 to the largest square. Below, the GEMV partial sums are large
    (ceil(n/P) of them), and a chain streaming them once each way beats a tree sending them
    whole at each stage and in its broadcast (test_mesh.py,
    test_gpu_style_chain_can_win_for_a_large_message_on_a_short_line): up to P = 77 at a batch
    of 16, P = 17 at 1. No layer of these models fits there: an 8B layer's 218M weights x 2 B
    need 102 x 102 PEs at 42 KB free each, so those grids are never chosen."""
    m = load_model(name)
    P = np.arange(78.0, w.max_square_grid + 1)
    mesh_c = decode_layer(w, m, P=P, batch=batch, context=4096.0)["cycles"]
    gpu_c = decode_layer(w, m, P=P, batch=batch, context=4096.0, mapping="gpu_style")["cycles"]
    assert np.all(gpu_c > mesh_c)


def test_decode_parts_sum_to_the_total():
    m = load_model("llama_3_8b")
    d = decode_layer(WSE2, m, P=np.arange(16.0, 700.0, 7.0), batch=4.0, context=1024.0)
    np.testing.assert_allclose(d["cycles"], d["compute_cycles"] + d["reduce_cycles"], rtol=1e-12)
    p = prefill_layer(WSE2, m, P=np.arange(16.0, 700.0, 7.0), batch=1.0, prompt=1024.0)
    assert np.all(p["cycles"] >= p["compute_cycles"])


@pytest.mark.parametrize("cfg", ["llama_3_8b", "llama_3_1_70b", TINY, TINY_GQA], ids=str)
@pytest.mark.parametrize("batch, context", [(1.0, 1.0), (1.0, 2048.0), (8.0, 4096.0)])
def test_decode_flops_are_two_per_weight_plus_attention(cfg, batch, context):
    # Dense model, one token per sequence: 2 x (QKV + O + MLP params) per token, plus the
    # scores and weighted sum over the cache, 2 H (h + hv) context (DESIGN.md: inference parts
    # sum to 2 N tokens plus attention).
    m = load_model(cfg)
    D, H, K, h, hv, F = m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.v_dim, m.d_ff
    qkv, o, mlp = D * (H + 2 * K) * h, H * hv * D, m.mlp_matrices * D * F
    expected = batch * (2.0 * (qkv + o + mlp) + 2.0 * H * (h + hv) * context)
    for P in (1.0, 7.0, 160.0):
        assert decode_layer(WSE2, m, P=P, batch=batch, context=context)["flops"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("batch, prompt", [(1.0, 128.0), (4.0, 2048.0)])
def test_prefill_flops_are_two_per_weight_per_token_plus_attention(batch, prompt):
    # 2 N per token over batch x prompt tokens, plus per sequence 2 H (h + hv) prompt² (scores
    # and weighted sum, computed in full: no causal skipping, as WaferLLM's kernels).
    m = load_model("llama_3_8b")
    D, H, K, h, hv, F = m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.v_dim, m.d_ff
    params = D * (H + 2 * K) * h + H * hv * D + 3 * D * F
    expected = 2.0 * batch * prompt * params + batch * 2.0 * H * (h + hv) * prompt**2
    assert prefill_layer(WSE2, m, P=240.0, batch=batch, prompt=prompt)["flops"] == pytest.approx(expected, rel=1e-12)


def test_hybrid_decode_layer_flops_in_closed_form():
    """Qwen3.5-27B (Gated DeltaNet 3:1 with softmax attention) on a wafer region: the mean
    layer's FLOPs are each matmul's 2 b k n in its share of the layers, the softmax layers'
    scores and weighted sum over the context, and the linear layers' delta rule: S^T k and
    S^T q (2 d_k H_v d_v each) plus decay and rank-1 update (4 d_k H_v d_v) per token."""
    from workbench.workloads import ops
    m = load_model("qwen3_5_27b")
    b, ctx, P = 4.0, 4096.0, 160.0
    out = decode_layer(WSE3, m, P=P, batch=b, context=ctx)
    soft, lin = m.n_full_attention_layers / m.n_layers, m.n_linear_layers / m.n_layers
    mats = sum(mm.share * 2 * b * mm.k * mm.n for mm in ops.layer_matmuls(m, moe=False))
    attn = soft * 2 * b * ctx * m.n_heads * (m.head_dim + m.v_dim)
    dk, hv = m.linear_key_head_dim, m.linear_value_heads * m.linear_value_head_dim
    mixing = lin * b * (2 * 2 * dk * hv + 4 * dk * hv)
    assert float(out["flops"]) == pytest.approx(mats + attn + mixing, rel=1e-12)


def test_hybrid_decode_on_wafers_grows_less_with_context_than_a_dense_model():
    """Three of four Qwen3.5-27B layers keep a fixed state: from 1k to 32k tokens its wafer
    TPOT grows by less than half of what Qwen3-32B's (every layer attending) does."""
    kw = dict(hardware="cs3", devices=4, pe_grid=200, batch=1, prompt=[1024, 32768], generate=128, weights="fp16",
              kv="fp16")
    hyb = predict.inference(model="qwen3_5_27b", **kw)
    dense = predict.inference(model="qwen3_32b", **kw)
    assert bool(hyb.fits.all()) and bool(dense.fits.all())
    h, d = hyb.tpot_s.values, dense.tpot_s.values
    assert 0 < h[1] - h[0] < 0.5 * (d[1] - d[0])


def test_hybrid_regions_hold_state_or_kv_whichever_is_fuller():
    """A linear layer's region holds its projections and every sequence's d_k x H_v d_v
    state (fp32); a softmax layer's its QKV and KV cache: the placement takes the fuller."""
    m = load_model("qwen3_5_27b")
    short = layer_memory_per_pe(WSE3, m, P=200.0, batch=64.0, tokens=16.0, w_bytes=2.0, kv_bytes=2.0)
    hv = m.linear_value_heads * m.linear_value_head_dim
    state = 64 * np.ceil(m.linear_key_head_dim / 200) * np.ceil(hv / 200) * 4.0
    assert float(short["kv_bytes"]) == pytest.approx(state)  # a few tokens: the state dominates
    long = layer_memory_per_pe(WSE3, m, P=200.0, batch=1.0, tokens=65536.0, w_bytes=2.0, kv_bytes=2.0)
    per_token = m.kv_elements_per_token_per_layer * 2.0
    assert float(long["kv_bytes"]) == pytest.approx(65536 * per_token / 200 ** 2)  # long context: the KV
