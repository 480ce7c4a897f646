"""Attention: FLOPs against the FlashAttention closed form, decode KV traffic, roofline
bounds, monotonicity and input types.

FlashAttention (Dao et al. 2022; FA2 2023, Sec. 4.1 benchmarks): forward FLOPs
4·B·S²·H·h (QK^T and PV, 2·B·S²·H·h each), halved with a causal mask.
"""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.primitives.attention import SCORE_BYTES, attention_decode, attention_prefill
from workbench.primitives.gemm import memory_time
from workbench.specs import list_gpus
from workbench.units import DTYPE_BYTES
from workbench.backends import numbers

HARDWARE = list_gpus()
SEQ = np.arange(16.0, 32769.0, 16.0)  # 16 .. 32k tokens
CONTEXT = np.arange(1.0, 131073.0, 64.0)  # 1 .. 128k cached tokens


def _dtypes(hw):
    return [dt for dt in ("bf16", "fp16", "fp8") if np.isfinite(hw.peak(dt))]


CASES = [(h, dt) for h in HARDWARE for dt in _dtypes(numbers(h))]
# (batch, n_heads, n_kv_heads, head_dim): Llama-3.1-8B per GPU (32/8, h=128), Llama-3.1-70B
# at TP8 (8 query heads, 1 KV head per rank), an MHA model (GPT-3: 96 heads, h=128).
SHAPES = [(1, 32, 8, 128), (8, 8, 1, 128), (4, 96, 96, 128)]


# ---- FLOPs and bytes ------------------------------------------------------------------------
@pytest.mark.parametrize("batch, seq, heads, hd", [(1, 2048, 32, 128), (8, 8192, 64, 128), (3, 100, 5, 64)])
def test_prefill_flops_closed_form(batch, seq, heads, hd):
    hw = numbers("h100_sxm")
    full = attention_prefill(hw=hw, batch=batch, seq_len=seq, n_heads=heads, head_dim=hd, causal=False)
    causal = attention_prefill(hw=hw, batch=batch, seq_len=seq, n_heads=heads, head_dim=hd, causal=True)
    assert full["flops"] == 4 * batch * seq**2 * heads * hd  # FlashAttention forward
    assert causal["flops"] == full["flops"] / 2  # causal mask: half of the score matrix
    # The predict front gives the same counts.
    ds = predict.attention(hardware="h100_sxm", batch=batch, seq_len=seq, n_heads=heads, head_dim=hd,
                           causal=[False, True])
    assert float(ds.flops.sel(causal=False)) == 4 * batch * seq**2 * heads * hd
    assert float(ds.flops.sel(causal=True)) == 2 * batch * seq**2 * heads * hd


def test_prefill_flops_with_a_distinct_value_head_and_cached_context():
    # MLA (DeepSeek-V3: h = 192 for QK, h_v = 128 for PV): 2·B·H·(h + h_v)·pairs, where
    # pairs = S²/2 (causal) + S·context for new tokens that also attend to a cached prefix.
    a = attention_prefill(hw=numbers("h100_sxm"), batch=2, seq_len=1024, n_heads=128,
                          head_dim=192, v_head_dim=128, causal=True, context=4096)
    assert a["flops"] == 2 * 2 * 128 * (192 + 128) * (1024**2 / 2 + 1024 * 4096)


def test_prefill_bytes_read_qkv_write_o():
    # Flash attention never writes scores: Q and O (H heads) plus K and V (K heads) only.
    b, s, H, K, h = 2, 4096, 32, 8, 128
    a = attention_prefill(hw=numbers("h100_sxm"), batch=b, seq_len=s, n_heads=H, head_dim=h,
                          n_kv_heads=K, act_bytes=2.0, kv_bytes=1.0)
    assert a["bytes"] == b * (s * H * 2 * h * 2.0 + s * K * 2 * h * 1.0)


@pytest.mark.parametrize("batch, context, kv_heads, hd, kv_bytes", [
    (1, 4096, 8, 128, 2.0), (64, 32768, 1, 128, 1.0), (7, 100, 96, 128, 0.5)])
def test_decode_bytes_are_the_kv_cache(batch, context, kv_heads, hd, kv_bytes):
    # One decode step reads every cached K and V: batch · context · K·(h + h_v) · bytes.
    kv_elements = kv_heads * 2 * hd
    d = attention_decode(hw=numbers("h100_sxm"), batch=batch, context=context, n_heads=4 * kv_heads,
                         head_dim=hd, n_kv_heads=kv_heads, kv_bytes=kv_bytes)
    assert d["bytes"] == batch * context * kv_elements * kv_bytes
    assert d["flops"] == 2 * batch * 4 * kv_heads * 2 * hd * context  # QK^T and PV for one query


def test_decode_bytes_with_an_mla_latent():
    # DeepSeek-V3 caches kv_lora_rank + rope = 512 + 64 = 576 elements per token per layer.
    d = attention_decode(hw=numbers("h100_sxm"), batch=16, context=8192, n_heads=128, head_dim=192,
                         n_kv_heads=128, v_head_dim=128, kv_elements_per_token=576, kv_bytes=1.0)
    assert d["bytes"] == 16 * 8192 * 576 * 1.0


# ---- roofline bounds ----------------------------------------------------------------------
@pytest.mark.parametrize("hardware, dtype", CASES, ids=[f"{h}-{d}" for h, d in CASES])
@pytest.mark.parametrize("batch, heads, kv_heads, hd", SHAPES)
def test_roofline_bounds(hardware, dtype, batch, heads, kv_heads, hd):
    hw = numbers(hardware)
    bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.peak(dtype)
    b = DTYPE_BYTES[dtype]
    for causal in (True, False):
        a = attention_prefill(hw=hw, batch=batch, seq_len=SEQ, n_heads=heads, head_dim=hd,
                              n_kv_heads=kv_heads, causal=causal, dtype=dtype, act_bytes=b)
        assert np.all(a["flops"] / a["time_s"] <= peak * hw.gemm_peak_eff_for(dtype) * (1 + 1e-12))
        assert np.all(a["time_s"] >= a["bytes"] / bw)
        np.testing.assert_array_equal(a["time_s"], np.maximum(a["compute_s"], a["memory_s"]))
    d = attention_decode(hw=hw, batch=batch, context=CONTEXT, n_heads=heads, head_dim=hd,
                         n_kv_heads=kv_heads, dtype=dtype, kv_bytes=b)
    assert np.all(d["flops"] / d["time_s"] <= peak)
    assert np.all(d["time_s"] >= d["bytes"] / bw)


@pytest.mark.parametrize("hardware", HARDWARE)
def test_decode_latency_only_adds(hardware):
    """The per-slice latency never makes a step faster than streaming its bytes alone (it
    relies on memory_time being non-decreasing in bytes, which the log-log interpolation of
    memory_eff guarantees: every segment has log-log slope < 1)."""
    hw = numbers(hardware)
    for batch, heads, kv_heads, hd in SHAPES:
        d = attention_decode(hw=hw, batch=batch, context=CONTEXT, n_heads=heads, head_dim=hd,
                             n_kv_heads=kv_heads)
        assert np.all(d["memory_s"] >= memory_time(hw=hw, nbytes=d["bytes"]))


def test_long_prefill_is_compute_bound_and_decode_memory_bound():
    hw = numbers("h100_sxm")
    a = attention_prefill(hw=hw, batch=1, seq_len=8192, n_heads=32, head_dim=128, n_kv_heads=8)
    d = attention_decode(hw=hw, batch=64, context=8192, n_heads=32, head_dim=128, n_kv_heads=8)
    assert bool(a["compute_bound"]) and not bool(d["compute_bound"])


# ---- monotonicity ---------------------------------------------------------------------------
def _violations(label, timer):
    """Every (hardware, dtype, shape) whose time falls where its swept size grows."""
    bad = []
    for hardware, dtype in CASES:
        hw = numbers(hardware)
        for batch, heads, kv_heads, hd in SHAPES:
            t = timer(hw=hw, batch=batch, n_heads=heads, head_dim=hd, n_kv_heads=kv_heads, dtype=dtype)["time_s"]
            if np.any(t[1:] < t[:-1] * (1 - 1e-12)):
                bad.append(f"{hardware} {dtype} {label}, b={batch} H={heads}")
    return bad


def test_prefill_time_monotone_in_seq_len():
    bad = _violations("seq_len", lambda **kw: attention_prefill(seq_len=SEQ, **kw))
    assert not bad, bad


def _decode_violations():
    bad = _violations("context", lambda **kw: attention_decode(context=CONTEXT, **kw))
    batches = np.arange(1.0, 1025.0)
    return bad + _violations("batch", lambda batch, **kw: attention_decode(batch=batches, context=4096.0, **kw))


def test_decode_time_monotone_in_context_and_batch():
    """Regression: the per-slice memory latency used to multiply memory_time, so its size
    ramp was scaled too and a 65-token context decoded 5x slower than a 2k one (B200,
    Llama 3.1 70B TP8, batch 8). Now it counts as latency-bandwidth bytes per slice."""
    bad = _decode_violations()
    assert not bad, bad


@pytest.mark.parametrize("hardware", HARDWARE)
def test_decode_latency_term_on_large_transfers(hardware):
    """On the flat end of memory_eff, the slice latency costs a factor
    (slice + latency_bytes) / slice, latency_bytes = bw / n_sms · memory_latency_s."""
    hw = numbers(hardware)
    batch, context, kv_heads, hd, kv_bytes = 64, 32768.0, 8, 128, 2.0
    d = attention_decode(hw=hw, batch=batch, context=context, n_heads=32, head_dim=hd,
                         n_kv_heads=kv_heads, kv_bytes=kv_bytes)
    slice_bytes = context * 2 * hd * kv_bytes  # one (sequence, KV head) slice
    latency_bytes = hw.hbm_bandwidth_bytes_per_s / hw.n_sms * hw.memory_latency_s
    plateau = d["bytes"] / (hw.hbm_bandwidth_bytes_per_s * hw.memory_eff.eff[-1])
    assert d["bytes"] * (1 + latency_bytes / slice_bytes) >= hw.memory_eff.size[-1]  # on the plateau
    assert float(d["memory_s"]) == pytest.approx(plateau * (slice_bytes + latency_bytes) / slice_bytes, rel=1e-12)


# ---- one function, every input type ----------------------------------------------------------
def test_float_ndarray_dataarray_agree():
    """xarray's test_apply_two_inputs pattern, for prefill and decode."""
    hw = numbers("h100_sxm")
    batches, seqs = np.array([1.0, 8.0, 64.0]), np.array([128.0, 2048.0, 32768.0])
    cases = [
        (attention_prefill, dict(n_heads=32, head_dim=128, n_kv_heads=8), "seq_len"),
        (attention_decode, dict(n_heads=32, head_dim=128, n_kv_heads=8), "context"),
    ]
    for fn, kw, seq_arg in cases:
        arr = fn(hw=hw, batch=batches[:, None], **{seq_arg: seqs[None, :]}, **kw)
        da = fn(hw=hw, batch=xr.DataArray(batches, dims="batch"),
                **{seq_arg: xr.DataArray(seqs, dims=seq_arg)}, **kw)
        for key in ("flops", "bytes", "compute_s", "memory_s", "time_s", "compute_bound"):
            assert isinstance(da[key], xr.DataArray) and set(da[key].dims) == {"batch", seq_arg}, key
            np.testing.assert_allclose(da[key].transpose("batch", seq_arg).values, arr[key], rtol=1e-12)
            for i, b in enumerate(batches):
                for j, s in enumerate(seqs):
                    scalar = fn(hw=hw, batch=float(b), **{seq_arg: float(s)}, **kw)[key]
                    assert float(scalar) == pytest.approx(float(arr[key][i, j]), rel=1e-12), (fn, key)


def test_predict_attention_sweeps_and_units():
    ds = predict.attention(hardware=["h100_sxm", "b200"], batch=[1, 4], seq_len=[1024, 8192], n_heads=32,
                           head_dim=128, framework="none")
    assert dict(ds.sizes) == {"hardware": 2, "batch": 2, "seq_len": 2}
    assert ds.time_s.attrs["units"] == "s" and ds.flops_per_s.attrs["units"] == "FLOP/s"
    a = attention_prefill(hw=numbers("b200"), batch=4, seq_len=8192, n_heads=32, head_dim=128)
    assert float(ds.time_s.sel(hardware="b200", batch=4, seq_len=8192)) == pytest.approx(float(a["time_s"]))
    np.testing.assert_allclose(ds.flops_per_s, ds.flops / ds.time_s)


@pytest.mark.parametrize("hardware", ["a100_sxm", "h100_sxm"])
def test_materialized_attention_roofline_and_ordering(hardware):
    """Pre-flash attention: never faster than its score traffic at peak bandwidth (13 bytes
    per query-key pair forward, 19 backward, every pair computed) nor than its GEMMs at peak;
    always slower than a flash kernel of the same shape, and FA1-class slower than FA2."""
    hw = numbers(hardware)
    shape = dict(hw=hw, batch=8.0, seq_len=np.array([512.0, 2048.0, 8192.0]), n_heads=32.0, head_dim=128.0)
    m = attention_prefill(**shape, kernel="materialized")
    f1, f2 = attention_prefill(**shape, kernel="flash1"), attention_prefill(**shape, kernel="flash2")
    scores = 8.0 * 32 * shape["seq_len"] ** 2
    bw = hw.hbm_bandwidth_bytes_per_s
    assert np.all(m["time_s"] >= scores * SCORE_BYTES["forward"] / bw)
    assert np.all(m["backward_s"] >= scores * SCORE_BYTES["backward"] / bw)
    assert np.all(m["time_s"] >= 2 * 2.0 * scores * 128 / hw.peak("bf16"))
    assert np.all(m["time_s"] > f1["time_s"]) and np.all(f1["time_s"] > f2["time_s"])


@pytest.mark.parametrize("framework", ["trtllm", "vllm", "sglang"])
def test_a_sliding_window_never_costs_more_than_reading_every_key(framework):
    """Mistral 7B (4,096-token window) and Llama 3.1 8B share their KV layout (32 layers, 8 KV
    heads of 128): where the window cuts nothing (2k prompt) their decode attention is equal,
    and no window costs more than the same attention without it. The framework's windowed
    surface (fitted on the tables' 128- and 8192-token windows) put Mistral at 4-5x Llama's
    time on TensorRT-LLM at 2k and 4k."""
    kw = dict(hardware="h100_sxm", batch=16, prompt=[2048, 4096, 16384], generate=64, framework=framework)
    mistral = predict.inference(model="mistral_7b", **kw)
    llama = predict.inference(model="llama_3_1_8b", **kw)
    assert float(mistral.decode_attention_s.isel(prompt=0)) == pytest.approx(float(llama.decode_attention_s.isel(prompt=0)))
    for part in ("decode_attention_s", "prefill_attention_s"):
        assert np.all(mistral[part].values <= llama[part].values * (1 + 1e-9)), part


@pytest.mark.parametrize("hardware,framework", [("a100_sxm", "trtllm"), ("a100_sxm", "vllm"), ("h100_sxm", "trtllm"),
                                                ("h200_sxm", "sglang"), ("b200", "trtllm"), ("gb200", "vllm")])
def test_decode_attention_never_reads_the_cache_faster_than_hbm(hardware, framework):
    """A served decode step reads every sequence's own cache cold: its time is at least the
    cache's bytes over the HBM bandwidth, even where a table is faster (TensorRT-LLM's A100
    tables take 0.34 ms for 64 sequences x 4,096 keys x 8 KV heads in BF16, 1.07 GB: 3.2 TB/s
    on a 2.0 TB/s chip)."""
    hw = numbers(hardware, framework=framework)
    batch = xr.DataArray([1.0, 16.0, 64.0, 256.0], dims="batch")
    context = xr.DataArray([128.0, 4096.0, 32768.0], dims="context")
    r = attention_decode(hw=hw, batch=batch, context=context, n_heads=32, head_dim=128, n_kv_heads=8, dtype="bf16",
                         kv_bytes=2.0)
    floor = batch * context * 8 * 256 * 2.0 / hw.hbm_bandwidth_bytes_per_s
    assert bool((r["time_s"] >= floor * (1 - 1e-12)).all())


def test_a_window_whose_surface_is_slower_than_every_key_reads_only_the_window():
    """Gemma-4-31B's sliding layers (16 KV heads of 256) on H200 under TensorRT-LLM: the
    windowed surface, carried to a shape its table never ran, takes longer at 65k cached keys
    than reading every key; the kernel then reads the window's 1,024 keys without a window,
    not the whole cache (the decode step had read 120 GB where weights and cache are 68 GB)."""
    hw = numbers("h200_sxm", framework="trtllm")
    shape = dict(batch=1.0, n_heads=32, head_dim=256, n_kv_heads=16, dtype="bf16", kv_bytes=2.0)
    windowed = attention_decode(hw=hw, context=65536.0, window=1024.0, **shape)
    recent = attention_decode(hw=hw, context=1024.0, window=0.0, **shape)
    every = attention_decode(hw=hw, context=65536.0, window=0.0, **shape)
    assert float(windowed["bytes"]) == float(recent["bytes"]) < float(every["bytes"]) / 60
    assert float(windowed["time_s"]) == pytest.approx(float(recent["time_s"]), rel=1e-12)
    ds = predict.inference(hardware="h200_sxm", model="gemma_4_31b", weights="bf16", kv="bf16", batch=1,
                           prompt=65536, generate=1)
    # weights and cache once, plus the step's activations (0.05% here)
    assert float(ds.decode_step_bytes_per_device) <= 1.001 * float(ds.weights_per_device_bytes
                                                                    + ds.kv_cache_per_device_bytes)
