"""What a serving row's benchmark harness and engine were set to, where the row does not say.

The harness. InferenceX (SemiAnalysisAI/InferenceX), whose runs are most of the serving
rows, draws every request's prompt and output length uniformly from the integers in
[int(0.8 L), L] for the nominal length L (`utils/bench_serving/benchmark_serving.py`,
`sample_uniform`: `lower = int(seq_len * range_ratio)`, with `RANDOM_RANGE_RATIO: 0.8` in
`.github/workflows/benchmark-tmpl.yml` and `benchmark-multinode-tmpl.yml`, the default since
2025-11-03, fixed since 2026-01-21). Its runs are its sequence-length settings (1k/1k,
1k/8k, 8k/1k: the `isl` / `osl` of its configuration's entries, inferencex_deployments.csv):
a row at one of them is predicted at the mean lengths, with lengths "varied" (completions,
so arrivals, spread: predict.serving). Rows at other lengths came from other harnesses
(aiconfigurator's own collection), which do not say how they draw lengths: they are
predicted at their nominal lengths with lengths "equal". This
is for the aggregated rows, run by InferenceX's single-node scripts through that client; its
multi-node (disaggregated) runs went through the srt-slurm launcher's own benchmark, whose
length draws InferenceX's configuration of that period does not state (it vendored no
srt-slurm recipe before 2026-03; later recipes state random_range_ratio 0.8): they keep
their nominal lengths (with the mean lengths their TPOT / TTFT median |err| moved from
11.8 / 33.0% to 11.9 / 34.6%, no evidence either way).

The engine. InferenceX's single-node scripts set, per GPU, model, precision, TP and
concurrency, SGLang's polling interval, each framework's tokens per iteration (chunked-prefill
size, max_num_tokens, max-num-batched-tokens), memory fraction, TensorRT-LLM's attention-DP
balancing (attention_dp_config, written with attention DP only: at one replica it holds
nothing, workloads/adp_balance.py) and KV-cache dtype (FP8 where the
checkpoint's own "auto" would keep 16 bits: every TensorRT-LLM DeepSeek-R1 and Llama script)
(reference/inferencex_engine_settings.csv, transcribed from the scripts with their commits;
their running-request caps are left out, as its README says); a row the file matches is
predicted with them, any other with the framework's defaults.

The MoE kernel. A script may pick the MoE backend its experts run (`moe_backend`: TensorRT-LLM's
`moe_config.backend`, SGLang's `--moe-runner-backend`, vLLM's backend environment variables).
Where the framework's measured MoE table for the row's format on that GPU timed that very
backend (MOE_TABLE_BACKENDS), the row's MoE layers read the table (predict.serving's
moe_mla_kernels="measured"); everywhere else they stay grouped GEMMs on the GEMM tables (the
default, "composed"), which hold no W4A16 table on Hopper.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from ..backends.kernel_tables import ENGINE_SETTINGS, FRACTIONS

ENGINE_SETTINGS_CSV = Path(__file__).parent / "reference" / "inferencex_engine_settings.csv"
RANGE_RATIO = 0.8  # InferenceX's RANDOM_RANGE_RATIO (module doc)
# predict.serving's engine settings the file transcribes: all but the running-request caps
# (reference/README.md says why); FRACTIONS are the ones that are no counts
SETTINGS = tuple(s for s in ENGINE_SETTINGS if s != "max_running")


@functools.lru_cache(maxsize=None)
def _sequence_settings() -> frozenset:
    """InferenceX's (isl, osl) settings: every pair its configuration's entries ran."""
    from .recipes import load
    df = load()
    return frozenset(zip(df.isl.astype(int), df.osl.astype(int)))


def mean_length(nominal: int, range_ratio: float = RANGE_RATIO) -> int:
    """The mean of the integers in [int(range_ratio x nominal), nominal], rounded."""
    return int(round((int(range_ratio * nominal) + nominal) / 2.0))


def inferencex(row) -> bool:
    """Whether a row ran at one of InferenceX's sequence-length settings (module doc)."""
    return (int(row.isl), int(row.osl)) in _sequence_settings()


def harness_lengths(row) -> dict:
    """predict.serving's prompt, generate and lengths for a row (module doc)."""
    if inferencex(row):
        return {"prompt": mean_length(int(row.isl)), "generate": mean_length(int(row.osl)), "lengths": "varied"}
    return {"prompt": int(row.isl), "generate": int(row.osl), "lengths": "equal"}


# (framework, GPU, precision of the script's line) -> the MoE backend the framework's measured
# MoE table for that format was timed with. TensorRT-LLM's MXFP4 W4A16 tables on Hopper
# (gpt-oss, precision fp4; specs/kernels/h100_sxm-trtllm.json, h200_sxm-trtllm.json,
# "mxfp4_w4a16"): aiconfigurator-core's collector builds GPT-OSS MoE layers with
# `model_config.moe_backend = "triton"` for 86 < SM < 100 (ai-dynamo/aiconfigurator,
# collector/trtllm/collect_moe.py, run_moe_torch: "use triton backend for best performance on
# Hopper"). vLLM's gpt-oss Hopper scripts pick Marlin, timed only at Kimi-K2's shape. SGLang's
# B200 and B300 scripts pick flashinfer_trtllm, which is what its 0.5.14 tables for those GPUs
# time by default for block-FP8 and NVFP4 (kernel_source sglang_flashinfer_trtllm_moe; the
# Triton fused MoE is their second source, its only one on Hopper), but those rows stay
# composed: reading the tables there, with every framework's constants refitted (workbench
# calibrate fit-serving; tried at 814d302, before vLLM's prefill rule of 340f315), gave SGLang
# TPOT median |err| 8.6% -> 7.0% in sample but 8.8% -> 9.7% leave-one-model-out and 9.9% ->
# 10.6% leave-one-GPU-out, every row's TTFT leave-one-model-out 27.2% -> 28.6% (Qwen3.5's TTFT
# 24.5% -> 18.2%, its TPOT 8.5% -> 10.2%). With them the other matches the scripts state
# (inferencex_engine_settings.csv): TensorRT-LLM's DeepSeek-R1 FP8 on H200 (CUTLASS, the backend
# of its H200 block-FP8 table) and on B200 at 1k/8k from concurrency 256 (DEEPGEMM, its B200
# table's): TensorRT-LLM TPOT leave-one-GPU-out 9.7% -> 14.0%, every row's TTFT
# leave-one-model-out 27.2% -> 28.7% after the first refit pass. Not applied.
MOE_TABLE_BACKENDS = {("trtllm", "h100_sxm", "fp4"): "triton", ("trtllm", "h200_sxm", "fp4"): "triton"}


@functools.lru_cache(maxsize=None)
def _table() -> pd.DataFrame:
    from .recipes import _architecture
    df = pd.read_csv(ENGINE_SETTINGS_CSV)
    return df.assign(arch=df.model.map(_architecture))


def engine(row, devices: int) -> dict:
    """The engine settings (SETTINGS and "kv", only those the script set) InferenceX's
    script launched a row's aggregated server with on `devices` GPUs, with
    moe_mla_kernels="measured" where its MoE backend is the one the MoE table timed
    (MOE_TABLE_BACKENDS); {} where no line of reference/inferencex_engine_settings.csv
    matches (module doc)."""
    from .recipes import _architecture
    from .serving_rows import system
    if not inferencex(row):
        return {}
    df, conc = _table(), float(row.concurrency)
    m = df[(df.framework == row.backend) & (df.gpu == system(row.system)) & (df.precision == row.precision)
           & (df.arch == _architecture(row.model_path))
           & (df.tp.isna() | (df.tp == devices)) & (df.isl.isna() | (df.isl == row.isl))
           & (df.osl.isna() | (df.osl == row.osl)) & (df.min_concurrency.isna() | (df.min_concurrency <= conc))
           & (df.max_concurrency.isna() | (df.max_concurrency >= conc))]
    if m.empty:
        return {}
    line = m.iloc[0]
    out = {k: (float(line[k]) if k in FRACTIONS else int(line[k])) for k in SETTINGS if line[k] == line[k]}
    if MOE_TABLE_BACKENDS.get((line.framework, line.gpu, line.precision)) == line.moe_backend:  # blank: NaN
        out["moe_mla_kernels"] = "measured"  # the MoE table timed the backend the script runs
    return {**out, **({"kv": line.kv} if isinstance(line.kv, str) else {})}
