"""`predict.inference` and `predict.gemm` on wafer-scale hardware (cs2, cs3, bare wse2/wse3):
the same public outputs as a GPU, the wafer's own outputs, validation, capacity against the
public deployment, the grid search and batch='max' checked by brute force, and the
identities that tie the outputs together (DESIGN.md "Public interface", "Wafer-scale
engine model")."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_hardware, load_model
from workbench.backends import numbers
from workbench.workloads.wafer_inference import wafer_inference

PUBLIC_OUTPUTS = ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_device",
                  "output_tokens_per_s_per_user", "memory_per_device_bytes", "fits", "bound")
WAFER_OUTPUTS = ("pe_grid_decode", "pe_grid_prefill", "n_pes_used", "pe_memory_used_bytes", "decode_comm_s")
# The brief's four, plus "local_memory": wafer_inference labels a compute-side bound where
# the PE's FMA vector is held by its memory ports rather than its SIMD width (WSE-3: 8-wide
# fp16 SIMD, ports unchanged from WSE-2; test_mesh.py test_vector_cycles_is_the_max_...).
BOUNDS = {"compute", "local_memory", "mesh_reduction", "inter_system_io", "capacity"}
BASE = dict(model="llama_3_8b", batch=1, prompt=1024, generate=128, weights="fp16")


@pytest.mark.parametrize("hardware", ["cs3", "wse3", "cs2", "wse2"])
def test_wafer_returns_the_public_outputs_and_its_own(hardware):
    ds = predict.inference(hardware=hardware, **BASE)
    gpu = predict.inference(hardware="h100_sxm", **BASE)
    for name in PUBLIC_OUTPUTS:
        assert name in ds and name in gpu, name
        assert ds[name].ndim == 0, name
    for name in WAFER_OUTPUTS:
        assert name in ds, name
    assert bool(ds.fits) and str(ds.bound.values) in BOUNDS
    for name in PUBLIC_OUTPUTS[:7] + WAFER_OUTPUTS:
        assert np.isfinite(float(ds[name])) and float(ds[name]) >= 0, name
    # units come from the suffix, as for a GPU
    assert ds.tpot_s.attrs["units"] == "s" and ds.pe_memory_used_bytes.attrs["units"] == "B"


@pytest.mark.parametrize("bare, system", [("wse3", "cs3"), ("wse2", "cs2")])
def test_a_bare_wafer_is_one_system(bare, system):
    a = predict.inference(hardware=bare, **BASE)
    b = predict.inference(hardware=system, **BASE)
    for name in PUBLIC_OUTPUTS + WAFER_OUTPUTS:
        assert a[name].values == b[name].values, name


def test_a_sweep_puts_a_gpu_and_a_wafer_on_the_hardware_dimension():
    ds = predict.inference(hardware=["h100_sxm", "cs3"], batch=[1, 4], model="llama_3_8b", prompt=1024,
                           generate=128, weights="fp16")
    assert list(ds.hardware.values) == ["h100_sxm", "cs3"]
    assert dict(ds.sizes) == {"hardware": 2, "batch": 2}
    assert np.all(np.isfinite(ds.tpot_s.values)) and np.all(ds.tpot_s.values > 0)
    assert np.all(ds.fits.values)
    # wafer-only outputs are NaN on the GPU row, finite on the wafer row
    assert np.all(np.isnan(ds.pe_grid_decode.sel(hardware="h100_sxm").values))
    assert np.all(np.isfinite(ds.pe_grid_decode.sel(hardware="cs3").values))
    # each point of the sweep is the scalar call
    one = predict.inference(hardware="cs3", batch=4, model="llama_3_8b", prompt=1024, generate=128, weights="fp16")
    assert float(ds.tpot_s.sel(hardware="cs3", batch=4)) == pytest.approx(float(one.tpot_s), rel=1e-12)


# ---- capacity against the public deployment -------------------------------------------------
def test_llama_3_1_70b_fp16_does_not_fit_on_one_cs3():
    # 141 GB of fp16 weights against 44 GB of SRAM (wse_facts.md §6).
    ds = predict.inference(hardware="cs3", devices=1, model="llama_3_1_70b", batch=1, prompt=2048, generate=256,
                           weights="fp16")
    assert not bool(ds.fits)
    assert "not fit" in str(ds.reason.values) or "exceed" in str(ds.reason.values)
    assert str(ds.bound.values) == "capacity"


def test_llama_3_1_70b_fp16_fits_on_four_cs3():
    # wse_facts.md §6 "Inference mapping": the 70B Llama 3.1 service ran distributed across
    # four CS-3 systems (The Register, Hot Chips 2024).
    ds = predict.inference(hardware="cs3", devices=4, model="llama_3_1_70b", batch=1, prompt=2048, generate=256,
                           weights="fp16")
    assert bool(ds.fits), str(ds.reason.values)
    assert str(ds.reason.values) == ""
    # the layers are spread over the 4 wafers: more PEs than one wafer's program rectangle
    assert float(ds.n_pes_used) > load_hardware("wse3").program_pes
    assert float(ds.n_pes_used) <= 4 * load_hardware("wse3").program_pes
    assert float(ds.pe_memory_used_bytes) <= load_hardware("wse3").sram_per_pe_bytes
    assert float(ds.decode_io_s) > 0  # 3 crossings between systems per token


# ---- validation ------------------------------------------------------------------------------
def test_tp_on_a_wafer_is_an_input_error_naming_tp():
    with pytest.raises(InputError, match="tp"):
        predict.inference(hardware="cs3", tp=2, **BASE)
    with pytest.raises(InputError, match="pp"):
        predict.inference(hardware="cs3", pp=2, **BASE)
    with pytest.raises(InputError, match="tp"):
        predict.inference(hardware=["h100_sxm", "cs3"], tp=2, **BASE)


def test_unknown_mapping_is_an_input_error_naming_mapping():
    with pytest.raises(InputError, match="mapping"):
        predict.inference(hardware="cs3", mapping="foo", **BASE)
    with pytest.raises(InputError, match="mapping"):
        predict.gemm(hardware="wse2", m=1, n=4096, k=4096, dtype="fp16", mapping="foo")


@pytest.mark.parametrize("pe_grid", [0, -4, 2.5, [100, 0]])
def test_bad_pe_grid_is_an_input_error(pe_grid):
    with pytest.raises(InputError, match="pe_grid"):
        predict.inference(hardware="cs3", pe_grid=pe_grid, **BASE)


def test_fp8_activations_on_a_wafer_are_an_input_error():
    with pytest.raises(InputError, match="activations"):
        predict.inference(hardware="cs3", activations="fp8", **BASE)


# ---- mappings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("model, devices", [("llama_3_8b", 1), ("llama_3_1_70b", 4)])
def test_gpu_style_is_slower_than_mesh(model, devices):
    kw = dict(hardware="cs3", model=model, devices=devices, batch=1, prompt=2048, generate=256, weights="fp16")
    mesh = predict.inference(mapping="mesh", **kw)
    gpu = predict.inference(mapping="gpu_style", **kw)
    if not bool(gpu.fits):  # 70B on 4 systems: gpu_style's regions do not fit (its times NaN, as any such point)
        assert bool(mesh.fits) and "do not fit" in str(gpu.reason.values) and np.isnan(float(gpu.tpot_s))
        return
    assert float(gpu.tpot_s) > float(mesh.tpot_s)
    assert float(gpu.ttft_s) > float(mesh.ttft_s)
    # at the same explicit grid too
    P = int(mesh.pe_grid_decode)
    assert float(predict.inference(mapping="gpu_style", pe_grid=P, **kw).tpot_s) > float(mesh.tpot_s)


# ---- batch='max' -----------------------------------------------------------------------------------
# (7168 + 1024: the 8192 tokens of llama_3_8b's context; beyond it a point does not fit)
MAX_CASES = [("cs3", "llama_3_8b", 1, 2048, 256), ("cs3", "llama_3_8b", 1, 7168, 1024),
             ("cs2", "llama_3_8b", 1, 128, 128), ("cs3", "llama_3_1_70b", 4, 2048, 256),
             ("cs3", "llama_3_8b", 2, 128, 16)]


@pytest.mark.parametrize("hardware, model, devices, prompt, generate", MAX_CASES)
def test_batch_max_fits_and_one_more_does_not(hardware, model, devices, prompt, generate):
    kw = dict(hardware=hardware, model=model, devices=devices, prompt=prompt, generate=generate, weights="fp16")
    ds = predict.inference(batch="max", **kw)
    b, P = int(ds.batch), int(ds.pe_grid_decode)
    assert b >= 1 and bool(ds.fits)
    at_b = predict.inference(batch=b, pe_grid=P, **kw)
    past_b = predict.inference(batch=b + 1, pe_grid=P, **kw)
    assert bool(at_b.fits) and not bool(past_b.fits), str(past_b.reason.values)
    # b + 1 fits on no grid at all (brute force over every grid side), so b is the maximum
    side = int(numbers(hardware).max_square_grid)
    every = predict.inference(batch=b + 1, pe_grid=list(range(1, side + 1)), **kw)
    assert not np.any(every.fits.values)
    # and the throughput reported is the one at that batch
    again = predict.inference(batch=b, **kw)
    assert float(ds.output_tokens_per_s) == pytest.approx(float(again.output_tokens_per_s), rel=1e-12)


@pytest.mark.parametrize("pe_grid", [157, 160, 161, 300])
def test_batch_max_at_an_explicit_grid_is_the_largest_that_fits_there(pe_grid):
    # By brute force over the batch at that grid. At 157 and 160 the lm_head's regions (not
    # the per-PE bytes) bound the batch: the activations grow with it and leave the head's
    # PEs less room, so it needs more regions than the wafer has left.
    kw = dict(hardware="cs3", model="llama_3_8b", prompt=2048, generate=256, weights="fp16", pe_grid=pe_grid)
    b = int(predict.inference(batch="max", **kw).batch)
    fits = predict.inference(batch=list(range(1, 65)), **kw).fits.values
    brute = max([i + 1 for i, ok in enumerate(fits) if ok], default=0)
    assert b == brute
    if b:
        assert bool(predict.inference(batch="max", **kw).fits)
    else:
        assert not bool(predict.inference(batch="max", **kw).fits)


# ---- the grid search ----------------------------------------------------------------------------
SEARCH_CASES = [("cs3", "llama_3_8b", 1, 1), ("cs3", "llama_3_8b", 1, 16), ("cs2", "llama_3_8b", 1, 1),
                ("cs3", "llama_3_1_70b", 4, 1), ("cs3", "llama_2_7b", 1, 4)]


@pytest.mark.parametrize("hardware, model, devices, batch", SEARCH_CASES)
def test_chosen_decode_grid_is_the_fastest_feasible_nearby(hardware, model, devices, batch):
    kw = dict(hardware=hardware, model=model, devices=devices, batch=batch, prompt=2048, generate=256,
              weights="fp16")
    ds = predict.inference(**kw)
    P0, t0 = int(ds.pe_grid_decode), float(ds.tpot_s)
    assert bool(ds.fits)
    near = list(range(P0 - 8, P0 + 9))
    ex = predict.inference(pe_grid=near, **kw)
    assert float(ex.tpot_s.sel(pe_grid=P0)) == t0  # an explicit grid is the same computation
    for P, fits, t in zip(near, ex.fits.values, ex.tpot_s.values):
        assert (not fits) or t >= t0, (P, t, t0)


@pytest.mark.parametrize("hardware, model, devices, batch", SEARCH_CASES)
def test_chosen_decode_grid_is_the_fastest_feasible_of_all(hardware, model, devices, batch):
    # Every integer side, 1 to the largest square: the whole decode step (layers + lm_head)
    # is what the search minimizes, so tpot at the chosen side is the feasible minimum.
    kw = dict(hardware=hardware, model=model, devices=devices, batch=batch, prompt=2048, generate=256,
              weights="fp16")
    ds = predict.inference(**kw)
    grids = list(range(1, int(numbers(hardware).max_square_grid) + 1))
    ex = predict.inference(pe_grid=grids, **kw)
    tpot = np.where(ex.fits.values, ex.tpot_s.values, np.inf)
    assert float(ds.tpot_s) == pytest.approx(tpot.min(), rel=1e-12)
    assert int(ds.pe_grid_decode) == grids[int(np.argmin(tpot))]


def test_chosen_prefill_grid_is_the_fastest_feasible():
    wafer = numbers("cs3")
    kw = dict(w=wafer, model=load_model("llama_3_8b"), devices=np.array(1.0),
              batch=np.array(1.0), prompt=np.array(2048.0), generate=np.array(256.0), weights="fp16", kv="fp16")
    auto = wafer_inference(**kw)
    P_dec, P_pre = float(auto["pe_grid_decode"]), float(auto["pe_grid_prefill"])
    grids = np.arange(1.0, wafer.max_square_grid + 1)
    ex = wafer_inference(**{**kw, "devices": np.ones_like(grids), "batch": np.ones_like(grids)},
                         pe_grid=np.full_like(grids, P_dec), prefill_pe_grid=grids)
    ttft = np.where(ex["fits"], ex["ttft_s"], np.inf)
    # without prefill_pe_grid prefill runs on the decode grid (one program for both phases;
    # WaferLLM's separate grids are asked for by prefill_pe_grid): the fastest feasible prefill
    # grid there is within 1% of it (161 at 15.445 ms against 159's 15.540 ms)
    assert P_pre == P_dec
    assert ttft.min() <= float(auto["ttft_s"]) <= 1.01 * ttft.min()


def test_grids_larger_than_the_wafer_do_not_fit():
    ds = predict.inference(hardware="cs3", pe_grid=800, **BASE)  # wse3 program rectangle is 757 wide
    assert not bool(ds.fits) and str(ds.bound.values) == "capacity"


# ---- identities -------------------------------------------------------------------------------------
def test_output_identities():
    ds = predict.inference(hardware="cs3", model="llama_3_8b", batch=[1, 4, 16], prompt=[128, 2048],
                           generate=[16, 256], devices=[1, 2], weights="fp16")
    def same(a, b):
        np.testing.assert_allclose(a.values, b.transpose(*a.dims).values, rtol=1e-12)

    same(ds.e2e_s, ds.ttft_s + (ds.generate - 1) * ds.tpot_s)
    same(ds.output_tokens_per_s, ds.batch * ds.generate / ds.e2e_s)
    same(ds.output_tokens_per_s_per_device, ds.output_tokens_per_s / ds.devices)
    same(ds.output_tokens_per_s_per_user, 1 / ds.tpot_s)
    same(ds.tpot_s, ds.decode_compute_s + ds.decode_comm_s + ds.decode_io_s)
    assert set(np.unique(ds.bound.values)) <= BOUNDS
    # pe_grid is a whole number of PEs a side and fits in the program rectangle
    assert np.all(ds.pe_grid_decode == np.round(ds.pe_grid_decode))
    assert np.all(ds.pe_grid_decode <= load_hardware("wse3").max_square_grid)


def test_bound_names_the_largest_part():
    kw = dict(model="llama_3_8b", prompt=128, generate=16, weights="fp16")
    ds = predict.inference(hardware=["cs2", "cs3"], batch=[1, 8, 256], devices=[1, 4, 16], pe_grid=[64, 160, 400],
                           **kw)
    assert set(np.unique(ds.bound.values)) <= BOUNDS
    fits = ds.fits.values
    assert np.all((ds.bound.values == "capacity") == ~fits)
    comp, comm, io = ds.decode_compute_s.values, ds.decode_comm_s.values, ds.decode_io_s.values
    b = ds.bound.values
    assert np.all((b == "inter_system_io") == (fits & (io >= np.maximum(comp, comm))))
    assert np.all((b == "mesh_reduction") == (fits & (io < np.maximum(comp, comm)) & (comm >= comp)))
    # batch 1 on one system at the chosen grid: the reductions (wse_facts.md §9)
    assert str(predict.inference(hardware="cs3", batch=1, **kw).bound.values) == "mesh_reduction"
    assert str(predict.inference(hardware="cs3", batch=1, pe_grid=800, **kw).bound.values) == "capacity"
    # a small model pipelined over 16 systems, a layer each: 15 crossings of 10 us each (cs3.yaml
    # io_latency_s); with fewer layers than systems the layout cannot run (tests/test_layout.py)
    tiny = dict(name="tiny", d_model=512, n_heads=8, n_kv_heads=8, head_dim=64, d_ff=1024, n_layers=16,
                vocab_size=1000)
    io = predict.inference(hardware="cs3", model=tiny, batch=1, devices=16, prompt=128, generate=16, weights="fp16")
    assert bool(io.fits) and str(io.bound.values) == "inter_system_io"
    assert float(io.decode_io_s) == pytest.approx(15 * (10e-6 + 512 * 2.0 / 150e9))
    # compute-side bounds appear for large batches on small grids (256 sequences over 32
    # layers: micro-batches of 8 rows, wafer_inference.decode_step)
    assert {"compute", "local_memory"} & set(np.unique(ds.bound.values))


# ---- gemm on a wafer ----------------------------------------------------------------------------
def test_wafer_gemv_is_bound_by_the_mesh_reduction_and_gemm_by_compute():
    ds = predict.gemm(hardware="wse2", m=[1, 4096], n=8192, k=8192, dtype="fp16")
    assert str(ds.bound.sel(m=1).values) == "mesh_reduction"
    assert str(ds.bound.sel(m=4096).values) == "compute"
    assert float(ds.pe_grid.sel(m=1)) == 750  # default: the largest square of 750 x 994 (§4)
    np.testing.assert_allclose(ds.flops, 2.0 * ds.m * 8192 * 8192)
    np.testing.assert_allclose(ds.flops_per_s, ds.flops / ds.time_s)
    # never above the derived dense peak of the region (2 x 4 x P² x 1.1 GHz)
    assert np.all(ds.flops_per_s <= 2 * 4 * 750**2 * 1.1e9)
