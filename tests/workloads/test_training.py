"""Training-step arithmetic: FLOPs against 6·N·tokens, ZeRO memory against closed forms,
pipeline bubbles against (pp-1)/(m+pp-1) and its interleaved form, bounds."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_model


def _train(**kw):
    args = dict(hardware="h100_sxm", model="llama_3_8b", tp=1, pp=1, seq_len=4096, global_batch=64, micro_batch=1)
    args.update(kw)
    return predict.training(**args)


def test_model_flops_are_6_n_tokens_plus_attention():
    """PaLM Appendix B convention: 6·N·tokens + 12·L·H·h·S·tokens (no causal halving)."""
    m = load_model("llama_3_8b")
    ds = _train(dp=8)
    tokens = 64 * 4096
    expected = 6 * m.n_params_active * tokens + 12 * m.n_layers * m.n_heads * m.head_dim * 4096 * tokens
    assert float(ds.model_flops) == pytest.approx(expected, rel=1e-12)
    assert float(ds.model_flops_per_s_per_device) == pytest.approx(expected / float(ds.step_time_s) / 8)
    assert float(ds.mfu) == pytest.approx(expected / float(ds.step_time_s) / 8 / 989.4e12)


@pytest.mark.parametrize("zero,expected_bytes_per_param", [
    # Rajbhandari et al. 2020 (ZeRO) Table 1 with K = 12 and Nd = 8, gradients in fp32 as
    # Megatron-LM keeps them for bf16 (4 bytes, not the paper's fp16 2): (2 + 4 + K) = 18,
    # ZeRO-1: 2 + 4 + 12/8, ZeRO-2: 2 + (4 + 12)/8, ZeRO-3: (2 + 4 + 12)/8
    (0, 18.0), (1, 2 + 4 + 12 / 8), (2, 2 + 16 / 8), (3, 18 / 8)])
def test_zero_memory_closed_forms(zero, expected_bytes_per_param):
    m = load_model("llama_3_8b")
    ds = _train(dp=8, zero=zero)
    assert float(ds.weights_optimizer_per_device_bytes) == pytest.approx(m.n_params * expected_bytes_per_param)
    parts = sum(float(ds[f"{k}_per_device_bytes"]) for k in ("weights", "grads", "optimizer"))
    assert parts == pytest.approx(float(ds.weights_optimizer_per_device_bytes))
    assert float(ds.memory_per_device_bytes) == pytest.approx(parts + float(ds.activations_per_device_bytes))


@pytest.mark.parametrize("pp,n_micro,v", [(4, 8, 1), (8, 16, 1), (8, 16, 2), (4, 32, 4)])
def test_pipeline_bubble_fraction(pp, n_micro, v):
    """1F1B: (pp-1)/(m+pp-1); interleaved with v virtual stages: (pp-1)/(v·m+pp-1)
    (Narayanan et al. SC21, section 2.2)."""
    ds = _train(model="llama_3_70b", tp=8, pp=pp, dp=1, global_batch=n_micro, virtual_stages=v)
    assert float(ds.bubble_fraction) == pytest.approx((pp - 1) / (v * n_micro + pp - 1), rel=1e-9)


def test_recompute_and_zero3_costs_show_where_they_should():
    none = _train(dp=8, recompute="none")
    full = _train(dp=8, recompute="full")
    assert float(full.recompute_s) == pytest.approx(float(full.forward_s))
    assert float(full.step_time_s) > float(none.step_time_s)
    assert float(full.activations_per_device_bytes) < float(none.activations_per_device_bytes)
    assert float(full.hfu) > float(full.mfu) and float(none.hfu) == pytest.approx(float(none.mfu))


def test_never_faster_than_peak_and_scaling_dp():
    ds = _train(dp=[1, 8, 64, 512], global_batch=1024)
    assert np.all(ds.mfu.values < 1.0)
    # More DP replicas: more tokens/s in total, not more per device.
    assert np.all(np.diff(ds.tokens_per_s.values) > 0)
    assert np.all(np.diff(ds.tokens_per_s_per_device.values) <= 1e-9 * ds.tokens_per_s_per_device.values[1:])


def test_dp_across_nodes_costs_more_than_inside_one():
    """The DP group of TP=8 ranks spans nodes: its gradient all-reduce runs on the NICs."""
    inside = _train(model="llama_3_70b", tp=1, pp=1, dp=8, global_batch=64, zero=1)
    across = _train(model="llama_3_70b", tp=8, pp=1, dp=8, global_batch=64, zero=1)
    per_byte_inside = float(inside.dp_comm_s) / (70.55e9 / 1)
    per_byte_across = float(across.dp_comm_s) / (70.55e9 / 8)
    assert per_byte_across > per_byte_inside


def test_bad_input():
    with pytest.raises(InputError, match="zero"):
        _train(dp=8, zero=4)
    with pytest.raises(InputError, match="recompute"):
        _train(dp=8, recompute="some")
    flagged = _train(tp=3)  # a layout that cannot run is a flagged point, not an error
    assert not bool(flagged.fits) and "tp=3 does not divide" in flagged.reason.item()
    ds = _train(dp=8, global_batch=4)  # fewer sequences than dp x micro_batch
    assert not bool(ds.fits) and "global_batch" in ds.reason.item()


def test_model_dict_outside_the_catalog():
    spec = dict(name="my_1b", n_layers=16, d_model=2048, n_heads=16, n_kv_heads=4, head_dim=128, d_ff=8192,
                vocab_size=32000)
    ds = _train(model=spec, dp=8)
    assert bool(ds.fits) and float(ds.step_time_s) > 0
    with pytest.raises(ValueError, match="bogus"):
        _train(model=dict(spec, bogus=1), dp=8)


def test_output_layer_is_timed_and_counted_once():
    """The logits GEMM and its two backward GEMMs: 6·V·D FLOPs per token, already inside
    6·N (tied embeddings count V·D once); its time shows as output_layer_s and grows with the
    vocabulary."""
    small = _train(dp=8, model=dict(load_model("llama_3_8b").__dict__, name="v32k", vocab_size=32000))
    big = _train(dp=8)  # vocab 128,256
    assert 0 < float(small.output_layer_s) < float(big.output_layer_s)
    assert float(big.output_layer_s) < float(big.step_time_s)
    # At least the GEMMs' FLOPs at peak: 6·T·V·D / peak per device.
    m = load_model("llama_3_8b")
    tokens_per_device = 64 * 4096 / 8
    assert float(big.output_layer_s) >= 6 * tokens_per_device * m.vocab_size * m.d_model / 989.4e12


def test_overlapped_collectives_slow_compute_by_the_sms_they_hold():
    """Compute that overlaps a collective runs on n_sms - collective_sms SMs: the step grows
    by overlapped seconds x collective_sms / n_sms (H100: 24 of 132)."""
    ds = _train(dp=8, zero=3)
    overlapped = float(ds.dp_comm_s) - float(ds.dp_comm_exposed_s)
    assert overlapped > 0
    assert float(ds.overlap_contention_s) == pytest.approx(overlapped * 24 / 132, rel=1e-9)
    assert float(_train(dp=1, zero=3).overlap_contention_s) == 0.0


def test_zero3_gathers_every_micro_batch_and_reduces_fp32_gradients():
    """FSDP FULL_SHARD re-gathers bf16 weights for each micro-batch's forward and backward
    and reduce-scatters its fp32 gradients: traffic per step grows with the micro-batches;
    ZeRO-0 all-reduces once per step."""
    one = _train(dp=8, zero=3, global_batch=8)
    four = _train(dp=8, zero=3, global_batch=32)
    assert float(four.dp_comm_s) == pytest.approx(4 * float(one.dp_comm_s), rel=1e-9)
    z0_one, z0_four = _train(dp=8, zero=0, global_batch=8), _train(dp=8, zero=0, global_batch=32)
    assert float(z0_four.dp_comm_s) == pytest.approx(float(z0_one.dp_comm_s), rel=1e-9)


def test_attention_kernel_generation():
    """FlashAttention-1-class kernels (and the Triton port) run at 40/73 of FlashAttention-2's
    efficiency (FA2 paper: 25-40% vs 50-73% of A100 peak): slower steps, more so at long
    sequences, where attention is a larger share."""
    def ratio(seq):
        f1 = _train(dp=8, seq_len=seq, global_batch=8, attention="flash1")
        f2 = _train(dp=8, seq_len=seq, global_batch=8, attention="flash2")
        return float(f1.step_time_s) / float(f2.step_time_s)
    assert 1.0 < ratio(2048) < ratio(32768)
    with pytest.raises(InputError, match="attention"):
        _train(dp=8, attention="flash9")


def test_materialized_attention_moves_its_scores():
    """Pre-flash attention writes the S x S scores: at a fixed token count its extra time
    grows with S (scores per token = heads x S), it keeps 5 bytes per score for backward
    without recomputation, and selective recomputation drops them (Korthikanti et al. 2022)."""
    def extra(seq):
        m = _train(dp=8, seq_len=seq, global_batch=65536 // seq * 8, attention="materialized")
        f = _train(dp=8, seq_len=seq, global_batch=65536 // seq * 8, attention="flash2")
        return float(m.step_time_s) - float(f.step_time_s)
    assert 0 < extra(1024) < extra(4096)
    kept = _train(dp=8, attention="materialized", recompute="none")
    flash = _train(dp=8, attention="flash2", recompute="none")
    m = load_model("llama_3_8b")
    scores = 5 * m.n_heads * 4096 * 4096 * m.n_layers  # one micro-batch of one sequence
    assert float(kept.activations_per_device_bytes) - float(flash.activations_per_device_bytes) == pytest.approx(scores)
    sel = _train(dp=8, attention="materialized", recompute="selective")
    assert float(sel.activations_per_device_bytes) < float(kept.activations_per_device_bytes)


def test_wafer_training_reports_the_gpu_parts():
    """CS systems report the same step parts as GPUs: the recomputed forward of every layer
    under full recomputation (the LM head is not recomputed; HFU = 4/3 MFU, the GPU
    convention), zero bubble, exposed DP comm and optimizer (SwarmX reduces on the way to
    MemoryX, which runs the optimizer under the backward pass)."""
    full = predict.training(hardware="cs3", model="llama_3_8b", devices=2, seq_len=4096, global_batch=64,
                            recompute="full")
    none = predict.training(hardware="cs3", model="llama_3_8b", devices=2, seq_len=4096, global_batch=64,
                            recompute="none")
    assert 0.9 * float(full.forward_s) < float(full.recompute_s) < float(full.forward_s)
    assert float(none.recompute_s) == 0.0
    assert float(full.hfu) == pytest.approx(float(full.mfu) * 4 / 3) and float(none.hfu) == pytest.approx(float(none.mfu))
    for part in ("pipeline_bubble_s", "dp_comm_exposed_s", "optimizer_s"):
        assert float(full[part]) == 0.0


def test_context_parallel_ranks_share_the_zero_shards():
    """CP ranks hold the same weights as DP ranks: ZeRO shards the optimizer state over
    dp·cp (Megatron-Core's data-parallel-with-context-parallel group)."""
    m = load_model("llama_3_8b")
    ds = _train(dp=4, cp=2, zero=1, seq_len=8192, global_batch=64)
    assert float(ds.optimizer_per_device_bytes) == pytest.approx(m.n_params * 12 / 8)
    assert float(ds.grads_per_device_bytes) == pytest.approx(m.n_params * 4)


def test_fp8_keeps_gemm_inputs_in_one_byte():
    """FP8 training saves the four GEMM inputs per layer (attention and MLP inputs, attention
    output, activation output) in FP8: D + H·h_v + D + F bytes less per token and layer."""
    m = load_model("llama_3_8b")
    bf16 = _train(dp=8, precision="bf16")
    fp8 = _train(dp=8, precision="fp8")
    tokens = 4096  # one micro-batch of one sequence in flight
    saved = (2 * m.d_model + m.n_heads * m.v_dim + m.d_ff) * tokens * m.n_layers
    got = float(bf16.activations_per_device_bytes) - float(fp8.activations_per_device_bytes)
    assert got == pytest.approx(saved)


@pytest.mark.parametrize("ep", [1.0, 4.0, 8.0])
def test_expert_parallel_layers_keep_their_flops(ep):
    """Expert parallelism moves the routed experts' work between devices, never adds or drops
    it: a DeepSeek-V3 MoE layer's GEMM FLOPs on one device are 2 T (non-routed weights / tp +
    k x 3 D F_e), the routed part scaled by the busiest expert rank's share of the T k ep
    pairs (Binomial(T k ep, 1/ep), its expected maximum: +0.3-0.5% at ep 4-8 for T = 4096),
    and with ep > 1 each device's experts see ep times the tokens each (fewer, larger GEMMs),
    so the layer is not slower than at ep = 1."""
    from workbench.backends import numbers
    from workbench.specs import load_model
    from workbench.workloads import ops
    from workbench.workloads.training import layer_forward
    hw, model = numbers("b200"), load_model("deepseek_v3")
    T = 4096.0
    f = layer_forward(hw, model, tokens=T, seq=4096.0, tp=1.0, cp=1.0, math="fp8", moe=True, ep=ep)
    dense = sum(mm.k * mm.n * mm.share for mm in ops.layer_matmuls(model, moe=True) if not mm.routed)
    routed = model.n_active_experts * 3 * model.expert_width * model.d_ff_expert
    pairs, _ = ops.busiest_rank_experts(n_experts=model.n_experts, top_k=model.n_active_experts, tokens=T * ep, ep=ep)
    busiest = float(pairs) / (T * model.n_active_experts)
    assert 1.0 <= busiest < 1.01
    assert f["gemm_flops"] == pytest.approx(2.0 * T * (dense + routed * busiest), rel=1e-9)
    one = layer_forward(hw, model, tokens=T, seq=4096.0, tp=1.0, cp=1.0, math="fp8", moe=True, ep=1.0)
    assert f["gemm_s"] <= one["gemm_s"] * (1 + 1e-12)


def test_moe_host_time_is_the_local_experts_of_each_stage_per_micro_batch():
    """The exposed host time of Megatron-Core's eager MoE path (workloads/training.
    MOE_HOST_S_PER_LOCAL_EXPERT): c x (E / ep) local experts x the stage's MoE layers per
    micro-batch, 4/3 of it under full recomputation (the forward's launches again), less the
    experts' GEMM time it overlaps (Qwen3-30B-A3B's 128 experts of width 768 at 4,096 tokens:
    microseconds each, so all of it shows; Mixtral's 8 experts of width 14,336 hide it), none
    for a dense model or at c = 0. It sits in the micro-batch slot, so the pipeline bubble
    carries its (pp - 1) / v share: the step grows by (n_micro + (pp - 1) / v) x the slot's
    share, exactly."""
    from workbench.workloads.training import MOE_HOST_S_PER_LOCAL_EXPERT as c
    m = load_model("qwen3_30b_a3b")  # 128 experts, 48 MoE layers
    kw = dict(hardware="b200", model="qwen3_30b_a3b", seq_len=4096, global_batch=256, micro_batch=1, precision="fp8",
              recompute="selective", dp=8)
    for ep, pp, v in ((8, 1, 1), (4, 2, 1), (8, 2, 2)):
        ds = predict.training(**kw, ep=ep, pp=pp, virtual_stages=v)
        off = predict.training(**kw, ep=ep, pp=pp, virtual_stages=v, moe_host_s_per_local_expert=0.0)
        n_micro = 256 / (8 * 1)
        per_slot = c * m.n_experts / ep * m.n_moe_layers / pp
        assert 0.9 < float(ds.moe_host_s) / (n_micro * per_slot) < 1.0  # the experts' GEMMs hide a few %
        assert float(off.moe_host_s) == 0.0
        assert float(ds.step_time_s - off.step_time_s) == pytest.approx(
            float(ds.moe_host_s) * (n_micro + (pp - 1) / v) / n_micro, rel=1e-9)
    full = predict.training(**dict(kw, recompute="full"), ep=8)
    assert 0.9 < float(full.moe_host_s) / (4 / 3 * 256 / 8 * c * 128 / 8 * 48) < 1.0
    assert float(_train(dp=8).moe_host_s) == 0.0  # dense Llama-3-8B
    mixtral = predict.training(hardware="h100_sxm", model="mixtral_8x7b", tp=2, pp=2, dp=16, seq_len=4096,
                               global_batch=512, recompute="selective")
    assert float(mixtral.moe_host_s) == 0.0
    with pytest.raises(InputError, match="moe_host_s_per_local_expert=-1"):
        predict.training(**kw, ep=8, moe_host_s_per_local_expert=-1.0)
    with pytest.raises(InputError, match="moe_host_s_per_local_expert=0.001 is not allowed on 'cs3'"):
        predict.training(hardware="cs3", model="llama_3_8b", moe_host_s_per_local_expert=1e-3)


def test_the_expert_all_to_all_carries_a_tp_ranks_own_tokens():
    """Under sequence parallelism a TP rank holds T / tp of the micro-batch at the MoE layer's
    input and dispatches those: the all-to-all time with tp = 2 equals that of tp = 1 at half
    the tokens (same EP group, same micro-batch count), 4 x (dispatch + combine, forward and
    backward) per MoE layer of the stage."""
    kw = dict(hardware="h100_sxm", model="qwen3_235b_a22b", pp=8, ep=32, expert_tp=1, seq_len=4096, micro_batch=1,
              precision="fp8", recompute="selective", virtual_stages=4)  # expert_tp 1: EP32 on 32 ranks a stage
    two = predict.training(**kw, tp=2, dp=16, global_batch=8192)
    one = predict.training(**dict(kw, seq_len=2048), tp=1, dp=32, global_batch=16384)
    assert float(two.n_micro_batches) == float(one.n_micro_batches) == 512
    assert float(two.ep_comm_s) == pytest.approx(float(one.ep_comm_s), rel=1e-12)


def test_expert_states_shard_over_their_expert_data_parallel_group():
    """Megatron-Core replicates each routed expert over the tp·dp·cp / (expert_tp·ep) ranks of
    its expert-data-parallel group, which shards its ZeRO-1 optimizer states; the dense
    weights' over dp·cp. Qwen3-30B-A3B on 8 GPUs at EP8: experts unsharded (group of one),
    12 B a parameter of E/8 expert parameters plus the dense ones' 12/8 B: ~46 GB a GPU."""
    from workbench.specs import load_model
    m = load_model("qwen3_30b_a3b")
    E = m.n_moe_layers * m.n_experts * m.expert_params
    dense = m.n_params - E
    r = predict.training(hardware="h100_sxm", model="qwen3_30b_a3b", tp=1, dp=8, ep=8, seq_len=4096,
                         global_batch=512, zero=1)
    assert float(r.optimizer_per_device_bytes) == pytest.approx(12.0 * (dense / 8 + E / 8), rel=1e-9)
    assert float(r.grads_per_device_bytes) == pytest.approx(4.0 * (dense + E / 8), rel=1e-9)
    assert not bool(r.fits)  # NVIDIA runs it on 16 H100 (Megatron-Bridge perf_recipes/qwen/h100)
    # expert_tp splits each expert: on 16 ranks at tp 2, EP8 x expert_tp 2 fills them, the
    # expert-data-parallel group is one rank again, each expert half a device's
    r2 = predict.training(hardware="h100_sxm", model="qwen3_30b_a3b", tp=2, dp=8, ep=8, seq_len=4096,
                          global_batch=512, zero=1)
    assert float(r2.optimizer_per_device_bytes) == pytest.approx(12.0 * (dense / 2 / 8 + E / 16), rel=1e-9)


def test_sliding_window_layers_train_over_their_band():
    """A sliding-window layer attends its window, not the whole causal prefix (Megatron-Core
    window_size; Megatron-Bridge flop_utils counts SWA layers by their window): Mistral-7B's
    4k window at 32k tokens trains faster than the same model without it, and the step's
    attention is the layer kinds' weighted mean (every Mistral layer slides: all of it)."""
    import dataclasses
    from workbench.specs import load_model
    m = load_model("mistral_7b")
    full = dataclasses.replace(m, n_sliding_layers=0, sliding_window=0)
    kw = dict(hardware="h100_sxm", seq_len=32768, devices=64, tp=8, global_batch=64, recompute="full")
    windowed, dense = (predict.training(model=x, **kw) for x in (m, full))
    assert float(windowed.step_time_s) < 0.9 * float(dense.step_time_s)
    short = predict.training(model=m, **dict(kw, seq_len=4096))  # the window binds nowhere: the same as without
    assert float(short.step_time_s) == pytest.approx(float(predict.training(model=full, **dict(kw, seq_len=4096))
                                                           .step_time_s), rel=1e-9)


def test_the_reported_pipeline_sends_are_the_steps():
    """pp_comm_s is the send/recv the step holds: one exposed each way per micro-batch slot
    (interleaving's v-fold sends overlap the other chunks' compute, Megatron-Core
    overlap_p2p_comm) over the n_micro slots and the (pp - 1) / v slots of the bubble; it had
    divided the slots' sends by v while the step kept them whole."""
    kw = dict(hardware="h100_sxm", model="llama_3_70b", tp=8, pp=4, dp=4, seq_len=4096, global_batch=256)
    r = {v: predict.training(virtual_stages=v, **kw) for v in (1, 5)}
    slot_p2p = {v: float(r[v].pp_comm_s) / (float(r[v].n_micro_batches) + 3 / v) for v in r}
    assert slot_p2p[5] == pytest.approx(slot_p2p[1], rel=1e-9) and slot_p2p[1] > 0
    assert float(r[5].pipeline_bubble_s) < float(r[1].pipeline_bubble_s)
    for v in r:  # dense: the slots' communication is their sends alone
        assert float(r[v].slot_comm_s) == pytest.approx(float(r[v].n_micro_batches) * slot_p2p[v], rel=1e-9)


def test_the_busiest_pipeline_stage_holds_the_embedding():
    """Past one stage, a stage holds its share of the layers and the first the embedding (the
    last the output layer): Llama-3-8B on 4 stages holds 8 layers and 128,256 x 4,096
    embedding weights on the busiest, 2.27 B parameters, not a quarter of 8.03 B."""
    from workbench.specs import load_model
    m = load_model("llama_3_8b")
    r = predict.training(hardware="h100_sxm", model="llama_3_8b", pp=4, devices=4, seq_len=4096, global_batch=64)
    stage = (m.n_params - m.embedding_params) / 4 + m.vocab_size * m.d_model
    assert float(r.weights_per_device_bytes) == pytest.approx(2.0 * stage, rel=1e-12)
    assert 2.26e9 < stage < 2.28e9
    one = predict.training(hardware="h100_sxm", model="llama_3_8b", devices=1, seq_len=4096, global_batch=64)
    assert float(one.weights_per_device_bytes) == pytest.approx(2.0 * m.n_params, rel=1e-12)  # one stage: all


def test_bf16_gradients_halve_the_gradient_buffer_and_its_reduction():
    """grad_bytes_per_param=2 (Megatron-Bridge's perf recipes: ddp.grad_reduce_in_fp32 False)
    holds and reduces bf16 gradients: the gradient bytes halve exactly, the ZeRO-1
    reduce-scatter moves half the bytes (slower than half the time: latency), the
    optimizer states stay; any other value is refused."""
    kw = dict(hardware="h100_sxm", model="llama_3_8b", devices=64, seq_len=4096, global_batch=256, zero=1)
    fp32, bf16 = (predict.training(grad_bytes_per_param=b, **kw) for b in (4, 2))
    assert float(bf16.grads_per_device_bytes) == pytest.approx(0.5 * float(fp32.grads_per_device_bytes), rel=1e-12)
    assert float(bf16.optimizer_per_device_bytes) == float(fp32.optimizer_per_device_bytes)
    assert 0.5 * float(fp32.dp_comm_s) < float(bf16.dp_comm_s) < float(fp32.dp_comm_s)
    assert float(predict.training(**kw).grads_per_device_bytes) == float(fp32.grads_per_device_bytes)  # default fp32
    with pytest.raises(InputError, match="grad_bytes_per_param=3 is not known; allowed: 2, 4"):
        predict.training(grad_bytes_per_param=3, **kw)
