"""The wafer-scale model against the public WSE rows (wse_measurements.csv, copied into
workbench/calibrate/reference with its source column).

What is fitted and what is held out: two software costs (stage_cycles, map_call_cycles)
come from C026 (prefill, 480x480) and C074 (decode, 420x420) - see calibrate/wafer_fit.py.
Everything else here is predicted: the other grid sizes, the end-to-end rows, the
GPU-style gaps, the KV capacity contrast and the CS-3 service speed.
WaferLLM's figures are projections from one layer's cycles times 32 layers at 1.1 GHz,
so the model is compared the same way (per layer, at WaferLLM's own shapes).
"""
from __future__ import annotations

import dataclasses

import pytest

from workbench import predict
from workbench.calibrate.measurements import wse_row
from workbench.calibrate.wafer_fit import (CLOCK_HZ, DECODE_CONFIGS, N_LAYERS, fit_sram_reserved,
                                           prefill_model, waferllm_model)
from workbench.primitives.mesh import kv_capacity_tokens, tiles
from workbench.workloads.wafer_layers import decode_layer, layer_memory_per_pe, prefill_layer
from workbench.backends import numbers

WSE2 = numbers("wse2")
DECODE_ROWS = {420: "C073", 540: "C075", 660: "C077"}  # WaferLLM Table 4, LLaMA3-8B decode TPR
PREFILL_ROWS = {480: "C025", 600: "C027", 720: "C029"}  # Table 3, prefill TPR, prompt 4096
T10_DECODE = {420: "C079", 540: "C080", 660: "C081"}
LADDER_DECODE = {420: "C082", 540: "C083", 660: "C084"}
T10_PREFILL = {480: "C031", 600: "C032", 720: "C033"}
LADDER_PREFILL = {480: "C034", 600: "C035", 720: "C036"}


def decode_tpr(P, mapping="mesh"):
    dim, ffn = DECODE_CONFIGS[P]
    cycles = float(decode_layer(WSE2, waferllm_model(dim, ffn), P=float(P), batch=1.0, context=4096.0,
                                mapping=mapping)["cycles"])
    return CLOCK_HZ / (cycles * N_LAYERS)


def prefill_tpr(P, mapping="mesh", prompt=4096.0):
    cycles = float(prefill_layer(WSE2, prefill_model(), P=float(P), batch=1.0, prompt=prompt,
                                 mapping=mapping)["cycles"])
    return prompt * CLOCK_HZ / (cycles * N_LAYERS)


@pytest.mark.parametrize("P", [420, 540, 660])
def test_decode_per_grid(P):
    """Tolerance 15% (420 is the calibration point, 540 and 660 are held out)."""
    measured = wse_row(DECODE_ROWS[P])["value"]
    got = decode_tpr(P)
    print(f"decode {P}x{P}: {got:.0f} vs {measured:.0f} tok/s ({got / measured - 1:+.1%})")
    assert got == pytest.approx(measured, rel=0.15)


def test_decode_trend_with_grid():
    """Decode slows as the grid grows (reductions cross more hops); the model's 420->660
    ratio is within 10% of the measured one (2699.9 / 2243.3 = 1.20)."""
    model = [decode_tpr(P) for P in (420, 540, 660)]
    measured = [wse_row(DECODE_ROWS[P])["value"] for P in (420, 540, 660)]
    assert model[0] > model[1] > model[2]
    assert model[0] / model[2] == pytest.approx(measured[0] / measured[2], rel=0.10)


@pytest.mark.parametrize("P", [480, 600, 720])
def test_prefill_per_grid(P):
    """Tolerance 25% (480 is the calibration point, 600 and 720 held out: the model gains
    more from a larger grid than WaferLLM measured, +10% at 600 and +17% at 720)."""
    measured = wse_row(PREFILL_ROWS[P])["value"]
    got = prefill_tpr(P)
    print(f"prefill {P}x{P}: {got:.0f} vs {measured:.0f} tok/s ({got / measured - 1:+.1%})")
    assert got == pytest.approx(measured, rel=0.25)


def test_prefill_trend_with_grid():
    model = [prefill_tpr(P) for P in (480, 600, 720)]
    measured = [wse_row(PREFILL_ROWS[P])["value"] for P in (480, 600, 720)]
    assert model[0] < model[1] < model[2] and measured[0] < measured[1] < measured[2]


@pytest.mark.parametrize("row_id,prompt,generate", [
    ("C001", 2048, 128), ("C002", 4096, 128), ("C003", 2048, 2048), ("C004", 4096, 4096)])
def test_end_to_end_table_2(row_id, prompt, generate):
    """WaferLLM Table 2: prefill on 660x660, decode on 360x360 (dims padded to 4320/14400),
    throughput = output tokens / (prefill + decode time). Held out; tolerance 15%."""
    pre = float(prefill_layer(WSE2, prefill_model(), P=660.0, batch=1.0, prompt=float(prompt))["cycles"])
    dec = float(decode_layer(WSE2, waferllm_model(4320, 14400), P=360.0, batch=1.0,
                             context=prompt + generate / 2.0)["cycles"])
    seconds = (pre + generate * dec) * N_LAYERS / CLOCK_HZ
    got, measured = generate / seconds, wse_row(row_id)["value"]
    print(f"{row_id} {prompt}/{generate}: {got:.0f} vs {measured:.0f} tok/s ({got / measured - 1:+.1%})")
    assert got == pytest.approx(measured, rel=0.15)


@pytest.mark.parametrize("P", [420, 540, 660])
def test_gpu_style_decode_gap_within_published_baselines(P):
    """The published GPU-style mappings on the same WSE-2 (T10, Ladder: Table 4) are 6.5x
    to 197x slower than WaferLLM; the model's gpu_style mapping must land in that range."""
    gap = decode_tpr(P) / decode_tpr(P, "gpu_style")
    t10 = wse_row(DECODE_ROWS[P])["value"] / wse_row(T10_DECODE[P])["value"]
    ladder = wse_row(DECODE_ROWS[P])["value"] / wse_row(LADDER_DECODE[P])["value"]
    print(f"decode {P}: model gap {gap:.0f}x, T10 {t10:.1f}x, Ladder {ladder:.0f}x")
    assert t10 <= gap <= ladder


def test_gpu_style_gaps_grow_with_grid():
    """Measured: T10 falls behind more on larger grids (decode 6.5x -> 8.5x, prefill 116x ->
    208x); the model's gaps grow too."""
    dec = [decode_tpr(P) / decode_tpr(P, "gpu_style") for P in (420, 540, 660)]
    pre = [prefill_tpr(P) / prefill_tpr(P, "gpu_style") for P in (480, 600, 720)]
    assert dec[0] < dec[1] < dec[2] and pre[0] < pre[1] < pre[2]


@pytest.mark.parametrize("P", [480, 600, 720])
def test_gpu_style_prefill_gap(P):
    """Prefill: the model's gpu_style (SUMMA with panels forwarded PE by PE, bulk-synchronous)
    is 20x-69x behind, short of T10's 116x-208x: a compiler's GPU-style code does worse than this
    idealized port. Asserted: at least 10x, and no more than Ladder's gap."""
    gap = prefill_tpr(P) / prefill_tpr(P, "gpu_style")
    ladder = wse_row(PREFILL_ROWS[P])["value"] / wse_row(LADDER_PREFILL[P])["value"]
    t10 = wse_row(PREFILL_ROWS[P])["value"] / wse_row(T10_PREFILL[P])["value"]
    print(f"prefill {P}: model gap {gap:.0f}x, T10 {t10:.0f}x, Ladder {ladder:.0f}x")
    assert 10 <= gap <= ladder


def test_kv_capacity_shift_against_concat():
    """WaferLLM Table 5 (decode grid 360x360): concat-based KV holds 382 tokens (C121),
    shift-based 137,548 (C122). The reserve per PE is derived from C121 alone
    (calibrate/wafer_fit.fit_sram_reserved); C122 is then predicted: within 1%."""
    P, dim = 360.0, 4320
    w = dataclasses.replace(WSE2, sram_reserved_per_pe_bytes=fit_sram_reserved(WSE2, wse_row("C121")["value"]))
    m = waferllm_model(dim, 14400)
    mem = layer_memory_per_pe(w, m, P=P, batch=1.0, tokens=0.0, w_bytes=2.0, kv_bytes=2.0)
    free = w.sram_per_pe_bytes - mem["total_bytes"]
    per_token = 2 * tiles(dim, P) * 2.0 * P  # K and V rows of one token over one line of P PEs
    concat = kv_capacity_tokens(free_bytes_per_pe=free, P=P, kv_bytes_per_token_per_layer=per_token,
                                mapping="gpu_style")
    shift = kv_capacity_tokens(free_bytes_per_pe=free, P=P, kv_bytes_per_token_per_layer=per_token)
    print(f"KV capacity: concat {concat:.0f} (382), shift {shift:.0f} (137548)")
    assert concat == pytest.approx(wse_row("C121")["value"], abs=1)
    assert shift == pytest.approx(wse_row("C122")["value"], rel=0.01)
    assert shift / concat == pytest.approx(P, rel=0.01)


def test_cs3_llama_3_1_8b_service_speed():
    """C198: Cerebras Inference serves Llama 3.1 8B at 1,800 tokens/s per user (vendor claim,
    batch and software undisclosed, confidence medium). The model runs WaferLLM-calibrated
    software costs at batch 1 on one CS-3: tolerance a factor of 1.5 either way."""
    ds = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=1, prompt=1024, generate=256,
                           weights="fp16", kv="fp16")
    got, measured = float(ds.output_tokens_per_s_per_user), wse_row("C198")["value"]
    print(f"C198 CS-3 Llama 3.1 8B: {got:.0f} vs {measured:.0f} tok/s/user ({got / measured - 1:+.0%}),"
          f" grid {float(ds.pe_grid_decode):.0f}, bound {ds.bound.item()}")
    assert bool(ds.fits)
    assert measured / 1.5 <= got <= measured * 1.5


def test_gemv_kernel_rows_are_within_a_factor_of_two():
    """C125/C126 (MeshGEMV 16K and 32K, 'best config', grid not stated): the largest
    benchmark grid of WaferLLM's script is 512; the model there is 1.4x slower for 16K and
    1.4x for 32K. The grid is unknown, so this is a loose check (factor 2)."""
    for row_id, n in (("C125", 16384), ("C126", 32768)):
        measured_s = wse_row(row_id)["value"] * 1e-3
        got = float(predict.gemm(hardware="wse2", m=1, n=n, k=n, dtype="fp16", pe_grid=512).time_s)
        print(f"{row_id} GEMV {n}: {got * 1e6:.2f} us vs {measured_s * 1e6:.2f} us")
        assert measured_s / 2 <= got <= measured_s * 2


# Cerebras Inference service figures (wse_service.csv) as the gap table predicts them
# (calibrate/data/reference_points.yaml states each row's assumptions: batch 1, the fewest
# systems, speculative decoding after the 2024-10 release with the family's smallest model, or an
# EAGLE-3 head where that model is not far smaller than the target, drafting 4 tokens at the
# acceptance the target's EAGLE-3 heads publish (gpt-oss-120b 0.65, Maverick 0.78), else 0.8).
# The tolerance is 30%; the rows outside it are strict xfails with their error when
# this was written.
SERVICE_OUTSIDE = {
    "S001": "+58%: the launch figure (2024-08); Cerebras' 2024-10 release note says the launch software "
            "'utilized only a fraction of its peak bandwidth, compute, and IO capacity' (kernels rewritten since)",
    "S010": "+40%: Llama 3.1 8B with a 1B draft; without speculation the model gives 2,491 (+13%), so this "
            "figure likely ran without it or on a less optimized kernel set",
    "S008": "+45%: gpt-oss-120b's 201k-token lm_head was timed on one 85 x 85 region that cannot hold it "
            "(ceil(2880/85) x ceil(201088/85) x 2 B = 161 KB a PE) and was the verify wavefront's busiest stage "
            "(+6% then); timed on the 17 regions placement gives it, the EAGLE-3 speed-up at the ASSUMED "
            "acceptance 0.65 is larger than the service shows",
}
SERVICE_ROWS = ("S002", "S003", "S004", "S005", "S006", "S007", "S009")


@pytest.fixture(scope="module")
def service():
    from workbench.calibrate import gap
    return gap.scored_points("S")


@pytest.mark.parametrize("rid", [*SERVICE_ROWS, *(pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=why))
                                                 for r, why in SERVICE_OUTSIDE.items())])
def test_service_figures_within_30_percent(service, rid):
    r = service.loc[rid]
    print(f"{rid} {r.config['model']}: model {r.predicted:.3g} vs {r.value_si:.3g} ({r.error:+.1%})")
    assert abs(r.error) <= 0.30


def test_speculation_lifts_the_70b_service_speed_as_a_wavefront():
    """S004's configuration with and without its draft: the verify step runs as a wavefront
    through the layer regions, so 4 drafted tokens at acceptance 0.8 (3.4 tokens per step)
    more than double the batch-1 speed (709 -> 1,623 tok/s when this was written); checking
    the 5 positions together, 5x rows per stage, gave 643, slower than no speculation."""
    base = predict.inference(hardware="cs3", model="llama_3_3_70b", batch=1, prompt=1000, generate=500,
                             weights="fp16", kv="fp16", devices="min")
    spec = predict.inference(hardware="cs3", model="llama_3_3_70b", batch=1, prompt=1000, generate=500,
                             weights="fp16", kv="fp16", devices="min", draft_model="llama_3_2_1b", draft_len=4,
                             acceptance=0.8)
    assert float(spec.output_tokens_per_s_per_user) > 2.0 * float(base.output_tokens_per_s_per_user)
    assert int(spec.devices) >= int(base.devices)  # the draft's regions are counted
