"""The surface solve (calibrate/surface_solve.py): GEMM tables are fitted with Huber weights,
so a few rows timed far off their neighbours (a JIT kernel's other configuration, a disturbed
timing) do not bend the surface the other rows follow; least squares does bend."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synthetic_chip import SyntheticChip as _Chip
from workbench.calibrate import kernel_fit as kf
from workbench.calibrate import surface_solve as ss
from workbench.primitives.kernel_fits import gemm_roofline


def _rows_with_outliers(n=3000, share=0.05, factor=3.0, seed=11):
    """GEMM rows timed by a smooth known model (3 us fixed + roofline / 0.8), a `share` of
    them `factor` times slower: the outliers and whether each row is one."""
    rng = np.random.default_rng(seed)
    m = np.round(2 ** rng.uniform(0, 13, n))
    nn, k = np.round(2 ** rng.uniform(7, 14, n)), np.round(2 ** rng.uniform(7, 14, n))
    roof, _ = gemm_roofline(m=m, n=nn, k=k, peak=1e15, bandwidth=3e12, a_bytes=2, b_bytes=2, c_bytes=2)
    clean = 3e-6 + roof / 0.8
    bad = rng.random(n) < share
    return pd.DataFrame({"m": m, "n": nn, "k": k, "time_s": np.where(bad, factor * clean, clean)}), bad, clean


def test_penalty_leaves_log_linear_surfaces_alone():
    d = ss.penalty((5, 4))
    x = np.add.outer(np.arange(5.0), 2 * np.arange(4.0)).ravel()  # linear in both axes
    np.testing.assert_allclose(d @ x, 0.0, atol=1e-12)


def test_huber_weights():
    """Weight 1 within HUBER_LOG_ERR of the surface, HUBER_LOG_ERR / |error| beyond: a row 4x
    off (log 1.39) pulls as one 5% off."""
    e = np.array([0.0, 0.04, -0.05, 0.1, np.log(4.0)])
    w = ss.huber_weights(e)
    assert w[:3] == pytest.approx([1.0, 1.0, 1.0])
    assert w[3] == pytest.approx(0.5)
    assert w[4] * np.log(4.0) == pytest.approx(ss.HUBER_LOG_ERR)


def test_outliers_do_not_bend_a_gemm_surface(monkeypatch):
    """With 5% of rows timed 3x slow, the robust fit predicts the other rows (held out by
    neighbourhood) within 1% median and 3% p90 of their true times (0.45% and 2.0% when
    written); least squares (the same table fitted with robust weights turned off: 3.2% and
    13.2%) is pulled at least twice as far."""
    rows, bad, clean = _rows_with_outliers()
    table = kf.Table("gemm", "bf16", rows, kf.gemm_features)

    def clean_errors():
        _, _, _, per_row = kf.fit_table(table, _Chip())
        pred = per_row["held_out_pred_s"].to_numpy()
        return np.abs(pred[~bad] / clean[~bad] - 1.0)
    robust = clean_errors()
    monkeypatch.setattr(ss, "ROBUST_CLASSES", ())
    plain = clean_errors()
    assert np.median(robust) < 0.01 and np.quantile(robust, 0.9) < 0.03
    assert np.median(plain) > 2.0 * np.median(robust)


def test_robust_weights_change_nothing_without_outliers(monkeypatch):
    """On rows that follow the model exactly the robust and least-squares surfaces agree
    (every row within HUBER_LOG_ERR keeps weight 1): within 0.5% at every row."""
    rows, _, _ = _rows_with_outliers(share=0.0)
    roof, coords, measured = kf.table_points(kf.Table("gemm", "bf16", rows, kf.gemm_features), _Chip())

    def fitted_times():
        g, t0 = kf.fit_fixed(kf.empty_grid("gemm", coords), coords, roof, measured, kernel_class="gemm")
        return t0 + roof / g(**coords)
    robust = fitted_times()
    monkeypatch.setattr(ss, "ROBUST_CLASSES", ())
    assert np.max(np.abs(robust / fitted_times() - 1.0)) < 0.005
