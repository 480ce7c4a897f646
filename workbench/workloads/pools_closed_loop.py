"""Fixed prefill and decode pools under a fixed concurrency (predict.disaggregated): the
closed loop of workloads/concurrency.py with the prefill and the decode of a request on
separate GPUs, its KV cache shipped between them."""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..units import DTYPE_BYTES
from . import ops
from .concurrency import iteration
from .serving_capacity import max_running
from .inference import pp_transfer
from .parts import add_into
from .speculative import expected_tokens_per_step

BISECTION_ROUNDS = 50  # of the loop's rate against its prefill queue (2^-50 of the span)
MAX_UTILIZATION = 0.999  # of a prefill pool in the M/D/1 wait (at 1 it is unbounded: Little's law takes over)
# Rounds of the decode pool's occupancy against the rate it sets (Little's law on the decode
# stage): 16 leave the occupancy within 1e-4 of its fixed point on every serving row (2e-5 at most; 8 left 4e-3).
DECODE_ROUNDS = 16
# How prompts reach the prefill replicas (`prefill_routing`):
# - "random": each prompt to a replica drawn at random, each replica then an M/D/1 queue of
#   its own prompts (SGLang's PD load balancer: MiniLoadBalancer.select_pair, random.choice of
#   the prefill servers, sglang/srt/disaggregation/mini_lb.py); the rule for every framework
#   here, ASSUMED for TensorRT-LLM's and vLLM's disaggregated routers;
# - "shared_queue": one FIFO queue that every free replica takes the next prompt from (a global
#   prefill queue, the M/D/c queue): at the same utilization it waits far less once c > 1.
PREFILL_ROUTINGS = ("random", "shared_queue")


def erlang_c(servers, rho):
    """Probability that a Poisson arrival waits in an M/M/c queue of `servers` at utilization
    rho (Erlang's C formula), from Erlang's B by its recursion B_k = a B_(k-1) / (k + a B_(k-1)),
    a = c rho the offered load; c = 1 gives rho."""
    c = np.asarray(servers, float)
    a = c * rho
    b = np.ones(np.broadcast(c, a).shape)
    for k in range(1, int(np.max(c)) + 1):
        b = np.where(k <= c, a * b / (k + a * b), b)
    return b / (1.0 - rho * (1.0 - b))


def prefill_wait_s(rho, service_s, servers, routing="random"):
    """Mean wait of a prompt for a prefill replica: `servers` replicas, each a deterministic
    server of `service_s`, at utilization rho with Poisson arrivals. "random": each replica an
    M/D/1 queue, rho D / (2 (1 - rho)) (DistServe, OSDI'24, sec. 3.1). "shared_queue": the
    M/D/c queue by Cosmetatos' approximation (1976): half the M/M/c wait C(c, c rho) D /
    (c (1 - rho)) times 1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c). Against a
    simulation of the queue (3 x 200,000 arrivals, 2 to 40 servers, rho 0.3-0.95) it was 2-5%
    short wherever the wait is over 1% of D; the plain half (Allen-Cunneen) was 4-34% short
    at 8 servers (tests/workloads/test_prefill_routing.py checks 8% at 100,000 arrivals). One
    replica is M/D/1 either way."""
    if routing not in PREFILL_ROUTINGS:
        raise ValueError(f"prefill_routing={routing!r} is not known; allowed: {', '.join(PREFILL_ROUTINGS)}")
    if routing == "random":
        return rho * service_s / (2.0 * (1.0 - rho))
    c, r = np.asarray(servers, float), np.maximum(rho, 1e-12)
    correction = 1.0 + (1.0 - r) * (c - 1.0) * (np.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * r * c)
    return 0.5 * erlang_c(c, r) * service_s / (c * (1.0 - r)) * correction


def disaggregated_closed_loop(*, prefill_hw, decode_hw, model, concurrency, prompt, generate, prefill_tp,
                              prefill_attention_dp, prefill_ep, prefill_workers, prefill_batch, decode_tp,
                              decode_attention_dp, decode_ep, decode_workers, weights: str, activations: str, kv: str,
                              prefill_overhead_s, decode_overhead_s, kv_link_bytes_per_s, waves=np.inf,
                              request_latency_s=0.0, prefill_overhead_s_per_sequence=0.0,
                              decode_overhead_s_per_sequence=0.0, draft=None, draft_len=0.0, acceptance=0.0,
                              draft_weights_bytes=0.0, draft_kv_bytes_per_token=0.0, attention_weights=None,
                              attention_activations=None, prefill_pp=1.0, decode_pp=1.0, decode_pool=None,
                              prefill_routing="random", decode_max_batch=np.inf, kv_memory_of="total",
                              prefill_activations=None, prefill_attention_activations=None) -> dict:
    """Fixed prefill and decode pools under `concurrency` requests in flight.

    Prefill: each of prefill_workers x prefill_attention_dp replicas prefills
    `prefill_batch` prompts per iteration (T_batch), then ships their KV caches over the
    prefill instance's link. Decode: pure decode iterations (no prefill in them) of the
    requests a decode replica holds. Closed loop: the pools complete lambda = min(prefill
    capacity, concurrency / (T_batch + KV transfer + (g - 1) TPOT)) requests per second, and
    TTFT = concurrency / lambda - (g - 1) TPOT (Little's law: a prefill-bound deployment
    queues at the prefill pool). A decode replica holds the requests that are decoding, not
    all those in flight: lambda (g - 1) TPOT of them over the replicas (Little's law on the
    decode stage, at most its KV cache's room), found with lambda by iteration
    (DECODE_ROUNDS); the rest are in the prefill queue, in prefill or in transfer, so a
    prefill-bound deployment decodes small batches fast while its TTFT grows. The first wave
    (all requests at once) goes through the prefill replicas in rounds; `waves` averages it in.
    The prefill framework's request latency (host time before the first token) adds to both.
    With a `draft` and draft_len = k > 0 the decode pool speculates (closed_loop's rule: k
    draft iterations and a verify step over 1 + k tokens per sequence emit E tokens each),
    the draft prefills the prompts too and ships its cache with the target's. Formats per
    part as in closed_loop (`attention_weights`, `attention_activations`).

    Pipeline stages (`prefill_pp`, `decode_pp`; a replica is then tp x pp GPUs, each holding
    1/pp of the layers, their weights and every request's cache there), as closed_loop runs
    them: a prefill batch passes every stage in turn (its latency: every layer plus pp - 1
    stage-to-stage sends) while the other stages work on the next batches, so a replica
    admits pp batches per batch latency and a prompt that finds its first stage busy waits
    for a stage's share of the batch (the M/D/1 service time is batch / pp); each stage
    ships its layers' caches over its own GPUs' links. A decode replica runs its requests as
    min(r, pp) micro-batches, a token of one being every layer at the micro-batch's size plus
    the sends.

    `prefill_activations` / `prefill_attention_activations`: the prefill pool's own maths where
    its GPUs differ from the decode pool's (a prefill pool without FP4 units runs NVFP4
    weights as W4A16 while a Blackwell decode pool runs W4A4; backends/gpu.default_activations);
    None: the decode pool's. Both pools keep the weights' and the cache's formats.

    A decode replica holds at most `decode_max_batch` requests (the engine's max_batch_size,
    max-running-requests or max_num_seqs per attention replica) and what its KV cache admits
    (`kv_memory_of`: what the decode framework's memory fraction applies to,
    serving_capacity.max_running); the requests beyond queue before their prefill.

    `prefill_routing` (PREFILL_ROUTINGS): how prompts reach the prefill replicas, "random"
    (each replica its own M/D/1 queue) or "shared_queue" (one M/D/c queue over every batch
    slot of the pool).

    A decode pool of other hardware (CS systems: workloads/wafer_serving.wafer_decode_pool)
    comes as `decode_pool`: the most requests a replica holds (`cap`), its step (`step(r)`
    -> (seconds per token, host share, draft share) at r requests per replica) and
    `devices` per replica; the decode_* layout arguments then describe nothing (1), the
    loop is the same.
    """
    layer, routed = ops.part_formats(weights=weights, activations=activations, attention_weights=attention_weights,
                                     attention_activations=attention_activations)
    w_bytes, a_bytes, kv_bytes = DTYPE_BYTES[weights], layer["a_bytes"], DTYPE_BYTES[kv]
    stream_bytes = ops.stream_bytes(a_bytes)
    replicas_p = prefill_workers * prefill_attention_dp
    replicas_d = decode_workers * decode_attention_dp
    per_decode = concurrency / replicas_d
    # a point of a draft_len sweep that drafts holds the draft (its weights, its cache); one that does not, none
    drafts = (np.asarray(draft_len, float) > 0) & (draft is not None)
    if decode_pool is not None:
        cap = decode_pool["cap"]
    else:
        cap, _, _ = max_running(decode_hw, model, prompt=prompt, generate=generate, tp=decode_tp,
                                attention_dp=decode_attention_dp, w_bytes=w_bytes, kv_bytes=kv_bytes,
                                stream_bytes=stream_bytes, extra_weights_bytes=draft_weights_bytes * drafts,
                                attention_w_bytes=layer["w_bytes"],
                                extra_kv_bytes_per_token=draft_kv_bytes_per_token * drafts, pp=decode_pp,
                                kv_memory_of=kv_memory_of, ep=decode_ep)
    cap = np.minimum(cap, decode_max_batch)
    room = np.maximum(np.minimum(per_decode, cap), 1.0)  # requests a decode replica can hold
    common = dict(model=model, context=prompt + generate / 2.0, prompt=prompt, kv_bytes=kv_bytes, routed=routed,
                  **layer)
    pre_common, pre_stream_bytes = common, stream_bytes
    if prefill_activations is not None:  # the prefill pool's maths (same weights and cache formats)
        pre_layer, pre_routed = ops.part_formats(weights=weights, activations=prefill_activations,
                                                 attention_weights=attention_weights,
                                                 attention_activations=prefill_attention_activations)
        pre_common = dict(common, routed=pre_routed, **pre_layer)
        pre_stream_bytes = ops.stream_bytes(pre_layer["a_bytes"])
    k = np.asarray(draft_len, float) if draft is not None else 0.0
    tokens_per_step = expected_tokens_per_step(acceptance=acceptance, draft_len=k)
    pre_side = dict(hw=prefill_hw, decode_batch=0.0 * room, prefill_tokens=prefill_batch * prompt + 0.0 * room,
                    tp=prefill_tp, attention_dp=prefill_attention_dp, ep=prefill_ep)
    pre = add_into(iteration(**pre_side, **pre_common),  # the batch's activations from stage to stage
                   pp_transfer(prefill_hw, model, tokens=prefill_batch * prompt, tp=prefill_tp, pp=prefill_pp,
                                stream_bytes=pre_stream_bytes))
    draft_prefill_s, draft_kv_bytes = 0.0, 0.0
    if draft is not None:  # the prompts through the draft, its cache shipped too
        p = iteration(**pre_side, **dict(pre_common, model=draft))
        draft_prefill_s = np.where(k > 0, p["time_s"] + p["overhead_s"], 0.0)
        draft_kv_bytes = np.where(k > 0, draft.kv_cache_bytes(context=prompt, dtype=kv), 0.0)
    batch_s = pre["time_s"] + pre["overhead_s"] + draft_prefill_s + prefill_overhead_s + \
        prefill_overhead_s_per_sequence * prefill_batch
    kv_s = (model.kv_cache_bytes(context=prompt, dtype=kv) + draft_kv_bytes) * prefill_batch / \
        (kv_link_bytes_per_s * prefill_pp)  # every stage ships its layers' caches
    stage_s = batch_s / prefill_pp  # a stage's share of a batch: the pipeline admits one batch per stage_s
    capacity = replicas_p * prefill_batch / stage_s  # requests per second the prefill pool admits
    # a shared queue's servers: every replica's batch slots (exact for batches of one prompt;
    # a batch that waited to fill would wait more)
    servers = replicas_p * prefill_batch
    # requests in the loop: every one in flight, unless the decode caches hold fewer (fewer
    # requests than decode replicas leave replicas idle)
    cycling = np.minimum(replicas_d * room, concurrency)

    def micro_batch(r):
        """Sequences of one of the min(r, pp) micro-batches of r requests per decode replica."""
        return r / np.minimum(r, decode_pp)

    def decode_step(r):
        """(TPOT, host share of it, draft share of a step) with r requests per decode replica."""
        if decode_pool is not None:
            return decode_pool["step"](r)
        r = micro_batch(r)
        dec_side = dict(hw=decode_hw, decode_batch=r, prefill_tokens=0.0 * r, tp=decode_tp,
                        attention_dp=decode_attention_dp, ep=decode_ep)
        dec = add_into(iteration(verify=1.0 + k, **dec_side, **common),
                       pp_transfer(decode_hw, model, tokens=r * (1.0 + k), tp=decode_tp, pp=decode_pp,
                                    stream_bytes=stream_bytes))
        draft_s = 0.0
        if draft is not None:  # k draft iterations per step
            d = iteration(**dec_side, **dict(common, model=draft))
            draft_s = k * (d["time_s"] + d["overhead_s"])
        # the decode framework's host overhead: per iteration and per sequence in it; a step emits E tokens
        host = (decode_overhead_s + decode_overhead_s_per_sequence * r) / tokens_per_step
        return (dec["time_s"] + dec["overhead_s"] + draft_s) / tokens_per_step + host, host, draft_s

    def loop_rate(tpot):
        """The rate solving rate = cycling / (cycle + wait(rate)): a prompt that finds its
        prefill replica busy waits (prefill_wait_s at the pool's utilization: an M/D/1 queue
        per replica under random routing, M/D/c under a shared queue), by bisection (the right
        side falls as the rate grows); a prefill pool at capacity queues the rest (Little's law
        below)."""
        cycle = request_latency_s + batch_s + kv_s + (generate - 1.0) * tpot
        lo, hi = 0.0 * cycle, np.minimum(capacity, cycling / cycle)
        for _ in range(BISECTION_ROUNDS):
            mid = 0.5 * (lo + hi)
            rho = np.minimum(mid / capacity, MAX_UTILIZATION)
            short = mid < cycling / (cycle + prefill_wait_s(rho, stage_s, servers, prefill_routing))
            lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
        return np.where(hi >= capacity * MAX_UTILIZATION, hi, lo)  # at capacity: the pool's rate, the rest queue

    r = room  # first guess: every request it can hold decoding
    for _ in range(DECODE_ROUNDS):
        tpot, host_tpot, draft_s = decode_step(r)
        rate = loop_rate(tpot)
        r = np.maximum(np.minimum(room, rate * (generate - 1.0) * tpot / replicas_d), 1.0)
    tpot, host_tpot, draft_s = decode_step(r)
    rate = loop_rate(tpot)
    rho = np.minimum(rate / capacity, MAX_UTILIZATION)
    prefill_wait = prefill_wait_s(rho, stage_s, servers, prefill_routing)
    steady_ttft = np.maximum(concurrency / rate - (generate - 1.0) * tpot,
                             request_latency_s + prefill_wait + batch_s + kv_s)
    rounds = np.ceil(concurrency / (replicas_p * prefill_batch))
    # the first wave's rounds enter the pipeline one stage share apart
    burst_ttft = np.maximum(request_latency_s + batch_s + (rounds - 1.0) / 2.0 * stage_s + kv_s, steady_ttft)
    ttft = steady_ttft + (burst_ttft - steady_ttft) / waves
    e2e = ttft + (generate - 1.0) * tpot
    decode_devices = decode_tp * decode_pp if decode_pool is None else decode_pool["devices"]
    devices = replicas_p * prefill_tp * prefill_pp + replicas_d * decode_devices
    out_rate = rate * generate
    # a prefill replica holds the weights, a token budget's activations and the prompts' caches until they ship
    pre_cap, _, _ = max_running(prefill_hw, model, prompt=prompt, generate=0.0, tp=prefill_tp,
                                attention_dp=prefill_attention_dp, w_bytes=w_bytes, kv_bytes=kv_bytes,
                                stream_bytes=pre_stream_bytes, attention_w_bytes=layer["w_bytes"], pp=prefill_pp,
                                kv_memory_of=kv_memory_of, ep=prefill_ep,
                                extra_weights_bytes=draft_weights_bytes * drafts)
    fits = (cap >= 1.0) & (pre_cap >= 1.0)
    reason = choose([(pre_cap < 1.0, "prefill weights, activations and the runtime's own memory leave no room for "
                                     "one prompt's KV cache"),
                     (cap < 1.0, "decode weights, activations and the runtime's own memory leave no room for one "
                                 "request's KV cache")], "")
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "kv_transfer_s": kv_s + 0.0 * tpot,
            # the steady state's (requests/s x its e2e = concurrency) and the first wave's, averaged into ttft_s
            "steady_ttft_s": steady_ttft + 0.0 * tpot, "first_wave_ttft_s": burst_ttft + 0.0 * tpot,
            "prefill_batch_s": batch_s + 0.0 * tpot, "prefill_utilization": rate / capacity,
            "prefill_wait_s": prefill_wait + 0.0 * tpot,
            "output_tokens_per_s": out_rate, "output_tokens_per_s_per_device": out_rate / devices,
            "output_tokens_per_s_per_user": 1.0 / tpot, "requests_per_s": rate, "decode_running": r,
            "decode_running_limit": cap, "devices": devices + 0.0 * tpot, "kernel_tpot_s": tpot - host_tpot,
            "tpot_iterations": 1.0 / tokens_per_step + 0.0 * tpot,
            "tpot_sequences": (micro_batch(r) if decode_pool is None else r) / tokens_per_step + 0.0 * tpot,
            "tokens_per_step": tokens_per_step + 0.0 * tpot, "decode_draft_s": draft_s + 0.0 * tpot,
            "fits": fits, "reason": reason}
