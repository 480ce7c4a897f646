"""workbench.analysis.pareto against a brute-force O(n^2) definition of dominance, on
random data built to have ties, duplicates, NaN and masked points, in groups, and on a
real predict.inference sweep."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.analysis import pareto
from workbench.analysis.pareto import _frontier_pairwise, _frontier_sorted
from workbench.errors import InputError


# ---- the reference: the definition, written as plainly as possible ---------------------------
def brute_front(points: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """points: (n, k), every objective minimized. a dominates b when a <= b everywhere and
    a < b somewhere; a valid point is on the front when no valid point dominates it."""
    n = len(points)
    on = np.zeros(n, dtype=bool)
    for i in range(n):
        if not valid[i]:
            continue
        on[i] = True
        for j in range(n):
            if j != i and valid[j] and all(points[j] <= points[i]) and any(points[j] < points[i]):
                on[i] = False
                break
    return on


def brute(ds, minimize, maximize, where=None, over=None) -> np.ndarray:
    """Brute-force front of ds over the dims `over` (default all), grouped by the others,
    returned in the dims order of ds's objectives."""
    names = list(minimize) + list(maximize)
    dims = ds[names[0]].dims
    over = [d for d in dims if over is None or d in over]
    by = [d for d in dims if d not in over]
    out = np.zeros(ds[names[0]].shape, dtype=bool)
    for combo in itertools.product(*[range(ds.sizes[d]) for d in by]):
        sel = dict(zip(by, combo))
        part = ds.isel(sel)
        pts = np.stack([part[n].transpose(*over).values.ravel() * (1.0 if n in minimize else -1.0)
                        for n in names], axis=-1)
        valid = np.isfinite(pts).all(axis=-1)
        if where is not None:
            valid &= where.isel(sel).broadcast_like(part[names[0]]).transpose(*over).values.ravel()
        front = brute_front(pts, valid).reshape([ds.sizes[d] for d in over])
        index = tuple(sel[d] if d in sel else slice(None) for d in dims)
        out[index] = front  # `over` is in the order of `dims`, as the slice is
    return out


def random_dataset(seed: int, n_objectives: int, *, levels: int = 4, nan_fraction: float = 0.1):
    """Integer-valued objectives in 0..levels-1 on dims (a: 3, b: 4, c: 5): many ties
    and duplicate points; about nan_fraction of the values are NaN."""
    rng = np.random.default_rng(seed)
    shape = (3, 4, 5)
    coords = {"a": [10, 20, 30], "b": ["w", "x", "y", "z"], "c": np.arange(5) * 0.5}
    data = {}
    for i in range(n_objectives):
        v = rng.integers(0, levels, size=shape).astype(float)
        v[rng.random(shape) < nan_fraction] = np.nan
        data[f"f{i}"] = (("a", "b", "c"), v)
    ds = xr.Dataset(data, coords=coords)
    ds["ok"] = (("a", "b", "c"), rng.random(shape) < 0.8)
    return ds


SPLITS = [(["f0", "f1"], []), (["f0"], ["f1"]), ([], ["f0", "f1"]),
          (["f0", "f1", "f2"], []), (["f0", "f2"], ["f1"]), (["f1"], ["f0", "f2"]),
          (["f0", "f1", "f2", "f3"], [])]


# ---- against brute force -----------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("minimize,maximize", SPLITS)
def test_matches_brute_force_over_everything(seed, minimize, maximize):
    ds = random_dataset(seed, 4)
    got = pareto(ds, minimize=minimize, maximize=maximize)
    assert got.dims == ("a", "b", "c") and got.dtype == bool
    np.testing.assert_array_equal(got.values, brute(ds, minimize, maximize))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("minimize,maximize", SPLITS)
def test_where_mask_excludes_points(seed, minimize, maximize):
    ds = random_dataset(seed, 4)
    got = pareto(ds, minimize=minimize, maximize=maximize, where=ds.ok)
    np.testing.assert_array_equal(got.values, brute(ds, minimize, maximize, where=ds.ok))
    assert not got.where(~ds.ok, False).any()  # a masked point is never on the front
    # The name of a boolean variable works as well.
    np.testing.assert_array_equal(pareto(ds, minimize=minimize, maximize=maximize, where="ok").values,
                                  got.values)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("minimize,maximize", SPLITS[:6])
@pytest.mark.parametrize("by", [["a"], ["b"], ["a", "c"], ["a", "b", "c"]])
def test_groups_are_independent_frontiers(seed, minimize, maximize, by):
    ds = random_dataset(seed, 3)
    got = pareto(ds, minimize=minimize, maximize=maximize, by=by, where=ds.ok)
    over = [d for d in ("a", "b", "c") if d not in by]
    np.testing.assert_array_equal(got.values, brute(ds, minimize, maximize, where=ds.ok, over=over))
    # Each group, computed on its own as a whole dataset, gives the same answer.
    for combo in itertools.product(*[range(ds.sizes[d]) for d in by]):
        sel = dict(zip(by, combo))
        alone = pareto(ds.isel(sel), minimize=minimize, maximize=maximize, where=ds.ok.isel(sel))
        np.testing.assert_array_equal(got.isel(sel).transpose(*alone.dims).values, alone.values)
    # `over` is the complement of `by`.
    same = pareto(ds, minimize=minimize, maximize=maximize, over=over, where=ds.ok)
    np.testing.assert_array_equal(same.values, got.values)


@pytest.mark.parametrize("seed", range(5))
def test_sort_path_equals_pairwise_path_on_many_continuous_points(seed):
    """Two objectives go through the sort; the pairwise path is the definition
    vectorized. Both on 3 groups x 2000 points with a few exact duplicates."""
    rng = np.random.default_rng(seed)
    values = rng.random((3, 2000, 2))
    values[:, 1000:1100] = values[:, :100]  # duplicates
    values[:, 1100:1200, 0] = values[:, 200:300, 0]  # ties in f1 alone
    valid = rng.random((3, 2000)) < 0.9
    np.testing.assert_array_equal(_frontier_sorted(values, valid), _frontier_pairwise(values, valid))


def test_a_constant_third_objective_changes_nothing():
    """A constant objective never makes a point strictly better, so the 3-objective
    (pairwise) front equals the 2-objective (sorted) front."""
    ds = random_dataset(7, 2, levels=6)
    ds["k"] = xr.full_like(ds.f0, 3.0).fillna(3.0)
    two = pareto(ds, minimize=["f0"], maximize=["f1"])
    three = pareto(ds, minimize=["f0", "k"], maximize=["f1"])
    np.testing.assert_array_equal(two.values, three.values)


# ---- small cases with the answer written out --------------------------------------------------
def test_hand_example_with_ties_and_duplicates():
    # (1,3), (2,2), (3,1) are mutually non-dominated; (2,3) is dominated by (2,2) (equal f1,
    # smaller f2); the duplicate (2,2) is on the front with its twin; (3,3) by all three.
    f1 = [1, 2, 3, 2, 2, 3]
    f2 = [3, 2, 1, 3, 2, 3]
    ds = xr.Dataset({"f1": ("p", f1), "f2": ("p", f2)}, coords={"p": range(6)})
    np.testing.assert_array_equal(pareto(ds, minimize=["f1", "f2"]).values,
                                  [True, True, True, False, True, False])


def test_one_objective_front_is_the_minimum_with_ties():
    ds = xr.Dataset({"t_s": ("p", [3.0, 1.0, 2.0, 1.0, np.nan])})
    np.testing.assert_array_equal(pareto(ds, minimize="t_s").values, [False, True, False, True, False])
    np.testing.assert_array_equal(pareto(ds, maximize="t_s").values, [True, False, False, False, False])


def test_nan_and_inf_are_excluded_and_everything_masked_is_empty():
    ds = xr.Dataset({"x": ("p", [np.nan, 5.0, np.inf]), "y": ("p", [0.0, 5.0, 0.0])})
    np.testing.assert_array_equal(pareto(ds, minimize=["x", "y"]).values, [False, True, False])
    none = xr.DataArray(np.zeros(3, dtype=bool), dims="p")
    assert not pareto(ds, minimize=["x", "y"], where=none).any()


def test_objectives_with_different_dims_broadcast():
    ds = xr.Dataset({"cost_usd": ("hw", [1.0, 2.0]), "t_s": (("hw", "b"), [[4.0, 3.0], [1.0, 5.0]])},
                    coords={"hw": ["x", "y"], "b": [1, 2]})
    got = pareto(ds, minimize=["cost_usd", "t_s"])
    assert got.dims == ("hw", "b")
    # points (cost, t): (1,4) (1,3) (2,1) (2,5): (1,4) loses to (1,3), (2,5) to (1,3).
    np.testing.assert_array_equal(got.values, [[False, True], [True, False]])


# ---- a real sweep ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep():
    return predict.inference(hardware=["h100_sxm", "h200_sxm"], model="llama_3_1_70b", tp=[4, 8],
                             batch=[1, 8, 64, 256], prompt=[512, 2048, 8192], generate=256, weights="fp8")


@pytest.mark.parametrize("by", [None, ["hardware"], ["hardware", "prompt"]])
def test_real_sweep_latency_against_throughput(sweep, by):
    kw = dict(minimize=["tpot_s"], maximize=["output_tokens_per_s_per_device"], where=sweep.fits)
    got = pareto(sweep, by=by, **kw)
    assert got.dims == sweep.tpot_s.dims
    over = [d for d in sweep.tpot_s.dims if d not in (by or [])]
    np.testing.assert_array_equal(got.values, brute(sweep, ["tpot_s"], ["output_tokens_per_s_per_device"],
                                                    where=sweep.fits, over=over))
    assert got.any() and not (got & ~sweep.fits).any()
    # Along the front, more throughput costs latency: sorted by tpot, throughput rises.
    if by is None:
        front = sweep[["tpot_s", "output_tokens_per_s_per_device"]].where(got).to_dataframe().dropna()
        front = front.sort_values("tpot_s")
        assert np.all(np.diff(front.output_tokens_per_s_per_device.values) >= 0)


# ---- bad input ---------------------------------------------------------------------------------
def test_errors_name_the_argument_and_list_what_exists():
    ds = random_dataset(0, 2)
    with pytest.raises(ValueError, match=r"minimize='nope'.*allowed: f0, f1, ok"):
        pareto(ds, minimize=["nope"])
    with pytest.raises(ValueError, match=r"maximize='nope'.*allowed: f0, f1"):
        pareto(ds, minimize=["f0"], maximize="nope")
    with pytest.raises(ValueError, match=r"over='d'.*allowed: a, b, c"):
        pareto(ds, minimize=["f0"], over=["d"])
    with pytest.raises(ValueError, match=r"by='d'.*allowed: a, b, c"):
        pareto(ds, minimize=["f0"], by=["d"])
    with pytest.raises(ValueError, match=r"'f0' is in both minimize and maximize"):
        pareto(ds, minimize=["f0", "f1"], maximize=["f0"])
    with pytest.raises(ValueError, match="at least one variable"):
        pareto(ds)
    with pytest.raises(ValueError, match=r"'a' is in both over and by"):
        pareto(ds, minimize="f0", over=["a", "b"], by=["a", "c"])
    with pytest.raises(ValueError, match=r"'c' is in neither over nor by"):
        pareto(ds, minimize="f0", over=["a"], by=["b"])
    with pytest.raises(ValueError, match=r"where has dimension 'z'"):
        pareto(ds, minimize="f0", where=xr.DataArray([True, False], dims="z"))
    with pytest.raises(ValueError, match=r"where has dtype float64"):
        pareto(ds, minimize="f0", where=ds.f1)
    with pytest.raises(InputError, match=r"where='fitz'.*allowed: f0, f1, ok"):
        pareto(ds, minimize="f0", where="fitz")
    ds["bound"] = xr.full_like(ds.f0, 0, dtype=int).astype(str)
    with pytest.raises(ValueError, match=r"minimize='bound' has dtype .*not a number; allowed: f0, f1"):
        pareto(ds, minimize="bound")
