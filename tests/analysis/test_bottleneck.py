"""workbench.analysis.bottleneck: shares of the phase's time per resource and per
operation class sum to 1, `dominant` is the argmax, on synthetic terms and on real GPU,
wafer and mixed sweeps."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.analysis import bottleneck
from workbench.analysis.bottleneck import CLASSES, RESOURCES
from workbench.errors import InputError


def synthetic(seed: int, resources=("compute", "memory", "comm", "overhead"), phase="decode"):
    rng = np.random.default_rng(seed)
    coords = {"batch": [1, 8, 64], "tp": [1, 2, 4, 8]}
    ds = xr.Dataset(coords=coords)
    for r in resources:
        ds[f"{phase}_{r}_s"] = (("batch", "tp"), rng.random((3, 4)) * 1e-3, {"units": "s"})
    return ds


def check_shares(ds, out, phase, parts, suffix, dominant):
    """share_r = t_r / Σ t over the finite terms (closed form); Σ shares = 1; dominant is
    the argmax (first in order on a tie)."""
    t = np.stack([ds[f"{phase}_{p}_s"].broadcast_like(out[f"{parts[0]}{suffix}"]).values for p in parts], -1)
    total = np.nansum(t, axis=-1)
    shares = np.stack([out[f"{p}{suffix}"].values for p in parts], -1)
    np.testing.assert_allclose(shares, t / total[..., None], rtol=1e-12)
    np.testing.assert_allclose(np.nansum(shares, axis=-1), 1.0, rtol=1e-12)
    want = np.array(parts, dtype=object)[np.nanargmax(np.where(np.isnan(shares), -np.inf, shares), -1)]
    np.testing.assert_array_equal(out[dominant].values, want)
    for p in parts:
        assert out[f"{p}{suffix}"].attrs["units"] == "1"


@pytest.mark.parametrize("seed", range(3))
def test_synthetic_shares(seed):
    ds = synthetic(seed)
    out = bottleneck(ds)
    check_shares(ds, out, "decode", ["compute", "memory", "comm", "overhead"], "_share", "dominant")
    np.testing.assert_allclose(out.total_s.values, sum(ds[f"decode_{r}_s"] for r in
                                                       ("compute", "memory", "comm", "overhead")).values)
    assert out.total_s.attrs["units"] == "s"
    assert dict(out.sizes) == dict(ds.sizes) and list(out.batch.values) == [1, 8, 64]
    assert not any(v.endswith("_class_share") for v in out.data_vars)  # no class terms given
    assert "io_share" not in out


def test_only_present_resources_and_another_phase():
    ds = synthetic(0, resources=("compute", "io"), phase="prefill")
    out = bottleneck(ds, phase="prefill")
    assert sorted(v for v in out.data_vars if v.endswith("_share")) == ["compute_share", "io_share"]
    check_shares(ds, out, "prefill", ["compute", "io"], "_share", "dominant")


def test_closed_form_example_tie_and_zero():
    # times (compute, memory, comm, overhead): (1, 3, 0, 0) -> 0.25, 0.75, 0, 0: memory;
    # (2, 2, 0, 0) -> a tie, the first in RESOURCES order wins: compute; all zero -> none.
    ds = xr.Dataset({"decode_compute_s": ("p", [1.0, 2.0, 0.0]), "decode_memory_s": ("p", [3.0, 2.0, 0.0]),
                     "decode_comm_s": ("p", [0.0, 0.0, 0.0]), "decode_overhead_s": ("p", [0.0, 0.0, 0.0])})
    out = bottleneck(ds)
    np.testing.assert_allclose(out.compute_share.values[:2], [0.25, 0.5])
    np.testing.assert_allclose(out.memory_share.values[:2], [0.75, 0.5])
    assert list(out.dominant.values) == ["memory", "compute", "none"]
    assert np.isnan(out.compute_share.values[2])


def test_class_shares():
    rng = np.random.default_rng(4)
    ds = synthetic(1)
    for c in ("matmul", "attention", "elementwise"):
        ds[f"decode_{c}_s"] = (("batch", "tp"), rng.random((3, 4)) * 1e-3)
    out = bottleneck(ds)
    check_shares(ds, out, "decode", list(CLASSES), "_class_share", "dominant_class")
    assert out.attrs["classes"] == "matmul, attention, elementwise, comm"


def test_nan_terms_are_absent_at_that_point():
    ds = synthetic(2, resources=RESOURCES)
    ds["decode_io_s"][0, :] = np.nan
    ds["decode_memory_s"][1, :] = np.nan
    out = bottleneck(ds)
    assert np.isnan(out.io_share.values[0]).all() and np.isnan(out.memory_share.values[1]).all()
    check_shares(ds, out, "decode", list(RESOURCES), "_share", "dominant")


# ---- real sweeps -------------------------------------------------------------------------------
def test_gpu_sweep():
    ds = predict.inference(hardware=["h100_sxm", "h200_sxm"], model="llama_3_1_70b", tp=[4, 8],
                           batch=[1, 8, 64, 256], prompt=[512, 2048, 8192], generate=256, weights="fp8")
    for phase in ("decode", "prefill"):
        out = bottleneck(ds, phase=phase)
        present = [r for r in RESOURCES if f"{phase}_{r}_s" in ds]
        assert present == ["compute", "memory", "comm", "overhead"]
        check_shares(ds, out, phase, present, "_share", "dominant")
        # The resource sum is the serial upper bound of the step (DESIGN.md "Cost primitives").
        if phase == "decode":
            np.testing.assert_allclose(out.total_s.values, ds.tpot_upper_s.values, rtol=1e-12)
        classes = [c for c in CLASSES if f"{phase}_{c}_s" in ds]
        if set(classes) - {"comm"}:  # the per-class terms, once the workload returns them
            check_shares(ds, out, phase, classes, "_class_share", "dominant_class")
    # At batch 1 a 70B decode step is bound by reading the weights.
    assert (bottleneck(ds).dominant.sel(batch=1) == "memory").all()


def test_wafer_and_mixed_sweeps():
    wafer = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=[1, 8], prompt=512, generate=128,
                              weights="fp8")
    out = bottleneck(wafer)
    present = [r for r in RESOURCES if f"decode_{r}_s" in wafer]
    assert "io" in present and "memory" not in present
    check_shares(wafer, out, "decode", present, "_share", "dominant")

    mixed = predict.inference(hardware=["h100_sxm", "cs3"], model="llama_3_1_8b", batch=[1, 8], prompt=512,
                              generate=128, weights="fp8")
    out = bottleneck(mixed)
    present = [r for r in RESOURCES if f"decode_{r}_s" in mixed]
    check_shares(mixed, out, "decode", present, "_share", "dominant")
    # A GPU has no io term and a wafer no HBM term: NaN shares there, not zero.
    assert np.isnan(out.io_share.sel(hardware="h100_sxm")).all()
    assert np.isnan(out.memory_share.sel(hardware="cs3")).all()


def test_errors_list_the_phases():
    ds = synthetic(0)
    ds["prefill_compute_s"] = ds.decode_compute_s
    with pytest.raises(ValueError, match=r"phase='train'.*train_compute_s.*allowed: decode, prefill"):
        bottleneck(ds, phase="train")
    with pytest.raises(ValueError, match=r"ds=DataArray"):
        bottleneck(ds.decode_compute_s)


def test_serving_shares_are_of_the_whole_decode_step():
    """predict.serving returns the decode step's operation classes (decode_comm_s among them)
    and the step itself, no resource breakdown: no resource shares (comm was 100% of
    'decode' once, the only decode_<resource>_s), and the class shares, with the draft
    passes and the host overhead beside the kernels, add up to decode_iteration_s."""
    ds = predict.serving(hardware="h100_sxm", model="llama_3_1_70b", tp=8, weights="fp8", concurrency=[8, 64],
                         draft_len=[0, 2], acceptance=0.7)
    out = bottleneck(ds)
    assert "dominant" not in out and "comm_share" not in out and out.attrs["resources"] == ""
    parts = ["matmul", "attention", "elementwise", "comm", "draft", "overhead"]
    assert sorted(v for v in out.data_vars if v.endswith("_class_share")) == sorted(f"{p}_class_share" for p in parts)
    np.testing.assert_allclose(out.class_total_s, ds.decode_iteration_s.transpose(*out.class_total_s.dims),
                               rtol=1e-12)
    np.testing.assert_allclose(sum(out[f"{p}_class_share"] for p in parts), 1.0, rtol=1e-12)
    kernels = sum(ds[f"decode_{c}_s"] for c in ("matmul", "attention", "elementwise", "comm"))
    host = ds.decode_iteration_s - kernels - ds.decode_draft_s
    assert (host > 0).all()  # the kernels and the draft fit inside the step: the rest is the host's, not a clamp
    np.testing.assert_allclose(out.overhead_class_share, (host / ds.decode_iteration_s).transpose(
        *out.overhead_class_share.dims), rtol=1e-9)
    assert (out.overhead_class_share > 0).all() and (out.comm_class_share < 0.5).all()
    assert (out.draft_class_share.sel(draft_len=2) > 0).all() and (out.draft_class_share.sel(draft_len=0) == 0).all()
    assert (out.dominant_class.sel(concurrency=8) == "matmul").all()  # 70B in FP8 at 8 requests: the weights


@pytest.mark.parametrize("parts", [("comm",), ("comm", "overhead"), ("io",)])
def test_a_phase_without_its_work_is_refused_not_one_share(parts):
    """A phase whose only times are add-ons (comm, overhead, io) has no breakdown: refused
    in one line, never a 100% share of one part taken as the whole."""
    ds = synthetic(0, resources=parts)
    with pytest.raises(InputError, match=r"phase='decode' is not allowed.*decode_compute_s.*allowed: \(none"):
        bottleneck(ds)
    training = predict.training(hardware="h100_sxm", model="llama_3_1_8b", devices=8, global_batch=64)
    with pytest.raises(InputError, match=r"phase='tp' is not allowed"):
        bottleneck(training, phase="tp")  # tp_comm_s is one part of a training step
