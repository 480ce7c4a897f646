"""The GPU inference model against published end-to-end measurements.

Rows come from workbench/calibrate/reference/measurements.csv (a copy of
shared/reference/measurements.csv; the `source` column cites each table). The model is
not fitted to any of these rows: its efficiencies come from the measured kernel tables of
TensorRT-LLM (specs/kernels/, each GPU's default framework) and, where those do not reach,
from kernel rows (B08-B14, B21, B25) and the datasheets. Tolerance: 25% end to end (issue 2). Rows the model misses are
marked xfail(strict=True) with the gap stated, so a fix shows up as an unexpected pass.
"""
from __future__ import annotations

import pytest

from workbench import predict
from workbench.calibrate.measurements import row

TOLERANCE = 0.25


def _tokens_per_s_per_device(hardware, model, batch, prompt, generate, weights, kv):
    ds = predict.inference(hardware=hardware, model=model, tp=1, batch=batch, prompt=prompt,
                           generate=generate, weights=weights, kv=kv)
    assert bool(ds.fits), str(ds.reason.values)
    return float(ds.output_tokens_per_s_per_device)


# (row id, hardware, model, batch, prompt, generate, weights, kv, measured tok/s/GPU)
# Static batching (TensorRT-LLM v0.5-0.7 tables): throughput = batch * output_len / latency.
STATIC_ROWS = [
    ("C01", "h100_sxm", "llama_2_7b", 768, 128, 128, "fp8", "fp8", None),
    ("C02", "h100_sxm", "llama_2_7b", 48, 2048, 2048, "fp8", "fp8", None),
    ("C02", "h100_sxm", "llama_2_7b", 112, 128, 2048, "fp8", "fp8", 6818),  # C02 notes: BS112 128/2048
    ("C02", "h100_sxm", "llama_2_7b", 80, 2048, 128, "fp8", "fp8", 2244),  # C02 notes: BS80 2048/128
    ("C05", "a100_sxm", "llama_2_7b", 384, 128, 128, "fp16", "fp16", None),
    ("C10", "h200_sxm", "llama_2_13b", 1024, 128, 128, "fp8", "fp8", None),
    # C10 notes: was +27% with the analytical efficiencies; -7.7% with TensorRT-LLM's measured
    # kernel tables (its decode GEMMs and attention run slower than the analytical ramp said)
    ("C10", "h200_sxm", "llama_2_13b", 128, 128, 2048, "fp8", "fp8", 4750),
    ("C10", "h200_sxm", "llama_2_13b", 64, 2048, 128, "fp8", "fp8", 1349),  # C10 notes
]


@pytest.mark.parametrize("row_id,hardware,model,batch,prompt,generate,weights,kv,measured", STATIC_ROWS)
def test_static_batch_throughput(row_id, hardware, model, batch, prompt, generate, weights, kv, measured):
    measured = measured or row(row_id)["value_si"]
    predicted = _tokens_per_s_per_device(hardware, model, batch, prompt, generate, weights, kv)
    err = predicted / measured - 1
    print(f"{row_id} {hardware} b{batch} {prompt}/{generate}: {predicted:.0f} vs {measured:.0f} ({err:+.1%})")
    assert abs(err) <= TOLERANCE


# In-flight batching at maximum throughput (trtllm-bench): compared with the static-batch
# model at the largest batch that fits, an approximation of the steady state.
INFLIGHT_ROWS = [
    ("C13", "h100_sxm", 1000, 1000, None),
    ("C13", "h100_sxm", 128, 128, 28312),  # C13 notes
    ("C13", "h100_sxm", 2048, 2048, 9305),  # C13 notes
    ("C13", "h100_sxm", 20000, 2000, 1351),  # C13 notes
    ("C14", "h200_sxm", 1000, 1000, None),
    ("C14", "h200_sxm", 2048, 2048, 12194),  # C14 notes
    ("C14", "h200_sxm", 20000, 2000, 1804),  # C14 notes
]


@pytest.mark.parametrize("row_id,hardware,prompt,generate,measured", INFLIGHT_ROWS)
def test_max_batch_throughput_llama_3_1_8b(row_id, hardware, prompt, generate, measured):
    measured = measured or row(row_id)["value_si"]
    predicted = _tokens_per_s_per_device(hardware, "llama_3_1_8b", "max", prompt, generate, "fp8", "fp8")
    err = predicted / measured - 1
    print(f"{row_id} {hardware} {prompt}/{generate}: {predicted:.0f} vs {measured:.0f} ({err:+.1%})")
    assert abs(err) <= TOLERANCE


@pytest.mark.parametrize("prompt,measured_s", [
    (2048, None),  # C07: 36 ms
    # C07 notes: ISL128 -> 7 ms. Was -50% with the analytical efficiencies; -21% with TensorRT-LLM's
    # measured kernels (their fixed latencies: a 128-token prefill is 32 layers of small kernels)
    (128, 0.007),
])
def test_ttft_llama_2_7b_h100(prompt, measured_s):
    measured_s = measured_s or row("C07")["value_si"]
    ds = predict.inference(hardware="h100_sxm", model="llama_2_7b", batch=1, prompt=prompt,
                           generate=1, weights="fp8", kv="fp8")
    err = float(ds.ttft_s) / measured_s - 1
    print(f"C07 prompt {prompt}: {float(ds.ttft_s) * 1e3:.1f} ms vs {measured_s * 1e3:.0f} ms ({err:+.1%})")
    assert abs(err) <= TOLERANCE


# MI300X, 8 GPUs, vLLM's benchmark_latency (a static batch: every sequence starts together). The
# chip runs its spec's analytical efficiencies (no kernel tables time an AMD GPU), now measured
# ones: FP8 GEMM B34, HBM B35, FlashAttention-2 B37, RCCL B28.
def _mi300x_e2e_s(model, batch, prompt, generate, kv=None):
    ds = predict.inference(hardware="mi300x", model=model, tp=8, batch=batch, prompt=prompt, generate=generate,
                           weights="fp8", **({"kv": kv} if kv else {}))
    assert bool(ds.fits), str(ds.reason.values)
    return float(ds.e2e_s)


@pytest.mark.parametrize("batch,measured_s", [(1, None), (2, 18.057)])  # C25 and its notes
def test_mi300x_llama_3_1_70b_latency_amd_2025(batch, measured_s):
    """C25: AMD's published vLLM 0.9.1 (ROCm 6.4.1) latency of Llama 3.1 70B FP8 with an FP8 cache,
    128 in / 2,048 out: the model is 13-17% fast (7.4 against 8.4-8.8 ms a token)."""
    measured_s = measured_s or row("C25")["value_si"]
    got = _mi300x_e2e_s("llama_3_1_70b", batch, 128, 2048, kv="fp8")
    err = measured_s / got - 1  # speed error
    print(f"C25 batch {batch}: {got:.2f} s vs {measured_s:.2f} s (speed {err:+.1%})")
    assert abs(err) <= TOLERANCE


ORACLE_405B = {1: 3.530, 2: 3.583, 4: 3.734, 8: 3.974, 16: 4.375, 32: 5.130, 64: 6.919, 128: 10.340,
               256: 17.750}  # C24 notes: average latency (s) by batch, 128 in / 128 out


@pytest.mark.xfail(strict=True, reason="C24 (OCI, 2024's ROCm vLLM) runs 32-55% slower than the model at every "
                                       "batch (27.6 ms a token at batch 1 against 21); AMD's 2025 software on the "
                                       "same GPUs (C25) is within 17%")
def test_mi300x_llama_3_1_405b_oracle_2024_speed():
    got = {b: _mi300x_e2e_s("llama_3_1_405b", b, 128, 128) for b in (1, 256)}
    assert all(abs(ORACLE_405B[b] / got[b] - 1) <= TOLERANCE for b in got)


def test_mi300x_405b_latency_grows_with_batch_as_measured():
    """C24's shape, held out: from batch 1 to 256 the measured latency grows 5.0x (decode turns
    compute-bound, the 256 x 128-token prefill takes seconds); the model's growth within 20% of it,
    and both rise at every step."""
    got = {b: _mi300x_e2e_s("llama_3_1_405b", b, 128, 128) for b in ORACLE_405B}
    batches = sorted(got)
    assert all(got[a] < got[b] for a, b in zip(batches, batches[1:]))
    growth, measured = got[256] / got[1], ORACLE_405B[256] / ORACLE_405B[1]
    print(f"C24 latency growth batch 1 -> 256: model {growth:.2f}x, measured {measured:.2f}x")
    assert growth == pytest.approx(measured, rel=0.20)
    assert row("C24")["value_si"] == pytest.approx(128 / ORACLE_405B[1], rel=0.01)  # its TPS is 128 / latency


def test_mi300x_70b_batch_1_with_vllms_engine_time():
    """Held out on a GPU vendor the serving rows never saw: vLLM's host time per iteration
    (frameworks.yaml iteration_overhead_s, fitted on NVIDIA serving rows) is what the static
    model lacks for C25. One request at a time through the vLLM engine (predict.serving at
    concurrency 1: no other request to interleave) gives AMD's measured 17.24 s within 10%, about
    the constant's own leave-one-GPU-out error (9.9%, frameworks.yaml): +0.8% at 1.0 ms per iteration, +6.4% at
    1.48 ms and +7.5% at 1.57 ms since the serving rows are read at the mean of InferenceX's
    length draws with its scripts' settings (calibrate/run_settings.py), where the kernels
    alone (predict.inference) are 13% fast."""
    ds = predict.serving(hardware="mi300x", model="llama_3_1_70b", tp=8, concurrency=1, prompt=128, generate=2048,
                         weights="fp8", kv="fp8", framework="vllm")
    kernels_only = _mi300x_e2e_s("llama_3_1_70b", 1, 128, 2048, kv="fp8")
    measured = row("C25")["value_si"]
    print(f"C25 batch 1: vLLM engine {float(ds.e2e_s):.2f} s, kernels only {kernels_only:.2f} s, "
          f"measured {measured:.2f} s")
    assert float(ds.e2e_s) == pytest.approx(measured, rel=0.10)
    assert float(ds.framework_overhead_s) > 0 and kernels_only < float(ds.e2e_s)
