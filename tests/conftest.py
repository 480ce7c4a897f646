"""Fixtures shared by the test modules."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

STUDY_ROOT = Path(__file__).parent / "data" / "study_root"  # a project root with the tiny study
# Workers of `-n auto` (pyproject addopts): one per core, at most this many, since each worker
# holds its own model stack, notebook kernels and Chromium (a bound on memory, not on speed).
XDIST_MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """pytest-xdist's worker count for -n auto: the machine's cores, at most XDIST_MAX_WORKERS."""
    return max(1, min(os.cpu_count() or 1, XDIST_MAX_WORKERS))


@pytest.fixture
def root(tmp_path):
    """A copy of the tiny study's project root (studies/tiny.yaml, notebooks/tiny.ipynb)."""
    dst = tmp_path / "root"
    shutil.copytree(STUDY_ROOT, dst)
    return dst


@pytest.fixture
def rejects_bad_tables():
    """rejects_bad_tables(module, cells, more=()): asserts module.validate refuses a copy of
    module.CSV_PATH's table with one cell of the first row replaced, per (column, value,
    message) of `cells`, then the table-level faults every quality table refuses (a
    duplicated row, a missing column) and `more` (more(raw) -> (table, message) cases);
    returns the raw table."""
    import pandas as pd

    def check(module, cells, more=lambda raw: []):
        raw = pd.read_csv(module.CSV_PATH, dtype=str, keep_default_na=False)
        cases = []
        for col, value, msg in cells:
            table = raw.copy()
            table.loc[0, col] = value
            cases.append((table, msg))
        cases += [(pd.concat([raw, raw.iloc[[0]]], ignore_index=True), r"duplicate of an earlier row"),
                  (raw.drop(columns="notes"), r"columns are"), *more(raw)]
        for table, msg in cases:
            with pytest.raises(ValueError, match=msg):
                module.validate(table, origin="test.csv")
        return raw
    return check


class _ToyChip:
    """A chip of 4.8 TB/s HBM and 1 PFLOP/s at every dtype (what the features read of it)."""

    class hbm:
        bandwidth_bytes_per_s = 4.8e12

    @staticmethod
    def peak(dtype):
        return 1e15


@pytest.fixture
def toy_chip():
    """A toy chip for the kernel features: HBM 4.8e12 B/s, peak 1e15 FLOP/s at every dtype."""
    return _ToyChip()


@pytest.fixture
def module_flops_bytes():
    """module_flops_bytes(roofline, **shape) -> (flops, bytes, coords) of a module block's
    roofline (peak, index_peak, attention_peak, bandwidth; dsa_module_roofline and alike):
    its value at unit peaks and infinite bandwidth, then at infinite peaks and unit
    bandwidth."""
    def flops_bytes(roofline, **shape):
        flops, coords = roofline(peak=1.0, index_peak=1.0, attention_peak=1.0, bandwidth=np.inf, **shape)
        nbytes, _ = roofline(peak=np.inf, index_peak=np.inf, attention_peak=np.inf, bandwidth=1.0, **shape)
        return flops, nbytes, coords
    return flops_bytes


@pytest.fixture
def knots_read_back(toy_chip):
    """knots_read_back(kernel_class, features, variant): asserts that knot_frame's rows of a
    3-knot-per-axis grid of the class, through `features` (frame, chip, variant) -> (roof,
    coords) on the toy chip, sit on the knots (keys at least the new tokens: they are keys
    too)."""
    from workbench.calibrate.kernel_features import knot_frame
    from workbench.primitives.kernel_fits import ROOFLINES, EffGrid

    def check(klass, features, variant):
        kc = ROOFLINES[klass]
        grid = EffGrid(kc.axes, tuple(tuple(kc.knots(a)[:3]) for a in kc.axes), np.zeros((3,) * len(kc.axes)))
        _, c = features(knot_frame(klass, grid), toy_chip, variant)
        k = dict(zip(grid.axes, (m.ravel() for m in np.meshgrid(*[2.0 ** np.asarray(x) for x in grid.knots],
                                                                indexing="ij"))))
        for name in grid.axes:
            want = np.maximum(k[name], k["new"]) if name == "keys" else k[name]  # its new tokens are keys too
            assert np.allclose(c[name], want), (klass, name)
    return check


@pytest.fixture
def held_out_within():
    """held_out_within(path, classes, bounds, runaway): asserts each surface of `classes` in
    the kernel-spec file `path` scores its held-out median and p90 |error| within
    bounds[<variant's first part>] = (median, p90), and runs away no further than its
    largest efficiency over the roofline: < runaway[0] on the datacenter GPUs, runaway[1]
    on the L40S and RTX Pro 6000."""
    import json

    def check(path, classes, bounds, runaway):
        for s in json.loads(path.read_text())["surfaces"]:
            if s["class"] in classes:
                med, p90 = bounds[s["variant"].split("/")[0]]
                assert s["score"]["median_abs_err"] <= med, (path.stem, s["variant"], s["score"])
                assert s["score"]["p90_abs_err"] <= p90, (path.stem, s["variant"], s["score"])
                most = runaway[0] if path.stem.rsplit("-", 1)[0] not in ("l40s", "rtx_pro_6000") else runaway[1]
                assert np.exp(max(s["log_eff"])) < most, (path.stem, s["variant"])
    return check
