"""The DeepSeek Sparse Attention module tables of aiconfigurator-core (needs the silicon
extra): the import keeps the served block (with its lightning indexer) and gives every row
its model's dimensions, and the fitted dsa_module surfaces (workbench/specs/kernels/)
evaluated by the primitive reproduce the measured rows within their held-out error."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("aiconfigurator_core")
pytest.importorskip("pyarrow")

from workbench.backends import numbers  # noqa: E402
from workbench.calibrate import aiconfigurator  # noqa: E402
from workbench.primitives.dsa import dsa_variant, fitted_dsa  # noqa: E402


def test_import_keeps_the_served_block_with_each_models_dims():
    rows, raw = aiconfigurator.newest_table("b200_sxm", "sglang", "dsa_generation_module_perf")
    assert set(rows.kind) == {"dsa_decode"} and not rows.op.str.contains("skip").any()
    assert (raw.op_name == "dsa_generation_module_skip_indexer").any()  # present in the table, left out
    assert len(rows) == int((raw.op_name == "dsa_generation_module").sum())  # every served row's model is known
    v32 = rows[rows.k == 7168].iloc[0]  # DeepSeek-V3.2 config.json
    assert (v32.q_lora_rank, v32.kv_lora_rank, v32.rope_dim, v32.head_dim, v32.v_head_dim, v32.index_heads,
            v32.index_head_dim, v32.top_k) == (1536, 512, 64, 192, 128, 64, 128, 2048)
    glm = rows[rows.k == 6144].iloc[0]  # GLM-5 config.json: other ranks and head sizes
    assert (glm.q_lora_rank, glm.head_dim, glm.v_head_dim, glm.index_heads) == (2048, 256, 256, 32)
    assert set(rows.seq_len) == {1.0} and rows.context.max() > 1e5


MATH = {"bf16": ("bf16", 2.0), "fp8_block": ("fp8", 1.0), "fp4": ("fp4", 0.5)}


@pytest.mark.parametrize("gpu,framework,stem", [("h200_sxm", "trtllm", "dsa_generation_module_perf"),
                                                ("b200_sxm", "vllm", "dsa_generation_module_perf"),
                                                ("b200_sxm", "trtllm", "dsa_context_module_perf"),
                                                ("h200_sxm", "sglang", "dsa_context_module_perf")])
def test_surface_reproduces_the_measured_rows(gpu, framework, stem):
    """In-sample: every measured row of the table against the block the primitive times
    from the committed surface (no CUDA-graph saving: the table's own launch path), within
    the surface's held-out median |error| (and 10%)."""
    rows, _ = aiconfigurator.newest_table(gpu, framework, stem)
    hw = dataclasses.replace(numbers(aiconfigurator.HARDWARE.get(gpu, gpu), framework=framework), graph_saving_s=0.0,
                             measured_moe_mla=True)
    phase = "decode" if stem.startswith("dsa_generation") else "prefill"
    for (dtype, kv), r in rows.groupby(["dtype", "kv_dtype"]):
        math, w_bytes = MATH[dtype]
        kv_bytes = 1.0 if kv == "fp8" else 2.0
        score = hw.kernels.scores[("dsa_module", dsa_variant(phase, math, w_bytes, kv_bytes))]
        dims = dict(hidden=r.k.values, q_rank=r.q_lora_rank.values, kv_rank=r.kv_lora_rank.values,
                    rope=r.rope_dim.values, nope=(r.head_dim - r.rope_dim).values, v_dim=r.v_head_dim.values,
                    index_heads=r.index_heads.values, index_dim=r.index_head_dim.values, topk=r.top_k.values)
        t = fitted_dsa(hw=hw, phase=phase, batch=r.batch.values, new=r.seq_len.values, prefix=r.context.values,
                       heads=r.n_heads.values, dims=dims, math=math, w_bytes=w_bytes, kv_bytes=kv_bytes)["time_s"]
        err = np.abs(t / r.time_s.to_numpy() - 1.0)
        assert np.median(err) <= min(score["median_abs_err"] + 0.01, 0.10), (dtype, kv, np.median(err), score)
