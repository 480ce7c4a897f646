"""The one table of layer operations (workloads/ops.py) against closed forms: its matmuls
hold exactly the parameters the model spec counts (checked against the published totals
in tests/specs/test_models.py), its active matmuls do 2·N_active FLOPs per token, and the
GPU and wafer backends both run the table's shapes."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.specs import list_models, load_model
from workbench.workloads import ops
from workbench.workloads.layers import layer_gemms
from workbench.workloads.wafer_layers import decode_layer, layer_weight_matrices


@pytest.mark.parametrize("name", list_models())
def test_table_holds_every_parameter_the_spec_counts(name):
    m = load_model(name)
    table = sum(n * sum(mm.params for mm in ops.layer_matmuls(m, moe=moe)) for n, moe in ops.layer_kinds(m))
    # exact but for the float shares of a hybrid's layer kinds (7/27 of Kimi Linear's layers)
    assert table + m.embedding_params == pytest.approx(m.n_params, rel=1e-14)


@pytest.mark.parametrize("name", list_models())
def test_active_matmuls_do_two_flops_per_active_parameter(name):
    m = load_model(name)
    per_layer = {moe: sum(np.prod(ops.active_shape(mm, m.n_active_experts)) * mm.share  # hybrids: share of layers
                          for mm in ops.layer_matmuls(m, moe=moe))
                 for _, moe in ops.layer_kinds(m)}
    flops = 2.0 * (sum(n * per_layer[moe] for n, moe in ops.layer_kinds(m)) + ops.lm_head(m).params)
    assert flops == pytest.approx(m.flops_per_token, rel=1e-12)


def test_mla_projections_are_the_low_rank_ones():
    m = load_model("deepseek_v3")  # q_lora_rank 1536, kv_lora_rank 512, rope 64 (config.json)
    names = {mm.name: mm for mm in ops.attention_matmuls(m)}
    assert set(names) == {"q_down", "q_up", "kv_down", "kv_up", "attn_out"}
    assert (names["kv_down"].k, names["kv_down"].n) == (7168, 512 + 64)
    assert names["kv_down"].split == "none"  # the latent is replicated on every TP rank


def test_layer_kinds_split_dense_and_moe_layers():
    assert ops.layer_kinds(load_model("deepseek_v3")) == [(3, False), (58, True)]  # first_k_dense_replace = 3
    assert ops.layer_kinds(load_model("llama_3_1_8b")) == [(32, False)]


def test_training_flops_convention():
    m = load_model("llama_3_8b")
    total, attention = ops.training_model_flops(m, tokens=1000.0, seq_len=2048.0)
    assert attention == 12.0 * 32 * 32 * 128 * 2048.0 * 1000.0  # 12·L·H·h·S per token
    assert total == 6.0 * m.n_params_active * 1000.0 + attention


def test_gpu_layer_flops_are_the_table_split_over_tp():
    m = load_model("llama_3_1_70b")
    T, tp = 4096.0, 8.0
    g = layer_gemms(numbers("h100_sxm"), m, tokens=T, tp=tp, math="bf16", w_bytes=2.0, a_bytes=2.0, moe=False)
    sharded = sum(mm.params / (1.0 if mm.split == "none" else tp) for mm in ops.layer_matmuls(m, moe=False))
    assert float(g["flops"]) == pytest.approx(2.0 * T * sharded, rel=1e-12)


@pytest.mark.parametrize("name", ["llama_3_1_8b", "mixtral_8x7b", "deepseek_v3"])
def test_wafer_decode_runs_the_table_including_mla_and_the_router(name):
    m = load_model(name)
    b, ctx = 2.0, 1024.0
    d = decode_layer(numbers("wse3"), m, P=300.0, batch=b, context=ctx)
    matmul = {moe: sum(np.prod(ops.active_shape(mm, m.n_active_experts)) for mm in ops.layer_matmuls(m, moe=moe))
              for _, moe in ops.layer_kinds(m)}
    mean_matmul = sum(n * matmul[moe] for n, moe in ops.layer_kinds(m)) / m.n_layers
    attention = 2.0 * b * m.n_heads * (m.head_dim + m.v_dim) * m.attention_context(ctx) / m.n_layers
    assert float(d["flops"]) == pytest.approx(2.0 * b * mean_matmul + attention, rel=1e-12)


def test_wafer_regions_hold_every_expert_and_the_router():
    m = load_model("mixtral_8x7b")
    held = sum(k * n * c for k, n, c in layer_weight_matrices(m))
    assert held == m.attn_params_per_layer + m.n_experts * m.expert_params + m.router_params_per_layer


def test_a_matmul_split_must_be_known():
    with pytest.raises(ValueError, match="split"):
        ops.Matmul("x", k=1, n=1, split="rows")


def test_training_attention_flops_count_only_softmax_layers():
    # Llama-3.3-Nemotron-Super-49B: 49 of its 80 layers have attention (config.json block_configs)
    m = load_model("llama_3_3_nemotron_super_49b_v1")
    _, attention = ops.training_model_flops(m, tokens=1000.0, seq_len=2048.0)
    assert attention == 12.0 * 49 * 64 * 128 * 2048.0 * 1000.0


def test_busiest_rank_experts_against_a_monte_carlo():
    # ep = 1: the mean expert load, expected_experts_touched exactly
    pairs, touched = ops.busiest_rank_experts(n_experts=256, top_k=8, tokens=16.0, ep=1.0)
    assert pairs == 128.0 and touched == pytest.approx(ops.expected_experts_touched(n_experts=256, top_k=8, tokens=16))
    # ep > 1: each token picks 8 distinct of 256 experts, 32 per rank; the busiest rank's pairs and touched
    # experts from 4,000 draws, against the closed form (Blom's expected maximum of 8 normals)
    rng = np.random.default_rng(0)
    E, k, ep = 256, 8, 8
    for T in (4, 16, 64):
        choice = np.argsort(rng.random((4000, T, E)), axis=2)[:, :, :k]  # k distinct experts per token
        rank = choice // (E // ep)
        load = np.stack([(rank == r).sum(axis=(1, 2)) for r in range(ep)], axis=1)
        pairs, _ = ops.busiest_rank_experts(n_experts=E, top_k=k, tokens=float(T), ep=float(ep))
        assert float(pairs) == pytest.approx(load.max(axis=1).mean(), rel=0.10), T


@pytest.mark.parametrize("a_bytes, stream", [(0.5, 2.0), (1.0, 2.0), (2.0, 2.0), (4.0, 4.0)])
def test_tensor_parallel_all_reduces_move_16_bit_values_at_least(a_bytes, stream):
    """The row-parallel GEMMs write BF16 also from FP8 or FP4 inputs, so a TP all-reduce sums
    T x D values of at least 2 bytes (aiconfigurator-core 0.12.0 sdk/config.py: comm_quant_mode
    defaults to half); Llama-3.1-70B, D = 8192 (config.json hidden_size)."""
    m = load_model("llama_3_1_70b")
    assert ops.tp_allreduce_bytes(m, tokens=64.0, a_bytes=a_bytes) == 64 * 8192 * stream


def test_fp8_and_bf16_decode_share_their_all_reduce_time():
    """Same tokens, same 16-bit all-reduces: a TP8 decode step's communication does not halve with
    FP8 activations (it did while the all-reduce moved a_bytes)."""
    from workbench import predict
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=32, prompt=1024, generate=128,
                           weights=["bf16", "fp8"], framework="none")
    comm = ds.decode_comm_s.values
    assert comm[0] > 0 and comm[1] == pytest.approx(comm[0], rel=1e-12)


def test_expert_slots_hold_redundant_copies_where_ep_does_not_divide_the_experts():
    """256 experts over 48 GPUs run in 288 slots, 6 a GPU (SGLang's GB200 decode: --ep-size 48
    --ep-num-redundant-experts 32); over 8, 16 or 32 GPUs in 256. A large batch then touches
    all 6 slots of the busiest rank; the redundant copies share their experts' tokens."""
    assert ops.expert_slots(256, 48) == 288 and ops.expert_slots(256, 24) == 264
    assert [float(ops.expert_slots(256, ep)) for ep in (8, 16, 32)] == [256.0] * 3
    _, touched = ops.busiest_rank_experts(n_experts=256, top_k=8, tokens=1e5, ep=48.0)
    assert float(touched) == pytest.approx(6.0, rel=1e-3)
    pairs_48, _ = ops.busiest_rank_experts(n_experts=256, top_k=8, tokens=1e3, ep=48.0)
    assert float(pairs_48) > 1e3 * 8 / 48  # the busiest rank carries more than the mean
