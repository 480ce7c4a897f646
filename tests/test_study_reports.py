"""Every study, run with its smoke parameters, produces a report a browser renders without
errors and a PDF with pages and figures (issue: studies and reports)."""
from __future__ import annotations

import json

import pytest
import xarray as xr

from workbench.report import find_chromium
from workbench.studies import list_studies, run_study

STUDIES = list_studies()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    for name in STUDIES:
        run_study(name, smoke=True, out_root=out)
    return out


@pytest.mark.parametrize("name", STUDIES)
def test_outputs_are_complete(reports, name):
    folder = reports / name
    for file in (f"{name}.ipynb", "sweep.nc", "run.json", f"{name}.html", f"{name}.pdf"):
        assert (folder / file).exists(), file
    run = json.loads((folder / "run.json").read_text())
    assert run["smoke"] and run["git_sha"] and run["timings"]["execute_s"] > 0
    ds = xr.open_dataset(folder / "sweep.nc")
    assert ds.attrs["study"] == name and len(ds.data_vars) > 0
    ds.close()
    index = (reports / "index.html").read_text()
    assert f"{name}/{name}.html" in index


@pytest.mark.parametrize("name", STUDIES)
def test_html_renders_in_headless_chromium(reports, name):
    chromium = find_chromium()
    assert chromium, "Chromium is required for report tests (apt-get install chromium)"
    sync_api = pytest.importorskip("playwright.sync_api")
    errors = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((reports / name / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth])")
        text = page.inner_text("body")
        browser.close()
    assert not [e for e in errors if "favicon" not in e], errors
    assert images and all(done and width > 0 for done, width in images), images
    for marker in ("Traceback", "Error:", "Warning:"):
        assert marker not in text, marker
    assert "Answer." in text and "Conclusion" in text


@pytest.mark.parametrize("name", STUDIES)
def test_pdf_has_pages_and_figures(reports, name):
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(reports / name / f"{name}.pdf")
    assert len(reader.pages) >= 2
    images = sum(len(page.images) for page in reader.pages)
    assert images >= 1
    assert "Conclusion" in "".join(page.extract_text() for page in reader.pages)
