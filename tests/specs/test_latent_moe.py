"""Latent MoE (Nemotron 3 Super / Ultra): the routed experts run in moe_latent_dim, between a
down- and an up-projection at d_model; router and shared experts stay at d_model.
Closed forms from the published config.json (NVIDIA-Nemotron-3-Super-120B-A12B-FP8:
hidden_size 4096, moe_latent_size 1024, n_routed_experts 512, moe_intermediate_size 2688,
moe_shared_expert_intermediate_size 5376, num_experts_per_tok 22, mlp_hidden_act relu2)."""
import dataclasses

import pytest

from workbench.specs import load_model
from workbench.workloads import ops

SUPER = "nvidia_nemotron_3_super_120b_a12b"


def test_moe_layer_weights_closed_form():
    m = load_model(SUPER)
    D, L, E, F = 4096, 1024, 512, 2688
    routed = E * 2 * L * F  # up and down (relu2: no gate) of each expert, in the latent
    shared = 2 * D * (2 * F)  # 5376-wide shared expert at d_model
    assert m.moe_params_per_layer == routed + shared + D * E + 2 * D * L
    mats = {mm.name: mm for mm in ops.mlp_matmuls(m, moe=True)}
    assert (mats["expert_up"].k, mats["expert_down"].n) == (L, L)
    assert (mats["latent_down"].k, mats["latent_down"].n, mats["latent_up"].k, mats["latent_up"].n) == (D, L, L, D)
    assert sum(mm.params for mm in mats.values()) == m.moe_params_per_layer


def test_totals_match_the_model_cards():
    # model cards: 120B total / 12B active (Super), 550B / 55B (Ultra); embeddings, MTP and
    # norms as counted in specs/model.py
    for name, total, active in ((SUPER, 120e9, 12e9), ("nvidia_nemotron_3_ultra_550b_a55b", 550e9, 55e9)):
        m = load_model(name)
        assert m.n_params == pytest.approx(total, rel=0.02)
        assert m.n_params_active == pytest.approx(active, rel=0.07)


def test_dispatch_moves_the_latent_not_the_hidden_state():
    m = load_model(SUPER)
    full = dataclasses.replace(m, moe_latent_dim=0)
    assert ops.expert_dispatch_bytes(m, tokens=64, a_bytes=2.0) == 64 * 22 * 1024 * 2.0
    assert ops.expert_dispatch_bytes(full, tokens=64, a_bytes=2.0) == 4 * ops.expert_dispatch_bytes(m, tokens=64,
                                                                                                    a_bytes=2.0)
    # experts 4x narrower: the latent model has far fewer parameters than the same experts at d_model
    assert m.n_params < full.n_params / 3


def test_kimi_k3_gates_and_latent_experts():
    # Kimi-K3 config.json (text_config): hidden 7168, routed_expert_hidden_size 3584, KDA
    # num_heads 96 x head_dim 128 with use_full_rank_gate, MLA with mla_use_output_gate
    # (96 heads x v_head_dim 128)
    m = load_model("kimi_k3")
    D, H, d = 7168, 96, 128
    assert m.moe_latent_dim == 3584 and m.expert_width == 3584
    lin = {mm.name: mm for mm in ops.linear_attention_matmuls(m)}
    assert lin["linear_qkvg"].n == 4 * H * d  # q, k, v and the full-rank output gate
    assert (lin["linear_gate_down"].n, lin["linear_gate_up"].n) == (d, H * d)  # the forget gate's bottleneck only
    assert m.linear_attn_params_per_layer == sum(mm.k * mm.n for mm in lin.values())
    att = {mm.name: mm for mm in ops.attention_matmuls(m)}
    assert att["attn_gate"].k == D and att["attn_gate"].n == H * 128


def test_glm_5_2_shares_its_indexer_across_layers():
    # GLM-5.2 config.json: index_topk_freq 4, index_skip_topk_offset 3, 78 layers: layers 0-2 and
    # every 4th from 6 run the indexer (21, as aiconfigurator-core's deepseek_v32.py counts them);
    # the others reuse its top-k and cache no indexer key (index_head_dim 128)
    m, full = load_model("glm_5_2"), load_model("glm_5")
    assert m.index_layers == 21 and full.index_layers == 0
    assert m.kv_elements() == pytest.approx(512 + 64 + 128 * 21 / 78, rel=1e-12)
    assert full.kv_elements() == 512 + 64 + 128
