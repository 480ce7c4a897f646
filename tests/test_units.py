"""units.py: dtype sizes, unit attributes derived from name suffixes, SI formatting."""
from __future__ import annotations

import math

import pytest

from workbench.errors import InputError
from workbench.units import DTYPE_BYTES, DTYPES, dtype_bytes, format_si, unit_attrs

# Bytes per element: IEEE 754 binary32 = 4 B; TF32 is stored as FP32 (NVIDIA A100
# whitepaper: TF32 is a math mode, tensors stay FP32 in memory); bf16 / fp16 = 2 B;
# FP8 (E4M3/E5M2, OCP FP8 spec) and int8 = 1 B; int4 packs two per byte; "fp4" is NVFP4:
# two E2M1 values per byte plus one E4M3 scale per 16 values (NVIDIA, 'Introducing NVFP4 for
# Efficient and Accurate Low-Precision Inference', 2025), 0.5 + 1/16 B.
EXPECTED_BYTES = {
    "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0, "fp8_block": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5625,
    # 2:4 structured-sparse weights: half the values + a 2-bit index per kept value
    # (arXiv 2104.08378 Sec. 2): dense / 2 + 1/8 B per dense element (NVFP4: its kept values'
    # scales, one per 16 of them, halve too)
    "bf16_2:4": 1.125, "fp16_2:4": 1.125, "fp8_2:4": 0.625, "int8_2:4": 0.625, "fp4_2:4": 0.40625,
}


@pytest.mark.parametrize("dtype, nbytes", sorted(EXPECTED_BYTES.items()))
def test_dtype_bytes(dtype, nbytes):
    assert dtype_bytes(dtype) == nbytes
    assert isinstance(dtype_bytes(dtype), float)


def test_dtype_table_is_exactly_the_nine_formats_and_their_sparse_weights():
    assert set(DTYPES) == set(EXPECTED_BYTES)
    assert DTYPE_BYTES == EXPECTED_BYTES


def test_unknown_dtype_names_value_and_allowed():
    with pytest.raises(InputError) as e:
        dtype_bytes("fp6")
    msg = str(e.value)
    assert "dtype" in msg and "'fp6'" in msg
    for allowed in EXPECTED_BYTES:
        assert allowed in msg


def test_unknown_dtype_uses_the_caller_argument_name():
    with pytest.raises(InputError, match=r"kv='e4m3'"):
        dtype_bytes("e4m3", arg="kv")


def test_input_error_is_a_value_error():
    # Callers that catch ValueError (argparse, pandas) still see bad input.
    assert issubclass(InputError, ValueError)


@pytest.mark.parametrize("name, units", [
    ("ttft_s", "s"),
    ("tpot_lower_s", "s"),
    ("weights_per_device_bytes", "B"),
    ("memory_per_device_bytes", "B"),
    ("flops_per_s", "FLOP/s"),
    ("model_flops_per_s_per_device", "FLOP/s"),
    ("bus_bandwidth_bytes_per_s", "B/s"),
    ("hbm_bytes_per_s", "B/s"),
    ("output_tokens_per_s_per_device", "tokens/s"),
    ("output_tokens_per_s_per_user", "tokens/s"),
    ("output_tokens_per_s", "tokens/s"),
    ("prefill_flops", "FLOP"),
    ("cost_usd", "USD"),
    ("busbw_eff", "1"),
    ("tdp_w", "W"),
    ("energy_j", "J"),
])
def test_unit_attrs_from_suffix(name, units):
    attrs = unit_attrs(name)
    assert attrs["units"] == units
    assert attrs["long_name"]


def test_unit_attrs_longest_suffix_wins():
    # "_bytes_per_s" must not be read as "_s" (seconds) nor "_per_s".
    assert unit_attrs("bus_bandwidth_bytes_per_s") == {"units": "B/s", "long_name": "bus bandwidth (bytes/s)"}
    assert unit_attrs("output_tokens_per_s_per_device") == {
        "units": "tokens/s", "long_name": "output (tokens/s per device)"}
    assert unit_attrs("ttft_s") == {"units": "s", "long_name": "ttft (seconds)"}
    assert unit_attrs("weights_bytes") == {"units": "B", "long_name": "weights (bytes)"}


def test_unit_attrs_bare_suffix_has_no_empty_stem():
    # A variable named only by its unit ("bytes", "flops_per_s" in predict.gemm).
    assert unit_attrs("flops_per_s") == {"units": "FLOP/s", "long_name": "FLOP/s"}
    assert unit_attrs("bytes") == {"units": "B", "long_name": "bytes"}
    assert unit_attrs("flops") == {"units": "FLOP", "long_name": "FLOPs"}


def test_unit_attrs_counts():
    assert unit_attrs("n_layers") == {"units": "1", "long_name": "number of layers"}
    assert unit_attrs("n_kv_heads") == {"units": "1", "long_name": "number of kv heads"}


def test_unit_attrs_unknown_suffix_has_long_name_only():
    attrs = unit_attrs("bound")
    assert "units" not in attrs
    assert attrs["long_name"] == "bound"
    assert "units" not in unit_attrs("fits")


@pytest.mark.parametrize("value, unit, expected", [
    (3.35e12, "B/s", "3.35 TB/s"),   # H100 HBM3 bandwidth (A17b) -- the docstring example
    (989.4e12, "FLOP/s", "989 TFLOP/s"),  # H100 bf16 dense (A16a), 3 significant digits
    (4.5e15, "FLOP/s", "4.5 PFLOP/s"),    # B200 fp8 dense (A19b)
    (80e9, "B", "80 GB"),
    (1.5e6, "B", "1.5 MB"),
    (2e3, "B", "2 kB"),
    (2e18, "FLOP", "2 EFLOP"),
    (12.0, "s", "12 s"),
    (1.0, "s", "1 s"),
    (0.0, "s", "0 s"),
    (2.5e-3, "s", "2.5 ms"),
    (7e-6, "s", "7 µs"),
    (3e-9, "s", "3 ns"),
    (-2.5e-3, "s", "-2.5 ms"),
    (-4e9, "B", "-4 GB"),
])
def test_format_si(value, unit, expected):
    assert format_si(value, unit) == expected


def test_format_si_digits_and_nan():
    assert format_si(3.3512e12, "B/s", digits=5) == "3.3512 TB/s"
    assert format_si(math.nan, "s") == "nan"
    # Below 1 ns the smallest prefix is kept rather than dropping to no prefix.
    assert format_si(5e-11, "s") == "0.05 ns"


def test_block_fp8_runs_on_fp8_units():
    """Block-scaled FP8 has no peak of its own: its GEMMs run on the FP8 tensor cores."""
    from workbench.backends import numbers
    from workbench.specs import load_hardware
    from workbench.units import MATH_UNITS, PEAK_DTYPES
    assert MATH_UNITS["fp8_block"] == "fp8" and "fp8_block" not in PEAK_DTYPES
    assert numbers("h100_sxm").peak("fp8_block") == load_hardware("h100_sxm").peak("fp8") == 1978.9e12
