"""The contract every predict.* call keeps, over seeded random configurations: it is refused
with one InputError, or it returns a dataset whose points either fit, with finite positive
times, or are flagged fits=False with a reason. A fuzz of this kind (about 30,000 calls)
found five breaches in one session, each now a test of its own: NaN times with fits=True in
disaggregated pools of two GPU kinds (tests/workloads/test_pools_closed_loop.py), TPOT inf
with fits=True near saturation (tests/workloads/test_serving.py), invalid MTP heads of hybrid
and sparse models (tests/workloads/test_speculative.py), crashes under a swept peak
(tests/backends/test_hardware_as_data.py) and a zero goodput without a reason
(tests/workloads/test_serving.py). This file keeps a small seeded sample of the same
generators, mixing those classes, so a new breach of the contract shows up here."""
from __future__ import annotations

import random

import numpy as np
import pytest
import xarray as xr

from workbench import predict
from workbench.errors import InputError

GPUS = ["h100_sxm", "h200_sxm", "b200", "gb200", "a100_sxm", "l40s", "b300", "rtx_pro_6000", "mi300x", "gaudi3"]
MODELS = ["llama_3_1_8b", "qwen3_30b_a3b", "gpt_oss_20b", "qwen3_next_80b_a3b", "nemotron_h_56b_base_8k",
          "deepseek_v3_2", "minimax_m3", "mixtral_8x7b", "qwen3_32b"]
WEIGHTS = ["bf16", "fp8", "fp8_block", "fp4", "int4", "int8"]
TIMES = ("ttft_s", "tpot_s", "e2e_s", "step_time_s")


def _calls(seed: int) -> list[tuple[str, dict]]:
    """One configuration of each entry point, drawn from the generators that found the breaches."""
    rng = random.Random(seed)
    g, m, w = rng.choice(GPUS), rng.choice(MODELS), rng.choice(WEIGHTS)
    tp, ep = rng.choice([1, 2, 8]), rng.choice([1, 2, 8])
    peak = {"peak_flops_per_s_bf16": [1e15, 4e15]} if rng.random() < 0.3 else None
    return [
        ("inference", dict(hardware=g, model=m, tp=tp, ep=ep, batch=rng.choice([1, [1, 64]]), prompt=1024,
                           generate=rng.choice([2, 256]), weights=w, draft_len=rng.choice([0, 2]), acceptance=0.7)),
        ("serving", dict(hardware=g, model=m, tp=tp, ep=ep, concurrency=rng.choice([1, [4, 256]]),
                         prompt=rng.choice([17, 8192]), generate=256, weights=w, draft_len=rng.choice([0, 2]),
                         acceptance=0.7, hardware_overrides=peak)),
        ("serving", dict(hardware=g, model=m, tp=tp, prompt=1024, generate=rng.choice([128, 4096]), weights=w,
                         arrival_rate=rng.choice([0.5, 5.0, 50.0]))),
        ("disaggregated", dict(prefill_hardware=g, decode_hardware=rng.choice(GPUS + ["cs3"]), model=m,
                               prefill_tp=tp, decode_tp=tp, concurrency=rng.choice([1, 64]), prompt=1024,
                               generate=256, weights=w)),
        ("training", dict(hardware=g, model=m, tp=tp, ep=ep, dp=8, seq_len=4096, global_batch=64,
                          precision=rng.choice(["bf16", "fp8"]))),
    ]


@pytest.mark.parametrize("seed", range(24))
def test_every_call_is_refused_or_fits_or_says_why(seed):
    for fn, args in _calls(seed):
        if args.get("decode_hardware") == "cs3":
            args.update(decode_tp=1)
        args = {k: v for k, v in args.items() if v is not None}
        try:
            ds = getattr(predict, fn)(**args)
        except InputError as e:
            assert "allowed" in str(e) or "not known" in str(e) or "not modelled" in str(e), (fn, args, str(e))
            continue
        fits, reason = (np.asarray(a.values) for a in xr.broadcast(ds.fits, ds.reason))
        assert np.all(fits | (reason.astype(str) != "")), (fn, args, "a flagged point without a reason")
        for name in TIMES:
            if name in ds:
                t, f = (np.asarray(a.values) for a in xr.broadcast(ds[name], ds.fits))
                ok = np.isfinite(t.astype(float)) & (t.astype(float) > 0)
                assert np.all(ok | ~f.astype(bool)), (fn, args, name, t)
