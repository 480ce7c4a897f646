"""Import the measured kernel tables of NVIDIA's `aiconfigurator-core` package (PyPI,
Apache-2.0; the optional extra `silicon`) into the project's measurement schema
(microbench/schema.py): one dataset per GPU and serving framework, SI units, every row
keeping the package version, the framework version and the file it came from.

    workbench calibrate import-kernels --source aiconfigurator --hardware h100_sxm --framework trtllm --out DIR

Only the kernel tables under `systems/data/<gpu>/<class>/<framework>/<version>/` are read
(GEMM, context and generation attention, MLA decode, MoE layers, NCCL and custom all-reduce,
expert-parallel dispatch and combine, Gated DeltaNet, DeepSeek Sparse Attention's
attention block, DeepSeek-V4's attention block and hyper-connections, MiniMax-M3's sparse
attention block); the package's
end-to-end serving measurements are never read: they are held out to judge the model.

Units of the tables (checked against physics in tests/calibrate/test_aiconfigurator.py):
`latency` is milliseconds (an 8192^3 bf16 GEMM on H100 takes 1.40: 783 TFLOP/s, 79% of
peak); NCCL `message_size` counts elements of the whole buffer, nccl-tests' `size` (half
takes twice int8's time at large sizes).
"""
from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..microbench import schema
from ..units import DTYPE_BYTES

PACKAGE = "aiconfigurator-core"
MS = 1e-3
# Their directory name -> our catalog name (the GPUs without a catalog spec keep theirs).
HARDWARE = {"a100_sxm": "a100_sxm", "h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm", "b200_sxm": "b200",
            "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300", "l40s": "l40s",
            "rtx_pro_6000_server": "rtx_pro_6000", "b60": "b60"}
FRAMEWORKS = ("trtllm", "vllm", "sglang")
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8", "fp8_block": "fp8_block",
          "nvfp4": "fp4", "int8": "int8", "int4_wo": "int4", "fp8_e4m3": "fp8"}
COLLECTIVE_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
                  "alltoall": "all_to_all"}


def data_root() -> Path:
    """systems/data of the installed package; a clear error when the extra is missing."""
    try:
        import aiconfigurator_core  # noqa: F401  (the package whose data is read)
        import pyarrow  # noqa: F401  (its parquet reader)
    except ImportError:
        raise InputError("source='aiconfigurator' needs the optional extra: pip install -e '.[silicon]' "
                         "(aiconfigurator-core and pyarrow)") from None
    return Path(str(resources.files("aiconfigurator_core"))) / "systems" / "data"


def package_version() -> str:
    return metadata.version(PACKAGE)


def available(root: Path | None = None) -> pd.DataFrame:
    """Every kernel table of the package: gpu, class, framework, version, file."""
    root = root or data_root()
    rows = [{"gpu": p.parts[-5], "kernel_class": p.parts[-4], "framework": p.parts[-3], "version": p.parts[-2],
             "file": str(p.relative_to(root.parents[1]))}
            for p in sorted(root.glob("*/*/*/*/*.parquet"))]
    return pd.DataFrame(rows, columns=["gpu", "kernel_class", "framework", "version", "file"])


def newest_file(gpu: str, framework: str, stem: str, tables: pd.DataFrame | None = None) -> tuple:
    """(path, framework version) of the newest collection of the package's table `stem`.parquet
    for `gpu` (the package's name for it) and `framework`, (None, None) where it has none;
    `tables` is available()'s listing when the caller holds it."""
    tables = available() if tables is None else tables
    t = tables[(tables.gpu == gpu) & (tables.framework == framework) & tables.file.str.endswith(f"/{stem}.parquet")]
    if not len(t):
        return None, None
    version = max(t.version, key=_version_key)
    return data_root().parents[1] / t[t.version == version].iloc[0].file, version


def newest_table(gpu: str, framework: str, stem: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(imported rows, raw parquet rows) of the newest collection of the package's table
    `stem`.parquet for `gpu` and `framework`; ValueError where it has none."""
    path, version = newest_file(gpu, framework, stem)
    if path is None:
        raise ValueError(f"{PACKAGE} has no {stem} table for {gpu} / {framework}")
    return _read(path, HARDWARE.get(gpu, gpu), framework, version, data_root()), pd.read_parquet(path)


def _origin(file: str, framework_version: str) -> str:
    return f"{PACKAGE} {package_version()} {file} (framework version {framework_version})"


def _gemm(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    dt = df["gemm_dtype"].map(DTYPES).fillna(df["gemm_dtype"])
    t = df["latency"].to_numpy(float) * MS
    flops = 2.0 * df["m"].to_numpy(float) * df["n"].to_numpy(float) * df["k"].to_numpy(float)
    return pd.DataFrame({"kind": "gemm", "op": df["kernel_source"].astype(str), "hardware": hw, "framework": fw,
                         "dtype": dt, "m": df["m"], "n": df["n"], "k": df["k"], "time_s": t,
                         "metric": "flops_per_s", "value_si": flops / t, "source": origin})


def _attention(df: pd.DataFrame, hw: str, fw: str, origin: str, phase: str) -> pd.DataFrame:
    t = df["latency"].to_numpy(float) * MS
    decode = phase == "generation"
    # older tables lack some columns: no sliding window, the KV cache in the math dtype
    df = df.assign(window_size=df.get("window_size", 0), kv_cache_dtype=df.get("kv_cache_dtype", df["attn_dtype"]),
                   step=df.get("step", 0))
    return pd.DataFrame({
        "kind": "decode_attention" if decode else "attention", "op": df["kernel_source"].astype(str),
        "hardware": hw, "framework": fw, "dtype": df["attn_dtype"].map(DTYPES).fillna(df["attn_dtype"]),
        "kv_dtype": df["kv_cache_dtype"].map(DTYPES).fillna(df["kv_cache_dtype"]),
        "batch": df["batch_size"], "seq_len": df["isl"], "context": df["step"] if decode else 0.0,
        "n_heads": df["num_heads"], "n_kv_heads": df["num_key_value_heads"], "head_dim": df["head_dim"],
        "window": df["window_size"], "causal": 1.0, "time_s": t, "metric": "time_s", "value_si": t,
        "source": origin})


def _collective(df: pd.DataFrame, hw: str, fw: str, origin: str, op_column: str, dtype_column: str) -> pd.DataFrame:
    df = df[df[op_column].isin(list(COLLECTIVE_OPS))]
    dt = df[dtype_column].map(DTYPES).fillna(df[dtype_column])
    t = df["latency"].to_numpy(float) * MS
    return pd.DataFrame({"kind": df[op_column].map(COLLECTIVE_OPS), "op": df["kernel_source"].astype(str),
                         "hardware": hw, "framework": fw, "dtype": dt, "devices": df["num_gpus"],
                         "size_bytes": df["message_size"].to_numpy(float) * dt.map(DTYPE_BYTES).to_numpy(float),
                         "time_s": t, "metric": "time_s", "value_si": t, "source": origin})


# MoE weight formats of the tables -> the variant names of the fitted surfaces
# (primitives/kernel_fits.MOE_FORMATS); the gated kernels only (their main source).
MOE_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4",
              "int4_wo": "int4", "w4a16_mxfp4": "mxfp4_w4a16", "w4a8_mxfp4_mxfp8": "mxfp4_w4a8"}


# How the MoE tables route their tokens: evenly, or with power-law expert loads (the busiest
# EP group timed; aiconfigurator's collector estimates alpha 1.01 for DeepSeek-V3/R1 and 1.2
# for Qwen3-235B by latency matching on CNN/DailyMail and OpenOrca). The committed surfaces
# are fitted to the balanced rows; the others are for experiments
# (benchmarks/moe_routing_experiment.py).
MOE_ROUTINGS = ("balanced", "power_law_1.01", "power_law_1.2")


def _moe(df: pd.DataFrame, hw: str, fw: str, origin: str, routing: str = "balanced") -> pd.DataFrame:
    """One MoE layer's routed experts (routing, gated grouped GEMMs, activation, combine),
    the rows of one token routing (MOE_ROUTINGS) only."""
    df = df[(df["distribution"] == routing) & df["moe_dtype"].isin(list(MOE_DTYPES))
            & ~df["kernel_source"].astype(str).str.contains("nongated")]
    t = df["latency"].to_numpy(float) * MS
    return pd.DataFrame({"kind": "moe", "op": df["kernel_source"].astype(str), "hardware": hw, "framework": fw,
                         "dtype": df["moe_dtype"].map(MOE_DTYPES), "m": df["num_tokens"], "k": df["hidden_size"],
                         "n": df["inter_size"], "n_experts": df["num_experts"], "top_k": df["topk"],
                         "tp": df["moe_tp_size"], "ep": df["moe_ep_size"], "time_s": t, "metric": "time_s",
                         "value_si": t, "source": origin})


def _mla_decode(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """MLA decode attention (DeepSeek-V3 geometry: a 512-wide latent and 64 rope dimensions
    per token, absorbed weights): `num_heads` are the heads on the GPU, `step` the cached
    tokens."""
    t = df["latency"].to_numpy(float) * MS
    return pd.DataFrame({"kind": "mla_decode", "op": df["kernel_source"].astype(str), "hardware": hw,
                         "framework": fw, "dtype": df["mla_dtype"].map(DTYPES).fillna(df["mla_dtype"]),
                         "kv_dtype": df["kv_cache_dtype"].map(DTYPES).fillna(df["kv_cache_dtype"]),
                         "batch": df["batch_size"], "seq_len": 1.0, "context": df["step"], "n_heads": df["num_heads"],
                         "n_kv_heads": 1.0, "head_dim": 512.0, "time_s": t, "metric": "time_s", "value_si": t,
                         "source": origin})


US = 1e-6
EP_TABLES = ("moe_a2a_perf", "wideep_deepep_ll_perf", "wideep_deepep_normal_perf")
DEEPEP_SMS = 20  # SMs DeepEP's normal kernels use unless told (deep_ep/buffer.py: Buffer.num_sms = 20)
# Element formats of the EP all-to-all tables; vLLM's "default" is taken as 16-bit (the bytes
# of the roofline; the fitted efficiency absorbs the difference where a kernel sends less).
A2A_DTYPES = {**DTYPES, "default": "bf16"}


def _ep_row(df: pd.DataFrame, *, kind, op, hw, fw, dtype, time_s, ep, origin) -> pd.DataFrame:
    """EP dispatch or combine rows: `m` tokens per rank, `k` hidden size, over `ep` GPUs."""
    return pd.DataFrame({"kind": kind, "op": op, "hardware": hw, "framework": fw, "dtype": dtype,
                         "m": df[[c for c in ("num_tokens", "num_token") if c in df][0]].to_numpy(float),
                         "k": df["hidden_size"].to_numpy(float),
                         "top_k": df[[c for c in ("topk", "num_topk") if c in df][0]].to_numpy(float),
                         "n_experts": df["num_experts"].to_numpy(float), "ep": ep, "devices": ep, "time_s": time_s,
                         "metric": "time_s", "value_si": time_s, "source": origin})


def _moe_a2a(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """TensorRT-LLM's and vLLM's expert-parallel dispatch / combine (DeepEP high-throughput and
    low-latency kernels, ...), one node: `latency` is microseconds here (transmit + notify;
    a combine of 16 tokens x 8 experts x 3072 x 2 B on 8 B200s takes 60 us)."""
    df = df[df["node_num"] == 1]
    t = df["latency"].to_numpy(float) * US
    return _ep_row(df, kind="ep_" + df["phase"].astype(str), op=df["comm_backend"].astype(str), hw=hw, fw=fw,
                   dtype=df["comm_dtype"].map(A2A_DTYPES).fillna(df["comm_dtype"]), time_s=t,
                   ep=df["ep_size"].to_numpy(float), origin=origin)


def _deepep(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """SGLang's DeepEP tables (wideep_deepep_ll / _normal), one node of 8 GPUs: a row holds
    both phases, in microseconds. DeepEP's low-latency dispatch sends FP8 (its default,
    use_fp8), its combine and the normal kernels 16-bit."""
    df = df[df["node_num"] == 1]
    ll = str(df["op_name"].iloc[0]) == "ll" if len(df) else False
    if not ll:  # the normal kernels are timed at 4-24 SMs: the rows at DeepEP's default
        df = df[(df["dispatch_sms"] == DEEPEP_SMS) & (df["combine_sms"] == DEEPEP_SMS)]
    frames = []
    for phase in ("dispatch", "combine"):
        t = (df[f"{phase}_avg_t_us"] if ll else df[f"{phase}_transmit_us"] + df[f"{phase}_notify_us"]) * US
        frames.append(_ep_row(df, kind=f"ep_{phase}", op="deepep_" + ("ll" if ll else "normal"), hw=hw, fw=fw,
                              dtype="fp8" if ll and phase == "dispatch" else "bf16", time_s=t.to_numpy(float),
                              ep=8.0 * df["node_num"].to_numpy(float), origin=origin))
    return pd.concat(frames, ignore_index=True)


def _gdn(df: pd.DataFrame, hw: str, fw: str, origin: str, kind: str = "gdn") -> pd.DataFrame:
    """A Gated DeltaNet (or KDA, `kind`) layer's token mixing: per shape, the framework's
    kernels of one phase summed (prefill: the causal convolution and the chunked delta
    rule; decode: the convolution update and the recurrent rule), as the layer runs them.
    `n_heads` value heads, `n_kv_heads` key heads, `head_dim` the key and `k` the value head
    size, `m` the model width, `batch` sequences of `seq_len` tokens."""
    keys = ["phase", "batch_size", "seq_len", "d_model", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"]
    df = df[df["phase"].isin(["context", "generation"])]  # KDA's speculative 'verify' rows: not a served phase here
    g = df.groupby(keys, as_index=False).agg(latency=("latency", "sum"), parts=("kernel_source", "nunique"))
    g = g[g["parts"] == 2]  # both kernels of the phase timed
    t = g["latency"].to_numpy(float) * MS
    return pd.DataFrame({"kind": f"{kind}_" + g["phase"].map({"context": "prefill", "generation": "decode"}),
                         "op": kind, "hardware": hw, "framework": fw, "dtype": "bf16", "batch": g["batch_size"],
                         "seq_len": g["seq_len"], "n_heads": g["num_v_heads"], "n_kv_heads": g["num_k_heads"],
                         "head_dim": g["head_k_dim"], "k": g["head_v_dim"], "m": g["d_model"], "time_s": t,
                         "metric": "time_s", "value_si": t, "source": origin})


# A KDA decode step's recurrence: the packed kernel every framework's table times (vLLM also
# times a fused alternative, SGLang a fused convolution + recurrence on a few shapes); with
# the convolution update it is the layer's decode, as the GDN tables' two kernels are.
KDA_DECODE = ("causal_conv1d_update", "fused_recurrent_kda_packed_decode")


def _kda(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """Kimi Delta Attention's token mixing (kda_perf: the Q/K/V convolution and the chunked
    KDA rule in prefill, KDA_DECODE in decode), as _gdn reads Gated DeltaNet's."""
    keep = (df["phase"] == "context") | ((df["phase"] == "generation") & df["kernel_source"].isin(KDA_DECODE))
    return _gdn(df[keep], hw, fw, origin, kind="kda")


DSA_TABLES = ("dsa_generation_module_perf", "dsa_context_module_perf")
# the block with its lightning indexer, as served (the tables' `_skip_indexer` rows time it without)
DSA_OPS = ("dsa_generation_module", "dsa_context_module")


def _dsa_module(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """A DeepSeek Sparse Attention layer's whole attention block (the MLA projections, the
    lightning indexer and its top-k, top-k MLA attention) of DeepSeek-V3.2 or GLM-5:
    `num_heads` are the heads on the GPU, `batch_size` sequences of `isl` new tokens (1 in
    generation) after `step` cached ones. Each row carries its model's dimensions (read from
    the catalog spec its Hugging Face id resolves to; rows of a model the catalog lacks are
    left out), so one roofline serves every model."""
    from ..specs import load_model
    from .kernel_features import dsa_dims
    df = df[df["op_name"].isin(DSA_OPS) & (df["mla_dtype"] == "bfloat16")]
    dims = {}
    for hf_id in sorted(set(df["model"])):
        try:
            m = load_model(hf_id)
        except InputError:
            continue
        dims[hf_id] = dsa_dims(m)
    df = df[df["model"].isin(list(dims))]
    t = df["latency"].to_numpy(float) * MS
    decode = df["op_name"] == DSA_OPS[0]
    model = pd.DataFrame([dims[m] for m in df["model"]], index=df.index, columns=list(next(iter(dims.values()), {})))
    return pd.DataFrame({
        "kind": np.where(decode, "dsa_decode", "dsa_prefill"), "op": df["kernel_source"].astype(str), "hardware": hw,
        "framework": fw, "dtype": df["gemm_type"].map(DTYPES).fillna(df["gemm_type"]),
        "kv_dtype": df["kv_cache_dtype"].map(DTYPES).fillna(df["kv_cache_dtype"]), "batch": df["batch_size"],
        "seq_len": np.where(decode, 1.0, df["isl"]), "context": df["step"], "n_heads": df["num_heads"],
        "tp": df["tp_size"], **{c: model[c] for c in model.columns}, "time_s": t, "metric": "time_s",
        "value_si": t, "source": origin})


# DeepSeek-V4's attention block, one table per compress ratio and phase (the vLLM tables'
# dsv4_hca_attn_module, the attention alone, and the sparse kernels' tables are not read)
DSV4_TABLES = tuple(f"dsv4_{r}_{p}_module_perf" for r in ("csa", "hca") for p in ("generation", "context"))


def _dsv4_module(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """A DeepSeek-V4 layer's whole attention block (query latent and up-projection, the
    shared key-value vector, the compressor, in CSA layers the indexer and its top-k,
    attention over the sliding window and the compressed entries, the grouped output
    projection), of DeepSeek-V4-Flash or -Pro: `num_heads` are the heads on the GPU
    (the model's heads over `tp_size`), `batch_size` sequences of `isl` new tokens (1 in
    generation) after `step` cached ones, `compress_ratio` 4 (CSA) or 128 (HCA). Each row
    carries its model's dimensions (the catalog spec its Hugging Face id resolves to; rows
    of a model the catalog lacks are left out)."""
    from ..specs import load_model
    from .kernel_features import dsv4_table_dims
    df = df[df["op_name"].astype(str).str.fullmatch(r"dsv4_(csa|hca)_(generation|context)_module")]
    dims = {}
    for hf_id in sorted(set(df["model"])):
        try:
            dims[hf_id] = dsv4_table_dims(load_model(hf_id))
        except InputError:
            continue
    df = df[df["model"].isin(list(dims))]
    t = df["latency"].to_numpy(float) * MS
    decode = df["op_name"].astype(str).str.contains("generation").to_numpy()
    model = pd.DataFrame([dims[m] for m in df["model"]], index=df.index, columns=list(next(iter(dims.values()), {})))
    return pd.DataFrame({
        "kind": np.where(decode, "dsv4_decode", "dsv4_prefill"), "op": df["kernel_source"].astype(str),
        "hardware": hw, "framework": fw, "dtype": df["gemm_type"].map(DTYPES).fillna(df["gemm_type"]),
        "kv_dtype": df["kv_cache_dtype"].map(DTYPES).fillna(df["kv_cache_dtype"]), "batch": df["batch_size"],
        "seq_len": np.where(decode, 1.0, df["isl"]), "context": df["step"], "n_heads": df["num_heads"],
        "tp": df["tp_size"], "compress_ratio": df["compress_ratio"], **{c: model[c] for c in model.columns},
        "time_s": t, "metric": "time_s", "value_si": t, "source": origin})


MSA_TABLES = ("msa_generation_module_perf", "msa_context_module_perf")


def _msa_module(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """A MiniMax-M3 sparse layer's whole attention block (MiniMax Sparse Attention: Q, K, V
    and output projections, the indexer's projections, block scoring and top-k, GQA attention
    over the selected blocks): `num_heads` are the query heads on the GPU (SGLang's rows: the
    model's 64 over `tp_size`; TensorRT-LLM's and vLLM's: 1-128 at tp_size 1, the GPU's share
    as a sweep), `batch_size` sequences of `isl` new tokens (1 in generation) after `step`
    cached ones. Each row carries its model's dimensions (the catalog spec its Hugging Face id
    resolves to; rows of a model the catalog lacks are left out) and, as `n_kv_heads`, the KV
    heads on its GPU: the GPU's share of the model's, at least one (msa_work.msa_kv_heads)."""
    from ..primitives.msa_work import msa_kv_heads
    from ..specs import load_model
    from .kernel_features import msa_table_dims
    df = df[df["op_name"].isin(["msa_generation_module", "msa_context_module"])]
    dims, models = {}, {}
    for hf_id in sorted(set(df["model"])):
        try:
            models[hf_id] = load_model(hf_id)
        except InputError:
            continue
        dims[hf_id] = msa_table_dims(models[hf_id])
    df = df[df["model"].isin(list(dims))]
    t = df["latency"].to_numpy(float) * MS
    decode = (df["op_name"] == "msa_generation_module").to_numpy()
    model = pd.DataFrame([dims[m] for m in df["model"]], index=df.index, columns=list(next(iter(dims.values()), {})))
    heads = df["num_heads"].to_numpy(float)
    kv = msa_kv_heads(heads, np.array([models[m].n_heads for m in df["model"]], float),
                      np.array([models[m].n_kv_heads for m in df["model"]], float))
    return pd.DataFrame({
        "kind": np.where(decode, "msa_decode", "msa_prefill"), "op": df["kernel_source"].astype(str), "hardware": hw,
        "framework": fw, "dtype": df["gemm_type"].map(DTYPES).fillna(df["gemm_type"]),
        "kv_dtype": df["kv_cache_dtype"].map(DTYPES).fillna(df["kv_cache_dtype"]), "batch": df["batch_size"],
        "seq_len": np.where(decode, 1.0, df["isl"]), "context": df["step"], "n_heads": heads, "n_kv_heads": kv,
        "tp": df["tp_size"], **{c: model[c] for c in model.columns}, "time_s": t, "metric": "time_s",
        "value_si": t, "source": origin})


MHC_SITES = 2  # the hyper-connection sites of a layer (before the attention and the MoE), as every row times


def _mhc(df: pd.DataFrame, hw: str, fw: str, origin: str) -> pd.DataFrame:
    """DeepSeek-V4's manifold-constrained hyper-connections: one row times one layer's `pre`
    (norm, projection, Sinkhorn, collapse) or `post` (expand and mix) at both its sites
    (num_sites 2: aiconfigurator-core's sdk/models/deepseek_v4.py counts one pre and one
    post per layer), `num_tokens` tokens, hc_mult streams of `hidden_size`."""
    df = df[(df["num_sites"] == MHC_SITES) & df["op_name"].isin(["pre", "post"])]
    t = df["latency"].to_numpy(float) * MS
    return pd.DataFrame({"kind": "mhc", "op": df["kernel_source"].astype(str), "hardware": hw, "framework": fw,
                         "dtype": "bf16", "m": df["num_tokens"], "k": df["hidden_size"], "hc_mult": df["hc_mult"],
                         "time_s": t, "metric": "time_s", "value_si": t, "source": origin})


def _read(path: Path, hw: str, fw: str, version: str, root: Path, moe_routing: str = "balanced") -> pd.DataFrame | None:
    """One parquet table as schema rows (None for tables with no importer yet); MoE tables
    keep the rows of `moe_routing`."""
    import pyarrow.parquet as pq
    name = path.stem
    origin = _origin(str(path.relative_to(root.parents[1])), version)
    if name == "gemm_perf":
        return _gemm(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name in ("context_attention_perf", "generation_attention_perf"):
        return _attention(pq.read_table(path).to_pandas(), hw, fw, origin, name.split("_")[0])
    if name == "generation_mla_perf":
        return _mla_decode(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name == "moe_perf":
        return _moe(pq.read_table(path).to_pandas(), hw, fw, origin, moe_routing)
    if name in ("nccl_perf", "oneccl_perf"):  # NCCL; oneCCL on Intel GPUs (same columns)
        return _collective(pq.read_table(path).to_pandas(), hw, name.split("_")[0], origin, "op_name", "nccl_dtype")
    if name == "gdn_perf":
        return _gdn(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name == "kda_perf":
        return _kda(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name == "moe_a2a_perf":
        return _moe_a2a(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name in ("wideep_deepep_ll_perf", "wideep_deepep_normal_perf"):
        return _deepep(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name in DSA_TABLES:
        return _dsa_module(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name in DSV4_TABLES:
        return _dsv4_module(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name in MSA_TABLES:
        return _msa_module(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name == "mhc_module_perf":
        return _mhc(pq.read_table(path).to_pandas(), hw, fw, origin)
    if name == "custom_allreduce_perf":  # the framework's own all-reduce kernels
        return _collective(pq.read_table(path).to_pandas(), hw, fw, origin, "op_name", "allreduce_dtype")
    return None


def import_kernels(*, hardware: str | None = None, framework: str | None = None, root: Path | None = None,
                   moe_routing: str = "balanced") -> dict:
    """{(hardware, framework): Dataset} of every importable table (newest framework
    version per kernel class), in the measurement schema; MoE tables with the rows of
    `moe_routing` (MOE_ROUTINGS)."""
    if moe_routing not in MOE_ROUTINGS:
        raise InputError(f"moe_routing={moe_routing!r} is not known; allowed: {', '.join(MOE_ROUTINGS)}")
    root = root or data_root()
    tables = available(root)
    if hardware is not None:
        theirs = {v: k for k, v in HARDWARE.items()}.get(hardware, hardware)
        if theirs not in set(tables["gpu"]):
            raise InputError(f"hardware={hardware!r} has no kernel tables; allowed: "
                             f"{', '.join(sorted(HARDWARE.get(g, g) for g in set(tables['gpu'])))}")
        tables = tables[tables["gpu"] == theirs]
    if framework is not None:
        if framework not in FRAMEWORKS:
            raise InputError(f"framework={framework!r} is not known; allowed: {', '.join(FRAMEWORKS)}")
        tables = tables[tables["framework"].isin([framework, "nccl"])]
    out: dict = {}
    for (gpu, klass, fw), group in tables.groupby(["gpu", "kernel_class", "framework"]):
        newest = max(group["version"], key=_version_key)
        # MoE collections of one version may time only some kernels (a later run adding the
        # non-gated ones): every version is read, each shape of each kernel kept from its newest
        versions = sorted(set(group["version"]), key=_version_key) if klass == "moe" else [newest]
        # the EP all-to-all tables sit in the `comm` directory, whose newest collection may
        # re-time only the all-reduce, the DSA module tables in `sparse_attention`, whose newest
        # may time only DeepSeek-V4's: each of them is read from its own newest collection
        stem = group["file"].map(lambda f: Path(f).stem)
        own = stem.isin(EP_TABLES + DSA_TABLES + DSV4_TABLES)
        ep = group[own]
        ep = ep[ep["version"] == ep.groupby(stem[ep.index])["version"].transform(lambda v: max(v, key=_version_key))]
        group = pd.concat([group[~own & group["version"].isin(versions)], ep])
        frames = []
        for version in sorted(set(group["version"]), key=_version_key):
            for _, t in group[group["version"] == version].iterrows():
                frame = _read(root.parents[1] / t["file"], HARDWARE.get(gpu, gpu), fw, version, root, moe_routing)
                if frame is not None and len(frame):
                    frames.append(frame)
        if not frames:
            continue
        frame = pd.concat(frames, ignore_index=True)
        if klass == "moe":
            frame = frame.drop_duplicates(["op", "dtype", "m", "k", "n", "n_experts", "top_k", "tp", "ep"], keep="last")
        out.setdefault((HARDWARE.get(gpu, gpu), frame["framework"].iloc[0]), []).append(frame)
    return {key: schema.to_dataset(finite_rows(pd.concat(frames, ignore_index=True)),
                                   attrs={"source": f"{PACKAGE} {package_version()}", "hardware": key[0],
                                          "framework": key[1]})
            for key, frames in out.items()}


def _version_key(version: str) -> tuple:
    """Order '1.3.0rc20' after '1.3.0rc5' and '0.5.14' after '0.5.9'."""
    import re
    return tuple(int(x) if x.isdigit() else x for x in re.findall(r"\d+|[a-z]+", version))


def write(datasets: dict, out: Path) -> list[Path]:
    """One netCDF per GPU and framework: <out>/<hardware>-<framework>.nc."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for (hw, fw), ds in sorted(datasets.items()):
        path = out / f"{hw}-{fw}.nc"
        schema.save(ds, path)
        paths.append(path)
    return paths


def finite_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with a positive, finite latency (the tables carry a few failed measurements)."""
    v = pd.to_numeric(df["value_si"], errors="coerce").to_numpy(float)
    return df[np.isfinite(v) & (v > 0)]
