"""The composed DeepSeek Sparse Attention block against the measured DSA module tables.

aiconfigurator-core times a DSA layer's whole attention block (dsa_generation_module_perf,
dsa_context_module_perf: projections, lightning indexer, top-k MLA attention) per GPU and
framework. The workbench composes the same block from its GEMM tables (the attention
projections, layers.layer_gemms) and its attention primitives (layers.decode_attention /
prefill_attention: MLA attention over the top-k keys plus the indexer over all of them).
This prints the median signed and absolute error of the composition against the tables on
DeepSeek-V3.2 shapes (every row, one array call per group of heads and formats), and beside it
that of the block timed by the framework's fitted `dsa_module` surface (layers.dsa_block,
primitives/dsa.py: the measured module kernels, as predict.serving(moe_mla_kernels="measured")
reads them; in-sample: the surface was fitted to these rows, its held-out score is in
workbench/specs/kernels/<gpu>-<framework>.json). Nothing is fitted here.

    .venv/bin/python benchmarks/dsa_module_check.py [generation|context]   # needs the silicon extra
"""
from __future__ import annotations

import dataclasses
import glob
import sys

import numpy as np
import pandas as pd

from workbench.backends import numbers
from workbench.calibrate.aiconfigurator import data_root
from workbench.specs import load_model
from workbench.workloads import ops
from workbench.workloads.layers import add, decode_attention, dsa_block, layer_gemms, prefill_attention

from _module_check import summary

GPUS = {"h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm", "b200_sxm": "b200", "gb200": "gb200", "b300_sxm": "b300",
        "gb300": "gb300"}
LABELS = ("median", "median |err|")  # the error summary's labels of the signed and the absolute median


def composed_s(hw, model, rows: pd.DataFrame, phase: str) -> np.ndarray:
    """The workbench's time of the block at table rows sharing heads per GPU (-> TP), GEMM
    format and KV dtype: one array call over their batches and lengths."""
    r = rows.iloc[0]
    tp = model.n_heads / r.num_heads
    math = "fp8" if r.gemm_type == "fp8_block" else "bf16"
    w = a = 1.0 if math == "fp8" else 2.0
    kv = 1.0 if str(r.kv_cache_dtype).startswith("fp8") else 2.0
    b = rows.batch_size.to_numpy(float)
    length = rows.step.to_numpy(float) if phase == "generation" else rows.isl.to_numpy(float)
    g = layer_gemms(hw, model, tokens=b if phase == "generation" else b * length, tp=tp,
                    matmuls=ops.attention_matmuls(model), math=math, w_bytes=w, a_bytes=a, moe=False)
    if phase == "generation":
        att = decode_attention(hw, model, batch=b, context=length, tp=tp, math=math, kv_bytes=kv)
    else:
        att = prefill_attention(hw, model, batch=b, prompt=length, tp=tp, math=math, a_bytes=2.0, kv_bytes=kv)
    t = add(g, att)
    return np.broadcast_to(t["time_s"] + t["overhead_s"], b.shape)


def surface_s(hw, model, rows: pd.DataFrame, phase: str) -> np.ndarray:
    """The block from the framework's fitted dsa_module surface at the same rows (NaN where
    the framework has no surface for the formats)."""
    r = rows.iloc[0]
    tp = model.n_heads / r.num_heads
    math = "fp8" if r.gemm_type == "fp8_block" else "fp4" if r.gemm_type == "nvfp4" else "bf16"
    w = {"fp8": 1.0, "fp4": 0.5, "bf16": 2.0}[math]
    kv = 1.0 if str(r.kv_cache_dtype).startswith("fp8") else 2.0
    b = rows.batch_size.to_numpy(float)
    new = np.ones_like(b) if phase == "generation" else rows.isl.to_numpy(float)
    block = dsa_block(dataclasses.replace(hw, measured_moe_mla=True), model, phase="decode" if phase == "generation"
                      else "prefill", batch=b, new=new, prefix=rows.step.to_numpy(float), tp=tp, math=math, w_bytes=w,
                      kv_bytes=kv)
    return np.full(b.shape, np.nan) if block is None else np.broadcast_to(block["time_s"], b.shape)


def main(phase: str = "generation") -> None:
    root = data_root()
    model = load_model("deepseek_v3_2")
    for gpu, hw_name in GPUS.items():
        for fw in ("trtllm", "sglang", "vllm"):
            files = sorted(glob.glob(str(root / gpu / "sparse_attention" / fw / "*"
                                         / f"dsa_{phase}_module_perf.parquet")))
            if not files:
                continue
            d = pd.read_parquet(files[-1])
            d = d[(d.op_name == f"dsa_{phase}_module") & (d.model == "deepseek-ai/DeepSeek-V3.2")]
            if not len(d):
                continue
            hw = numbers(hw_name, framework=fw)
            groups = [g for _, g in d.groupby(["num_heads", "gemm_type", "kv_cache_dtype"])]
            measured = [g.latency.to_numpy(float) * 1e-3 for g in groups]
            composed = np.concatenate([composed_s(hw, model, g, phase) / m - 1 for g, m in zip(groups, measured)])
            surface = np.concatenate([surface_s(hw, model, g, phase) / m - 1 for g, m in zip(groups, measured)])
            print(f"{hw_name:9s} {fw:7s} {phase}: {len(d)} rows, composed vs measured {summary(composed, *LABELS)}; "
                  f"surface {summary(surface, *LABELS)}")


if __name__ == "__main__":
    main(*(sys.argv[1:2]))
