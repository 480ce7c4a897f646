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
