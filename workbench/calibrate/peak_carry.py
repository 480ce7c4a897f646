"""A chip's achievable GEMM rate (spec field gemm_peak_eff) carried over from a measured chip
of its family through their measured kernel tables, not through their datasheets.

gemm_peak_eff is the maximum achievable matmul rate (MAMF, measured rows B01-B07, B15-B20) over
the datasheet dense peak. Where a chip has no MAMF row (GB300, from GB200), copying the
reference's ratio assumes the datasheets scale as the silicon does; they do not: NVIDIA's rack
figures give GB300 and GB200 the same dense FP8 and BF16 peaks, while their TensorRT-LLM GEMM
tables (aiconfigurator-core, fitted in specs/kernels) run the same large shapes 14-17% faster on
GB300, and Megatron-Bridge's Llama-3-8B FP8 recipe ran 19% faster (measurements NM09, NM17).
The rule: eff_chip = eff_ref x (rate_chip / rate_ref) x (peak_ref / peak_chip), the rates the
median over LARGE_SHAPES of the framework's fitted GEMM surface (predict.gemm). Checked on the
pairs with both MAMF rows measured (tests/calibrate/test_peak_carry.py): H200 from H100 gives
0.723 FP8 and 0.801 BF16 against the measured 0.734 and 0.803; from B200, B300 gets 0.791 BF16
and 0.802 FP8 against 0.786 and 0.745 (B15, B16), GB200 0.744 and 0.743 against 0.729 and
0.723 (B17, B18): within 8%, the rule's error where no MAMF row exists.
"""
from __future__ import annotations

import numpy as np

LARGE_SHAPES = (4096, 8192, 16384)  # m, n and k each: compute-bound on every chip of the catalog


def median_rate(hardware: str, dtype: str, framework: str = "trtllm") -> float:
    """Median FLOP/s of the framework's GEMM surface over LARGE_SHAPES^3 on `hardware`."""
    import xarray as xr

    from .. import predict
    sizes = {d: xr.DataArray(list(LARGE_SHAPES), dims=d) for d in ("m", "n", "k")}
    return float(predict.gemm(hardware=hardware, dtype=dtype, framework=framework, **sizes).flops_per_s.median())


def carried_gemm_peak_eff(hardware: str, reference: str, dtype: str, framework: str = "trtllm") -> float:
    """gemm_peak_eff of `hardware` for `dtype` from the reference chip's measured one, scaled
    by the two chips' measured GEMM rates over their datasheet peaks."""
    from ..specs import load_hardware
    ref, chip = load_hardware(reference), load_hardware(hardware)
    rate = median_rate(hardware, dtype, framework) / median_rate(reference, dtype, framework)
    return float(np.round(ref.gemm_peak_eff_for(dtype) * rate * ref.peak(dtype) / chip.peak(dtype), 3))
