"""TensorRT-LLM's choice between its two decode-attention kernels.

TensorRT-LLM runs XQA, its grouped-query decode kernel with multi-block (split-KV) mode,
only where it expects XQA to fill the GPU; elsewhere it falls back to its masked
multi-head attention kernel (MMHA), one thread block per (sequence, KV head) that
streams the whole cache alone. DecoderXQAImplJIT::mayHavePerfGain
(cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQAImplJIT/
decoderXQAImplJIT.cpp, v0.13 to v1.x) counts

    blocks = num_kv_heads x batch x max(1, max_past_kv_length // kMinHistoryTokensPerBlock)

and runs XQA when blocks x kEnableMinBlockFactor >= the SM count (the constants in
decoderXQAConstants.h). The measured tables follow the rule to the row: TensorRT-LLM's
H100 table (32 query heads, 1 KV head, head size 128, BF16 cache) takes 37 us at batch 1
and 4,096 cached tokens (32 blocks x 4 < 132 SMs: MMHA) and 21 us at 8,192 (XQA); at
batch 16, 22 us at 256 tokens and 15 us at 512. The fit (calibrate/kernel_fit.py) gives
the fallback its own surface (variant '...@mmha') where that predicts the table's held-out
rows better than one surface does.
"""
from __future__ import annotations

import numpy as np

MIN_HISTORY_TOKENS_PER_BLOCK = 128.0  # kMinHistoryTokensPerBlock (decoderXQAConstants.h)
ENABLE_MIN_BLOCK_FACTOR = 4.0  # kEnableMinBlockFactor (decoderXQAConstants.h)
FALLBACK = "@mmha"  # variant suffix of the fallback kernel's surface
FRAMEWORK = "trtllm"  # the framework whose dispatch this is


def runs_xqa(*, slices, history, n_sms):
    """True where TensorRT-LLM runs XQA for `slices` (sequence, KV head) pairs over
    `history` cached tokens on a GPU of `n_sms` SMs, False where it falls back to MMHA."""
    blocks = slices * np.maximum(1.0, np.floor(history / MIN_HISTORY_TOKENS_PER_BLOCK))
    return blocks * ENABLE_MIN_BLOCK_FACTOR >= n_sms
