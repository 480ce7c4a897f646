"""The wafer software costs stored in wse2.yaml are what calibrate.wafer_fit derives from
the cited WaferLLM kernel rows (C026 prefill at 480x480, C074 decode at 420x420)."""
from __future__ import annotations

import pytest

from workbench.calibrate.measurements import wse_row
from workbench.calibrate.wafer_fit import fit_software_costs, per_layer_cycles_from_tpr
from workbench.specs import load_hardware


def test_yaml_software_costs_are_the_fit():
    w = load_hardware("wse2")
    c, beta = fit_software_costs(w, wse_row("C025")["value"], wse_row("C073")["value"])
    assert w.map_call_cycles == pytest.approx(c, abs=0.01)
    assert w.stage_cycles == pytest.approx(beta, abs=0.1)


def test_per_layer_cycles_match_the_derived_rows():
    # C026 / C074 are the CSV's own DERIVED per-layer cycles: 4096/TPR * 1.1e9 / 32, 1.1e9/(TPR*32)
    assert per_layer_cycles_from_tpr(wse_row("C025")["value"], 4096) == pytest.approx(wse_row("C026")["value"], rel=1e-4)
    assert per_layer_cycles_from_tpr(wse_row("C073")["value"]) == pytest.approx(wse_row("C074")["value"], rel=1e-4)


def test_software_costs_are_physical():
    """beta is tens of cycles (a task switch plus an add, against a 1-cycle hop); a @map
    call costs a few cycles more than the vector op it issues."""
    w = load_hardware("wse2")
    assert 10 < w.stage_cycles < 200
    assert 1 < w.map_call_cycles < 50
