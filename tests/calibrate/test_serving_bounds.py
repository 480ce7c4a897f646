"""The physical bounds of a measured serving run (calibrate/serving_bounds.py): the model never
predicts below them, and the rows measured below them are named with the bound they break."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.calibrate import serving_bounds, serving_rows
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads.concurrency import routed_params


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
    r = rows[rows.id == "2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c512_tp2_ep1_1135"].iloc[0]
    floor, _ = serving_bounds._bounds(r)
    m = load_model("gpt_oss_120b")
    touched = 1.0 - (1.0 - 4 / 128) ** 256
    routed = routed_params(m)
    vd = 201088 * 2880  # vocab_size x hidden_size (config.json); untied: an embedding table and a head
    weights = ((m.n_params - routed - 2 * vd + routed * touched) * DTYPE_BYTES["fp4"] + vd * 2.0) / 2
    kv = 2 * 8 * 64 * (18 * 1024 + 18 * 128) * 1.0 / 2
    assert floor == pytest.approx((weights + 256 * kv) / 3.35e12, rel=1e-6)
    assert r.silicon_tpot_ms / 1e3 < floor  # measured 5.61 ms: below what a step must read


def test_the_model_never_predicts_below_the_decode_floor(rows):
    agg = rows[rows["mode"] == "agg"]
    floors = {r.id: serving_bounds._bounds(r)[0] for r in agg.itertuples()}
    res = serving_rows.predict_rows(agg).dropna(subset=["tpot_s"])
    ratio = res.tpot_s.to_numpy() / res.id.map(floors).to_numpy()
    assert np.all(ratio[np.isfinite(ratio)] >= 1.0)
    assert np.isfinite(ratio).sum() > 900


def test_rows_below_a_bound_are_named_with_it(rows):
    v = serving_bounds.violations(rows)
    bad = v[v != ""]
    assert 1 <= len(bad) <= 10  # a few inconsistent measurements, not the data set
    assert any("of peak FLOP/s" in t for t in bad) and any("to read weights and KV" in t for t in bad)
    assert set(v[rows[rows["mode"] != "agg"].id]) == {""}  # disaggregated rows are not judged
