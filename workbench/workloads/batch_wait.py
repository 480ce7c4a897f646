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
never reach it, so only the timeout releases them). Over a window, with N(t) the arrivals by
t and J = min(N(T), K - 1) the prompts that join the first:

    waiting prompt-iterations = E[tau] + E[int_0^tau N(t) dt]
                              = int_0^T P(N(t) <= K - 2) dt + int_0^T lam t P(N(t) <= K - 3) dt
                              = E[J (J + 1) / 2] / lam
    prompts released          = 1 + E[J]

The closed form: P(N(t) <= j) = P(S_(j+1) > t), so int_0^T P(N(t) <= j) dt =
E[min(S_(j+1), T)] = sum_(i=1..j+1) P(N(T) >= i) / lam (each gap between arrivals is
exponential: the i-th adds (1 - e^-lam(T - S_(i-1))) / lam while S_(i-1) < T, in mean
P(S_i < T) / lam), and lam t P(N(t) = n) = (n + 1) P(N(t) = n + 1); the two integrals sum
to sum_(i=1..K-1) i P(N(T) >= i) / lam = E[J (J + 1) / 2] / lam. A prompt's mean wait is
the ratio of the two lines: one Poisson mean (lam T) per point, summed term by term to K - 1
with P(N = n) / (lam T), so lam -> 0 needs no division (the wait tends to T).
Checked against a simulation of the executor's counter and against the integrals by
quadrature (tests/workloads/test_batch_wait.py).
"""
from __future__ import annotations

import math

import numpy as np

MAX_RECURRENCE_MEAN = 700.0  # e^-700 ~ 1e-304, above the smallest normal double (e^-708)
TAIL_SIGMAS, TAIL_TERMS = 12.0, 30.0  # terms beyond mean + 12 sd + 30 are below 1e-15 of the sums


def needed_prompts(*, ratio, token_budget, prompt, decoding_tokens):
    """K: the prompts whose `prompt` tokens with the `decoding_tokens` of the running requests
    reach `ratio` x `token_budget`, np.inf where the budget cannot hold that many (the
    scheduler picks at most the prompts that fit beside the decoding tokens)."""
    k = np.maximum(np.ceil((ratio * token_budget - decoding_tokens) / prompt), 1.0)
    return np.where(k * prompt <= token_budget - decoding_tokens, k, np.inf)


def _capped_moments(mean, cap) -> tuple:
    """(E[J (J + 1) / 2] / mean, E[J] / mean) for J = min(N, cap), N Poisson of `mean` and
    `cap` >= 1 (np.inf: uncapped, mean / 2 + 1 and 1). Terms q_n = P(N = n) / mean =
    e^-m m^(n-1) / n! for 1 <= n <= cap (by recurrence while e^-mean stays a normal double,
    in logs beyond; q_1 = 1 at mean 0, where N is at most one arrival), and N > cap at
    P(N > cap) / mean = (1 - e^-m) / m - sum q_n (its cancellation costs at most 1e-16 x cap^2
    against sums of order 1). A cap beyond TAIL_SIGMAS standard deviations (plus TAIL_TERMS)
    of the largest mean caps nothing that counts (N exceeds it with odds below 1e-15): uncapped."""
    mean, cap = np.broadcast_arrays(np.maximum(np.asarray(mean, float), 0.0), np.asarray(cap, float))
    top = float(np.max(mean, initial=0.0))
    capped = cap <= np.ceil(top + TAIL_SIGMAS * np.sqrt(top) + TAIL_TERMS)  # caps that can bind
    c = np.where(capped, cap, 0.0)
    half_square, first, below = np.zeros(mean.shape), np.zeros(mean.shape), np.zeros(mean.shape)
    recurrence = top <= MAX_RECURRENCE_MEAN
    q, log_mean = np.exp(-mean), np.log(np.maximum(mean, 1e-300))
    for n in range(1, int(np.max(c, initial=0.0)) + 1):
        if n > 1:
            q = q * mean / n if recurrence else np.exp((n - 1) * log_mean - mean - math.lgamma(n + 1.0))
        q_in = q * (n <= c)
        half_square, first, below = half_square + q_in * (n * (n + 1) / 2.0), first + q_in * n, below + q_in
    any_arrival = np.where(mean > 0.0, -np.expm1(-mean) / np.maximum(mean, 1e-300), 1.0)  # P(N >= 1) / mean
    beyond = np.maximum(any_arrival - below, 0.0)
    return (np.where(capped, half_square + beyond * c * (c + 1.0) / 2.0, mean / 2.0 + 1.0),
            np.where(capped, first + beyond * c, 1.0))


def held(arrivals_per_iter, needed, timeout_iters) -> tuple:
    """(mean iterations a prompt is held, mean prompts a release lets through) by
    `arrivals_per_iter` (prompts per decode iteration), `needed` (K, needed_prompts) and
    `timeout_iters` (0: off): the module doc's ratio. (0, 1) where K <= 1 or off."""
    lam, k, t_max = np.broadcast_arrays(*(np.asarray(v, float) for v in (arrivals_per_iter, needed, timeout_iters)))
    on = (t_max > 0.0) & (k > 1.0)
    if not on.any():  # nothing held anywhere: no sums to run
        return np.zeros(k.shape), np.ones(k.shape)
    big_t = np.where(on, t_max, 0.0)
    mean_end = np.maximum(lam, 0.0) * big_t  # arrivals expected over a whole timeout
    half_square, first = _capped_moments(mean_end, np.where(on, k - 1.0, 1.0))
    prompts = 1.0 + mean_end * first
    return np.where(on, big_t * half_square / prompts, 0.0), np.where(on, prompts, 1.0)
