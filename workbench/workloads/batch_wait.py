"""TensorRT-LLM's batch waiting: how long a prompt is held so that prompts are prefilled together.

With `batch_wait_timeout_iters` and `batch_wait_max_tokens_ratio` both above 0 (LLM API and
trtllm-serve options of the PyTorch backend), TensorRT-LLM's executor holds the context
requests its scheduler picked, in every iteration that also runs generation requests and
without attention DP (PyExecutor._schedule and _waiting_requests,
tensorrt_llm/_torch/pyexecutor/py_executor.py, 2025-2026). It releases them once the
iteration's scheduled tokens (the prompts' tokens, plus one per generation request and its
draft tokens) reach batch_wait_max_tokens_ratio x max_num_tokens, or once it has held them
batch_wait_timeout_iters iterations: its counter counts held iterations only, and a release
resets it. Either at 0 releases at once (the count reaches a 0 timeout, any tokens reach a
0 ratio). InferenceX's DeepSeek-R1 FP8 B200 script sets 40 iterations and 0.8 at 1k/1k from
concurrency 64 (`DELAY_BATCHING`, benchmarks/single_node/dsr1_fp8_b200_trt.sh, since
2026-01-29).

A window opens with a held prompt (t = 0) and closes at tau = min(T, S_(K-1)): T the timeout,
S_j the j-th prompt to arrive after it (a Poisson stream of lam per iteration: a closed
loop's completions, so its arrivals), K the prompts whose tokens with the running requests'
reach the threshold (K <= 1: released at once; K prompts beyond the iteration's token budget
never reach it, so only the timeout releases them). Over a window:

    waiting prompt-iterations = E[tau] + E[int_0^tau N(t) dt]
                              = int_0^T P(N(t) <= K - 2) dt + int_0^T lam t P(N(t) <= K - 3) dt
    prompts released          = 1 + E[min(N(T), K - 1)]
                              = 1 + lam T P(N(T) <= K - 3) + (K - 1) P(N(T) >= K - 1)

(N(t) the arrivals by t, Poisson with mean lam t; n Pois(n; m) = m Pois(n - 1; m)), and a
prompt's mean wait is their ratio. Checked against a simulation of the executor's counter
(tests/workloads/test_batch_wait.py).
"""
from __future__ import annotations

import math

import numpy as np

TAIL_SIGMAS, TAIL_TERMS = 12.0, 30.0  # where _at_most stops summing (its doc)
MAX_RECURRENCE_MEAN = 700.0  # e^-700 ~ 1e-304, above the smallest normal double (e^-708)
QUADRATURE_POINTS = 64  # midpoints over [0, T]: within 0.01% of 1,024 points to 0.5 prompts per
# iteration, 0.3% at 2 (tests/workloads/test_batch_wait.py)


def needed_prompts(*, ratio, token_budget, prompt, decoding_tokens):
    """K: the prompts whose `prompt` tokens with the `decoding_tokens` of the running requests
    reach `ratio` x `token_budget`, np.inf where the budget cannot hold that many (the
    scheduler picks at most the prompts that fit beside the decoding tokens)."""
    k = np.maximum(np.ceil((ratio * token_budget - decoding_tokens) / prompt), 1.0)
    return np.where(k * prompt <= token_budget - decoding_tokens, k, np.inf)


def _at_most(k, mean):
    """P(N <= k) for N Poisson of `mean` (0 for k < 0, 1 for k infinite): the partial sum of
    e^-m m^n / n! over n <= k, to TAIL_SIGMAS standard deviations
    (plus TAIL_TERMS) beyond the largest mean, where the rest is below 1e-15."""
    k, mean = np.broadcast_arrays(np.asarray(k, float), np.maximum(np.asarray(mean, float), 0.0))
    finite = np.isfinite(k)
    top = float(np.max(mean, initial=0.0))
    last = min(float(np.max(np.where(finite, k, -1.0), initial=-1.0)), np.ceil(top + TAIL_SIGMAS * np.sqrt(top))
               + TAIL_TERMS)
    cdf = np.where(k >= 0.0, np.exp(-mean), 0.0)
    if top <= MAX_RECURRENCE_MEAN:  # the terms by recurrence (e^-m stays a normal double)
        term = np.exp(-mean)
        for n in range(1, int(max(last, 0.0)) + 1):
            term = term * mean / n
            cdf = cdf + term * (k >= n)
    else:  # each term in logs: no underflow at large means
        log_mean = np.log(np.maximum(mean, 1e-300))
        for n in range(1, int(max(last, 0.0)) + 1):
            cdf = cdf + np.exp(n * log_mean - mean - math.lgamma(n + 1.0)) * (k >= n)
    return np.where(~finite | (k > last), 1.0, np.minimum(cdf, 1.0))


def held(arrivals_per_iter, needed, timeout_iters) -> tuple:
    """(mean iterations a prompt is held, mean prompts a release lets through) by
    `arrivals_per_iter` (prompts per decode iteration), `needed` (K, needed_prompts) and
    `timeout_iters` (0: off): the module doc's ratio. (0, 1) where K <= 1 or off."""
    lam, k, t_max = np.broadcast_arrays(*(np.asarray(v, float) for v in (arrivals_per_iter, needed, timeout_iters)))
    on = (t_max > 0.0) & (k > 1.0)
    if not on.any():  # nothing held anywhere: no quadrature to run
        return np.zeros(k.shape), np.ones(k.shape)
    lam = np.maximum(lam, 0.0)
    big_t = np.where(on, t_max, 1.0)[..., None]
    t = big_t * (np.arange(QUADRATURE_POINTS) + 0.5) / QUADRATURE_POINTS
    dt = big_t[..., 0] / QUADRATURE_POINTS
    mean_t, k_ = lam[..., None] * t, k[..., None]
    waiting = (_at_most(k_ - 2.0, mean_t) + mean_t * _at_most(k_ - 3.0, mean_t)).sum(-1) * dt
    mean_end = lam * big_t[..., 0]
    reachable = np.where(np.isfinite(k), k, 1.0)  # K, or 1 where out of reach: no release by tokens
    beyond = (reachable - 1.0) * (1.0 - _at_most(k - 2.0, mean_end))
    prompts = 1.0 + mean_end * _at_most(k - 3.0, mean_end) + beyond
    return np.where(on, waiting / prompts, 0.0), np.where(on, prompts, 1.0)
