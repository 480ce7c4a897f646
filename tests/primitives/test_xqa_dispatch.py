"""TensorRT-LLM's decode-kernel dispatch (primitives/xqa_dispatch.py): XQA where
slices x max(1, history // 128) x 4 >= SMs, else MMHA (DecoderXQAImplJIT::mayHavePerfGain,
constants of decoderXQAConstants.h), and the fitted H100 surfaces reproducing the measured
jump at the boundary."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.primitives.attention import attention_decode
from workbench.primitives.xqa_dispatch import runs_xqa

H100_SMS = 132  # H100 SXM5 (NVIDIA H100 Tensor Core GPU datasheet / whitepaper: 132 SMs)


@pytest.mark.parametrize("slices, history, expected", [
    # batch 1, one KV head: 4,095 cached tokens are 31 blocks (124 < 132), 8,191 are 63
    (1, 4095, False), (1, 8191, True),
    # batch 16: 255 tokens are one block each (64 < 132), 511 are three (192)
    (16, 255, False), (16, 511, True),
    # 33 slices fill 132 SMs at one block each, whatever the history (even none)
    (32, 0, False), (33, 0, True), (33, 100_000, True)])
def test_the_rule_at_its_boundary(slices, history, expected):
    assert bool(runs_xqa(slices=slices, history=history, n_sms=H100_SMS)) is expected


def test_more_slices_or_more_history_never_leave_xqa():
    s, h = np.meshgrid(np.arange(1.0, 65.0), np.arange(0.0, 20_000.0, 37.0), indexing="ij")
    x = runs_xqa(slices=s, history=h, n_sms=H100_SMS)
    assert (np.diff(x.astype(int), axis=0) >= 0).all() and (np.diff(x.astype(int), axis=1) >= 0).all()


def test_h100_tensorrt_llm_decode_reproduces_the_measured_jump():
    """TensorRT-LLM's H100 decode table (aiconfigurator-core 0.12.0, systems/data/h100_sxm/
    attention/trtllm/1.3.0rc20/generation_attention_perf.parquet), 32 query heads, one KV
    head of 128, BF16 cache: at batch 1, 37.1 us over 4,096 keys (MMHA) and 20.5 us over
    8,192 (XQA); batch 2, 34.4 and 16.4 us over 2,048 and 4,096; batch 4, 29.8 and 15.8 us
    over 1,024 and 2,048. The fitted surfaces give each within 15%, the longer cache of each
    pair the faster, as measured."""
    hw = numbers("h100_sxm", framework="trtllm")
    batch = np.array([1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
    keys = np.array([4096.0, 8192.0, 2048.0, 4096.0, 1024.0, 2048.0])
    t = attention_decode(hw=hw, batch=batch, context=keys, n_heads=32.0, head_dim=128.0, n_kv_heads=1.0,
                         kv_bytes=2.0)["time_s"]
    np.testing.assert_allclose(t, [37.1e-6, 20.5e-6, 34.4e-6, 16.4e-6, 29.8e-6, 15.8e-6], rtol=0.15)
    assert (t[0::2] > t[1::2]).all()
