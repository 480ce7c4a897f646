"""MiniMax-M3's block-sparse attention, imported as DeepSeek Sparse Attention's fields
(specs/hf_config._block_sparse): the config's numbers, the keys a query attends (57 of 60
layers pick their top blocks, the first three attend every key) and the cache with the
indexer's keys, against closed forms from its config.json."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.specs import load_model

M3 = load_model("minimax_m3")


def test_fields_from_the_config():
    # config.json sparse_attention_config: 16 top blocks + 1 local + 0 initial of 128 keys, an
    # indexer of 4 heads x 128, sparse in 57 layers (sparse_attention_freq), GQA 64 q / 4 kv heads of 128
    assert (M3.index_topk, M3.index_n_heads, M3.index_head_dim, M3.index_layers) == ((16 + 1) * 128, 4, 128, 57)
    assert M3.dense_unindexed_layers and M3.is_dsa and not M3.is_mla
    assert (M3.n_heads, M3.n_kv_heads, M3.head_dim, M3.n_layers) == (64, 4, 128, 60)
    assert load_model("nvidia/MiniMax-M3-NVFP4") is not None  # the NVFP4 checkpoint resolves to it


def test_attended_keys_mix_sparse_and_dense_layers():
    c = np.array([1000.0, 2176.0, 65536.0])
    s = 57 / 60
    assert np.allclose(M3.attended_keys(c), s * np.minimum(c, 2176) + (1 - s) * c)
    # a GLM-5.2-style shared top-k (dense_unindexed_layers false) selects in every layer
    assert np.allclose(load_model("glm_5_2").attended_keys(c), np.minimum(c, 2048))


def test_cache_holds_the_index_keys_of_the_sparse_layers():
    # per token and layer: K (h + h) = 4 x 256 elements, plus 128 index-key elements in 57 of 60 layers
    c = np.array([4096.0])
    assert float(M3.kv_elements_held(c)[0]) == pytest.approx(c[0] * (60 * 4 * 256 + 57 * 128))


def test_indexer_weights_only_in_the_sparse_layers():
    # the indexer's queries from the hidden state (no query latent), its key and head weights
    D = 6144
    per_layer = D * 4 * 128 + D * 128 + D * 4
    plain = D * 64 * 128 + 2 * D * 4 * 128 + 64 * 128 * D  # q, k, v, o
    assert M3.softmax_attn_params == pytest.approx(60 * plain + 57 * per_layer)
