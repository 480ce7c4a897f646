"""Where the wafer is idle, for one simulated run (machine.SimResult): a per-PE heatmap of
the cycles each compute engine was busy, and a map of how busy each link was.

Each function takes an optional matplotlib `ax` and returns the Figure; without `ax` a new
`matplotlib.figure.Figure` is made directly (no pyplot state), as workbench.plots does.
"""
from __future__ import annotations

import numpy as np

from .machine import SimResult


def _axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    return fig, fig.add_subplot()


def link_shares(r: SimResult) -> tuple[np.ndarray, np.ndarray]:
    """Share of the run's cycles each link carried a word, the busier direction of the two:
    (horizontal links (H, W - 1), between x and x + 1; vertical links (H - 1, W), between y
    and y + 1)."""
    cyc = max(r.cycles, 1)
    words = r.link_words / cyc  # (H, W, 4): N, E, S, W
    horizontal = np.maximum(words[:, :-1, 1], words[:, 1:, 3])
    vertical = np.maximum(words[:-1, :, 2], words[1:, :, 0])
    return horizontal, vertical


def busy_heatmap(r: SimResult, *, ax=None, title: str | None = None):
    """Cycles each PE's compute engine was busy (compute, adds, software stages, streaming)
    over the run, as a share of its cycles."""
    fig, ax = _axes(ax, (4.2, 3.6))
    share = r.busy_cycles / max(r.cycles, 1)
    im = ax.imshow(share, cmap="viridis", vmin=0.0, vmax=1.0, origin="upper", interpolation="nearest")
    fig.colorbar(im, ax=ax, shrink=0.85, label="busy share of the run")
    ax.set_xlabel("PE column x")
    ax.set_ylabel("PE row y")
    ax.set_title(title or f"{r.program}: CE busy {r.utilization:.0%} of {r.cycles:,} cycles", fontsize=9)
    return fig


def link_map(r: SimResult, *, ax=None, title: str | None = None):
    """Each link between two PEs as a segment coloured by the share of the run's cycles it
    carried a word (the busier direction); grey: a link that carried nothing."""
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection
    from matplotlib.colors import Normalize
    fig, ax = _axes(ax, (4.2, 3.6))
    hor, ver = link_shares(r)
    H, W = r.height, r.width
    ys, xs = np.mgrid[0:H, 0:W - 1]
    seg_h = np.stack([np.stack([xs, ys], -1), np.stack([xs + 1, ys], -1)], -2).reshape(-1, 2, 2)
    ys, xs = np.mgrid[0:H - 1, 0:W]
    seg_v = np.stack([np.stack([xs, ys], -1), np.stack([xs, ys + 1], -1)], -2).reshape(-1, 2, 2)
    segs = np.concatenate([seg_h, seg_v]).astype(float)
    vals = np.concatenate([hor.ravel(), ver.ravel()])
    top = max(float(vals.max()) if vals.size else 0.0, 1e-9)
    norm = Normalize(0.0, top)
    cmap = colormaps["plasma"]
    colors = np.where((vals > 0)[:, None], cmap(norm(vals)), (0.85, 0.85, 0.85, 1.0))
    width = max(0.6, 40.0 / max(H, W))
    ax.add_collection(LineCollection(segs, colors=colors, linewidths=width))
    ax.set_xlim(-0.5, W - 0.5)
    ax.set_ylim(H - 0.5, -0.5)
    ax.set_aspect("equal")
    from matplotlib.cm import ScalarMappable
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.85, label="share of cycles carrying a word")
    ax.set_xlabel("PE column x")
    ax.set_ylabel("PE row y")
    ax.set_title(title or f"{r.program}: links, busiest {top:.0%} of the run", fontsize=9)
    return fig


def where_idle(r: SimResult, *, figsize=(8.6, 3.6)):
    """The two views side by side: compute engines and links."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    a, b = fig.subplots(1, 2)
    busy_heatmap(r, ax=a)
    link_map(r, ax=b)
    fig.tight_layout()
    return fig
