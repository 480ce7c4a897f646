"""The measured module tables' common reading (the DSA, DeepSeek-V4 and MiniMax-M3 attention
blocks, DeepSeek-V4's hyper-connections: primitives/dsa.py, dsv4.py, msa.py): the fitted
sources of one variant, the least table time over them, and a block's named parts from its
table time, roofline and closed-form work."""
from __future__ import annotations

import numpy as np

from .hardware_numbers import GpuNumbers
from .kernel_fits import attribute, served_time


def module_sources(hw: GpuNumbers, kernel_class: str, variant: str | None) -> list:
    """(grid, fixed_s) of every fitted source of `variant` in `kernel_class` (the default one
    and any '<variant>@<source>'); empty without kernel tables or a variant."""
    if hw.kernels is None or variant is None:
        return []
    return [hw.fitted(kernel_class, v) for (c, v) in hw.kernels.grids
            if c == kernel_class and v.split("@")[0] == variant]


def least_table_time(sources, roof, coords):
    """The least table time, fixed_s + roof / efficiency at `coords`, over several sources of
    one variant (as the MoE layer); None without sources."""
    table_s = None
    for grid, fixed_s in sources:
        t = fixed_s + roof / grid(**coords)
        table_s = t if table_s is None else np.minimum(table_s, t)
    return table_s


def module_block(*, hw: GpuNumbers, sources, parts, peaks: dict, roof, coords, kernels: float) -> dict:
    """Named parts of a block the tables time whole: its time the least over `sources` at the
    roofline `roof` and its `coords`, less the CUDA-graph saving of its `kernels` launches
    (served_time); split into compute and memory by the ideal times of its closed-form
    `parts` ((flops, bytes) a part, each part's FLOPs at its peak of `peaks`, the bytes at
    the HBM bandwidth)."""
    bw = hw.hbm_bandwidth_bytes_per_s
    compute_ideal = sum(f / p for (f, _), p in zip(parts, peaks.values()))
    memory_ideal = sum(b for _, b in parts) / bw
    time_s = served_time(least_table_time(sources, roof, coords), roof, kernels * hw.graph_saving_s)
    compute_s, memory_s = attribute(time_s, compute_ideal, memory_ideal)
    return {"flops": sum(f for f, _ in parts), "bytes": memory_ideal * bw, "compute_s": compute_s,
            "memory_s": memory_s, "overhead_s": 0.0 * time_s, "time_s": time_s,
            "compute_bound": compute_ideal >= memory_ideal}
