"""Mamba-2 hybrids (Nemotron-H) and Kimi Delta Attention hybrids (Kimi Linear) as linear
kinds of the one layer-operations table: their projections and FLOPs in closed form (from
the papers and the models' code), their per-sequence state fixed while the softmax layers'
KV grows, Nemotron-H's blocks without an MLP costing their mixer only, and the whole model
summing its layer kinds exactly."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.primitives.attention import linear_attention
from workbench.primitives.kernel_fits import KEY_PASSES, LINEAR_CHUNK, gdn_work
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.inference import _model_pass, kv_bytes_per_sequence
from workbench.workloads.layers import layer_decode, layer_prefill


def test_mamba2_projections_in_closed_form():
    """Mamba-2 (Dao & Gu, arXiv 2405.21060, Sec. 7; Nemotron-H's Mamba2Mixer): in_proj
    D -> z, x (H·P each), B, C (G·N each), dt (H); out_proj H·P -> D. Nemotron 3 Nano: D
    2688, H 64, P 64, G 8, N 128 (config.json); attention layers q, k, v, o with 32 heads,
    2 KV heads of 128."""
    m = load_model("nvidia_nemotron_3_nano_30b_a3b")
    D, H, P, G, N = 2688, 64, 64, 8, 128
    mamba = D * (2 * H * P + 2 * G * N + H) + H * P * D
    attention = D * (32 + 2 * 2) * 128 + 32 * 128 * D
    assert m.linear_attn_params_per_layer == mamba
    assert m.attn_params == 23 * mamba + 6 * attention
    # experts are squared-ReLU (two matrices), 128 routed + the shared width of 2 experts
    assert m.n_params == m.attn_params + 23 * ((128 + 2) * 2 * D * 1856 + D * 128) + 2 * 131072 * D


def test_kda_projections_in_closed_form():
    """Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; modeling_kimi.py): q, k, v
    (D -> H·d each), the forget gate and output gate through a rank-d bottleneck
    (f_a, g_a: D -> d; f_b, g_b: d -> H·d), beta (D -> H), o (H·d -> D). Kimi Linear 48B:
    D 2304, H 32, d 128."""
    m = load_model("kimi_linear_48b_a3b")
    D, H, d = 2304, 32, 128
    kda = 3 * D * H * d + 2 * (D * d + d * H * d) + D * H + H * d * D
    assert m.linear_attn_params_per_layer == kda
    assert (m.n_linear_layers, m.n_full_attention_layers) == (20, 7)
    mm = ops.attention_matmuls(m)  # the table carries each layer kind over its share of the layers
    assert sum(x.params for x in mm) * m.n_layers == pytest.approx(m.attn_params, rel=1e-12)


@pytest.mark.parametrize("kind", ["gdn", "kda", "mamba2"])
def test_chunked_scan_flops_per_kind(kind):
    """Per token and head 2 (c (p d_k + d_v) + 2 d_k d_v): the delta rule (GDN, KDA) forms
    query-key scores and the WY key-key products (p = 2); SSD only the C-B scores (p = 1)."""
    T, H, dk, dv = 8192.0, 64.0, 128.0, 64.0
    flops, _, _ = gdn_work(tokens=T, sequences=1.0, heads=H, key_dim=dk, value_dim=dv, qkv_width=8192.0,
                           conv_kernel=4.0, kind=kind)
    p = {"gdn": 2, "kda": 2, "mamba2": 1}[kind]
    assert KEY_PASSES[kind] == p
    assert flops == pytest.approx(2 * T * H * (LINEAR_CHUNK * (p * dk + dv) + 2 * dk * dv))


@pytest.mark.parametrize("name, attention_layers", [("nvidia_nemotron_3_nano_30b_a3b", 6),
                                                    ("kimi_linear_48b_a3b", 7)])
def test_state_is_fixed_and_only_attention_layers_grow(name, attention_layers):
    m = load_model(name)
    a, b = (kv_bytes_per_sequence(m, tokens=t, tp=1.0, pp=1.0, kv_bytes=2.0) for t in (1000.0, 9000.0))
    assert b - a == pytest.approx(8000 * attention_layers * m.kv_elements_per_token_per_layer * 2.0)
    assert a - 1000 * attention_layers * m.kv_elements_per_token_per_layer * 2.0 == \
        pytest.approx(m.linear_state_bytes_per_sequence)


def test_a_pass_sums_its_layer_kinds_and_mlp_free_blocks_cost_their_mixer_only():
    """Nemotron 3 Nano's pass: 23 MoE layers plus 6 mixer-only layers, exactly; a mixer-only
    layer runs no MLP GEMM and one TP all-reduce instead of two."""
    m = load_model("nvidia_nemotron_3_nano_30b_a3b")
    hw = numbers("h200_sxm")
    kw = dict(batch=4.0, prompt=2048.0, tp=2.0, math="bf16", w_bytes=2.0, a_bytes=2.0, kv_bytes=2.0)
    total = _model_pass(layer_prefill, hw, m, **kw)
    moe, bare = layer_prefill(hw, m, moe=True, **kw), layer_prefill(hw, m, moe=None, **kw)
    for key in ("flops", "time_s", "comm_s"):
        assert float(total[key]) == pytest.approx(23 * float(moe[key]) + 6 * float(bare[key]), rel=1e-12)
    assert float(bare["comm_s"]) == pytest.approx(float(moe["comm_s"]) / 2, rel=1e-12)  # one all-reduce of two (ep 1)
    mixer = sum(2 * 4 * 2048 * mm.k * mm.n * mm.share / (2 if mm.split in "nk" else 1)
                for mm in ops.attention_matmuls(m))
    assert float(bare["flops"]) > mixer  # the mixer's GEMMs (and attention / scan), no MLP


def test_decode_grows_with_context_only_through_attention_layers():
    """TPOT at one request from 1k to 128k tokens: the Mamba-2 and KDA hybrids' decode grows
    through their few attention layers only, far less than a dense GQA model of similar
    active size whose every layer attends."""
    kw = dict(hardware="h200_sxm", tp=1, batch=1, generate=64, prompt=[1024, 131072])
    growth = {}
    for name in ("nvidia_nemotron_3_nano_30b_a3b", "kimi_linear_48b_a3b", "qwen3_8b"):
        t = predict.inference(model=name, **kw).tpot_s.values
        growth[name] = t[1] - t[0]
    assert 0 < growth["nvidia_nemotron_3_nano_30b_a3b"] < 0.5 * growth["qwen3_8b"]
    assert 0 < growth["kimi_linear_48b_a3b"] < 0.5 * growth["qwen3_8b"]


def test_kda_uses_its_own_kernel_tables_and_mamba2_carries_over_gdn():
    """Under vLLM on H200 KDA's time comes from its own measured kernels (variant
    'kda_prefill/bf16'); Mamba-2, whose tables time only the convolution, from the Gated
    DeltaNet surface of the same framework (primitives/attention.linear_surface); both
    never below their roofline."""
    hw = numbers("h200_sxm", framework="vllm")
    assert hw.fitted("gdn", "kda_prefill/bf16")[0] is not None
    shape = dict(tokens=8192.0, sequences=1.0, heads=32.0, key_dim=128.0, value_dim=128.0,
                 qkv_width=3 * 32 * 128.0, conv_kernel=4.0)
    for kind in ("kda", "mamba2"):
        r = linear_attention(hw=hw, kind=kind, **shape)
        roof = max(float(r["flops"]) / hw.peak("bf16"), float(r["bytes"]) / hw.hbm_bandwidth_bytes_per_s)
        assert float(r["time_s"]) >= roof * (1 - 1e-9)
    kda, gdn = (float(linear_attention(hw=hw, kind=k, **shape)["time_s"]) for k in ("kda", "gdn"))
    assert kda != gdn
