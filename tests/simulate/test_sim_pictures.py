"""The "where is the wafer idle" views of one run (workbench/simulate/pictures.py): the numbers
they draw are the run's, and they draw without pyplot state."""
from __future__ import annotations

import numpy as np

from workbench.simulate import busy_heatmap, link_map, run, where_idle
from workbench.simulate.pictures import link_shares


def test_link_shares_are_words_over_cycles_the_busier_way():
    r = run("gemv", "mesh", P=8, k=96, n=96)
    hor, ver = link_shares(r)
    assert hor.shape == (8, 7) and ver.shape == (7, 8)
    # the K-tree and its broadcast run along columns: no word crosses a row's links
    assert hor.max() == 0.0 and ver.max() > 0.0
    down, up = r.link_words[:-1, :, 2], r.link_words[1:, :, 0]
    np.testing.assert_allclose(ver, np.maximum(down, up) / r.cycles)


def test_the_figures_carry_the_run():
    r = run("gemm", "gpu_style", P=4, m=16, k=16, n=16)
    fig = where_idle(r)
    assert len(fig.axes) == 4  # two panels, two colour bars
    heat = busy_heatmap(r).axes[0].images[0].get_array()
    np.testing.assert_allclose(heat, r.busy_cycles / r.cycles)
    lines = link_map(r).axes[0].collections[0]
    assert len(lines.get_segments()) == 2 * 4 * 3  # every link between neighbours
