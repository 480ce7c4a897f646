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


# ---- families the import does not model: refused by name, never read as plain transformers ------------------
_ATTN = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "vocab_size": 65536}
# the keys of transformers' configuration_<type>.py for each family (configuration_jamba.py: attn_layer_period /
# attn_layer_offset / expert_layer_period / mamba_d_state; configuration_zamba2.py: layers_block_type, n_mamba_heads;
# configuration_falcon_h1.py: mamba_n_heads, mamba_d_state; configuration_granitemoehybrid.py: layer_types
# ["mamba", "attention"], mamba_n_heads; configuration_mamba.py / _mamba2.py: state_size, expand)
HYBRIDS = {
    "jamba": ({**_ATTN, "model_type": "jamba", "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2,
               "expert_layer_offset": 1, "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16,
               "mamba_expand": 2}, "Mamba"),
    "zamba2": ({**_ATTN, "model_type": "zamba2", "layers_block_type": ["mamba"] * 5 + ["hybrid"],
                "mamba_d_state": 64, "n_mamba_heads": 112}, "Mamba-2"),
    "falcon_h1": ({**_ATTN, "model_type": "falcon_h1", "mamba_n_heads": 24, "mamba_d_state": 256}, "Mamba-2"),
    "minimax_text_01": ({**_ATTN, "model_type": "minimax_text_01", "attn_type_list": [0] * 7 + [1],
                         "num_local_experts": 32, "num_experts_per_tok": 2}, "lightning"),
    "mamba": ({"model_type": "mamba", "hidden_size": 2560, "num_hidden_layers": 64, "state_size": 16, "expand": 2,
               "vocab_size": 50280}, "Mamba"),
    "mamba2": ({"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64, "num_heads": 128,
                "head_dim": 64, "state_size": 128, "vocab_size": 32768}, "Mamba-2"),
    "rwkv7": ({"model_type": "rwkv7", "hidden_size": 2048, "num_hidden_layers": 24, "head_dim": 64,
               "vocab_size": 65536}, "RWKV"),
    "granite_h": ({**_ATTN, "model_type": "granitemoehybrid", "layer_types": ["mamba", "mamba", "attention", "mamba"],
                   "mamba_n_heads": 48, "mamba_d_state": 128}, "Mamba"),
}


@pytest.mark.parametrize("name", HYBRIDS)
def test_hybrid_and_recurrent_families_are_refused_naming_their_kind(name):
    """Jamba-Mini imported as 32 attention + MoE layers (92B parameters where the card says 52B),
    Zamba2 / Falcon-H1 / MiniMax-Text-01 likewise; Mamba and RWKV failed on a missing head count."""
    from workbench.specs.hf_config import UnsupportedFamily, fields_from_hf_config
    cfg, kind = HYBRIDS[name]
    with pytest.raises(UnsupportedFamily, match=kind) as e:
        fields_from_hf_config(cfg, origin="config.json")
    assert "\n" not in str(e.value) and "not approximated" in str(e.value)


@pytest.mark.parametrize("keys, named", [
    ({"mamba_d_state": 16}, "mamba_d_state"), ({"mamba_expand": 2}, "mamba_expand"),
    ({"mamba_n_heads": 24}, "mamba_n_heads"), ({"attn_layer_period": 8}, "attn_layer_period"),
    ({"attn_type_list": [0, 0, 0, 1]}, "attn_type_list"), ({"layers_block_type": ["mamba", "hybrid"]}, "layers_block_type"),
    ({"expert_layer_period": 2}, "expert_layer_period"), ({"full_attention_interval": 4}, "full_attention_interval"),
    ({"sliding_window": 4096}, "sliding_window")])
def test_an_unknown_family_with_hybrid_keys_is_refused_by_the_key(keys, named):
    """A model_type the import does not know is refused by the keys that place unmodelled layers
    (or a window no rule places), not imported as attention everywhere."""
    from workbench.specs.hf_config import UnsupportedFamily, fields_from_hf_config
    with pytest.raises(UnsupportedFamily, match=named):
        fields_from_hf_config({**_ATTN, "model_type": "somehybrid", **keys}, origin="t")


def test_the_kind_not_modelled_is_named_before_attention():
    """Granite-4.0-H's layer_types ["mamba", "attention"]: the message names mamba (it named
    attention, the first alphabetically); MiniMax-M2's attn_type_list of 1s (softmax) imports."""
    from workbench.specs.hf_config import UnsupportedFamily, fields_from_hf_config
    with pytest.raises(UnsupportedFamily, match="layer_types='mamba'"):
        fields_from_hf_config({**_ATTN, "model_type": "other", "layer_types": ["attention", "mamba"] * 16}, origin="t")
    assert fields_from_hf_config({**_ATTN, "model_type": "minimax_m2", "attn_type_list": [1] * 32}, origin="t")


# ---- what a family's config leaves unsaid: windows, tying, GeGLU (transformers' code) -----------------------
# huggingface.co/mistralai/Mistral-7B-v0.1 config.json (no layer_types: modeling_mistral.py masks every layer)
MISTRAL_V01 = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
               "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rope_theta": 10000.0,
               "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 32000}
# huggingface.co/google/gemma-7b config.json: hidden_act "gelu" (GemmaMLP's gated GeGLU), no tie_word_embeddings
GEMMA_7B = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "head_dim": 256, "hidden_act": "gelu",
            "hidden_size": 3072, "intermediate_size": 24576, "max_position_embeddings": 8192, "num_attention_heads": 16,
            "num_hidden_layers": 28, "num_key_value_heads": 16, "vocab_size": 256000}
# huggingface.co/google/gemma-2-9b config.json (sliding_window 4096 on every other layer, configuration_gemma2.py)
GEMMA_2_9B = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 256,
              "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
              "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 42,
              "num_key_value_heads": 8, "query_pre_attn_scalar": 256, "sliding_window": 4096, "vocab_size": 256000}
# huggingface.co/google/gemma-3-1b-it config.json (sliding_window_pattern 6: one global layer in six)
GEMMA_3_1B = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 256,
              "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
              "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26,
              "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "sliding_window": 512,
              "sliding_window_pattern": 6, "vocab_size": 262144}
# Cohere2 (c4ai-command-r7b-12-2024) as configuration_cohere2.py reads it: sliding_window 4096, sliding_window_pattern 4
COHERE2 = {"model_type": "cohere2", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "sliding_window": 4096, "sliding_window_pattern": 4,
           "vocab_size": 256000}


def _load(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return load_model(str(path))


@pytest.mark.parametrize("cfg, sliding, window", [
    (MISTRAL_V01, 32, 4096), (GEMMA_2_9B, 21, 4096), (GEMMA_3_1B, 22, 512), (COHERE2, 24, 4096),
    ({**MISTRAL_V01, "sliding_window": None}, 0, 0),    # Mistral-7B-Instruct-v0.2's config: no window
    ({**GEMMA_3_1B, "sliding_window_pattern": 2}, 13, 512)])
def test_a_family_windows_the_layers_its_transformers_code_does(tmp_path, cfg, sliding, window):
    """Without layer_types the window was dropped (every layer global): Mistral's masks every
    layer, Gemma 2's every other, Gemma 3's and Cohere2's all but every sliding_window_pattern-th."""
    m = _load(tmp_path, cfg)
    assert (m.n_sliding_layers, m.sliding_window) == (sliding, window)


def test_mistral_v0_1_config_equals_the_catalog_entry(tmp_path):
    """The catalog's mistral_7b (32 layers of 4,096-token windows, from the paper) is what the
    config now imports: the same cache at 32k tokens (0.54 GB, where every-layer-global gave 4.3 GB)."""
    got, ref = _load(tmp_path, MISTRAL_V01), load_model("mistral_7b")
    assert got.n_params == ref.n_params and got.kv_cache_bytes(context=32768) == ref.kv_cache_bytes(context=32768)
    assert ref.kv_cache_bytes(context=32768) == pytest.approx(0.537e9, rel=1e-3)


@pytest.mark.parametrize("cfg, published", [(GEMMA_7B, 8.54e9), (GEMMA_2_9B, 9.24e9), (GEMMA_3_1B, 1.00e9)])
def test_gemma_ties_its_embeddings_and_gates_its_mlp(tmp_path, cfg, published):
    """Gemma's configs leave tie_word_embeddings to GemmaConfig's default (True), and Gemma 1's
    hidden_act "gelu" is GemmaMLP's gated GeGLU (3 matrices): 7.21B / 10.16B / 1.30B before,
    against the model cards' 8.54B / 9.24B / 1.00B."""
    m = _load(tmp_path, cfg)
    assert m.tied_embeddings and m.gated_mlp
    assert m.n_params == pytest.approx(published, rel=0.005)


def test_the_tie_default_is_the_family_s():
    """A config without tie_word_embeddings: tied where the family's transformers class says so
    (Gemma, Cohere), untied elsewhere (Llama, Llama-4, a model_type transformers does not know)."""
    from workbench.specs.hf_config import fields_from_hf_config
    base = {k: v for k, v in LLAMA_3_1_8B.items() if k != "tie_word_embeddings"}
    for model_type, tied in (("gemma", True), ("cohere", True), ("llama", False), ("llama4_text", False),
                             ("deepseek_ref", False)):
        prov = {}
        assert fields_from_hf_config({**base, "model_type": model_type}, origin="t",
                                     provenance=prov)["tied_embeddings"] is tied
        assert "no tie_word_embeddings" in prov["tied_embeddings"]


@pytest.mark.parametrize("key,value", [("num_hidden_layers", True), ("vocab_size", 1.5), ("hidden_size", "4096"),
                                       ("num_key_value_heads", -8), ("intermediate_size_mlp", 128.7)])
def test_a_count_that_is_not_a_whole_number_is_refused(key, value):
    """A config.json count or width that is not a whole number is refused naming it, as a model
    YAML's is (int() had read true as one layer, 1.5 as a vocabulary of one); 32.0 is 32."""
    from workbench.specs.hf_config import fields_from_hf_config
    base = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    with pytest.raises(InputError, match=f"{key}={value!r} in config.json has the wrong type or value; allowed: a whole number"):
        fields_from_hf_config({**base, key: value}, origin="cfg.json")
    assert fields_from_hf_config({**base, "num_hidden_layers": 32.0}, origin="cfg.json")["n_layers"] == 32


def test_a_config_file_not_named_config_json_is_named_by_its_file(tmp_path):
    """Two Hugging Face configs saved side by side under their own names are two models named
    after their files (both had taken their folder's name, so a comparison of the two was
    refused as naming one model twice); a file called config.json takes its folder's name."""
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8,
           "num_key_value_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}
    for name in ("small_config.json", "other_config.json"):
        (tmp_path / name).write_text(json.dumps(cfg))
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path / "small_config.json")).name == "small_config"
    assert load_model(str(tmp_path / "other_config.json")).name == "other_config"
    assert load_model(str(tmp_path / "mymodel" / "config.json")).name == "mymodel"
