"""The DeepSeek-V4 module tables of aiconfigurator-core (needs the silicon extra): the import
gives every attention-block row its model's dimensions and compress ratio and keeps the
hyper-connection rows, a row times the block of the heads on its GPU (the tables' tp_size
only splits the model's heads), and the committed dsv4_module / mhc surfaces evaluated by
the primitives reproduce the measured rows within their held-out error."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("aiconfigurator_core")
pytest.importorskip("pyarrow")

from workbench.backends import numbers  # noqa: E402
from workbench.calibrate import aiconfigurator  # noqa: E402
from workbench.primitives.dsv4 import dsv4_row_dims, dsv4_variant, fitted_dsv4, fitted_mhc  # noqa: E402


def test_import_gives_each_row_its_models_dims():
    rows, raw = aiconfigurator.newest_table("h200_sxm", "vllm", "dsv4_csa_generation_module_perf")
    assert set(rows.kind) == {"dsv4_decode"} and len(rows) == len(raw)
    assert set(rows.compress_ratio) == {4} and set(rows.seq_len) == {1.0}
    flash = rows[rows.k == 4096].iloc[0]  # DeepSeek-V4-Flash config.json
    assert (flash.q_lora_rank, flash.head_dim, flash.o_groups, flash.o_lora_rank, flash.index_heads,
            flash.index_head_dim, flash.top_k, flash.window) == (1024, 512, 8, 1024, 64, 128, 512, 128)
    pro = rows[rows.k == 7168].iloc[0]  # DeepSeek-V4-Pro config.json
    assert (pro.q_lora_rank, pro.o_groups, pro.top_k) == (1536, 16, 1024)
    # the heads on the GPU are the model's over tp_size, on every row
    assert np.all(rows.n_heads * rows.tp == np.where(rows.k == 4096, 64, 128))
    ctx, _ = aiconfigurator.newest_table("h200_sxm", "sglang", "dsv4_hca_context_module_perf")
    assert set(ctx.kind) == {"dsv4_prefill"} and set(ctx.compress_ratio) == {128} and ctx.seq_len.max() > 1
    assert set(ctx.dtype) == {"bf16", "fp8_block"} and set(ctx.kv_dtype) == {"fp8"}


def test_import_keeps_both_hyper_connection_ops():
    rows, raw = aiconfigurator.newest_table("h200_sxm", "trtllm", "mhc_module_perf")
    assert set(rows.kind) == {"mhc"} and len(rows) == len(raw) and set(rows.hc_mult) == {4}
    assert rows.op.str.contains("post").sum() == (raw.op_name == "post").sum()


def test_a_row_times_the_block_of_its_heads():
    """At 64 heads on the GPU, DeepSeek-V4-Pro at TP 2 against -Flash at TP 1 (other hidden
    size, query rank, top-k; the same heads per output group): decode at 64 sequences over
    4096 cached tokens takes longer by about the block's roofline ratio, and within one model
    the time grows with the heads on the GPU (its per-head projections and attention)."""
    rows, _ = aiconfigurator.newest_table("h200_sxm", "vllm", "dsv4_csa_generation_module_perf")
    r = rows[(rows.batch == 64) & (rows.context == 4096)].set_index(["k", "n_heads"]).time_s
    assert r[(4096, 8)] < r[(4096, 16)] < r[(4096, 32)] < r[(4096, 64)]
    assert r[(7168, 16)] < r[(7168, 32)] < r[(7168, 64)] < r[(7168, 128)]
    assert 1.0 < r[(7168, 64)] / r[(4096, 64)] < 1.5


MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}


@pytest.mark.parametrize("gpu,framework,stem", [("h200_sxm", "vllm", "dsv4_csa_generation_module_perf"),
                                                ("b200_sxm", "trtllm", "dsv4_hca_generation_module_perf"),
                                                ("b200_sxm", "vllm", "dsv4_csa_context_module_perf"),
                                                ("h100_sxm", "sglang", "dsv4_hca_generation_module_perf")])
def test_surface_reproduces_the_measured_rows(gpu, framework, stem):
    """In-sample: every measured row of the table against the block fitted_dsv4 times from
    the committed surface (no CUDA-graph saving: the table's own launch path), within the
    surface's held-out median |error| (and 13%)."""
    rows, _ = aiconfigurator.newest_table(gpu, framework, stem)
    hw = dataclasses.replace(numbers(aiconfigurator.HARDWARE.get(gpu, gpu), framework=framework), graph_saving_s=0.0)
    phase = "decode" if "_generation_" in stem else "prefill"
    ratio = 4 if "_csa_" in stem else 128
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        score = hw.kernels.scores[("dsv4_module", dsv4_variant(phase, ratio, math, w_bytes, kv_bytes))]
        t = fitted_dsv4(hw=hw, phase=phase, ratio=ratio, batch=r.batch.values, new=r.seq_len.values,
                        prefix=r.context.values, heads=r.n_heads.values, dims=dsv4_row_dims(r), math=math,
                        w_bytes=w_bytes, kv_bytes=kv_bytes)["time_s"]
        err = np.abs(t / r.time_s.to_numpy() - 1.0)
        assert np.median(err) <= min(score["median_abs_err"] + 0.01, 0.13), (dtype, kv, np.median(err), score)


@pytest.mark.parametrize("gpu,framework", [("h200_sxm", "trtllm"), ("b200_sxm", "sglang"), ("gb300", "vllm")])
def test_mhc_surface_reproduces_the_measured_rows(gpu, framework):
    rows, _ = aiconfigurator.newest_table(gpu, framework, "mhc_module_perf")
    hw = dataclasses.replace(numbers(aiconfigurator.HARDWARE.get(gpu, gpu), framework=framework), graph_saving_s=0.0)
    out = fitted_mhc(hw=hw, tokens=rows.m.values, hidden=rows.k.values, hc_mult=rows.hc_mult.values)
    t = np.where(rows.op.str.contains("post"), out["post_s"], out["pre_s"])
    assert np.median(np.abs(t / rows.time_s.to_numpy() - 1.0)) <= 0.09
