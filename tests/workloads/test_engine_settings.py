"""predict.serving's engine settings at a fixed concurrency: `token_budget` (the tokens one
iteration of an attention replica carries) and `memory_fraction` (the share of memory the
weights and KV cache may take) in place of the framework's defaults."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.workloads.concurrency import runtime_reserved_bytes
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
    for key in ("ttft_s", "tpot_s", "max_running", "prefill_iterations"):
        np.testing.assert_array_equal(same[key].values, base[key].values)


def test_memory_fraction_in_closed_form_per_framework_rule():
    """max_running = floor(room / (a request's cache + its logits)), the room f x (capacity -
    weights - activations - the runtime's memory) under TensorRT-LLM's rule and f x capacity -
    weights - activations under vLLM's (Llama-3.1-8B in FP8 on one H100: 8.0 GB of FP8
    weights and 16-bit embeddings)."""
    hw, model = numbers("h100_sxm", framework="trtllm"), load_model("llama_3_1_8b")
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(model, tp=1.0, stream_bytes=2.0)
    kv = kv_bytes_per_sequence(model, tokens=4096 + 256 / 2, tp=1.0, pp=1.0, kv_bytes=2.0)  # spread: p + g/2 held
    per_request = kv + model.vocab_size * LOGIT_BYTES
    for framework in ("trtllm", "vllm"):
        r = predict.serving(concurrency=4, framework=framework, memory_fraction=[0.5, 0.75], **KW)
        weights = float(r.weights_per_device_bytes.isel(memory_fraction=0))
        assert 8.0e9 < weights < 10.0e9
        for f in (0.5, 0.75):
            room = f * (hw.hbm_capacity_bytes - weights - act - runtime_reserved_bytes(1.0)) if framework == "trtllm" \
                else f * hw.hbm_capacity_bytes - weights - act
            assert float(r.max_running.sel(memory_fraction=f)) == np.floor(room / per_request)


def test_a_smaller_fraction_queues_requests_and_lengthens_ttft():
    """Fewer requests fit, the rest wait (Little's law over the replica's cycle): TTFT grows
    as the fraction shrinks, and with every request running it does not depend on it."""
    r = predict.serving(concurrency=64, framework="vllm", memory_fraction=[0.3, 0.5, 0.9, 0.95], **KW)
    running, ttft, queue = r.max_running.values, r.ttft_s.values, r.queue_s.values
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
])
def test_bad_engine_settings_say_what_is_allowed(kwargs, match):
    with pytest.raises(InputError, match=match):
        predict.serving(framework="trtllm", **{**KW, **kwargs})
