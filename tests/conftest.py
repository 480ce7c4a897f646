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
