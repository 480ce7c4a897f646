"""What fits on the wafers under placement "regions" (workloads/wafer_inference.py) and what a
point that does not fit reports: prefill's activation rows counted against the SRAM its
layer regions leave, the lm_head timed on the regions placement gives it, the grid closest
to fitting with the constraint that stops it, no times where nothing is placed, and one
definition of a wafer's memory capacity."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import as_numbers
from workbench.primitives.mesh import mesh_gemv, tiles
from workbench.specs import load_model
from workbench.workloads.wafer_inference import decode_step, lm_head_regions, placement
from workbench.workloads.wafer_layers import layer_memory_per_pe

W70 = dict(hardware="cs3", model="llama_3_1_70b", weights="fp16", kv="fp16")


def test_prefill_rows_in_flight_fit_the_sram_the_regions_leave():
    """Llama 3.1 70B on 4 CS-3, batch 64 of 64 + 16 tokens: decode runs 64 micro-batches of
    one row (48,523 B a PE at P=205), but prefill ran all 64 sequences' chunk at once: 64
    rows, 116,563 B a PE, reported fits=True. Now the chunk holds what fits: its rows are
    counted and the fullest PE during prefill is within the 48 KB of SRAM (wse_facts.md §1)."""
    ds = predict.inference(devices=4, batch=64, prompt=64, generate=16, **W70)
    w, m = as_numbers("cs3"), load_model("llama_3_1_70b")
    P = float(ds.pe_grid_decode)
    rows = float(ds.prefill_chunk_tokens) * float(ds.prefill_chunk_sequences)
    held = layer_memory_per_pe(w, m, P=P, batch=64.0, tokens=80.0, generated=16.0, w_bytes=2.0, kv_bytes=2.0,
                               rows_in_flight=rows)["total_bytes"]
    assert bool(ds.fits) and float(ds.prefill_pe_memory_used_bytes) == pytest.approx(float(held))
    assert float(held) <= w.sram_per_pe_bytes
    all_at_once = layer_memory_per_pe(w, m, P=P, batch=64.0, tokens=80.0, generated=16.0, w_bytes=2.0,
                                      kv_bytes=2.0, rows_in_flight=64.0)["total_bytes"]
    assert float(all_at_once) > w.sram_per_pe_bytes  # what the old prefill ran
    assert float(ds.prefill_chunk_sequences) < 64


def test_default_70b_prefill_takes_chunks_that_fit():
    """Batch 1, 2,048-token prompt: 4-token chunks needed ~51.5 KB a PE at P=205 (more than
    48 KB); the chunk taken now fits."""
    ds = predict.inference(devices=4, batch=1, prompt=2048, generate=256, **W70)
    w, m = as_numbers("cs3"), load_model("llama_3_1_70b")
    four = layer_memory_per_pe(w, m, P=float(ds.pe_grid_decode), batch=1.0, tokens=2304.0, generated=256.0,
                               w_bytes=2.0, kv_bytes=2.0, rows_in_flight=4.0)["total_bytes"]
    assert float(four) > w.sram_per_pe_bytes
    assert bool(ds.fits) and float(ds.prefill_pe_memory_used_bytes) <= w.sram_per_pe_bytes
    assert float(ds.prefill_chunk_tokens) * float(ds.prefill_chunk_sequences) < 4


def test_the_lm_head_is_timed_on_the_regions_that_hold_it():
    """At P=205 one region cannot hold Llama 3.1 70B's lm_head (ceil(8192/205) x
    ceil(128256/205) x 2 B = 50,080 B a PE > 49,152): placement gives it R regions (with the
    untied embedding beside it), each holding ceil(V/R) columns within a PE's room, and the
    decode step's head stage is one of them (they run side by side)."""
    w, m = as_numbers("cs3"), load_model("llama_3_1_70b")
    P = 205.0
    assert tiles(8192, P) * tiles(128256, P) * 2.0 > w.sram_per_pe_bytes
    place = placement(w, m, P=P, devices=4.0, batch=1.0, tokens=2304.0, generated=256.0, w_bytes=2.0,
                      kv_bytes=2.0, mapping="mesh")
    R = float(place["head_regions"])
    assert R > 1
    free = w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes - float(place["row_bytes"])  # one row buffered
    assert tiles(8192, P) * tiles(np.ceil(128256 / R), P) * 2.0 * 2.0 <= free  # head + embedding columns
    assert float(lm_head_regions(m, P=P, free_per_pe=free, w_bytes=2.0)) == R
    ctx = 2048.0 + 256.0 / 2  # the mean decode context of predict.inference's defaults
    one = decode_step(w, m, P=P, batch=1.0, context=ctx, devices=4.0)
    split = decode_step(w, m, P=P, batch=1.0, context=ctx, devices=4.0, head_regions=R)
    whole = mesh_gemv(w, P=P, k=8192, n=128256)["cycles"] / w.clock_hz
    part = mesh_gemv(w, P=P, k=8192, n=np.ceil(128256 / R))["cycles"] / w.clock_hz
    assert float(one["step_s"] - split["step_s"]) == pytest.approx(float(whole - part), rel=1e-9)
    ds = predict.inference(devices=4, batch=1, pe_grid=205, **W70)
    assert float(ds.lm_head_regions) == R
    assert float(ds.tpot_s) == pytest.approx(float(split["step_s"]), rel=1e-9)


def test_one_token_past_the_longest_generation_names_the_kv_cache():
    """generate="max" is 9,525 tokens for 70B on 4 CS-3 (P=205); one more does not fit. It was
    reported on the largest grid (757) as "the layer regions do not fit"; the grid closest to
    fitting is 205, where the cache overflows the SRAM the weights leave, by a few bytes."""
    kw = dict(devices=4, batch=1, prompt=2048, **W70)
    most = predict.inference(generate="max", **kw)
    assert bool(most.fits)
    past = predict.inference(generate=int(most.generate) + 1, **kw)
    assert not bool(past.fits)
    assert str(past.reason.values) == "the KV cache overflows the SRAM a layer region's weights leave"
    assert float(past.pe_grid_decode) == float(most.pe_grid_decode)
    over = float(past.pe_memory_used_bytes) - as_numbers("cs3").sram_per_pe_bytes
    assert 0 < over < 1000


def test_a_point_that_does_not_fit_shows_no_better_answer():
    """70B on 2 CS-3 does not fit; it showed 1.23 ms TPOT and $56 per million tokens, faster
    and cheaper than the 4 systems that hold it. Its times, rates and costs are NaN (nothing
    is placed to time, as a GPU layout that cannot run); memory and grid stay."""
    ds = predict.inference(devices=[2, 4], batch=1, **W70)
    two, four = ds.sel(devices=2), ds.sel(devices=4)
    assert not bool(two.fits) and bool(four.fits)
    assert str(two.reason.values) == "the layer regions do not fit on the wafers"
    for name in ("tpot_s", "ttft_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_device",
                 "output_tokens_per_s_per_user", "cost_per_million_tokens_usd"):
        assert np.isnan(float(two[name])) and np.isfinite(float(four[name])), name
    for name in ("memory_per_device_bytes", "pe_memory_used_bytes", "pe_grid_decode", "memory_capacity_bytes"):
        assert np.isfinite(float(two[name])), name


def test_memory_capacity_is_the_usable_sram_everywhere():
    """One CS-3: (48 KB less each PE's reserve) x its program PEs, the same for inference
    (both placements) and training (it read 43.6 GB, reserve included, for inference and
    38.2 GB, reserve excluded, for training)."""
    w = as_numbers("cs3")
    usable = (w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes) * w.program_pes
    kw = dict(hardware="cs3", devices=1, model="llama_3_1_8b")
    got = [float(predict.inference(batch=1, weights="fp16", placement=p, **kw).memory_capacity_bytes)
           for p in ("regions", "streaming")]
    got.append(float(predict.training(global_batch=64, seq_len=2048, **kw).memory_capacity_bytes))
    assert got == pytest.approx([usable] * 3, rel=1e-12)


def test_memory_used_never_exceeds_capacity_where_a_point_fits():
    """memory_per_device_bytes and memory_capacity_bytes count the same SRAM (each PE's
    reserve left out of both): a point that fits uses at most the capacity, in regions and
    streaming placements alike (70B at generate='max' had shown 42.9 GB of 38.2)."""
    from workbench import predict
    for kw in (dict(model="llama_3_1_70b", devices=4, generate="max"), dict(model="llama_3_1_8b", devices=1),
               dict(model="mixtral_8x7b", devices="min"), dict(model="llama_3_1_8b", devices=[1, 2], placement="streaming")):
        r = predict.inference(hardware="cs3", weights="fp16", **kw)
        used, cap = r.memory_per_device_bytes.where(r.fits), r.memory_capacity_bytes
        assert bool(r.fits.any()) and bool((used.fillna(0.0) <= cap).all()), kw
