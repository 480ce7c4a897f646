"""Fit a chip's GEMM size ramp (spec field gemm_eff) from measured square GEMMs.

ramp(executed) = measured FLOP/s / (peak(dtype) · gemm_peak_eff(dtype) · wave_efficiency),
capped at 1, keyed by the executed work 2mnk / wave_efficiency (primitives/gemm.py). The spec YAML stores the result; tests/calibrate/test_gemm_ramp.py refits
it from the cited rows and checks the YAML matches, so the table's provenance is code.
"""
from __future__ import annotations

import numpy as np

from ..primitives.gemm import wave_efficiency
from ..backends import as_numbers
from ..specs import HardwareSpec

# Azure/AI-benchmarking-guide cuBLASLt square GEMMs, size -> TFLOP/s.
H100_FP8_SQUARES = {1024: 274.1, 2048: 1011.3, 4096: 1216.9, 8192: 1290.1, 16384: 1377.3}  # B08, B09
A100_FP16_SQUARES = {1024: 119.4, 2048: 221.8, 4096: 228.0, 8192: 253.7, 16384: 256.5}  # B11


def fit_ramp(hw: HardwareSpec, squares: dict, dtype: str) -> tuple[list, list]:
    """(sizes in FLOPs, ramp values) for measured square GEMMs {n: TFLOP/s}."""
    n = np.asarray(sorted(squares), dtype=float)
    measured = np.asarray([squares[int(x)] for x in n]) * 1e12
    wave = wave_efficiency(hw=as_numbers(hw), m=n, n=n, k=n)
    ramp = np.minimum(measured / (hw.peak(dtype) * hw.gemm_peak_eff_for(dtype) * wave), 1.0)
    return [float(f"{x:.4g}") for x in 2 * n**3 / wave], [round(float(r), 4) for r in ramp]
