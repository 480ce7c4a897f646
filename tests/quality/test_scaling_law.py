"""Chinchilla loss L(N, D) = E + A/N^alpha + B/D^beta and its compute-optimal frontier.

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", arXiv 2203.15556,
Approach 3: E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28; efficient frontier
N_opt = G (C/6)^a, D_opt = G^-1 (C/6)^b with a = beta/(alpha+beta) (Table 2: a = 0.46 from
the unrounded fit).
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench.errors import InputError
from workbench.quality import scaling_law as sl
from workbench.quality.scaling_law import chinchilla_loss, compute_optimal

N = np.logspace(7, 13, 61)  # 10M .. 10T parameters
D = np.logspace(9, 14, 51)  # 1B .. 100T tokens
C = np.logspace(18, 27, 37)  # FLOP budgets


def test_published_constants():
    assert (sl.E, sl.A, sl.B, sl.ALPHA, sl.BETA) == (1.69, 406.4, 410.7, 0.34, 0.28)
    # Table 2 of the paper: Approach 3 gives N_opt ~ C^0.46 (0.452 with rounded constants).
    assert sl.BETA / (sl.ALPHA + sl.BETA) == pytest.approx(0.46, abs=0.01)


def test_infinite_model_and_data_leave_the_irreducible_loss():
    assert chinchilla_loss(n_params=np.inf, n_tokens=np.inf) == sl.E
    # One term at a time: each finite factor adds exactly its own power law.
    assert chinchilla_loss(n_params=1e9, n_tokens=np.inf) == pytest.approx(sl.E + sl.A / 1e9**sl.ALPHA)
    assert chinchilla_loss(n_params=np.inf, n_tokens=1e12) == pytest.approx(sl.E + sl.B / 1e12**sl.BETA)


def test_closed_form_value():
    # Chinchilla itself: 70B parameters on 1.4T tokens.
    n, d = 70e9, 1.4e12
    expect = 1.69 + 406.4 / n**0.34 + 410.7 / d**0.28
    assert chinchilla_loss(n_params=n, n_tokens=d) == pytest.approx(expect, rel=1e-12)
    assert 1.9 < expect < 2.0


def test_monotone_decreasing_in_params_and_tokens():
    loss = chinchilla_loss(n_params=N[:, None], n_tokens=D[None, :])
    assert loss.shape == (N.size, D.size)
    assert np.all(np.diff(loss, axis=0) < 0)  # more parameters, lower loss
    assert np.all(np.diff(loss, axis=1) < 0)  # more tokens, lower loss
    assert np.all(loss > sl.E)


def test_compute_optimal_spends_the_budget():
    opt = compute_optimal(train_flops=C)
    np.testing.assert_allclose(6 * opt["n_params"] * opt["n_tokens"], C, rtol=1e-12)
    np.testing.assert_allclose(opt["tokens_per_param"], opt["n_tokens"] / opt["n_params"], rtol=1e-12)
    assert np.all(np.diff(opt["n_params"]) > 0) and np.all(np.diff(opt["n_tokens"]) > 0)
    assert np.all(np.diff(opt["loss"]) < 0)


def test_compute_optimal_first_order_condition():
    # d/dN of L(N, C/(6N)) = 0  <=>  alpha*A/N^alpha = beta*B/D^beta.
    opt = compute_optimal(train_flops=C)
    lhs = sl.ALPHA * sl.A / opt["n_params"] ** sl.ALPHA
    rhs = sl.BETA * sl.B / opt["n_tokens"] ** sl.BETA
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


@pytest.mark.parametrize("budget", [1e21, 5.76e23, 1e26])
def test_compute_optimal_is_the_minimum_on_the_budget_line(budget):
    opt = compute_optimal(train_flops=budget)
    n = opt["n_params"] * np.logspace(-1, 1, 201)  # 0.1x .. 10x around the optimum
    loss = chinchilla_loss(n_params=n, n_tokens=budget / (6 * n))
    assert loss.min() >= opt["loss"] - 1e-12
    assert n[np.argmin(loss)] == pytest.approx(opt["n_params"], rel=0.03)


def test_exponents_of_the_frontier():
    opt = compute_optimal(train_flops=C)
    a = np.polyfit(np.log(C), np.log(opt["n_params"]), 1)[0]
    b = np.polyfit(np.log(C), np.log(opt["n_tokens"]), 1)[0]
    assert a == pytest.approx(sl.BETA / (sl.ALPHA + sl.BETA), rel=1e-9)
    assert b == pytest.approx(sl.ALPHA / (sl.ALPHA + sl.BETA), rel=1e-9)


def test_same_function_on_float_ndarray_and_dataarray():
    n = xr.DataArray(N, dims=["n_params"], coords={"n_params": N})
    d = xr.DataArray(D, dims=["n_tokens"], coords={"n_tokens": D})
    grid = chinchilla_loss(n_params=n, n_tokens=d)
    assert isinstance(grid, xr.DataArray) and grid.dims == ("n_params", "n_tokens")
    ref = chinchilla_loss(n_params=N[:, None], n_tokens=D[None, :])
    np.testing.assert_allclose(grid.values, ref)
    assert float(grid.isel(n_params=3, n_tokens=7)) == chinchilla_loss(n_params=float(N[3]), n_tokens=float(D[7]))

    c = xr.DataArray(C, dims=["train_flops"], coords={"train_flops": C})
    opt = compute_optimal(train_flops=c)
    assert all(isinstance(v, xr.DataArray) and v.dims == ("train_flops",) for v in opt.values())
    np.testing.assert_allclose(opt["n_params"].values, compute_optimal(train_flops=C)["n_params"])


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan])
def test_nonpositive_inputs_are_errors_naming_the_argument(bad):
    with pytest.raises(InputError, match="n_params"):
        chinchilla_loss(n_params=np.array([1e9, bad]), n_tokens=1e12)
    with pytest.raises(InputError, match="n_tokens"):
        chinchilla_loss(n_params=1e9, n_tokens=bad)
    with pytest.raises(InputError, match="train_flops"):
        compute_optimal(train_flops=bad)
