"""What one serving replica can carry and hold: the tokens an iteration may carry and the
requests it may run (each framework's defaults by GPU), the device memory its runtime keeps
for itself, the weights on a device, and the requests its KV cache admits (max_running).
Shared by the fixed-concurrency closed loop (concurrency.py), the disaggregated pools
(pools_closed_loop.py) and the serving bounds (calibrate/serving_bounds.py)."""
from __future__ import annotations

import numpy as np

from ..units import DTYPE_BYTES
from . import ops
from .inference import (LOGIT_BYTES, MAX_PREFILL_TOKENS, MEMORY_UTILIZATION, activation_bytes_per_token,
                        kv_bytes_per_sequence, part_weight_bytes, weight_bytes)

# Tokens one iteration may carry (decode tokens plus a prefill chunk): TensorRT-LLM's
# max_num_tokens default 8192 (trtllm-serve / LLM API BuildConfig), vLLM V1's
# max_num_batched_tokens 8192 for online serving on large GPUs (vllm/engine/arg_utils.py,
# UsageContext.OPENAI_API_SERVER); SGLang's chunked_prefill_size by device memory
# (SGLANG_CHUNK_TIERS).
TOKEN_BUDGET = {"trtllm": 8192.0, "vllm": 8192.0, "none": 8192.0}  # SGLang: SGLANG_CHUNK_TIERS
# vLLM's defaults depend on the GPU (vllm/engine/arg_utils.py get_batch_defaults, OpenAI
# server): max_num_batched_tokens 8192 and max_num_seqs 1024 on a GPU with >= 70 GiB that is
# not an A100 ("Setting large max_num_batched_tokens for A100 reduces throughput", PR
# #17885), 2048 and 256 on the others (A100, L40S, L4, A30, ...). The other frameworks'
# running requests are bounded by their KV caches here.
VLLM_LARGE_GPU_BYTES = 70 * 2.0 ** 30
VLLM_MAX_NUM_SEQS = {"large": 1024.0, "small": 256.0}  # running requests per replica
VLLM_TOKEN_BUDGET_SMALL_GPU = 2048.0  # tokens per iteration (the large GPUs': TOKEN_BUDGET["vllm"])
# SGLang's default chunked_prefill_size by device memory in MiB (sglang/srt/server_args.py,
# _handle_gpu_memory_settings / _handle_chunked_prefill_size, 0.4-0.5: "A10, L40, 4090" 2048
# below 35 GiB, 4096 below 60 GiB, "H100, H200, A100, H20" 8192 below 160 GiB, "B200, MI300"
# 16384 above; aiconfigurator-core 0.12.0 sdk/backends/sglang_backend.py mirrors the same
# tiers @0.5.16): (upper bound in MiB, tokens). With DP attention it is divided by the
# DP size (_handle_data_parallelism: chunked_prefill_size //= dp_size, "to avoid MoE kernel
# issues"), so each attention replica prefills that share of it.
SGLANG_CHUNK_TIERS = ((35 * 1024, 2048.0), (60 * 1024, 4096.0), (160 * 1024, 8192.0), (np.inf, 16384.0))


def framework_limits(framework: str, hw, attention_dp=1.0) -> tuple:
    """(tokens one iteration of an attention replica may carry, most requests running per
    replica) of `framework`'s defaults on the chip of numbers `hw` with `attention_dp`
    replicas (np.inf: no cap beyond the KV cache)."""
    budget = TOKEN_BUDGET.get(framework, TOKEN_BUDGET["none"])
    if framework == "sglang":
        mib = np.asarray(hw.hbm_capacity_bytes, float) / 2.0 ** 20
        chunk = np.select([mib < top for top, _ in SGLANG_CHUNK_TIERS], [t for _, t in SGLANG_CHUNK_TIERS])
        return np.floor(chunk / attention_dp), np.inf
    if framework != "vllm":
        return budget, np.inf
    large = (np.asarray(hw.hbm_capacity_bytes, float) >= VLLM_LARGE_GPU_BYTES) & ("a100" not in hw.label.lower())
    return (np.where(large, budget, VLLM_TOKEN_BUDGET_SMALL_GPU),
            np.where(large, VLLM_MAX_NUM_SEQS["large"], VLLM_MAX_NUM_SEQS["small"]))


KV_MEMORY_OF = ("total", "free")  # what the framework's memory fraction applies to
# What a running request holds in the KV cache: "held", the tokens it has so far (paged caches
# filled on demand: vLLM, SGLang), or "whole", its prompt and output reserved when it is
# admitted (TensorRT-LLM's default capacity_scheduler_policy, GUARANTEED_NO_EVICT: "only
# accepts new requests if they can complete without eviction").
KV_RESERVED = ("held", "whole")
# Device memory a serving runtime holds outside its weights, activations and KV cache: the
# CUDA context with cuBLAS and other library workspaces, 551 MB, and NCCL's communicator
# buffers, 342 MiB with 2 GPUs and 392 MiB with 4 or 8 (aiconfigurator-core 0.12.0
# systems/h100_sxm.yaml and b200_sxm.yaml, misc: other_mem "cuda, cublas, etc." measured at
# 551MB before that package raised it to 3.5 GB as a safety margin; nccl_mem by TP size, "based
# on observations"). TensorRT-LLM sizes its KV cache from the memory still free once these are
# allocated ("free"), so they come off before its fraction; under "total" the device share
# outside the fraction (10%: 8.5 GB on an H100) holds them.
RUNTIME_CONTEXT_BYTES = 551e6
NCCL_BUFFER_BYTES = ((4.0, 392 * 2.0 ** 20), (2.0, 342 * 2.0 ** 20))  # (GPUs at least, bytes per GPU), largest first


def runtime_reserved_bytes(devices):
    """Bytes per GPU a serving runtime holds for itself on an instance of `devices` GPUs
    (RUNTIME_CONTEXT_BYTES and the NCCL_BUFFER_BYTES of that many GPUs; no NCCL on one)."""
    devices = np.asarray(devices, float)
    nccl = np.select([devices >= n for n, _ in NCCL_BUFFER_BYTES], [b for _, b in NCCL_BUFFER_BYTES], 0.0)
    return RUNTIME_CONTEXT_BYTES + nccl


def weights_per_device_bytes(model, w_bytes, *, tp, attention_dp, attention_w_bytes=None, ep=1.0):
    """Weight bytes on one device of an instance: the routed experts (`w_bytes`) split over
    all its tp x attention_dp devices (in ops.expert_slots where `ep` does not divide them:
    the redundant copies take memory too), the rest (`attention_w_bytes`, default `w_bytes`;
    embeddings and LM head in 16 bits: inference.weight_bytes) over the tp devices of a
    replica."""
    rest, experts = part_weight_bytes(model, w_bytes if attention_w_bytes is None else attention_w_bytes, w_bytes)
    copies = ops.expert_slots(model.n_experts, ep) / model.n_experts if model.n_experts else 1.0
    return rest / tp + experts * copies / (tp * attention_dp)


def draft_memory(model, draft_model, *, weights: str, kv: str, tp, attention_dp, prompt, generate) -> dict:
    """closed_loop's draft arguments for `draft_model` (a spec, or speculative.MTP_HEAD): the
    draft's spec (speculative.draft_for), its weights on one device (an MTP head shares the
    target's embedding and LM head, DeepSeek-V3 tech report sec. 2.2: only its layer counts)
    and its cache per token on one device."""
    from .speculative import MTP_HEAD, draft_for
    draft = draft_for(model, draft_model)
    w_bytes = DTYPE_BYTES[weights]
    weights_bytes = weights_per_device_bytes(draft, w_bytes, tp=tp, attention_dp=attention_dp)
    if draft_model == MTP_HEAD:  # the embedding and LM head (16-bit, split over the tp ranks) are the target's
        weights_bytes = weights_bytes - weight_bytes(draft, w_bytes, draft.embedding_params) / tp
    tokens = prompt + generate
    per_token = kv_bytes_per_sequence(draft, tokens=tokens, tp=tp, pp=1.0, kv_bytes=DTYPE_BYTES[kv]) / tokens
    return {"draft": draft, "draft_weights_bytes": weights_bytes, "draft_kv_bytes_per_token": per_token}


def max_running(hw, model, *, prompt, generate, tp, attention_dp, w_bytes, kv_bytes, stream_bytes,
                kv_memory_of="total", extra_weights_bytes=0.0, extra_kv_bytes_per_token=0.0, attention_w_bytes=None,
                pp=1.0, memory_fraction=MEMORY_UTILIZATION, ep=1.0):
    """Requests one replica's KV cache admits: what is left of the usable memory after the
    weights and the activation working set of a full token budget, over one request's cache.
    The usable memory is `memory_fraction` (default MEMORY_UTILIZATION) of the device
    ("total": vLLM's gpu_memory_utilization, SGLang's mem_fraction_static) or of what the weights,
    activations and the runtime's own memory (runtime_reserved_bytes of the tp x attention_dp
    GPUs) leave free ("free": TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction).
    With `pp` pipeline stages a device holds 1/pp of the layers: of their weights and of
    every request's cache. `extra_*`: a speculative draft's weights on the device and its
    cache per token (on one stage, whole); `attention_w_bytes`: the format of every weight
    but the routed experts' (`w_bytes`); `ep`: their expert-parallel split."""
    weights = weights_per_device_bytes(model, w_bytes, tp=tp, attention_dp=attention_dp,
                                       attention_w_bytes=attention_w_bytes, ep=ep) / pp + extra_weights_bytes
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(model, tp=tp, stream_bytes=stream_bytes)
    kv_per_seq = kv_bytes_per_sequence(model, tokens=prompt + generate, tp=tp, pp=pp, kv_bytes=kv_bytes) + \
        extra_kv_bytes_per_token * (prompt + generate)
    logits = model.vocab_size / tp * LOGIT_BYTES
    runtime = runtime_reserved_bytes(tp * attention_dp)
    free = np.where(kv_memory_of == "free", (hw.hbm_capacity_bytes - weights - act - runtime) * memory_fraction,
                    hw.hbm_capacity_bytes * memory_fraction - weights - act)
    return np.maximum(np.floor(free / (kv_per_seq + logits)), 0.0), weights, kv_per_seq
