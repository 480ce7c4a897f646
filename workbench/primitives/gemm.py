"""GEMM and memory-bound kernel costs on a GPU: roofline with tile/wave quantization and
size-dependent efficiency tables taken from kernel measurements.

C[m, n] = A[m, k] @ B[k, n]; FLOPs = 2·m·n·k. Pure array functions: every size argument
may be a float, an ndarray or a DataArray, and the result broadcasts by dimension name.
"""
from __future__ import annotations

import functools

import numpy as np

from ..errors import check_choice
from ..units import DTYPE_BYTES, DTYPES, FOUR_BIT_BYTES, SPARSE_2_4
from .hardware_numbers import GpuNumbers
from .gemm_work import wave_quantization, weight_passes
from .kernel_fits import attribute, served_time

_KNOWN = frozenset(DTYPES)

# Stream-K / split-K: when there are fewer output tiles than SMs, libraries split the K
# dimension so that every SM has work (CUTLASS stream-K, cuBLAS split-K). A split needs
# at least this much K per SM to pay for its partial-sum reduction.
MIN_K_PER_SPLIT = 256


def _tile_efficiency(*, tm, tn, sms, m, n, k):
    # an empty GEMM (m or n = 0: no prompt tokens in an iteration) has no tiles and no time;
    # it counts as one unpadded tile, so its time is 0 FLOPs at a finite rate, not 0 / 0
    tiles_m, tiles_n = np.maximum(np.ceil(m / tm), 1.0), np.maximum(np.ceil(n / tn), 1.0)
    padding = np.where(m * n > 0.0, m * n / (tiles_m * tm * tiles_n * tn), 1.0)
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


def gemm_variant(dtype: str, b_bytes) -> str:
    """The measured table a GEMM reads: its math dtype ('fp8': per-tensor scaled W8A8), or
    'int4' for 16-bit math on 4-bit weights (W4A16 weight-only: INT4, or FP4 weights as
    gpt-oss's MXFP4 experts run on a chip without FP4 math); other weight-only formats
    have no table ("")."""
    b = np.asarray(b_bytes, float)
    if np.all(b >= DTYPE_BYTES[dtype]):
        return dtype
    four_bit = np.isin(b, FOUR_BIT_BYTES)
    return "int4" if dtype in ("bf16", "fp16") and np.all(four_bit) else ""


# A 2:4-sparse GEMM's speedup over its dense GEMM, as a share of the datasheet's sparse
# peak ratio (2x): torchao's semi-structured sparsity benchmark on A100 FP16, ViT-L MLP
# shapes (m, k, n) = (13008, 1024, 4096) and (13008, 4096, 1024): 1.24x and 1.27x over
# dense (pytorch/ao torchao/sparsity/training/README.md), mean 1.255 / 2. One measured
# constant, carried over to every chip and format (no other public sparse GEMM table).
SPARSE_GEMM_EFFICIENCY = 1.255 / 2.0


def sparse_speed(hw: GpuNumbers, dtype: str):
    """(math dtype, speedup of its compute over dense): a 2:4 weights format (units.SPARSE_2_4)
    runs its dense format's math at the chip's sparse_2_4_speedup x SPARSE_GEMM_EFFICIENCY
    (NaN where the chip has no sparse tensor cores for it); any other dtype at 1."""
    if dtype not in SPARSE_2_4:
        return dtype, 1.0
    math = SPARSE_2_4[dtype]
    return math, hw.sparse_speedup_for(math) * SPARSE_GEMM_EFFICIENCY


# A scaled format's GEMM table whose fixed latency is more than HOST_BOUND_FACTOR times that
# of the same framework's table of its tensor-core math holds host time, not kernel time:
# vLLM's block-FP8 tables carry 47-240 us (workbench/specs/kernels/*-vllm.json, score.fixed_s)
# against 2-4 us for its FP8 tables on the same chips, and the same DeepGEMM block-FP8 kernel
# keeps 3.6-4.0 us under SGLang and TensorRT-LLM: the host side of vLLM's Python call path
# (per-call activation quantization and scale layout), which the CUDA graph of a served decode
# iteration replays without. Every other table is within 3x of its math's (TensorRT-LLM's
# FP8, 10.5 us with its activation quantization, against its block-FP8's 4.0 us). A served
# GEMM reads the math's table instead (block-FP8 runs the FP8 MMA; its scales are 1/16384 of
# the weight bytes).
HOST_BOUND_FACTOR = 4.0
# The tensor-core math of a scaled format, whose table stands in for a host-bound one.
SCALED_FORMAT_MATH = {"fp8_block": "fp8"}
# Formats whose tables time the Linear on a 16-bit input, its quantization included
# (aiconfigurator's collectors call Linear.forward on a BF16 tensor: TensorRT-LLM's
# collect_gemm.py for fp8, fp8_block and nvfp4).
QUANTIZED_INPUT = ("fp8", "fp8_block", "fp4")


def host_bound_table(fixed_s, math_fixed_s):
    """Whether a scaled format's table (fixed latency `fixed_s`) holds host time: over
    HOST_BOUND_FACTOR x the fixed latency of its framework's table of the same math."""
    return np.asarray(fixed_s) > HOST_BOUND_FACTOR * np.asarray(math_fixed_s)


def _served_surface(hw: GpuNumbers, variant: str):
    """(grid, fixed_s, passes, wave_tile) of the GEMM table a served iteration reads
    (HOST_BOUND_FACTOR); passes: its row tile and pass cap (gemm_work.weight_passes);
    wave_tile: its output tile where it leaves a wave tail (gemm_work.wave_quantization)."""
    grid, fixed_s = hw.fitted("gemm", variant)
    if grid is not None and variant in SCALED_FORMAT_MATH:
        alt, alt_fixed_s = hw.fitted("gemm", SCALED_FORMAT_MATH[variant])
        if alt is not None and host_bound_table(fixed_s, alt_fixed_s):
            grid, fixed_s, variant = alt, alt_fixed_s, SCALED_FORMAT_MATH[variant]
    param = functools.partial(hw.fitted_param, "gemm", variant)
    return grid, fixed_s, (param("tile_m"), param("max_passes")), (param("wave_tile_m"), param("wave_tile_n"))


def fitted_gemm(*, hw: GpuNumbers, m, n, k, dtype, a_bytes, b_bytes, c_bytes):
    """(compute_s, memory_s, time_s) of one GEMM from the framework's fitted surface: each
    roofline term over the efficiency of the shape, plus the table's fixed latency; None
    where the numbers carry no surface for this GEMM. A 2:4-sparse GEMM reads the dense
    format's surface, its compute term divided by the sparse speedup (sparse_speed)."""
    math, speed = sparse_speed(hw, dtype)
    variant = math if dtype in SPARSE_2_4 else gemm_variant(dtype, b_bytes)
    if variant == "fp16" and _served_surface(hw, "fp16")[0] is None:
        # FP16 and BF16 share the tensor cores' datapath and peak (every NVIDIA GPU since
        # Ampere); the frameworks' tables time BF16, so FP16 takes its surface (as attention
        # does, kernel_tables.surface_name) at the chip's FP16 peak, not the analytical model
        variant = "bf16"
    grid, fixed_s, passes, wave_tile = _served_surface(hw, variant)
    if grid is None:
        return None
    if hw.fused_input_quant and variant in QUANTIZED_INPUT:  # the input arrives quantized: no quantize kernel
        plain, plain_fixed_s = hw.fitted("gemm", "bf16")
        fixed_s = fixed_s if plain is None else np.minimum(fixed_s, plain_fixed_s)
    eff = grid(m=m, n=n, k=k)  # kernel_fits.gemm_roofline's coordinates
    compute_ideal = 2.0 * m * n * k * wave_quantization(m, n, *wave_tile, hw.n_sms) / (hw.peak(math) * speed)
    memory_ideal = (m * k * a_bytes + weight_passes(m, *passes) * k * n * b_bytes
                    + m * n * c_bytes) / hw.hbm_bandwidth_bytes_per_s
    roof = np.maximum(compute_ideal, memory_ideal)
    table_s = fixed_s + roof / eff
    # never below the physical roofline: every FLOP at the peak, every operand moved once at
    # the memory's rate (a surface's efficiency over 1 past its last knot, against the
    # quantized roofline, put A100 BF16 at 354 TFLOP/s of 312 and B300 reads at 9.9 of 8 TB/s)
    floor = np.maximum(2.0 * m * n * k / (hw.peak(math) * speed),
                       (m * k * a_bytes + k * n * b_bytes + m * n * c_bytes) / hw.hbm_bandwidth_bytes_per_s)
    # the floor, not the modelled roof: its wave tail and weight passes are the fit's shape,
    # not a bound a measured kernel cannot beat (served_time never goes below what it is given)
    time_s = served_time(table_s, floor, hw.graph_saving_s)
    return (*attribute(time_s, compute_ideal, memory_ideal), time_s)


def gemm(*, hw: GpuNumbers, m, n, k, dtype: str = "bf16", a_bytes=2.0, b_bytes=2.0,
         c_bytes=2.0, count=1.0, grouped: bool = False) -> dict:
    """Cost of `count` identical GEMMs [m, k] x [k, n] -> [m, n].

    grouped=True is one grouped-GEMM kernel over `count` problems (the MoE experts): one
    launch, every problem's rows padded to the 16-row MMA, all tiles sharing the waves.

    a_bytes / b_bytes / c_bytes are bytes per element of the activation, the weight and
    the output (weights may be narrower than the math dtype: W4A16 reads 0.5 B/element).
    A 2:4 weights `dtype` ('bf16_2:4', units.SPARSE_2_4) runs the dense format's math on
    the sparse tensor cores (sparse_speed), b_bytes the compressed weights'.
    With a serving framework's measured tables (hw.kernels), the time is the fitted
    surface's (roofline over the efficiency of the shape, its fixed latency included, so
    overhead_s is 0); a grouped GEMM runs as one GEMM of count·n columns. Without tables: tile/wave-quantized compute at the
    spec's size ramp and the memory stream at its size efficiency.
    Returns compute_s, memory_s, time_s (the kernel's time), overhead_s (launch gaps, kept
    apart so a measured kernel time compares with time_s), flops and bytes, compute_bound.
    """
    if dtype not in _KNOWN:
        check_choice("dtype", dtype, DTYPES)  # a dtype the chip lacks is NaN time; an unknown one an error
    flops = 2.0 * m * n * k * count
    nbytes = (m * k * a_bytes + k * n * b_bytes + m * n * c_bytes) * count
    # a grouped GEMM streams every expert's weights in one kernel: it runs as one GEMM with
    # the experts' columns side by side (m tokens per expert, count·n columns, k)
    n_fit = n * count if grouped else n
    fit = fitted_gemm(hw=hw, m=m, n=n_fit, k=k, dtype=dtype, a_bytes=a_bytes, b_bytes=b_bytes, c_bytes=c_bytes)
    if fit is not None:
        compute_s, memory_s, time_s = fit
        if not grouped:
            compute_s, memory_s, time_s = compute_s * count, memory_s * count, time_s * count
        return {"flops": flops, "bytes": nbytes, "compute_s": compute_s, "memory_s": memory_s,
                "overhead_s": 0.0 * time_s, "time_s": time_s, "compute_bound": compute_s >= memory_s}

    math, speed = sparse_speed(hw, dtype)
    if grouped:
        rows = count * np.ceil(m / _SKINNY_TILE_M) * _SKINNY_TILE_M
        compute_s = gemm_compute_time(hw=hw, m=rows, n=n, k=k, dtype=math) / speed
        overhead_s = hw.kernel_launch_s + 0.0 * count
    else:
        compute_s = gemm_compute_time(hw=hw, m=m, n=n, k=k, dtype=math) / speed * count
        overhead_s = hw.kernel_launch_s * count
    # at least one round trip to memory: a 1 x 1 x 1 GEMM took 3 ns where every table's
    # smallest GEMM takes microseconds
    memory_s = np.maximum(memory_time(hw=hw, nbytes=nbytes), hw.memory_latency_s * (1.0 if grouped else count))
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
