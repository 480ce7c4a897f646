"""The roofline of a GEMM as the fitted GEMM surfaces read it (kernel_fits.ROOFLINES["gemm"];
fitted by calibrate/kernel_fit.py, evaluated by primitives/gemm.py): FLOPs over the peak, or
the bytes of its operands over the HBM bandwidth, the weights read as many times as the
kernel's row tiles make it (weight_passes), the math stretched to whole waves of output tiles
where the kernel runs fixed tiles (wave_quantization).

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


def wave_quantization(m, n, wave_tile_m=0.0, wave_tile_n=0.0, n_sms=0.0):
    """Factor (>= 1) on a GEMM's math time for a kernel that runs fixed output tiles of
    wave_tile_m x wave_tile_n, one per SM at a time: beyond one wave the last, partly filled
    wave takes as long as a full one (tiles over SMs rounded up, times SMs, over tiles).
    Within one wave it is 1 (the fitted size ramp holds the under-filled SMs, and split-K
    fills them). 1 where no tile is given (stream-K kernels share the tail; most Hopper and
    Blackwell tables fit best without it). cuBLAS BF16 on A100 (SGLang's table, n = k = 4096):
    112 us at m = 768 (96 tiles of 128 x 256 on 108 SMs), 218 us at m = 769 (112 tiles: two
    waves); calibrate/kernel_fit.py picks the tile per table."""
    tm, tn, sms = (np.asarray(v, float) for v in (wave_tile_m, wave_tile_n, n_sms))
    if not np.any((tm > 0) & (sms > 0)):
        return 1.0
    tiles = np.ceil(m / np.where(tm > 0, tm, 1.0)) * np.ceil(n / np.where(tn > 0, tn, 1.0))
    s = np.where(sms > 0, sms, 1.0)
    # a GEMM of no rows (a part masked to zero tokens) has no tiles: factor 1, not 0 / 0
    return np.where((tm > 0) & (sms > 0) & (tiles > s), np.ceil(tiles / s) * s / np.maximum(tiles, 1.0), 1.0)


def gemm_roofline(*, m, n, k, peak, bandwidth, a_bytes, b_bytes, c_bytes, tile_m=0.0, max_passes=0.0,
                  wave_tile_m=0.0, wave_tile_n=0.0, n_sms=0.0, **_):
    flops = 2.0 * m * n * k * wave_quantization(m, n, wave_tile_m, wave_tile_n, n_sms)
    nbytes = m * k * a_bytes + weight_passes(m, tile_m, max_passes) * k * n * b_bytes + m * n * c_bytes
    return np.maximum(flops / peak, nbytes / bandwidth), {"m": m, "n": n, "k": k}
