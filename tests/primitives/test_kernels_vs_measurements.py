"""GEMM and memory-bandwidth predictions against the kernel rows of measurements.csv.

Kernel tolerance 15% (issue 2). Two kinds of check, labelled:
- provenance: the efficiency tables were fitted to these rows (see the YAML comments),
  so agreement shows the fit is what the spec says it is (tolerance 2%);
- held out: rows not used for any fit (H200 FP8 sweep B10; the large-GEMM asymptote
  against MAMF rows taken on other software).
"""
from __future__ import annotations

import pytest

from workbench import predict
from workbench.calibrate.measurements import row
from workbench.primitives.gemm import memory_time
from workbench.backends import numbers

KERNEL_TOLERANCE = 0.15


def _tflops(hardware, m, n, k, dtype):
    # the spec's analytical efficiencies, which these rows calibrate (framework none)
    return float(predict.gemm(hardware=hardware, m=m, n=n, k=k, dtype=dtype, framework="none").flops_per_s) / 1e12


# Azure/AI-benchmarking-guide cuBLASLt square GEMMs (B08 notes and B09; B11 notes).
@pytest.mark.parametrize("hardware,dtype,size,measured", [
    ("h100_sxm", "fp8", 1024, 274.1), ("h100_sxm", "fp8", 2048, 1011.3),
    ("h100_sxm", "fp8", 4096, 1216.9), ("h100_sxm", "fp8", 8192, 1290.1),
    ("h100_sxm", "fp8", 16384, 1377.3),
    ("a100_sxm", "fp16", 1024, 119.4), ("a100_sxm", "fp16", 2048, 221.8),
    ("a100_sxm", "fp16", 4096, 228.0), ("a100_sxm", "fp16", 8192, 253.7),
    ("a100_sxm", "fp16", 16384, 256.5),
])
def test_gemm_provenance_of_fitted_sweeps(hardware, dtype, size, measured):
    got = _tflops(hardware, size, size, size, dtype)
    assert got == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("size,measured", [(8192, None), (16384, 1366.3)])  # B10, B10 notes
def test_gemm_h200_fp8_held_out(size, measured):
    measured = measured or row("B10")["value_si"] / 1e12
    got = _tflops("h200_sxm", size, size, size, "fp8")
    print(f"H200 FP8 {size}^3: {got:.0f} vs {measured:.0f} TFLOP/s ({got / measured - 1:+.1%})")
    assert got == pytest.approx(measured, rel=KERNEL_TOLERANCE)


@pytest.mark.parametrize("row_id,hardware,dtype,shape", [
    ("B01", "h100_sxm", "bf16", (2048, 2048, 13312)),
    ("B02", "a100_sxm", "bf16", (1024, 10240, 5120)),
    ("B03", "b200", "bf16", (1792, 16128, 3072)),
    ("B05", "h100_sxm", "fp8", (1024, 9216, 14336)),
    ("B06", "h200_sxm", "fp8", (1280, 4096, 12032)),
    ("B07", "b200", "fp8", (15360, 4096, 3072)),
    ("B15", "b300", "bf16", (12288, 18432, 1024)),
    ("B16", "b300", "fp8", (3072, 6144, 7168)),
    ("B17", "gb200", "bf16", (4096, 9728, 2048)),
    ("B18", "gb200", "fp8", (19456, 5120, 1536)),
    ("B19", "a100_pcie", "bf16", (2048, 5120, 6144)),
    ("B20", "mi300x", "bf16", (10240, 15360, 8192)),
    ("B23", "gh200", "bf16", (1024, 15360, 4096)),
    ("B24", "gh200", "fp8", (1024, 14336, 14336)),
    ("B26", "mi325x", "bf16", (13312, 10240, 8192)),
    ("B27", "mi355x", "bf16", (12288, 8192, 8192)),
    ("B29", "gaudi2", "bf16", (14336, 15360, 2048)),
    ("B30", "gaudi2", "fp8", (6144, 11264, 5120)),
    ("B31", "gaudi3", "bf16", (16384, 4096, 768)),
    ("B32", "gaudi3", "fp8", (16640, 1536, 3072)),
    ("B34", "mi300x", "fp8", (4096, 3648, 32896)),  # AMD's max-achievable FLOPs (hipblaslt-bench best shape)
    ("B39", "mi325x", "fp8", (4096, 3648, 32896)),
])
def test_gemm_large_size_against_mamf(row_id, hardware, dtype, shape):
    """MAMF (stas00/ml-engineering mamf-finder) is the best over a shape search; the model's
    large-GEMM plateau (16384^3) must be within 15% of it. At MAMF's own best shape the
    model, whose size ramp comes from cuBLASLt squares, may be lower: printed, not asserted."""
    measured = row(row_id)["value_si"] / 1e12
    plateau = _tflops(hardware, 16384, 16384, 16384, dtype)
    at_shape = _tflops(hardware, *shape, dtype)
    print(f"{row_id} {hardware} {dtype}: plateau {plateau:.0f}, at {shape} {at_shape:.0f}, MAMF {measured:.0f}")
    assert plateau == pytest.approx(measured, rel=KERNEL_TOLERANCE)
    assert at_shape <= plateau * 1.001


@pytest.mark.parametrize("row_id,hardware", [("B12", "h100_sxm"), ("B13", "h200_sxm"), ("B14", "a100_sxm"),
                                             ("B35", "mi300x")])
def test_hbm_triad_bandwidth(row_id, hardware):
    """STREAM triad a = b + s*c on large arrays moves 3 arrays; the memory model at 3 GB
    must give the measured bandwidth (provenance: the table's plateau is this row)."""
    hw = numbers(hardware)
    nbytes = 3.0e9
    got = nbytes / memory_time(hw=hw, nbytes=nbytes)
    assert got == pytest.approx(row(row_id)["value_si"], rel=0.02)
    assert got <= hw.hbm_bandwidth_bytes_per_s


def test_mi300x_hbm_copy_of_amds_acceptance_run():
    """Held out: AMD's MI300X acceptance guide copies at 4.256 TB/s (B36: BabelStream 5.0, two
    2.1 GB arrays); the memory model, whose plateau is Azure's triad (B35), within 5%."""
    nbytes = 4.3e9
    got = nbytes / memory_time(hw=numbers("mi300x"), nbytes=nbytes)
    assert got == pytest.approx(row("B36")["value_si"], rel=0.05)


# Azure's hipBLASLt FP8 squares on MI300X (B33 and its notes): held out (the FP8 efficiency is
# AMD's MAF, B34). 4096^3 and 16384^3 run below the model: the small one below the size ramp
# (H100's, assumed), the large one at the lower clock the 750 W part holds on long dense GEMMs.
@pytest.mark.parametrize("size,measured,tolerance", [(8192, 1159.23, 0.05), (4096, 955.17, 0.25),
                                                     (16384, 1015.1, 0.25)])
def test_mi300x_fp8_squares_held_out(size, measured, tolerance):
    got = _tflops("mi300x", size, size, size, "fp8")
    print(f"MI300X FP8 {size}^3: {got:.0f} vs {measured:.0f} TFLOP/s ({got / measured - 1:+.1%})")
    assert got >= measured  # the model is the optimistic side at each
    assert got == pytest.approx(measured, rel=tolerance)


def test_mi355x_fp8_is_amds_hipblaslt_square():
    """Provenance: MI355X's FP8 efficiency reproduces hipBLASLt's 8192^3 (B40, 3130.21 TFLOP/s);
    held out, its 4096^3 (2750.42) within the kernel tolerance."""
    assert _tflops("mi355x", 8192, 8192, 8192, "fp8") == pytest.approx(row("B40")["value_si"] / 1e12, rel=0.01)
    assert _tflops("mi355x", 4096, 4096, 4096, "fp8") == pytest.approx(2750.42, rel=KERNEL_TOLERANCE)


def _attention_tflops(hardware):
    """FlashAttention-2 forward as Azure's harness runs it (B37, B38, B41-B43: flash-attention's
    benchmark script, fp16, B=2, S=8192, 32 heads of 64, non-causal)."""
    ds = predict.attention(hardware=hardware, batch=2, seq_len=8192, n_heads=32, head_dim=64, dtype="fp16",
                           causal=False, kernel="flash2", framework="none")
    return float(ds.flops_per_s) / 1e12


def test_flash2_forward_h100_held_out_and_mi300x_provenance():
    """H100's FA2 efficiency (0.35, the FlashAttention-3 paper's figure for FA2) is not fitted to
    Azure's run (B38): within 5%. MI300X's is (B37): within 1%. Per peak FLOP the MI300X ran the
    kernel at about 0.76 of the H100's rate."""
    h100, mi300x = _attention_tflops("h100_sxm"), _attention_tflops("mi300x")
    assert h100 == pytest.approx(row("B38")["value_si"] / 1e12, rel=0.05)
    assert mi300x == pytest.approx(row("B37")["value_si"] / 1e12, rel=0.01)
    h100_peak, mi_peak = (numbers(h).peak("fp16") for h in ("h100_sxm", "mi300x"))
    assert (mi300x / mi_peak) / (h100 / h100_peak) == pytest.approx(0.76, abs=0.03)


def test_flash2_forward_a100_head_dim_64_runs_below_the_spec():
    """Held out: A100's FA2 efficiency (0.73) is the FlashAttention-2 paper's top end (long sequences,
    head dim 128); Azure's head-dim-64 run (B41, 179.5 TFLOP/s) is 16% below the model, which has no
    head-dim term. Within 25%, on the optimistic side."""
    got, measured = _attention_tflops("a100_sxm"), row("B41")["value_si"] / 1e12
    print(f"A100 FA2 d=64: {got:.0f} vs {measured:.0f} TFLOP/s ({got / measured - 1:+.1%})")
    assert measured < got <= measured * 1.25


def test_flash2_forward_h200_held_out():
    """H200 is H100's die with faster HBM: the same FA2 efficiency, held out against Azure's run (B43)."""
    assert _attention_tflops("h200_sxm") == pytest.approx(row("B43")["value_si"] / 1e12, rel=0.05)


@pytest.mark.xfail(strict=True, reason="B42: FlashAttention-2 on GB200 runs 373.9 TFLOP/s, 15% of peak (it has no "
                                       "Blackwell tcgen05 path); the Blackwell specs' attention efficiency (0.35, "
                                       "ASSUMED from H100) stands for a kernel written for the chip, so the model is "
                                       "2.2x the FA2 run")
def test_flash2_forward_gb200():
    assert _attention_tflops("gb200") == pytest.approx(row("B42")["value_si"] / 1e12, rel=KERNEL_TOLERANCE)
