"""Pipeline stages in fixed prefill and decode pools (workloads/pools_closed_loop.py,
predict.disaggregated(concurrency=..., prefill_pp=..., decode_pp=...)), as the aggregated
closed loop runs them: a prefill batch passes every stage in turn while the other stages work
on the next batches; a decode replica's requests run as min(r, pp) micro-batches; each GPU
holds 1/pp of the layers, their weights and every request's cache there."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.units import DTYPE_BYTES
from workbench.workloads import ops
from workbench.workloads.serving_capacity import max_running
from workbench.workloads.inference import pp_transfer
from workbench.workloads.pools_closed_loop import disaggregated_closed_loop

HW = numbers("h100_sxm", framework="trtllm")
MODEL = load_model("llama_3_1_70b")
KW = dict(prefill_hw=HW, decode_hw=HW, model=MODEL, prompt=4096.0, generate=512.0, prefill_tp=4.0,
          prefill_attention_dp=1.0, prefill_ep=1.0, prefill_batch=2.0, decode_tp=4.0, decode_attention_dp=1.0,
          decode_ep=1.0, prefill_workers=1.0, decode_workers=1.0, weights="fp8", activations="fp8", kv="fp8",
          prefill_overhead_s=1e-3, decode_overhead_s=1e-3,
          kv_link_bytes_per_s=4 * 50e9)  # TP4 x 400 Gb/s NIC (h100_sxm.yaml)
STREAM = max(DTYPE_BYTES["fp8"], ops.STREAM_BYTES)  # the residual stream's bytes, as the loop sends them


def send(tokens, pp):
    return float(pp_transfer(HW, MODEL, tokens=tokens, tp=4.0, pp=pp, stream_bytes=STREAM)["time_s"])


@pytest.mark.parametrize("pp", [2.0, 4.0])
def test_a_prefill_batch_crosses_every_stage_and_each_stage_ships_its_caches(pp):
    """The batch's latency gains exactly pp - 1 sends of its tokens' activations; its KV
    caches leave over pp stages' links (the transfer takes 1/pp of the time)."""
    one = disaggregated_closed_loop(concurrency=8.0, **KW)
    piped = disaggregated_closed_loop(concurrency=8.0, prefill_pp=pp, **KW)
    assert send(8192.0, pp) > 0
    assert float(piped["prefill_batch_s"]) == pytest.approx(float(one["prefill_batch_s"]) + send(8192.0, pp), rel=1e-9)
    assert float(piped["kv_transfer_s"]) == pytest.approx(float(one["kv_transfer_s"]) / pp, rel=1e-12)
    assert float(piped["devices"]) == 4.0 * pp + 4.0


def test_a_saturated_prefill_pool_admits_pp_batches_per_batch_latency():
    """Prefill-bound (one prefill replica, many requests): the loop runs at the pool's
    capacity, replicas x batch x pp / batch latency."""
    kw = dict(KW, decode_workers=4.0)
    rates = {}
    for pp in (1.0, 2.0):
        r = disaggregated_closed_loop(concurrency=2048.0, prefill_pp=pp, **kw)
        assert float(r["prefill_utilization"]) == pytest.approx(1.0, rel=1e-9)
        rates[pp] = (float(r["requests_per_s"]), float(r["prefill_batch_s"]))
    (r1, b1), (r2, b2) = rates[1.0], rates[2.0]
    assert r2 / r1 == pytest.approx(2.0 * b1 / b2, rel=1e-9)
    assert r1 == pytest.approx(2.0 / b1, rel=1e-9)  # one replica, batches of 2


@pytest.mark.parametrize("pp", [2.0, 4.0])
def test_one_decoding_request_pays_the_sends_of_its_token(pp):
    """Concurrency 1: the decode replica holds one request (one micro-batch): its TPOT is the
    unpipelined one plus pp - 1 sends of one token's activations."""
    one = disaggregated_closed_loop(concurrency=1.0, **KW)
    piped = disaggregated_closed_loop(concurrency=1.0, decode_pp=pp, **KW)
    assert float(piped["tpot_s"]) == pytest.approx(float(one["tpot_s"]) + send(1.0, pp), rel=1e-9)


def test_decode_stages_split_the_weights_and_caches():
    """A decode replica's room is max_running with the stages (closed form in
    tests/workloads/test_concurrency_pipeline.py): Llama-3.1-70B in BF16 on one 80 GB H100
    has none, on two stages it has."""
    kw = dict(KW, decode_tp=1.0, weights="bf16", activations="bf16", kv="bf16")
    for pp in (1.0, 2.0):
        cap, _, _ = max_running(HW, MODEL, prompt=4096.0, generate=512.0, tp=1.0, attention_dp=1.0, w_bytes=2.0,
                                kv_bytes=2.0, stream_bytes=2.0, pp=pp)
        r = disaggregated_closed_loop(concurrency=16.0, decode_pp=pp, **kw)
        assert float(r["decode_running_limit"]) == float(cap)
        assert bool(r["fits"]) == (pp == 2.0)


def test_predict_disaggregated_takes_stages_and_flags_too_many():
    kw = dict(prefill_hardware="h100_sxm", decode_hardware="h100_sxm", model="llama_3_1_70b", concurrency=32,
              prompt=2048, generate=256, weights="fp8", prefill_tp=4, decode_tp=4, framework="trtllm")
    base = predict.disaggregated(**kw)
    piped = predict.disaggregated(prefill_pp=2, decode_pp=2, **kw)
    assert float(piped.devices) == 2 * float(base.devices) and bool(piped.fits)
    over = predict.disaggregated(decode_pp=81, **kw)
    assert not bool(over.fits) and "decode_pp=81 exceeds n_layers=80" in str(over.reason.values)
    with pytest.raises(InputError, match="prefill_pp=2 is not allowed without concurrency"):
        predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="h100_sxm", model="llama_3_1_70b",
                              prefill_pp=2)


def test_the_tpot_parts_add_up_with_stages():
    """kernel TPOT + h x iterations + h_seq x sequences is the TPOT (the form the serving fit
    reads), the sequences those of one decode micro-batch: with two stages and 64 requests
    per replica a step carries 32."""
    h, h_seq = 1e-3, 20e-6
    r = disaggregated_closed_loop(concurrency=64.0, decode_pp=2.0, **dict(KW, decode_overhead_s=h,
                                                                        decode_overhead_s_per_sequence=h_seq))
    parts = float(r["kernel_tpot_s"]) + h * float(r["tpot_iterations"]) + h_seq * float(r["tpot_sequences"])
    assert parts == pytest.approx(float(r["tpot_s"]), rel=1e-12)
    assert float(r["tpot_sequences"]) == pytest.approx(float(r["decode_running"]) / 2.0, rel=1e-12)
