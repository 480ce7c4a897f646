"""Physical bounds a measured serving run cannot beat, to say why a row is far from the model.

Two lower bounds on the time of an aggregated run, from its stated deployment alone (no
efficiency, no fitted constant):

- decode: every decode iteration reads, on each device, its share of the weights the
  iteration touches: the weights without routed experts (split over the tp devices of an
  attention replica) and the routed experts that at least one of the iteration's tokens
  visits (split over every device of the instance). With uniform routing of B tokens to k of
  E experts, a layer touches E (1 - (1 - k/E)^B) experts on average; B is taken as half the
  requests of a replica (a lower bound: at most half are prefilling at once). Each of those
  B requests also reads its prompt's KV cache (at least the prompt, in FP8, the narrowest
  cache the frameworks keep), B capped by the requests whose FP8 caches fit beside the
  weights. So TPOT >= (touched weight bytes + KV bytes) per device / HBM bandwidth.
- prefill: the instance prefills every request it completes: requests per second
  (concurrency / end-to-end time, measured) x prompt tokens x 2 FLOPs per active parameter
  <= devices x the peak of the run's math format.

A measured run below either bound is inconsistent as stated (a speculative-decoding run, a
prefix-cache hit, requests that never held their KV cache, a mislabelled layout); the
model cannot and should not reproduce it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..units import DTYPE_BYTES
from .serving_rows import SYSTEMS, _n, layout, quant

DECODING_SHARE = 0.5  # of a replica's requests in one decode iteration, at least


def _bounds(r) -> tuple[float, float]:
    """(decode TPOT floor in seconds, prefill work / peak) of one aggregated row; NaN where
    the row is not in the catalog."""
    from ..backends import numbers
    from ..specs import hf_index, load_model
    from ..workloads.concurrency import routed_params
    from ..workloads.inference import kv_bytes_per_sequence
    from ..backends.gpu import default_activations
    fmt, _ = quant(r)
    if fmt is None or r.model_path not in hf_index() or r.system not in SYSTEMS:
        return np.nan, np.nan
    model, hw = load_model(hf_index()[r.model_path]), numbers(SYSTEMS[r.system])
    tp, dp, _ = layout(r)
    if model.n_heads % tp:  # a layout that cannot exist (predict.serving refuses it): no bound to judge by
        return np.nan, np.nan
    weights, activations = fmt
    math = activations or default_activations(weights, hw)
    w = DTYPE_BYTES[weights]
    routed = routed_params(model)
    batch = max(_n(r.concurrency) / dp * DECODING_SHARE, 1.0)
    touched = 1.0 - (1.0 - model.n_active_experts / model.n_experts) ** batch if model.n_moe_layers else 0.0
    weights_per_device = (model.n_params - routed) * w / tp + routed * w / (tp * dp)
    read = (model.n_params - routed) * w / tp + routed * touched * w / (tp * dp)
    kv = kv_bytes_per_sequence(model, tokens=_n(r.isl), tp=tp, pp=1.0, kv_bytes=DTYPE_BYTES["fp8"])
    held = max(np.floor((hw.hbm_capacity_bytes - weights_per_device) / kv), 0.0)  # FP8 caches that fit
    tpot_floor = (read + min(batch, held) * kv) / hw.hbm_bandwidth_bytes_per_s
    e2e = r.silicon_ttft_ms / 1e3 + (_n(r.osl) - 1) * r.silicon_tpot_ms / 1e3
    flops = _n(r.concurrency) / e2e * _n(r.isl) * 2.0 * model.n_params_active
    return float(tpot_floor), float(flops / (tp * dp * hw.peak(math)))


def violations(df: pd.DataFrame) -> pd.Series:
    """Per row id: the bound its measurement breaks ("" where none, or the row is not an
    aggregated one the catalog describes)."""
    out = {}
    for r in df.itertuples():
        if r.mode != "agg":
            out[r.id] = ""
            continue
        floor, work = _bounds(r)
        why = []
        if floor == floor and r.silicon_tpot_ms / 1e3 < floor:
            why.append(f"TPOT < {floor * 1e3:.2f} ms to read weights and KV")
        if work == work and work > 1.0:
            why.append(f"prefill needs {work:.0%} of peak FLOP/s")
        out[r.id] = "; ".join(why)
    return pd.Series(out, name="violates")
