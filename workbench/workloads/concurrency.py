"""Serving as the benchmarks run it: a fixed number of requests in flight (closed loop: a
new request starts as soon as one finishes), continuous batching with chunked prefill, mean
TTFT and mean TPOT over requests (TPOT = (end-to-end - TTFT) / (generate - 1)).

One instance spans tp · attention_dp GPUs; each of the attention_dp replicas holds
concurrency / attention_dp requests and runs their attention TP-way; MoE layers run over
all the instance's GPUs, experts split ep-way (layers.layer_iteration).

Steady state of one replica with r requests running (the KV cache admits at most
max_running; the rest queue). Every request has the same prompt p and output g, so
requests that finish together are replaced together: prompts arrive in clumps, and an
iteration that prefills carries a whole token budget B of them, c = min(r·p, B) tokens.
A cycle of the r requests has K = r·p / c prefill iterations (each prompt spans
N_p = ceil(p / B) of them) and otherwise decode iterations of the requests decoding. A
request's first token comes after its own prefill iterations; it arrived while the
previous clump was being prefilled (clumps stay adjacent: they were prefilled one after
another), so it first waits half of that iteration. Its later tokens come one per
iteration, K - N_p of those iterations being the other clumps' prefills:

    TTFT = N_p · T_prefill + T_prefill / 2 (K > 1) + queueing
    TPOT = ((K - N_p) · T_prefill + (g - 1 - K + N_p) · T_decode) / (g - 1)

T_prefill and T_decode are iterations' kernel times (layers.layer_iteration over every
layer, the LM head) plus the framework's host overhead: h per iteration and h_seq per
sequence it carries (TPOT stays linear in both: kernel_tpot_s + h x tpot_iterations +
h_seq x tpot_sequences, the form the fit uses). Queueing: by
Little's law the replica completes r / cycle requests per second (cycle = TTFT without
the wait + (g - 1)·TPOT), so a request beyond max_running waits (concurrency /
attention_dp - r) / that rate. At concurrency 1 this is the static model plus h + h_seq: one
prefill, then decode steps alone. The benchmarks' first wave (all requests start together)
is averaged in by the harness constant `waves`.

The TTFT depends on how arrivals line up with the scheduler (`schedule`, per framework in
specs/serving/frameworks.yaml); TPOT does not (the same prefill work is spread over the
same iterations):

- "clumped": the formulas above, the deterministic limit (identical lengths, replacements
  reaching the server within an iteration: clumps never split).
- "spread": mixed prefill + decode iterations (vLLM V1, TensorRT-LLM in-flight batching)
  with arrivals spread over the cycle (real clients and lengths jitter, so clumps split).
  A request waits for the running iteration (T/2, T = TPOT the mean iteration, when
  others run), then its prompt is prefilled together with the q - 1 = lambda·T·(r-1)/r
  others that arrived in the same window: N_p iterations carrying the decode batch and
  q·p / N_p prompt tokens each.
- "prefill_first": prefill batches run alone and before decode (SGLang without mixed
  chunks), so every running request finishes prefill, decodes and finishes in lockstep:
  each wave is a burst of r prompts through the token budget (chunks = r·p / B prefill-only
  iterations), mean TTFT (chunks + N_p) / 2 of them, then r decode together and a request's
  TPOT carries the (chunks - N_p) / 2 prefill batches after its own.

Every TTFT adds the framework's request latency (API server, tokenization, admission,
first-token streaming: host time per request that no kernel table sees).
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..units import DTYPE_BYTES
from . import ops
from .inference import (LOGIT_BYTES, MAX_PREFILL_TOKENS, MEMORY_UTILIZATION, _lm_head, _model_pass,
                        activation_bytes_per_token, kv_bytes_per_sequence, weight_bytes)
from .layers import add, layer_iteration

# Tokens one iteration may carry (decode tokens plus a prefill chunk): TensorRT-LLM's
# max_num_tokens default 8192 (trtllm-serve / LLM API BuildConfig), vLLM V1's
# max_num_batched_tokens 8192 for online serving on large GPUs (vllm/engine/arg_utils.py,
# UsageContext.OPENAI_API_SERVER), SGLang's chunked_prefill_size 8192 on GPUs with > 80 GB
# (sglang/srt/server_args.py; 4096 below).
SCHEDULES = ("clumped", "spread", "prefill_first")  # how arrivals meet the iterations (module doc)
TOKEN_BUDGET = {"trtllm": 8192.0, "vllm": 8192.0, "sglang": 8192.0, "none": 8192.0}
# vLLM's defaults depend on the GPU (vllm/engine/arg_utils.py get_batch_defaults, OpenAI
# server): max_num_batched_tokens 8192 and max_num_seqs 1024 on a GPU with >= 70 GiB that is
# not an A100 ("Setting large max_num_batched_tokens for A100 reduces throughput", PR
# #17885), 2048 and 256 on the others (A100, L40S, L4, A30, ...). The other frameworks'
# running requests are bounded by their KV caches here.
VLLM_LARGE_GPU_BYTES = 70 * 2.0 ** 30
VLLM_MAX_NUM_SEQS = {"large": 1024.0, "small": 256.0}  # running requests per replica
VLLM_TOKEN_BUDGET_SMALL_GPU = 2048.0  # tokens per iteration (the large GPUs': TOKEN_BUDGET["vllm"])


def framework_limits(framework: str, hw) -> tuple:
    """(tokens one iteration may carry, most requests running per replica) of `framework`'s
    defaults on the chip of numbers `hw` (np.inf: no cap beyond the KV cache)."""
    budget = TOKEN_BUDGET.get(framework, TOKEN_BUDGET["none"])
    if framework != "vllm":
        return budget, np.inf
    large = (np.asarray(hw.hbm_capacity_bytes, float) >= VLLM_LARGE_GPU_BYTES) & ("a100" not in hw.label.lower())
    return (np.where(large, budget, VLLM_TOKEN_BUDGET_SMALL_GPU),
            np.where(large, VLLM_MAX_NUM_SEQS["large"], VLLM_MAX_NUM_SEQS["small"]))


def routed_params(model) -> float:
    """Parameters of the routed experts (all MoE layers): they are split over every GPU of
    the instance, the rest over the tp GPUs of a replica."""
    if not model.n_moe_layers:
        return 0.0
    per_layer = sum(mm.k * mm.n * mm.count for mm in ops.mlp_matmuls(model, moe=True) if mm.routed)
    return float(per_layer * model.n_moe_layers)


KV_MEMORY_OF = ("total", "free")  # what the framework's memory fraction applies to


def weights_per_device_bytes(model, w_bytes, *, tp, attention_dp):
    """Weight bytes on one device of an instance: the routed experts split over all its tp x
    attention_dp devices, the rest (embeddings and LM head in 16 bits: inference.weight_bytes)
    over the tp devices of a replica."""
    experts = routed_params(model)
    return weight_bytes(model, w_bytes, model.n_params - experts) / tp + experts * w_bytes / (tp * attention_dp)


def max_running(hw, model, *, prompt, generate, tp, attention_dp, w_bytes, kv_bytes, stream_bytes,
                kv_memory_of="total"):
    """Requests one replica's KV cache admits: what is left of the usable memory after the
    weights and the activation working set of a full token budget, over one request's cache.
    The usable memory is MEMORY_UTILIZATION of the device ("total": vLLM's
    gpu_memory_utilization, SGLang's mem_fraction_static) or of what the weights and
    activations leave free ("free": TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction)."""
    weights = weights_per_device_bytes(model, w_bytes, tp=tp, attention_dp=attention_dp)
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(model, tp=tp, stream_bytes=stream_bytes)
    kv_per_seq = kv_bytes_per_sequence(model, tokens=prompt + generate, tp=tp, pp=1.0, kv_bytes=kv_bytes)
    logits = model.vocab_size / tp * LOGIT_BYTES
    free = np.where(kv_memory_of == "free", (hw.hbm_capacity_bytes - weights - act) * MEMORY_UTILIZATION,
                    hw.hbm_capacity_bytes * MEMORY_UTILIZATION - weights - act)
    return np.maximum(np.floor(free / (kv_per_seq + logits)), 0.0), weights, kv_per_seq


def iteration(hw, model, *, decode_batch, context, prefill_tokens, prompt, tp, attention_dp, ep, math, w_bytes,
              a_bytes, kv_bytes, imbalance=1.0) -> dict:
    """Kernel time of one iteration on one device: every layer, then the LM head over the
    decoded tokens and the last token of each prompt prefilled."""
    kw = dict(decode_batch=decode_batch, context=context, prefill_tokens=prefill_tokens, prompt=prompt, tp=tp,
              math=math, w_bytes=w_bytes, a_bytes=a_bytes, kv_bytes=kv_bytes, attention_dp=attention_dp, ep=ep,
              imbalance=imbalance)
    layers = _model_pass(layer_iteration, hw, model, **kw)
    head = _lm_head(hw, model, rows=decode_batch + prefill_tokens / prompt, tp=tp, math=math, w_bytes=w_bytes,
                    a_bytes=a_bytes)
    return add(layers, head)


def closed_loop(*, hw, model, concurrency, prompt, generate, tp, attention_dp, ep, weights: str, activations: str,
                kv: str, overhead_s, token_budget, waves=np.inf, imbalance=1.0, schedule="clumped",
                request_latency_s=0.0, kv_memory_of="total", overhead_s_per_sequence=0.0,
                max_sequences=np.inf) -> dict:
    """Mean TTFT, TPOT and throughput of one instance under `concurrency` requests in flight
    (`schedule`: one of SCHEDULES, see the module)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is not known; allowed: {', '.join(SCHEDULES)}")
    if kv_memory_of not in KV_MEMORY_OF:
        raise ValueError(f"kv_memory_of={kv_memory_of!r} is not known; allowed: {', '.join(KV_MEMORY_OF)}")
    w_bytes, a_bytes, kv_bytes = DTYPE_BYTES[weights], DTYPE_BYTES[activations], DTYPE_BYTES[kv]
    stream_bytes = max(a_bytes, ops.STREAM_BYTES)
    per_replica = concurrency / attention_dp
    # Paged KV caches hold what a request has so far: staggered requests ("spread") hold
    # p + g/2 tokens on average; in lockstep or clumps they all reach p + g together.
    held = generate / 2.0 if schedule == "spread" else generate
    cap, weights_bytes, kv_per_seq = max_running(hw, model, prompt=prompt, generate=held, tp=tp,
                                                 attention_dp=attention_dp, w_bytes=w_bytes, kv_bytes=kv_bytes,
                                                 stream_bytes=stream_bytes, kv_memory_of=kv_memory_of)
    cap = np.minimum(cap, max_sequences)  # the KV cache's room, or the framework's cap on running requests
    r = np.maximum(np.minimum(per_replica, cap), 1.0)
    # Requests that finish together are replaced together, so prompts arrive in clumps: an
    # iteration that prefills carries a whole token budget of them (all r when they fit).
    clump = np.minimum(r * prompt, token_budget)  # prefill tokens of a prefill iteration
    n_prefill = np.ceil(prompt / token_budget)  # iterations one prompt spans
    clumps = np.maximum(np.ceil(r * prompt / clump), n_prefill)  # prefill iterations per cycle of r requests
    share = (generate - 1.0) / (generate - 1.0 + n_prefill)  # of its life a request spends decoding
    decoding = 1.0 + (r - 1.0) * share  # in a decode iteration of the tagged request: it and the others
    kw = dict(hw=hw, model=model, context=prompt + generate / 2.0, prompt=prompt, tp=tp, attention_dp=attention_dp,
              ep=ep, math=activations, w_bytes=w_bytes, a_bytes=a_bytes, kv_bytes=kv_bytes, imbalance=imbalance)

    def step(decode_batch, prefill_tokens):
        """(parts, seconds, sequences) of one iteration: its kernels plus the host overhead,
        h per iteration and h_seq per sequence in it (each decoding request, each prompt a
        chunk of the budget touches: at least one when any prefill runs)."""
        it = iteration(decode_batch=decode_batch, prefill_tokens=prefill_tokens, **kw)
        sequences = decode_batch + np.maximum(prefill_tokens / prompt, np.minimum(prefill_tokens, 1.0))
        seconds = it["time_s"] + it["overhead_s"] + overhead_s + overhead_s_per_sequence * sequences
        return it, seconds, sequences

    # The first wave: a benchmark starts its first `concurrency` requests at once, so their
    # r·p prompt tokens go through the token budget chunk after chunk; a request's first
    # token comes with its chunk (mean: (chunks + N_p) / 2 of them).
    chunks = np.ceil(r * prompt / token_budget)
    if schedule == "prefill_first":  # lockstep: the wave's prefill batches alone, then r decode together
        dec, decode_iter, decode_seqs = step(r, 0.0 * r)
        _, prefill_iter, prefill_seqs = step(0.0 * r, clump)

        def per_token(prefill_s, decode_s):  # after its first token a request waits for the wave's other prefills
            return ((chunks - n_prefill) / 2.0 * prefill_s + (generate - 1.0) * decode_s) / (generate - 1.0)
        service_ttft = (chunks + n_prefill) / 2.0 * prefill_iter  # every wave is a burst
    else:
        dec, decode_iter, decode_seqs = step(decoding, 0.0 * r)
        _, prefill_iter, prefill_seqs = step(np.maximum(r - clump / prompt, 0.0) * share, clump)
        # A request decodes through the other clumps' prefill iterations and the pure decode ones
        interrupts = np.minimum(clumps - n_prefill, generate - 1.0)

        def per_token(prefill_s, decode_s):
            return (interrupts * prefill_s + (generate - 1.0 - interrupts) * decode_s) / (generate - 1.0)
        # Clumps stay adjacent (they were prefilled one after another), so a request arrives
        # while the previous clump's prefill iteration runs and waits for half of it on
        # average; with one clump the server is idle when it arrives.
        service_ttft = n_prefill * prefill_iter + np.where(clumps > 1.0, 0.5, 0.0) * prefill_iter
    tpot = per_token(prefill_iter, decode_iter)
    # TPOT is linear in the host constants: iterations and sequences it carries per token
    tpot_iterations, tpot_sequences = per_token(1.0, 1.0) + 0.0 * tpot, per_token(prefill_seqs, decode_seqs)
    host_tpot = overhead_s * tpot_iterations + overhead_s_per_sequence * tpot_sequences
    if schedule == "spread":
        others = (r - 1.0) / r  # at concurrency 1 nothing runs when a request arrives
        lam = r / (service_ttft + (generate - 1.0) * tpot)
        q = 1.0 + lam * tpot * others  # prompts prefilled in the request's own iterations
        _, own_iter, _ = step((r - 1.0) * share, np.minimum(q * prompt / n_prefill, token_budget))
        service_ttft = 0.5 * tpot * others + n_prefill * own_iter
    burst_s = (chunks + n_prefill) / 2.0 * prefill_iter
    service_ttft = service_ttft + request_latency_s
    cycle = service_ttft + (generate - 1.0) * tpot
    rate = r / cycle  # requests completed per second per replica
    wait = np.maximum(per_replica - r, 0.0) / rate
    # Later waves arrive as the schedule says; a run of `waves` x concurrency requests
    # averages them with the first.
    burst_ttft = burst_s + request_latency_s + wait
    steady_ttft = service_ttft + wait
    ttft = steady_ttft + (burst_ttft - steady_ttft) / waves
    e2e = ttft + (generate - 1.0) * tpot
    devices = tp * attention_dp
    out_rate = attention_dp * rate * generate
    supported = np.isfinite(hw.peak(activations))
    fits = (cap >= 1.0) & supported
    reason = choose([(np.broadcast_to(~supported, np.shape(cap)), f"no {activations} math units on {hw.label}"),
                     (cap < 1.0, "weights + activations leave no room for one request's KV cache")], "")
    return {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "queue_s": wait, "first_wave_ttft_s": burst_ttft,
        "steady_ttft_s": steady_ttft,
        "output_tokens_per_s": out_rate, "output_tokens_per_s_per_device": out_rate / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        "requests_per_s": attention_dp * rate,
        "batch": decoding + clump / prompt * clumps / (clumps + generate - 1.0),  # sequences per iteration
        "running": r, "max_running": cap, "prefill_iterations": n_prefill, "prefill_clumps": clumps,
        "decode_iteration_s": decode_iter, "framework_overhead_s": host_tpot,
        "request_latency_s": request_latency_s + 0.0 * tpot,
        "kernel_tpot_s": tpot - host_tpot,
        "tpot_iterations": tpot_iterations, "tpot_sequences": tpot_sequences,
        "decode_matmul_s": dec["matmul_s"], "decode_attention_s": dec["attention_s"],
        "decode_elementwise_s": dec["elementwise_s"], "decode_comm_s": dec["comm_s"],
        "prefill_iteration_s": prefill_iter, "weights_per_device_bytes": weights_bytes,
        "kv_per_request_bytes": kv_per_seq, "devices": devices + 0.0 * tpot,
        "fits": fits, "reason": reason,
    }


def disaggregated_closed_loop(*, prefill_hw, decode_hw, model, concurrency, prompt, generate, prefill_tp,
                              prefill_attention_dp, prefill_ep, prefill_workers, prefill_batch, decode_tp,
                              decode_attention_dp, decode_ep, decode_workers, weights: str, activations: str, kv: str,
                              prefill_overhead_s, decode_overhead_s, kv_link_bytes_per_s, waves=np.inf,
                              request_latency_s=0.0, prefill_overhead_s_per_sequence=0.0,
                              decode_overhead_s_per_sequence=0.0) -> dict:
    """Fixed prefill and decode pools under `concurrency` requests in flight.

    Prefill: each of prefill_workers x prefill_attention_dp replicas prefills
    `prefill_batch` prompts per iteration (T_batch), then ships their KV caches over the
    prefill instance's link. Decode: concurrency / (decode_workers x decode_attention_dp)
    requests per replica, pure decode iterations (no prefill in them). Closed loop: the
    pools complete lambda = min(prefill capacity, concurrency / (T_batch + KV transfer +
    (g - 1) TPOT)) requests per second, and TTFT = concurrency / lambda - (g - 1) TPOT
    (Little's law: a prefill-bound deployment queues at the prefill pool). The first wave
    (all requests at once) goes through the prefill replicas in rounds; `waves` averages it in.
    The prefill framework's request latency (host time before the first token) adds to both.
    """
    w_bytes, a_bytes, kv_bytes = DTYPE_BYTES[weights], DTYPE_BYTES[activations], DTYPE_BYTES[kv]
    stream_bytes = max(a_bytes, ops.STREAM_BYTES)
    replicas_p = prefill_workers * prefill_attention_dp
    replicas_d = decode_workers * decode_attention_dp
    per_decode = concurrency / replicas_d
    cap, weights_bytes, kv_per_seq = max_running(decode_hw, model, prompt=prompt, generate=generate, tp=decode_tp,
                                                 attention_dp=decode_attention_dp, w_bytes=w_bytes, kv_bytes=kv_bytes,
                                                 stream_bytes=stream_bytes)
    r = np.maximum(np.minimum(per_decode, cap), 1.0)
    common = dict(model=model, context=prompt + generate / 2.0, prompt=prompt, math=activations, w_bytes=w_bytes,
                  a_bytes=a_bytes, kv_bytes=kv_bytes)
    dec = iteration(hw=decode_hw, decode_batch=r, prefill_tokens=0.0 * r, tp=decode_tp,
                    attention_dp=decode_attention_dp, ep=decode_ep, **common)
    pre = iteration(hw=prefill_hw, decode_batch=0.0 * r, prefill_tokens=prefill_batch * prompt, tp=prefill_tp,
                    attention_dp=prefill_attention_dp, ep=prefill_ep, **common)
    # each pool's framework host overhead: per iteration and per sequence in it
    host_tpot = decode_overhead_s + decode_overhead_s_per_sequence * r
    tpot = dec["time_s"] + dec["overhead_s"] + host_tpot
    batch_s = pre["time_s"] + pre["overhead_s"] + prefill_overhead_s + prefill_overhead_s_per_sequence * prefill_batch
    kv_s = model.kv_cache_bytes(context=prompt, dtype=kv) * prefill_batch / kv_link_bytes_per_s
    capacity = replicas_p * prefill_batch / batch_s  # requests per second the prefill pool admits
    # requests in decode at once: r per replica, but never more than are in flight (fewer
    # requests than decode replicas leave replicas idle)
    decoding = np.minimum(replicas_d * r, concurrency)
    rate = np.minimum(capacity, decoding / (request_latency_s + batch_s + kv_s + (generate - 1.0) * tpot))
    steady_ttft = concurrency / rate - (generate - 1.0) * tpot
    rounds = np.ceil(concurrency / (replicas_p * prefill_batch))
    burst_ttft = np.maximum(request_latency_s + (rounds + 1.0) / 2.0 * batch_s + kv_s, steady_ttft)
    ttft = steady_ttft + (burst_ttft - steady_ttft) / waves
    e2e = ttft + (generate - 1.0) * tpot
    devices = replicas_p * prefill_tp + replicas_d * decode_tp
    out_rate = rate * generate
    fits = cap >= 1.0
    reason = choose([(cap < 1.0, "decode weights + activations leave no room for one request's KV cache")], "")
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "kv_transfer_s": kv_s + 0.0 * tpot,
            "prefill_batch_s": batch_s + 0.0 * tpot, "prefill_utilization": rate / capacity,
            "output_tokens_per_s": out_rate, "output_tokens_per_s_per_device": out_rate / devices,
            "output_tokens_per_s_per_user": 1.0 / tpot, "requests_per_s": rate, "decode_running": r,
            "decode_max_running": cap, "devices": devices + 0.0 * tpot, "kernel_tpot_s": tpot - host_tpot,
            "tpot_iterations": 1.0 + 0.0 * tpot, "tpot_sequences": r + 0.0 * tpot,
            "fits": fits, "reason": reason}
