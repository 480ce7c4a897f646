"""What fits on wafers with every layer resident (placement "regions"): the largest batch,
the longest generation the KV cache allows, and the fewest systems that hold the model.

Per grid side P (every integer side, along a trailing axis, so a sweep is one call):
the fewest systems is closed form (regions needed over regions per wafer); the longest
generation is closed form (per-PE bytes are linear in the tokens held,
wafer_layers.layer_memory_per_pe) and then checked against the placement itself
(rounding can land one past the boundary); the largest batch is a bisection on the
placement (activation rows per micro-batch make bytes piecewise in the batch).
"""
from __future__ import annotations

import numpy as np

from ..primitives.hardware_numbers import WaferNumbers
from ..specs import ModelSpec
from ..units import DTYPE_BYTES
from .wafer_inference import grid_candidates, micro_batch_rows, placement, regions
from .wafer_layers import layer_memory_per_pe

MAX_SYSTEMS = 4096.0  # devices="min" reports NaN (not fits) beyond this


def _candidate_axis(w: WaferNumbers, shape, pe_grid):
    """Grid sides along a trailing axis (every side, or the one given) and the wafer numbers
    broadcast against it."""
    if pe_grid is None:
        P = grid_candidates(w).reshape((1,) * len(shape) + (-1,))
    else:
        P = np.expand_dims(np.broadcast_to(np.asarray(pe_grid, float), shape), -1)
    return P, w.with_trailing_axis()


def _ex(shape):
    return lambda a: np.expand_dims(np.broadcast_to(np.asarray(a, float), shape), -1)  # noqa: E731


def _placement(wc: WaferNumbers, model: ModelSpec, *, weights: str, kv: str, **sizes) -> dict:
    """wafer_inference.placement with the precisions by name."""
    return placement(wc, model, w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv], **sizes)


def wafer_max_batch(*, w: WaferNumbers, model: ModelSpec, devices, prompt, generate,
                    weights: str, kv: str, pe_grid=None, mapping: str = "mesh", draft: ModelSpec | None = None,
                    **_) -> np.ndarray:
    """Largest batch whose layer regions fit, the best grid side taken (0: none fits).
    Whether a batch fits is monotone in the batch (each sequence adds its KV cache to every
    region, and activation rows per micro-batch never shrink), so the largest is found by a
    bisection run on every point and grid side at once, between 0 and the bound the KV
    cache alone sets."""
    shape = np.broadcast_shapes(np.broadcast(devices, prompt, generate, 0.0 if pe_grid is None else pe_grid).shape,
                                w.shape)
    P, wc = _candidate_axis(w, shape, pe_grid)  # knob arrays broadcast against the candidate axis
    ex = _ex(shape)
    sizes = dict(P=P, tokens=ex(prompt + generate), generated=ex(generate), mapping=mapping)
    one = layer_memory_per_pe(wc, model, batch=1.0, w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv], **sizes)
    zero = layer_memory_per_pe(wc, model, batch=0.0, w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv], **sizes)
    hi = np.floor((wc.sram_per_pe_bytes - zero["total_bytes"]) / np.maximum(one["kv_bytes"], 1e-30)) + 1.0
    hi = np.clip(np.nan_to_num(hi, nan=1.0, posinf=2.0 ** 40), 1.0, 2.0 ** 40)  # a batch of hi does not fit

    def fits(b):
        return _placement(wc, model, devices=ex(devices), batch=b, weights=weights, kv=kv, draft=draft,
                          **sizes)["fits"]
    lo = np.where(fits(1.0), 1.0, 0.0) + 0.0 * hi  # lo fits (or is 0)
    for _ in range(int(np.ceil(np.log2(np.max(hi) + 1.0))) + 1):
        mid = np.floor((lo + hi) / 2.0)
        ok = (mid > lo) & fits(np.maximum(mid, 1.0))
        lo, hi = np.where(ok, mid, lo), np.where(ok | (mid <= lo), hi, mid)
    return np.max(lo, axis=-1)


def wafer_min_devices(*, w: WaferNumbers, model: ModelSpec, batch, prompt, generate, weights: str, kv: str,
                      pe_grid=None, mapping: str = "mesh", draft: ModelSpec | None = None, **_) -> np.ndarray:
    """The fewest systems whose layer regions hold the model (devices="min"): for each grid
    side whose region holds a layer (weights, KV, activations within a PE's SRAM), the
    systems needed are ceil(regions needed / regions per wafer); the smallest over the
    sides. A MoE layer too large for a region keeps its experts in regions beside it
    (wafer_layers.layer_memory_per_pe), counted here. NaN where no side holds a layer (a
    dense layer, or one expert, larger than a wafer's largest square region)."""
    shape = np.broadcast_shapes(np.broadcast(batch, prompt, generate, 0.0 if pe_grid is None else pe_grid).shape,
                                w.shape)
    P, wc = _candidate_axis(w, shape, pe_grid)
    ex = _ex(shape)
    place = _placement(wc, model, P=P, devices=1.0, batch=ex(batch), tokens=ex(prompt + generate),
                       generated=ex(generate), weights=weights, kv=kv, mapping=mapping, draft=draft)
    per_wafer = regions(wc, P)
    ok = place["fits_pe"] & (P <= wc.max_square_grid) & (per_wafer >= 1)
    need = np.where(ok, np.ceil(place["regions_needed"] / np.maximum(per_wafer, 1.0)), np.inf)
    d = np.min(need, axis=-1)
    return np.where(d <= MAX_SYSTEMS, d, np.nan)


def wafer_max_generate(*, w: WaferNumbers, model: ModelSpec, devices, batch, prompt, weights: str, kv: str,
                       pe_grid=None, mapping: str = "mesh", draft: ModelSpec | None = None,
                       **_) -> tuple[np.ndarray, np.ndarray]:
    """The longest generation the KV cache allows (generate="max") and the grid side that
    allows it: per side, per-PE bytes are linear in the tokens generated (shift-based KV,
    mesh: over all P² PEs; concat-based, gpu_style: generated tokens on one line of P PEs,
    wafer_layers.layer_memory_per_pe), so the bound is closed form; the side with the
    longest generation whose regions fit on `devices` systems is taken. Capped at the
    model's max_seq_len - prompt (a sliding-window KV stops growing). 0 where none fits."""
    shape = np.broadcast_shapes(np.broadcast(devices, batch, prompt, 0.0 if pe_grid is None else pe_grid).shape,
                                w.shape)
    P, wc = _candidate_axis(w, shape, pe_grid)
    ex = _ex(shape)
    kw = dict(P=P, batch=ex(batch), w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv], mapping=mapping,
              rows_in_flight=micro_batch_rows(model, ex(batch)))
    cap = float(model.max_seq_len) - ex(prompt)
    # the region holding the cache (an expert region holds none): its bytes grow with the cache
    zero = layer_memory_per_pe(wc, model, tokens=ex(prompt), generated=0.0, **kw)
    slope = layer_memory_per_pe(wc, model, tokens=ex(prompt) + 1.0, generated=1.0, **kw)["kv_bytes"] - zero["kv_bytes"]
    room = wc.sram_per_pe_bytes - (zero["weights_bytes"] + zero["kv_bytes"] + zero["activation_bytes"]
                                   + wc.sram_reserved_per_pe_bytes)
    g = np.where(slope > 0, np.floor(room / np.where(slope > 0, slope, 1.0)), cap)
    g = np.clip(np.minimum(g, cap), 0.0, None)

    def fits(gen):
        return _placement(wc, model, P=P, devices=ex(devices), batch=ex(batch), tokens=ex(prompt) + gen,
                          generated=gen, weights=weights, kv=kv, mapping=mapping, draft=draft)["fits"]
    g = np.where(fits(np.maximum(g, 1.0)), g, np.maximum(g - 1.0, 0.0))  # rounding: one step back
    g = np.where(fits(np.maximum(g, 1.0)), g, 0.0)
    best = np.argmax(g, axis=-1)[..., None]
    gen = np.take_along_axis(g, best, axis=-1)[..., 0]
    side = np.take_along_axis(np.broadcast_to(P, g.shape), best, axis=-1)[..., 0]
    return gen, side
