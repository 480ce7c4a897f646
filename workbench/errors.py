"""Input validation that names the argument, the value and what is allowed."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class InputError(ValueError):
    """A bad argument: the message names the field, the value and what is allowed."""


def check_choice(arg: str, value, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    values = np.atleast_1d(np.asarray(getattr(value, "values", value), dtype=object)).ravel()
    for v in values:
        if v not in allowed:
            raise InputError(f"{arg}={v!r} is not known; allowed: {', '.join(map(str, allowed))}")


def check_positive(arg: str, value, *, integer: bool = False) -> None:
    """Every element of `value` must be a finite number > 0 (and whole when `integer`)."""
    raw = getattr(value, "values", value)
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{arg}={raw!r} is not a number; allowed: a positive number") from None
    bad = ~np.isfinite(arr) | (arr <= 0)
    if integer:
        bad |= arr != np.round(arr)
    if np.any(bad):
        first = arr[bad].ravel()[0] if arr.ndim else arr
        kind = "a positive integer" if integer else "a positive number"
        raise InputError(f"{arg}={first:g} is not allowed; allowed: {kind}")
