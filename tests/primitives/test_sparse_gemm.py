"""2:4 structured-sparse weights (issue 18, item 4): a weights format whose bytes are half
the values plus 2-bit indices, whose GEMMs run the dense format's math on the sparse tensor
cores at the datasheet's sparse peak ratio times one measured efficiency, flagged where a
chip has no sparse units for the format, and refused where it makes no sense (KV caches,
activations, wafers)."""
from __future__ import annotations

import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.primitives.gemm import SPARSE_GEMM_EFFICIENCY
from workbench.units import DTYPE_BYTES, SPARSE_2_4


def test_bytes_are_half_the_values_plus_the_indices():
    """arXiv 2104.08378 Sec. 2: two kept values and two 2-bit indices per four weights."""
    assert DTYPE_BYTES["bf16_2:4"] == 2 * 2 / 4 + 4 / 8 / 4
    # NVFP4 keeps one E4M3 scale per 16 kept values: (0.5 + 1/16) / 2 + 1/8
    assert DTYPE_BYTES["fp8_2:4"] == 0.625 and DTYPE_BYTES["fp4_2:4"] == 0.40625
    assert set(SPARSE_2_4.values()) <= set(DTYPE_BYTES)


def test_compute_bound_speedup_is_the_sparse_peak_ratio_times_the_measured_efficiency():
    """Analytical path: a compute-bound GEMM runs SPARSE_GEMM_EFFICIENCY x the datasheet's
    sparse / dense ratio faster (2x on H100 BF16: its datasheet's 1,979 / 989 TFLOPS), and on
    B300 FP4 144 / 105 of that (HGX B300: sparse FP4 is not 2x dense on Blackwell Ultra)."""
    kw = dict(m=16384, n=16384, k=16384, framework="none")
    h = predict.gemm(hardware="h100_sxm", dtype=["bf16", "bf16_2:4"], **kw).time_s.values
    assert h[0] / h[1] == pytest.approx(2.0 * SPARSE_GEMM_EFFICIENCY, rel=1e-9)
    b = predict.gemm(hardware="b300", dtype=["fp4", "fp4_2:4"], **kw).time_s.values
    assert b[0] / b[1] == pytest.approx(round(144 / 105, 4) * SPARSE_GEMM_EFFICIENCY, rel=1e-9)


def test_the_measured_speedup_held_out():
    """torchao's A100 FP16 ViT-L MLP shapes: 1.24x at (13008, 1024, 4096) and 1.27x at
    (13008, 4096, 1024) (pytorch/ao torchao/sparsity/training/README.md); the constant is
    their mean, so either shape is predicted within 2.5% by the other's value."""
    for m, n, k, measured in ((13008, 4096, 1024, 1.24), (13008, 1024, 4096, 1.27)):
        t = predict.gemm(hardware="a100_sxm", m=m, n=n, k=k, dtype=["fp16", "fp16_2:4"], framework="none").time_s
        assert float(t[0] / t[1]) == pytest.approx(measured, rel=0.025)


def test_memory_bound_decode_gains_the_byte_ratio():
    """A GEMV streams the compressed weights: the speedup approaches 2 / 1.125 for BF16,
    above the compute-bound gain and below the byte ratio (fixed latencies)."""
    t = predict.gemm(hardware="h100_sxm", m=1, n=8192, k=8192, dtype=["bf16", "bf16_2:4"]).time_s.values
    ratio = t[0] / t[1]
    assert 2.0 * SPARSE_GEMM_EFFICIENCY < ratio <= 2.0 / 1.125


def test_chips_without_sparse_units_for_the_format_are_flagged():
    d = predict.gemm(hardware=["mi300x", "a100_sxm", "b200"], m=4096, n=4096, k=4096, dtype="fp4_2:4")
    assert list(d.fits.values) == [False, False, True]
    assert "no 2:4 sparse fp4 tensor cores on mi300x" in str(d.reason.values[0])


def test_inference_reads_the_compressed_weights_and_runs_faster():
    """Llama 3.1 70B in FP8 on 4 H100s: 2:4 weights hold 0.625 / 1 of the layers' bytes (the
    16-bit embeddings and LM head stay dense: inference.weight_bytes); TPOT at batch 1
    (weight-streaming) improves by more than a compute-bound GEMM would, never by more than
    the byte ratio."""
    d = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=4, batch=1, prompt=2048, generate=256,
                          weights=["fp8", "fp8_2:4"])
    w = d.weights_per_device_bytes.values
    m = load_model("llama_3_1_70b")
    layers, head = m.n_params - m.embedding_params, 2.0 * m.embedding_params
    assert w[1] / w[0] == pytest.approx((0.625 * layers + head) / (layers + head), rel=1e-6) and bool(d.fits.all())
    gain = float(d.tpot_s[0] / d.tpot_s[1])
    assert 1.0 < gain < 1.0 / 0.625


def test_nonsense_is_refused_or_flagged():
    with pytest.raises(InputError, match="kv="):
        predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=1, prompt=128, generate=8, kv="fp8_2:4")
    with pytest.raises(InputError, match="dtype="):
        predict.attention(hardware="h100_sxm", batch=1, seq_len=1024, n_heads=32, head_dim=128, dtype="bf16_2:4")
    d = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=1, prompt=128, generate=8,
                          weights="bf16_2:4", activations="fp8")
    assert not bool(d.fits) and "activations=fp8 is not allowed" in str(d.reason.values)
    w = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=1, prompt=128, generate=8, weights="bf16_2:4")
    assert not bool(w.fits) and "not modelled on wafers" in str(w.reason.values)
