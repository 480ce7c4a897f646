"""Serving as the benchmarks run it: a fixed number of requests in flight (closed loop: a
new request starts as soon as one finishes), continuous batching with chunked prefill, mean
TTFT and mean TPOT over requests (TPOT = (end-to-end - TTFT) / (generate - 1)).

One instance spans tp · attention_dp GPUs; each of the attention_dp replicas holds
concurrency / attention_dp requests and runs their attention TP-way; MoE layers run over
all the instance's GPUs, experts split ep-way (layers.layer_iteration). With pp pipeline
stages (pp times the GPUs) a GPU holds 1/pp of the layers, their weights and every
request's cache there, and a replica keeps min(r, pp) micro-batches in flight, each passing
every stage in turn: the schedule below runs for one micro-batch (r / min(r, pp) requests),
its iterations every layer plus pp - 1 stage-to-stage sends, and Little's law counts all r
(vLLM's virtual engines, TensorRT-LLM's and SGLang's micro-batches; as the static model,
PP buys capacity, not speed).

Steady state of one replica with r requests running (the KV cache admits at most
running_limit, the engine's max_running setting capping it; the rest queue). Every
request has the same prompt p and output g (S = g - 1 decode steps), so requests that
finish together are replaced together: prompts arrive in clumps, and an iteration that
prefills carries a whole token budget B of them, c = min(r·p, B) tokens.
A cycle of the r requests has K = r·p / c prefill iterations (each prompt spans
N_p = ceil(p / B) of them) and otherwise decode iterations of the requests decoding. A
request's first token comes after its own prefill iterations; it arrived while the
previous clump was being prefilled (clumps stay adjacent: they were prefilled one after
another), so it first waits half of that iteration. Its later tokens come one per
iteration, min(K - N_p, S) of those iterations being the other clumps' prefills; the
rest, max(K - N_p - S, 0) (a prefill-bound cycle), run while it waits for its first:

    TTFT = (N_p + max(K - N_p - S, 0)) · T_prefill + T_prefill / 2 (K > 1) + queueing
    TPOT = (min(K - N_p, S) · T_prefill + (S - min(K - N_p, S)) · T_decode) / S

T_prefill and T_decode are iterations' kernel times (layers.layer_iteration over every
layer, the LM head) plus the framework's host overhead: h per iteration and h_seq per
sequence it carries (TPOT stays linear in both: kernel_tpot_s + h x tpot_iterations +
h_seq x tpot_sequences, the form the fit uses). Queueing: by
Little's law the replica completes r / cycle requests per second (cycle = TTFT without
the wait + (g - 1)·TPOT), so a request beyond max_running waits (concurrency /
attention_dp - r) / that rate. At concurrency 1 this is the static model plus h + h_seq: one
prefill, then decode steps alone. The benchmarks' first wave (all requests start together)
is averaged in by the harness constant `waves`.

TTFT and TPOT depend on how arrivals line up with the scheduler (`schedule`, per
framework in specs/serving/frameworks.yaml):

- "clumped": the formulas above, the deterministic limit (identical lengths, replacements
  reaching the server within an iteration: clumps never split).
- "spread": mixed prefill + decode iterations (vLLM V1, TensorRT-LLM in-flight batching)
  with arrivals spread over the cycle (real clients and lengths jitter, so clumps split).
  A request waits for the running iteration (T/2, T = TPOT the mean iteration, when
  others run), then its prompt is prefilled together with the q - 1 = lambda·T·(r-1)/r
  others that arrived in the same window: I = max(q·p / B, N_p) iterations carrying the
  decode batch and q·p / I prompt tokens each, its first token with its chunk ((I + N_p) / 2
  of them). Its TPOT carries the others' prompts the same way: (r - 1) / q · I such
  iterations in its life, at most one per decode step (where clumps prefilled their mates
  before the request decoded: 1-6% more TPOT at moderate r, which the simulation shows);
  (N·r - 1) / q · I with N attention-DP replicas of an MoE model in lockstep, unless
  TensorRT-LLM's balancing (adp_balance) holds prompts (a mean hold of decode iterations)
  and releases each replica's batch together. Its replica's beyond its decode steps run
  while it waits for its first token, as in the clumped form.
- "prefill_first": prefill batches run alone and before decode (SGLang without mixed
  chunks), so every running request finishes prefill, decodes and finishes in lockstep:
  each wave is a burst of r prompts through the token budget (chunks = r·p / B prefill-only
  iterations), mean TTFT (chunks + N_p) / 2 of them, then r decode together and a request's
  TPOT carries the (chunks - N_p) / 2 prefill batches after its own.
- "prefill_first_spread": prefill batches alone as in "prefill_first", arrivals spread
  (lengths jitter, or speculation's random acceptance): each prompt, with the q - 1 that
  arrived during the iteration before it, is a prefill batch that stalls every decoding
  request, so a request's TPOT carries the others' (r - 1) / q · N_p batches; it waits
  E[T^2] / (2 E[T]) of the iteration it lands in (length-biased), q and the arrival rate
  solved together (FIXED_POINT_ROUNDS).

Speculative decoding (closed_loop's draft, draft_len k, acceptance a): every decode
iteration runs k draft iterations and verifies 1 + k tokens per sequence, emitting
E = (1 - a^(k+1)) / (1 - a) tokens each, so a request decodes its g - 1 later tokens in
(g - 1) / E iterations (the "g - 1" of the formulas above). Its random acceptance
desynchronizes requests of equal lengths: lockstep schedules take their spread forms
(DESYNCHRONIZED). All four forms are checked against a discrete-event simulation of the
scheduler that draws every acceptance (tests/workloads/test_concurrency_simulation.py).

Every TTFT adds the framework's request latency (API server, tokenization, admission,
first-token streaming: host time per request that no kernel table sees).
"""
from __future__ import annotations

import numpy as np

from ..primitives._array import choose
from ..units import DTYPE_BYTES
from . import ops
from .inference import MEMORY_UTILIZATION, _lm_head, _model_pass, eager as eager_numbers, pp_transfer, math_support
from .adp_balance import held_iterations
from .batch_wait import held as batch_wait_held, needed_prompts
from .layers import add, layer_iteration
from .parts import add_into
from .serving_capacity import KV_MEMORY_OF, KV_RESERVED, max_running
from .speculative import expected_tokens_per_step

SCHEDULES = ("clumped", "spread", "prefill_first", "prefill_first_spread")  # how arrivals meet the iterations
# What random acceptance makes of a lockstep schedule: requests whose steps emit 1 to k + 1
# tokens at random finish apart, so the next wave's prompts arrive spread (the discrete-event
# simulation of tests/workloads/test_concurrency_simulation.py, k = 3, a = 0.7: the lockstep
# forms' TTFT 1.2-15x the simulated one, the spread forms within 13%).
DESYNCHRONIZED = {"clumped": "spread", "prefill_first": "prefill_first_spread"}
# Rounds of a spread schedule's prompts per iteration against the arrival rate they set:
# 3 land within 4e-6 of 6 on every serving row (TPOT and TTFT), 2 within 1.4e-4.
FIXED_POINT_ROUNDS = 3
LENGTHS = ("equal", "varied")  # requests' lengths in a closed loop (closed_loop)


def iteration(hw, model, *, decode_batch, context, prefill_tokens, prompt, tp, attention_dp, ep, math, w_bytes,
              a_bytes, kv_bytes, imbalance=1.0, verify=1.0, routed=None) -> dict:
    """Kernel time of one iteration on one device: every layer, then the LM head over the
    decoded tokens (`verify` per decoding sequence: 1 + the drafted tokens of a
    speculative verify step, each position's logits) and the last token of each prompt
    prefilled. `routed`: the routed experts' format where it differs (ops.part_formats)."""
    kw = dict(decode_batch=decode_batch, context=context, prefill_tokens=prefill_tokens, prompt=prompt, tp=tp,
              math=math, w_bytes=w_bytes, a_bytes=a_bytes, kv_bytes=kv_bytes, attention_dp=attention_dp, ep=ep,
              imbalance=imbalance, verify=verify, routed=routed)
    layers = _model_pass(layer_iteration, hw, model, **kw)
    head = _lm_head(hw, model, rows=decode_batch * verify + prefill_tokens / prompt, tp=tp, math=math,
                    w_bytes=w_bytes, a_bytes=a_bytes)
    return add(layers, head)


def closed_loop(*, hw, model, concurrency, prompt, generate, tp, attention_dp, ep, weights: str, activations: str,
                kv: str, overhead_s, token_budget, waves=np.inf, imbalance=1.0, schedule="clumped",
                request_latency_s=0.0, kv_memory_of="total", overhead_s_per_sequence=0.0,
                max_sequences=np.inf, draft=None, draft_len=0.0, acceptance=0.0, draft_weights_bytes=0.0,
                draft_kv_bytes_per_token=0.0, attention_weights=None, attention_activations=None, pp=1.0,
                memory_fraction=MEMORY_UTILIZATION, recv_interval=1.0, lengths="equal", kv_reserved="held",
                adp_timeout_iters=0.0, adp_batching_iters=0.0, batch_wait_timeout_iters=0.0,
                batch_wait_max_tokens_ratio=0.0) -> dict:
    """Mean TTFT, TPOT and throughput of one instance under `concurrency` requests in flight
    (`schedule`: one of SCHEDULES, see the module). With a `draft` model (a spec: a small
    model, or the target's MTP head, speculative.draft_for) and draft_len = k > 0, every
    decode iteration is a speculative step (module speculative): k draft iterations of the
    decoding sequences, then the target verifying 1 + k tokens per sequence, which emits
    E = (1 - a^(k+1)) / (1 - a) tokens per sequence at per-token `acceptance` a, so a
    request decodes its g - 1 later tokens in (g - 1) / E iterations; prefilled prompts
    pass through the draft too (its cache). The draft's weights (`draft_weights_bytes`
    per device) and cache (`draft_kv_bytes_per_token` per device) take KV-cache room.
    Random acceptance (0 < a < 1) desynchronizes requests of equal lengths, so under
    speculation a lockstep schedule becomes its spread form (DESYNCHRONIZED). `weights` and
    `activations` are the routed experts' format and math, and every other matmul's unless
    `attention_weights` / `attention_activations` say otherwise (ops.part_formats).
    `recv_interval`: decode iterations between the engine's polls for new requests in the
    "prefill_first_spread" form (prefill_alone_spread; 1: every iteration). `lengths`
    "varied" (requests' lengths differ around `prompt` and `generate`): completions and
    so arrivals spread, and a lockstep schedule takes its spread form. `kv_reserved`: what
    the KV cache holds for a running request (KV_RESERVED). `adp_timeout_iters` > 0:
    TensorRT-LLM's attention-DP balancing holds prompts until every replica has one or that
    many iterations passed (`adp_batching_iters` more once all have one): a prompt waits
    adp_balance.held_iterations decode iterations, and its replica's prompts of that window
    (2x its wait) are prefilled with it. `batch_wait_timeout_iters` and
    `batch_wait_max_tokens_ratio` both > 0: TensorRT-LLM's batch waiting (without attention
    DP) holds prompts while others decode until their tokens reach the ratio of the token
    budget or that many iterations passed: a prompt waits batch_wait.held decode iterations
    and the prompts held with it are prefilled with it. An iteration that prefills runs
    eagerly, without the CUDA-graph saving of the decode-only ones (`hw.graph_saving_s`)."""
    if lengths not in LENGTHS:
        raise ValueError(f"lengths={lengths!r} is not known; allowed: {', '.join(LENGTHS)}")
    args = dict(locals())
    del args["lengths"]
    if lengths == "varied":
        args["schedule"] = schedule = DESYNCHRONIZED.get(schedule, schedule)
    if draft is None or schedule not in DESYNCHRONIZED:
        return _steady_state(**args)
    lockstep = _steady_state(**args)
    spread = _steady_state(**dict(args, schedule=DESYNCHRONIZED[schedule]))
    a = np.asarray(acceptance, float)
    random = (np.asarray(draft_len, float) > 0) & (a > 0.0) & (a < 1.0)
    return {key: np.where(random, spread[key], value) for key, value in lockstep.items()}


ARRIVALS = ("in_time", "after_decode")  # where a spread schedule's prompts land (prefill_alone_spread)


def prefill_alone_spread(step, *, r, prompt, n_prefill, token_budget, steps, decode_iter,
                         arrivals="in_time", recv_interval=1.0, lockstep_replicas=1.0) -> tuple:
    """The "prefill_first_spread" schedule (module doc): prefill batches run alone and
    stall every decoding request, so a request's TPOT carries the others' (r - 1) / q · N_p
    batches of q prompts. Where a prompt lands (`arrivals`):

    - "in_time": anywhere in the cycle, with odds each iteration's length: it waits
      E[T^2] / (2 E[T]) of the iteration it lands in, and q - 1 prompts arrived during the
      iteration before its batch (a batch longer than the token budget runs as several
      iterations, its prompts' first tokens coming with their chunks); q and the arrival
      rate solved together (FIXED_POINT_ROUNDS). A GPU engine's prefill batches are
      iterations of the decode ones' order (tests/workloads/test_concurrency_simulation.py:
      within 5%; with the polling below, within 9%). With
      `recv_interval` N > 1 the engine takes in new requests only after N decode
      iterations in a row or after a prefill batch (SGLang's --scheduler-recv-interval:
      scheduler_recv_skipper.py counts 1 per decode forward and 1000 per other forward,
      and receives once the count reaches N): a prompt waits for the end of the window of
      N decode iterations it lands in, and the batch holds the prompts of that window.
      N = 1 is the form above.
    - "after_decode": a closed loop's arrivals follow completions, and a request completes
      at the end of a decode iteration, so its successor lands in the next iteration (the
      client's round trip, shorter than an iteration). A prompt is batched with those of
      the others that finished in the same decode iteration, q - 1 = (r - 1) x share /
      steps, and waits out the iteration it lands in: a decode iteration (half of it), or,
      with the odds that the one before also ended a request, that successor's prefill.
      Where a prefill pass lasts many decode iterations (a wafer's pipelined prompt: 30x
      its decode step) this holds and "in_time" does not (tests/workloads/
      test_wafer_serving.py: within 6%, where "in_time" gave TTFT 25-100% high).

    `lockstep_replicas`: replicas stepping together, whose prefills stall this one's requests too
    (attention DP). `step(decode_batch, prefill_tokens)` -> (parts, seconds, sequences) of one iteration;
    `steps` decode iterations of `decode_iter` seconds per request. A batch's parts may say
    how long it holds the server (`stall_s`: a pipeline's busiest stage, while its first
    token takes the whole pass); else its seconds. Returns (prefill batch seconds, its
    sequences, prefill batches that stall a request's decoding, TTFT without queueing or
    request latency, the seconds each stalls). Shared by the GPU closed loop and the
    wafer's (workloads/wafer_serving.py)."""
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals={arrivals!r} is not known; allowed: {', '.join(ARRIVALS)}")
    others = (r - 1.0) / r  # at concurrency 1 nothing runs when a request arrives
    if arrivals == "after_decode":
        ended = (r - 1.0) * (steps / (steps + n_prefill)) / steps  # others finishing in one decode iteration
        q = 1.0 + ended  # prompts in a batch: the request and those that finished beside it
        parts, prefill_iter, prefill_seqs = step(0.0 * r, np.minimum(q * prompt / n_prefill, token_budget))
        stall = parts.get("stall_s", prefill_iter)
        behind = np.minimum(ended, 1.0)  # odds the iteration it lands in is an earlier successor's prefill
        residual = (1.0 - behind) * decode_iter / 2.0 + behind * np.maximum(stall - decode_iter / 2.0, 0.0)
        return prefill_iter, prefill_seqs, (r - 1.0) / q * n_prefill, residual * others + n_prefill * prefill_iter, \
            stall
    q = 1.0 + 0.0 * r  # prompts in a prefill batch: the request and those that arrived with it
    for _ in range(FIXED_POINT_ROUNDS):
        # a batch's q prompts go through the token budget: iterations of q·p / iters tokens each
        iters = np.maximum(q * prompt / token_budget, n_prefill)
        parts, prefill_iter, prefill_seqs = step(0.0 * r, q * prompt / iters)
        stall = parts.get("stall_s", prefill_iter)
        interrupts = (lockstep_replicas * r - 1.0) / q * iters  # the others' prefill iterations stall a request
        # an arrival lands in a piece with odds its length: it waits E[T^2] / (2 E[T]) of it;
        # the pieces: windows of N decode iterations, or a prefill iteration
        n_p = interrupts + iters
        windows, window = steps / recv_interval, recv_interval * decode_iter
        residual = (windows * window ** 2 + n_p * stall ** 2) / (2.0 * (windows * window + n_p * stall))
        # its first token comes with its chunk of the batch: (iters + N_p) / 2 iterations on average
        service_ttft = residual * others + (iters + n_prefill) / 2.0 * prefill_iter
        lam = r / (service_ttft + (interrupts * stall + steps * decode_iter))
        q = 1.0 + lam * 2.0 * residual * others  # arrivals during the iteration before the batch
    return prefill_iter, prefill_seqs, interrupts, service_ttft, stall


def _steady_state(*, hw, model, concurrency, prompt, generate, tp, attention_dp, ep, weights: str, activations: str,
                kv: str, overhead_s, token_budget, waves=np.inf, imbalance=1.0, schedule="clumped",
                request_latency_s=0.0, kv_memory_of="total", overhead_s_per_sequence=0.0,
                max_sequences=np.inf, draft=None, draft_len=0.0, acceptance=0.0, draft_weights_bytes=0.0,
                draft_kv_bytes_per_token=0.0, attention_weights=None, attention_activations=None, pp=1.0,
                memory_fraction=MEMORY_UTILIZATION, recv_interval=1.0, kv_reserved="held",
                adp_timeout_iters=0.0, adp_batching_iters=0.0, batch_wait_timeout_iters=0.0,
                batch_wait_max_tokens_ratio=0.0) -> dict:
    """closed_loop at one schedule (its doc)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is not known; allowed: {', '.join(SCHEDULES)}")
    if kv_reserved not in KV_RESERVED:
        raise ValueError(f"kv_reserved={kv_reserved!r} is not known; allowed: {', '.join(KV_RESERVED)}")
    if kv_memory_of not in KV_MEMORY_OF:
        raise ValueError(f"kv_memory_of={kv_memory_of!r} is not known; allowed: {', '.join(KV_MEMORY_OF)}")
    layer, routed = ops.part_formats(weights=weights, activations=activations, attention_weights=attention_weights,
                                     attention_activations=attention_activations)
    w_bytes, a_bytes, kv_bytes = DTYPE_BYTES[weights], layer["a_bytes"], DTYPE_BYTES[kv]
    stream_bytes = ops.stream_bytes(a_bytes)
    per_replica = concurrency / attention_dp
    # Paged KV caches hold what a request has so far: staggered requests (spread arrivals) hold
    # p + g/2 tokens on average; in lockstep or clumps they all reach p + g together. A
    # framework that reserves a request's whole prompt and output when it admits it
    # (kv_reserved "whole") counts p + g for every running request.
    staggered = schedule in ("spread", "prefill_first_spread") and kv_reserved == "held"
    held = generate / 2.0 if staggered else generate
    drafts = np.asarray(draft_len, float) > 0  # a point of a draft_len sweep that drafts holds the draft
    cap, weights_bytes, kv_per_seq = max_running(hw, model, prompt=prompt, generate=held, tp=tp,
                                                 attention_dp=attention_dp, w_bytes=w_bytes, kv_bytes=kv_bytes,
                                                 stream_bytes=stream_bytes, kv_memory_of=kv_memory_of,
                                                 attention_w_bytes=layer["w_bytes"],
                                                 extra_weights_bytes=draft_weights_bytes * drafts,
                                                 extra_kv_bytes_per_token=draft_kv_bytes_per_token * drafts, pp=pp,
                                                 memory_fraction=memory_fraction, ep=ep)
    cap = np.minimum(cap, max_sequences)  # the KV cache's room, or the framework's cap on running requests
    running = np.maximum(np.minimum(per_replica, cap), 1.0)  # requests a replica runs
    # Pipeline parallelism: min(running, pp) micro-batches in flight, one per stage, each
    # passing every stage in turn (a token's iteration is every layer, at the micro-batch's
    # size, plus pp - 1 stage-to-stage sends). The schedule below runs one micro-batch.
    r = running / np.minimum(running, pp)
    # Requests that finish together are replaced together, so prompts arrive in clumps: an
    # iteration that prefills carries a whole token budget of them (all r when they fit).
    clump = np.minimum(r * prompt, token_budget)  # prefill tokens of a prefill iteration
    n_prefill = np.ceil(prompt / token_budget)  # iterations one prompt spans
    clumps = np.maximum(np.ceil(r * prompt / clump), n_prefill)  # prefill iterations per cycle of r requests
    k = np.asarray(draft_len, float) if draft is not None else 0.0
    tokens_per_step = expected_tokens_per_step(acceptance=acceptance, draft_len=k)  # per decoding sequence
    steps = (generate - 1.0) / tokens_per_step  # iterations a request decodes its later tokens in
    def decoding_share(backlog=0.0):
        """Of its life a request spends decoding (its prefill and its wait for a prefill backlog the rest)."""
        return steps / (steps + n_prefill + backlog)
    share = decoding_share()
    decoding = 1.0 + (r - 1.0) * share  # in a decode iteration of the tagged request: it and the others
    # The replicas whose prefills stall a request's decoding: an MoE model's attention-DP replicas
    # step in lockstep (their MoE layers exchange tokens every iteration) unless the balancer
    # releases their prompts together (adp_balance); a dense model's replicas exchange nothing
    balanced_or_dense = (np.asarray(adp_timeout_iters) > 0.0) | (model.n_moe_layers == 0)
    lockstep_replicas = np.where(balanced_or_dense, 1.0, attention_dp)
    kw = dict(hw=hw, model=model, context=prompt + generate / 2.0, prompt=prompt, tp=tp, attention_dp=attention_dp,
              ep=ep, kv_bytes=kv_bytes, imbalance=imbalance, routed=routed, **layer)
    eager = dict(kw, hw=eager_numbers(hw))  # an iteration that prefills runs eagerly (inference.eager)
    # TensorRT-LLM's batch waiting (without attention DP, while others decode): the prompts whose
    # tokens beside the decoding ones reach the ratio of the budget
    needed = needed_prompts(ratio=batch_wait_max_tokens_ratio, token_budget=token_budget, prompt=prompt,
                            decoding_tokens=(r - 1.0) * share * (1.0 + k))
    batch_wait_iters = np.where((np.asarray(attention_dp) == 1.0) & (r > 1.0)
                                & (np.asarray(batch_wait_max_tokens_ratio) > 0.0), batch_wait_timeout_iters, 0.0)

    def holds(arrivals_per_iter, others_per_iter):
        """(decode iterations a prompt is held before its prefill, prompts held beside it):
        TensorRT-LLM's attention-DP balancing (adp_balance; beside it, its replica's arrivals
        over twice the wait) and its batch waiting (batch_wait, at the others' arrivals)."""
        adp = held_iterations(arrivals_per_iter, attention_dp, adp_timeout_iters, adp_batching_iters)
        wait, released = batch_wait_held(others_per_iter, needed, batch_wait_iters)
        return adp + wait, 2.0 * adp * others_per_iter + released - 1.0

    def step(decode_batch, prefill_tokens):
        """(parts, seconds, sequences) of one iteration: its kernels plus the host overhead,
        h per iteration and h_seq per sequence in it (each decoding request, each prompt a
        chunk of the budget touches: at least one when any prefill runs)."""
        run = eager if np.all(np.asarray(prefill_tokens) > 0.0) else kw
        it = iteration(decode_batch=decode_batch, prefill_tokens=prefill_tokens, verify=1.0 + k, **run)
        it = add_into(it, pp_transfer(run["hw"], model, tokens=decode_batch * (1.0 + k) + prefill_tokens, tp=tp,
                                       pp=pp, stream_bytes=stream_bytes))  # the micro-batch from stage to stage
        if draft is not None:  # k draft iterations of the decoding sequences; the prompts through the draft
            # (an iteration without decoding sequences, or without prompts, runs no such draft pass:
            # each pass is timed at one sequence or token at least, then masked)
            drafting = iteration(decode_batch=np.maximum(decode_batch, 1.0), prefill_tokens=0.0 * prefill_tokens,
                                 **dict(kw, model=draft))
            prompts = iteration(decode_batch=0.0 * decode_batch, prefill_tokens=np.maximum(prefill_tokens, 1.0),
                                **dict(kw, model=draft))
            it = dict(it, draft_s=np.where(decode_batch > 0, k * (drafting["time_s"] + drafting["overhead_s"]), 0.0)
                      + np.where((prefill_tokens > 0) & (k > 0), prompts["time_s"] + prompts["overhead_s"], 0.0))
            it["time_s"] = it["time_s"] + it["draft_s"]
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
            return ((chunks - n_prefill) / 2.0 * prefill_s + steps * decode_s) / (generate - 1.0)
        service_ttft = (chunks + n_prefill) / 2.0 * prefill_iter  # every wave is a burst
    elif schedule == "prefill_first_spread":  # prefill batches alone, arrivals spread over the cycle
        dec, decode_iter, decode_seqs = step(decoding, 0.0 * r)
        _, burst_iter, _ = step(0.0 * r, clump)  # the first wave's batches: a whole budget each
        prefill_iter, prefill_seqs, interrupts, service_ttft, _ = prefill_alone_spread(
            step, r=r, prompt=prompt, n_prefill=n_prefill, token_budget=token_budget, steps=steps,
            decode_iter=decode_iter, recv_interval=recv_interval, lockstep_replicas=lockstep_replicas)

        def per_token(prefill_s, decode_s):
            return (interrupts * prefill_s + steps * decode_s) / (generate - 1.0)
    else:
        dec, decode_iter, decode_seqs = step(decoding, 0.0 * r)
        # A request decodes through the other clumps' prefill iterations and the pure decode ones;
        # the others' beyond its decode steps run while it waits (backlog: a prefill-bound cycle),
        # so fewer of the others decode beside a prefill: the share of their lives they decode
        interrupts = np.minimum(clumps - n_prefill, steps)
        backlog = np.maximum(clumps - n_prefill - steps, 0.0)
        _, prefill_iter, prefill_seqs = step(np.maximum(r - clump / prompt, 0.0) * decoding_share(backlog), clump)

        def per_token(prefill_s, decode_s):
            return (interrupts * prefill_s + (steps - interrupts) * decode_s) / (generate - 1.0)
        # Clumps stay adjacent (they were prefilled one after another), so a request arrives
        # while the previous clump's prefill iteration runs and waits for half of it on
        # average; with one clump the server is idle when it arrives.
        service_ttft = (n_prefill + backlog) * prefill_iter + np.where(clumps > 1.0, 0.5, 0.0) * prefill_iter
    tpot = per_token(prefill_iter, decode_iter)
    others = (r - 1.0) / r  # at concurrency 1 nothing runs when a request arrives
    if schedule == "spread":
        # The others' prompts no longer come in clumps either: each (with the q - 1 that
        # arrived beside it) rides one of the tagged request's iterations, (r - 1) / q · I
        # of them in its life, solved with q and the arrival rate (FIXED_POINT_ROUNDS).
        for _ in range(FIXED_POINT_ROUNDS):
            lam = r / (service_ttft + (generate - 1.0) * tpot)
            mean_iter = tpot * (generate - 1.0) / steps  # a decoding request's iteration (E tokens of it)
            hold_iters, beside = holds(lam * decode_iter, lam * others * decode_iter)
            q = 1.0 + lam * mean_iter * others + beside  # the request and those beside it
            iters = np.maximum(q * prompt / token_budget, n_prefill)  # through the token budget, chunk by chunk
            # the others' prefill iterations (each with its q - 1 companions) stall its decoding,
            # at most one per decode step; its own replica's beyond its decode steps run while
            # it waits for its first token (a prefill-bound cycle: every prompt's chunks pass
            # through the replica's iterations, none vanishes; lockstep replicas' backlogs
            # prefill side by side in the same iterations), so fewer of the others decode beside
            backlog = np.maximum((r - 1.0) / q * iters - steps, 0.0)
            _, own_iter, own_seqs = step((r - 1.0) * decoding_share(backlog), q * prompt / iters)
            interrupts = np.minimum((lockstep_replicas * r - 1.0) / q * iters, steps)  # per_token reads it
            service_ttft = 0.5 * mean_iter * others + hold_iters * decode_iter + \
                ((iters + n_prefill) / 2.0 + backlog) * own_iter
            prefill_seqs = own_seqs  # the sequences of the iterations that interrupt
            tpot = per_token(own_iter, decode_iter)
    else:  # the other schedules: the engine's hold at their arrival rate
        lam = r / (service_ttft + (generate - 1.0) * tpot)
        service_ttft = service_ttft + decode_iter * holds(lam * decode_iter, lam * others * decode_iter)[0]
    # TPOT is linear in the host constants: iterations and sequences it carries per token
    tpot_iterations, tpot_sequences = per_token(1.0, 1.0) + 0.0 * tpot, per_token(prefill_seqs, decode_seqs)
    host_tpot = overhead_s * tpot_iterations + overhead_s_per_sequence * tpot_sequences
    burst_s = (chunks + n_prefill) / 2.0 * (burst_iter if schedule == "prefill_first_spread" else prefill_iter)
    service_ttft = service_ttft + request_latency_s
    cycle = service_ttft + (generate - 1.0) * tpot
    rate = running / cycle  # requests completed per second per replica (each micro-batch r / cycle)
    wait = np.maximum(per_replica - running, 0.0) / rate
    # Later waves arrive as the schedule says; a run of `waves` x concurrency requests
    # averages them with the first.
    burst_ttft = burst_s + request_latency_s + wait
    steady_ttft = service_ttft + wait
    ttft = steady_ttft + (burst_ttft - steady_ttft) / waves
    e2e = ttft + (generate - 1.0) * tpot
    devices = tp * attention_dp * pp
    busy = np.minimum(attention_dp, concurrency)  # fewer requests than replicas leave the others idle
    out_rate = busy * rate * generate
    supported, missing = math_support(hw, (layer["math"], activations))
    fits = (cap >= 1.0) & supported
    reason = choose([(np.broadcast_to(~supported, np.shape(fits)), f"no {missing} math units on {hw.label}"),
                     (cap < 1.0, "weights, activations and the runtime's own memory leave no room for one "
                                 "request's KV cache")], "")
    return {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "queue_s": wait, "first_wave_ttft_s": burst_ttft,
        "steady_ttft_s": steady_ttft,
        "output_tokens_per_s": out_rate, "output_tokens_per_s_per_device": out_rate / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot,
        "requests_per_s": busy * rate,
        "batch": decoding + clump / prompt * clumps / (clumps + steps),  # sequences per iteration
        "running": running, "running_limit": cap, "prefill_iterations": n_prefill, "prefill_clumps": clumps,
        "decode_iteration_s": decode_iter, "framework_overhead_s": host_tpot,
        "decode_draft_s": dec.get("draft_s", 0.0) + 0.0 * tpot, "tokens_per_step": tokens_per_step + 0.0 * tpot,
        "request_latency_s": request_latency_s + 0.0 * tpot,
        "kernel_tpot_s": tpot - host_tpot,
        "tpot_iterations": tpot_iterations, "tpot_sequences": tpot_sequences,
        "decode_matmul_s": dec["matmul_s"], "decode_attention_s": dec["attention_s"],
        "decode_elementwise_s": dec["elementwise_s"], "decode_comm_s": dec["comm_s"],
        "prefill_iteration_s": prefill_iter, "weights_per_device_bytes": weights_bytes,
        "kv_per_request_bytes": kv_per_seq, "devices": devices + 0.0 * tpot,
        "fits": fits, "reason": reason,
    }
