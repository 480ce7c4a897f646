"""The physical bounds of a measured serving run (calibrate/serving_bounds.py): the model never
predicts below them, and the rows measured below them are named with the bound they break."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.calibrate import serving_bounds, serving_rows
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads.ops import routed_params


@pytest.fixture(scope="module")
def rows():
    return serving_rows.load()


def test_the_decode_floor_is_the_weights_and_kv_a_step_reads_over_hbm(rows):
    """gpt-oss-120b in MXFP4 (0.5 B/param plus scales, units.DTYPE_BYTES) on two H100 at tp 2,
    512 requests: 256 tokens in a step visit every one of the 128 experts (1 - (1 - 4/128)^256
    = 0.9997), so a step reads every layer weight, half per device, and the LM head of
    201,088 x 2,880 in BF16 (the input embedding table is only gathered from); and 256 requests read
    their 1,024-token prompts' FP8 caches: 8 KV heads x 64 (K and V) per token on 18 full layers
    and on 18 layers windowed to 128 tokens (openai/gpt-oss-120b config.json), half the heads
    per device; all at 3.35 TB/s (H100 SXM datasheet)."""
    r = next(rows[rows.id == "2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c512_tp2_ep1_1135"].itertuples())
    floor, _ = serving_bounds._bounds(r)
    m = load_model("gpt_oss_120b")
    touched = 1.0 - (1.0 - 4 / 128) ** 256
    routed = routed_params(m)
    vd = 201088 * 2880  # vocab_size x hidden_size (config.json); untied: an embedding table and a head
    weights = ((m.n_params - routed - 2 * vd + routed * touched) * DTYPE_BYTES["fp4"] + vd * 2.0) / 2
    kv = 2 * 8 * 64 * (18 * 1024 + 18 * 128) * 1.0 / 2
    assert floor == pytest.approx((weights + 256 * kv) / 3.35e12, rel=1e-6)
    assert r.silicon_tpot_ms / 1e3 < floor  # measured 5.61 ms: below what a step must read


def test_a_disaggregated_row_is_bounded_by_its_own_pools(rows):
    """Qwen3-32B in FP8 on H100, 8 prefill workers of one GPU, 2 decode workers of TP4 at 448
    requests of 4,000 + 1,000 tokens: the prefill pool's 8 GPUs prefill every completed
    request, 2 x 31.21e9 FLOPs a prompt token (64 layers of q 5120x8192, k and v 5120x1024, o
    8192x5120 and 3 MLP 5120x25600 matrices: Qwen/Qwen3-32B config.json), against 8 x 1,978.9
    TFLOP/s FP8 (H100 SXM datasheet); the decode floor is the decode pool's (TP4, 224
    requests a replica), not the prefill workers' (TP1 could not hold the weights and 224 caches)."""
    r = next(rows[rows.id == "qwen3_32b_qwen3_32b_h100_sxm_vllm_disagg_4000x1000_c_tp_epnone_2"].itertuples())
    floor, share = serving_bounds._bounds(r)
    per_token = 2 * 64 * (2 * 5120 * 8192 + 2 * 5120 * 1024 + 3 * 5120 * 25600)
    e2e_s = (r.silicon_ttft_ms + 999 * r.silicon_tpot_ms) / 1e3
    assert share == pytest.approx(448 / e2e_s * 4000 * per_token / (8 * 1978.9e12), rel=1e-6)
    assert 0.7 < share < 1.0  # 78% of peak: near the ceiling, not above it
    weights_tp4 = load_model("qwen3_32b").n_params / 4 * DTYPE_BYTES["fp8"] / 3.35e12  # a lower part of it
    assert weights_tp4 < floor < r.silicon_tpot_ms / 1e3


def test_the_model_never_predicts_below_the_decode_floor(rows):
    floors = {r.id: serving_bounds._bounds(r)[0] for r in rows.itertuples()}
    res = serving_rows.predict_rows(rows).dropna(subset=["tpot_s"])
    ratio = res.tpot_s.to_numpy() / res.id.map(floors).to_numpy()
    assert np.all(ratio[np.isfinite(ratio)] >= 1.0)
    judged = res.assign(r=ratio)[np.isfinite(ratio)]
    assert (judged["mode"] == "agg").sum() > 900 and (judged["mode"] != "agg").sum() >= 50


def test_rows_below_a_bound_are_named_with_it(rows):
    v = serving_bounds.violations(rows)
    bad = v[v != ""]
    assert 1 <= len(bad) <= 10  # a few inconsistent measurements, not the data set
    assert any("to read weights and KV" in t for t in bad)
    # read as one engine, the Qwen3-32B-NVFP4 GB200 rows (448 requests, 15,000-token prompts, 2
    # GPUs) needed 277% of peak FLOP/s to prefill; as the 32 engines their batch of 14 implies
    # (serving_rows.replicas) they are consistent
    rc5 = rows[rows.id.str.contains("qwen3_32b_nvfp4_gb200_trtllm_agg_15000x500_c448")]
    assert len(rc5) == 2 and set(v[rc5.id]) == {""}
    unstated = rows[(rows["mode"] != "agg") & rows.decode_num_workers.isna()]
    assert len(unstated) > 200 and set(v[unstated.id]) == {""}  # rows without their pools are not judged
