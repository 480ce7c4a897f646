"""SI constants, dtype sizes, unit attributes from name suffixes, and formatting.

Every value inside the library is an SI float (s, bytes, FLOPs, FLOP/s, bytes/s, W, J,
USD). Prefixed units (GB, TFLOP/s, ms) appear only here, when formatting for people.
"""
from __future__ import annotations

from .errors import check_choice

# Decimal prefixes (datasheets quote memory bandwidth and FLOP/s in powers of ten).
KILO, MEGA, GIGA, TERA, PETA, EXA = 1e3, 1e6, 1e9, 1e12, 1e15, 1e18
# Binary prefixes (capacities of caches and some memories are powers of two).
KIB, MIB, GIB, TIB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
MILLI, MICRO, NANO = 1e-3, 1e-6, 1e-9
BITS_PER_BYTE = 8

# Bytes per element as stored. Sub-byte formats are packed (two int4 / fp4 values per byte).
# "fp4" is NVFP4, whose every 16 values share one FP8 (E4M3) scale: 0.5 + 1/16 B per element
# (NVIDIA, 'Introducing NVFP4 for Efficient and Accurate Low-Precision Inference', 2025-06:
# 16-value micro-blocks, E4M3 scale per block, one FP32 scale per tensor), the bytes the
# kernel tables' rooflines count (calibrate/kernel_features.GEMM_BYTES, kernel_fits.MOE_FORMATS),
# so a served fp4 GEMM's roofline is the one its surface was fitted with. MXFP4 (OCP MX v1.0:
# one E8M0 scale per 32 values, 0.5 + 1/32) stored as "fp4" (gpt-oss's experts) counts 6% over;
# its MoE tables read their own bytes (MOE_FORMATS' mxfp4_*). INT4 counts its packed values
# only (weight-only tables' rooflines: GEMM_BYTES).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32; tf32 only changes the tensor-core math
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_block": 1.0,  # block-scaled FP8 (DeepSeek-V3, Qwen3 FP8 checkpoints): one FP32 scale per 128x128 block
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5 + 1.0 / 16.0,  # NVFP4 (above)
}
# 2:4 structured-sparse weights (NVIDIA Ampere+ and AMD CDNA3 sparse tensor cores: two of
# every four weights kept): half the values plus a 2-bit index per kept value (NVIDIA,
# 'Accelerating Sparse Deep Neural Networks', arXiv 2104.08378, Sec. 2: 4 bits of metadata
# per 4 dense elements), so 1/2 of the dense bytes + 1/8 B per dense element. A weights
# format only: the math is the dense format's on the sparse tensor cores (the chip's
# sparse_2_4_speedup), activations and KV caches stay dense.
SPARSE_2_4 = {"bf16_2:4": "bf16", "fp16_2:4": "fp16", "fp8_2:4": "fp8", "int8_2:4": "int8", "fp4_2:4": "fp4"}
DTYPE_BYTES.update({sparse: DTYPE_BYTES[dense] / 2.0 + 1.0 / 8.0 for sparse, dense in SPARSE_2_4.items()})
DTYPES = tuple(DTYPE_BYTES)
FOUR_BIT_BYTES = (DTYPE_BYTES["int4"], DTYPE_BYTES["fp4"])  # 4-bit weights, as stored (W4A16 kernels take either)
DENSE_DTYPES = tuple(d for d in DTYPES if d not in SPARSE_2_4)  # what activations and KV caches may be
# Formats that run on another dtype's math units: block-scaled FP8 is FP8 tensor-core math
# with per-block scales applied in the GEMM's epilogue, a 2:4 format its dense format's
# (at the sparse speedup). They have no peak of their own.
MATH_UNITS = {"fp8_block": "fp8", **SPARSE_2_4}
PEAK_DTYPES = tuple(d for d in DTYPES if d not in MATH_UNITS)


def dtype_bytes(dtype: str, *, arg: str = "dtype") -> float:
    """Bytes per element of `dtype`; a clear error for an unknown name."""
    check_choice(arg, dtype, DTYPES)
    return DTYPE_BYTES[dtype]


# suffix -> (units attribute, words for long_name). Longest suffix first.
_SUFFIX_UNITS: tuple[tuple[str, str, str], ...] = (
    ("_flops_per_s_per_device", "FLOP/s", "FLOP/s per device"),
    ("_tokens_per_s_per_device", "tokens/s", "tokens/s per device"),
    ("_tokens_per_s_per_user", "tokens/s", "tokens/s per user"),
    ("_flops_per_device", "FLOP", "FLOPs per device"),
    ("_bytes_per_device", "B", "bytes per device"),
    ("_bytes_per_s", "B/s", "bytes/s"),
    ("_flops_per_s", "FLOP/s", "FLOP/s"),
    ("_tokens_per_s", "tokens/s", "tokens/s"),
    ("_per_s_per_device", "1/s", "per second per device"),
    ("_per_s_per_user", "1/s", "per second per user"),
    ("_per_s", "1/s", "per second"),
    ("_bytes", "B", "bytes"),
    ("_flops", "FLOP", "FLOPs"),
    ("_usd", "USD", "US dollars"),
    ("_tokens_per_j", "tokens/J", "tokens per joule"),
    ("_usd_per_hour", "USD/h", "US dollars per hour"),
    ("_eff", "1", "efficiency"),
    ("_s", "s", "seconds"),
    ("_w", "W", "watts"),
    ("_j", "J", "joules"),
)


def with_units(ds):
    """The dataset with every data variable's `units` and `long_name` (unit_attrs)."""
    for name in ds.data_vars:
        ds[name].attrs.update(unit_attrs(name))
    return ds


def unit_attrs(name: str) -> dict[str, str]:
    """`units` and `long_name` attributes derived from a variable's name suffix."""
    for suffix, units, words in _SUFFIX_UNITS:
        # A name may be the unit alone ("flops_per_s", "bytes" in predict.gemm).
        if name.endswith(suffix) or name == suffix[1:]:
            stem = name[: -len(suffix)].replace("_", " ").strip()
            return {"units": units, "long_name": f"{stem} ({words})" if stem else words}
    if name.startswith("n_"):
        return {"units": "1", "long_name": "number of " + name[2:].replace("_", " ")}
    return {"long_name": name.replace("_", " ")}


_SCALES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def format_si(value: float, unit: str, digits: int = 3) -> str:
    """Human form of an SI value: format_si(3.35e12, 'B/s') -> '3.35 TB/s'."""
    v = float(value)
    if v != v:
        return "nan"
    mag = abs(v)
    table = _SCALES if mag >= 1 or mag == 0 else _SMALL
    for scale, prefix in table:
        if mag >= scale or scale == table[-1][0]:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}"  # pragma: no cover
