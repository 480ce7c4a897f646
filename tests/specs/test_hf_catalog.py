"""The catalog against the Hugging Face config.json files aiconfigurator-core ships
(`model_configs/`): every config either imports (and its id resolves to a catalog entry
with the same layers) or is refused with the one-line unsupported-family error; the
generator (workbench.specs.catalog_import) reproduces the committed entries; the new
families (multimodal wrappers, Llama-4's interleaved MoE, Kimi-K2) count their published
totals and serve."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from workbench import predict
from workbench.specs import MODELS_DIR, hf_index, list_models, load_model
from workbench.specs.catalog_import import HEADER, catalog_name, hf_id, import_catalog
from workbench.specs.hf_config import UnsupportedFamily, fields_from_hf_config

try:
    from workbench.specs.catalog_import import package_configs
    CONFIGS, VERSION = package_configs()
except ModuleNotFoundError:
    CONFIGS, VERSION = None, None
needs_package = pytest.mark.skipif(CONFIGS is None, reason="aiconfigurator-core is not installed")
FILES = sorted(p for p in CONFIGS.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json")) \
    if CONFIGS else []


@needs_package
@pytest.mark.parametrize("path", FILES, ids=lambda p: hf_id(p))
def test_every_config_resolves_or_is_refused_by_name(path):
    cfg = json.loads(path.read_text())
    try:
        fields = fields_from_hf_config(cfg, origin=path.name)
    except UnsupportedFamily as e:
        msg = str(e)
        assert "\n" not in msg and "model_type" in msg and "'Emerging model families' issue" in msg
        assert hf_id(path) not in hf_index()
        return
    entry = load_model(hf_id(path))  # the id resolves through hf_index()
    assert entry.name == hf_index()[hf_id(path)]
    got = load_model({**fields, "name": "imported"})
    assert (got.n_params, got.n_params_active) == (entry.n_params, entry.n_params_active)
    assert got.kv_bytes_per_token("bf16") == entry.kv_bytes_per_token("bf16")
    assert (got.sliding_window, got.n_sliding_layers) == (entry.sliding_window, entry.n_sliding_layers)


@needs_package
def test_the_families_refused_are_the_unmodelled_ones():
    refused = {}
    for path in FILES:
        try:
            fields_from_hf_config(json.loads(path.read_text()), origin=path.name)
        except UnsupportedFamily as e:
            refused[hf_id(path)] = str(e)
    assert not refused, refused  # every family the package ships is modelled now
    imported = {hf_id(p) for p in FILES} - set(refused)
    # Llama-Nemotron NAS: attention-free blocks and per-layer MLP widths (n_mixer_free_layers, d_ff's mean)
    assert "nvidia/Llama-3_3-Nemotron-Super-49B-v1" in imported
    # Gated DeltaNet hybrids are modelled (workloads/layers, primitives/attention.linear_attention)
    assert {"Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-397B-A17B", "nvidia/Qwen3.6-35B-A3B-NVFP4"} <= imported
    # Mamba-2 hybrids (Nemotron-H, both pattern spellings) are modelled (linear_kind "mamba2")
    assert {"nvidia/Nemotron-H-56B-Base-8K", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
            "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"} <= imported
    # Softmax layers of two shapes are modelled (ModelSpec.sliding_* and values_from_keys)
    assert {"google/gemma-4-26B-A4B", "nvidia/Gemma-4-31B-IT-NVFP4", "XiaomiMiMo/MiMo-V2-Flash"} <= imported
    # MiniMax-M3: block-sparse attention as DSA fields, its dense layers attending every key
    assert {"MiniMaxAI/MiniMax-M3", "nvidia/MiniMax-M3-NVFP4"} <= imported
    # DeepSeek-V4: windows plus CSA / HCA compressed entries, shared-KV MQA, grouped output, mHC
    assert {"deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "nvidia/DeepSeek-V4-Pro-NVFP4",
            "sgl-project/DeepSeek-V4-Flash-FP8"} <= imported
    # Kimi-K3: KDA with a full-rank output gate, gated MLA, latent experts (routed_expert_hidden_size)
    assert "moonshotai/Kimi-K3" in imported
    # Latent MoE is modelled (ModelSpec.moe_latent_dim), Ultra's block list without num_hidden_layers too
    assert {"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"} <= imported
    # DeepSeek Sparse Attention is modelled (ModelSpec.index_topk; layers._indexer, attended_keys)
    assert {"deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5", "nvidia/GLM-5.1-NVFP4",
            "nvidia/GLM-5.2-NVFP4"} <= imported  # the last names its layers 'deepseek_sparse_attention' in layer_types
    assert {"Qwen/Qwen3-30B-A3B", "meta-llama/Llama-4-Maverick-17B-128E-Instruct", "moonshotai/Kimi-K2-Instruct",
            "mistralai/Mixtral-8x22B-v0.1", "XiaomiMiMo/MiMo-7B-Base", "MiniMaxAI/MiniMax-M2.7"} <= imported


@needs_package
def test_the_generator_reproduces_the_catalog(tmp_path):
    """Rerun on a copy of the catalog: the files it owns come out byte for byte, the
    hand-written entries gain no ids, and no config disagrees with its entry."""
    out = tmp_path / "models"
    shutil.copytree(MODELS_DIR, out)
    report = import_catalog(CONFIGS, out, version=VERSION)
    assert not report["extended"] and not report["mismatch"]
    for name in report["written"]:
        assert (out / f"{name}.yaml").read_text() == (MODELS_DIR / f"{name}.yaml").read_text(), name
    owned = {p.stem for p in MODELS_DIR.glob("*.yaml") if p.read_text().startswith(HEADER)}
    assert owned == set(report["written"])


@pytest.mark.parametrize("hf, name", [("Qwen/Qwen3-30B-A3B-FP8", "qwen3_30b_a3b"),
                                      ("meta-llama/Meta-Llama-3.1-70B", "llama_3_1_70b"),
                                      ("nvidia/Llama-3.1-70B-Instruct-FP8", "llama_3_1_70b"),
                                      ("Qwen/Qwen3-VL-32B-Thinking", "qwen3_vl_32b"),
                                      ("mistralai/Mixtral-8x22B-v0.1", "mixtral_8x22b"),
                                      ("nvidia/Kimi-K2.7-Code-NVFP4", "kimi_k2_7_code")])
def test_catalog_names_of_checkpoints(hf, name):
    assert catalog_name(hf) == name and hf_index()[hf] == name


@pytest.mark.parametrize("name, published, rel", [
    ("qwen3_30b_a3b", 30.5e9, 0.01), ("qwen3_8b", 8.2e9, 0.01), ("qwen3_coder_480b_a35b", 480e9, 0.01),
    ("llama_4_scout_17b_16e", 109e9, 0.03),  # the card's total includes the vision encoder
    ("llama_4_maverick_17b_128e", 400e9, 0.01), ("kimi_k2", 1.04e12, 0.03), ("mixtral_8x22b", 141e9, 0.01),
    ("gpt_oss_20b", 20.91e9, 0.01),
    ("nvidia_nemotron_3_nano_30b_a3b", 31.6e9, 0.01),  # Nemotron 3 Nano card: 31.6B total
    ("nemotron_h_56b_base_8k", 56e9, 0.01),  # Nemotron-H (arXiv 2504.03624): 56B
    ("kimi_linear_48b_a3b", 48e9, 0.03),  # Kimi Linear report: 48B total (rounded)
    ("qwen3_next_80b_a3b", 80e9, 0.01)])  # Qwen3-Next-80B-A3B card: 80B total
def test_published_totals_of_the_imported_models(name, published, rel):
    m = load_model(name)
    assert m.published_params == published and m.n_params == pytest.approx(published, rel=rel)


def test_every_imported_total_within_3pct():
    for name in list_models():
        m = load_model(name)
        if "aiconfigurator-core" in m.source and m.published_params:
            assert m.n_params == pytest.approx(m.published_params, rel=0.03), name


def test_llama4_maverick_interleaves_moe_and_dense_layers():
    """48 layers, MoE in every other one (interleave_moe_layer_step 2): 24 dense MLPs of
    16384, 24 MoE layers of 128 routed + 1 shared expert of 8192; 17B active per the card."""
    m = load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (m.n_moe_layers, m.n_dense_mlp_layers, m.d_ff, m.d_ff_expert) == (24, 24, 16384, 8192)
    D = 5120
    layer_attn = D * 40 * 128 * 2 + 2 * D * 8 * 128
    expected = 48 * layer_attn + 24 * 3 * D * 16384 + 24 * (129 * 3 * D * 8192 + D * 128) + 2 * 202048 * D
    assert m.n_params == expected
    assert m.n_params_active == pytest.approx(17e9, rel=0.02)
    scout = load_model("llama_4_scout_17b_16e")  # every layer MoE
    assert (scout.n_moe_layers, scout.n_shared_experts) == (48, 1)
    # chunked attention (8192-token chunks) in 3 of 4 layers: bounded by a sliding window
    assert (m.sliding_window, m.n_sliding_layers) == (8192, 36)
    np.testing.assert_array_equal(m.attention_context(np.array([4096, 100_000])),
                                  [48 * 4096, 12 * 100_000 + 36 * 8192])


def test_qwen3_moe_sparse_step_and_mlp_only_layers():
    base = {"num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 256, "moe_intermediate_size": 32, "num_experts": 8,
            "num_experts_per_tok": 2, "vocab_size": 100, "model_type": "qwen3_moe"}
    f = fields_from_hf_config({**base, "decoder_sparse_step": 2, "mlp_only_layers": [3]}, origin="t")
    assert f["n_dense_layers"] == 8 - 3  # layers 1, 5, 7 are MoE (3 is mlp-only)
    assert fields_from_hf_config({**base, "decoder_sparse_step": 1, "mlp_only_layers": []},
                                 origin="t")["n_dense_layers"] == 0


def test_a_nested_text_config_imports(tmp_path):
    """A multimodal wrapper (Qwen3-VL style) imports as its text model; the wrapper's
    tie_word_embeddings applies when the text config does not set it."""
    text = {"model_type": "qwen3_vl_text", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
            "hidden_act": "silu", "max_position_embeddings": 262144}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
                                "tie_word_embeddings": False, "text_config": text, "vision_config": {"depth": 27}}))
    m = load_model(str(path))
    assert m.n_params == load_model("qwen3_8b").n_params and not m.tied_embeddings
    path.write_text(json.dumps({"text_config": {**text, "linear_num_key_heads": 16}}))
    with pytest.raises(UnsupportedFamily, match="Emerging model families"):
        load_model(str(path))


def test_kimi_k2_is_deepseek_v3_architecture():
    m = load_model("moonshotai/Kimi-K2-Instruct")
    assert m.is_mla and (m.n_experts, m.n_shared_experts, m.n_dense_layers, m.n_heads) == (384, 1, 1, 64)
    assert m.kv_bytes_per_token("bf16") == load_model("deepseek_v3").kv_bytes_per_token("bf16")
    assert load_model("nvidia/Kimi-K2.5-NVFP4").n_params == m.n_params


def test_serving_qwen3_30b_a3b_by_id():
    ds = predict.serving(hardware="h200_sxm", model="Qwen/Qwen3-30B-A3B", tp=1, concurrency=8, prompt=1024,
                         generate=256, weights="fp8", framework="vllm")
    assert str(ds.model.values) == "qwen3_30b_a3b" and bool(ds.fits)
    assert np.isfinite(float(ds.ttft_s)) and np.isfinite(float(ds.tpot_s)) and float(ds.tpot_s) > 0


@pytest.mark.parametrize("model", ["meta-llama/Llama-4-Maverick-17B-128E-Instruct", "moonshotai/Kimi-K2-Instruct"])
def test_serving_llama4_and_kimi_on_b200_fits_or_says_why(model):
    ds = predict.serving(hardware="b200", model=model, tp=8, concurrency=16, prompt=1024, generate=256,
                         weights="fp8")
    if bool(ds.fits):
        assert np.isfinite(float(ds.ttft_s)) and np.isfinite(float(ds.tpot_s))
    else:
        assert str(ds.reason.values).strip()


def test_nemotron_h_blocks_count_as_mixer_layers_with_some_mlp_free():
    """Nemotron 3 Nano's 52 blocks (23 Mamba-2, 6 attention, 23 MoE): 29 mixer layers, 23 of
    them with an MoE MLP; Mamba-2 as a linear kind with the state of its config
    (64 heads x 64 dims x 128 state, fp32)."""
    m = load_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert (m.n_layers, m.n_linear_layers, m.n_full_attention_layers, m.n_moe_layers, m.n_mlp_free_layers) == \
        (29, 23, 6, 23, 6)
    assert m.linear_kind == "mamba2" and not m.gated_mlp  # squared-ReLU experts, no gate
    assert m.linear_state_bytes_per_sequence == 23 * (64 * 128 * 64 * 4.0 + (2 * 8 * 128 + 64 * 64) * 3 * 2.0)
    # active: 6 routed + 2 shared-expert widths of 2 x 2688 x 1856 (non-gated) per MoE layer
    dense56 = load_model("nemotron_h_56b_base_8k")
    assert (dense56.n_layers, dense56.n_dense_mlp_layers, dense56.n_mlp_free_layers) == (64, 54, 10)


def test_kimi_linear_config_imports_kda_layers_and_the_catalog_entry_agrees():
    """Kimi Linear's published config (workbench/specs/model_configs/) imports as 20 KDA
    layers of 32 heads x 128 between 7 MLA layers, with its 1M-token window."""
    from workbench.specs.catalog_import import LOCAL_CONFIGS
    path = LOCAL_CONFIGS / "moonshotai--Kimi-Linear-48B-A3B-Instruct_config.json"
    fields = fields_from_hf_config(json.loads(path.read_text()), origin=path.name)
    assert fields["linear_kind"] == "kda" and fields["n_linear_layers"] == 20 and fields["max_seq_len"] == 2 ** 20
    entry = load_model("moonshotai/Kimi-Linear-48B-A3B-Instruct")
    got = load_model({**fields, "name": "imported"})
    assert (got.n_params, got.n_params_active, got.kv_bytes_per_token("bf16")) == \
        (entry.n_params, entry.n_params_active, entry.kv_bytes_per_token("bf16"))


@pytest.mark.parametrize("name", ["kimi_linear_48b_a3b", "qwen3_next_80b_a3b"])
def test_local_configs_reproduce_their_catalog_entries(name):
    """The entries of configs the package does not ship are their configs' import, byte for byte."""
    from workbench.specs.catalog_import import render_local
    assert render_local(name) == (MODELS_DIR / f"{name}.yaml").read_text()


@pytest.mark.parametrize("cfg, key", [
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "M*-X"}, "hybrid_override_pattern"),
    ({"model_type": "nemotron_h", "layers_block_type": ["mamba", "cross"]}, "layers_block_type"),
    ({"model_type": "other", "linear_attn_config": {"kda_layers": [1]}}, "linear_attn_config"),
    ({"model_type": "other", "mamba_num_heads": 8}, "mamba_num_heads")])
def test_unknown_block_kinds_are_refused_by_name(cfg, key):
    with pytest.raises(UnsupportedFamily, match=key):
        fields_from_hf_config({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "vocab_size": 10, **cfg}, origin="t")
