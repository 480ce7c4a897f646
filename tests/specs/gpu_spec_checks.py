"""Checks shared by the catalog tests of GPU specs read from datasheets
(test_blackwell_specs.py, test_more_gpu_specs.py)."""
from __future__ import annotations

from workbench.specs import HardwareSpec, list_gpus, load_hardware


def spec_value(hw: HardwareSpec, path: str) -> float:
    """'peak.<dtype>', 'hbm.capacity' or 'hbm.bandwidth' of a spec, SI."""
    kind, what = path.split(".")
    if kind == "peak":
        return float(hw.peak(what))
    return hw.hbm.capacity_bytes if what == "capacity" else hw.hbm.bandwidth_bytes_per_s


def check_gpu_spec(name: str, max_price_usd_per_hour: float) -> HardwareSpec:
    """The spec loads as a GPU of the catalog with a source, dense FLOP/s peaks and a price
    per device-hour (not per board or rack)."""
    hw = load_hardware(name)
    assert isinstance(hw, HardwareSpec) and hw.name == name and hw.vendor == "nvidia"
    assert name in list_gpus()
    assert hw.source.strip()
    assert all(isinstance(v, float) and v > 1e12 for v in hw.peak_flops_per_s.values())  # FLOP/s, dense
    assert 0 < hw.price_usd_per_hour < max_price_usd_per_hour
    return hw
