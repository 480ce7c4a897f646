"""The study runner on a tiny notebook: parameters validated before anything runs, outputs
in place, and a failed run keeps the previous report."""
from __future__ import annotations

import json

import pytest

from workbench.errors import InputError
from workbench.studies import StudyError, load_study, run_study



def test_unknown_or_ill_typed_parameter_fails_before_running(root):
    with pytest.raises(InputError, match="nope"):
        run_study("tiny", overrides={"nope": 1}, root=root, out_root=root / "reports")
    with pytest.raises(InputError, match="n_points"):
        run_study("tiny", overrides={"n_points": "many"}, root=root, out_root=root / "reports")
    assert not (root / "reports" / "tiny").exists()


def test_unknown_study_and_key(root):
    with pytest.raises(InputError, match="allowed: tiny"):
        load_study("nope", root)
    (root / "studies" / "bad.yaml").write_text("notebook: notebooks/tiny.ipynb\nbogus: 1\n")
    with pytest.raises(InputError, match="bogus"):
        load_study("bad", root)


def test_run_writes_every_output_and_a_failure_keeps_it(root):
    out = run_study("tiny", smoke=True, root=root, out_root=root / "reports")
    for name in ("tiny.ipynb", "sweep.nc", "run.json", "tiny.html"):
        assert (out / name).exists(), name
    run = json.loads((out / "run.json").read_text())
    assert run["parameters"] == {"n_points": 2} and run["smoke"] is True
    assert "execute_s" in run["timings"] and run["versions"]["workbench"]
    html = (out / "tiny.html").read_text()
    assert "Tiny study" in html and "n_points" in html  # the title block
    assert "ds.to_netcdf" not in html  # inputs hidden
    assert "<img" in html and "<title>Tiny study</title>" in html  # the figure, the page title
    assert (root / "reports" / "index.html").exists()
    before = (out / "run.json").read_text()
    with pytest.raises(StudyError, match=r"cell 3 .*import os.*RuntimeError: asked to fail"):
        run_study("tiny", overrides={"fail": "true"}, root=root, out_root=root / "reports")
    assert (out / "run.json").read_text() == before
    assert sorted(p.name for p in (root / "reports").iterdir()) == ["index.html", "tiny"]


def test_rerender_uses_the_executed_notebook(root):
    from workbench.studies import rerender
    out = run_study("tiny", smoke=True, root=root, out_root=root / "reports")
    (out / "tiny.html").unlink()
    rerender("tiny", out_root=root / "reports", root=root)
    assert (out / "tiny.html").exists() and "Tiny study" in (out / "tiny.html").read_text()
    with pytest.raises(InputError, match="nope"):
        rerender("nope", out_root=root / "reports", root=root)
