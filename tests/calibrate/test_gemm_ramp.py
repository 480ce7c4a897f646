"""The GEMM size ramps stored in the hardware YAMLs are what calibrate.gemm_ramp fits from
the cited kernel rows (B08/B09 for Hopper-class chips, B11 for A100)."""
from __future__ import annotations

import pytest

from workbench.calibrate.gemm_ramp import A100_FP16_SQUARES, H100_FP8_SQUARES, fit_ramp
from workbench.calibrate.measurements import row
from workbench.specs import load_hardware


@pytest.mark.parametrize("hardware,squares,dtype", [
    ("h100_sxm", H100_FP8_SQUARES, "fp8"), ("a100_sxm", A100_FP16_SQUARES, "fp16")])
def test_yaml_ramp_is_the_fit(hardware, squares, dtype):
    hw = load_hardware(hardware)
    sizes, eff = fit_ramp(hw, squares, dtype)
    assert list(hw.gemm_eff.size) == pytest.approx(sizes, rel=1e-3)
    assert list(hw.gemm_eff.eff) == pytest.approx(eff, abs=1e-4)


def test_sweep_constants_match_the_reference_rows():
    # B09 is the 1024^3 row, B08 the 8192^3 row; B11 the A100 8192^3 row.
    assert H100_FP8_SQUARES[1024] == row("B09")["value"]
    assert H100_FP8_SQUARES[8192] == row("B08")["value"]
    assert A100_FP16_SQUARES[8192] == row("B11")["value"]


def test_hopper_class_chips_share_the_h100_ramp():
    # H200 is the H100 die (A16 notes); B200 and MI300X borrow it as a stated assumption.
    ref = load_hardware("h100_sxm").gemm_eff
    for name in ("h200_sxm", "b200", "mi300x"):
        assert load_hardware(name).gemm_eff.eff == ref.eff
