"""The wafer under the serving benchmarks' semantics: a fixed number of requests in flight
(a new one starts as each finishes), mean TTFT and mean TPOT = (end-to-end - TTFT) /
(generate - 1), as workloads/concurrency.py runs GPUs, so a CS system and a GPU instance
are compared under one set of rules.

The costs are the static wafer model's (workloads/wafer_inference.py): a decode step of b
running sequences pipelined through the layer regions, the prompt prefilled as a pipeline
of chunks through the same regions (weights resident in SRAM), the lm_head. What the
closed loop adds:

- KV capacity: a sequence's whole cache (prompt + generate tokens) sits in the SRAM of
  every layer region from admission to its end (no paging), so at most the static
  model's largest batch runs (wafer_capacity.wafer_max_batch); the rest queue (TTFT grows
  by Little's law, as on GPUs: it is not an error).
- The decode grid: the fastest region side that holds every running request's cache
  (the static model's search at that batch), kept for every step of the cycle.
- The schedule: ASSUMED, Cerebras' serving scheduler is not public. A prefill pass runs
  alone through the regions and the decode wavefronts queue behind it, and requests
  arrive spread over the cycle: the "prefill_first_spread" schedule of the GPU closed loop
  (concurrency.prefill_alone_spread, one implementation), with the whole prompt one
  pipelined pass (no token budget: the pipeline chunks it itself). A prompt lands right
  after the decode step that ended its predecessor ("after_decode": a pass lasts tens of
  decode steps, so arrivals, which follow completions, almost never land inside one). A pass delivers its
  first tokens after its whole makespan (the static model's pipelined TTFT) but holds
  the pipeline only for its busiest stage's share (every chunk's time in that stage,
  wafer_pipeline's stage_busy_s): that is what a decode step behind it waits. It is the
  conservative end: a scheduler that slipped prefill chunks into the ring slots the decode
  micro-batches leave idle (fewer micro-batches than layers) would stall decoding less.
- No host overhead per step and no request latency: the wafer runs its compiled program;
  `ttft_client_s` adds the vendor service's client-side latency (network, API), as the
  static model reports it.
- The benchmark's first wave (every request at once: all prompts in one pipelined pass)
  is averaged in over the harness's `waves`, the GPUs' constant
  (specs/serving/frameworks.yaml benchmark_waves), so both are scored the same way.

Speculative decoding (draft regions on the same wafers, wafer_inference's rule): a step
emits E tokens per sequence, so a request decodes its g - 1 later tokens in (g - 1) / E
steps; random acceptance keeps arrivals spread, as assumed.
"""
from __future__ import annotations

import numpy as np

from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from .concurrency import prefill_alone_spread
from .wafer_capacity import wafer_max_batch
from .wafer_inference import wafer_inference


NO_ROOM = "no request's KV cache fits beside the weights in the layer regions"


def _held(*, per_replica, draft, draft_len, acceptance, **size) -> tuple:
    """(the most requests whose caches fit, the requests that run, the static model at that
    batch on the fastest grid that holds them, the arguments of every later step on that
    grid with the draft, fits, reason) of `size`'s systems offered `per_replica` requests."""
    speculating = draft is not None and np.any(np.asarray(draft_len) > 0)
    spec = dict(draft=draft, draft_len=draft_len, acceptance=acceptance) if speculating else {}
    cap = wafer_max_batch(draft=draft if speculating else None, **size)
    running = np.maximum(np.minimum(per_replica, cap), 1.0)
    held = wafer_inference(batch=running, **spec, **size)
    fits = held["fits"] & (cap >= 1.0)
    reason = np.where(cap < 1.0, NO_ROOM, np.asarray(held["reason"], dtype=object))
    return cap, running, held, dict(size, pe_grid=held["pe_grid_decode"], **spec), fits, reason


def wafer_closed_loop(*, w: WaferNumbers, model: ModelSpec, concurrency, prompt, generate, devices,
                      weights: str, kv: str, mapping: str = "mesh", draft: ModelSpec | None = None, draft_len=0.0,
                      acceptance=0.0, waves=np.inf, arrivals="after_decode") -> dict:
    """Mean TTFT, TPOT and throughput of `devices` CS systems serving `concurrency`
    requests in flight (module doc; `arrivals`: concurrency.ARRIVALS). Sizes are ndarrays."""
    size = dict(w=w, model=model, devices=devices, prompt=prompt, generate=generate, weights=weights, kv=kv,
                mapping=mapping)
    cap, running, held, fixed, fits, reason = _held(per_replica=concurrency, draft=draft, draft_len=draft_len,
                                                    acceptance=acceptance, **size)
    tokens_per_step = held.get("tokens_per_step", 1.0)  # E per sequence and step under speculation
    steps = (generate - 1.0) / tokens_per_step  # decode steps a request takes after its first token
    share = steps / (steps + 1.0)  # of its life a request spends decoding (one prefill pass)
    decoding = 1.0 + (running - 1.0) * share  # sequences in a decode step of the tagged request
    decode_iter = wafer_inference(batch=decoding, **fixed)["tpot_s"] * tokens_per_step  # one step
    prefill = {k: v for k, v in fixed.items() if k not in ("draft", "draft_len", "acceptance")}

    def step(decode_batch, prefill_tokens):
        """(parts, seconds, sequences) of a prefill pass of prefill_tokens / prompt prompts
        through the regions (the stepping argument of prefill_alone_spread): its first
        tokens come after the whole pass, while decoding waits only for the busiest stage's
        share of it (`stall_s`)."""
        q = np.maximum(prefill_tokens / prompt, 1.0)
        run = wafer_inference(batch=q, **prefill)
        return {"stall_s": run["prefill_stage_busy_s"]}, run["ttft_s"], q
    prefill_iter, _, interrupts, service_ttft, stall = prefill_alone_spread(
        step, r=running, prompt=prompt, n_prefill=1.0, token_budget=np.inf, steps=steps, decode_iter=decode_iter,
        arrivals=arrivals)
    tpot = (interrupts * stall + steps * decode_iter) / (generate - 1.0)
    burst_s = step(0.0, running * prompt)[1]  # the first wave: every prompt in one pipelined pass
    cycle = service_ttft + (generate - 1.0) * tpot
    rate = running / cycle  # requests completed per second (Little's law on the running ones)
    wait = np.maximum(concurrency - running, 0.0) / rate  # the rest queue for a cache's room
    steady_ttft = service_ttft + wait
    ttft = steady_ttft + (burst_s + wait - steady_ttft) / waves
    e2e = ttft + (generate - 1.0) * tpot
    out_rate = rate * generate
    zero = np.zeros(np.shape(tpot))  # counts broadcast to every point, kept where the times are NaN
    return {
        "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "queue_s": wait, "first_wave_ttft_s": burst_s + wait,
        "steady_ttft_s": steady_ttft, "ttft_client_s": ttft + w.service_request_latency_s,
        "output_tokens_per_s": out_rate, "output_tokens_per_s_per_device": out_rate / devices,
        "output_tokens_per_s_per_user": 1.0 / tpot, "requests_per_s": rate,
        "batch": decoding + zero, "running": running + zero, "running_limit": cap + zero,
        "decode_iteration_s": decode_iter, "prefill_iteration_s": prefill_iter, "prefill_stall_s": stall,
        "tokens_per_step": tokens_per_step + zero, "pe_grid_decode": held["pe_grid_decode"],
        "bound": held["bound"], "devices": devices + zero, "fits": fits, "reason": reason,
    }


def wafer_decode_pool(*, w: WaferNumbers, model: ModelSpec, per_replica, prompt, generate, devices, weights: str,
                      kv: str, mapping: str = "mesh", draft: ModelSpec | None = None, draft_len=0.0,
                      acceptance=0.0) -> dict:
    """A decode pool of `devices` CS systems per replica for the fixed prefill and decode
    pools (workloads/pools_closed_loop.disaggregated_closed_loop's `decode_pool`): the most
    requests a replica's KV cache holds, and a step of r running requests, the static
    model's pipelined decode step at the grid that holds min(per_replica, cap) of them
    (no prefill in it, no host time; a verify step's E tokens per sequence under
    speculation). Also `fits` and `reason` of that layout."""
    size = dict(w=w, model=model, devices=devices, prompt=prompt, generate=generate, weights=weights, kv=kv,
                mapping=mapping)
    cap, _, held, fixed, fits, reason = _held(per_replica=per_replica, draft=draft, draft_len=draft_len,
                                              acceptance=acceptance, **size)

    def step(r):
        """(seconds per token, host share, draft share): the draft's steps are inside the
        wafer's time per token, and no host runs a step."""
        tpot = wafer_inference(batch=r, **fixed)["tpot_s"]
        return tpot, 0.0 * tpot, 0.0 * tpot
    return {"cap": cap, "step": step, "devices": devices, "fits": fits, "reason": reason,
            "pe_grid_decode": held["pe_grid_decode"]}
