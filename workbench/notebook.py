"""Helpers shared by the study notebooks (notebooks/*.ipynb): display settings, Markdown
computed from the data, escaping of user-supplied values, and writing the sweep.

This is the study layer: notebooks import it, nothing in the library below does
(tests/test_notebook_helpers.py checks). IPython, matplotlib and pandas are imported where
they are used, so importing this module needs none of them.

    from workbench.notebook import esc, md, save_sweep, setup
    setup()
    md(f"**Answer.** On {esc(hardware[0])} ...")
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np

# Characters that start Markdown markup anywhere on a line: code spans, emphasis, links and
# images, GFM tables and strikethrough, headings, the `:` of a URL that would be autolinked,
# and the backslash that escapes them.
_MARKDOWN_ACTIVE = re.compile(r"([\\`*\[\]|~#:])")
# `_` opens or closes emphasis only at a word boundary (CommonMark: never intraword), so
# `llama_3_1_70b` is left as it is and `_x_` is escaped.
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_NEWLINES = re.compile(r"\s*[\r\n]+\s*")


def setup(figsize: tuple[float, float] = (8.0, 4.0)) -> None:
    """The studies' display settings: numpy's RuntimeWarnings off (NaN and division by zero
    at points that do not fit), figure size, resolution and font, three decimals in tables."""
    import warnings

    import matplotlib.pyplot as plt
    import pandas as pd

    warnings.filterwarnings("ignore", category=RuntimeWarning)
    plt.rcParams.update({"figure.figsize": figsize, "figure.dpi": 110, "font.size": 9})
    pd.set_option("display.precision", 3)


def esc(value) -> str:
    """`value` as text that Markdown and HTML show literally: no tag, entity, link, code span,
    emphasis or heading survives. For names and strings a user passes (parameters) that are
    put into md() text; `$` is left to md(). Line breaks become spaces (no new block)."""
    text = _NEWLINES.sub(" ", str(value))
    text = _UNDERSCORE.sub(r"\\_", _MARKDOWN_ACTIVE.sub(r"\\\1", text))
    return html.escape(text, quote=True)


def md(text: str) -> None:
    """Display Markdown computed from the data; a literal $ must not start LaTeX math.
    Values a user passes belong in it through esc()."""
    from IPython.display import Markdown, display

    display(Markdown(text.replace("$", "\\$")))


def fig_text(value) -> str:
    """`value` for matplotlib text (titles, labels): a `$` must not start mathtext."""
    return str(value).replace("$", "\\$")


def pct(x) -> str:
    """A signed percentage, `+12%`, or `n/a` when not finite."""
    return f"{x:+.0%}" if np.isfinite(x) else "n/a"


def drop_object_vars(ds):
    """`ds` without its object-typed variables (strings such as `bound` or `reason`), which
    netCDF cannot store."""
    return ds.drop_vars([v for v in ds.data_vars if ds[v].dtype == object])


def save_sweep(ds, output_dir: str) -> None:
    """Write `ds` to `<output_dir>/sweep.nc` (the runner sets output_dir; empty: nothing is
    written). Returns None, so as a cell's last line it adds no output to the report."""
    if output_dir:
        ds.to_netcdf(Path(output_dir) / "sweep.nc")
