"""Reports: the executed notebook as HTML with inputs hidden and a title block, PDF through
headless Chromium, and an index of every report."""
from __future__ import annotations

import html as _html
import json
import os
import re
import shutil
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
  @media print { .jp-Cell { break-inside: avoid; } }
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


def find_chromium() -> str | None:
    env = os.environ.get(CHROMIUM_ENV)
    if env and Path(env).exists():
        return env
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def export_pdf(html: Path, out: Path) -> tuple[Path | None, str]:
    """Print the HTML to PDF with headless Chromium. Without a browser: (None, how to get one)."""
    chromium = find_chromium()
    if chromium is None:
        return None, (f"no Chromium found (PATH or ${CHROMIUM_ENV}); the HTML is written. For the PDF: "
                      "apt-get install chromium, or set WORKBENCH_CHROMIUM to a Chrome/Chromium binary")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
               f"--print-to-pdf={out}", "--virtual-time-budget=10000", html.resolve().as_uri()]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if r.returncode != 0 or not out.exists() or out.stat().st_size == 0:
        return None, f"Chromium failed to print {html.name} (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    return out, "ok"


def write_index(reports: Path) -> Path:
    """reports/index.html: every study report with its date, mode and parameters."""
    rows = []
    for run_json in sorted(reports.glob("*/run.json")):
        run = json.loads(run_json.read_text())
        folder = run_json.parent.name
        links = " ".join(f'<a href="{folder}/{folder}.{ext}">{ext.upper()}</a>'
                         for ext in ("html", "pdf") if (run_json.parent / f"{folder}.{ext}").exists())
        rows.append(f"<tr><td>{_html.escape(run.get('title', folder))}</td><td>{links}</td>"
                    f"<td>{_html.escape(run['created_utc'])}</td><td>{'smoke' if run.get('smoke') else 'full'}</td>"
                    f"<td><code>{_html.escape(json.dumps(run.get('parameters', {}), default=str))}</code></td></tr>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>workbench reports</title>" + STYLE +
            "</head><body><h1>Reports</h1><table class='dataframe'><tr><th>study</th><th>report</th>"
            "<th>date (UTC)</th><th>mode</th><th>parameters</th></tr>" + "".join(rows) + "</table></body></html>")
    out = reports / "index.html"
    out.write_text(page)
    return out
