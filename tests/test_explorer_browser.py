"""The explorer served by voila, in headless Chromium: move the batch slider with the
keyboard and check that the table shows the numbers predict.inference gives for the new
batch. Skips (with the reason) only when voila, playwright or Chromium is missing."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from workbench import explore, predict
from workbench.costs import add_costs

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "explorer.ipynb"
CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Table column: (variable, shown in units of)
SHOWN = {"ttft_s": 1e-3, "tpot_s": 1e-3, "output_tokens_per_s_per_user": 1.0,
         "output_tokens_per_s_per_device": 1.0, "cost_per_million_tokens_usd": 1.0}


def _requirements():
    try:
        import voila  # noqa: F401
    except ImportError:
        pytest.skip("voila is not installed (pip install -e '.[notebooks]')")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set WORKBENCH_CHROMIUM)")
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def playwright_and_voila(tmp_path):
    """(sync_playwright, url) with voila serving the explorer on a free port."""
    sync_playwright = _requirements()
    port = _free_port()
    log = open(tmp_path / "voila.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "voila", str(NOTEBOOK), "--no-browser", f"--port={port}",
                             "--Voila.ip=127.0.0.1"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"voila did not start: {(tmp_path / 'voila.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield sync_playwright, url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # voila and the kernels it started
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _table(page) -> dict:
    """hardware -> {variable: shown number in SI units}, read from the cells' text."""
    rows = {}
    for row in page.locator("table.wb-summary tbody tr").all():
        hw = row.get_attribute("data-hardware")
        rows[hw] = {}
        for var, scale in SHOWN.items():
            text = row.locator(f'td[data-var="{var}"]').inner_text().strip()
            rows[hw][var] = float(text.replace(",", "")) * scale
    return rows


def _notebook_state(**overrides) -> dict:
    """The controls' values the notebook starts with (its parameters cell)."""
    cell = next(c for c in nbformat.read(NOTEBOOK, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    ns: dict = {}
    exec(cell.source, ns)  # noqa: S102 - the committed parameters cell
    return explore.normalize_state({k: v for k, v in ns.items() if k in explore.CONTROLS}, **overrides)


def _expected(batch: int) -> dict:
    """What the table must show for `batch`: predict.inference per chip, plus costs."""
    s = _notebook_state()
    common = dict(model=s["model"], batch=batch, prompt=s["prompt"], generate=s["generate"], weights=s["weights"])
    out = {}
    for hw in s["hardware"]:
        kw = dict(devices=explore.state.wafer_devices(s["systems"])) if hw in explore.WAFERS else dict(tp=s["tp"], pp=s["pp"])
        ds = add_costs(predict.inference(hardware=hw, **kw, **common))
        out[hw] = {v: float(ds[v]) for v in SHOWN}
    return out


def _close(shown: dict, expected: dict) -> None:
    assert set(shown) == set(expected)
    for hw, values in expected.items():
        for var, want in values.items():
            # the table shows 4 significant digits (integers from 1,000 up)
            assert shown[hw][var] == pytest.approx(want, rel=6e-4), (hw, var, shown[hw][var], want)


def test_batch_slider_in_voila_updates_the_numbers(playwright_and_voila, tmp_path):
    sync_playwright, voila_url = playwright_and_voila
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(voila_url, timeout=45_000)
            # the kernel has run the notebook and the widgets are rendered
            page.wait_for_selector("table.wb-summary tbody tr", timeout=45_000)
            page.wait_for_selector(".wb-batch .noUi-handle", timeout=15_000)
            state = _notebook_state()
            start = state["batch"]
            after = explore.POWERS["batch"][explore.POWERS["batch"].index(start) + 1]  # the slider's next stop
            assert page.locator(".wb-batch .widget-readout").inner_text().strip() == str(start)
            _close(_table(page), _expected(start))
            assert page.locator(".wb-out-messages").inner_text().strip() == ""
            assert "Traceback" not in page.content()

            cell = f'tr[data-hardware="{state["hardware"][0]}"] td[data-var="tpot_s"]'
            before = page.locator(cell).inner_text()
            page.locator(".wb-batch .noUi-handle").focus()
            page.keyboard.press("ArrowRight")  # the batch slider one stop right (8 -> 16)
            page.wait_for_function("([sel, old]) => document.querySelector(sel).innerText !== old",
                                   arg=[cell, before], timeout=30_000)
            assert page.locator(".wb-batch .widget-readout").inner_text().strip() == str(after)
            _close(_table(page), _expected(after))
            assert re.search(r"updated in \d+\.\d+ s", page.locator(".wb-out-timing").inner_text())
            page.screenshot(path=str(tmp_path / "explorer.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
