"""Hugging Face config.json import (specs/hf_config.py): the published configs of three
families, written out here from their model cards' config.json, give the same parameter
counts as the catalog specs (which tests/specs/test_models.py checks against the published
totals), and a config.json path works wherever a model name does."""
from __future__ import annotations

import json

import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_model

# huggingface.co/meta-llama/Llama-3.1-8B config.json (the keys the import reads)
LLAMA_3_1_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
                "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                "max_position_embeddings": 131072, "tie_word_embeddings": False, "hidden_act": "silu",
                "_name_or_path": "meta-llama/Llama-3.1-8B"}
# huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
           "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 32768,
           "sliding_window": None, "hidden_act": "silu", "tie_word_embeddings": False}
# huggingface.co/deepseek-ai/DeepSeek-V3 config.json
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "intermediate_size": 18432,
               "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
               "num_experts_per_tok": 8, "first_k_dense_replace": 3, "num_hidden_layers": 61,
               "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
               "max_position_embeddings": 163840, "hidden_act": "silu", "tie_word_embeddings": False}


@pytest.mark.parametrize("config, catalog", [(LLAMA_3_1_8B, "llama_3_1_8b"), (MIXTRAL, "mixtral_8x7b"),
                                             (DEEPSEEK_V3, "deepseek_v3")])
def test_config_json_equals_the_catalog_spec(tmp_path, config, catalog):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    got, ref = load_model(str(path)), load_model(catalog)
    assert got.n_params == ref.n_params and got.n_params_active == ref.n_params_active
    assert got.kv_bytes_per_token("bf16") == ref.kv_bytes_per_token("bf16")


def test_a_config_json_path_goes_through_predict(tmp_path):
    path = tmp_path / "Llama-3.1-8B" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA_3_1_8B))
    kw = dict(hardware="h100_sxm", batch=8, prompt=1024, generate=64)
    from_file = predict.inference(model=str(path), **kw)
    assert str(from_file.model.values) == "Llama-3.1-8B"
    assert float(from_file.tpot_s) == pytest.approx(float(predict.inference(model="llama_3_1_8b", **kw).tpot_s),
                                                    rel=1e-12)


def test_a_config_without_a_needed_key_names_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in LLAMA_3_1_8B.items() if k != "intermediate_size"}))
    with pytest.raises(InputError, match="intermediate_size"):
        load_model(str(path))
    with pytest.raises(InputError, match="not a readable file"):
        load_model(str(tmp_path / "missing.json"))
