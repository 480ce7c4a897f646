"""GEMM and memory-bound kernel costs on a GPU: roofline with tile/wave quantization and
size-dependent efficiency tables taken from kernel measurements.

C[m, n] = A[m, k] @ B[k, n]; FLOPs = 2·m·n·k. Pure array functions: every size argument
may be a float, an ndarray or a DataArray, and the result broadcasts by dimension name.
"""
from __future__ import annotations

import numpy as np

from ..errors import check_choice
from ..units import DTYPES
from .hardware_numbers import GpuNumbers

# Stream-K / split-K: when there are fewer output tiles than SMs, libraries split the K
# dimension so that every SM has work (CUTLASS stream-K, cuBLAS split-K). A split needs
# at least this much K per SM to pay for its partial-sum reduction.
MIN_K_PER_SPLIT = 256


def _tile_efficiency(*, tm, tn, sms, m, n, k):
    tiles_m, tiles_n = np.ceil(m / tm), np.ceil(n / tn)
    padding = (m * n) / (tiles_m * tm * tiles_n * tn)
    tiles = tiles_m * tiles_n
    # Stream-K shares the K loop evenly across SMs, so a split need not be whole; flooring
    # k / MIN_K_PER_SPLIT made k = 512 run twice as fast as k = 511.
    max_split = np.maximum(k / MIN_K_PER_SPLIT, 1.0)
    split = np.clip(np.floor(sms / tiles), 1.0, max_split)
    units = tiles * split
    waves = np.ceil(units / sms)
    return padding * units / (waves * sms)


_TILE_CHOICES = ((1.0, 1.0), (0.5, 1.0), (0.5, 0.5))  # the spec's tile and its halves
_SKINNY_TILE_M = 16.0  # the smallest tensor-core MMA, used for the skinny GEMMs of decode


def _tiles(hw: GpuNumbers):
    for fm, fn in _TILE_CHOICES:
        yield hw.gemm_tile_m * fm, hw.gemm_tile_n * fn
    yield _SKINNY_TILE_M, hw.gemm_tile_n / 2


def wave_efficiency(*, hw: GpuNumbers, m, n, k):
    """Fraction of the SM-time that does useful work: tile padding of m and n, times the
    tail of the last wave of (tile x K-split) work units across the SMs, for the best of
    the tiles a library would choose from."""
    best = None
    for tm, tn in _tiles(hw):
        e = _tile_efficiency(tm=tm, tn=tn, sms=hw.n_sms, m=m, n=n, k=k)
        best = e if best is None else np.maximum(best, e)
    return best


def gemm_compute_time(*, hw: GpuNumbers, m, n, k, dtype: str):
    """Seconds of tensor-core math for an m x n x k GEMM: for each tile choice, the
    executed work (2mnk / its wave efficiency: padding and the idle tail included) runs
    at the size ramp of that executed work; the fastest choice wins. Keying the ramp by
    executed rather than useful FLOPs keeps time non-decreasing in m, n and k."""
    flops = 2.0 * m * n * k
    best = None
    for tm, tn in _tiles(hw):
        executed = flops / _tile_efficiency(tm=tm, tn=tn, sms=hw.n_sms, m=m, n=n, k=k)
        t = executed / (hw.peak(dtype) * hw.gemm_peak_eff_for(dtype) * hw.gemm_eff(executed))
        best = t if best is None else np.minimum(best, t)
    return best


def memory_time(*, hw: GpuNumbers, nbytes):
    """Seconds to stream `nbytes` through main memory at the size-dependent efficiency."""
    bw = hw.hbm_bandwidth_bytes_per_s * hw.memory_eff(nbytes)
    return nbytes / bw


def gemm(*, hw: GpuNumbers, m, n, k, dtype: str = "bf16", a_bytes=2.0, b_bytes=2.0,
         c_bytes=2.0, count=1.0, grouped: bool = False) -> dict:
    """Cost of `count` identical GEMMs [m, k] x [k, n] -> [m, n].

    grouped=True is one grouped-GEMM kernel over `count` problems (the MoE experts): one
    launch, every problem's rows padded to the 16-row MMA, all tiles sharing the waves.

    a_bytes / b_bytes / c_bytes are bytes per element of the activation, the weight and
    the output (weights may be narrower than the math dtype: W4A16 reads 0.5 B/element).
    Returns compute_s, memory_s, time_s (the kernel's roofline time, max of the two),
    overhead_s (launch gaps, kept apart so a measured kernel time compares with time_s),
    flops and bytes, and compute_bound.
    """
    check_choice("dtype", dtype, DTYPES)  # a dtype the chip lacks is NaN time; an unknown one an error
    flops = 2.0 * m * n * k * count
    nbytes = (m * k * a_bytes + k * n * b_bytes + m * n * c_bytes) * count
    if grouped:
        rows = count * np.ceil(m / _SKINNY_TILE_M) * _SKINNY_TILE_M
        compute_s = gemm_compute_time(hw=hw, m=rows, n=n, k=k, dtype=dtype)
        overhead_s = hw.kernel_launch_s + 0.0 * count
    else:
        compute_s = gemm_compute_time(hw=hw, m=m, n=n, k=k, dtype=dtype) * count
        overhead_s = hw.kernel_launch_s * count
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    return {
        "flops": flops,
        "bytes": nbytes,
        "compute_s": compute_s,
        "memory_s": memory_s,
        "overhead_s": overhead_s,
        "time_s": np.maximum(compute_s, memory_s),
        "compute_bound": compute_s >= memory_s,
    }


def elementwise(*, hw: GpuNumbers, nbytes, count=1.0) -> dict:
    """A memory-bound kernel (norm, activation, residual add, rotary) moving `nbytes`."""
    memory_s = memory_time(hw=hw, nbytes=nbytes)
    overhead_s = hw.kernel_launch_s * count
    return {"bytes": nbytes, "memory_s": memory_s, "overhead_s": overhead_s, "time_s": memory_s}
