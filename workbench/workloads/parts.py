"""Named parts of a kernel's cost (flops, bytes, compute_s, memory_s, overhead_s, comm_s,
time_s and the time per operation class) and their sum: what every layer cost in
workloads/layers and workloads/compressed returns."""
from __future__ import annotations

from math import copysign

import numpy as np

from ..primitives._array import in_place

# Attention runs in 16-bit even when the GEMMs run in FP8/INT8/FP4: TensorRT-LLM's
# context FMHA and vLLM's default attention backends take bf16/fp16 Q, K, V (an FP8 KV
# cache is dequantized on load). FP8 attention is an opt-in variant not modelled here.
WIDE_MATH = ("fp32", "tf32", "bf16", "fp16")


def attention_math(math: str) -> str:
    return math if math in WIDE_MATH else "bf16"


PARTS = ("flops", "bytes", "compute_s", "memory_s", "overhead_s", "comm_s", "time_s",
         "matmul_s", "attention_s", "elementwise_s")  # the last three: time per operation class


def add(*parts: dict, scale=1.0, own: int | None = None) -> dict:
    """Sum named parts (missing keys count as zero), times `scale`. Each sum runs left to
    right from 0.0 (so it is never -0.0); every array returned is a new one, made by its
    first addition and updated in place by the rest (a million-point grid's parts would
    otherwise allocate a fresh array at every step). `own`: the index of a part that is the
    caller's own, its arrays new and held by nothing else (a primitive's result): the sums
    are written into them instead (addition commutes, so the numbers are the same), and
    the arrays returned are those."""
    out = {}
    if not _has_arrays(parts):  # numbers (a single point): as written
        for k in PARTS:
            total = 0.0
            for p in parts:
                v = p.get(k)
                if v is not None:
                    total = total + v
            out[k] = total * scale
        return out
    mine = _distinct_arrays(parts[own]) if own is not None else ()
    for k in PARTS:
        values = [v for p in parts if (v := p.get(k)) is not None]
        j = next((i for i, v in enumerate(values) if id(v) in mine), None) if mine else None
        if j is None:
            total = _sum(values)
        else:  # (0.0 + values[0] + ... + values[j - 1]) + values[j] + ..., into values[j]
            total = in_place(np.add, values[j], _sum(values[:j]))
            for v in values[j + 1:]:
                total = in_place(np.add, total, v)
        out[k] = total if _is_one(scale) else _scaled(total, scale)
    return out


def _has_arrays(parts) -> bool:
    for p in parts:
        for v in p.values():
            if type(v) is np.ndarray and v.ndim:
                return True
    return False


def _distinct_arrays(part: dict) -> set:
    """ids of the part's arrays that no other key of it shares."""
    ids = [id(v) for v in part.values() if type(v) is np.ndarray and v.ndim]
    return {i for i in ids if ids.count(i) == 1}


def times(part: dict, scale) -> dict:
    """add(part, scale=scale) of a part that add returned (its arrays new and never -0.0,
    so 0.0 + v is v): its arrays scaled in place."""
    return {k: _scaled(v, scale) for k, v in part.items()}


def add_into(total: dict, *parts: dict) -> dict:
    """add(total, *parts) of a `total` that add (or times, by a positive count) returned:
    its arrays updated in place."""
    if not _has_arrays((total,)):
        return add(total, *parts)
    return {k: _sum_onto(total.get(k), [v for p in parts if (v := p.get(k)) is not None]) for k in PARTS}


def _sum(values: list):
    """0.0 + values[0] + values[1] + ..., left to right. 0.0 + a + b is a + b where a or b
    holds no -0.0 (checked on a small one): the first addition then makes the array."""
    if not values:
        return 0.0
    first, rest = values[0], values[1:]
    if rest and _float_sum(first, rest[0]) and (_no_negative_zero(rest[0]) or _no_negative_zero(first)):
        total, rest = first + rest[0], rest[1:]
    else:
        total = 0.0 + first
    for v in rest:
        total = in_place(np.add, total, v)
    return total


def _sum_onto(total, values: list):
    """total + values[0] + ..., into `total` (add's, so 0.0 + total is total)."""
    if total is None:
        return _sum(values)
    for v in values:
        total = in_place(np.add, total, v) if type(total) is np.ndarray else total + v
    return total


def _scaled(total, scale):
    return in_place(np.multiply, total, scale) if type(total) is np.ndarray else total * scale


def _is_one(scale) -> bool:
    return type(scale) in (float, int) and scale == 1  # x * 1.0 is x, bit for bit


def _float_sum(a, b) -> bool:
    return isinstance(a, (np.ndarray, float)) and isinstance(b, (np.ndarray, float)) \
        and np.result_type(a, b).kind == "f"


def _no_negative_zero(v, most: int = 4096) -> bool:
    """Whether `v` (a float or a small array) certainly holds no -0.0."""
    if isinstance(v, float):
        return v != 0.0 or copysign(1.0, v) > 0
    return v.size <= most and not np.any(np.signbit(v) & (v == 0.0))
