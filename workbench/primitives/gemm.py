"""GEMM and memory-bound kernel costs on a GPU: roofline with tile/wave quantization and
size-dependent efficiency tables taken from kernel measurements.

C[m, n] = A[m, k] @ B[k, n]; FLOPs = 2·m·n·k. Pure array functions: every size argument
may be a float, an ndarray or a DataArray, and the result broadcasts by dimension name.
"""
from __future__ import annotations

import numpy as np

from ..specs import HardwareSpec

# Stream-K / split-K: when there are fewer output tiles than SMs, libraries split the K
# dimension so that every SM has work (CUTLASS stream-K, cuBLAS split-K). A split needs
# at least this much K per SM to pay for its partial-sum reduction.
MIN_K_PER_SPLIT = 256

# Tile shapes tried besides the spec's (tm, tn): its halves, and a 16-row tile (the
# smallest tensor-core MMA, used for the skinny GEMMs of decode), as fractions / rows.
_TILE_CHOICES = (lambda tm, tn: (tm, tn), lambda tm, tn: (tm / 2, tn),
                 lambda tm, tn: (tm / 2, tn / 2), lambda tm, tn: (16.0, tn / 2))


def _tile_efficiency(*, tm, tn, sms, m, n, k):
    tiles_m, tiles_n = np.ceil(m / tm), np.ceil(n / tn)
    padding = (m * n) / (tiles_m * tm * tiles_n * tn)
    tiles = tiles_m * tiles_n
    # Stream-K shares the K loop evenly, so the split need not be whole; flooring k/256
    # made a GEMM with k = 512 twice as fast as one with k = 511.
    max_split = np.maximum(k / MIN_K_PER_SPLIT, 1.0)
    split = np.clip(np.floor(sms / tiles), 1.0, max_split)
    units = tiles * split
    waves = np.ceil(units / sms)
    return padding * units / (waves * sms)


def wave_efficiency(*, hw: HardwareSpec, m, n, k):
    """Fraction of the SM-time that does useful work: tile padding of m and n, times the
    tail of the last wave of (tile x K-split) work units across the SMs. Libraries pick
    the tile per shape, so the best of the spec's tile, its halves, and a 16-row tile
    (the smallest tensor-core MMA, used for the skinny GEMMs of decode) is taken."""
    effs = [_tile_efficiency(tm=tile_m, tn=tile_n, sms=hw.n_sms, m=m, n=n, k=k)
            for tile_m, tile_n in (c(hw.gemm_tile_m, hw.gemm_tile_n) for c in _TILE_CHOICES)]
    best = effs[0]
    for e in effs[1:]:
        best = np.maximum(best, e)
    return best


def gemm_compute_time(*, hw: HardwareSpec, m, n, k, dtype: str):
    """Seconds of tensor-core math for an m x n x k GEMM: the fastest tile choice, each
    running the FLOP slots it occupies (flops / its wave efficiency: tile padding and the
    idle tail of the last wave included) at the size ramp of that executed work.

    The ramp is keyed by executed work, not by 2·m·n·k: a kernel's time must not fall
    when m, n or k grows. Keyed by useful FLOPs, one more row inside the same tiles raised
    the efficiency without adding SM time (a 17-column GEMM ran 3.6x faster than a
    1-column one). For tile-aligned squares (the measured ramps) the two keys differ
    only by the last-wave tail (<= 3% on H100 at 1024^3)."""
    flops = 2.0 * m * n * k
    best = None
    for choice in _TILE_CHOICES:
        tile_m, tile_n = choice(hw.gemm_tile_m, hw.gemm_tile_n)
        executed = flops / _tile_efficiency(tm=tile_m, tn=tile_n, sms=hw.n_sms, m=m, n=n, k=k)
        t = executed / (hw.peak(dtype) * hw.gemm_peak_eff_for(dtype) * hw.gemm_eff(executed))
        best = t if best is None else np.minimum(best, t)
    return best


def gemm_compute_eff(*, hw: HardwareSpec, m, n, k, dtype: str):
    """Achieved fraction of the dtype's dense peak for an m x n x k GEMM."""
    flops = 2.0 * m * n * k
    return flops / (hw.peak(dtype) * gemm_compute_time(hw=hw, m=m, n=n, k=k, dtype=dtype))


def memory_time(*, hw: HardwareSpec, nbytes):
    """Seconds to stream `nbytes` through main memory at the size-dependent efficiency."""
    bw = hw.hbm.bandwidth_bytes_per_s * hw.memory_eff(nbytes)
    return nbytes / bw


def gemm(*, hw: HardwareSpec, m, n, k, dtype: str = "bf16", a_bytes=2.0, b_bytes=2.0,
         c_bytes=2.0, count=1.0) -> dict:
    """Cost of `count` identical GEMMs [m, k] x [k, n] -> [m, n].

    a_bytes / b_bytes / c_bytes are bytes per element of the activation, the weight and
    the output (weights may be narrower than the math dtype: W4A16 reads 0.5 B/element).
    Returns compute_s, memory_s, time_s (the kernel's roofline time, max of the two),
    overhead_s (launch gaps, kept apart so a measured kernel time compares with time_s),
    flops and bytes, and compute_bound.
    """
    flops = 2.0 * m * n * k * count
    nbytes = (m * k * a_bytes + k * n * b_bytes + m * n * c_bytes) * count
    compute_s = gemm_compute_time(hw=hw, m=m, n=n, k=k, dtype=dtype) * count
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    overhead_s = hw.kernel_launch_s * count
    return {
        "flops": flops,
        "bytes": nbytes,
        "compute_s": compute_s,
        "memory_s": memory_s,
        "overhead_s": overhead_s,
        "time_s": np.maximum(compute_s, memory_s),
        "compute_bound": compute_s >= memory_s,
    }


def elementwise(*, hw: HardwareSpec, nbytes, count=1.0) -> dict:
    """A memory-bound kernel (norm, activation, residual add, rotary) moving `nbytes`."""
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    overhead_s = hw.kernel_launch_s * count
    return {"bytes": nbytes, "memory_s": memory_s, "overhead_s": overhead_s, "time_s": memory_s}
