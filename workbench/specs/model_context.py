"""Keys, KV cache and attention FLOPs of a model spec as functions of the context (the
ModelSpec mixin that counts what its softmax layers attend and hold: windows capped,
DeepSeek Sparse Attention's top-k, DeepSeek-V4's compressed entries). Arrays in, arrays out."""
from __future__ import annotations

import numpy as np

from ..units import dtype_bytes


class ContextCounts:
    """Mixed into ModelSpec (specs/model.py), whose fields and kinds it reads."""

    def attention_context(self, context):
        """Summed over layers, the number of past tokens each layer attends to at `context`
        (sliding-window layers cap at the window, linear-attention layers keep a state
        instead). Array in, array out."""
        context = np.asarray(getattr(context, "values", context), dtype=float) if not hasattr(context, "dims") else context
        return self.sum_over_kinds(context, lambda sliding: 1.0)

    def keys_held(self, context):
        """Summed over layers, the keys each softmax layer caches at `context` (windows
        capped, DeepSeek-V4's compressed entries all counted); attention_context counts the
        keys attended."""
        return self.sum_over_kinds(context, lambda sliding: 1.0, held=True)

    def sum_over_kinds(self, context, per_key, *, held=False):
        """Sum over the softmax layers of (keys the layer attends at `context`, or holds
        with held=True) x per_key(sliding); a compressed layer's entries (context / ratio,
        CSA's top-k of them attended) count as keys of its window's shape."""
        context = np.asarray(getattr(context, "values", context), dtype=float) if not hasattr(context, "dims") else context
        total = 0.0 * context
        for n, w, sliding in self.softmax_kinds:  # linear layers attend to none
            total = total + n * (np.minimum(context, w) if np.isfinite(w) else context) * per_key(sliding)
        for n, ratio, topk in self.compressed_kinds:
            entries = context / ratio
            total = total + n * (entries if held or not np.isfinite(topk) else np.minimum(entries, topk)) * per_key(True)
        return total

    def index_keys_held(self, context):
        """DeepSeek-V4's cached index keys of one sequence at `context` tokens over its CSA
        layers: one of index_head_dim per compressed entry (elements)."""
        return self.n_csa_layers * self.index_head_dim * context / max(self.csa_ratio, 1)

    def attention_flops_per_token(self, context):
        """Forward attention FLOPs (QK^T and PV) of one new token attending to `context`
        past tokens, over all layers: 2·H·(h + h_v)·context per layer (each kind its shape)."""
        def per_key(sliding):
            H, _, h, hv = self.attention_shape(sliding=sliding)
            return 2.0 * H * (h + hv)
        return self.sum_over_kinds(context, per_key)

    # ---- KV cache --------------------------------------------------------------------
    def kv_elements(self, *, sliding: bool = False) -> int:
        """Cached elements per token in one softmax layer of that kind: K and V per KV head,
        or MLA's latent + rope key (and DeepSeek Sparse Attention's indexer key)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim * self.index_share
        _, K, h, hv = self.attention_shape(sliding=sliding)
        if self.key_is_value:  # DeepSeek-V4: one vector per KV head (its CSA index keys: index_keys_held)
            return K * h
        return K * (h + hv) + self.index_head_dim * self.index_share

    @property
    def kv_elements_per_token_per_layer(self) -> float:
        """Cached elements per token per softmax layer, the mean over its kinds."""
        return sum(n * self.kv_elements(sliding=sl) for n, _, sl in self.softmax_kinds) \
            / max(self.n_full_attention_layers, 1)

    def kv_elements_held(self, context):
        """Cached elements of one sequence at `context` tokens over all softmax layers
        (sliding windows capped, each kind its shape)."""
        return self.sum_over_kinds(context, lambda sliding: self.kv_elements(sliding=sliding), held=True) \
            + self.index_keys_held(context)

    def attended_keys(self, context):
        """Keys one query of a softmax layer reads at `context` past tokens: all of them, or
        DeepSeek Sparse Attention's top-k (in its selected_share of the layers: the mean over
        them; DeepSeek-V4's selection is in attention_context)."""
        if not self.is_dsa:
            return context
        s = self.selected_share
        return s * np.minimum(context, self.index_topk) + (1.0 - s) * context

    @property
    def compressor_state_bytes_per_sequence(self) -> float:
        """DeepSeek-V4's compressor buffers of one sequence: the tokens of a window not yet
        pooled, their key-values and gates in fp32 (ratio x 2 x series x width x 4 bytes: two
        series in CSA, of head_dim and of index_head_dim, one of head_dim in HCA), as
        aiconfigurator-core's sdk/models/deepseek_v4.py sizes them."""
        csa = self.csa_ratio * 2 * 2 * (self.head_dim + self.index_head_dim) * 4.0
        return self.n_csa_layers * csa + self.n_hca_layers * self.hca_ratio * 2 * self.head_dim * 4.0

    @property
    def fixed_state_bytes_per_sequence(self) -> float:
        """State a sequence keeps whatever its length: linear layers' recurrent state and
        DeepSeek-V4's compressor buffers."""
        return self.linear_state_bytes_per_sequence + self.compressor_state_bytes_per_sequence

    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """KV-cache bytes per token summed over the softmax-attention layers (no
        sliding-window cap)."""
        return self.n_full_attention_layers * self.kv_elements_per_token_per_layer * dtype_bytes(dtype, arg="kv")

    def kv_cache_bytes(self, *, context, dtype: str = "bf16"):
        """KV bytes of one sequence holding `context` tokens, sliding windows capped, plus
        the linear-attention layers' fixed state."""
        return self.kv_elements_held(context) * dtype_bytes(dtype, arg="kv") + self.fixed_state_bytes_per_sequence
