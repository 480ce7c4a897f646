"""Reports: the executed notebook as HTML with inputs hidden and a title block, PDF through
headless Chromium, and an index of every report."""
from __future__ import annotations

import html as _html
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import nbformat

CHROMIUM_ENV = "WORKBENCH_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Flags for a closed network and a root user (headless Chromium as the probe ran it).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-quic", "--hide-scrollbars")

STYLE = """
<style>
  body { max-width: 1000px; margin: auto; font-family: 'DejaVu Sans', Arial, sans-serif; }
  .wb-title { border-bottom: 2px solid #333; margin-bottom: 1em; padding-bottom: .5em; }
  .wb-title h1 { margin-bottom: .2em; }
  .wb-meta { font-size: 85%; color: #444; }
  .wb-meta td { padding: 1px 8px 1px 0; vertical-align: top; }
  .jp-OutputArea-output img { max-width: 100%; height: auto; }
  table.dataframe { border-collapse: collapse; font-size: 85%; }
  table.dataframe td, table.dataframe th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
  @media print {
    .jp-Cell { break-inside: avoid; }
    /* a wide table fits the printed page: smaller text, headers that wrap, cells that may break */
    .jp-OutputArea-output table { font-size: 7pt; }
    .jp-OutputArea-output table td, .jp-OutputArea-output table th { padding: 1px 3px; white-space: normal;
      overflow-wrap: anywhere; }
  }
</style>
"""


def title_block(run: dict) -> str:
    rows = [("study", run["study"]), ("date (UTC)", run["created_utc"]), ("git", run.get("git_sha", "")),
            ("versions", ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items())),
            ("parameters", json.dumps(run.get("parameters", {}), default=str))]
    if run.get("smoke"):
        rows.append(("mode", "smoke (reduced parameters)"))
    cells = "".join(f"<tr><td><b>{_html.escape(k)}</b></td><td>{_html.escape(str(v))}</td></tr>" for k, v in rows)
    return (f'<div class="wb-title"><h1>{_html.escape(run.get("title", run["study"]))}</h1>'
            f'<table class="wb-meta">{cells}</table></div>')


def export_html(notebook: Path, out: Path, run: dict) -> Path:
    """HTML with inputs and prompts hidden, the title block first."""
    from nbconvert import HTMLExporter
    nb = nbformat.read(notebook, as_version=4)
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is not None and first.source.startswith("# "):  # the title block replaces the notebook's H1
        first.source = first.source.split("\n", 1)[1] if "\n" in first.source else ""
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb)
    body = re.sub(r"<title>.*?</title>", f"<title>{_html.escape(run.get('title', run['study']))}</title>", body,
                  count=1, flags=re.S)
    # Reports are read offline and archived: no scripts fetched from a CDN (require.js,
    # MathJax); the figures and tables are static.
    body = re.sub(r'<script[^>]*\ssrc="https?://[^"]*"[^>]*>\s*</script>', "", body)
    body = re.sub(r'<link[^>]*href="https?://[^"]*"[^>]*>', "", body)
    body = body.replace("</head>", STYLE + "</head>", 1)
    marker = '<main>' if '<main>' in body else '<body'
    i = body.index(marker)
    j = body.index(">", i) + 1
    body = body[:j] + title_block(run) + body[j:]
    out.write_text(body)
    return out


PDF_TIMEOUT_S = 120  # one report prints in 5-20 s here; past this the browser is stuck (the HTML stays)
INDEX_MARK = '<meta name="generator" content="workbench">'


def chromium_problem() -> str:
    """Why WORKBENCH_CHROMIUM, when set, cannot be used ('' when it can or is unset)."""
    env = os.environ.get(CHROMIUM_ENV)
    if not env:
        return ""
    if not Path(env).is_file() or not os.access(env, os.X_OK):
        return f"{CHROMIUM_ENV}={env!r} is not an executable file"
    return ""


def find_chromium() -> str | None:
    """WORKBENCH_CHROMIUM when it names an executable, else the first browser on PATH; a
    WORKBENCH_CHROMIUM that cannot be used is not replaced silently (None)."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return None if chromium_problem() else env
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def export_pdf(html: Path, out: Path, timeout_s: float = PDF_TIMEOUT_S) -> tuple[Path | None, str]:
    """Print the HTML to PDF with headless Chromium, in its own process group and with its
    own time limit. Without a browser, or when it fails or hangs: (None, why); the HTML is
    kept either way."""
    chromium = find_chromium()
    if chromium is None:
        problem = chromium_problem()
        return None, ((f"{problem}; " if problem else f"no Chromium found (PATH or ${CHROMIUM_ENV}); ")
                      + "the HTML is written. For the PDF: apt-get install chromium, or set WORKBENCH_CHROMIUM "
                      "to a Chrome/Chromium binary")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
               f"--print-to-pdf={out}", "--virtual-time-budget=10000", html.resolve().as_uri()]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        except OSError as e:
            return None, f"Chromium at {chromium!r} cannot start ({e.strerror}); the HTML is written"
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the browser and every helper process it started
            proc.communicate()
            out.unlink(missing_ok=True)
            return None, f"Chromium did not print {html.name} within {timeout_s:g} s; the HTML is written"
    if proc.returncode != 0 or not out.exists() or out.stat().st_size == 0:
        return None, f"Chromium failed to print {html.name} (exit {proc.returncode}): {(err or '').strip()[-300:]}"
    return out, "ok"


def _index_row(run_json: Path) -> str:
    run = json.loads(run_json.read_text())
    if not isinstance(run, dict) or "created_utc" not in run:
        raise ValueError("not a run record")
    folder = run_json.parent.name
    links = " ".join(f'<a href="{_html.escape(folder)}/{_html.escape(folder)}.{ext}">{ext.upper()}</a>'
                     for ext in ("html", "pdf") if (run_json.parent / f"{folder}.{ext}").exists())
    return (f"<tr><td>{_html.escape(str(run.get('title', folder)))}</td><td>{links}</td>"
            f"<td>{_html.escape(str(run['created_utc']))}</td><td>{'smoke' if run.get('smoke') else 'full'}</td>"
            f"<td><code>{_html.escape(json.dumps(run.get('parameters', {}), default=str))}</code></td></tr>")


def write_index(reports: Path) -> Path | None:
    """reports/index.html: every study report with its date, mode and parameters. A
    corrupt run.json is skipped and named; an index.html the workbench did not write is
    left alone (None)."""
    out = reports / "index.html"
    if out.exists():
        try:
            head = out.read_text(errors="replace")[:2000]
            ours = INDEX_MARK in head or "<title>workbench reports</title>" in head  # ours, before the mark
        except OSError:
            ours = False
        if not ours:
            print(f"workbench: {out} was not written by the workbench; the index is not updated")
            return None
    rows, skipped = [], []
    for run_json in sorted(reports.glob("*/run.json")):
        try:
            rows.append(_index_row(run_json))
        except (OSError, ValueError, UnicodeDecodeError, KeyError):
            skipped.append(run_json.parent.name)
    note = (f"<p>Skipped (corrupt run.json): {_html.escape(', '.join(skipped))}</p>" if skipped else "")
    for name in skipped:
        print(f"workbench: {reports / name / 'run.json'} is corrupt; left out of the index")
    page = ("<!doctype html><html><head><meta charset='utf-8'>" + INDEX_MARK + "<title>workbench reports</title>"
            + STYLE + "</head><body><h1>Reports</h1><table class='dataframe'><tr><th>study</th><th>report</th>"
            "<th>date (UTC)</th><th>mode</th><th>parameters</th></tr>" + "".join(rows) + "</table>" + note
            + "</body></html>")
    tmp = reports / f".index.html.tmp-{os.getpid()}"
    tmp.write_text(page)
    os.replace(tmp, out)
    return out
