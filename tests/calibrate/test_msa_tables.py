"""The MiniMax-M3 sparse attention (MSA) module tables of aiconfigurator-core (needs the silicon
extra): the import gives every row its model's dimensions and the KV heads on its GPU, a row
times the block of the heads on its GPU (SGLang's rows split the model's 64 heads over
tp_size; TensorRT-LLM's and vLLM's sweep the GPU's share at tp_size 1), SGLang's two decode
top-k kernels time disjoint shapes and are fitted as one served path, and the committed
msa_module surfaces evaluated by fitted_msa reproduce the measured rows within their
held-out error."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("aiconfigurator_core")
pytest.importorskip("pyarrow")

from workbench.backends import numbers  # noqa: E402
from workbench.calibrate import aiconfigurator  # noqa: E402
from workbench.calibrate.kernel_features import tables  # noqa: E402
from workbench.microbench.schema import COLUMNS  # noqa: E402
from workbench.primitives.msa import fitted_msa, msa_variant  # noqa: E402


def test_import_gives_each_row_its_models_dims_and_kv_heads():
    rows, raw = aiconfigurator.newest_table("h200_sxm", "vllm", "msa_generation_module_perf")
    assert set(rows.kind) == {"msa_decode"} and len(rows) == len(raw) and set(rows.seq_len) == {1.0}
    # MiniMax-M3 config.json: hidden 6144, head_dim 128, 4 index heads of 128, (16 + 1) x 128 keys
    assert {(r.k, r.head_dim, r.index_heads, r.index_head_dim, r.top_k) for r in rows.itertuples()} == \
        {(6144, 128, 4, 128, 2176)}
    # a sweep of the GPU's heads at tp_size 1 (1-128); its KV heads the share of 4 per 64, at least one
    assert set(rows.tp) == {1} and set(rows.n_heads) == {1, 2, 4, 8, 16, 32, 64, 128}
    assert np.array_equal(rows.n_kv_heads, np.maximum(rows.n_heads / 16, 1))
    ctx, _ = aiconfigurator.newest_table("h200_sxm", "sglang", "msa_context_module_perf")
    assert set(ctx.kind) == {"msa_prefill"} and ctx.seq_len.max() == 16384 and ctx.context.max() >= 2 ** 20 - 1
    assert np.all(ctx.n_heads * ctx.tp == 64)  # SGLang: the model's heads over tp_size, on every row
    assert set(ctx.dtype) == {"bf16"} and set(ctx.kv_dtype) == {"bf16", "fp8"}


def test_a_row_times_the_block_of_its_heads():
    """vLLM on B200, decode at 1024 sequences over 4096 cached tokens: the time grows with the
    heads on the GPU (their projections and attention; 0.39 ms at one head, 1.96 ms at 128);
    at 64 sequences over 131,072 it barely does up to 16 heads (one KV head): each sequence's
    index keys, read whatever the heads, dominate (64 x 131,072 x 128 x 2 B = 2.1 GB, 0.27 ms at
    8 TB/s, against 0.36 ms measured)."""
    rows, _ = aiconfigurator.newest_table("b200_sxm", "vllm", "msa_generation_module_perf")
    r = rows[(rows.dtype == "bf16") & (rows.kv_dtype == "bf16")]
    big = r[(r.batch == 1024) & (r.context == 4095)].set_index("n_heads").time_s.sort_index()
    assert np.all(np.diff(big.to_numpy()[2:]) > 0) and big[128] / big[1] > 4
    long = r[(r.batch == 64) & (r.context == 131071)].set_index("n_heads").time_s.sort_index()
    assert long[16] / long[1] < 1.05 and long[128] / long[16] > 1.3
    index_keys_bytes = 64 * 131072 * 128 * 2.0
    assert 1.0 < long[1] / (index_keys_bytes / 8.0e12) < 2.0  # B200: 8.0 TB/s (workbench/specs/hardware/b200.yaml)


def test_sglang_decode_top_k_kernels_are_one_served_path():
    """SGLang times its radix top-k at the largest batches (1024 sequences on B200) and the
    split one below: disjoint shapes, merged into one source of each variant."""
    rows, _ = aiconfigurator.newest_table("b200_sxm", "sglang", "msa_generation_module_perf")
    radix = rows[rows.op.str.contains("radix")]
    assert set(radix.batch) == {1024} and 1024 not in set(rows[~rows.op.str.contains("radix")].batch)
    fit = [t for t in tables(rows.reindex(columns=list(COLUMNS))) if t.kernel_class == "msa_module"]
    assert {t.variant for t in fit} == {"decode/bf16/bf16", "decode/bf16/fp8"}
    assert all("+" in t.rows.op.iloc[0] and len(set(t.rows.op)) == 1 for t in fit)


MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}
M3 = dict(hidden=6144.0, n_heads=64.0, n_kv_heads=4.0, head_dim=128.0, index_heads=4.0, index_dim=128.0, topk=2176.0)


@pytest.mark.parametrize("gpu,framework,stem", [("h200_sxm", "vllm", "msa_generation_module_perf"),
                                                ("b200_sxm", "trtllm", "msa_generation_module_perf"),
                                                ("b200_sxm", "vllm", "msa_context_module_perf"),
                                                ("h100_sxm", "sglang", "msa_generation_module_perf"),
                                                ("h200_sxm", "trtllm", "msa_context_module_perf")])
def test_surface_reproduces_the_measured_rows(gpu, framework, stem):
    """In-sample: every measured row of the table against the block fitted_msa times from
    the committed surface (no CUDA-graph saving: the table's own launch path), within the
    surface's held-out median |error| + 1 point."""
    rows, _ = aiconfigurator.newest_table(gpu, framework, stem)
    hw = dataclasses.replace(numbers(aiconfigurator.HARDWARE.get(gpu, gpu), framework=framework), graph_saving_s=0.0)
    phase = "decode" if "_generation_" in stem else "prefill"
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        score = hw.kernels.scores[("msa_module", msa_variant(phase, math, w_bytes, kv_bytes))]
        t = fitted_msa(hw=hw, phase=phase, batch=r.batch.values, new=r.seq_len.values, prefix=r.context.values,
                       heads=r.n_heads.values, dims=M3, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)["time_s"]
        err = np.abs(t / r.time_s.to_numpy() - 1.0)
        assert np.median(err) <= score["median_abs_err"] + 0.01, (dtype, kv, np.median(err), score)
