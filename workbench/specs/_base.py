"""Shared pieces of the spec loaders: the error type and YAML -> dataclass construction."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from ..errors import InputError


class SpecError(InputError):
    """A spec file or field is wrong; the message names the spec, field, value, allowed."""

    def __init__(self, spec: str, field: str, value, allowed: str):
        super().__init__(f"spec {spec!r}: {field}={value!r} is not allowed; expected {allowed}")


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e9 / 3.35e12 as floats (YAML 1.1 wants 1.0e+9)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def read_yaml(path: Path) -> dict:
    with open(path) as f:
        data = yaml.load(f, Loader=_Loader)
    if not isinstance(data, dict):
        raise SpecError(path.stem, "<file>", type(data).__name__, "a YAML mapping")
    return data


def build(cls, data: dict, *, origin: str):
    """Construct dataclass `cls` from `data`; unknown or missing keys are errors."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SpecError(origin, unknown[0], data[unknown[0]], f"one of the fields {sorted(fields)}")
    required = [n for n, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [n for n in required if n not in data]
    if missing:
        raise SpecError(origin, missing[0], None, "a value (required field is missing)")
    return cls(**data)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# rule -> (test, what is allowed), for the field checks every spec's __post_init__ makes
RULES = {
    "positive_int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "nonnegative_int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
    "positive": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "nonnegative": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
}


def require(spec, names, rule: str) -> None:
    """Raise SpecError for the first field in `names` that breaks `rule`."""
    test, allowed = RULES[rule]
    for name in names:
        value = getattr(spec, name)
        if not test(value):
            raise SpecError(spec.name, name, value, allowed)
