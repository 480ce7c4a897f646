"""Spec catalog: one YAML file per chip and per model, loaded into frozen dataclasses.

A new chip or model is a new YAML file in `hardware/` or `models/`; nothing else changes.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from ._base import SpecError, build, read_yaml
from .hardware import EfficiencyTable, HardwareSpec, Link, MemoryTier, hardware_from_dict
from .model import ModelSpec
from .wafer import SystemSpec, WaferSpec, wafer_from_dict

_HERE = Path(__file__).parent
HARDWARE_DIR = _HERE / "hardware"
MODELS_DIR = _HERE / "models"

__all__ = ["EfficiencyTable", "HardwareSpec", "Link", "MemoryTier", "ModelSpec", "SpecError",
           "SystemSpec", "WaferSpec", "list_gpus", "list_hardware", "list_models", "list_wafers",
           "load_hardware", "load_model", "is_wafer"]


def list_hardware() -> list[str]:
    """Every hardware name: GPUs, wafers (wse2, wse3) and wafer systems (cs2, cs3)."""
    return sorted(p.stem for p in HARDWARE_DIR.glob("*.yaml"))


def _kind(name: str) -> str:
    return read_yaml(HARDWARE_DIR / f"{name}.yaml").get("kind", "gpu")


def list_gpus() -> list[str]:
    return [n for n in list_hardware() if _kind(n) == "gpu"]


def list_wafers() -> list[str]:
    """Wafer chips and the systems that hold them."""
    return [n for n in list_hardware() if _kind(n) != "gpu"]


def is_wafer(spec) -> bool:
    return isinstance(spec, (WaferSpec, SystemSpec))


def list_models() -> list[str]:
    return sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))


@lru_cache(maxsize=None)
def _hardware(name: str):
    data = read_yaml(HARDWARE_DIR / f"{name}.yaml")
    if data.get("kind", "gpu") != "gpu":
        return wafer_from_dict(data, origin=name)
    return hardware_from_dict(data, origin=name)


@lru_cache(maxsize=None)
def _model(name: str) -> ModelSpec:
    return build(ModelSpec, read_yaml(MODELS_DIR / f"{name}.yaml"), origin=name)


def load_hardware(name, *, arg: str = "hardware"):
    """A GPU HardwareSpec, a WaferSpec (wse2, wse3) or a SystemSpec (cs2, cs3)."""
    if isinstance(name, (HardwareSpec, WaferSpec, SystemSpec)):
        return name
    if name not in list_hardware():
        raise InputError(f"{arg}={name!r} is not known; allowed: {', '.join(list_hardware())}")
    return _hardware(name)


def load_model(name, *, arg: str = "model") -> ModelSpec:
    """A catalog name, a ModelSpec, or a dict of ModelSpec fields (a model not in the catalog)."""
    if isinstance(name, ModelSpec):
        return name
    if isinstance(name, dict):
        data = dict(name)
        data.setdefault("name", "custom")
        data.setdefault("source", "user-supplied dict")
        return build(ModelSpec, data, origin=data["name"])
    if name not in list_models():
        raise InputError(f"{arg}={name!r} is not known; allowed: {', '.join(list_models())}")
    return _model(name)
