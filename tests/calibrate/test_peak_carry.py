"""The achievable GEMM rate carried from a measured chip to one without a MAMF row through
their measured kernel tables (calibrate/peak_carry.py): reproduced on the pairs where both
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


@pytest.mark.parametrize("hardware,dtype,mamf_row,peak_tflops,tolerance", [
    ("b300", "bf16", "B15", 2250.0, 0.01), ("b300", "fp8", "B16", 4500.0, 0.08),
    ("gb200", "bf16", "B17", 2500.0, 0.03), ("gb200", "fp8", "B18", 5000.0, 0.03)])
def test_blackwell_mamf_held_out_from_b200(hardware, dtype, mamf_row, peak_tflops, tolerance):
    """B300's and GB200's MAMF rows (stas00/ml-engineering, 2026 version) were measured after the
    carry rule was set from B200's (B03, B07): the rule gives B300 0.791 BF16 and 0.802 FP8
    against the measured 0.786 and 0.745 (+0.6%, +7.6%), GB200 0.744 and 0.743 against 0.729 and
    0.723 (+2.0%, +2.8%). The specs now hold the measured values."""
    measured = row(mamf_row)["value_si"] / (peak_tflops * 1e12)
    assert load_hardware(hardware).gemm_peak_eff_for(dtype) == pytest.approx(measured, abs=0.001)
    carried = carried_gemm_peak_eff(hardware, "b200", dtype)
    assert carried == pytest.approx(measured, rel=tolerance)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_gb300_carries_gb200s_mamf_through_the_tables(dtype):
    assert load_hardware("gb300").gemm_peak_eff_for(dtype) == pytest.approx(
        carried_gemm_peak_eff("gb300", "gb200", dtype), abs=0.0015)


def test_gb300_is_carried_above_gb200_though_their_datasheets_match():
    gb200, gb300 = load_hardware("gb200"), load_hardware("gb300")
    for dtype in ("bf16", "fp8"):
        assert gb300.peak(dtype) == gb200.peak(dtype)
        assert gb300.gemm_peak_eff_for(dtype) > 1.1 * gb200.gemm_peak_eff_for(dtype)


@pytest.mark.parametrize("hardware,dtype,mamf_row,peak_tflops", [
    ("a100_pcie", "bf16", "B19", 312.0), ("mi300x", "bf16", "B20", 1307.4), ("gh200", "bf16", "B23", 989.4),
    ("gh200", "fp8", "B24", 1978.9), ("mi325x", "bf16", "B26", 1307.4), ("mi355x", "bf16", "B27", 2516.6),
    ("gaudi2", "bf16", "B29", 432.5), ("gaudi2", "fp8", "B30", 865.0), ("gaudi3", "bf16", "B31", 1677.7),
    ("gaudi3", "fp8", "B32", 1677.7)])
def test_measured_mamf_rows_set_the_spec(hardware, dtype, mamf_row, peak_tflops):
    """A100 PCIe (B19: 252.9 of 312, below the SXM part's 0.869 on the same die), MI300X
    (B20: 668.4 of 1307.4 TFLOP/s under ROCm 6.3; 0.70 was assumed before), GH200 (B23/B24:
    the 900 W module above the 700 W H100/H200 on the same die), MI325X (B26: 784.9 of 1307.4
    at 1000 W), MI355X (B27: 1565.0 of its 2516.6, AMD's 2.5 PFLOPS dense BF16) and Gaudi 2 and 3
    (B29-B32: 0.97 / 0.96 and 0.74 / 0.77 of their MME peaks)."""
    assert load_hardware(hardware).gemm_peak_eff_for(dtype) == pytest.approx(
        row(mamf_row)["value_si"] / (peak_tflops * 1e12), abs=0.001)
