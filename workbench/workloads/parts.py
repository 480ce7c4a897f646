"""Named parts of a kernel's cost (flops, bytes, compute_s, memory_s, overhead_s, comm_s,
time_s and the time per operation class) and their sum: what every layer cost in
workloads/layers and workloads/compressed returns."""
from __future__ import annotations

# Attention runs in 16-bit even when the GEMMs run in FP8/INT8/FP4: TensorRT-LLM's
# context FMHA and vLLM's default attention backends take bf16/fp16 Q, K, V (an FP8 KV
# cache is dequantized on load). FP8 attention is an opt-in variant not modelled here.
WIDE_MATH = ("fp32", "tf32", "bf16", "fp16")


def attention_math(math: str) -> str:
    return math if math in WIDE_MATH else "bf16"


PARTS = ("flops", "bytes", "compute_s", "memory_s", "overhead_s", "comm_s", "time_s",
         "matmul_s", "attention_s", "elementwise_s")  # the last three: time per operation class


def add(*parts: dict, scale=1.0) -> dict:
    """Sum named parts (missing keys count as zero), times `scale`."""
    out = {}
    for k in PARTS:
        total = 0.0
        for p in parts:
            v = p.get(k)
            if v is not None:
                total = total + v
        out[k] = total * scale
    return out
