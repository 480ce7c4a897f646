"""MoE layers larger than a wafer region (workloads/wafer_layers.py: layer_memory_per_pe's
expert_groups, expert_pairs_per_row, expert_hand_off_cycles): the routed experts in regions
of the same side beside their layer, so the largest MoE models can be placed on CS-3s.

Sizes cited: Llama 4 Maverick's routed experts are 128 x 3 x 5,120 x 8,192 parameters per
MoE layer (its config.json: hidden_size 5120, intermediate_size 8192, num_local_experts 128),
32.2 GB in 16 bits, more than the largest square region of a WSE-3 holds (757 x 757 PEs of
48 KB, 28.2 GB; wse_facts.md: 48 KB per PE; the program rectangle's square side).
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.wafer_layers import (decode_layer, expert_bytes_per_pe, expert_hand_off_cycles,
                                              expert_pairs_per_row, layer_memory_per_pe)
from workbench.workloads.wafer_inference import micro_batch_rows

WSE3 = numbers("wse3")
SERVICE = dict(hardware="cs3", batch=1, prompt=1000, generate=500, weights="fp16", kv="fp16")
BIG_MOE = ["llama_4_maverick_17b_128e", "deepseek_v3", "kimi_k2"]


def test_a_maverick_moe_layer_is_larger_than_any_region():
    m = load_model("llama_4_maverick_17b_128e")
    routed = sum(mm.k * mm.n * mm.count for mm in ops.mlp_matmuls(m, moe=True) if mm.routed)
    assert routed == 128 * 3 * 5120 * 8192
    side = float(WSE3.max_square_grid)
    assert routed * 2.0 > side * side * float(WSE3.sram_per_pe_bytes)


@pytest.mark.parametrize("model", BIG_MOE)
def test_the_largest_moe_models_fit_on_the_fewest_systems(model):
    """devices="min" places them (before: 'a layer is larger than a wafer'), every weight
    held: the systems' SRAM is at least the model's 16-bit weights; one system fewer does
    not fit at any grid side."""
    r = predict.inference(model=model, devices="min", **SERVICE)
    d = int(r.devices)
    assert bool(r.fits) and float(r.expert_regions_per_layer) >= 1
    sram = float(WSE3.sram_per_pe_bytes) * float(WSE3.program_pes)
    assert d * sram >= 2.0 * load_model(model).n_params
    assert not bool(predict.inference(model=model, devices=d - 1, **SERVICE).fits)


@pytest.mark.parametrize("P", [128.0, 205.0, 400.0])
def test_expert_regions_are_the_fewest_that_hold_the_experts(P):
    """Each expert region holds floor(room / expert) whole experts, room being a PE's SRAM
    less the reserve and the activation buffers (no cache there): the count is
    ceil(E / that), and one region fewer would overflow a PE."""
    m = load_model("llama_4_maverick_17b_128e")
    mem = layer_memory_per_pe(WSE3, m, P=P, batch=1.0, tokens=1500.0, generated=500.0, w_bytes=2.0, kv_bytes=2.0,
                              rows_in_flight=micro_batch_rows(m, 1.0))
    g = float(mem["expert_groups"])
    expert = expert_bytes_per_pe(m, P=P, w_bytes=2.0)
    room = float(WSE3.sram_per_pe_bytes - WSE3.sram_reserved_per_pe_bytes) - float(mem["activation_bytes"])
    assert g == np.ceil(m.n_experts / np.floor(room / expert))
    assert np.ceil(m.n_experts / (g - 1.0)) * expert > room
    assert float(mem["total_bytes"]) <= float(WSE3.sram_per_pe_bytes)


def test_layers_a_region_holds_whole_keep_their_experts():
    """A dense model never splits; a small MoE (Qwen3-30B-A3B: 128 experts of 3 x 2,048 x 768)
    keeps its experts in its layer's region wherever that region holds them."""
    P = np.array([150.0, 300.0, 600.0])
    dense = layer_memory_per_pe(WSE3, load_model("llama_3_1_70b"), P=P, batch=1.0, tokens=1024.0, w_bytes=2.0,
                                kv_bytes=2.0)
    assert np.all(dense["expert_groups"] == 0)
    small = layer_memory_per_pe(WSE3, load_model("qwen3_30b_a3b"), P=P, batch=1.0, tokens=1024.0, w_bytes=2.0,
                                kv_bytes=2.0)
    whole = small["total_bytes"] <= float(WSE3.sram_per_pe_bytes)
    assert np.all(small["expert_groups"][P >= 300.0] == 0) and np.all(whole)


def _simulated_busiest(n_experts, top_k, rows, groups, trials=4000, seed=0):
    """Monte Carlo: each row picks top_k distinct experts uniformly; the experts are split
    evenly over the groups; the mean over trials of the busiest group's (row, expert) pairs."""
    rng = np.random.default_rng(seed)
    group_of = np.arange(n_experts) * groups // n_experts
    busiest = np.empty(trials)
    for t in range(trials):
        picks = np.argsort(rng.random((rows, n_experts)), axis=1)[:, :top_k]
        busiest[t] = np.bincount(group_of[picks].ravel(), minlength=groups).max()
    return busiest.mean()


@pytest.mark.parametrize("rows,groups", [(1, 4), (4, 8), (16, 4), (64, 16)])
def test_busiest_expert_region_matches_a_simulation(rows, groups):
    """expert_pairs_per_row x rows against a Monte Carlo of uniform top-k routing (Qwen3's
    128 experts, top 8) within 15%."""
    m = load_model("qwen3_235b_a22b")
    model_pairs = float(expert_pairs_per_row(m, rows=float(rows), expert_groups=float(groups))) * rows
    sim = _simulated_busiest(m.n_experts, m.n_active_experts, rows, groups)
    assert model_pairs == pytest.approx(sim, rel=0.15)


def test_busiest_region_bounds():
    """Between the even share and all of a row's experts; top-1 at one row: exactly one."""
    m = load_model("qwen3_235b_a22b")
    g = np.array([0.0, 1.0, 2.0, 8.0, 64.0])
    pairs = expert_pairs_per_row(m, rows=4.0, expert_groups=g)
    k = m.n_active_experts
    assert pairs[0] == k and pairs[1] == k
    assert np.all(pairs[1:] >= k / g[1:] - 1e-12) and np.all(pairs <= k)
    mav = load_model("llama_4_maverick_17b_128e")
    assert float(expert_pairs_per_row(mav, rows=1.0, expert_groups=32.0)) == 1.0


def test_hand_off_is_a_region_width_and_the_rows_over_its_edge():
    m = load_model("llama_4_maverick_17b_128e")
    P, rows = 156.0, 3.0
    got = float(expert_hand_off_cycles(WSE3, m, P=P, rows=rows, expert_groups=32.0))
    assert got == 2.0 * (P * float(WSE3.hop_cycles) + rows * np.ceil(5120 / P))
    assert float(expert_hand_off_cycles(WSE3, m, P=P, rows=rows, expert_groups=0.0)) == 0.0


def test_split_layer_decode_runs_the_busiest_regions_experts_after_the_hand_off():
    """A top-1 model (Maverick) at one row: the experts' GEMVs are those of one expert
    either way, so the split layer costs the hand-off more; a top-8 model (Qwen3-235B) over 8
    regions runs fewer experts per region, so its expert work shrinks."""
    P = 156.0
    mav = load_model("llama_4_maverick_17b_128e")
    whole = decode_layer(WSE3, mav, P=P, batch=1.0, context=1500.0)
    split = decode_layer(WSE3, mav, P=P, batch=1.0, context=1500.0, expert_groups=32.0)
    hand = float(expert_hand_off_cycles(WSE3, mav, P=P, rows=1.0, expert_groups=32.0))
    share = mav.n_moe_layers / mav.n_layers  # decode_layer reports the mean over dense and MoE layers
    assert float(split["cycles"]) == pytest.approx(float(whole["cycles"]) + share * hand, rel=1e-9)
    q = load_model("qwen3_235b_a22b")
    assert float(decode_layer(WSE3, q, P=P, batch=1.0, context=1500.0, expert_groups=8.0)["compute_cycles"]) < \
        float(decode_layer(WSE3, q, P=P, batch=1.0, context=1500.0)["compute_cycles"])


def test_a_sweep_over_large_moe_models_is_one_call():
    r = predict.inference(model="deepseek_v3", hardware="cs3", devices=[48, 64], batch=[1, 8], prompt=[1000, 4000],
                          generate=500, weights="fp16", kv="fp16")
    assert r.tpot_s.shape == (2, 2, 2) and bool(r.fits.all())
    assert np.all(np.isfinite(r.tpot_s.values)) and np.all(r.ttft_s.values > 0)


def test_generate_max_of_a_split_layout_is_what_its_cache_region_holds():
    """The cache sits in each layer's own region (an expert region holds none): the longest
    generation fits and one token more does not (DeepSeek-V3 on 48 CS-3, where the limit is
    its 163,840-token context)."""
    kw = dict(hardware="cs3", model="deepseek_v3", devices=48, batch=1, prompt=1000, weights="fp16", kv="fp16")
    r = predict.inference(generate="max", **kw)
    g, P = float(r.generate), float(r.pe_grid_decode)
    assert float(r.expert_regions_per_layer) > 0 and g > 0
    assert bool(predict.inference(generate=g, pe_grid=P, **kw).fits)
    assert not bool(predict.inference(generate=g + 1, pe_grid=P, **kw).fits)
