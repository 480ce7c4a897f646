"""workloads/serving_capacity.py: what one serving replica can carry and hold: each framework's
token budget and running-request defaults by GPU, the runtime's own memory, the weights on a
device (redundant expert copies included), a draft's memory and the KV cache's admission under
each framework's memory rule."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_model


def test_sglang_chunk_follows_the_gpu_and_dp_attention():
    """SGLang's chunked_prefill_size by device memory (sglang/srt/server_args.py: 2048 below
    35 GiB, 4096 below 60 GiB, 8192 below 160 GiB, 16384 above: L4 24 GB, L40S 48 GB, H100
    80 GB, B200 179 GiB), divided by the DP size under DP attention (_handle_data_parallelism):
    an 8k prompt is one prefill batch on a B200, eight per replica at attention_dp 8 on an H200."""
    from workbench.workloads.serving_capacity import framework_limits
    chunks = {g: float(framework_limits("sglang", numbers(g))[0]) for g in ("l4", "l40s", "h100_sxm", "h200_sxm", "b200")}
    assert chunks == {"l4": 2048.0, "l40s": 4096.0, "h100_sxm": 8192.0, "h200_sxm": 8192.0, "b200": 16384.0}
    assert float(framework_limits("sglang", numbers("b200"), 8.0)[0]) == 2048.0
    kw = dict(model="deepseek_r1", tp=1, ep=8, prompt=8192, generate=256, weights="fp8_block", concurrency=64,
              framework="sglang")
    assert float(predict.serving(hardware="h200_sxm", attention_dp=8, **kw).prefill_iterations) == 8.0
    assert float(predict.serving(hardware="b200", attention_dp=8, **kw).prefill_iterations) == 4.0


def test_vllm_defaults_follow_the_gpu():
    """vLLM's OpenAI server takes max_num_batched_tokens 8192 and max_num_seqs 1024 on a GPU
    with >= 70 GiB that is not an A100, 2048 and 256 elsewhere (vllm/engine/arg_utils.py
    get_batch_defaults): an 8k prompt spans 4 iterations on an A100 and 1 on an H100, and a
    small model with room for thousands of requests runs at most 256 at once on an A100.
    TensorRT-LLM keeps its 8192-token budget and only its KV cache bounds it."""
    from workbench.workloads.serving_capacity import framework_limits
    assert [float(v) for v in framework_limits("vllm", numbers("a100_sxm"))] == [2048.0, 256.0]
    assert [float(v) for v in framework_limits("vllm", numbers("h100_sxm"))] == [8192.0, 1024.0]
    assert [float(v) for v in framework_limits("vllm", numbers("l40s"))] == [2048.0, 256.0]
    assert framework_limits("trtllm", numbers("a100_sxm")) == (8192.0, np.inf)
    kw = dict(model="llama_3_1_8b", tp=1, prompt=8192, generate=256, weights="bf16", concurrency=16)
    a100 = predict.serving(hardware="a100_sxm", framework="vllm", **kw)
    h100 = predict.serving(hardware="h100_sxm", framework="vllm", **kw)
    assert float(a100.prefill_iterations) == 4.0 and float(h100.prefill_iterations) == 1.0
    small = dict(model="llama_3_2_1b", tp=1, prompt=128, generate=128, weights="bf16", concurrency=1024)
    v = predict.serving(hardware="a100_sxm", framework="vllm", **small)
    t = predict.serving(hardware="a100_sxm", framework="trtllm", **small)
    assert float(v.running_limit) == 256.0 and float(v.queue_s) > 0
    assert float(t.running_limit) > 1024.0 and float(t.queue_s) == 0.0


def test_runtime_memory_comes_off_before_tensorrt_llms_fraction():
    """TensorRT-LLM's KV cache is 0.9 of what the weights, the activations and the runtime's own
    memory leave free: the CUDA context and libraries (551 MB) and NCCL's buffers (342 MiB on 2
    GPUs, 392 MiB on 4 or more; aiconfigurator-core 0.12.0 systems/h100_sxm.yaml misc), in
    closed form. DeepSeek-R1 in FP8 on one 8-GPU H100 node keeps 84.1 GB of weights on each
    85.5 GB GPU: with the runtime's 1.4 GB it has no room for a request (every measured DeepSeek
    run on H100 in serving_silicon.csv uses 16-GPU pools), where without it one request fit."""
    from workbench.workloads.serving_capacity import max_running, runtime_reserved_bytes
    from workbench.workloads.inference import LOGIT_BYTES, MAX_PREFILL_TOKENS, activation_bytes_per_token
    np.testing.assert_allclose(runtime_reserved_bytes([1, 2, 4, 8, 16]),
                               551e6 + np.array([0.0, 342.0, 392.0, 392.0, 392.0]) * 2 ** 20)
    hw, model = numbers("h100_sxm", framework="trtllm"), load_model("deepseek_r1")
    kw = dict(prompt=1024.0, generate=1024.0, attention_dp=1.0, w_bytes=1.0, kv_bytes=2.0, stream_bytes=2.0,
              kv_memory_of="free")
    cap, weights, kv = max_running(hw, model, tp=16.0, **kw)
    act = MAX_PREFILL_TOKENS * activation_bytes_per_token(model, tp=16.0, stream_bytes=2.0)
    room = (hw.hbm_capacity_bytes - weights - act - runtime_reserved_bytes(16.0)) * 0.9
    assert float(cap) == np.floor(room / (kv + model.vocab_size / 16.0 * LOGIT_BYTES)) > 100
    cap8, weights8, _ = max_running(hw, model, tp=8.0, **kw)
    assert 84.0e9 < float(weights8) < hw.hbm_capacity_bytes < float(weights8) + 1.5e9 and float(cap8) == 0.0
    r = predict.serving(hardware="h100_sxm", model="deepseek-ai/DeepSeek-R1", tp=8, concurrency=8, prompt=1024,
                        generate=1024, weights="fp8", framework="trtllm")
    assert not bool(r.fits) and "runtime's own memory" in str(r.reason.values)


def test_kv_memory_rule_per_framework():
    """TensorRT-LLM gives the KV cache 0.9 of the memory the weights leave free, vLLM and
    SGLang 0.9 of the device minus the weights: DeepSeek-R1 in FP8 over 4 B200 (168 GB of
    weights on each GPU of 192.27 GB, nvidia-smi's 183359 MiB) leaves the first rule several
    times the room of the second (0.9 x 24 GB against 173 - 168 GB), both above zero: measured
    TensorRT-LLM and SGLang runs at that layout exist (serving_silicon.csv rows 126-128,
    726-730; the SGLang ..._tp4_0_ep1_0_286 and ..._tp4_ep1_1230)."""
    from workbench.workloads.serving_capacity import max_running
    hw, model = numbers("b200", framework="trtllm"), load_model("deepseek_r1")
    kw = dict(prompt=1024.0, generate=1024.0, tp=4.0, attention_dp=1.0, w_bytes=1.0, kv_bytes=2.0, stream_bytes=2.0)
    total, weights, kv = max_running(hw, model, kv_memory_of="total", **kw)
    free, _, _ = max_running(hw, model, kv_memory_of="free", **kw)
    assert 0.0 < float(total) and 3.0 * float(total) < float(free)
    # each rule: what is left of its usable memory after the weights (and activations), over one request's cache
    assert float(free) <= 0.9 * (hw.hbm_capacity_bytes - weights) / kv
    assert float(total) <= (0.9 * hw.hbm_capacity_bytes - weights) / kv
    r = predict.serving(hardware="b200", model="deepseek_r1", tp=4, concurrency=256, prompt=1024, generate=1024,
                        weights="fp8", framework=["trtllm", "vllm"])
    assert bool(r.fits.all())
    # the framework holding fewer requests at once queues more of the rest: a longer TTFT
    assert float(r.running.sel(framework="vllm")) < float(r.running.sel(framework="trtllm"))
    assert float(r.ttft_s.sel(framework="vllm")) > float(r.ttft_s.sel(framework="trtllm"))


def test_an_mtp_head_counts_its_layer_not_the_shared_embedding_and_head():
    """draft_memory: DeepSeek-V3's MTP module shares the target's embedding and output head
    (DeepSeek-V3 tech report sec. 2.2), so on one of 8 GPUs it adds its one layer's
    parameters / 8 in the weights' format (FP8: 1 byte), while a draft model adds all of its
    parameters (16-bit embeddings); the cache per token is one layer's, 1/61 of the target's."""
    from workbench.workloads.serving_capacity import draft_memory
    from workbench.workloads.inference import kv_bytes_per_sequence
    from workbench.workloads.speculative import MTP_HEAD
    target = load_model("deepseek_v3")
    kw = dict(weights="fp8", kv="bf16", tp=8.0, attention_dp=1.0, prompt=1024.0, generate=1024.0)
    mtp = draft_memory(target, MTP_HEAD, **kw)
    layer = mtp["draft"].n_params - mtp["draft"].embedding_params
    assert 10e9 < layer < 13e9  # one MoE layer: 256 experts x 3 x 7168 x 2048 = 11.3 B
    assert mtp["draft_weights_bytes"] == pytest.approx(layer * 1.0 / 8.0, rel=1e-9)
    per_token = kv_bytes_per_sequence(target, tokens=2048.0, tp=8.0, pp=1.0, kv_bytes=2.0) / 2048.0
    assert mtp["draft_kv_bytes_per_token"] == pytest.approx(per_token / target.n_layers, rel=1e-9)
    small = draft_memory(load_model("llama_3_1_70b"), load_model("llama_3_1_8b"), **kw)
    assert small["draft_weights_bytes"] > small["draft"].n_params * 1.0 / 8.0  # its 16-bit embeddings too


def test_an_ep_that_does_not_divide_the_experts_holds_redundant_copies_in_memory():
    """DeepSeek-R1 (256 experts) decoding on 48 GB200s (DEP48): each GPU holds 6 expert
    slots, 288 / 256 of the experts' bytes over the 48 (workloads/ops.expert_slots), the rest
    as ep = 1 puts it; and the pool is answered, where ep = 48 used to be refused."""
    from workbench.workloads.serving_capacity import weights_per_device_bytes
    from workbench.workloads.inference import part_weight_bytes
    model = load_model("deepseek_r1")
    _, experts = part_weight_bytes(model, 1.0, 1.0)
    plain = weights_per_device_bytes(model, 1.0, tp=1, attention_dp=48)
    slotted = weights_per_device_bytes(model, 1.0, tp=1, attention_dp=48, ep=48)
    assert slotted - plain == pytest.approx(experts * (288 / 256 - 1) / 48, rel=1e-9)
    ds = predict.disaggregated(prefill_hardware="gb200", decode_hardware="gb200", model="deepseek_r1",
                               concurrency=2048, prompt=1024, generate=1024, weights="fp8", framework="sglang",
                               prefill_tp=1, prefill_attention_dp=8, prefill_ep=8, prefill_workers=3,
                               decode_tp=1, decode_attention_dp=48, decode_ep=48, decode_workers=1)
    assert bool(ds.fits) and np.isfinite(float(ds.tpot_s))
    flagged = predict.serving(hardware="h200", model="qwen3_30b_a3b", tp=1, attention_dp=256, ep=256,
                              concurrency=256, prompt=128, generate=16, weights="fp8")
    assert not bool(flagged.fits) and "ep=256 exceeds n_experts=128" in str(flagged.reason.values)
