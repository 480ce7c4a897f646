"""Fixtures shared by the test modules."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

STUDY_ROOT = Path(__file__).parent / "data" / "study_root"  # a project root with the tiny study


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
