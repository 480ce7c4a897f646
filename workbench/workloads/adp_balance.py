"""TensorRT-LLM's attention-DP context balancing: how long a prompt is held before its prefill.

With attention data parallelism and `attention_dp_config.enable_balance`, TensorRT-LLM's
executor holds every attention replica's new context requests until all replicas have one
(so that the replicas prefill together, their MoE layers in step), or until `timeout_iters`
iterations have passed; once all have one it waits `batching_wait_iters` iterations more
for further prompts (PyExecutor._balance_adp_requests, tensorrt_llm/_torch/pyexecutor/
py_executor.py, 2025-2026; AttentionDpConfig defaults timeout_iters=50,
batching_wait_iters=10). Its counter runs whenever not every replica holds a context
request, and a release resets it, so the hold windows follow one another.

With prompts landing on each of N replicas at rate lam per iteration (a Poisson stream: a
closed loop's completions, so its arrivals, spread over the replicas), a window lasts
W = min(tau, T) iterations, tau the first time every replica holds a prompt,
P(tau <= t) = (1 - e^(-lam t))^N. A request waits out the rest of its window, and B more
when tau ended it. Over a window:

    waiting request-iterations  = int_0^T N lam t [1 - (1 - e^(-lam t))^(N-1)] dt
                                  + P(tau < T) (B E[n(tau) | tau < T] + N lam B^2 / 2)
    window length               = int_0^T [1 - (1 - e^(-lam t))^N] dt + B P(tau < T)

(E[n(t); tau > t] = N lam t [1 - (1 - e^(-lam t))^(N-1)]: the arrivals so far, less those
of the outcomes where every replica has one; given tau = t the other N - 1 replicas hold
lam t / (1 - e^(-lam t)) each), and the mean wait is their ratio over N lam. Checked
against a simulation of the executor's counter (tests/workloads/test_adp_balance.py).
"""
from __future__ import annotations

import numpy as np

QUADRATURE_POINTS = 64  # midpoints over [0, T]: within 0.3% of 1,024 points to 0.5 prompts per replica
# per iteration, 1.2% at 2 (tests/workloads/test_adp_balance.py)


def held_iterations(arrivals_per_replica, replicas, timeout_iters, batching_iters=0.0):
    """Mean iterations a prompt waits for the balancer (module doc), by `arrivals_per_replica`
    (prompts landing on one attention replica per iteration), `replicas` (attention DP),
    `timeout_iters` (0: balancing off) and `batching_iters`. 0 with one replica."""
    lam, n, t_max, b = np.broadcast_arrays(*(np.asarray(v, float) for v in
                                             (arrivals_per_replica, replicas, timeout_iters, batching_iters)))
    on = (n > 1.0) & (t_max > 0.0)
    if not on.any():  # balancing off (or one replica) everywhere: no quadrature to run
        return np.zeros(n.shape)
    lam = np.maximum(lam, 1e-12)[..., None]
    n_, big_t = n[..., None], t_max[..., None]
    u = (np.arange(QUADRATURE_POINTS) + 0.5) / QUADRATURE_POINTS
    t = big_t * u
    dt = big_t[..., 0] / QUADRATURE_POINTS
    has = -np.expm1(-lam * t)  # a replica holds a prompt by t
    all_by = has ** n_
    waiting = (n_ * lam * t * (1.0 - has ** (n_ - 1.0))).sum(-1) * dt
    window = (1.0 - all_by).sum(-1) * dt
    density = n_ * has ** (n_ - 1.0) * lam * np.exp(-lam * t)  # of tau
    held_at_tau = ((1.0 + (n_ - 1.0) * lam * t / np.maximum(has, 1e-300)) * density).sum(-1) * dt
    ended = (-np.expm1(-lam[..., 0] * t_max)) ** n  # P(tau < T)
    waiting = waiting + b * held_at_tau + n * lam[..., 0] * b ** 2 / 2.0 * ended
    window = window + b * ended
    wait = waiting / np.maximum(n * lam[..., 0] * window, 1e-300)
    return np.where(on, wait, 0.0)


TRTLLM_DEFAULTS = {"adp_timeout_iters": 50.0, "adp_batching_iters": 10.0}  # AttentionDpConfig (module doc)


def settings(timeout_iters=None, batching_iters=None) -> dict:
    """closed_loop's balancing arguments: off (0) where neither is given, else each given
    value and TensorRT-LLM's default for the other (enable_balance with its defaults)."""
    if timeout_iters is None and batching_iters is None:
        return {"adp_timeout_iters": 0.0, "adp_batching_iters": 0.0}
    given = {"adp_timeout_iters": timeout_iters, "adp_batching_iters": batching_iters}
    return {k: TRTLLM_DEFAULTS[k] if v is None else v for k, v in given.items()}
