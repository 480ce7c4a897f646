"""Best achieved GEMM and context-attention throughput in the Intel Arc Pro B60 kernel tables of
aiconfigurator-core 0.12.0 (vLLM 0.26.0): the gemm_peak_eff and attention_peak_eff of
specs/hardware/b60.yaml. Needs the silicon extra.

    .venv/bin/python benchmarks/b60_peaks.py
"""
from __future__ import annotations

import pandas as pd

from workbench.calibrate.aiconfigurator import data_root
from workbench.specs import load_hardware

VERSION = "0.26.0"


def main() -> None:
    root = data_root() / "b60"
    hw = load_hardware("b60")
    g = pd.read_parquet(root / "gemm" / "vllm" / VERSION / "gemm_perf.parquet")
    g["tflops"] = 2.0 * g.m * g.n * g.k / (g.latency * 1e-3) / 1e12
    for dt, name in (("bfloat16", "bf16"), ("fp8", "fp8")):
        best = g[g.gemm_dtype == dt].sort_values("tflops").iloc[-1]
        peak = hw.peak(name) / 1e12
        print(f"gemm {name}: {best.tflops:.1f} of {peak:.1f} TFLOP/s = {best.tflops / peak:.3f} "
              f"({int(best.m)}x{int(best.n)}x{int(best.k)})")
    a = pd.read_parquet(root / "attention" / "vllm" / VERSION / "context_attention_perf.parquet")
    a = a[(a.window_size == 0) & (a.attn_dtype == "bfloat16")]
    flops = 4.0 * a.batch_size * a.num_heads * a.isl ** 2 * a.head_dim / 2.0  # causal: half the pairs
    a = a.assign(tflops=flops / (a.latency * 1e-3) / 1e12)
    best = a.sort_values("tflops").iloc[-1]
    print(f"attention bf16: {best.tflops:.1f} of {hw.peak('bf16') / 1e12:.1f} TFLOP/s = "
          f"{best.tflops / (hw.peak('bf16') / 1e12):.3f} (s = {int(best.isl)}, d = {int(best.head_dim)})")


if __name__ == "__main__":
    main()
