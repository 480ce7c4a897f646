"""Fixed prefill and decode pools at a fixed concurrency (workloads/pools_closed_loop.py):
Little's law over the loop and over the decode stage, the prefill pool as an M/D/1 queue at
the loop's rate, more workers never slower, and a speculating decode pool's step from its
own iterations."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_model
from workbench.workloads.pools_closed_loop import disaggregated_closed_loop


def test_fixed_pools_obey_littles_law_and_respond_to_their_sizes():
    """Steady state (no first wave): concurrency = requests/s x end-to-end; more prefill
    workers never lengthen TTFT, more decode workers never lengthen TPOT; TTFT is at least
    one prefill batch and its KV transfer."""
    hw = numbers("h200_sxm", framework="trtllm")
    kw = dict(prefill_hw=hw, decode_hw=hw, model=load_model("deepseek_v3"), prompt=8192.0, generate=1024.0,
              prefill_tp=8.0, prefill_attention_dp=1.0, prefill_ep=8.0, prefill_batch=1.0, decode_tp=1.0,
              decode_attention_dp=8.0, decode_ep=8.0, weights="fp8", activations="fp8", kv="fp8",
              prefill_overhead_s=0.0, decode_overhead_s=0.0, kv_link_bytes_per_s=8 * 50e9)
    c = np.array([4.0, 8.0, 64.0, 256.0])  # 4: fewer requests than the 8 decode replicas
    r = disaggregated_closed_loop(concurrency=c, prefill_workers=1.0, decode_workers=1.0, **kw)
    np.testing.assert_allclose(r["requests_per_s"] * r["e2e_s"], c, rtol=1e-9)
    assert np.all(r["ttft_s"] >= r["prefill_batch_s"] + r["kv_transfer_s"] - 1e-12)
    more_p = disaggregated_closed_loop(concurrency=c, prefill_workers=2.0, decode_workers=1.0, **kw)
    more_d = disaggregated_closed_loop(concurrency=c, prefill_workers=1.0, decode_workers=2.0, **kw)
    assert np.all(more_p["ttft_s"] <= r["ttft_s"] + 1e-12) and np.all(more_d["tpot_s"] <= r["tpot_s"] + 1e-12)
    assert np.all(r["prefill_utilization"] <= 1.0 + 1e-12)


def test_fixed_pools_prefill_queue_is_the_md1_wait_at_the_loop_rate():
    """The prefill pool as an M/D/1 queue (DistServe, OSDI'24, sec. 3.1): at the rate the
    closed loop settles at, each prompt waits rho D / (2 (1 - rho)) (D one prefill batch,
    rho the pool's utilization), and that rate closes the loop (decoding requests / (cycle +
    wait)); the wait grows with concurrency and vanishes at low load; at capacity the pool
    saturates and Little's law holds either way."""
    hw = numbers("h200_sxm", framework="trtllm")
    kw = dict(prefill_hw=hw, decode_hw=hw, model=load_model("deepseek_v3"), prompt=8192.0, generate=1024.0,
              prefill_tp=8.0, prefill_attention_dp=1.0, prefill_ep=8.0, prefill_batch=1.0, decode_tp=1.0,
              decode_attention_dp=8.0, decode_ep=8.0, weights="fp8", activations="fp8", kv="fp8",
              prefill_overhead_s=0.0, decode_overhead_s=0.0, kv_link_bytes_per_s=8 * 50e9, prefill_workers=1.0,
              decode_workers=1.0)
    c = np.array([1.0, 16.0, 64.0, 128.0, 256.0, 4096.0])
    r = disaggregated_closed_loop(concurrency=c, **kw)
    rho, d = r["prefill_utilization"], r["prefill_batch_s"]
    np.testing.assert_allclose(r["prefill_wait_s"], np.minimum(rho, 0.999) * d / (2.0 * (1.0 - np.minimum(rho, 0.999))),
                               rtol=1e-9)
    below = rho < 0.99
    cycling = np.minimum(8.0 * np.minimum(c / 8.0, r["decode_running_limit"]), c)  # every request in flight here
    cycle = r["prefill_batch_s"] + r["kv_transfer_s"] + r["prefill_wait_s"] + 1023.0 * r["tpot_s"]
    np.testing.assert_allclose((r["requests_per_s"] * cycle)[below], cycling[below], rtol=1e-9)
    # a decode replica holds the requests decoding, by Little's law on the decode stage (at least one)
    decoding = r["requests_per_s"] * 1023.0 * r["tpot_s"] / 8.0
    np.testing.assert_allclose(r["decode_running"], np.maximum(decoding, 1.0), rtol=1e-3)
    # never more than are in flight; at saturation (4,096 in flight) the prefill queue holds most of them
    assert np.all(r["decode_running"] <= np.maximum(c / 8.0, 1.0) + 1e-9) and r["decode_running"][-1] < 0.1 * 4096.0 / 8.0
    assert r["prefill_wait_s"][0] < 0.01 * d[0] and np.all(np.diff(r["prefill_wait_s"]) >= 0)
    assert rho[-1] == pytest.approx(1.0, abs=1e-3)  # saturated: the rest queue at the prefill pool
    np.testing.assert_allclose(r["requests_per_s"] * r["e2e_s"], c, rtol=1e-9)


def test_fixed_pools_with_a_speculating_decode_pool():
    """The decode pool speculating with the MTP head (k = 3, a = 0.7): its step is k draft
    iterations plus a verify step over 4 tokens per sequence, emitting E = 2.533 tokens, so
    TPOT = that step / E (to the last digits, from the pool's own iterations); Little's law
    holds; the draft's prompt pass and cache lengthen the prefill batch and KV transfer;
    draft_len 0 is the pool without speculation."""
    from workbench.workloads.concurrency import iteration
    from workbench.workloads.speculative import mtp_draft
    hw = numbers("h200_sxm", framework="trtllm")
    model = load_model("deepseek_v3")
    kw = dict(prefill_hw=hw, decode_hw=hw, model=model, prompt=4096.0, generate=1024.0, prefill_tp=8.0,
              prefill_attention_dp=1.0, prefill_ep=8.0, prefill_batch=1.0, decode_tp=8.0, decode_attention_dp=1.0,
              decode_ep=8.0, weights="fp8", activations="fp8", kv="fp8", prefill_overhead_s=0.0,
              decode_overhead_s=0.0, kv_link_bytes_per_s=8 * 50e9, prefill_workers=1.0, decode_workers=1.0)
    c = np.array([8.0, 64.0])
    draft, k, a = mtp_draft(model), 3.0, 0.7
    plain = disaggregated_closed_loop(concurrency=c, **kw)
    spec = disaggregated_closed_loop(concurrency=c, draft=draft, draft_len=k, acceptance=a,
                                     draft_weights_bytes=2e9, **kw)  # its MoE layer, FP8, over 8 GPUs: ~1.4 GB
    zero = disaggregated_closed_loop(concurrency=c, draft=draft, draft_len=0.0, acceptance=a, **kw)
    np.testing.assert_allclose(spec["requests_per_s"] * spec["e2e_s"], c, rtol=1e-9)
    np.testing.assert_allclose(zero["tpot_s"], plain["tpot_s"], rtol=1e-12)
    common = dict(hw=hw, context=4096.0 + 512.0, prompt=4096.0, tp=8.0, attention_dp=1.0, ep=8.0, math="fp8",
                  w_bytes=1.0, a_bytes=1.0, kv_bytes=1.0, prefill_tokens=0.0 * c)
    batch = spec["decode_running"]  # the requests decoding (Little's law on the decode stage)
    verify = iteration(model=model, decode_batch=batch, verify=1.0 + k, **common)
    drafting = iteration(model=draft, decode_batch=batch, **common)
    e = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    step = verify["time_s"] + verify["overhead_s"] + k * (drafting["time_s"] + drafting["overhead_s"])
    np.testing.assert_allclose(spec["tpot_s"], step / e, rtol=1e-9)
    assert np.all(spec["tpot_s"] < plain["tpot_s"])
    assert np.all(spec["prefill_batch_s"] > plain["prefill_batch_s"])
    assert np.all(spec["kv_transfer_s"] > plain["kv_transfer_s"])
    assert np.all(spec["decode_running_limit"] < plain["decode_running_limit"])


def _simulate_capped(*, concurrency, slots, replicas, prefill_s, kv_s, decode_s, requests=40000, seed=0):
    """A discrete-event simulation of the capped loop: a request takes a decode slot (first
    come, first served), then a prefill replica drawn at random (FIFO each, `prefill_s` a
    prompt), ships its cache (`kv_s`), decodes (`decode_s`) and frees its slot, and its client
    issues the next at once. Mean TTFT and completions per second, the first quarter left out."""
    import heapq
    rng = np.random.default_rng(seed)
    free_at = np.zeros(replicas)
    slot_free, issue = [0.0] * slots, [0.0] * concurrency
    ttft, done = [], []
    for _ in range(requests):
        t0 = heapq.heappop(issue)
        start = max(t0, heapq.heappop(slot_free))
        i = rng.integers(replicas)
        free_at[i] = max(start, free_at[i]) + prefill_s
        first = free_at[i] + kv_s
        ttft.append(first - t0)
        done.append(first + decode_s)
        heapq.heappush(slot_free, done[-1])
        heapq.heappush(issue, done[-1])
    k = requests // 4
    ends = np.sort(done)
    return float(np.mean(ttft[k:])), (requests - k) / (ends[-1] - ends[k])


def test_a_decode_batch_cap_queues_the_rest_as_a_simulation_of_the_loop_does():
    """predict.disaggregated with decode_max_batch=16 per attention replica (8 replicas: 128
    slots) at 160 to 512 requests in flight: the decode pool never holds more, the others wait
    before their prefill, and the loop's rate and TTFT agree with a discrete-event simulation
    of that scheduler on the model's own prefill, transfer and decode times: rate within 1%
    (0.65-0.83% low), steady TTFT within 5% (+0.8% to +3.9%: the model's M/D/1 prefill wait
    takes Poisson arrivals, while slots freed by equal decodes admit prompts more evenly).
    Without the cap the whole cache decodes, faster per request and slower per token."""
    from workbench import predict
    kw = dict(prefill_hardware="b200", decode_hardware="b200", model="deepseek_v3", prompt=8192, generate=1024,
              weights="fp4", framework="trtllm", prefill_tp=4, decode_tp=1, decode_attention_dp=8, decode_ep=8,
              decode_workers=1)
    for workers, c in ((2, 160), (3, 160), (2, 256), (4, 512)):
        ds = predict.disaggregated(prefill_workers=workers, concurrency=c, decode_max_batch=16, **kw)
        assert float(ds.decode_running_limit) == 16.0 and float(ds.decode_running) <= 16.0
        # the steady TTFT by Little's law over the loop (ttft_s also averages in the harness's first wave)
        steady = c / float(ds.requests_per_s) - 1023.0 * float(ds.tpot_s)
        assert float(ds.ttft_s) >= steady - 1e-9
        ttft, rate = _simulate_capped(concurrency=c, slots=8 * 16, replicas=workers,
                                      prefill_s=float(ds.prefill_batch_s), kv_s=float(ds.kv_transfer_s),
                                      decode_s=1023.0 * float(ds.tpot_s))
        assert float(ds.requests_per_s) == pytest.approx(rate, rel=0.01)
        assert steady == pytest.approx(ttft, rel=0.05), (workers, c, steady, ttft)
    free = predict.disaggregated(prefill_workers=2, concurrency=256, **kw)
    capped = predict.disaggregated(prefill_workers=2, concurrency=256, decode_max_batch=16, **kw)
    assert float(free.decode_running) > 16.0
    assert float(free.ttft_s) < float(capped.ttft_s) and float(free.tpot_s) > float(capped.tpot_s)


def test_decode_max_batch_is_checked():
    from workbench import predict
    from workbench.errors import InputError
    kw = dict(prefill_hardware="b200", decode_hardware="b200", model="deepseek_v3", weights="fp4")
    with pytest.raises(InputError, match="decode_max_batch=0 is not allowed"):
        predict.disaggregated(concurrency=64, decode_max_batch=0, **kw)
    with pytest.raises(InputError, match="decode_max_batch=16 is not allowed without concurrency"):
        predict.disaggregated(decode_max_batch=16, **kw)


def test_each_gpu_pool_computes_in_its_own_math():
    """A prefill pool of other GPUs than the decode pool's runs the weights in its own default
    math (backends/gpu.default_activations): NVFP4 weights as W4A16 on an H200 prefill pool
    beside a B200 decode pool running W4A4 (before, the decode pool's FP4 math reached the
    H200 pool, which has no FP4 units: NaN times with fits=True). Its prefill batch is the
    one an all-H200 deployment times; a math a pool lacks, asked for both, is flagged."""
    from workbench import predict
    args = dict(model="qwen3_32b", prefill_tp=2, decode_tp=2, concurrency=16, prompt=1024, generate=256, weights="fp4")
    mixed = predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="b200", **args)
    hopper = predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="h200_sxm", **args)
    assert bool(mixed.fits) and np.isfinite(float(mixed.ttft_s)) and np.isfinite(float(mixed.tpot_s))
    assert float(mixed.prefill_batch_s) == float(hopper.prefill_batch_s)  # the same W4A16 prefill on H200
    fp8 = predict.disaggregated(prefill_hardware="a100_sxm", decode_hardware="h100_sxm",
                                **dict(args, weights="fp8"))  # FP8 as W8A16 on Ampere (vLLM's FP8 Marlin)
    assert bool(fp8.fits) and np.isfinite(float(fp8.ttft_s))
    forced = predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="b200", activations="fp4", **args)
    assert not bool(forced.fits)
    assert str(forced.reason.values) == ("no fp4 math units on h200_sxm (the prefill pool); allowed: activations "
                                         "a format both pools compute in")


@pytest.mark.parametrize("concurrency", [64, 1024])
def test_the_steady_state_keeps_littles_law_and_the_first_wave_is_reported(concurrency):
    """ttft_s averages the first wave in (the benchmark's harness), so requests/s x e2e_s
    exceeds the concurrency by the first wave's share; the steady state's TTFT, now an
    output with the first wave's, keeps Little's law exactly."""
    ds = predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="h200_sxm", model="llama_3_1_70b",
                               prefill_tp=8, decode_tp=8, prefill_workers=1, decode_workers=1,
                               concurrency=concurrency, prompt=1024, generate=1024, framework="sglang")
    steady_e2e = float(ds.steady_ttft_s) + 1023 * float(ds.tpot_s)
    assert float(ds.requests_per_s) * steady_e2e == pytest.approx(concurrency, rel=1e-6)
    assert float(ds.steady_ttft_s) <= float(ds.ttft_s) <= float(ds.first_wave_ttft_s)
