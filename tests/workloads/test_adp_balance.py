"""TensorRT-LLM's attention-DP balancing (workloads/adp_balance.py) and the lockstep of attention-DP
replicas without it (workloads/concurrency.py): the mean hold of a prompt
against a simulation of the executor's counter (PyExecutor._balance_adp_requests: prompts
held until every replica has one or `timeout_iters` iterations passed, then
`batching_wait_iters` more once all have one), its limits in closed form, and the closed
loop with it against a simulated attention-DP server (replicas in lockstep, each replacing
its finished requests, the balancer gating every prefill)."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.workloads import concurrency as cc
from workbench.workloads.adp_balance import held_iterations, settings


def balancer(all_hold, counts, timeout, batching):
    """One iteration of the executor's rule (PyExecutor._balance_adp_requests): `counts` =
    [iterations waited, batching iterations waited], updated; True where it releases."""
    if all_hold:  # every replica holds a prompt
        counts[0] = 0
        if counts[1] < batching:
            counts[1] += 1
            return False
        counts[1] = 0
        return True
    counts[0] += 1
    if counts[0] >= timeout:
        counts[0] = 0
        return True
    return False


def counter_simulation(lam, replicas, timeout, batching, iterations=60_000, seed=0):
    """Mean iterations a prompt waits: Poisson(lam) prompts land on each replica during each
    iteration (at uniform moments); at each iteration's start the executor's rule decides."""
    rng = np.random.default_rng(seed)
    queues = [[] for _ in range(replicas)]
    counts, waits = [0, 0], []
    for k in range(iterations):
        for q in queues:
            q.extend(k - 1 + rng.random(rng.poisson(lam)))
        if balancer(all(queues), counts, timeout, batching):
            for q in queues:
                waits.extend(k - np.asarray(q))
                q.clear()
    return float(np.mean(waits))


# (prompts per replica per iteration, replicas, timeout_iters, batching_wait_iters): DeepSeek-R1's
# InferenceX settings (60 / 0) from rare to frequent prompts, gpt-oss's defaults (50 / 10)
CASES = [(0.004, 8, 60, 0), (0.017, 8, 60, 0), (0.035, 8, 60, 0), (0.2, 16, 60, 0), (0.05, 4, 60, 0),
         (0.14, 2, 50, 10), (0.07, 4, 50, 10), (0.5, 8, 60, 0)]


@pytest.mark.parametrize("lam, replicas, timeout, batching", CASES)
def test_the_mean_hold_matches_the_executor_counter(lam, replicas, timeout, batching):
    """Within 7%: the formula's arrivals are continuous, the counter's iterations whole (at
    a few iterations of hold the half-iteration shows)."""
    assert float(held_iterations(lam, replicas, timeout, batching)) == pytest.approx(
        counter_simulation(lam, replicas, timeout, batching), rel=0.07)


def test_the_limits_in_closed_form():
    """One replica: no hold (TensorRT-LLM balances only with attention DP). Prompts so rare
    that the timeout ends every window: T / 2 on average. So frequent that every replica has
    one at once: only the batching wait, the prompts landing through its B iterations
    waiting B / 2 on average. Off (T = 0): 0."""
    assert float(held_iterations(0.1, 1, 60, 10)) == 0.0
    assert float(held_iterations(1e-7, 8, 60, 0)) == pytest.approx(30.0, rel=1e-3)
    assert float(held_iterations(1e4, 8, 60, 10)) == pytest.approx(5.0, rel=1e-3)
    assert float(held_iterations(0.05, 8, 0, 0)) == 0.0
    lam = np.array([0.001, 0.01, 0.1, 1.0])
    assert np.all(np.diff(held_iterations(lam, 8, 60, 0)) < 0)  # more prompts: shorter holds
    assert np.all(np.diff(held_iterations(0.01, np.array([2, 4, 8, 16]), 60, 0)) > 0)  # more replicas to fill


def test_the_quadrature_agrees_with_a_finer_one(monkeypatch):
    """adp_balance.QUADRATURE_POINTS (64) against 1,024 points: within 0.3% up to 0.5
    prompts per replica per iteration, 1.2% at 2 (where the window's end is sharpest)."""
    from workbench.workloads import adp_balance
    cases = [(0.004, 8, 60, 0), (0.035, 8, 60, 0), (0.14, 2, 50, 10), (0.5, 8, 60, 0), (2.0, 8, 60, 10)]
    coarse = [float(held_iterations(*c)) for c in cases]
    monkeypatch.setattr(adp_balance, "QUADRATURE_POINTS", 1024)
    fine = [float(held_iterations(*c)) for c in cases]
    np.testing.assert_allclose(coarse[:4], fine[:4], rtol=0.003)
    assert coarse[4] == pytest.approx(fine[4], rel=0.012)


def test_settings_take_tensorrt_llm_defaults_for_what_is_not_given():
    """AttentionDpConfig: timeout_iters 50, batching_wait_iters 10 (enable_balance alone, as
    InferenceX's gpt-oss B200 script sets it); nothing given: off."""
    assert settings() == {"adp_timeout_iters": 0.0, "adp_batching_iters": 0.0}
    assert settings(60, 0) == {"adp_timeout_iters": 60, "adp_batching_iters": 0}
    assert settings(batching_iters=0) == {"adp_timeout_iters": 50.0, "adp_batching_iters": 0}


FIXED_S, PER_DECODE_S, PER_PREFILL_S = 4e-3, 3e-5, 2e-6  # one replica's linear iteration cost


def dp_server(*, replicas, per_replica, prompt, generate, timeout, batching, iterations=30_000, seed=1):
    """Mean TTFT and TPOT of a simulated attention-DP server: replicas iterate in lockstep
    (an iteration lasts its slowest replica's linear cost), each decodes its running requests
    and prefills its held prompts when the balancer releases them; a finished request's
    successor lands on its replica at a uniform moment of the next iteration. Output lengths
    uniform in generate x [0.5, 1.5] (arrivals spread)."""
    rng = np.random.default_rng(seed)
    length = lambda: max(2, int(round(generate * rng.uniform(0.5, 1.5))))  # noqa: E731
    queues = [[] for _ in range(replicas)]  # [arrival, output length]
    running = [[[0.0, 0.0, 0, length()] for _ in range(per_replica)] for _ in range(replicas)]
    for reqs in running:  # start mid-life, staggered
        for r in reqs:
            r[2] = int(rng.integers(1, r[3]))
    pending = [[] for _ in range(replicas)]
    done, t, counts = [], 0.0, [0, 0]
    for _ in range(iterations):
        release = balancer(all(queues), counts, timeout, batching)
        prefill = [queues[i] if release else [] for i in range(replicas)]
        tau = max(FIXED_S + PER_DECODE_S * len(running[i]) + PER_PREFILL_S * prompt * len(prefill[i])
                  for i in range(replicas))
        t_end = t + tau
        for i in range(replicas):
            still = []
            for r in running[i]:
                r[2] += 1
                if r[2] >= r[3]:
                    done.append((r[0], r[1], t_end, r[3]))
                    pending[i].append(t_end + tau * rng.random())
                else:
                    still.append(r)
            running[i] = still + [[a, t_end, 1, g] for a, g in prefill[i]]
            if release:
                queues[i] = []
        t = t_end
        for i in range(replicas):
            queues[i] += [[a, length()] for a in pending[i] if a <= t]
            pending[i] = [a for a in pending[i] if a > t]
    kept = [d for d in done if d[0] > 0.3 * t]
    return np.mean([f - a for a, f, _, _ in kept]), np.mean([(e - f) / (g - 1) for _, f, e, g in kept])


@pytest.fixture
def linear_iterations(monkeypatch):
    """concurrency.iteration replaced by the linear cost (the layer model is not under test)."""
    def iteration(*, decode_batch, prefill_tokens, **_):
        t = FIXED_S + PER_DECODE_S * decode_batch + PER_PREFILL_S * prefill_tokens
        zero = 0.0 * t
        return {"time_s": t, "overhead_s": zero, "matmul_s": zero, "attention_s": zero, "elementwise_s": zero,
                "comm_s": zero}
    monkeypatch.setattr(cc, "iteration", iteration)


@pytest.mark.parametrize("replicas, per_replica, prompt, generate, timeout, batching", [
    (8, 32, 1024, 1024, 60, 0), (8, 16, 4096, 512, 60, 0), (4, 32, 1024, 256, 50, 10)])
def test_the_closed_loop_matches_a_simulated_attention_dp_server(linear_iterations, replicas, per_replica, prompt,
                                                                 generate, timeout, batching):
    """TTFT within 8% (the formulas 2.7% short to 4.7% long), TPOT within 6% (1.3-4.9%
    short: the simulation's lockstep iteration is its slowest replica's); without the
    balancing the closed loop's TTFT is 9-16x short of the simulated server's."""
    sim_ttft, sim_tpot = dp_server(replicas=replicas, per_replica=per_replica, prompt=prompt, generate=generate,
                                   timeout=timeout, batching=batching)
    kw = dict(hw=numbers("h200_sxm"), model=load_model("llama_3_1_8b"), concurrency=float(replicas * per_replica),
              prompt=float(prompt), generate=float(generate), tp=1.0, attention_dp=float(replicas), ep=1.0,
              weights="fp8", activations="fp8", kv="fp8", overhead_s=0.0, token_budget=16384.0, schedule="spread",
              lengths="varied")
    r = cc.closed_loop(adp_timeout_iters=float(timeout), adp_batching_iters=float(batching), **kw)
    assert float(r["ttft_s"]) == pytest.approx(sim_ttft, rel=0.08)
    assert float(r["tpot_s"]) == pytest.approx(sim_tpot, rel=0.06)
    assert float(cc.closed_loop(**kw)["ttft_s"]) < 0.15 * sim_ttft


@pytest.mark.parametrize("replicas, per_replica, prompt, generate", [
    (8, 32, 1024, 1024), (8, 16, 4096, 512), (4, 8, 8192, 200), (2, 16, 4096, 100)])
def test_without_balancing_every_replicas_prefill_stalls_every_replica(linear_iterations, replicas, per_replica,
                                                                        prompt, generate):
    """Attention-DP replicas step in lockstep, so without the balancer (timeout 0: prompts
    released as they come) a request's decoding is stalled by the prefills of all replicas,
    not its own replica's alone (vLLM's and SGLang's DP attention of an MoE model; a dense
    model's replicas exchange nothing and step on their own). Against the simulated
    server: TPOT within 5% (+0.9% to +3.5%; counting one replica's prefills it was 7-27%
    short), TTFT within 10% (6.5-8.5% short)."""
    sim_ttft, sim_tpot = dp_server(replicas=replicas, per_replica=per_replica, prompt=prompt, generate=generate,
                                   timeout=0, batching=0)
    r = cc.closed_loop(hw=numbers("h200_sxm"), model=load_model("qwen3_30b_a3b"),  # MoE: the replicas exchange
                       concurrency=float(replicas * per_replica), prompt=float(prompt), generate=float(generate),
                       tp=1.0, attention_dp=float(replicas), ep=1.0, weights="fp8", activations="fp8", kv="fp8",
                       overhead_s=0.0, token_budget=16384.0, schedule="spread", lengths="varied")
    assert float(r["tpot_s"]) == pytest.approx(sim_tpot, rel=0.05)
    assert float(r["ttft_s"]) == pytest.approx(sim_ttft, rel=0.10)


def test_predict_serving_holds_prompts_only_with_attention_dp():
    """DeepSeek-R1 in FP4 on 8 B200 at concurrency 256: with 8 attention replicas the
    balancer (60 / 0) adds 20-40 decode iterations of TTFT at 1k/8k (rare prompts: about
    T / 2 each) and lowers TPOT a little (the replicas' prompts come together, so a request
    is stalled by one prefill per release, not by each replica's: 20.9 -> 19.8 ms); at one
    replica the settings change nothing."""
    kw = dict(hardware="b200_sxm", model="deepseek_r1", concurrency=256, prompt=1024, generate=8192,
              weights="fp4", framework="trtllm", ep=8)
    dp = dict(tp=1, attention_dp=8)
    base, held = predict.serving(**kw, **dp), predict.serving(**kw, **dp, adp_timeout_iters=60, adp_batching_iters=0)
    extra = float(held.ttft_s - base.ttft_s)
    assert 20 * float(base.decode_iteration_s) < extra < 40 * float(base.decode_iteration_s)
    assert 0.9 * float(base.tpot_s) < float(held.tpot_s) < float(base.tpot_s)
    tp8 = dict(tp=8, attention_dp=1)
    assert float(predict.serving(**kw, **tp8, adp_timeout_iters=60).ttft_s) == float(predict.serving(**kw, **tp8).ttft_s)


@pytest.mark.parametrize("kwargs, match", [
    (dict(adp_timeout_iters=-1), "adp_timeout_iters=-1 is not allowed; allowed: an integer >= 0"),
    (dict(adp_batching_iters=2.5), "adp_batching_iters=2.5 is not allowed; allowed: an integer >= 0"),
    (dict(concurrency=None, adp_timeout_iters=60), "adp_timeout_iters=60 is not allowed without concurrency"),
    (dict(hardware="cs3", devices=4, tp=1, adp_timeout_iters=60), "adp_timeout_iters=60 is not allowed on 'cs3'")])
def test_bad_balancing_settings_are_refused_by_name(kwargs, match):
    kw = dict(hardware="h200_sxm", model="llama_3_1_8b", concurrency=8, tp=1, framework="trtllm")
    with pytest.raises(InputError, match=match):
        predict.serving(**{**kw, **kwargs})
