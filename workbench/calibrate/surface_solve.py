"""The least-squares solve behind every kernel efficiency surface (calibrate/kernel_fit.py):
knot values of log efficiency minimizing

    sum w_i (y_i - f(x_i))^2 + smooth * sum (second differences of f along each axis)^2

with y = log(roofline / (measured - fixed)), a sparse linear problem solved by conjugate
gradients. The penalty acts along the size axes; a shape-class axis (GQA group, head size,
GPUs) has a knot at every measured value and a weak penalty (CLASS_AXIS_WEIGHT) that only
fills its unmeasured knots.

Robust weights (ROBUST_CLASSES): a GEMM table holds rows timed 2-5x off their neighbours
that no kernel model follows: a JIT-compiled kernel picking another configuration one row
later (H200 SGLang DeepGEMM block-FP8, n = 8192, k = 4096: 18 us at m = 256, 75 us at
m = 257, 47 us at m = 513), or a timing disturbed once (B200 vLLM FP8, n = 4096, m = 3:
364 us at k = 65536 between 72 us neighbours). Least squares spreads such a row over the
knots around it; the fit instead reweights each row after a first solve by Huber's weight
min(1, HUBER_LOG_ERR / |log error|) (iteratively reweighted least squares, IRLS_ROUNDS
rounds), so a row off by more than HUBER_LOG_ERR pulls as if it were off by that much.
Held out by neighbourhood (kernel_fit's folds) on the B200, H200 and A100 GEMM tables the
pooled median |error| fell from 4.2 / 4.0 / 4.9% to 3.5 / 3.6 / 4.7% and the 90th
percentile from 15.4 / 15.4 / 16.5% to 14.6 / 15.3 / 16.1%; thresholds of 3, 5 and 20%
gave a median of 3.6, 3.7 and 4.5% on the B200 vLLM FP8 table (least squares 6.1%).
Attention tables gained nothing worth four solves (L40S TensorRT-LLM prefill, its largest
table: median 3.88 -> 3.80%, p90 14.3 -> 14.0%; A100 SGLang decode: 3.07 -> 3.06%, p90 12.2
-> 12.4%), so only GEMM tables are fitted robustly.
"""
from __future__ import annotations

import numpy as np

from ..primitives.kernel_fits import ROOFLINES, EffGrid

SMOOTH = 0.03  # second-difference penalty weight, relative to one row: of 0.01, 0.03, 0.1, 0.3, 1, 3 the
# one with the lowest held-out error on h100_sxm/trtllm (GEMM, attention; 0.01 within noise)
CLASS_AXIS_WEIGHT = 0.03  # penalty along a shape-class axis relative to a size axis
TENSION = 0.02  # slope penalty over the curvature penalty: beyond the measured shapes a surface
# levels off within about 1/sqrt(TENSION) = 7 knots instead of continuing its last slope
ROBUST_CLASSES = ("gemm",)  # kernel classes fitted with Huber weights (module docstring)
HUBER_LOG_ERR = 0.05  # |log(predicted / measured)| beyond which a row's weight falls as 1 / |error|
IRLS_ROUNDS = 3  # reweighted solves after the first (6 moved the B200 vLLM FP8 score by < 0.1 pt)


def penalty(dims: tuple, order: int = 2, axis_weights=None):
    """Sparse difference operator of `order` (1: slopes, 2: curvature) along every axis of a
    grid of shape `dims`, each axis's rows scaled by its weight (default 1)."""
    import scipy.sparse as sp
    stencil = {1: ([-1.0, 1.0], [0, 1]), 2: ([1.0, -2.0, 1.0], [0, 1, 2])}[order]
    blocks = []
    for ax, n in enumerate(dims):
        if n <= order:
            continue
        dn = sp.diags(stencil[0], stencil[1], shape=(n - order, n))
        mats = [sp.identity(m, format="csr") if i != ax else dn for i, m in enumerate(dims)]
        op = mats[0]
        for m in mats[1:]:
            op = sp.kron(op, m, format="csr")
        blocks.append(op * (1.0 if axis_weights is None else float(axis_weights[ax])))
    return sp.vstack(blocks, format="csr")


def huber_weights(log_err) -> np.ndarray:
    """Huber's IRLS weight of each row: 1 within HUBER_LOG_ERR, HUBER_LOG_ERR / |error| beyond."""
    a = np.abs(np.asarray(log_err, float))
    return np.where(a <= HUBER_LOG_ERR, 1.0, HUBER_LOG_ERR / np.maximum(a, 1e-12))


def fit_grid(grid: EffGrid, coords: dict, roof: np.ndarray, measured: np.ndarray, fixed_s: float,
             smooth: float = SMOOTH, kernel_class: str | None = None) -> EffGrid:
    """The knot values minimizing the squared log error of t = fixed_s + roof / eff plus the
    smoothness penalty: least squares on y = log(roof / (measured - fixed_s)), each row
    weighted by the share of its time the surface explains ((measured - fixed_s) /
    measured, squared: the first-order sensitivity of log t to log eff), and for a class of
    ROBUST_CLASSES by its Huber weight, solved again IRLS_ROUNDS times."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla
    rest = np.maximum(measured - fixed_s, 1e-3 * measured)
    y = np.log(roof / rest)
    wrow = (rest / measured) ** 2
    flat, w = grid.weights(coords)
    n, p = len(y), int(np.prod([len(k) for k in grid.knots]))
    a = sp.csr_matrix((w.ravel(), (np.repeat(np.arange(n), w.shape[-1]), flat.ravel())), shape=(n, p))
    dims = tuple(len(k) for k in grid.knots)
    # shape-class axes (GQA group, head size) are different kernels (TensorRT-LLM's XQA
    # serves groups up to 32; group 64 falls back to a kernel 10x slower): the penalty
    # only fills their knots without rows, never pulls one class toward its neighbour
    sizes = ROOFLINES[kernel_class].sizes if kernel_class else grid.axes
    wax = [1.0 if ax in sizes else CLASS_AXIS_WEIGHT for ax in grid.axes]
    d2, d1 = penalty(dims, 2, wax), penalty(dims, 1, wax)
    reg = smooth * (d2.T @ d2) + smooth * TENSION * (d1.T @ d1) + 1e-6 * sp.identity(p)
    robust = np.ones(n)
    for solve in range(1 + (IRLS_ROUNDS if kernel_class in ROBUST_CLASSES else 0)):
        if solve:  # each row reweighted by its error against the last solve
            robust = huber_weights(np.log((fixed_s + roof / fitted(**coords)) / measured))
        aw = sp.diags(wrow * robust) @ a
        lhs = (a.T @ aw + reg).tocsr()
        # conjugate gradients on the normal equations (symmetric positive definite; a direct
        # factorization of a 4-D stencil fills in and is 50x slower), Jacobi-preconditioned
        x, _ = sla.cg(lhs, aw.T @ y, M=sp.diags(1.0 / lhs.diagonal()), rtol=1e-7, maxiter=5000)
        # a surface never exceeds the best efficiency measured in its table (some exceed 1 against
        # the HBM or ring roofline: KV caches served from L2, NVLS all-reduce sending S, not 2S)
        fitted = EffGrid(grid.axes, grid.knots, np.minimum(x, y.max()).reshape(dims))
    return fitted
