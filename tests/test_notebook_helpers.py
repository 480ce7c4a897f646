"""workbench.notebook: the helpers every study notebook imports instead of defining its own;
esc() keeps a value a user passes from injecting HTML or Markdown into the report."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from workbench import notebook
from workbench.notebook import drop_object_vars, esc, fig_text, md, pct, save_sweep

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
HELPERS = ("md", "esc", "pct", "setup", "save_sweep", "drop_object_vars", "fig_text")


def code_cells(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"]
            yield "".join(src) if isinstance(src, list) else src


def rendered(markdown: str) -> str:
    """The HTML nbconvert writes into the report for a Markdown output."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune
    return markdown2html_mistune(markdown)


def shown(text: str, monkeypatch) -> str:
    """What md(text) hands to IPython's display."""
    got = []
    monkeypatch.setattr("IPython.display.display", lambda obj: got.append(obj.data))
    md(text)
    return got[0]


def test_md_escapes_dollar(monkeypatch):
    assert shown("USD $1.20 and $3", monkeypatch) == "USD \\$1.20 and \\$3"
    assert shown("no dollars, *bold*", monkeypatch) == "no dollars, *bold*"  # the notebook's own markup stays


@pytest.mark.parametrize("attack", ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>",
                                    '"><svg onload=alert(1)>', "<a href='javascript:alert(1)'>x</a>"])
def test_esc_leaves_no_tag(attack):
    out = esc(attack)
    assert "<" not in out and ">" not in out and '"' not in out and "'" not in out
    html = rendered(f"On {out} the model ...")
    assert not re.search(r"<(img|script|svg|a)\b", html), html
    assert "&lt;" in html and "alert(1)" in html  # shown as text, not dropped


@pytest.mark.parametrize("attack, tag", [("[click](javascript:alert(1))", "<a"), ("![x](http://evil/x.png)", "<img"),
                                         ("`code`", "<code"), ("*bold* _it_ __b__", "<em"),
                                         ("a\n\n# Heading", "<h1"), ("~~gone~~", "<del"),
                                         ("<http://evil>", "<a"), ("see https://evil/x", "<a")])
def test_esc_leaves_no_markdown_markup(attack, tag):
    html = rendered(f"On {esc(attack)} the model ...")
    assert tag not in html and "<strong" not in html, html
    assert html.count("<p>") == 1


def test_esc_keeps_ordinary_names_unchanged():
    # The catalog's names and Hugging Face ids: the Markdown text of a default run is unchanged.
    for name in ("llama_3_1_70b", "h100_sxm", "cs3", "fp8/fp8/bf16", "meta-llama/Llama-3.1-70B",
                 "wikitext2_ppl", "gpt_oss_120b"):
        assert esc(name) == name
    assert esc(8192) == "8192"
    assert esc("AT&T") == "AT&amp;T" and rendered(esc("AT&T")).strip() == "<p>AT&amp;T</p>"


def test_esc_then_md_shows_dollar_and_backslash_literally(monkeypatch):
    value = "a$b \\ c"  # a dollar and a backslash
    html = rendered(shown(f"value {esc(value)}", monkeypatch))
    assert "value a$b \\ c" in html


def test_fig_text_pct_and_sweep(tmp_path):
    assert fig_text("cost $x$") == "cost \\$x\\$" and fig_text("h100_sxm") == "h100_sxm"
    assert pct(0.123) == "+12%" and pct(-0.5) == "-50%" and pct(float("nan")) == "n/a"
    ds = xr.Dataset({"tpot_s": ("batch", np.array([1.0, 2.0])), "bound": ("batch", np.array(["memory", "compute"],
                                                                                              dtype=object))})
    kept = drop_object_vars(ds)
    assert list(kept.data_vars) == ["tpot_s"]
    save_sweep(kept, "")
    assert not list(tmp_path.iterdir())
    assert save_sweep(kept, str(tmp_path)) is None  # no output when a cell ends with it
    with xr.open_dataset(tmp_path / "sweep.nc") as back:
        assert back.identical(kept)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_defines_its_own_helpers(path):
    for src in code_cells(path):
        assert "def md(" not in src, f"{path.name}: import md from workbench.notebook"
        tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defined & set(HELPERS), f"{path.name}: defines {defined & set(HELPERS)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_that_call_md_import_it(path):
    src = "\n".join(code_cells(path))
    if "md(" in src:
        assert re.search(r"^from workbench\.notebook import .*\bmd\b", src, re.M), path.name


def test_nothing_in_the_library_imports_the_notebook_helpers():
    here = Path(notebook.__file__)
    for py in sorted(here.parent.rglob("*.py")):
        if py == here:
            continue
        text = py.read_text()
        assert not re.search(r"(from\s+workbench(\.notebook\b|\s+import\s+[^\n]*\bnotebook\b)|import\s+workbench\.notebook"
                             r"|from\s+\.+notebook\b|from\s+\.+\s+import\s+[^\n]*\bnotebook\b)", text), py
