"""Fit the two software costs of the wafer model that no datasheet gives, from WaferLLM's
per-layer kernel timings on WSE-2 (OSDI'25 Tables 3 and 4, one layer on a P x P region):

- map_call_cycles: the per-element cost of a @map-driven vector op (the inner loop of
  MeshGEMM and MeshGEMV in the WaferLLM kernels);
- stage_cycles: the software cost of one stage of the K-tree allreduce.

Both enter both kernels linearly, so one prefill row (480 x 480, C026) and one decode row
(420 x 420, C074) determine them; the other grid sizes (C028, C030, C076, C078) are held
out. Also derives sram_reserved_per_pe_bytes from the concat-based KV capacity (C121).
The spec YAML stores the results; tests check the YAML against this fit.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..primitives.mesh import tiles
from ..specs import load_model
from ..backends import as_numbers
from ..specs.wafer import WaferSpec

CLOCK_HZ = 1.1e9  # WaferLLM converts cycles with 1.1 GHz (wse_facts.md section 3)
N_LAYERS = 32

# WaferLLM's Llama3-8B as its kernels run it (Decode/WSE-2/model_config/*.json): one head
# of head_dim = dim, dims padded to multiples of P.
DECODE_CONFIGS = {420: (4200, 14700), 540: (4320, 14580), 660: (4620, 14520)}
# WaferLLM Table 2 (end to end, and Table 5's KV capacity) decodes on 360 x 360: Llama3-8B
# padded to multiples of 360 as its model configs pad (dim 4096 -> 4320, ffn 14336 -> 14400)
E2E_DECODE_P, E2E_DECODE_CONFIG = 360, (4320, 14400)
DECODE_CONTEXT = 4096  # '4K CTX' (Tables 7/8)
PREFILL_PROMPT = 4096  # Table 3


def waferllm_model(dim: int, ffn: int):
    return load_model(dict(name=f"waferllm_llama3_8b_{dim}", source="MeshInfra/WaferLLM model_config",
                           n_layers=N_LAYERS, d_model=dim, n_heads=1, n_kv_heads=1, head_dim=dim,
                           d_ff=ffn, vocab_size=128256))


def prefill_model():
    """Prefill runs the real Llama3-8B shapes as one head (n_heads = 1 in the config)."""
    return waferllm_model(4096, 14336)


def waferllm_shapes(model: str, P: int | None = None) -> tuple:
    """(dim, ffn, layers) of a catalog model as WaferLLM's kernels run it (one head of
    head_dim = dim): its own widths for prefill (P None), padded to multiples of the grid
    side P for decode, as the model configs of Llama3-8B are (DECODE_CONFIGS: 4096 -> 4200,
    14336 -> 14700 on 420 x 420)."""
    spec = load_model(model)
    d, f = spec.d_model, spec.d_ff
    if P is not None:
        d, f = int(np.ceil(d / P) * P), int(np.ceil(f / P) * P)
    return d, f, spec.n_layers


def per_layer_cycles_from_tpr(tokens_per_s: float, tokens: float = 1.0) -> float:
    """WaferLLM reports tokens/s = tokens / (cycles_per_layer * n_layers / 1.1 GHz)."""
    return tokens / tokens_per_s * CLOCK_HZ / N_LAYERS


def _cycles(w: WaferSpec, c: float, beta: float):
    from ..workloads.wafer_layers import decode_layer, prefill_layer
    w = dataclasses.replace(as_numbers(w), map_call_cycles=c, stage_cycles=beta)
    dim, ffn = DECODE_CONFIGS[420]
    dec = decode_layer(w, waferllm_model(dim, ffn), P=420.0, batch=1.0, context=float(DECODE_CONTEXT))
    pre = prefill_layer(w, prefill_model(), P=480.0, batch=1.0, prompt=float(PREFILL_PROMPT))
    return np.array([float(pre["cycles"]), float(dec["cycles"])])


def fit_software_costs(w: WaferSpec, prefill_480_tpr: float, decode_420_tpr: float) -> tuple[float, float]:
    """(map_call_cycles, stage_cycles) that reproduce the two calibration rows."""
    target = np.array([per_layer_cycles_from_tpr(prefill_480_tpr, PREFILL_PROMPT),
                       per_layer_cycles_from_tpr(decode_420_tpr)])
    base = _cycles(w, 0.0, 0.0)
    jac = np.column_stack([_cycles(w, 1.0, 0.0) - base, _cycles(w, 0.0, 1.0) - base])
    c, beta = np.linalg.solve(jac, target - base)
    return round(float(c), 2), round(float(beta), 1)


def fit_sram_reserved(w: WaferSpec, concat_tokens: float, P: int = 360) -> float:
    """Bytes per PE not available to weights, activations and KV: concat-based KV appends
    each generated token's K and V (2 x dim x 2 B) to one line of P PEs, so the free
    bytes per PE are concat_tokens x 2 x ceil(dim/P) x 2 B (C121 at the 360 x 360 grid)."""
    from ..workloads.wafer_layers import layer_memory_per_pe
    dim, ffn = E2E_DECODE_CONFIG  # Llama3-8B padded to a multiple of 360
    m = waferllm_model(dim, ffn)
    free = concat_tokens * 2 * tiles(dim, P) * 2.0
    mem = layer_memory_per_pe(dataclasses.replace(as_numbers(w), sram_reserved_per_pe_bytes=0.0), m, P=float(P),
                              batch=1.0, tokens=0.0, w_bytes=2.0, kv_bytes=2.0)
    return float(np.floor(w.sram_per_pe_bytes - free - mem["weights_bytes"] - mem["activation_bytes"]))


# The CS-2 training rows the per-layer stream latency is fitted on (the small models, whose
# layers' compute is shortest: wse_measurements.csv); the GPT-3 2.7B-20B rows T001-T008 stay
# out of the fit.
LAYER_STREAM_FIT_ROWS = ("C179", "C180", "C181", "C182", "C191", "C192")
LAYER_STREAM_STEP_S = 1e-4  # resolution of the fit


def fit_layer_stream_latency(rows=LAYER_STREAM_FIT_ROWS, points: dict | None = None) -> float:
    """cs2.yaml layer_stream_latency_s: the value on a 0.1 ms grid (to 6 ms) minimising the
    median |step-time error| of the rows (reference_points.yaml configurations, measured
    samples/s from wse_measurements.csv), the step being linear in it: the modelled step
    without it plus it times the streamed layers, n_micro x 2 (L + 1). `points`: row id ->
    (step without it, measured step, streamed layers), computed when not given."""
    points = points or layer_stream_points(rows)
    base, measured, streams = (np.array([points[r][i] for r in rows]) for i in range(3))
    grid = np.arange(0.0, 6e-3 + LAYER_STREAM_STEP_S / 2, LAYER_STREAM_STEP_S)
    score = np.median(np.abs((base[None] + grid[:, None] * streams[None]) / measured[None] - 1.0), axis=1)
    return round(float(grid[np.argmin(score)]), 6)


def layer_stream_points(rows) -> dict:
    """Row id -> (modelled step without the stream latency, measured step, streamed layers),
    each row as the gap table reads it (gap.reference_points: its configuration and measured
    samples/s); the streamed layers are the step's latency part over the spec's constant, so
    wafer_training alone says how many there are."""
    from .. import predict
    from ..specs import load_hardware
    from .gap import reference_points
    obs = reference_points().set_index("id").loc[list(rows)]
    out = {}
    for r, row in obs.iterrows():
        ds = predict.training(**row.config)
        latency = float(ds.layer_stream_latency_s)
        out[r] = (float(ds.step_time_s) - latency, row.config["global_batch"] / row.value_si,
                  latency / load_hardware(row.config["hardware"]).layer_stream_latency_s)
    return out
