"""The roofline of a GEMM as the fitted GEMM surfaces read it (kernel_fits.ROOFLINES["gemm"];
fitted by calibrate/kernel_fit.py, evaluated by primitives/gemm.py): FLOPs over the peak, or
the bytes of its operands over the HBM bandwidth, the weights read as many times as the
kernel's row tiles make it (weight_passes).

Self-contained (numpy only) so that kernel_fits can register this roofline without an
import cycle.
"""
from __future__ import annotations

import numpy as np


def weight_passes(m, tile_m=0.0, max_passes=0.0):
    """HBM reads of a GEMM's [k, n] operand: one, or one per tile of tile_m rows of [m, k] up
    to max_passes, for a kernel holding a row tile against all of [k, n] (the tiles running
    together miss in L2). Hopper's block-FP8 GEMM: 34 -> 60 us at m = 128 -> 129 (TensorRT-LLM,
    H100, n = k = 8192); calibrate/kernel_fit.py picks tile and cap per table."""
    t, cap = np.asarray(tile_m, float), np.asarray(max_passes, float)
    if not np.any(t > 0):
        return 1.0
    passes = np.minimum(np.ceil(m / np.where(t > 0, t, 1.0)), np.where(cap > 0, cap, np.inf))
    return np.where(t > 0, passes, 1.0)


def gemm_roofline(*, m, n, k, peak, bandwidth, a_bytes, b_bytes, c_bytes, tile_m=0.0, max_passes=0.0, **_):
    flops = 2.0 * m * n * k
    nbytes = m * k * a_bytes + weight_passes(m, tile_m, max_passes) * k * n * b_bytes + m * n * c_bytes
    return np.maximum(flops / peak, nbytes / bandwidth), {"m": m, "n": n, "k": k}
