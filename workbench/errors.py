"""Input validation that names the argument, the value and what is allowed."""
from __future__ import annotations

import numbers
import reprlib
from collections.abc import Iterable

import numpy as np

SHOWN_CHARS = 200  # a value is shown as its repr cut to this many characters and '...'
MAX_MESSAGE_CHARS = 2000  # the longest message kept whole; longer ones lose their middle

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = SHOWN_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxarray = 20
_REPR.maxdict = 10
_REPR.maxlevel = 3


def brief(value, limit: int = SHOWN_CHARS) -> str:
    """repr(value) cut to `limit` characters and '...' (a 200 MB string or list in a model
    file must not become a 200-million-character message); numpy scalars as Python's."""
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value[:limit + 1]) if isinstance(value, str) else _REPR.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class InputError(ValueError):
    """A bad argument: the message names the field, the value and what is allowed."""

    def __init__(self, message: str = ""):
        message = str(message)
        if len(message) > MAX_MESSAGE_CHARS:  # a last guard: keep the start and the "allowed" end
            message = message[:MAX_MESSAGE_CHARS - 500] + " ... " + message[-495:]
        super().__init__(message)


def check_choice(arg: str, value, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    values = np.atleast_1d(np.asarray(getattr(value, "values", value), dtype=object)).ravel()
    for v in values:
        if isinstance(v, (bool, np.bool_)) and not any(isinstance(a, (bool, np.bool_)) for a in allowed):
            raise InputError(f"{arg}={brief(v)} is not known; allowed: {', '.join(map(str, allowed))}")
        try:
            known = v in allowed
        except TypeError:  # unhashable / incomparable (a list inside a list)
            known = False
        if not known:
            raise InputError(f"{arg}={brief(v)} is not known; allowed: {', '.join(map(str, allowed))}")


def as_numbers(arg: str, value, allowed: str) -> np.ndarray:
    """`value` (a number, a list of numbers, an ndarray or DataArray) as a float ndarray.
    A str is never a number here ('2', '٢'), nor a bool (True is not a count)."""
    raw = getattr(value, "values", value)
    if type(raw) in (int, float):  # the common case, one plain number
        return np.asarray(float(raw))

    def bad():
        return InputError(f"{arg}={brief(raw)} is not a number; allowed: {allowed}")
    if isinstance(raw, (str, bytes, bool, np.bool_, dict, set)):
        raise bad()
    try:
        arr = np.asarray(raw)
    except (TypeError, ValueError):  # ragged nested lists
        raise bad() from None
    if arr.dtype.kind == "O":
        if not all(isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) for x in arr.ravel()):
            raise bad()
    elif arr.dtype.kind not in "iuf":  # bools, strings, complex, dates
        raise bad()
    return arr.astype(float)


def check_positive(arg: str, value, *, integer: bool = False) -> None:
    """Every element of `value` must be a finite number > 0 (and whole when `integer`)."""
    kind = "a positive integer" if integer else "a positive number"
    arr = as_numbers(arg, value, kind)
    bad = ~np.isfinite(arr) | (arr <= 0)
    if integer:
        bad |= arr != np.round(arr)
    if np.any(bad):
        first = arr[bad].ravel()[0] if arr.ndim else arr
        raise InputError(f"{arg}={first:g} is not allowed; allowed: {kind}")


def check_range(arg: str, value, *, low: float, high: float, allowed: str, open_low: bool = False,
                open_high: bool = False, integer: bool = False) -> None:
    """Every element of `value` a finite number in [low, high] (open ends as asked)."""
    arr = as_numbers(arg, value, allowed)
    ok = np.isfinite(arr) & ((arr > low) if open_low else (arr >= low)) & ((arr < high) if open_high else (arr <= high))
    if integer:
        ok &= arr == np.round(arr)
    if not np.all(ok):
        first = arr[~ok].ravel()[0] if arr.ndim else arr
        raise InputError(f"{arg}={first:g} is not allowed; allowed: {allowed}")


def check_scalar(arg: str, value, why: str = "one value") -> None:
    """`value` must be one value, not a list, array or DataArray (arguments a function
    takes once per call)."""
    if isinstance(value, dict):
        return
    if isinstance(value, (list, tuple, set)) or np.ndim(getattr(value, "values", value)) > 0:
        raise InputError(f"{arg}={brief(value)} is not allowed here; allowed: {why}")
