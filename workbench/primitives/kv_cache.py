"""KV-cache sizes and traffic: bytes held per device and bytes read per decode step.

Pure array functions of the cache geometry; the model spec supplies
`kv_elements_per_token_per_layer` (K·(h + h_v) for MHA/GQA/MQA, the latent plus rope key
for MLA) and the attended context per layer (sliding windows capped).
"""
from __future__ import annotations

import numpy as np


def kv_share_per_device(*, n_kv_heads, tp, is_mla: bool):
    """Fraction of a layer's KV cache one TP rank holds: KV heads split across ranks,
    replicated once tp exceeds them; MLA's latent is replicated on every rank."""
    if is_mla:
        return 1.0 + 0.0 * tp
    return np.maximum(n_kv_heads / tp, 1.0) / n_kv_heads


def kv_cache_bytes(*, batch, tokens_attended, kv_elements_per_token_per_layer, kv_bytes, share=1.0, pp=1.0):
    """Bytes of KV cache per device: `tokens_attended` is the sum over layers of cached
    tokens per sequence (model.attention_context); pipeline stages split the layers."""
    return batch * tokens_attended * kv_elements_per_token_per_layer * kv_bytes * share / pp


def paged_waste_bytes(*, batch, context, block_tokens, bytes_per_token):
    """Bytes allocated but unused by paged attention: each sequence's last block is
    partly empty (vLLM's block_size = 16 tokens by default)."""
    used = context * bytes_per_token
    allocated = np.ceil(context / block_tokens) * block_tokens * bytes_per_token
    return batch * (allocated - used)
