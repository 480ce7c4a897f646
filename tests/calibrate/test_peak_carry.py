"""The achievable GEMM rate carried from a measured chip to one without a MAMF row through
their measured kernel tables (calibrate/peak_carry.py): reproduced on the one pair where both
chips were measured, and the specs' carried values are what the rule gives."""
from __future__ import annotations

import pytest

from workbench.calibrate.measurements import row
from workbench.calibrate.peak_carry import carried_gemm_peak_eff
from workbench.specs import load_hardware


@pytest.mark.parametrize("dtype,mamf_row,peak_tflops", [("fp8", "B06", 1979.0), ("bf16", "B01", 989.0)])
def test_h200_from_h100_reproduces_its_measured_mamf(dtype, mamf_row, peak_tflops):
    """H200's FP8 MAMF (B06: 1453.4 of 1979 TFLOP/s, 0.734) and BF16 (as H100's, 0.803) from
    H100's through the two chips' TensorRT-LLM GEMM surfaces: within 2% (0.723 and 0.801)."""
    measured = load_hardware("h200_sxm").gemm_peak_eff_for(dtype)
    if dtype == "fp8":  # the spec's value is its cited row's
        assert measured == pytest.approx(row(mamf_row)["value_si"] / (peak_tflops * 1e12), abs=0.001)
    assert carried_gemm_peak_eff("h200_sxm", "h100_sxm", dtype) == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("hardware", ["b300", "gb200", "gb300"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_the_specs_carry_b200s_mamf_through_the_tables(hardware, dtype):
    assert load_hardware(hardware).gemm_peak_eff_for(dtype) == pytest.approx(
        carried_gemm_peak_eff(hardware, "b200", dtype), abs=0.0015)


def test_gb300_is_carried_above_gb200_though_their_datasheets_match():
    gb200, gb300 = load_hardware("gb200"), load_hardware("gb300")
    for dtype in ("bf16", "fp8"):
        assert gb300.peak(dtype) == gb200.peak(dtype)
        assert gb300.gemm_peak_eff_for(dtype) > 1.1 * gb200.gemm_peak_eff_for(dtype)
