"""workbench.analysis.scaling: exponents recovered from exact power laws, regime
crossovers on synthetic labels and on a real decode sweep over batch, and the crossing
point of two power laws against its closed form."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from workbench import predict
from workbench.analysis import crossover_where, crossovers, scaling

X = np.geomspace(1.0, 1e4, 25)  # 25 points, 6 per decade; the tail (30%) is the last 8


def power_law_dataset(p: float, *, a=(3.7, 0.02), knee=None, q=None) -> xr.Dataset:
    """y = a·x^p along dim "x" for two prefactors (dim "hw"). With a knee x0 and a low
    exponent q: y = a·x0^(p-q)·x^q below x0 (continuous at x0), a·x^p above."""
    a = np.asarray(a)[:, None]
    y = a * X**p
    if knee is not None:
        y = np.where(X < knee, a * knee ** (p - q) * X**q, y)
    return xr.Dataset({"t_s": (("hw", "x"), y)}, coords={"hw": ["g", "w"], "x": X})


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, -1.0])
def test_exact_power_law(p):
    ds = power_law_dataset(p)
    out = scaling(ds, "t_s", "x")
    # y = a·x^p  =>  d log y / d log x = p at every x, and the log-log fit is exact.
    np.testing.assert_allclose(out.local_exponent.values, p, atol=1e-9)
    np.testing.assert_allclose(out.asymptotic_exponent.values, p, atol=1e-6)
    np.testing.assert_allclose(out.asymptotic_prefactor.values, [3.7, 0.02], rtol=1e-6)
    assert out.local_exponent.dims == ("hw", "x") and out.asymptotic_exponent.dims == ("hw",)
    assert out.local_exponent.attrs["units"] == "1" and out.asymptotic_exponent.attrs["units"] == "1"
    assert out.attrs["tail_points"] == 8  # ceil(0.3 · 25)
    assert out.attrs["tail_from"] == pytest.approx(X[-8])


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, -1.0])
def test_asymptotic_exponent_ignores_a_low_x_regime(p):
    q = p + 1.5  # a different slope below the knee
    knee = X[12]  # 100: the tail starts at X[17] = 10^(17/6) ≈ 680
    out = scaling(power_law_dataset(p, knee=knee, q=q), "t_s", "x")
    np.testing.assert_allclose(out.asymptotic_exponent.values, p, atol=1e-6)
    np.testing.assert_allclose(out.asymptotic_prefactor.values, [3.7, 0.02], rtol=1e-6)
    local = out.local_exponent.values
    # Away from the knee (both neighbours in the same regime) the local exponent is the
    # regime's exponent; at the knee it lies between the two.
    np.testing.assert_allclose(local[:, :12], q, atol=1e-9)
    np.testing.assert_allclose(local[:, 13:], p, atol=1e-9)
    assert np.all((local[:, 12] - p) * (local[:, 12] - q) <= 1e-12)


def test_tail_points_at_least_two_and_all():
    ds = power_law_dataset(1.0, knee=X[12], q=0.0)
    assert scaling(ds, "t_s", "x", tail=0.01).attrs["tail_points"] == 2
    whole = scaling(ds, "t_s", "x", tail=1.0)
    assert whole.attrs["tail_points"] == 25
    # Over every point the fit mixes both regimes: strictly between 0 and 1.
    assert np.all((whole.asymptotic_exponent > 0) & (whole.asymptotic_exponent < 1))


def test_unsorted_coordinate_and_non_positive_values():
    ds = power_law_dataset(2.0)
    shuffled = ds.isel(x=np.random.default_rng(0).permutation(X.size))
    out = scaling(shuffled, "t_s", "x")
    np.testing.assert_allclose(out.asymptotic_exponent.values, 2.0, atol=1e-9)
    np.testing.assert_allclose(out.local_exponent.values, 2.0, atol=1e-9)
    bad = ds.copy(deep=True)
    bad["t_s"][0, -1] = 0.0  # no logarithm: left out of the fit, NaN locally
    out = scaling(bad, "t_s", "x")
    np.testing.assert_allclose(out.asymptotic_exponent.values, 2.0, atol=1e-9)
    assert np.isnan(out.local_exponent.values[0, -1]) and np.isfinite(out.local_exponent.values[1, -1])


def test_scaling_errors_name_the_argument():
    ds = power_law_dataset(1.0)
    ds["label"] = ds.t_s.astype(str)
    with pytest.raises(ValueError, match=r"var='nope'.*allowed: t_s, label"):
        scaling(ds, "nope", "x")
    with pytest.raises(ValueError, match=r"dim='batch' is not a dimension of var 't_s'; allowed: hw, x"):
        scaling(ds, "t_s", "batch")
    with pytest.raises(ValueError, match=r"tail=0 .*allowed: a fraction in \(0, 1\]"):
        scaling(ds, "t_s", "x", tail=0)
    with pytest.raises(ValueError, match=r"dim='hw' has no numeric coordinate"):
        scaling(ds, "t_s", "hw")
    with pytest.raises(ValueError, match=r"var='label' has dtype"):
        scaling(ds, "label", "x")
    with pytest.raises(ValueError, match=r"coordinate 0"):
        scaling(ds.assign_coords(x=X - 1.0), "t_s", "x")
    with pytest.raises(ValueError, match=r"at least 2 points"):
        scaling(ds.isel(x=[0]), "t_s", "x")


# ---- crossovers --------------------------------------------------------------------------------
def test_crossovers_on_synthetic_labels():
    labels = [["m", "m", "c", "c"],   # one change between b=2 and b=4
              ["m", "c", "m", "c"],   # three changes
              ["m", "m", "m", "m"]]   # none
    ds = xr.Dataset({"bound": (("h", "b"), labels)}, coords={"h": ["x", "y", "z"], "b": [1, 2, 4, 8]})
    got = crossovers(ds, "b")
    want = pd.DataFrame({"h": ["x", "y", "y", "y"], "b_before": [2, 1, 2, 4], "b_after": [4, 2, 4, 8],
                         "from": ["m", "m", "c", "m"], "to": ["c", "c", "m", "c"]})
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)
    # The same labels with b stored in descending order: sorted first, same answer.
    pd.testing.assert_frame_equal(crossovers(ds.isel(b=[3, 2, 1, 0]), "b").reset_index(drop=True), want,
                                  check_dtype=False)
    # No change anywhere: an empty table with the same columns.
    empty = crossovers(ds.isel(h=[2]), "b")
    assert empty.empty and list(empty.columns) == list(want.columns)


def brute_crossovers(lab: xr.DataArray, dim: str) -> list[tuple]:
    other = [d for d in lab.dims if d != dim]
    rows = []
    for combo in itertools.product(*[lab[d].values for d in other]):
        line = lab.sel(dict(zip(other, combo)))
        x, v = line[dim].values, line.values
        for i in range(len(x) - 1):
            if v[i] != v[i + 1]:
                rows.append((*combo, x[i], x[i + 1], v[i], v[i + 1]))
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_crossovers_match_a_loop_on_random_labels(seed):
    rng = np.random.default_rng(seed)
    names = np.array(["compute", "memory", "communication"])
    lab = xr.DataArray(names[rng.integers(0, 3, size=(3, 7, 4))], dims=("tp", "batch", "hardware"),
                       coords={"tp": [1, 2, 8], "batch": 2 ** np.arange(7), "hardware": list("abcd")},
                       name="bound")
    got = crossovers(lab.to_dataset(), "batch")
    assert list(got.columns) == ["tp", "hardware", "batch_before", "batch_after", "from", "to"]
    assert [tuple(r) for r in got.itertuples(index=False)] == brute_crossovers(lab, "batch")
    # A DataArray can be passed directly.
    pd.testing.assert_frame_equal(crossovers(lab, "batch"), got)


def test_missing_labels_in_a_row_are_no_change():
    lab = xr.DataArray([np.nan, np.nan, 1.0, 1.0, np.nan], dims="x", coords={"x": [1, 2, 3, 4, 5]})
    got = crossovers(lab, "x")
    assert list(got.x_before) == [2, 4] and list(got.x_after) == [3, 5]


BATCH = [2**i for i in range(13)]  # 1 .. 4096


def check_against_bound(ds: xr.Dataset, table: pd.DataFrame):
    """Each reported change brackets a real change of ds.bound, and there are no others."""
    assert [tuple(r) for r in table.itertuples(index=False)] == brute_crossovers(ds.bound, "batch")
    for row in table.to_dict("records"):
        assert ds.bound.sel(batch=row["batch_before"]).item() == row["from"]
        assert ds.bound.sel(batch=row["batch_after"]).item() == row["to"]


def test_real_decode_sweep_memory_to_compute():
    """Decode of llama_3_1_8b on one h100_sxm (fp8 weights and math): at batch 1 the step
    reads the 8 GB of weights for 16 GFLOP of work, far below the ridge point (memory
    bound); per-sequence compute (2·N FLOPs) and per-sequence KV reads both grow with
    batch, so the step turns compute bound at large batch only when a sequence's compute
    time exceeds its KV read time: 2N/peak > context·kv_bytes_per_token/bandwidth. With
    bf16 KV (2·8·128·32·2 = 131 kB per token), 2N = 16 GFLOP, 1979 TFLOP/s and 3.35 TB/s,
    that needs context < 16e9·3.35e12/(1979e12·131072) ≈ 207 tokens before efficiencies.
    prompt=1, generate=128 (context ≈ 65) crosses; the brief's prompt=512 does not
    (see test_real_decode_sweep_at_prompt_512)."""
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=1, batch=BATCH, prompt=1,
                           generate=128, weights="fp8")
    table = crossovers(ds, "batch")
    check_against_bound(ds, table)
    m2c = table[(table["from"] == "memory") & (table["to"] == "compute")]
    assert len(m2c) == 1
    before, after = m2c.batch_before.item(), m2c.batch_after.item()
    assert ds.bound.sel(batch=before).item() == "memory" and ds.bound.sel(batch=after).item() == "compute"
    assert (ds.bound.sel(batch=slice(None, before)) == "memory").all()
    assert (ds.bound.sel(batch=slice(after, None)) == "compute").all()
    # With tp=1 there is no communication, so compute = memory time lies in the bracket.
    assert float(ds.decode_comm_s.max()) == 0.0
    x = crossover_where(ds, "decode_compute_s", "decode_memory_s", "batch").item()
    assert before <= x <= after


def test_real_decode_sweep_at_prompt_512():
    """The configuration of the brief: at context ≈ 576 tokens the KV reads outgrow the
    compute per sequence (closed form in the test above), so the decode step stays memory
    bound from batch 1 to 4096 and no crossover is reported. Whatever the model says, the
    table lists exactly the changes of `bound`."""
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=1, batch=BATCH, prompt=512,
                           generate=128, weights="fp8")
    table = crossovers(ds, "batch")
    check_against_bound(ds, table)
    if (ds.bound == "memory").all():
        assert table.empty


def test_real_sweep_several_dims():
    ds = predict.inference(hardware=["h100_sxm", "h200_sxm"], model="llama_3_1_70b", tp=[4, 8],
                           batch=[1, 8, 64, 256, 1024], prompt=[128, 2048], generate=256, weights="fp8")
    table = crossovers(ds, "batch")
    assert list(table.columns) == ["hardware", "tp", "prompt", "batch_before", "batch_after", "from", "to"]
    assert [tuple(r) for r in table.itertuples(index=False)] == brute_crossovers(ds.bound, "batch")


# ---- crossover_where ---------------------------------------------------------------------------
def test_crossover_where_two_power_laws():
    """a = c·x (compute-like, linear in batch), b = m·x^0.25 (memory-like). They are equal
    at x* = (m/c)^(1/(1-0.25)), exactly, since log(a/b) is linear in log x."""
    c = np.array([1e-6, 1e-5, 1e-2, 2.0])[:, None]
    m = 1e-3
    x = np.array([1, 3, 10, 30, 100, 300, 1000, 3000, 10000.0])
    ds = xr.Dataset({"compute_s": (("hw", "batch"), c * x), "memory_s": ("batch", m * x**0.25)},
                    coords={"hw": list("abcd"), "batch": x})
    got = crossover_where(ds, "compute_s", "memory_s", "batch")
    want = (m / c[:, 0]) ** (1 / 0.75)  # 3981, 184.8, 0.1 (outside the grid), 8.6e-5 (outside)
    np.testing.assert_allclose(got.values[:2], want[:2], rtol=1e-12)
    assert np.isnan(got.values[2:]).all()
    assert got.dims == ("hw",)
    # The argument order does not matter; a crossing on a grid point is that point.
    np.testing.assert_allclose(crossover_where(ds, "memory_s", "compute_s", "batch").values, got.values)
    on_grid = ds.assign(compute_s=ds.memory_s * (ds.batch / 100.0) ** 0.5)
    assert crossover_where(on_grid, "compute_s", "memory_s", "batch").item() == pytest.approx(100.0, rel=1e-12)


def test_crossover_where_first_of_two_crossings():
    """log(a/b) = -(log x - log 10)·(log x - log 1000): a = b at x = 10 and x = 1000, both
    on the grid 10^(k/2); the first along the dim is reported."""
    x = 10.0 ** (np.arange(9) / 2)
    lx = np.log(x)
    ds = xr.Dataset({"a_s": ("n", np.exp(-(lx - np.log(10)) * (lx - np.log(1000)))), "b_s": ("n", np.ones(9))},
                    coords={"n": x})
    assert crossover_where(ds, "a_s", "b_s", "n").item() == pytest.approx(10.0, rel=1e-9)


def test_crossover_where_errors():
    ds = power_law_dataset(1.0)
    with pytest.raises(ValueError, match=r"var_b='nope'.*allowed: t_s"):
        crossover_where(ds, "t_s", "nope", "x")
    with pytest.raises(ValueError, match=r"dim='z' is not a dimension"):
        crossover_where(ds, "t_s", "t_s", "z")


def test_points_that_do_not_fit_are_left_out_of_the_fit():
    """8B at batch 16 on one H100: 64k and 120k prompts do not fit. The fit runs over the
    tail of the points that fit (4k, 16k: the exponent of the two, not 0.90 from the two
    that do not) and says how many it left out; where=True keeps every point."""
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=16,
                           prompt=[1024, 4096, 16384, 65536, 120000], weights="fp16")
    assert ds.fits.values.tolist() == [True, True, True, False, False]
    out = scaling(ds, "tpot_s", "prompt")
    t = ds.tpot_s.values
    assert float(out.asymptotic_exponent) == pytest.approx(np.log(t[2] / t[1]) / np.log(4.0), rel=1e-9)
    assert int(out.left_out_points) == 2 and out.attrs["left_out"] == 2 and out.attrs["where"] == "fits"
    assert int(out.fit_points) == 2 and float(out.fit_from) == 4096 and float(out.fit_to) == 16384
    assert (out.attrs["tail_from"], out.attrs["tail_to"]) == (4096.0, 16384.0)
    every = scaling(ds, "tpot_s", "prompt", where=True)
    assert float(every.asymptotic_exponent) == pytest.approx(np.log(t[4] / t[3]) / np.log(120000 / 65536), rel=1e-9)
    assert every.attrs["left_out"] == 0
    np.testing.assert_array_equal(out.local_exponent, every.local_exponent)  # the local exponents as they were


def test_where_per_series_and_its_errors():
    """A boolean mask per series (here: x below a cut-off differing by series) chooses each
    series' tail among its own kept points; a bad where is one line naming it."""
    ds = power_law_dataset(1.0, knee=X[12], q=0.0)  # exponent 0 below X[12], 1 above
    keep = xr.DataArray(np.stack([X <= X[11], np.ones(X.size, bool)]), dims=("hw", "x"), coords={"x": X})
    out = scaling(ds, "t_s", "x", where=keep.isel(x=slice(None, None, -1)))  # aligned by coordinate
    np.testing.assert_allclose(out.asymptotic_exponent.values, [0.0, 1.0], atol=1e-9)
    assert out.left_out_points.values.tolist() == [13, 0] and out.fit_points.values.tolist() == [4, 8]
    assert out.fit_to.values.tolist() == [X[11], X[-1]]
    with pytest.raises(ValueError, match=r"where='nope' is not a variable"):
        scaling(ds, "t_s", "x", where="nope")
    with pytest.raises(ValueError, match=r"where='t_s' has dtype float64; allowed: booleans"):
        scaling(ds, "t_s", "x", where="t_s")
    with pytest.raises(ValueError, match=r"where=int is not allowed"):
        scaling(ds, "t_s", "x", where=3)
