"""Chinchilla scaling law: pre-training loss as a function of parameters and tokens, and
the compute-optimal split of a FLOP budget between them.

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", arXiv 2203.15556,
Approach 3 (Sec. 3.3, parametric fit of the final losses of 400+ runs):

    L(N, D) = E + A / N**alpha + B / D**beta

with E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28 (the fitted constants as
the paper quotes them, Appendix D.2 / eq. 10 of the arXiv version). N counts
parameters, D training tokens, L is nats per token on the paper's MassiveText held-out
set, so absolute values do not transfer to other tokenizers or corpora: use it for shapes
and trade-offs. Training compute is C = 6·N·D FLOPs. Minimising L on that budget gives
the paper's efficient frontier (eq. 4):

    N_opt = G·(C/6)**a,  D_opt = (C/6)**b / G,
    G = (alpha·A / (beta·B))**(1/(alpha+beta)),  a = beta/(alpha+beta),  b = alpha/(alpha+beta)

which is where the first-order condition alpha·A/N**alpha = beta·B/D**beta holds on the
budget line. With the rounded constants a = 0.452 (the paper's Table 2 reports 0.46 for
Approach 3 from the unrounded fit; Approaches 1 and 2 give about 0.50), and at Gopher's
budget (5.76e23 FLOPs) the frontier lands at about 32B parameters and 3.0T tokens, below
the ~40B the paper projects for Approach 3: the published constants are rounded, and
Besiroglu et al. 2024 (arXiv 2404.10102) report that they do not reproduce the paper's
own frontier exactly. Treat N_opt as good to tens of percent.

Pure array functions: floats, ndarrays and DataArrays broadcast by dimension name.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

# Fitted constants of Hoffmann et al. 2022, Approach 3 (arXiv 2203.15556).
E = 1.69  # irreducible loss (nats/token)
A = 406.4
B = 410.7
ALPHA = 0.34
BETA = 0.28
FLOPS_PER_PARAM_PER_TOKEN = 6.0  # C = 6·N·D (forward 2, backward 4)


def _check_positive(arg: str, value) -> None:
    """Every element > 0 (+inf allowed, for the N, D -> infinity limit)."""
    raw = getattr(value, "values", value)
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{arg}={raw!r} is not a number; allowed: a positive number") from None
    bad = np.isnan(arr) | (arr <= 0)
    if np.any(bad):
        first = arr[bad].ravel()[0]
        raise InputError(f"{arg}={first:g} is not allowed; allowed: a positive number (inf allowed)")


def chinchilla_loss(*, n_params, n_tokens, e=E, a=A, b=B, alpha=ALPHA, beta=BETA):
    """Predicted loss L(N, D) = e + a/N**alpha + b/D**beta in nats per token.

    `n_params` (N) and `n_tokens` (D) may be floats, ndarrays or DataArrays and broadcast
    (DataArrays by dimension name); infinite N or D drops that term, so L(inf, inf) = e.
    """
    _check_positive("n_params", n_params)
    _check_positive("n_tokens", n_tokens)
    return e + a / n_params**alpha + b / n_tokens**beta


def compute_optimal(*, train_flops, e=E, a=A, b=B, alpha=ALPHA, beta=BETA,
                    flops_per_param_per_token=FLOPS_PER_PARAM_PER_TOKEN):
    """Compute-optimal allocation of a training budget C = 6·N·D (Hoffmann et al. eq. 4).

    Returns a dict of arrays shaped like `train_flops`: `n_params` and `n_tokens` (the
    optimum), `tokens_per_param` (D/N) and `loss` (L at the optimum, nats per token).
    """
    _check_positive("train_flops", train_flops)
    g = (alpha * a / (beta * b)) ** (1.0 / (alpha + beta))
    budget = train_flops / flops_per_param_per_token  # N·D
    n_params = g * budget ** (beta / (alpha + beta))
    n_tokens = budget ** (alpha / (alpha + beta)) / g
    return {
        "n_params": n_params,
        "n_tokens": n_tokens,
        "tokens_per_param": n_tokens / n_params,
        "loss": chinchilla_loss(n_params=n_params, n_tokens=n_tokens, e=e, a=a, b=b, alpha=alpha, beta=beta),
    }
