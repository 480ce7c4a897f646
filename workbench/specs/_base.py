"""Shared pieces of the spec loaders: the error type and YAML -> dataclass construction."""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import yaml

from ..errors import SHOWN_CHARS, InputError, brief


class SpecError(InputError):
    """A spec file or field is wrong; the message names the spec, field, value, allowed
    (the value's repr cut to errors.SHOWN_CHARS)."""

    def __init__(self, spec: str, field: str, value, allowed: str):
        self.field, self.value, self.allowed = str(field), value, allowed  # the parts, for a caller's own wording
        field = str(field)
        field = field if len(field) <= SHOWN_CHARS else field[:SHOWN_CHARS] + "..."
        super().__init__(f"spec {brief(spec)}: {field}={brief(value)} is not allowed; expected {allowed}")

    def __reduce__(self):  # pickled by its message (a dask worker process raising it)
        return _spec_error, (str(self),)


def _spec_error(message: str) -> SpecError:
    err = SpecError.__new__(SpecError)
    InputError.__init__(err, message)
    return err


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e9 / 3.35e12 as floats (YAML 1.1 wants 1.0e+9)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def read_yaml(path: Path, *, arg: str = "file") -> dict:
    """A YAML (or JSON) mapping; unreadable, not UTF-8 or not YAML: InputError naming `arg`."""
    name = f"{arg}={brief(str(path))}"
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.load(f, Loader=_Loader)
    except UnicodeDecodeError:
        raise InputError(f"{name} is not UTF-8 text; allowed: a UTF-8 YAML file") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        raise InputError(f"{name} is not valid YAML ({getattr(e, 'problem', None) or type(e).__name__}"
                         f"{f', line {where.line + 1}' if where else ''}); allowed: a YAML mapping") from None
    except OSError as e:
        raise InputError(f"{name} cannot be read ({e.strerror}); allowed: a readable YAML file") from None
    if not isinstance(data, dict):
        raise InputError(f"{name} holds a {type(data).__name__}, not a mapping; allowed: a YAML mapping of fields")
    return data


def build(cls, data: dict, *, origin: str):
    """Construct dataclass `cls` from `data`; unknown or missing keys are errors."""
    if not isinstance(data, dict):
        raise SpecError(origin, cls.__name__, data, "a mapping of its fields")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        import difflib
        near = difflib.get_close_matches(str(unknown[0]), list(fields), n=3, cutoff=0.5)
        raise SpecError(origin, unknown[0], data[unknown[0]],
                        f"one of the {len(fields)} fields of {cls.__name__}"
                        + (f" (closest: {', '.join(near)})" if near else f" ({', '.join(sorted(fields)[:12])}, ...)"))
    required = [n for n, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [n for n in required if n not in data]
    if missing:
        raise SpecError(origin, missing[0], None, "a value (required field is missing)")
    return cls(**data)


def _is_number(v) -> bool:
    """A finite int or float (not a bool): .inf is no bandwidth, size or price."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# rule -> (test, what is allowed), for the field checks every spec's __post_init__ makes
RULES = {
    "positive_int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "nonnegative_int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
    "positive": (lambda v: _is_number(v) and v > 0, "a finite positive number"),
    "nonnegative": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0"),
    "bool": (lambda v: isinstance(v, bool), "true or false (a YAML boolean, not a string)"),
    "text": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string (quoted if it looks like a number)"),
}


def bool_fields(spec) -> tuple:
    """The names of a spec dataclass's bool fields (each must hold a real bool)."""
    return tuple(f.name for f in dataclasses.fields(spec) if f.type in ("bool", bool))


def require(spec, names, rule: str) -> None:
    """Raise SpecError for the first field in `names` that breaks `rule`."""
    test, allowed = RULES[rule]
    for name in names:
        value = getattr(spec, name)
        if not test(value):
            raise SpecError(spec.name, name, value, allowed)
