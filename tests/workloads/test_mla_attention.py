"""Multi-head latent attention as serving kernels run it (workloads/layers.py):
- decode absorbed (DeepSeek-V2, arXiv 2405.04434, sec. 2.1.2: W_UK into the query, W_UV into
  the output): every head scores the 512 + 64 latent-plus-rope of each cached token and sums
  512-wide latents, 2 x 1,088 FLOPs per head and key, the cache read once for all heads;
- a speculative verify step's k + 1 positions fold into the heads (FlashMLA and the
  frameworks' MLA generation kernels take several query tokens per sequence): FLOPs grow
  (k + 1)x, the latent read does not; a GQA kernel's extra queries ride on its KV read;
- the framework's measured MLA decode tables time the kernel wherever they exist;
- SGLang and vLLM prefill MLA over keys and values up-projected in 16 bits whatever the cache
  stores (specs/serving/frameworks.yaml mla_prefill_16bit_kv); TensorRT-LLM's context MLA
  reads its FP8 cache format (its own FP8 kernel, which its tables time)."""
import dataclasses

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.primitives.attention import mla_decode
from workbench.specs import load_model
from workbench.workloads.layers import decode_attention, prefill_attention

V3, LLAMA = load_model("deepseek_v3"), load_model("llama_3_1_70b")
H100 = numbers("h100_sxm")  # no kernel tables: the analytical kernels


def test_mla_decode_counts_the_absorbed_flops_and_reads_the_latent_once():
    kw = dict(batch=8.0, context=4096.0, tp=1.0, math="bf16", kv_bytes=2.0)
    r = decode_attention(H100, V3, **kw)
    assert float(r["flops"]) == pytest.approx(2 * 8 * 128 * (512 + 64 + 512) * 4096, rel=1e-12)
    assert float(r["bytes"]) == pytest.approx(8 * 4096 * (512 + 64) * 2, rel=1e-12)


@pytest.mark.parametrize("k", [1.0, 3.0])
def test_verify_positions_fold_into_mla_heads_not_into_gqa_reads(k):
    kw = dict(batch=16.0, context=2048.0, tp=1.0, math="bf16", kv_bytes=2.0)
    one, fold = decode_attention(H100, V3, **kw), decode_attention(H100, V3, queries=1.0 + k, **kw)
    assert float(fold["flops"]) == pytest.approx((1.0 + k) * float(one["flops"]), rel=1e-12)
    assert float(fold["bytes"]) == pytest.approx(float(one["bytes"]), rel=1e-12)
    assert float(fold["time_s"]) > float(one["time_s"])  # 128 heads on a GPU: compute-bound
    gqa = dict(kw, tp=8.0)
    assert float(decode_attention(H100, LLAMA, queries=1.0 + k, **gqa)["time_s"]) == \
        pytest.approx(float(decode_attention(H100, LLAMA, **gqa)["time_s"]), rel=1e-12)


def test_mla_decode_reads_the_framework_tables_wherever_it_has_them():
    """GB200 under TensorRT-LLM, 234 sequences at 8.7k keys, all 128 heads on the GPU: the
    layer's decode attention is the measured MLA surface's time (436 us in BF16, 244 us over
    an FP8 cache when this was written), whatever moe_mla_kernels says; without tables
    (framework none) the analytical kernel."""
    hw = numbers("gb200", framework="trtllm")
    kw = dict(batch=234.0, context=8700.0, tp=1.0)
    for math, kv in (("bf16", 2.0), ("fp8", 1.0)):  # attention math is 16-bit (parts.attention_math)
        table = mla_decode(hw=hw, batch=234.0, context=8700.0, n_heads=128.0, latent=512, rope=64, dtype="bf16",
                           kv_bytes=kv)
        assert table is not None
        for measured in (False, True):
            layer = decode_attention(dataclasses.replace(hw, measured_moe_mla=measured), V3, math=math, kv_bytes=kv,
                                     **kw)
            assert float(layer["time_s"]) == pytest.approx(float(table["time_s"]), rel=1e-12)
    assert mla_decode(hw=numbers("gb200"), batch=234.0, context=8700.0, n_heads=128.0, latent=512, rope=64,
                      kv_bytes=1.0) is None


@pytest.mark.parametrize("framework,same", [("sglang", True), ("vllm", True), ("trtllm", False)])
def test_mla_prefill_reads_16_bit_keys_where_the_framework_up_projects_them(framework, same):
    hw = numbers("b200", framework=framework)
    kw = dict(batch=1.0, prompt=8192.0, tp=8.0, math="bf16", a_bytes=2.0)
    fp8, bf16 = (float(prefill_attention(hw, V3, kv_bytes=b, **kw)["time_s"]) for b in (1.0, 2.0))
    assert (fp8 == pytest.approx(bf16, rel=1e-12)) is same
    gqa = [float(prefill_attention(hw, LLAMA, kv_bytes=b, **kw)["time_s"]) for b in (1.0, 2.0)]
    assert np.isfinite(gqa).all()  # a GQA model keeps its cache's format (its tables' bf16/fp8 surface)
    assert gqa[0] != pytest.approx(gqa[1], rel=1e-6)  # so an FP8 cache times differently there
