"""Physical bounds a measured serving run cannot beat, to say why a row is far from the model.

Two lower bounds on the time of a run, from its stated deployment alone (no efficiency, no
fitted constant). An aggregated instance both prefills and decodes; a disaggregated run
decodes on its decode pool (decode_num_workers x decode_attention_dp replicas of
decode_tp_size devices) and prefills on its prefill pool (prefill_num_workers x
prefill_tp_size x prefill_attention_dp_size devices); a disaggregated row that does not
state its pools is not judged.

- decode: every decode iteration reads, on each device, its share of the weights the
  iteration touches: the layers' weights without routed experts and the 16-bit LM head
  (split over the tp devices of an attention replica; the input embedding table is only
  gathered from) and the routed experts that at least one of the iteration's tokens
  visits (split over every device of the instance). With uniform routing of B tokens to k of
  E experts, a layer touches E (1 - (1 - k/E)^B) experts on average; B is taken as half the
  requests of a replica (a lower bound: at most half are prefilling at once). Each of those
  B requests also reads its prompt's KV cache (at least the prompt, in FP8, the narrowest
  cache the frameworks keep), B capped by the requests whose FP8 caches fit beside the
  weights. So TPOT >= (touched weight bytes + KV bytes) per device / HBM bandwidth.
- prefill: the prefilling devices prefill every request the run completes: requests per
  second (concurrency / end-to-end time, measured) x prompt tokens x 2 FLOPs per active
  layer parameter (no embedding, no LM head) <= those devices x the peak of the run's math
  format.

A measured run below either bound is inconsistent as stated (a speculative-decoding run, a
prefix-cache hit, requests that never held their KV cache, a mislabelled layout); the
model cannot and should not reproduce it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..backends import numbers
from ..backends.gpu import default_activations
from ..primitives.kernel_fits import expected_experts_touched
from ..specs import catalog_name, load_model
from ..units import DTYPE_BYTES
from ..workloads.serving_capacity import weights_per_device_bytes
from ..workloads.ops import routed_params
from ..workloads.inference import HEAD_BYTES, kv_bytes_per_sequence
from .serving_rows import _n, layout, quant, replicas, system

DECODING_SHARE = 0.5  # of a replica's requests in one decode iteration, at least
NARROWEST_KV = "fp8"  # the narrowest KV cache the three frameworks keep


def _decode_floor_s(model, hw, *, w_bytes: float, tp: int, dp: int, per_replica: float, isl: int) -> float:
    """The decode TPOT floor of one replica holding `per_replica` requests (module doc)."""
    routed = routed_params(model)
    decoding = max(per_replica * DECODING_SHARE, 1.0)  # requests of a replica in a decode step
    touched_share = expected_experts_touched(n_experts=model.n_experts, top_k=model.n_active_experts,
                                             tokens=decoding) / model.n_experts if model.n_moe_layers else 0.0
    # a step reads the layers' weights and the LM head (16-bit), not the input embedding table
    layers = model.n_params - routed - model.embedding_params
    read_bytes = ((layers * w_bytes + model.vocab_size * model.d_model * HEAD_BYTES) / tp
                  + routed * touched_share * w_bytes / (tp * dp))
    kv_bytes_per_request = kv_bytes_per_sequence(model, tokens=isl, tp=tp, pp=1.0,
                                                 kv_bytes=DTYPE_BYTES[NARROWEST_KV])
    free_bytes = hw.hbm_capacity_bytes - weights_per_device_bytes(model, w_bytes, tp=tp, attention_dp=dp)
    held = max(np.floor(free_bytes / kv_bytes_per_request), 0.0)  # requests whose caches fit
    return float((read_bytes + min(decoding, held) * kv_bytes_per_request) / hw.hbm_bandwidth_bytes_per_s)


def _pools(r) -> tuple[int, int, int, int] | None:
    """(decode tp, decode attention-DP, decode replicas, prefilling devices) of a row as it
    ran: an aggregated instance does both; a disaggregated row's pools from its prefill_*
    and decode_* columns (None where it does not state them)."""
    if r.mode == "agg":
        (tp, dp, _), engines = layout(r), replicas(r)
        return tp, dp, dp * engines, tp * dp * engines
    if not (r.prefill_num_workers == r.prefill_num_workers and r.decode_num_workers == r.decode_num_workers):
        return None
    tp, dp = _n(r.decode_tp_size), _n(r.decode_attention_dp_size)
    prefill_devices = _n(r.prefill_num_workers) * _n(r.prefill_tp_size) * _n(r.prefill_attention_dp_size)
    return tp, dp, _n(r.decode_num_workers) * dp, prefill_devices


def _bounds(r) -> tuple[float, float]:
    """(decode TPOT floor [s], prefill FLOPs per second over the prefill devices' peak) of one
    row (a namedtuple of DataFrame.itertuples); NaN where the catalog does not describe it,
    it does not state its pools, or its layout cannot exist."""
    fmt, _ = quant(r)
    pools = _pools(r) if fmt is not None and system(r.system) is not None else None
    if pools is None or catalog_name(r.model_path) is None:
        return np.nan, np.nan
    model, hw = load_model(catalog_name(r.model_path)), numbers(system(r.system))
    tp, dp, replicas, prefill_devices = pools
    if model.n_heads % tp:  # a layout predict.serving refuses: no bound to judge by
        return np.nan, np.nan
    weights, activations = fmt
    tpot_floor_s = _decode_floor_s(model, hw, w_bytes=DTYPE_BYTES[weights], tp=tp, dp=dp,
                                   per_replica=_n(r.concurrency) / replicas, isl=_n(r.isl))
    e2e_s = r.silicon_ttft_ms / 1e3 + (_n(r.osl) - 1) * r.silicon_tpot_ms / 1e3
    # the layers' matmuls over every prompt token (the LM head runs on the last one only)
    flops_per_s = _n(r.concurrency) / e2e_s * _n(r.isl) * 2.0 * (model.n_matmul_params_active
                                                               - model.vocab_size * model.d_model)
    peak = hw.peak(activations or default_activations(weights, hw))
    return tpot_floor_s, float(flops_per_s / (prefill_devices * peak))


def violations(df: pd.DataFrame) -> pd.Series:
    """Per row id: the bound its measurement breaks ("" where none, or the catalog does not
    describe the row or the row does not state its pools)."""
    out = {}
    for r in df.itertuples():
        tpot_floor_s, peak_share = _bounds(r)
        why = []
        if r.silicon_tpot_ms / 1e3 < tpot_floor_s:  # False where NaN
            why.append(f"TPOT < {tpot_floor_s * 1e3:.2f} ms to read weights and KV")
        if peak_share > 1.0:
            why.append(f"prefill needs {peak_share:.0%} of peak FLOP/s")
        out[r.id] = "; ".join(why)
    return pd.Series(out, name="violates")
