"""Notebooks are committed without outputs and each has one flat, typed parameters cell."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from workbench.studies import list_studies, load_study

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "tests" / "data").rglob("*.ipynb"))
# papermill's documented form: `name: type = value  # help`
PARAM_LINE = re.compile(r"^[a-z_][a-z0-9_]*: (int|float|str|bool|list|dict) = .+  # .+$")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_has_a_unique_id(path):
    """nbformat 4.5 requires a cell id (a missing one is a MissingIDFieldWarning now, "a hard
    error in future nbformat versions"): a cell added by editing the JSON must carry one."""
    import json
    cells = json.loads(path.read_text())["cells"]
    ids = [c.get("id") for c in cells]
    assert None not in ids, f"{path.name}: cells {[i for i, c in enumerate(ids) if c is None]} have no id"
    assert len(set(ids)) == len(ids), f"{path.name}: repeated cell ids"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_flat_typed_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for line in tagged[0].source.splitlines():
        assert PARAM_LINE.match(line), f"{path.name}: {line!r}"


@pytest.mark.parametrize("name", list_studies())
def test_every_study_loads_and_its_parameters_exist(name):
    study = load_study(name)  # validates parameters and smoke against the notebook
    assert study.notebook.exists() and study.smoke, name
