"""The measured kernel tables split into fit tables, and each kernel class's roofline and
coordinates computed from a table's columns (primitives/kernel_fits.ROOFLINES), for the
measured rows and for the knots of a surface alike (knot_frame); the fit itself is
calibrate/kernel_fit.py."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..primitives.collectives import COLLECTIVES, EP_ELEMENT_BYTES
from ..primitives.dsv4 import RATIOS, dsv4_dims
from ..primitives.msa import msa_dims
from ..primitives.kernel_fits import MOE_FORMATS, ROOFLINES, EffGrid, dsa_peaks
from ..primitives.msa_work import msa_kv_heads, msa_peaks
from ..units import DTYPE_BYTES

# Bytes per element of A, B (weights) and C for each GEMM format: block-scaled FP8 and NVFP4
# read their scales too (one FP32 per 128x128 weight block and per 1x128 activation run for
# fp8_block; one FP8 per 16 elements for NVFP4), the output is 16-bit.
GEMM_BYTES = {"bf16": (2.0, 2.0, 2.0), "fp16": (2.0, 2.0, 2.0), "fp8": (1.0, 1.0, 2.0),
              "fp8_block": (1.0 + 4.0 / 128, 1.0 + 4.0 / 128 ** 2, 2.0), "fp4": (DTYPE_BYTES["fp4"], DTYPE_BYTES["fp4"], 2.0),
              "int8": (1.0, 1.0, 2.0), "int4": (2.0, 0.5, 2.0)}
GEMM_PEAK = {"fp8_block": "fp8", "int4": "bf16"}  # math dtype of each format
# the element formats of the attention tables (bytes from units.DTYPE_BYTES)
ELEMENT_BYTES = {k: DTYPE_BYTES[k] for k in ("bf16", "fp16", "fp8", "fp4", "int8", "int4")}


def _num(df, col):
    return df[col].to_numpy(float)


def gemm_features(df: pd.DataFrame, hw, variant: str, tile_m: float = 0.0, max_passes: float = 0.0,
                  wave_tile_m: float = 0.0, wave_tile_n: float = 0.0):
    variant = variant.split("@")[0]
    a, b, c = GEMM_BYTES[variant]
    return ROOFLINES["gemm"].roofline(m=_num(df, "m"), n=_num(df, "n"), k=_num(df, "k"),
                                      peak=hw.peak(GEMM_PEAK.get(variant, variant)),
                                      bandwidth=hw.hbm.bandwidth_bytes_per_s, a_bytes=a, b_bytes=b, c_bytes=c,
                                      tile_m=tile_m, max_passes=max_passes, wave_tile_m=wave_tile_m,
                                      wave_tile_n=wave_tile_n, n_sms=hw.n_sms)


WINDOWED = "+window"  # variant suffix of the rows whose sliding window is shorter than the keys


def _dtypes(variant: str) -> tuple[str, str]:
    dtype, kv = variant.split("@")[0].removesuffix(WINDOWED).split("/")
    return dtype, kv


def attention_features(df: pd.DataFrame, hw, variant: str):
    dtype, kv = _dtypes(variant)
    return ROOFLINES["attention"].roofline(
        batch=_num(df, "batch"), seq_len=_num(df, "seq_len"), n_heads=_num(df, "n_heads"),
        n_kv_heads=_num(df, "n_kv_heads"), head_dim=_num(df, "head_dim"), window=_num(df, "window"),
        peak=hw.peak(dtype), bandwidth=hw.hbm.bandwidth_bytes_per_s, act_bytes=ELEMENT_BYTES[dtype],
        kv_bytes=ELEMENT_BYTES[kv], n_sms=hw.n_sms)


def decode_features(df: pd.DataFrame, hw, variant: str):
    dtype, kv = _dtypes(variant)
    return ROOFLINES["decode_attention"].roofline(
        batch=_num(df, "batch"), kv_len=_num(df, "seq_len") + _num(df, "context"), n_heads=_num(df, "n_heads"),
        n_kv_heads=_num(df, "n_kv_heads"), head_dim=_num(df, "head_dim"), window=_num(df, "window"),
        peak=hw.peak(dtype), bandwidth=hw.hbm.bandwidth_bytes_per_s, act_bytes=ELEMENT_BYTES[dtype],
        kv_bytes=ELEMENT_BYTES[kv])


def mla_features(df: pd.DataFrame, hw, variant: str):
    dtype, kv = _dtypes(variant)
    return ROOFLINES["mla_decode"].roofline(
        batch=_num(df, "batch"), kv_len=_num(df, "seq_len") + _num(df, "context"), n_heads=_num(df, "n_heads"),
        latent=_num(df, "head_dim"), peak=hw.peak(dtype), bandwidth=hw.hbm.bandwidth_bytes_per_s,
        act_bytes=ELEMENT_BYTES[dtype], kv_bytes=ELEMENT_BYTES[kv])


def moe_features(df: pd.DataFrame, hw, variant: str):
    w, a, math = MOE_FORMATS[variant.split("@")[0]]
    touched = _num(df, "touched") if "touched" in df else None
    return ROOFLINES["moe"].roofline(
        tokens=_num(df, "m"), hidden=_num(df, "k"), inter=_num(df, "n"), top_k=_num(df, "top_k"),
        n_experts=_num(df, "n_experts"), tp=_num(df, "tp"), ep=_num(df, "ep"), touched=touched,
        peak=hw.peak(math), bandwidth=hw.hbm.bandwidth_bytes_per_s, w_bytes=w, a_bytes=a)


def ep_features(df: pd.DataFrame, hw, variant: str):
    dtype = variant.split("@")[0].split("/")[1]
    return ROOFLINES["ep_a2a"].roofline(tokens=_num(df, "m"), hidden=_num(df, "k"), top_k=_num(df, "top_k"),
                                        ep=_num(df, "ep"), elem_bytes=EP_BYTES[dtype],
                                        bandwidth=hw.link("scale_up").unidir_bytes_per_s)


def gdn_features(df: pd.DataFrame, hw, variant: str):
    """A GDN layer's mixing of `batch` sequences x `seq_len` tokens (decode: one each)."""
    dtype = variant.split("@")[0].split("/")[1]
    seqs, length = _num(df, "batch"), _num(df, "seq_len")
    nk, dk, nv, dv = _num(df, "n_kv_heads"), _num(df, "head_dim"), _num(df, "n_heads"), _num(df, "k")
    return ROOFLINES["gdn"].roofline(tokens=seqs * length, sequences=seqs, heads=nv, key_dim=dk, value_dim=dv,
                                     qkv_width=2.0 * nk * dk + nv * dv, conv_kernel=GDN_CONV_KERNEL,
                                     peak=hw.peak(dtype), bandwidth=hw.hbm.bandwidth_bytes_per_s,
                                     act_bytes=ELEMENT_BYTES[dtype])


GDN_CONV_KERNEL = 4.0  # the short convolution's taps of every measured row (d_conv = 4)


def dsa_features(df: pd.DataFrame, hw, variant: str):
    """A DSA layer's attention block (kernel_fits.dsa_module_work) at each row's model
    dimensions; variant 'decode|prefill/<GEMM format>/<KV dtype>' (decode rows: seq_len 1)."""
    _, gemm, kv = variant.split("@")[0].split("/")
    w, _, units = MOE_FORMATS[gemm]  # the format's weight bytes and math units (primitives/dsa.py reads the same)
    return ROOFLINES["dsa_module"].roofline(
        batch=_num(df, "batch"), new=_num(df, "seq_len"), prefix=_num(df, "context"), heads=_num(df, "n_heads"),
        hidden=_num(df, "k"),
        q_rank=_num(df, "q_lora_rank"), kv_rank=_num(df, "kv_lora_rank"), rope=_num(df, "rope_dim"),
        nope=_num(df, "head_dim") - _num(df, "rope_dim"), v_dim=_num(df, "v_head_dim"),
        index_heads=_num(df, "index_heads"), index_dim=_num(df, "index_head_dim"), topk=_num(df, "top_k"),
        w_bytes=w, kv_bytes=ELEMENT_BYTES[kv], **dsa_peaks(hw, units), bandwidth=hw.hbm.bandwidth_bytes_per_s)


# a DeepSeek-V4 block's variant name of its compress ratio (primitives/dsv4.RATIOS, inverted)
DSV4_RATIOS = {name: ratio for ratio, name in RATIOS.items()}


def dsv4_features(df: pd.DataFrame, hw, variant: str):
    """A DeepSeek-V4 layer's attention block (dsv4_work.dsv4_module_work) at each row's model
    dimensions; variant 'decode|prefill/csa|hca/<GEMM format>/<KV dtype>'. The model's total
    heads are the heads on the GPU times the GPUs they are split over (the tables' tp_size)."""
    _, name, gemm, kv = variant.split("@")[0].split("/")
    w, _, units = MOE_FORMATS[gemm]  # the format's weight bytes and math units (primitives/dsv4.py reads the same)
    return ROOFLINES["dsv4_module"].roofline(
        batch=_num(df, "batch"), new=_num(df, "seq_len"), prefix=_num(df, "context"), heads=_num(df, "n_heads"),
        n_heads=_num(df, "n_heads") * _num(df, "tp"), ratio=DSV4_RATIOS[name],
        **{arg: _num(df, col) for arg, col in DSV4_COLUMNS.items()},
        w_bytes=w, kv_bytes=ELEMENT_BYTES[kv], **dsa_peaks(hw, units), bandwidth=hw.hbm.bandwidth_bytes_per_s)


def msa_features(df: pd.DataFrame, hw, variant: str):
    """A MiniMax-M3 layer's sparse attention block (msa_work.msa_module_work) at each row's
    model dimensions, `n_kv_heads` the KV heads on its GPU; variant 'decode|prefill/<GEMM
    format>/<KV dtype>'."""
    _, gemm, kv = variant.split("@")[0].split("/")
    w, _, units = MOE_FORMATS[gemm]  # the format's weight bytes and math units (primitives/msa.py reads the same)
    return ROOFLINES["msa_module"].roofline(
        batch=_num(df, "batch"), new=_num(df, "seq_len"), prefix=_num(df, "context"), heads=_num(df, "n_heads"),
        kv_heads=_num(df, "n_kv_heads"), **{arg: _num(df, col) for arg, col in MSA_COLUMNS.items()},
        w_bytes=w, kv_bytes=ELEMENT_BYTES[kv], **msa_peaks(hw, units), bandwidth=hw.hbm.bandwidth_bytes_per_s)


def mhc_features(df: pd.DataFrame, hw, variant: str):
    """One layer's hyper-connection pre or post (variant 'pre' | 'post') at both sites: `m`
    tokens, `k` the hidden size, hc_mult streams; 16-bit math."""
    return ROOFLINES["mhc"].roofline(tokens=_num(df, "m"), hidden=_num(df, "k"), hc_mult=_num(df, "hc_mult"),
                                     op=variant.split("@")[0], peak=hw.peak("bf16"),
                                     bandwidth=hw.hbm.bandwidth_bytes_per_s)


SERVED_KEY = ["k", "n_heads", "batch", "seq_len", "context"]  # a DSA row's shape


def _served_path(rows: pd.DataFrame, key=SERVED_KEY) -> pd.DataFrame:
    """DSA rows of one variant with the kernel sources that time disjoint shapes merged
    into one source: each shape is timed on the one backend the framework serves it with
    (SGLang's tables time dense MHA up to 2048 keys and the sparse kernels beyond; vLLM's
    on Blackwell time FlashInfer's sparse MLA at 8 and 16 heads on the GPU and FlashMLA's
    at 32 to 128 over a bf16 cache), so together they are its served block. Sources timing
    the same shapes stay apart (variant@source)."""
    ops = sorted(set(rows["op"]))
    shapes = [set(map(tuple, rows.loc[rows["op"] == op, key].to_numpy(float).tolist())) for op in ops]
    disjoint = all(not (a & b) for i, a in enumerate(shapes) for b in shapes[i + 1:])
    return rows.assign(op="+".join(ops)) if len(ops) > 1 and disjoint else rows


# bytes per element an EP all-to-all sends (block-scaled formats carry their scales; the
# primitive reads the same numbers: collectives.EP_ELEMENT_BYTES)
EP_BYTES = {"bf16": 2.0, "fp16": 2.0, **EP_ELEMENT_BYTES, "fp4": DTYPE_BYTES["fp4"]}


def collective_traffic(op: str, size, devices):
    """Bytes each device sends per direction, ring convention (nccl-tests)."""
    return COLLECTIVES[op].traffic(size, devices, False)


def collective_features(df: pd.DataFrame, hw, variant: str):
    op = variant.split("/")[1]
    size, p = _num(df, "size_bytes"), _num(df, "devices")
    return ROOFLINES["collective"].roofline(size=size, devices=p, traffic=collective_traffic(op, size, p),
                                            bandwidth=hw.link("scale_up").unidir_bytes_per_s)


@dataclass(frozen=True)
class Table:
    """The rows of one (class, variant) and how to compute their roofline."""
    kernel_class: str
    variant: str
    rows: pd.DataFrame
    features: object
    floor_s: float | None = None  # the fastest time of the whole table where rows were left out


def _by_kernel(rows: pd.DataFrame, kernel_class: str, variant: str, features) -> list[Table]:
    """One table per kernel source ('op') of a framework's tables: frameworks time several
    backends (SGLang's trtllm_mha, FlashInfer and Triton attention; vLLM's FA3 and FA4; three
    block-FP8 GEMMs), whose rows contradict each other at equal shapes. The source with the
    most rows is the one the framework runs by default and keeps the plain variant name;
    the others are scored and stored as variant@source."""
    counts = rows["op"].value_counts()
    out = []
    for op in counts.index:
        name = variant if op == counts.index[0] else f"{variant}@{op}"
        out.append(Table(kernel_class, name, rows[rows["op"] == op], features))
    return out


def tables(df: pd.DataFrame) -> list[Table]:
    """Split one imported dataset (as a frame) into fit tables."""
    out = []
    kind = df["kind"]
    g = df[kind == "gemm"]
    for dt, rows in g.groupby("dtype"):
        if dt in GEMM_BYTES:
            out += _by_kernel(rows, "gemm", dt, gemm_features)
    for klass, feat in (("attention", attention_features), ("decode_attention", decode_features)):
        a = df[kind == klass]
        keys = a["seq_len"] + a["context"].fillna(0.0)
        banded = np.where((a["window"] > 0) & (keys > a["window"]), WINDOWED, "")
        for (dt, kv, band), rows in a.groupby([a["dtype"], a["kv_dtype"], banded]):
            if dt in ELEMENT_BYTES and kv in ELEMENT_BYTES:
                out += _by_kernel(rows, klass, f"{dt}/{kv}{band}", feat)
    a = df[kind == "mla_decode"]
    for (dt, kv), rows in a.groupby([a["dtype"], a["kv_dtype"]]):
        if dt in ELEMENT_BYTES and kv in ELEMENT_BYTES:
            out += _by_kernel(rows, "mla_decode", f"{dt}/{kv}", mla_features)
    m = df[kind == "moe"]
    for dt, rows in m.groupby("dtype"):
        if dt in MOE_FORMATS:
            out += _by_kernel(rows, "moe", dt, moe_features)
    d = df[kind.isin(["gdn_prefill", "gdn_decode", "kda_prefill", "kda_decode"])]
    for (k, dt), rows in d.groupby([d["kind"], d["dtype"]]):  # GDN: 'prefill/bf16'; KDA: 'kda_prefill/bf16'
        if dt in ELEMENT_BYTES:
            out += _by_kernel(rows, "gdn", f"{k.removeprefix('gdn_')}/{dt}", gdn_features)
    a = df[kind.isin(["dsa_decode", "dsa_prefill"])]
    for (k, dt, kv), rows in a.groupby([a["kind"], a["dtype"], a["kv_dtype"]]):  # 'decode/fp8_block/fp8'
        if dt in ("bf16", "fp8_block", "fp4") and kv in ELEMENT_BYTES:
            out += _by_kernel(_served_path(rows), "dsa_module", f"{k.removeprefix('dsa_')}/{dt}/{kv}", dsa_features)
    a = df[kind.isin(["dsv4_decode", "dsv4_prefill"])]
    ratio = a["compress_ratio"].map(RATIOS)
    for (k, r, dt, kv), rows in a.groupby([a["kind"], ratio, a["dtype"], a["kv_dtype"]]):  # 'decode/csa/fp8_block/fp8'
        if dt in ("bf16", "fp8_block", "fp4") and kv in ELEMENT_BYTES:
            out += _by_kernel(rows, "dsv4_module", f"{k.removeprefix('dsv4_')}/{r}/{dt}/{kv}", dsv4_features)
    a = df[kind.isin(["msa_decode", "msa_prefill"])]
    a = a[~(a["kind"] + " " + a["op"]).isin(MSA_UNFIT)]
    for (k, dt, kv), rows in a.groupby([a["kind"], a["dtype"], a["kv_dtype"]]):  # 'decode/fp8_block/fp8'
        if dt in ("bf16", "fp8_block", "fp4") and kv in ELEMENT_BYTES:  # SGLang's two decode top-k kernels: one path
            out += _by_kernel(_served_path(rows), "msa_module", f"{k.removeprefix('msa_')}/{dt}/{kv}", msa_features)
    h = df[kind == "mhc"]
    for op, rows in h.groupby(np.where(h["op"].str.contains("post"), "post", "pre")):  # TRT-LLM: one source a size
        out += _by_kernel(_served_path(rows, ["k", "m"]), "mhc", op, mhc_features)
    e = df[kind.isin(["ep_dispatch", "ep_combine"])]
    for (k, dt), rows in e.groupby([e["kind"], e["dtype"]]):
        if dt in EP_BYTES:
            out += _by_kernel(rows, "ep_a2a", f"{k.removeprefix('ep_')}/{dt}", ep_features)
    c = df[kind.isin(list(COLLECTIVES))]
    for (fw, op), rows in c.groupby(["framework", "kind"]):
        # 16-bit buffers: the frameworks reduce activations in bf16 (the tables also time
        # fp32/int8, whose busbw at a given size matches within noise)
        rows = rows[rows["dtype"].isin(["bf16", "fp16"])] if rows["dtype"].isin(["bf16", "fp16"]).any() else rows
        # served decode replays CUDA graphs: where a table times both, keep the graph rows
        if rows["op"].str.contains("graph").any():
            rows = rows[~rows["op"].str.contains("eager")]
        out.append(Table("collective", f"{fw}/{op}", rows, collective_features))
    return out


DSA_KNOT_MODEL = "deepseek_v3_2"  # the model dimensions of a DSA surface's knots (the measured rows carry their own)


def dsa_dims(model) -> dict:
    """The table columns of a DSA model's dimensions (a catalog ModelSpec)."""
    return {"k": model.d_model, "head_dim": model.head_dim, "q_lora_rank": model.q_lora_rank,
            "kv_lora_rank": model.kv_lora_rank, "rope_dim": model.qk_rope_head_dim, "v_head_dim": model.v_dim,
            "index_heads": model.index_n_heads, "index_head_dim": model.index_head_dim, "top_k": model.index_topk}


DSV4_KNOT_MODEL = "deepseek_v4_flash"  # the model dimensions of a DeepSeek-V4 surface's knots
# dsv4_module_work's model arguments -> the table columns holding them (primitives/dsv4.dsv4_dims)
DSV4_COLUMNS = {"hidden": "k", "q_rank": "q_lora_rank", "head_dim": "head_dim", "o_groups": "o_groups",
                "o_rank": "o_lora_rank", "index_heads": "index_heads", "index_dim": "index_head_dim",
                "topk": "top_k", "window": "window"}


def dsv4_table_dims(model) -> dict:
    """The table columns of a DeepSeek-V4 model's dimensions (a catalog ModelSpec)."""
    dims = dsv4_dims(model)
    return {col: dims[arg] for arg, col in DSV4_COLUMNS.items()}


# MSA rows left out of the fit: TensorRT-LLM 1.3.0rc23's Blackwell prefill (msa_fmha_sm100) was
# timed eager and host-bound under 8 concurrent collection workers (its collection_meta.yaml:
# solo reruns ~2x lower, "sibling gemm-type rows of identical attention shapes vary widely"):
# on B200 at one sequence of 64 heads, bf16, 3072 new tokens take 54 ms and 10,240 take 5.5 ms;
# a surface fitted to them misses held-out rows by 64% (median). Such a layer's prefill is composed.
MSA_UNFIT = ("msa_prefill msa_fmha_sm100",)
MSA_KNOT_MODEL = "minimax_m3"  # the model dimensions of an MSA surface's knots
# msa_module_work's model arguments -> the table columns holding them (primitives/msa.msa_dims)
MSA_COLUMNS = {"hidden": "k", "head_dim": "head_dim", "index_heads": "index_heads", "index_dim": "index_head_dim",
               "topk": "top_k"}


def msa_table_dims(model) -> dict:
    """The table columns of an MSA model's dimensions (a catalog ModelSpec)."""
    dims = msa_dims(model)
    return {col: dims[arg] for arg, col in MSA_COLUMNS.items()}


def knot_frame(kernel_class: str, grid: EffGrid) -> pd.DataFrame:
    """The knots of a grid as table rows of its kernel class (the columns its features
    read), so their roofline is computed exactly as the measured rows' is."""
    mesh = np.meshgrid(*[2.0 ** np.asarray(k) for k in grid.knots], indexing="ij")
    c = dict(zip(grid.axes, (m.ravel() for m in mesh)))
    if kernel_class == "gemm":
        return pd.DataFrame({"m": c["m"], "n": c["n"], "k": c["k"]})
    if kernel_class == "attention":
        return pd.DataFrame({"batch": 1.0, "n_heads": c["work"], "n_kv_heads": c["work"] / c["group"],
                             "seq_len": c["seq_len"], "head_dim": c["head_dim"], "window": 0.0})
    if kernel_class == "decode_attention":
        return pd.DataFrame({"batch": c["slices"], "n_kv_heads": 1.0, "n_heads": c["group"], "seq_len": 1.0,
                             "context": c["keys"] - 1.0, "head_dim": c["head_dim"], "window": 0.0})
    if kernel_class == "mla_decode":
        return pd.DataFrame({"batch": c["batch"], "seq_len": 1.0, "context": c["keys"] - 1.0, "n_heads": c["heads"],
                             "head_dim": 512.0})
    if kernel_class == "moe":  # one GPU, one token per pair: pairs = tokens, touched experts given
        return pd.DataFrame({"m": c["tokens_per_expert"] * c["experts"], "k": c["hidden"], "n": c["width"],
                             "top_k": 1.0, "n_experts": c["experts"], "tp": 1.0, "ep": 1.0,
                             "touched": c["experts"]})
    if kernel_class == "gdn":  # 128-wide heads, one key head per value head
        return pd.DataFrame({"batch": c["sequences"], "seq_len": c["per_seq"], "n_heads": c["heads"],
                             "n_kv_heads": c["heads"], "head_dim": 128.0, "k": 128.0})
    if kernel_class == "dsa_module":  # DSA_KNOT_MODEL; the new tokens are keys too
        from ..specs import load_model
        return pd.DataFrame({"batch": c["sequences"], "seq_len": c["new"],
                             "context": np.maximum(c["keys"] - c["new"], 0.0), "n_heads": c["heads"],
                             **dsa_dims(load_model(DSA_KNOT_MODEL))})
    if kernel_class == "dsv4_module":  # DSV4_KNOT_MODEL's dimensions and heads; the new tokens are keys too
        from ..specs import load_model
        m = load_model(DSV4_KNOT_MODEL)
        return pd.DataFrame({"batch": c["sequences"], "seq_len": c["new"],
                             "context": np.maximum(c["keys"] - c["new"], 0.0), "n_heads": c["heads"],
                             "tp": m.n_heads / c["heads"], **dsv4_table_dims(m)})
    if kernel_class == "msa_module":  # MSA_KNOT_MODEL's dimensions and KV heads; the new tokens are keys too
        from ..specs import load_model
        m = load_model(MSA_KNOT_MODEL)
        return pd.DataFrame({"batch": c["sequences"], "seq_len": c["new"],
                             "context": np.maximum(c["keys"] - c["new"], 0.0), "n_heads": c["heads"],
                             "n_kv_heads": msa_kv_heads(c["heads"], m.n_heads, m.n_kv_heads), **msa_table_dims(m)})
    if kernel_class == "mhc":  # DeepSeek-V4's four streams (config.json hc_mult)
        return pd.DataFrame({"m": c["tokens"], "k": c["hidden"], "hc_mult": 4.0})
    if kernel_class == "ep_a2a":
        return pd.DataFrame({"m": c["tokens"], "k": c["hidden"], "top_k": 8.0, "ep": c["ep"]})
    return pd.DataFrame({"size_bytes": c["size"], "devices": c["devices"]})
