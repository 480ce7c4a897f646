"""Llama-3.3-Nemotron-Super-49B's NAS-pruned blocks (specs/hf_config._nas_blocks): attention-
free layers and per-layer MLP widths, against its config.json and the published size; the
blocks the importer cannot represent are refused with the key named."""
from __future__ import annotations

import pytest

from workbench.specs import load_model
from workbench.specs.hf_config import UnsupportedFamily, _nas_width, fields_from_hf_config
from workbench.workloads import ops

NAS = load_model("llama_3_3_nemotron_super_49b_v1")


def test_widths_follow_the_decilm_rule():
    # modeling_decilm.py: int(2 ffn_mult D / 3) rounded up to a multiple of 256; ffn_mult 5.25 at
    # D = 8192 is Llama-3.3-70B's 28672, 1.0 gives 5632 (5461 rounded up)
    assert (_nas_width(5.25, 8192), _nas_width(1.0, 8192), _nas_width(0.5, 8192)) == (28672, 5632, 2816)


def test_blocks_from_the_config():
    # config.json block_configs: 80 blocks, 49 with GQA attention (n_heads_in_group 8 -> 8 KV heads),
    # 31 attention no-ops; MLP widths summing to 1,642,496 over the 80 blocks (mean 20531.2)
    assert (NAS.n_layers, NAS.n_kv_heads, NAS.n_mixer_free_layers, NAS.n_full_attention_layers) == (80, 8, 31, 49)
    assert NAS.d_ff == round(1642496 / 80)
    # 49 x (q, o: D x 64 x 128; k, v: D x 8 x 128) + 3 D x the widths + untied embeddings: 49.866e9; the
    # mean's rounding (0.2 x 80 x 3 x 8192) is 0.0008% of it
    exact = 49 * (2 * 8192 * 8192 + 2 * 8192 * 1024) + 3 * 8192 * 1642496 + 2 * 128256 * 8192
    assert NAS.n_params == pytest.approx(exact, rel=1e-5)
    assert NAS.n_params / 49e9 == pytest.approx(1.0, abs=0.03)  # model card: 49B


def test_only_attention_layers_cache_keys():
    assert NAS.kv_elements_held(1000.0) == 49 * 1000 * 8 * 256
    table = {mm.name: mm for mm in ops.attention_matmuls(NAS)}
    assert table["qkv"].share == pytest.approx(49 / 80)


def test_unrepresentable_blocks_are_refused():
    block = {"attention": {"n_heads_in_group": 8, "no_op": False}, "ffn": {"ffn_mult": 1.0, "no_op": False}}
    cfg = {"model_type": "nemotron-nas", "hidden_size": 1024, "num_attention_heads": 8, "vocab_size": 100,
           "block_configs": [block, {**block, "attention": {"replace_with_linear": True, "no_op": False}}]}
    with pytest.raises(UnsupportedFamily, match="block_configs"):
        fields_from_hf_config(cfg, origin="nas.json")
    two_groups = {**cfg, "block_configs": [block, {**block, "attention": {"n_heads_in_group": 4, "no_op": False}}]}
    with pytest.raises(UnsupportedFamily, match="KV-head count"):
        fields_from_hf_config(two_groups, origin="nas.json")
    fields = fields_from_hf_config({**cfg, "block_configs": [block, block]}, origin="nas.json")
    assert (fields["n_layers"], fields["n_kv_heads"], fields["d_ff"]) == (2, 1, 768)  # 682.7 -> 768
