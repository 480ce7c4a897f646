"""The public interface `workbench.predict`: input types and dimensions, units, input
validation, infeasible points as data, batch='max', monotonicity and the identities that
tie the outputs together (DESIGN.md, "Public interface")."""
from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES

BASE = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=8, prompt=1024, generate=128)
PUBLIC_OUTPUTS = ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_device",
                  "output_tokens_per_s_per_user", "memory_per_device_bytes", "fits", "bound")


# ---- shapes and dimensions -------------------------------------------------------------------
def test_scalars_give_a_zero_dimensional_dataset():
    ds = predict.inference(**BASE)
    assert isinstance(ds, xr.Dataset)
    assert dict(ds.sizes) == {}
    for name in PUBLIC_OUTPUTS:
        assert ds[name].ndim == 0, name
    assert ds.attrs["function"] == "predict.inference"
    assert "workbench_version" in ds.attrs


def test_lists_become_dimensions_named_after_the_argument():
    ds = predict.inference(**{**BASE, "batch": [1, 8, 64], "prompt": [128, 2048],
                              "hardware": ["h100_sxm", "h200_sxm"]})
    assert dict(ds.sizes) == {"hardware": 2, "batch": 3, "prompt": 2}
    assert list(ds.batch.values) == [1, 8, 64] and list(ds.prompt.values) == [128, 2048]
    assert list(ds.hardware.values) == ["h100_sxm", "h200_sxm"]
    # Each point of the sweep is the scalar call.
    one = predict.inference(**{**BASE, "batch": 64, "prompt": 128, "hardware": "h200_sxm"})
    point = ds.sel(hardware="h200_sxm", batch=64, prompt=128)
    for name in ("ttft_s", "tpot_s", "memory_per_device_bytes"):
        assert float(point[name]) == pytest.approx(float(one[name]), rel=1e-12), name


def test_dataarray_input_keeps_its_dimension():
    users = xr.DataArray([1, 16], dims="users", coords={"users": [1, 16]})
    ds = predict.inference(**{**BASE, "batch": users})
    assert "users" in ds.dims and "batch" not in ds.dims
    assert list(ds.users.values) == [1, 16]
    assert float(ds.tpot_s.sel(users=16)) == pytest.approx(float(predict.inference(**{**BASE, "batch": 16}).tpot_s))


def test_dataarrays_broadcast_by_name():
    batch = xr.DataArray([1, 8], dims="batch")
    prompt = xr.DataArray([512, 4096], dims="ctx")
    ds = predict.inference(**{**BASE, "batch": batch, "prompt": prompt})
    assert set(ds.tpot_s.dims) == {"batch", "ctx"}


def test_units_attributes():
    ds = predict.inference(**BASE)
    assert ds.ttft_s.attrs["units"] == "s"
    assert ds.tpot_s.attrs["units"] == "s"
    assert ds.e2e_s.attrs["units"] == "s"
    assert ds.memory_per_device_bytes.attrs["units"] == "B"
    assert ds.output_tokens_per_s.attrs["units"] == "tokens/s"
    assert ds.output_tokens_per_s_per_device.attrs["units"] == "tokens/s"
    assert ds.output_tokens_per_s_per_user.attrs["units"] == "tokens/s"
    for name in ds.data_vars:
        assert ds[name].attrs.get("long_name"), name


# ---- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, arg, value", [
    ({"hardware": "h800"}, "hardware", "h800"),
    ({"model": "gpt5"}, "model", "gpt5"),
    ({"batch": 0}, "batch", "0"),
    ({"batch": -4}, "batch", "-4"),
    ({"batch": [1, 0]}, "batch", "0"),
    ({"tp": 2.5}, "tp", "2.5"),
    ({"pp": 0}, "pp", "0"),
    ({"prompt": 0}, "prompt", "0"),
    ({"generate": 1.5}, "generate", "1.5"),
    ({"weights": "fp6"}, "weights", "fp6"),
    ({"kv": "e4m3"}, "kv", "e4m3"),
    ({"activations": "fp12"}, "activations", "fp12"),
    ({"batch": "maximum"}, "batch", "maximum"),
])
def test_bad_input_names_the_argument_and_value(kwargs, arg, value):
    with pytest.raises(InputError) as e:
        predict.inference(**{**BASE, **kwargs})
    msg = str(e.value)
    assert f"{arg}=" in msg and value in msg, msg
    assert "allowed" in msg, msg


@pytest.mark.parametrize("kwargs, reason", [
    ({"tp": 3}, r"tp=3 .*n_heads=64.*allowed: 1, 2, 4, 8, 16, 32, 64"),  # llama_3_1_70b has 64 query heads
    ({"devices": 12}, r"devices=12 is not a multiple of tp\*pp=8"),
])
def test_a_layout_that_cannot_run_is_flagged_with_its_reason(kwargs, reason):
    ds = predict.inference(**{**BASE, **kwargs})
    assert not bool(ds.fits) and np.isnan(float(ds.tpot_s))
    assert re.search(reason, str(ds.reason.values)), str(ds.reason.values)


def test_a_bad_layout_leaves_the_rest_of_the_sweep():
    ds = predict.inference(**{**BASE, "tp": [8, 3]})
    assert bool(ds.fits.sel(tp=8)) and not bool(ds.fits.sel(tp=3))


@pytest.mark.parametrize("fn, kwargs, arg", [
    (predict.gemm, dict(hardware="h100_sxm", m=0, n=1, k=1), "m"),
    (predict.gemm, dict(hardware="h100_sxm", m=1, n=1, k=1, dtype="fp6"), "dtype"),
    (predict.attention, dict(hardware="h100_sxm", batch=1, seq_len=-1, n_heads=1, head_dim=1), "seq_len"),
    (predict.attention, dict(hardware="tpu", batch=1, seq_len=1, n_heads=1, head_dim=1), "hardware"),
])
def test_bad_input_other_fronts(fn, kwargs, arg):
    with pytest.raises(InputError, match=f"{arg}="):
        fn(**kwargs)


# ---- infeasible points are data -------------------------------------------------------------
def test_over_memory_config_is_a_result_not_an_exception():
    # Llama 3.1 405B in bf16 is 2 B x 405e9 = 810 GB of weights; one H100 holds 80 GB.
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_405b", tp=1, batch=1, weights="bf16")
    assert not bool(ds.fits)
    assert str(ds.reason.values).strip()
    assert float(ds.memory_per_device_bytes) > float(ds.memory_capacity_bytes)


def test_fp8_math_on_a100_does_not_fit_and_fp8_weights_run_weight_only():
    # A100 has no FP8 tensor cores (A100 datasheet; specs/hardware/a100_sxm.yaml has no fp8 peak):
    # FP8 math does not fit; FP8 weights run W8A16 there (vLLM's FP8 Marlin, docs.vllm.ai
    # features/quantization/fp8), reading half the bytes of bf16 weights.
    ds = predict.inference(hardware="a100_sxm", model="llama_3_1_8b", tp=1, batch=1, weights="fp8", activations="fp8")
    assert not bool(ds.fits)
    assert "fp8" in str(ds.reason.values)
    w8, w16 = (predict.inference(hardware="a100_sxm", model="llama_3_1_8b", tp=1, batch=1, weights=w)
               for w in ("fp8", "bf16"))
    assert bool(w8.fits) and str(w8.activations.values) == "bf16"
    m = load_model("llama_3_1_8b")  # FP8 layers, 16-bit embeddings and LM head (inference.weight_bytes)
    half = (m.n_params + m.embedding_params) / (2.0 * m.n_params)
    assert float(w8.weights_per_device_bytes) == pytest.approx(float(w16.weights_per_device_bytes) * half, rel=1e-9)
    assert float(w8.tpot_s) < 0.7 * float(w16.tpot_s)  # decode reads the weights: memory-bound


def test_infeasible_points_stay_in_a_sweep():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=[1, 8], batch=1, weights="bf16")
    assert dict(ds.sizes) == {"tp": 2}
    # 70.6e9 params x 2 B = 141 GB: does not fit on one 80 GB H100, fits on eight.
    assert list(ds.fits.values) == [False, True]
    assert str(ds.reason.sel(tp=1).values) and not str(ds.reason.sel(tp=8).values)


# ---- batch = "max" ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8, prompt=2048, generate=256, weights="fp8"),
    dict(hardware="a100_sxm", model="llama_2_7b", tp=1, prompt=1024, generate=1024),
    dict(hardware="h200_sxm", model="mixtral_8x7b", tp=2, prompt=4096, generate=512, kv="fp8"),
])
def test_batch_max_is_the_largest_batch_that_fits(kwargs):
    ds = predict.inference(batch="max", **kwargs)
    b = int(ds.batch)
    assert b >= 1 and bool(ds.fits)
    assert bool(predict.inference(batch=b, **kwargs).fits)
    assert not bool(predict.inference(batch=b + 1, **kwargs).fits)
    # The throughput reported is the one at that batch.
    at_b = predict.inference(batch=b, **kwargs)
    assert float(ds.output_tokens_per_s) == pytest.approx(float(at_b.output_tokens_per_s), rel=1e-9)


def test_batch_max_when_nothing_fits():
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_405b", tp=1, batch="max")
    assert not bool(ds.fits) and int(ds.batch) == 0


# ---- monotonicity ---------------------------------------------------------------------------
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
PROMPTS = [128, 256, 512, 1024, 2048, 4096, 8192]
GENERATE = 128  # tokens each sweep point generates
CONFIGS = [  # (hardware, model, tp, weights)
    ("h100_sxm", "llama_3_1_70b", 8, "fp8"),
    ("h100_sxm", "llama_2_7b", 1, "bf16"),
    ("h200_sxm", "llama_3_1_8b", 1, "bf16"),
    ("a100_sxm", "llama_2_7b", 1, "bf16"),
    ("b200", "llama_3_1_70b", 8, "fp8"),
    ("mi300x", "llama_3_1_70b", 4, "bf16"),
    ("h100_sxm", "mixtral_8x7b", 2, "bf16"),
]


def _sweep(cfg):
    hardware, model, tp, weights = cfg
    return predict.inference(hardware=hardware, model=model, tp=tp, batch=BATCHES, prompt=PROMPTS,
                             generate=GENERATE, weights=weights)


def _ids(c):
    return f"{c[0]}-{c[1]}-tp{c[2]}-{c[3]}"


def _one_decode_kernel(cfg, dim: str) -> xr.DataArray:
    """True for each step along `dim` of the sweep that stays on one TensorRT-LLM decode
    kernel: where the GPU's tables carry the MMHA fallback (primitives/xqa_dispatch.py), a
    step whose points run XQA over some of their caches (prompt to prompt + generate) and
    MMHA over others is left out. Across that boundary the measured kernel is slower at the
    shorter cache (H100: 37 us at 4,096 keys, 21 us at 8,192; tests/primitives/
    test_xqa_dispatch.py), so TPOT may fall there as it does on the GPU."""
    from workbench.backends import numbers
    from workbench.primitives.xqa_dispatch import FALLBACK, runs_xqa
    hardware, model, tp, _ = cfg
    hw = numbers(hardware, framework=None)
    batch, prompt = xr.DataArray(BATCHES, dims="batch", coords={"batch": BATCHES}), \
        xr.DataArray(PROMPTS, dims="prompt", coords={"prompt": PROMPTS})
    if hw.kernels is None or hw.fitted("decode_attention", "bf16/bf16" + FALLBACK)[0] is None:
        return xr.ones_like(batch * prompt, dtype=bool).isel({dim: slice(1, None)})
    slices = batch * max(load_model(model).n_kv_heads / tp, 1.0)
    ends = [runs_xqa(slices=slices, history=prompt + g, n_sms=hw.n_sms) for g in (0.0, GENERATE)]
    kernel = xr.where(ends[0] == ends[1], ends[0].astype(int), -1)  # -1: the point's cache crosses the boundary
    same = (kernel >= 0) & (kernel == kernel.shift({dim: 1}))
    return same.isel({dim: slice(1, None)})


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_tpot_non_decreasing_in_batch(cfg):
    step = _sweep(cfg).tpot_s.diff("batch")
    assert bool((step >= 0).where(_one_decode_kernel(cfg, "batch"), True).all())


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_tpot_non_decreasing_in_prompt(cfg):
    # A longer prompt means a longer KV cache to read at every decode step.
    step = _sweep(cfg).tpot_s.diff("prompt")
    assert bool((step >= 0).where(_one_decode_kernel(cfg, "prompt"), True).all())


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_ttft_increasing_in_prompt(cfg):
    assert bool((_sweep(cfg).ttft_s.diff("prompt") > 0).all())


@pytest.mark.parametrize("model, tp, weights", [("llama_3_1_70b", 8, "fp8"), ("llama_2_7b", 1, "bf16"),
                                                ("llama_3_1_8b", 1, "bf16"), ("mixtral_8x7b", 2, "bf16")])
def test_h200_never_slower_per_token_than_h100(model, tp, weights):
    # Same die and compute (A16 notes), 4.8 vs 3.35 TB/s HBM (A18b, A17b): decode can only gain.
    ds = predict.inference(hardware=["h100_sxm", "h200_sxm"], model=model, tp=tp, batch=BATCHES,
                           prompt=PROMPTS, generate=128, weights=weights)
    assert bool((ds.tpot_s.sel(hardware="h200_sxm") <= ds.tpot_s.sel(hardware="h100_sxm")).all())


# ---- identities ------------------------------------------------------------------------------
def _close(actual, expected, rtol=1e-12):
    """assert_allclose after aligning two DataArrays by dimension name."""
    a, e = xr.broadcast(actual, expected)
    np.testing.assert_allclose(a.transpose(*e.dims).values, e.values, rtol=rtol)


@pytest.fixture(scope="module")
def sweep():
    return predict.inference(hardware=["h100_sxm", "a100_sxm"], model="llama_3_1_8b", tp=[1, 2],
                             pp=[1, 2], batch=[1, 16, 128], prompt=[256, 4096], generate=[1, 64, 512])


def test_e2e_is_ttft_plus_decode_steps(sweep):
    # Static batching: the first token comes out of prefill, then generate-1 decode steps.
    _close(sweep.e2e_s, sweep.ttft_s + (sweep.generate - 1) * sweep.tpot_s)


def test_throughput_identities(sweep):
    # devices defaults to tp*pp (one replica): every sequence yields `generate` tokens in e2e_s.
    _close(sweep.output_tokens_per_s, sweep.batch * sweep.generate / sweep.e2e_s)
    _close(sweep.output_tokens_per_s_per_device, sweep.output_tokens_per_s / (sweep.tp * sweep.pp))
    _close(sweep.output_tokens_per_s_per_user, 1.0 / sweep.tpot_s)


def test_data_parallel_replicas_multiply_throughput():
    one = predict.inference(**BASE)
    four = predict.inference(**{**BASE, "devices": 32})  # tp=8, so 4 replicas
    assert float(four.output_tokens_per_s) == pytest.approx(4 * float(one.output_tokens_per_s), rel=1e-12)
    assert float(four.output_tokens_per_s_per_device) == pytest.approx(float(one.output_tokens_per_s_per_device))
    assert float(four.tpot_s) == pytest.approx(float(one.tpot_s))


def test_memory_is_the_sum_of_its_parts(sweep):
    _close(sweep.memory_per_device_bytes, sweep.weights_per_device_bytes + sweep.kv_cache_per_device_bytes
           + sweep.activations_per_device_bytes)


@pytest.mark.parametrize("weights", ["bf16", "fp8", "int4"])
def test_weights_per_device(weights):
    m = load_model("llama_3_1_70b")
    ds = predict.inference(hardware="h200_sxm", model="llama_3_1_70b", tp=[1, 2, 4, 8], pp=[1, 2],
                           batch=1, weights=weights)
    # every weight stored once; a quantized checkpoint keeps its embeddings and LM head in 16
    # bits (nvidia/Llama-3.1-70B-Instruct-FP8 hf_quant_config.json: exclude_modules lm_head)
    w, e = DTYPE_BYTES[weights], m.embedding_params
    expected = ((m.n_params - e) * w + e * max(w, 2.0)) / (ds.tp * ds.pp)
    _close(ds.weights_per_device_bytes, expected)


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize("pp", [1, 2, 4])
def test_kv_cache_bytes_closed_form(kv, pp):
    # Llama-2-7B: 32 layers x 32 KV heads x (128 + 128) = 262,144 elements per token (MHA);
    # with n_kv_heads >= tp the cache splits evenly; pipeline stages split the layers.
    m = load_model("llama_2_7b")
    assert m.kv_bytes_per_token(kv) == 32 * 32 * 256 * DTYPE_BYTES[kv]
    batch, prompt, generate = np.array([1, 8, 32]), 1000, 200
    ds = predict.inference(hardware="h100_sxm", model="llama_2_7b", tp=1, pp=pp, batch=list(batch),
                           prompt=prompt, generate=generate, kv=kv)
    expected = batch * (prompt + generate) * m.kv_bytes_per_token(kv) / pp
    np.testing.assert_allclose(ds.kv_cache_per_device_bytes.values, expected, rtol=1e-12)


def test_kv_cache_splits_across_tp_ranks_while_heads_last():
    # 32 KV heads over tp = 4 ranks: each holds 8 heads, a quarter of the cache.
    m = load_model("llama_2_7b")
    ds = predict.inference(hardware="h100_sxm", model="llama_2_7b", tp=4, batch=8, prompt=1000, generate=200)
    assert float(ds.kv_cache_per_device_bytes) == pytest.approx(8 * 1200 * m.kv_bytes_per_token("bf16") / 4)


def test_bound_is_a_known_label(sweep):
    assert set(np.unique(sweep.bound.values)) <= {"compute", "memory", "communication"}
    assert sweep.fits.dtype == bool
