"""Pipeline parallelism in fixed-concurrency serving (workloads/concurrency.py, predict.serving(
concurrency=..., pp=...)): min(requests, pp) micro-batches in flight, each through every stage,
so a token's iteration is every layer at the micro-batch's size plus pp - 1 stage-to-stage
sends; each GPU holds 1/pp of the layers' weights and of every request's cache."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads import ops
from workbench.workloads.concurrency import closed_loop
from workbench.workloads.serving_capacity import max_running
from workbench.workloads.inference import pp_transfer

HW = numbers("h100_sxm", framework="trtllm")
MODEL = load_model("llama_3_1_70b")
KW = dict(hw=HW, model=MODEL, prompt=2048.0, generate=256.0, tp=4.0, attention_dp=1.0, ep=1.0, weights="fp8",
          activations="fp8", kv="fp8", overhead_s=0.0, token_budget=8192.0)


@pytest.mark.parametrize("pp", [2.0, 4.0, 8.0])
def test_one_request_per_micro_batch_is_one_request_alone_plus_the_stage_sends(pp):
    """concurrency = pp: every micro-batch holds one request, which runs as a lone request on
    all the layers (pp = 1, concurrency 1), plus pp - 1 sends of its activations: one token's
    per decode step, the whole prompt's for its prefill."""
    one = closed_loop(concurrency=1.0, **KW)
    piped = closed_loop(concurrency=pp, pp=pp, **KW)
    stream = max(DTYPE_BYTES["fp8"], ops.STREAM_BYTES)  # the residual stream's bytes, as closed_loop sends it
    send = lambda tokens: float(pp_transfer(HW, MODEL, tokens=tokens, tp=4.0, pp=pp, stream_bytes=stream)["time_s"])
    assert send(1.0) > 0
    assert float(piped["tpot_s"]) == pytest.approx(float(one["tpot_s"]) + send(1.0), rel=1e-9)
    assert float(piped["ttft_s"]) == pytest.approx(float(one["ttft_s"]) + send(2048.0), rel=1e-9)
    assert float(piped["running"]) == pp and float(piped["batch"]) == pytest.approx(float(one["batch"]))


def test_fewer_requests_than_stages_leave_stages_idle():
    """Two requests on four stages: two micro-batches of one; TPOT is that of one request."""
    r = closed_loop(concurrency=np.array([1.0, 2.0, 4.0]), pp=4.0, **KW)
    assert r["tpot_s"][0] == pytest.approx(r["tpot_s"][1], rel=1e-12) == pytest.approx(r["tpot_s"][2], rel=1e-12)
    np.testing.assert_allclose(r["requests_per_s"] * r["e2e_s"], [1.0, 2.0, 4.0], rtol=1e-9)  # Little's law


def test_each_gpu_holds_its_share_of_the_weights_and_caches():
    """max_running in closed form: (usable memory - weights / pp - activations) over
    (a request's cache / pp + its logits), the usable memory 90% of the GPU's."""
    from workbench.workloads.serving_capacity import weights_per_device_bytes
    from workbench.workloads.inference import LOGIT_BYTES, MAX_PREFILL_TOKENS, MEMORY_UTILIZATION, \
        activation_bytes_per_token, kv_bytes_per_sequence
    args = dict(prompt=8192.0, generate=1024.0, tp=2.0, attention_dp=1.0, w_bytes=1.0, kv_bytes=1.0, stream_bytes=2.0)
    w = weights_per_device_bytes(MODEL, 1.0, tp=2.0, attention_dp=1.0)
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(MODEL, tp=2.0, stream_bytes=2.0)
    kv = kv_bytes_per_sequence(MODEL, tokens=9216.0, tp=2.0, pp=1.0, kv_bytes=1.0)
    logits = MODEL.vocab_size / 2.0 * LOGIT_BYTES
    for pp in (1.0, 2.0, 4.0):
        cap, weights, kv_seq = max_running(HW, MODEL, pp=pp, **args)
        assert weights == pytest.approx(w / pp) and kv_seq == pytest.approx(kv / pp)
        assert float(cap) == np.floor((HW.hbm_capacity_bytes * MEMORY_UTILIZATION - w / pp - act) / (kv / pp + logits))
    assert float(max_running(HW, MODEL, pp=4.0, **args)[0]) > 3.5 * float(max_running(HW, MODEL, pp=1.0, **args)[0])


def test_stages_make_a_model_fit_that_one_gpu_cannot_hold():
    """Llama-3.1-70B in BF16 (141 GB) on H100s of 80 GB at TP 1: no room on one, room on four stages."""
    r = predict.serving(hardware="h100_sxm", model="llama_3_1_70b", tp=1, pp=[1, 4], concurrency=8, prompt=1024,
                        generate=256, weights="bf16")
    assert r.fits.values.tolist() == [False, True]
    assert "no room" in str(r.reason.sel(pp=1).values)
    assert float(r.devices.sel(pp=4)) == 4.0
    out = r.sel(pp=4)
    assert float(out.output_tokens_per_s_per_device) * 4 == pytest.approx(float(out.output_tokens_per_s))


def test_pipelined_serving_sweeps_monotone_and_flags_too_many_stages():
    r = predict.serving(hardware="h200_sxm", model="llama_3_1_8b", tp=1, pp=[1, 2, 4, 64],
                        concurrency=[1, 4, 16, 64, 256], prompt=2048, generate=512, weights="fp8")
    ok = r.sel(pp=[1, 2, 4])
    assert bool(ok.fits.all())
    assert bool((ok.tpot_s.diff("concurrency") >= -1e-12).all())
    assert bool((ok.ttft_s.diff("concurrency") >= -1e-12).all())
    # at a fixed concurrency, more stages run smaller micro-batches: never a slower token
    assert bool((ok.tpot_s.diff("pp") <= 1e-4).all())
    bad = r.sel(pp=64)
    assert not bool(bad.fits.any()) and "pp=64 exceeds n_layers=32" in str(bad.reason.values.flat[0])
