"""predict.serving's engine settings at a fixed concurrency: `token_budget` (the tokens one
iteration of an attention replica carries), `memory_fraction` (the share of memory the
weights and KV cache may take), `max_running` (the requests a replica runs at once) and
`recv_interval` (SGLang's polling for new requests) in place of the framework's defaults,
and `lengths` (equal or varied request lengths)."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.workloads.serving_capacity import runtime_reserved_bytes
from workbench.workloads.inference import (LOGIT_BYTES, MAX_PREFILL_TOKENS, activation_bytes_per_token,
                                           kv_bytes_per_sequence)

KW = dict(hardware="h100_sxm", model="llama_3_1_8b", tp=1, prompt=4096, generate=256, weights="fp8")


@pytest.mark.parametrize("framework, budget", [("trtllm", 8192), ("vllm", 8192), ("sglang", 8192)])
def test_the_framework_defaults_given_explicitly_change_nothing(framework, budget):
    """TensorRT-LLM's max_num_tokens and vLLM's max_num_batched_tokens default to 8192 on an
    H100, SGLang's chunked_prefill_size to 8192 on an 80 GB GPU (workloads/concurrency.py);
    0.9 is every framework's memory fraction (workloads/inference.MEMORY_UTILIZATION)."""
    base = predict.serving(concurrency=[1, 16, 128], framework=framework, **KW)
    same = predict.serving(concurrency=[1, 16, 128], framework=framework, token_budget=budget, memory_fraction=0.9,
                           **KW)
    for key in ("ttft_s", "tpot_s", "running_limit", "prefill_iterations"):
        np.testing.assert_array_equal(same[key].values, base[key].values)


def test_memory_fraction_in_closed_form_per_framework_rule():
    """running_limit = floor(room / (a request's cache + its logits)), the room f x (capacity -
    weights - activations - the runtime's memory) under TensorRT-LLM's rule and f x capacity -
    weights - activations under vLLM's (Llama-3.1-8B in FP8 on one H100: 8.0 GB of FP8
    weights and 16-bit embeddings); a request's cache: p + g/2 tokens held on average under
    vLLM's spread arrivals, p + g reserved at admission under TensorRT-LLM's (kv_reserved)."""
    hw, model = numbers("h100_sxm", framework="trtllm"), load_model("llama_3_1_8b")
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(model, tp=1.0, stream_bytes=2.0)
    for framework in ("trtllm", "vllm"):
        tokens = 4096 + (256 if framework == "trtllm" else 256 / 2)
        per_request = kv_bytes_per_sequence(model, tokens=tokens, tp=1.0, pp=1.0, kv_bytes=2.0) + \
            model.vocab_size * LOGIT_BYTES
        r = predict.serving(concurrency=4, framework=framework, memory_fraction=[0.5, 0.75], **KW)
        weights = float(r.weights_per_device_bytes.isel(memory_fraction=0))
        assert 8.0e9 < weights < 10.0e9
        for f in (0.5, 0.75):
            room = f * (hw.hbm_capacity_bytes - weights - act - runtime_reserved_bytes(1.0)) if framework == "trtllm" \
                else f * hw.hbm_capacity_bytes - weights - act
            assert float(r.running_limit.sel(memory_fraction=f)) == np.floor(room / per_request)


def test_a_smaller_fraction_queues_requests_and_lengthens_ttft():
    """Fewer requests fit, the rest wait (Little's law over the replica's cycle): TTFT grows
    as the fraction shrinks, and with every request running it does not depend on it."""
    r = predict.serving(concurrency=64, framework="vllm", memory_fraction=[0.3, 0.5, 0.9, 0.95], **KW)
    running, ttft, queue = r.running_limit.values, r.ttft_s.values, r.queue_s.values
    assert np.all(np.diff(running) > 0) and running[0] < 64 <= running[2]
    assert np.all(np.diff(ttft[:3]) < 0) and queue[0] > queue[1] > 0.0 == queue[2] == queue[3]
    assert ttft[2] == ttft[3]  # every request runs: the fraction no longer matters


def test_token_budget_sets_the_prefill_iterations_of_a_prompt():
    """A prompt spans ceil(p / budget) prefill iterations: 8,192 tokens take 4 at a budget of
    2,048 and 1 at 8,192; alone on the server (concurrency 1) each iteration pays the host
    overhead again, so TTFT grows as the budget shrinks while TPOT (decode alone) does not move."""
    r = predict.serving(concurrency=1, framework="trtllm", token_budget=[2048, 4096, 8192], **dict(KW, prompt=8192))
    np.testing.assert_array_equal(r.prefill_iterations.values, [4.0, 2.0, 1.0])
    assert np.all(np.diff(r.ttft_s.values) < 0)
    np.testing.assert_allclose(r.tpot_s.values, r.tpot_s.values[0], rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(concurrency=4, token_budget=0), "token_budget=0 is not allowed"),
    (dict(concurrency=4, token_budget=2.5), "token_budget=2.5 is not allowed"),
    (dict(concurrency=4, memory_fraction=0.0), "memory_fraction=0 is not allowed; allowed: a fraction in"),
    (dict(concurrency=4, memory_fraction=1.5), "memory_fraction=1.5 is not allowed"),
    (dict(token_budget=4096), "token_budget=4096 is not allowed without concurrency"),
    (dict(memory_fraction=0.8), "memory_fraction=0.8 is not allowed without concurrency"),
    (dict(concurrency=4, max_running=0), "max_running=0 is not allowed"),
    (dict(concurrency=4, recv_interval=1.5), "recv_interval=1.5 is not allowed"),
    (dict(concurrency=4, lengths="random"), "lengths='random' is not known; allowed: equal, varied"),
    (dict(max_running=8), "max_running=8 is not allowed without concurrency"),
    (dict(lengths="varied"), "lengths='varied' is not allowed without concurrency"),
])
def test_bad_engine_settings_say_what_is_allowed(kwargs, match):
    with pytest.raises(InputError, match=match):
        predict.serving(framework="trtllm", **{**KW, **kwargs})


def test_max_running_caps_the_running_requests_and_queues_the_rest():
    """max_running = 16 of 64 requests in flight: 16 run (the KV cache holds all 64), the other
    48 wait (Little's law over the replica's cycle), so TTFT grows by the queue and TPOT falls
    with the smaller batch; a cap above the concurrency changes nothing."""
    base = predict.serving(concurrency=64, framework="sglang", **KW)
    capped = predict.serving(concurrency=64, framework="sglang", max_running=[16, 128], **KW)
    assert float(base.running_limit) >= 64 and float(base.queue_s) == 0.0
    low, high = capped.sel(max_running=16), capped.sel(max_running=128)
    assert float(low.running_limit) == 16.0 and float(low.running) == 16.0
    cycle = float(low.ttft_s - low.queue_s) + (KW["generate"] - 1) * float(low.tpot_s)
    assert float(low.queue_s) == pytest.approx((64 - 16) / (16 / cycle), rel=1e-9)
    assert float(low.tpot_s) < float(base.tpot_s)
    for key in ("ttft_s", "tpot_s"):
        assert float(high[key]) == pytest.approx(float(base[key]), rel=1e-12)


def test_recv_interval_lengthens_ttft_of_varied_lengths_and_not_of_lockstep_waves():
    """SGLang polling every N decode iterations: with varied lengths (arrivals spread) a
    prompt waits for the end of its window, TTFT growing with N by about half a window per
    request (tests/workloads/test_concurrency_simulation.py checks the form against a
    simulation); the prompts of a window share one prefill batch, so TPOT falls. With equal
    lengths a wave's requests finish together, the server idles and takes them in at once:
    N changes nothing. It is SGLang's option: given with TensorRT-LLM it is refused by name."""
    kw = dict(KW, concurrency=32, prompt=1024, generate=1024)
    r = predict.serving(framework="sglang", lengths="varied", recv_interval=[1, 10, 30], **kw)
    ttft, tpot, window = r.ttft_s.values, r.tpot_s.values, r.decode_iteration_s.values
    assert np.all(np.diff(ttft) > 0) and np.all(np.diff(tpot) < 0)
    assert ttft[2] - ttft[0] == pytest.approx(0.5 * 29 * window[2] * 31 / 32, rel=0.35)
    equal = predict.serving(framework="sglang", lengths="equal", recv_interval=[1, 30], **kw)
    np.testing.assert_array_equal(equal.ttft_s.values[0], equal.ttft_s.values[1])
    with pytest.raises(InputError, match="recv_interval=.* is not allowed with framework='trtllm'"):
        predict.serving(framework="trtllm", lengths="varied", recv_interval=[1, 30], **kw)


def test_varied_lengths_spread_sglangs_lockstep_waves():
    """lengths="varied": SGLang's lockstep waves (prefill_first) become its spread form
    (prefill_first_spread), the same as the closed loop at that schedule; TensorRT-LLM's and
    vLLM's schedules are already the spread one, so nothing moves."""
    from workbench.workloads import concurrency as cc
    kw = dict(KW, concurrency=32, prompt=1024, generate=512)
    for framework, moves in (("sglang", True), ("trtllm", False), ("vllm", False)):
        equal = predict.serving(framework=framework, lengths="equal", **kw)
        varied = predict.serving(framework=framework, lengths="varied", **kw)
        assert (float(equal.ttft_s) != float(varied.ttft_s)) == moves
    assert cc.DESYNCHRONIZED["prefill_first"] == "prefill_first_spread"
    with pytest.raises(ValueError, match="lengths='random' is not known; allowed: equal, varied"):
        cc.closed_loop(hw=None, model=None, concurrency=1, prompt=1, generate=2, tp=1, attention_dp=1, ep=1,
                       weights="fp8", activations="fp8", kv="fp8", overhead_s=0.0, token_budget=8192.0,
                       lengths="random")


def test_a_swept_max_running_keeps_the_running_limit_it_sets():
    """The engine setting max_running swept along its own dimension leaves the result's
    running_limit (the most requests a replica runs: the KV cache's room or the setting,
    whichever is less) intact: Qwen3-30B-A3B at 8,192-token prompts on one H200 holds 90
    requests, so max_running 256 runs 90 and 16 runs 16 (the output had been named max_running
    and the swept coordinate replaced it)."""
    kw = dict(hardware="h200_sxm", model="Qwen/Qwen3-30B-A3B", framework="vllm", tp=1, concurrency=512, prompt=8192)
    swept = predict.serving(**kw, max_running=[16, 256])
    room = float(predict.serving(**kw).running_limit)
    assert 16 < room < 256
    assert float(swept.running_limit.sel(max_running=256)) == room
    assert float(swept.running_limit.sel(max_running=16)) == 16.0
    assert float(swept.running.sel(max_running=256)) == room
