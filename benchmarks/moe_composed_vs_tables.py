"""The routed experts of one MoE layer two ways, at the kernel level: the composed estimate
(predict.serving's moe_mla_kernels="composed", and what its default "framework" runs in
decode-only iterations: the gate/up and down grouped GEMMs on the framework's GEMM surfaces,
workloads/layers.routed_gemm, plus the gated activation) against the framework's measured
fused-MoE tables (aiconfigurator-core 0.12.0, balanced routing: routing, permutation, both
grouped GEMMs, activation and finalize timed as one op). Nothing is fitted here; the ratio is
measured time / composed time per table row.

    pip install -e '.[silicon]'
    python benchmarks/moe_composed_vs_tables.py [--hardware h200_sxm] [--framework trtllm]

Figures (this machine, 2 cores, 4 GPUs x 3 frameworks, 51 s): the median ratio over every
table of a GPU and framework (formats and backends together) by tokens entering the layer
(seven of the twelve pairs the script prints):

                      tokens  1-64   65-1k   1k-4k   4k-16k
    h100_sxm trtllm           1.17   1.12    1.53    2.02
    h200_sxm trtllm           1.23   1.18    1.62    2.02
    h200_sxm sglang           2.01   2.22    3.34    4.07
    h200_sxm vllm             1.71   1.61    2.14    2.61
    b200     trtllm           1.24   1.30    1.87    2.44
    b200     sglang           1.59   1.66    2.31    2.94
    b200     vllm             1.44   1.59    2.18    2.79

At decode sizes the composed experts are close to the fastest backends (TensorRT-LLM's CUTLASS
block-FP8 on H200 1.02, vLLM's FlashInfer TRT-LLM FP8 on B200 1.07-1.10) and far from the 4-bit
weight-only ones (Marlin, Triton MXFP4, TRT-LLM MXFP4: 2-6x, vLLM 0.19's own MXFP4 path 19x); at
prefill sizes every fused backend is slower than the composition (4k-16k tokens: from 1.2x,
vLLM's Triton MXFP4 on H100, and 1.4x, its FlashInfer TRT-LLM FP8 on B200, to 10x, Marlin INT4),
the more so the thinner each expert is on its GPU (DeepSeek-V3's shape, TensorRT-LLM CUTLASS
block-FP8 on H200 at 16k tokens: 2.5x at MoE TP 1, 7.5x at TP 8).
Held out, the serving rows favour the composed path in decode under every framework and the
measured tables in vLLM's prefills only (specs/serving/frameworks.yaml prefill_moe_kernels; under
TensorRT-LLM and SGLang the fitted request latency per MoE layer stands in for the prefill part
of the difference); where a row's script runs the backend a table timed, the row reads the table
(calibrate/run_settings.MOE_TABLE_BACKENDS).
"""
from __future__ import annotations

import argparse

import numpy as np

GPUS = ("h100_sxm", "h200_sxm", "b200", "gb200")  # the GPUs of reference/serving_silicon.csv
TOKEN_BINS = (0, 64, 1024, 4096, 16384)  # tokens entering the layer, bin edges


def composed_s(hw, rows) -> np.ndarray:
    """Seconds of the composed routed experts for each table row (m: tokens, k: hidden,
    n: expert width, tp / ep: the MoE split), in the table's weight format: the gate/up and
    down matrices as the layer model runs them (workloads/layers.routed_gemm) and the gated
    activation as workloads/layers.layer_elementwise counts it (read 2F, write F)."""
    from workbench.primitives.gemm import elementwise
    from workbench.primitives.kernel_fits import MOE_FORMATS
    from workbench.workloads.layers import routed_gemm
    w_bytes, a_bytes, math = MOE_FORMATS[str(rows["dtype"].iloc[0])]
    tokens, hidden, inter = (rows[c].to_numpy(float) for c in ("m", "k", "n"))
    top_k, experts = rows["top_k"].to_numpy(float), rows["n_experts"].to_numpy(float)
    width = inter / rows["tp"].to_numpy(float)  # one expert's width on the GPU
    g = dict(hw=hw, n_experts=experts, top_k=top_k, tokens=tokens, ep=rows["ep"].to_numpy(float), math=math,
             w_bytes=w_bytes, a_bytes=a_bytes)
    up = routed_gemm(k=hidden, n=2.0 * width, **g)["time_s"]
    down = routed_gemm(k=width, n=hidden, **g)["time_s"]
    act = elementwise(hw=hw, nbytes=tokens * top_k * 3.0 * width * a_bytes)["time_s"]
    return up + down + act


def compare(hardware: str, framework: str):
    """One frame: every balanced-routing MoE table row of the GPU and framework with its
    measured and composed seconds."""
    import pandas as pd

    from workbench.backends import numbers
    from workbench.calibrate import aiconfigurator
    tables = aiconfigurator.import_kernels(hardware=hardware, framework=framework)
    ds = tables.get((hardware, framework))
    if ds is None:
        return pd.DataFrame()
    df = ds.to_dataframe().reset_index()
    df = df[df["kind"] == "moe"]
    hw = numbers(hardware, framework=framework)
    out = [rows.assign(composed_s=composed_s(hw, rows)) for _, rows in df.groupby(["dtype", "op"])]  # one format a call
    if not out:
        return pd.DataFrame()
    r = pd.concat(out)
    return r.assign(hardware=hardware, framework=framework, ratio=r["time_s"] / r["composed_s"])


def main() -> None:
    import pandas as pd
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default=None, help="one of " + ", ".join(GPUS) + " (default: all)")
    ap.add_argument("--framework", default=None, help="trtllm, vllm or sglang (default: all)")
    args = ap.parse_args()
    frames = [compare(h, f) for h in ([args.hardware] if args.hardware else GPUS)
              for f in ([args.framework] if args.framework else ("trtllm", "vllm", "sglang"))]
    r = pd.concat([f for f in frames if len(f)])
    r["tokens"] = pd.cut(r["m"], TOKEN_BINS + (np.inf,))
    pd.set_option("display.width", 200)
    print(r.pivot_table(index=["hardware", "framework"], columns="tokens", values="ratio", aggfunc="median",
                        observed=True).round(2).to_string())
    print(r.pivot_table(index=["hardware", "framework", "dtype", "op"], columns="tokens", values="ratio",
                        aggfunc="median", observed=True).round(2).to_string())


if __name__ == "__main__":
    main()
