"""GPU training step: 3D/4D parallelism (TP, PP with 1F1B or interleaved schedules, DP with
ZeRO 0-3, CP, EP), activation recomputation, mixed precision.

Conventions (stated, and used by the tests):
- model FLOPs per step = 6·N·tokens + 12·L·H·h·S·tokens (PaLM Appendix B / llm-foundry:
  attention counted without causal halving); N = all parameters touched per token
  (active parameters for MoE), embeddings included. mfu = model FLOPs / (step · peak).
- hfu adds the recomputed forward work (full recompute: one more forward; selective: the
  attention core), as Megatron-LM's reported TFLOP/s do.
- memory per parameter: 2 (bf16 weights) + 4 (fp32 gradients, Megatron-LM's default for
  bf16) + 12 (fp32 master, momentum, variance: Rajbhandari et al. 2020, ZeRO, K = 12) =
  18; ZeRO-1 shards the 12, ZeRO-2 also the gradients, ZeRO-3 also the weights, over the
  ranks that hold the same weights: dp·cp of them for the dense weights, the
  tp·dp·cp / (expert_tp·ep) of its expert-data-parallel group for a routed expert.
- the output layer (logits GEMM, its two backward GEMMs, an fp32 softmax cross-entropy)
  and the embedding run on the last and first pipeline stage; the slot is the slower stage.
- data parallelism moves bf16 weights and fp32 gradients (Megatron-LM reduces bf16
  gradients in fp32 unless told otherwise: arguments.py sets
  accumulate_allreduce_grads_in_fp32). ZeRO-0 all-reduces once per step, ZeRO-1 reduce-
  scatters once and all-gathers the updated weights; ZeRO-2 reduce-scatters every micro-
  batch; ZeRO-3 (FSDP FULL_SHARD) gathers weights for forward and backward and reduce-
  scatters every micro-batch (FSDP's no_sync would keep whole gradients, which ZeRO-3
  exists to avoid). Collectives overlapped with compute hold hw.collective_sms SMs, so the
  compute they overlap runs on the rest (see overlap_penalty).
- activations: the tensors each layer keeps for backward, from the model's widths
  (Korthikanti et al. 2022 count 34·s·b·h for GPT; here summed per tensor), all divided by
  TP (sequence parallelism) and CP; full recompute keeps only the layer input; a hybrid's
  linear layers also keep their chunk states (chunk_state_bytes_per_token); the first
  pipeline stage holds min(pp, micro-batches) micro-batches in flight.
- MoE: the routed experts under expert parallelism (E/ep experts a device), their all-to-all,
  and the host launches of each local expert that outlast the experts' GEMMs
  (MOE_HOST_S_PER_LOCAL_EXPERT, Megatron-Core's eager MoE path), in each micro-batch slot.
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..errors import check_choice
from ..primitives.attention import ATTENTION_KERNELS, FLASH_BACKWARD, attention_prefill
from ..primitives.collectives import collective, strided_collective
from ..primitives.gemm import elementwise, gemm
from ..primitives.kernel_fits import LINEAR_CHUNK
from ..primitives.hardware_numbers import GpuNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from . import ops
from .inference import MEMORY_UTILIZATION
from .layers import attention_math, layer_elementwise, layer_gemms, linear_layers, tp_allreduce
from .parts import add

RECOMPUTE = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp8")
# bf16 weights, fp32 gradients (Megatron-LM accumulates and reduces bf16 gradients in fp32:
# arguments.py sets accumulate_allreduce_grads_in_fp32), fp32 master, momentum and variance
# (ZeRO paper K = 12): 18 bytes per parameter.
BYTES_PER_PARAM = {"weights": 2.0, "grads": 4.0, "optimizer": 12.0}
# gradient buffers a run may keep: bf16 (Megatron-Bridge's grad_reduce_in_fp32=False) or fp32 (the default above)
GRAD_BYTES = (int(DTYPE_BYTES["bf16"]), int(BYTES_PER_PARAM["grads"]))  # 2, 4
WEIGHT_COMM_BYTES = BYTES_PER_PARAM["weights"]  # bf16 weights gathered (ZeRO-1/3)
# Softmax cross-entropy over fp32 logits, bytes per logit each way (PyTorch/Megatron kernels,
# unfused): forward upcast (read 2, write 4) and log-softmax (three reads, one write: 16);
# backward the nll gradient (write 4), log-softmax backward (read 8, write 4), downcast (read 4, write 2).
CROSS_ENTROPY_BYTES = {"forward": 22.0, "backward": 22.0}
ADAM_BYTES_PER_PARAM = 30.0  # read master, grad, m, v (16 B), write master, m, v, bf16 weight (14 B)
BUCKET_PARAMS = 40e6  # Megatron-LM DDP bucket size: the last bucket's reduce is exposed
# Host time Megatron-Core's eager MoE path leaves exposed, per local expert of an MoE layer per
# micro-batch (its forward and backward), in seconds. The routed experts run as
# Transformer Engine's GroupedLinear, "multiple local GEMM kernels in multiple streams"
# (Megatron-LM --moe-grouped-gemm help), each expert's GEMMs (forward, dgrad, wgrad of both
# linears) with their FP8/MXFP8 quantization and scale-swizzle kernels launched from Python,
# after the dispatcher has synchronised with the host to learn each expert's token count
# (TE's m_splits): the GPU waits on the host there. NVIDIA's DeepSeek-V3-on-GB200 guide
# (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization: "the CPU kernel launch speed
# cannot keep up with the kernel execution speed on GPU ... FP8 training and fine-grained MoE
# models introduce more quantization, router, and other kernels"; after CUDA graphs "only the
# routed experts part still has some CPU overhead") measured it as the largest loss of its
# baseline. Exposed where the launches take longer than the experts' GEMMs they launch (the
# GPU drains the queue while the host launches; large experts, as Mixtral's, hide them). One
# named constant of the framework, fitted by calibrate/training_host.py to the MoE rows of the
# Megatron-Bridge 25.11 table (NM05-NM08, NM12-NM16, NM20-NM26), with the GPUs' kernel tables
# (predict.training's default framework, the rows' bf16 gradient reductions): their median
# |speed error| 34.6% without the term, 9.3% with it; held out by row 9.3%, by model 14.1%, by
# GPU 23.3% (refitted when the experts' gradients and ZeRO states moved to their expert-data-
# parallel group and the rows' gradients to bf16; before, also 0.41 ms: 32.8, 9.5, 10.0, 14.4,
# 25.0%; under the analytical efficiencies then: 0.45 ms, 10.2%; 11.1 / 16.5 / 11.1%). 0.41 ms
# is ~20 eager launches of ~20 us a local expert. Full recomputation replays the forward's
# third of the launches.
MOE_HOST_S_PER_LOCAL_EXPERT = 4.1e-4
GEMM_BACKWARD = 2.0  # dgrad + wgrad, each the forward GEMM's FLOPs
# Backward of a hybrid's linear token mixing (Gated DeltaNet, KDA, Mamba-2 chunked scans) over
# its forward: FlashAttention's ratio (primitives/attention.FLASH_BACKWARD, five matmuls against
# two), ASSUMED: the chunked rule's backward recomputes each chunk's state and runs the
# dq, dk, dv and gate-gradient products, the same matmul pattern; no measured backward table.
LINEAR_BACKWARD = FLASH_BACKWARD


def layer_forward(hw, model, *, tokens, seq, tp, cp, math, moe, attention="flash2", ep=1.0, expert_tp=None) -> dict:
    """One layer's forward on one device: T = micro_batch·S/cp tokens; ring attention keeps
    the causal work balanced, S²/(2·cp) query-key pairs per sequence on each CP rank.
    Routed experts (Megatron-Core expert parallelism; expert_tp, --expert-tensor-parallel-size,
    None: tp, Megatron-LM's default, megatron/training/arguments.py): the expert_tp x ep devices of
    an expert group hold E/ep experts each, every expert split expert_tp ways, and run the
    T·ep·expert_tp/tp tokens routed to them (under sequence parallelism a TP rank dispatches
    its T/tp), each expert T k ep / E of them at expert_tp = tp; every other matmul runs on
    the TP group's own T tokens."""
    a_bytes = 2.0
    mats = ops.layer_matmuls(model, moe=moe)
    kw = dict(math=math, w_bytes=2.0, a_bytes=a_bytes, moe=moe)
    routed = [mm for mm in mats if mm.routed]
    g = layer_gemms(hw, model, tokens=tokens, tp=tp, matmuls=[mm for mm in mats if not mm.routed], **kw)
    routed_s = 0.0
    if routed:
        etp = tp if expert_tp is None else expert_tp
        experts = layer_gemms(hw, model, tokens=tokens * ep * etp / tp, tp=etp * ep, ep=ep, matmuls=routed, **kw)
        g, routed_s = add(g, experts), experts["time_s"] + experts["overhead_s"]
    q = seq / cp

    def kind(shape, window):  # one kind of softmax layer (full or sliding-window: its band only)
        return attention_prefill(hw=hw, batch=tokens / q, seq_len=q, context=seq / 2.0 - q / 2.0,
                                 n_heads=shape[0] / tp, head_dim=shape[2], v_head_dim=shape[3],
                                 n_kv_heads=np.maximum(shape[1] / tp, 1.0), causal=True, window=window,
                                 dtype=attention_math(math), act_bytes=a_bytes, kv_bytes=a_bytes, kernel=attention)
    kinds = model.softmax_kinds if model.n_sliding_layers and not model.is_mla else [(1, np.inf, False)]
    n_soft = sum(n for n, _, _ in kinds)
    each = [(n / n_soft, kind(model.attention_shape(sliding=sl), w if np.isfinite(w) else 0.0)) for n, w, sl in kinds]
    att = {k: sum(share * a[k] for share, a in each) for k in ("time_s", "overhead_s", "backward_s", "flops")}
    fwd_s, bwd_s, att_flops = att["time_s"] + att["overhead_s"], att["backward_s"] + att["overhead_s"], att["flops"]
    if model.n_linear_layers:  # a hybrid: softmax attention on its share of the layers, the linear mixers on theirs
        soft = model.n_full_attention_layers / model.n_layers
        lin = linear_layers(hw, model, tokens=tokens, sequences=tokens / q, tp=tp, math=math, a_bytes=a_bytes)
        fwd_s = soft * fwd_s + lin["time_s"] + lin["overhead_s"]
        bwd_s = soft * bwd_s + LINEAR_BACKWARD * lin["time_s"] + lin["overhead_s"]
        att_flops = soft * att_flops + lin["flops"]
    e = layer_elementwise(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe)
    comm = tp_allreduce(hw, model, tokens=tokens, tp=tp, a_bytes=a_bytes, moe=moe)["comm_s"]
    return {"gemm_s": g["time_s"] + g["overhead_s"], "attention_s": fwd_s, "attention_backward_s": bwd_s,
            "elementwise_s": e["time_s"] + e["overhead_s"], "tp_comm_s": comm,
            "gemm_flops": g["flops"], "attention_flops": att_flops, "routed_gemm_s": routed_s}


def output_layer(hw, model, *, tokens, tp, math) -> dict:
    """Logits GEMM (vocab split over TP), softmax cross-entropy and embedding lookup for one
    micro-batch on one device: forward and backward seconds. Backward: dX (T x D from V/tp)
    and dW (V/tp x D over T tokens) GEMMs; the embedding gradient is scatter-added in fp32."""
    V, D = model.vocab_size / tp, model.d_model
    g = dict(hw=hw, dtype=math, a_bytes=2.0, b_bytes=2.0, c_bytes=2.0)
    logits = gemm(m=tokens, n=V, k=D, **g)
    d_x, d_w = gemm(m=tokens, n=D, k=V, **g), gemm(m=V, n=D, k=tokens, **g)
    ce = {k: elementwise(hw=hw, nbytes=tokens * V * b, count=3.0) for k, b in CROSS_ENTROPY_BYTES.items()}
    emb_fwd = elementwise(hw=hw, nbytes=tokens * D * 4.0)  # gather rows: read + write bf16
    emb_bwd = elementwise(hw=hw, nbytes=tokens * D * 10.0 + model.vocab_size * D * 4.0 / tp, count=2.0)

    def t(*parts):
        return sum(p["time_s"] + p["overhead_s"] for p in parts)
    return {"forward_s": t(logits, ce["forward"], emb_fwd), "backward_s": t(d_x, d_w, ce["backward"], emb_bwd)}


def overlap_penalty(hw: GpuNumbers, overlapped_comm_s):
    """Extra compute time while collectives run beside it: NCCL's CTAs hold collective_sms
    SMs, so compute advances at (n - c)/n of its rate for the overlapped seconds t and
    finishes t·c/n later. (H100: 24 of 132 SMs, +22% per overlapped second of compute;
    arXiv 2507.03114, 'Characterizing Compute-Communication Overlap in GPU-Accelerated
    Distributed Deep Learning', measures an 18.9% mean compute slowdown when overlapped
    on A100/H100/MI250/MI210.)"""
    return overlapped_comm_s * hw.collective_sms / hw.n_sms


def activation_bytes_per_token_layer(model: ModelSpec, *, tp, cp, recompute: str, attention="flash2", seq=0.0,
                                     precision="bf16"):
    """Bytes a layer keeps per token for backward, divided over TP and CP: 16-bit tensors,
    except that FP8 training keeps the four GEMM inputs (attention and MLP inputs, attention
    output, activation output) in FP8, as Transformer Engine saves them for the weight-
    gradient GEMMs. A materialized attention also keeps its scores: softmax output, dropout
    mask and output (2 + 1 + 2 bytes per query-key pair; Korthikanti et al. 2022,
    5·a·s²·b), which selective recomputation drops."""
    D, H, K, h = model.d_model, model.n_heads, model.n_kv_heads, model.head_dim
    F = ops.widest_mlp(model)
    if recompute == "full":
        return 2.0 * D / (tp * cp)
    gemm_inputs = D + H * model.v_dim + D + F  # attention input, attention output, MLP input, activation output
    per_token = (2 * D  # norm input, attention input
                 + (H + 2 * K) * h  # Q, K, V
                 + H * model.v_dim + D  # attention output, residual
                 + 2 * D  # norm, MLP input
                 + model.mlp_matrices * F)  # gate/up outputs and the activation's output
    fp8_saved = gemm_inputs * 1.0 if precision == "fp8" else 0.0  # bytes saved: 1 instead of 2
    scores = 5.0 * H * seq / cp if (attention == "materialized" and recompute == "none") else 0.0
    return (2.0 * per_token - fp8_saved + scores) / (tp * cp)


def chunk_state_bytes_per_token(model: ModelSpec, seq_len) -> float:
    """Bytes per token a hybrid's linear layer keeps for its backward beyond a softmax
    layer's: the chunked recurrence (Gated DeltaNet, KDA, Mamba-2's SSD) stores the state
    entering each chunk, heads x d_k x d_v at the state's width, once per LINEAR_CHUNK tokens
    (flash-linear-attention's chunk_gated_delta_rule_fwd returns them for its backward;
    mamba_ssm's chunk_state likewise); 0 for a model without linear layers."""
    if not model.n_linear_layers:
        return 0.0 * seq_len
    state = model.linear_value_heads * model.linear_key_head_dim * model.linear_value_head_dim
    return state * model.linear_state_bytes_per_element / np.minimum(LINEAR_CHUNK, seq_len)


def linear_state_bytes_per_token_layer(model: ModelSpec, *, seq_len, recompute: str):
    """The chunk states a layer keeps per token, averaged over the layers (the linear layers'
    share of them); none under full recomputation, which keeps only each block's input."""
    return (recompute != "full") * model.n_linear_layers / model.n_layers * chunk_state_bytes_per_token(model, seq_len)


def training(*, hw: GpuNumbers, model: ModelSpec, tp, pp, dp, cp, ep, expert_tp, seq_len, global_batch, micro_batch,
             precision: str, zero: int, recompute: str, virtual_stages, attention: str = "flash2",
             moe_host_s_per_local_expert=None, grad_bytes_per_param=None) -> dict:
    """One training step; `grad_bytes_per_param` (None: BYTES_PER_PARAM's fp32 4) the gradient
    buffer's and its reduction's bytes a parameter (2: bf16, Megatron-Bridge's perf recipes,
    perf_recipes/_common.py: ddp.grad_reduce_in_fp32 = False)."""
    grad_b = BYTES_PER_PARAM["grads"] if grad_bytes_per_param is None else grad_bytes_per_param
    check_choice("recompute", recompute, RECOMPUTE)
    check_choice("precision", precision, PRECISIONS)
    check_choice("attention", attention, ATTENTION_KERNELS)
    S, mb = seq_len, micro_batch
    n_micro = global_batch / (dp * mb)
    devices = tp * pp * dp * cp
    tokens_mb = mb * S / cp
    math = precision
    L = model.n_layers
    kw = dict(tokens=tokens_mb, seq=S, tp=tp, cp=cp, math=math, attention=attention, ep=ep, expert_tp=expert_tp)
    kinds = ops.layer_kinds(model)  # dense-MLP, MoE and MLP-free layers
    forward = [(n, layer_forward(hw, model, moe=moe, **kw)) for n, moe in kinds]

    def per_stage(key):
        return sum(n * f[key] for n, f in forward) / pp

    f_gemm, f_att, f_elem, f_tp = (per_stage(k) for k in ("gemm_s", "attention_s", "elementwise_s", "tp_comm_s"))
    b_att = per_stage("attention_backward_s")
    # CP: each layer exchanges K and V around the ring (overlapped with attention in Megatron's
    # ring attention; counted exposed only beyond the attention time).
    kv_bytes = tokens_mb * 2 * model.n_kv_heads * model.head_dim / tp * 2.0
    cp_comm = collective(hw=hw, op="all_gather", size=kv_bytes * cp, devices=cp * tp)["time_s"] * L / pp
    cp_exposed = np.maximum(cp_comm - f_att, 0.0) * (cp > 1)
    fwd = f_gemm + f_att + f_elem + f_tp + cp_exposed
    bwd = GEMM_BACKWARD * f_gemm + b_att + 2.0 * f_elem + f_tp + cp_exposed
    recomp = {"none": 0.0 * fwd, "selective": f_att, "full": fwd}[recompute]
    # MoE expert parallelism: all-to-all dispatch and combine, forward and backward. Under
    # sequence parallelism each TP rank holds T / tp of the micro-batch's tokens at the MoE
    # layer's input and dispatches those (Megatron-Core's MoEAlltoAllTokenDispatcher: the
    # all-to-all over the EP group carries a rank's own tokens, k copies each).
    a2a = 0.0
    if model.is_moe:
        moved = tokens_mb / tp * model.expert_width * 2.0 * model.n_active_experts
        a2a = 4.0 * collective(hw=hw, op="all_to_all", size=moved, devices=ep)["time_s"] * model.n_moe_layers / pp
    p2p_bytes = tokens_mb * model.d_model * 2.0 / tp
    # one send each way exposed per micro-batch slot: interleaving sends v times as often
    # (Narayanan et al. 2021, section 2.2) but overlaps them with the other chunks' compute
    # (Megatron-Core overlap_p2p_comm, on for virtual pipelines in the Megatron-Bridge recipes)
    p2p = 2.0 * strided_collective(hw=hw, op="send_recv", size=p2p_bytes, group=2.0, stride=tp * cp)["time_s"] \
        * (pp > 1)
    head = output_layer(hw, model, tokens=tokens_mb, tp=tp, math=math)
    head_fwd, head_bwd = head["forward_s"], head["backward_s"]
    head_recomp = head_fwd if recompute == "full" else 0.0
    fwd, bwd = fwd + head_fwd, bwd + head_bwd  # the last stage, the slowest one
    recomp = recomp + head_recomp
    # the eager launches of each stage's MoE layers' local experts (MOE_HOST_S_PER_LOCAL_EXPERT):
    # exposed where they take longer than the experts' GEMMs they launch (forward and backward)
    # (None: that constant; a dense model has no local experts and no routed GEMMs: 0)
    host_s = MOE_HOST_S_PER_LOCAL_EXPERT if moe_host_s_per_local_expert is None else moe_host_s_per_local_expert
    replays = {"none": 1.0, "selective": 1.0, "full": 4.0 / 3.0}[recompute]
    launches = host_s * replays * model.n_experts / ep * model.n_moe_layers / pp
    moe_host = np.maximum(launches - replays * (1.0 + GEMM_BACKWARD) * per_stage("routed_gemm_s"), 0.0)
    slot = fwd + bwd + recomp + a2a + p2p + moe_host  # one micro-batch through one stage, forward and backward
    bubble = (pp - 1.0) / virtual_stages * slot

    # Data parallel. The dense weights are split over TP x PP and replicated over dp·cp ranks
    # (Megatron-Core's data-parallel-with-context-parallel group, members tp apart: rank order
    # tp-cp-dp-pp); each routed expert over expert_tp ranks and the experts over ep, so each
    # is replicated over the tp·dp·cp / (expert_tp·ep) ranks of its expert-data-parallel group
    # (members expert_tp·ep apart), which reduces its gradients and shards its ZeRO states
    # (Megatron-Core's expert_data_parallel group).
    expert_params = model.n_moe_layers * model.n_experts * model.expert_params
    # the busiest stage: its share of the layers and, past one stage, the embedding (first
    # stage) or the output layer (last: with tied embeddings a copy, Megatron-Core's
    # shared_embedding), where a uniform split had spread them over every stage
    layer_params = model.n_params - expert_params - model.embedding_params
    dense_dev = layer_params / (tp * pp) + np.where(pp > 1, model.vocab_size * model.d_model,
                                                    model.embedding_params) / tp
    groups = (dense_dev, dp * cp, tp), \
        (expert_params / (expert_tp * pp * ep), tp * dp * cp / (expert_tp * ep), expert_tp * ep)  # (params, replicas,
    # stride): a device's parameters of each group, its replicas and the rank distance between them
    params_dev = sum(g[0] for g in groups)

    def dp_op(op, bytes_per_param):
        return sum(np.where(n > 0, strided_collective(hw=hw, op=op, size=n * bytes_per_param, group=r,
                                                       stride=st)["time_s"], 0.0) for n, r, st in groups)

    def sharded(bytes_per_param, shard_from):
        """A part's bytes a device, sharded over the replicas from ZeRO stage shard_from."""
        return sum(n * bytes_per_param / np.where(zero >= shard_from, r, 1.0) for n, r, _ in groups)
    gather = dp_op("all_gather", WEIGHT_COMM_BYTES)
    reduce_scatter = dp_op("reduce_scatter", grad_b)
    # Per micro-batch traffic (overlapped with that micro-batch's compute, one FSDP unit -
    # a layer - or one bucket exposed) and per step traffic (reduced during the last
    # micro-batch's backward; the ZeRO-1/2 weight all-gather after the optimizer is exposed).
    per_micro = np.where(zero >= 3, 2.0 * gather + reduce_scatter, np.where(zero == 2, reduce_scatter, 0.0))
    per_step = np.where(zero == 0, dp_op("all_reduce", grad_b), np.where(zero == 1, reduce_scatter, 0.0))
    after_step = np.where((zero == 1) | (zero == 2), gather, 0.0)
    units = np.where(zero >= 3, L / pp, np.maximum(params_dev / BUCKET_PARAMS, 1.0))
    micro_window = np.where(zero >= 3, fwd + bwd + recomp, bwd)
    micro_exposed = np.maximum(per_micro - micro_window, per_micro / units)
    step_exposed = np.maximum(per_step - bwd, per_step / units)
    dp_traffic = n_micro * per_micro + per_step + after_step
    dp_exposed = n_micro * micro_exposed + step_exposed + after_step
    overlapped = n_micro * (per_micro - micro_exposed) + (per_step - step_exposed)
    cp_overlapped = n_micro * 2.0 * np.minimum(cp_comm, f_att) * (cp > 1)
    contention = overlap_penalty(hw, overlapped + cp_overlapped)
    pipeline = n_micro * slot + bubble + contention

    optimizer = elementwise(hw=hw, nbytes=sharded(ADAM_BYTES_PER_PARAM, 1))["time_s"]
    step = pipeline + dp_exposed + optimizer

    tokens = global_batch * S
    model_flops, attn_flops = ops.training_model_flops(model, tokens=tokens, seq_len=S)
    recompute_flops = {"none": 0.0, "selective": attn_flops / 3.0, "full": model_flops / 3.0}[recompute]
    peak = hw.peak(math)

    # Memory per device.
    shard_from = {"weights": 3, "grads": 2, "optimizer": 1}  # the ZeRO stage that shards each part
    per_part = {f"{k}_per_device_bytes": sharded(grad_b if k == "grads" else BYTES_PER_PARAM[k], shard_from[k])
                for k in BYTES_PER_PARAM}
    state = sum(per_part.values())
    # Megatron-LM: the first stage holds pp micro-batches (1F1B); interleaving adds (pp-1)/(pp·v).
    in_flight = np.minimum(pp, n_micro) * np.where(virtual_stages > 1, 1.0 + (pp - 1.0) / (pp * virtual_stages), 1.0)
    act = (activation_bytes_per_token_layer(model, tp=tp, cp=cp, recompute=recompute, attention=attention, seq=S,
                                            precision=precision)
           + linear_state_bytes_per_token_layer(model, seq_len=S, recompute=recompute) / (tp * cp)) \
        * mb * S * (L / pp) * in_flight
    logits = mb * S / cp * model.vocab_size / tp * 4.0
    used = state + act + logits
    capacity = hw.hbm_capacity_bytes * MEMORY_UTILIZATION
    supported = np.isfinite(peak)
    fits = (used <= capacity) & supported & (n_micro >= 1)
    shape = np.broadcast_shapes(np.shape(used), np.shape(supported), np.shape(capacity), np.shape(n_micro))
    reason = choose([(np.broadcast_to(~supported, shape), f"no {math} math units on {hw.label}"),  # a knob may sweep alone
                     (np.broadcast_to(n_micro < 1, shape), "global_batch < dp x micro_batch"),
                     (np.broadcast_to(used > capacity, shape), "weights + optimizer + activations exceed memory")], "")
    return {
        **step_rates(step=step, tokens=tokens, samples=global_batch, devices=devices, model_flops=model_flops,
                     recompute_flops=recompute_flops, peak=peak),
        "memory_per_device_bytes": used, "memory_capacity_bytes": capacity,
        "weights_optimizer_per_device_bytes": state, "activations_per_device_bytes": act + logits,
        **per_part,
        "fits": fits, "reason": reason,
        "forward_s": n_micro * fwd, "backward_s": n_micro * bwd, "recompute_s": n_micro * recomp,
        "pipeline_bubble_s": bubble, "bubble_fraction": bubble / (n_micro * slot + bubble),
        "tp_comm_s": n_micro * 2.0 * f_tp, "cp_comm_s": n_micro * 2.0 * cp_exposed, "ep_comm_s": n_micro * a2a,
        "pp_comm_s": (n_micro + (pp - 1.0) / virtual_stages) * p2p, "dp_comm_s": dp_traffic,
        # the stage sends and the expert all-to-alls inside the micro-batch slots: with the
        # parts above (forward .. optimizer) they add up to the step
        "slot_comm_s": n_micro * (a2a + p2p) + 0.0 * step,
        "dp_comm_exposed_s": dp_exposed, "overlap_contention_s": contention, "optimizer_s": optimizer,
        "output_layer_s": n_micro * (head_fwd + head_bwd + head_recomp), "moe_host_s": n_micro * moe_host,
        "n_micro_batches": n_micro, "devices": devices, "model_flops": model_flops,
    }


def step_rates(*, step, tokens, samples, devices, model_flops, recompute_flops, peak) -> dict:
    """The rates of a training step of `step` seconds over `devices` (GPUs or CS systems):
    tokens and samples per second, model and hardware FLOP/s per device (the recomputation's
    FLOPs counted in the hardware's), and MFU / HFU against the device's `peak`."""
    return {"step_time_s": step, "tokens_per_s": tokens / step, "tokens_per_s_per_device": tokens / step / devices,
            "samples_per_s": samples / step,
            "model_flops_per_s_per_device": model_flops / step / devices,
            "hardware_flops_per_s_per_device": (model_flops + recompute_flops) / step / devices,
            "mfu": model_flops / step / devices / peak, "hfu": (model_flops + recompute_flops) / step / devices / peak}
