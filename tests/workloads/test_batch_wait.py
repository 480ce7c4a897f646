"""TensorRT-LLM's batch waiting (workloads/batch_wait.py): a prompt's mean hold and the prompts
a release lets through, against a simulation of the executor's counter
(PyExecutor._waiting_requests: held until the scheduled tokens reach the ratio of
max_num_tokens or the counter reaches the timeout), their limits in closed form, and the
closed loop with it (predict.serving's batch_wait_timeout_iters / batch_wait_max_tokens_ratio)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.workloads.batch_wait import held, needed_prompts


def counter_simulation(lam, needed, timeout, iterations=200_000, seed=0):
    """(mean iterations a prompt waits, mean prompts a release lets through): Poisson(lam)
    prompts land during each iteration (at uniform moments); at each iteration's start the
    executor's rule decides (release once `needed` prompts are held or the counter, which
    counts held iterations, reached `timeout`)."""
    rng = np.random.default_rng(seed)
    held_at, count, waits, released = [], 0, [], []
    for k in range(iterations):
        held_at.extend(k - 1 + rng.random(rng.poisson(lam)))
        if not held_at:
            continue
        if count >= timeout or len(held_at) >= needed:
            waits.extend(k - np.asarray(held_at))
            released.append(len(held_at))
            held_at, count = [], 0
        else:
            count += 1
    return float(np.mean(waits)), float(np.mean(released))


# (prompts per iteration, prompts needed, timeout): InferenceX's DeepSeek-R1 FP8 setting (40
# iterations; 0.8 x 8,192 tokens: 8 prompts of ~900 tokens) from rare to frequent prompts, a
# short timeout, prompts too long to reach the ratio (timeout only)
CASES = [(0.02, 8, 40), (0.1, 8, 40), (0.3, 8, 40), (0.05, 3, 40), (0.5, 4, 10), (0.05, np.inf, 40)]


@pytest.mark.parametrize("lam, needed, timeout", CASES)
def test_the_hold_matches_the_executor_counter(lam, needed, timeout):
    """The wait plus half an iteration (the formula's window opens at the prompt's arrival,
    the counter's at the next iteration's start, which the closed loop counts apart) and the
    prompts released: within 2% up to 0.3 prompts per iteration (+0.0% to +1.8%, -0.6% to
    -1.8% when written), within 7% at 0.5 over a 10-iteration timeout (+5.9%, -6.2%), where
    several prompts land in the iteration that reaches K and the window ends a few
    iterations in."""
    wait, prompts = held(lam, needed, timeout)
    sim_wait, sim_prompts = counter_simulation(lam, needed, timeout)
    rel = 0.07 if lam >= 0.5 else 0.02
    assert float(wait) + 0.5 == pytest.approx(sim_wait, rel=rel)
    assert float(prompts) == pytest.approx(sim_prompts, rel=rel)


def poisson_at_most(j, mean):
    """P(N <= j) for N Poisson of `mean` (an array), term by term in logs."""
    mean = np.asarray(mean, float)
    if j < 0:
        return np.zeros(mean.shape)
    logs = [n * np.log(np.maximum(mean, 1e-300)) - mean - math.lgamma(n + 1.0) for n in range(int(j) + 1)]
    return np.minimum(np.exp(logs).sum(0), 1.0)


@pytest.mark.parametrize("lam, needed, timeout", [*CASES, (2.0, 8, 40), (3.0, 60, 120), (0.1, 2, 40)])
def test_the_closed_form_equals_the_integrals(lam, needed, timeout):
    """The module doc's integrals by a 20,000-point midpoint rule (the prompts held over the
    window, int_0^T P(N(t) <= K - 2) + lam t P(N(t) <= K - 3) dt, and those released,
    1 + lam T P(N(T) <= K - 3) + (K - 1) P(N(T) >= K - 1)) against the closed form
    E[J (J + 1) / 2] / lam, 1 + E[J]: within 1e-6, from rare prompts to 3 per iteration."""
    k = needed if np.isfinite(needed) else lam * timeout + 20.0 * np.sqrt(lam * timeout) + 50.0  # P(N <= k - 3) = 1
    t = timeout * (np.arange(20_000) + 0.5) / 20_000
    m = lam * t
    waiting = (poisson_at_most(k - 2, m) + m * poisson_at_most(k - 3, m)).sum() * timeout / 20_000
    end = lam * timeout
    released = 1.0 + end * poisson_at_most(k - 3, end) + (k - 1.0) * (1.0 - poisson_at_most(k - 2, end))
    wait, prompts = held(lam, needed, timeout)
    assert float(prompts) == pytest.approx(float(released), rel=1e-6)
    assert float(wait) == pytest.approx(float(waiting / released), rel=1e-6)


def test_the_limits_in_closed_form():
    """Off (timeout 0) or one prompt enough (K = 1): no hold. Prompts so rare that the timeout
    ends every window: the first waits T, alone. No ratio within reach (K infinite): every
    window lasts T, (T + lam T^2 / 2) / (1 + lam T) on average. More prompts: shorter holds."""
    assert held(0.1, 8, 0)[0] == 0.0 and held(0.1, 1, 40)[0] == 0.0 and held(0.1, 1, 40)[1] == 1.0
    wait, prompts = held(1e-8, 8, 40)
    assert float(wait) == pytest.approx(40.0, rel=1e-3) and float(prompts) == pytest.approx(1.0, rel=1e-3)
    lam, t = 0.05, 40.0
    wait, prompts = held(lam, np.inf, t)
    assert float(wait) == pytest.approx((t + lam * t ** 2 / 2) / (1 + lam * t), rel=2e-3)
    assert float(prompts) == pytest.approx(1 + lam * t, rel=1e-9)
    assert np.all(np.diff(held(np.array([0.01, 0.05, 0.2, 1.0]), 8, 40)[0]) < 0)


def test_a_cap_far_beyond_the_arrivals_is_no_cap():
    """K far past the arrivals a timeout can bring (a token budget of many short prompts):
    the same hold as no ratio at all, (T + lam T^2 / 2) / (1 + lam T), to 1e-12, however
    large K is (no sum runs to it: the cancellation of a complement times K^2 stays out)."""
    lam, t = 0.1, 40.0
    expect = (t + lam * t ** 2 / 2) / (1 + lam * t)
    for k in (200.0, 30_000.0, 1e6):
        wait, prompts = held(lam, k, t)
        assert float(wait) == pytest.approx(expect, rel=1e-12) and float(prompts) == pytest.approx(1 + lam * t, rel=1e-12)


def test_needed_prompts_follow_the_token_threshold():
    """0.8 x 8,192 tokens with 64 decoding: 8 prompts of 922 tokens (7,376 >= 6,490), one of
    7,372 (8k prompts are released at once), none where 8 x 1,000 cannot sit beside 200
    decoding tokens in 8,192 (only the timeout releases)."""
    assert float(needed_prompts(ratio=0.8, token_budget=8192, prompt=922, decoding_tokens=64)) == 8.0
    assert float(needed_prompts(ratio=0.8, token_budget=8192, prompt=7372, decoding_tokens=64)) == 1.0
    assert np.isinf(needed_prompts(ratio=0.95, token_budget=8192, prompt=1000, decoding_tokens=200))


def test_batch_waiting_trades_ttft_for_fewer_prefill_iterations():
    """DeepSeek-R1 FP8 on 8 B200 under TensorRT-LLM at 1k/1k and concurrency 64, as
    InferenceX's script sets it (40 iterations, 0.8): TTFT grows by about the hold (tens of
    decode iterations), TPOT does not grow (the prompts ride fewer, fuller iterations), and
    without either setting nothing changes."""
    kw = dict(hardware="b200", model="deepseek-ai/DeepSeek-R1", tp=8, concurrency=64, prompt=922, generate=922,
              weights="fp8_block", framework="trtllm", lengths="varied")
    base = predict.serving(**kw)
    wait = predict.serving(**kw, batch_wait_timeout_iters=40, batch_wait_max_tokens_ratio=0.8)
    assert float(wait.ttft_s) > float(base.ttft_s) + 10 * float(base.decode_iteration_s)
    assert float(wait.tpot_s) <= float(base.tpot_s) * 1.001
    half = predict.serving(**kw, batch_wait_timeout_iters=40)  # no ratio: releases at once
    assert float(half.ttft_s) == pytest.approx(float(base.ttft_s), rel=1e-9)
    swept = predict.serving(**kw, batch_wait_timeout_iters=[0, 20, 40], batch_wait_max_tokens_ratio=[0.5, 0.8])
    ttft = swept.ttft_s.sel(batch_wait_max_tokens_ratio=0.8).values  # a longer timeout: a longer hold
    assert ttft[0] == pytest.approx(float(base.ttft_s), rel=1e-9) and ttft[0] < ttft[1] < ttft[2]


def test_batch_waiting_applies_where_tensorrt_llm_waits():
    """TensorRT-LLM waits only without attention DP (PyExecutor._schedule: `not
    enable_attention_dp`), so with it the settings change nothing; another framework has no
    such option, and a ratio outside [0, 1] is refused by name."""
    kw = dict(hardware="b200", model="deepseek-ai/DeepSeek-R1", concurrency=64, prompt=922, generate=922,
              weights="fp8_block", lengths="varied")
    dp = dict(kw, tp=1, attention_dp=8, ep=8, framework="trtllm")
    assert float(predict.serving(**dp, batch_wait_timeout_iters=40, batch_wait_max_tokens_ratio=0.8).ttft_s) == \
        pytest.approx(float(predict.serving(**dp).ttft_s), rel=1e-12)
    with pytest.raises(InputError, match="batch_wait_timeout_iters=40 is not allowed with framework='vllm'"):
        predict.serving(**kw, tp=8, framework="vllm", batch_wait_timeout_iters=40)
    with pytest.raises(InputError, match="batch_wait_max_tokens_ratio=1.5"):
        predict.serving(**kw, tp=8, framework="trtllm", batch_wait_max_tokens_ratio=1.5)


def test_batch_waiting_needs_no_scipy():
    """The README's main job installs the core dependencies only (no scipy, which the silicon
    extra brings): the Poisson sums are numpy's (batch_wait._capped_moments), so a serving call with
    batch waiting runs where importing scipy fails."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['scipy'] = None\n"
            "from workbench import predict\n"
            "ds = predict.serving(hardware='b200', model='llama_3_1_70b', tp=4, weights='fp8', framework='trtllm', "
            "concurrency=4, prompt=922, generate=922, lengths='varied', batch_wait_timeout_iters=20, "
            "batch_wait_max_tokens_ratio=0.9)\n"
            "print(float(ds.ttft_s))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) > 0.1  # the 20-iteration hold of 6-7 ms decode steps
