"""The measurement schema that microbenchmarks write and calibration reads (no torch).

One measurement per entry of the `measurement` dimension. Size parameters that do not
apply to a kind are NaN (numbers) or "" (strings), so GEMMs, attention, memory streams,
launch latency and collectives share one flat table that converts to a DataFrame row for
row (`to_frame`) and back (`to_dataset`).

    kind         gemm | attention | decode_attention | mla_decode | moe | memory | launch | all_reduce |
                 all_gather | reduce_scatter | all_to_all
    op           memory: copy | triad; imported tables: the kernel source; others ""
    framework    the serving framework whose kernels ran (trtllm, vllm, sglang, nccl), or ""
    hardware     spec name when the device is known (h100_sxm), else the device name
    dtype        math dtype (workbench.units.DTYPES), "" where not applicable
    m n k        GEMM C[m,n] = A[m,k] @ B[k,n]
    batch seq_len n_heads head_dim causal   attention (causal: 1.0 / 0.0); seq_len = new tokens
    n_kv_heads context window kv_dtype      attention: KV heads, cached tokens attended
                 (decode), sliding window (0: none), KV-cache dtype; mla_decode: n_heads on the
                 GPU, head_dim the latent (kv_lora_rank), window unused
    n_experts top_k tp ep   moe: one MoE layer's routed experts (m tokens, k the hidden size, n
                 each expert's width), split tp-way within and ep-way across experts
    q_lora_rank kv_lora_rank rope_dim v_head_dim index_heads index_head_dim
                 dsa_decode / dsa_prefill: a DeepSeek Sparse Attention layer's attention block
                 (batch sequences of seq_len new tokens after context cached ones; n_heads on
                 the GPU, head_dim = nope + rope per head, k the hidden size, top_k the
                 indexer's top-k): the model's MLA ranks, rope and value head dims, and its
                 lightning indexer's heads and head dim
    compress_ratio o_groups o_lora_rank
                 dsv4_decode / dsv4_prefill: a DeepSeek-V4 layer's attention block (as dsa_*:
                 n_heads on the GPU, tp the GPUs the model's heads are split over, k the hidden
                 size, head_dim the shared key-value width, q_lora_rank, index_heads,
                 index_head_dim, top_k, window the sliding window): its compress ratio (4:
                 CSA, 128: HCA) and grouped output projection (o_groups groups to o_lora_rank)
    n_kv_heads (msa_decode / msa_prefill: a MiniMax-M3 layer's sparse attention block, as
                 dsa_*: n_heads and n_kv_heads the query and KV heads on the GPU, k the hidden
                 size, head_dim, index_heads, index_head_dim, top_k the keys each query attends)
    hc_mult      mhc: one layer's hyper-connection pre or post at both its sites (op the
                 kernel, m tokens, k the hidden size), hc_mult residual streams
    size_bytes   memory: bytes moved (read + write); collectives: the per-device buffer
    devices      collectives: ranks; others 1
    time_s       median over repetitions; time_p25_s, time_p75_s, time_min_s the spread
    n_reps       repetitions behind the statistics
    metric       what value_si is: flops_per_s, bytes_per_s, bus_bandwidth_bytes_per_s, time_s
    value_si     the measured quantity in SI units (FLOP/s, bytes/s, s)
    source       who measured it, where and when
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from ..units import with_units

DIM = "measurement"
KINDS = ("gemm", "attention", "decode_attention", "mla_decode", "moe", "memory", "launch", "all_reduce", "all_gather", "reduce_scatter",
         "all_to_all", "ep_dispatch", "ep_combine", "gdn_prefill", "gdn_decode", "kda_prefill", "kda_decode",
         "dsa_decode", "dsa_prefill", "dsv4_decode", "dsv4_prefill", "mhc", "msa_decode", "msa_prefill")
METRICS = ("flops_per_s", "bytes_per_s", "bus_bandwidth_bytes_per_s", "time_s")
STRINGS = ("kind", "op", "hardware", "framework", "dtype", "kv_dtype", "metric", "source")
NUMBERS = ("m", "n", "k", "batch", "seq_len", "n_heads", "n_kv_heads", "head_dim", "context", "window", "causal",
           "size_bytes", "devices", "n_experts", "top_k", "tp", "ep", "q_lora_rank", "kv_lora_rank", "rope_dim",
           "v_head_dim", "index_heads", "index_head_dim", "compress_ratio", "o_groups", "o_lora_rank", "hc_mult",
           "time_s", "time_p25_s", "time_p75_s", "time_min_s", "n_reps", "value_si")
COLUMNS = STRINGS + NUMBERS
REQUIRED = ("kind", "hardware", "metric", "value_si")


class SchemaError(ValueError):
    """A measurement dataset does not follow the schema; the message names the field."""


def record(**fields) -> dict:
    """One measurement with every column present (NaN / "" for what does not apply)."""
    unknown = sorted(set(fields) - set(COLUMNS))
    if unknown:
        raise SchemaError(f"measurement field {unknown[0]!r} is not allowed; allowed: {', '.join(COLUMNS)}")
    out = {c: "" for c in STRINGS}
    out.update({c: np.nan for c in NUMBERS})
    out.update(fields)
    return out


def to_dataset(records, attrs: dict | None = None) -> xr.Dataset:
    """Measurements (dicts or a DataFrame) -> Dataset along `measurement`, units from names."""
    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame([record(**r) for r in records])
    df = df.reindex(columns=COLUMNS)
    data = {}
    for c in STRINGS:
        col = df[c].astype(object)
        data[c] = (DIM, col.where(col.notna(), "").astype(str).to_numpy(dtype=object))
    for c in NUMBERS:
        data[c] = (DIM, pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float))
    ds = xr.Dataset(data, coords={DIM: np.arange(len(df))})
    with_units(ds)
    ds["value_si"].attrs.update({"long_name": "measured value (SI units; see metric)"})
    ds.attrs.update({k: _attr(v) for k, v in (attrs or {}).items()})
    validate(ds)
    return ds


def _attr(value):
    """netCDF attributes are strings or numbers; anything else is written as its text."""
    if isinstance(value, (str, int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return value
    return str(value)


def validate(ds: xr.Dataset) -> xr.Dataset:
    """Every column present along `measurement`, known kinds and metrics, finite positive values."""
    missing = [c for c in COLUMNS if c not in ds.data_vars]
    if missing:
        raise SchemaError(f"measurement dataset: variable {missing[0]!r} is missing; required: {', '.join(COLUMNS)}")
    if DIM not in ds.dims:
        raise SchemaError(f"measurement dataset: dimension {DIM!r} is missing")
    kinds = {str(k) for k in ds["kind"].values}
    bad = sorted(kinds - set(KINDS))
    if bad:
        raise SchemaError(f"measurement dataset: kind={bad[0]!r} is not allowed; allowed: {', '.join(KINDS)}")
    metrics = {str(m) for m in ds["metric"].values}
    bad = sorted(metrics - set(METRICS))
    if bad:
        raise SchemaError(f"measurement dataset: metric={bad[0]!r} is not allowed; allowed: {', '.join(METRICS)}")
    v = np.asarray(ds["value_si"].values, dtype=float)
    if v.size and not np.all(np.isfinite(v) & (v > 0)):
        raise SchemaError("measurement dataset: value_si must be finite and positive for every measurement")
    return ds


def to_frame(ds: xr.Dataset) -> pd.DataFrame:
    """The measurements as a DataFrame, one row each, with the dataset's attrs in `.attrs`."""
    validate(ds)
    df = pd.DataFrame({c: np.asarray(ds[c].values) for c in COLUMNS})
    for c in STRINGS:
        df[c] = df[c].astype(str)
    df.attrs.update(ds.attrs)
    return df


def save(ds: xr.Dataset, path) -> None:
    """Write a measurement dataset as netCDF (strings as variable-length text)."""
    validate(ds)
    encoding = {c: {"dtype": str} for c in STRINGS}
    ds.to_netcdf(path, encoding=encoding)


def load(path) -> xr.Dataset:
    """Read a measurement dataset written by `save` (or by `python -m workbench.microbench`)."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    for c in STRINGS:
        if c in ds:
            ds[c] = ds[c].astype(object).fillna("").astype(str).astype(object)
    for c in NUMBERS:  # files written before a column existed: it does not apply to their rows
        if c not in ds and DIM in ds.dims:
            ds[c] = (DIM, np.full(ds.sizes[DIM], np.nan))
    return validate(ds)
