"""An unlisted Hugging Face id resolves to the catalog architecture it names (specs/hf_names.py):
chat, dated and quantized variants of a listed checkpoint keep its layers; anything else that
tells models apart stays in the key, and a key two architectures share resolves to neither."""
from __future__ import annotations

import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import hf_index, hf_names, list_models, load_model


@pytest.mark.parametrize("hf_id,name", [
    ("nvidia/Llama-3.3-70B-Instruct-FP8", "llama_3_3_70b"),           # NVIDIA's quantized copy
    ("nvidia/Llama-3.1-405B-Instruct-FP8", "llama_3_1_405b"),
    ("nvidia/Llama-3.1-8B-Instruct-FP4", "llama_3_1_8b"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "llama_3_1_8b"),  # Meta's spelling, another org
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama_3_8b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama_2_7b"),
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek_r1"),                  # a listed dated release's pack version
    ("nvidia/DeepSeek-V3-0324-NVFP4", "deepseek_v3"),
    ("deepseek-ai/DeepSeek-V3.1", "deepseek_v3"),                       # as nvidia/DeepSeek-V3.1-NVFP4
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3_235b_a22b_2507"),  # the dated release's own entry
    ("Qwen/Qwen3-32B-AWQ", "qwen3_32b"),
    ("Qwen/Qwen2-72B-Instruct", "qwen2_72b"),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v3_2"),                 # an experimental release of V3.2's layers
    ("XiaomiMiMo/MiMo-7B-RL", "mimo_7b"),                               # RL post-training
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama_3_1_8b"),  # format words joined by "."
    ("TheBloke/Mistral-7B-Instruct-v0.2-AWQ", "mistral_7b_v0_2"),       # a release version stays in the key
])
def test_a_variant_resolves_to_its_architecture(hf_id, name):
    assert hf_id not in hf_index()
    m = load_model(hf_id)
    assert m.name == name and m.checkpoint == hf_id
    assert m == load_model(name)  # the same layers (checkpoint is not compared)


@pytest.mark.parametrize("hf_id", [
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",   # a Qwen2.5-32B: the key keeps "distill-qwen-32b"
    "Qwen/Qwen3-Coder-30B-A3B-Instruct",           # "coder" stays: not listed under that key
    "MiniMaxAI/MiniMax-M2",                        # M2 is not M2.5: versions stay
    "someorg/not-a-model",
])
def test_other_models_are_refused_with_the_nearest_ids(hf_id):
    with pytest.raises(InputError, match="neither a file nor the id of a catalog architecture") as e:
        load_model(hf_id)
    assert "\n" not in str(e.value) and hf_id in str(e.value)


def test_model_versions_are_not_variant_words():
    """A "v" word is the model's version before the size (DeepSeek-V3 vs -V3.2), a release's after
    the size or a post-training word (Mistral-7B-Instruct-v0.3: another vocabulary and no window),
    and only a repackaging's right after a format word (-FP4-v2); dates stay (a re-release)."""
    assert hf_names.key("deepseek-ai/DeepSeek-V3") == "deepseek-v3"
    assert hf_names.key("deepseek-ai/DeepSeek-V3.2") == "deepseek-v3.2"
    assert hf_names.key("mistralai/Mixtral-8x7B-Instruct-v0.1") == "mixtral-8x7b-v0.1"
    assert hf_names.key("nvidia/Llama-3_3-Nemotron-Super-49B-v1") == "llama-3.3-nemotron-super-49b-v1"
    assert hf_names.key("nvidia/Llama-3.1-70B-Instruct-FP8-dynamic-v2") == "llama-3.1-70b"
    assert hf_names.key("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8") == "qwen3-235b-a22b-2507"


@pytest.mark.parametrize("hf_id, name, max_seq_len, vocab", [
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3_235b_a22b_2507", 262144, 151936),  # model card: 262,144 natively
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3_30b_a3b_2507", 262144, 151936),
    ("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", "qwen3_30b_a3b_2507", 262144, 151936),
    ("moonshotai/Kimi-K2-Instruct-0905", "kimi_k2_0905", 262144, 163840),  # model card: 128k -> 256k tokens
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek_r1", 163840, 129280),       # same config as R1
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral_7b_v0_2", 32768, 32000),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral_7b_v0_3", 32768, 32768)])
def test_dated_and_versioned_releases_get_their_own_config(hf_id, name, max_seq_len, vocab):
    """A re-release whose config differs from its base's (Qwen3 2507: 262,144 tokens against
    40,960; Kimi-K2 0905: 262,144 against 131,072; Mistral v0.2 / v0.3: no window, v0.3 a larger
    vocabulary) resolves to an entry of its own; its layers otherwise are the base's."""
    m = load_model(hf_id)
    assert (m.name, m.max_seq_len, m.vocab_size) == (name, max_seq_len, vocab)
    base = {"qwen3_235b_a22b_2507": "qwen3_235b_a22b", "qwen3_30b_a3b_2507": "qwen3_30b_a3b", "kimi_k2_0905": "kimi_k2",
            "mistral_7b_v0_2": "mistral_7b", "mistral_7b_v0_3": "mistral_7b"}.get(name, name)
    b = load_model(base)
    assert (m.n_layers, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.n_experts) == \
        (b.n_layers, b.d_model, b.n_heads, b.n_kv_heads, b.head_dim, b.n_experts)
    if name.startswith("mistral_7b_v0"):
        assert m.n_sliding_layers == 0 and b.n_sliding_layers == 32


def test_a_dated_release_takes_its_own_context():
    """Qwen3-235B-A22B-Instruct-2507 at a 131,072-token prompt fits on 8 H200 (its 262,144-token
    context), where the April release's 40,960 refuses it."""
    kw = dict(hardware="h200_sxm", devices=8, tp=8, batch=1, prompt=131072, generate=256, weights="fp8")
    assert bool(predict.inference(model="Qwen/Qwen3-235B-A22B-Instruct-2507", **kw).fits)
    april = predict.inference(model="Qwen/Qwen3-235B-A22B", **kw)
    assert not bool(april.fits) and "max_seq_len=40960" in str(april.reason.values)


@pytest.mark.parametrize("hf_id", ["deepseek-ai/DeepSeek-V3-1226", "Qwen/Qwen3-8B-2504", "mistralai/Mistral-7B-v0.4",
                                   "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5"])
def test_an_unlisted_dated_or_versioned_release_is_refused(hf_id):
    """Its config may differ from the base's (the context, the vocabulary, the window): refused
    with the nearest listed ids, never given the base's numbers."""
    with pytest.raises(InputError, match="neither a file nor the id of a catalog architecture") as e:
        load_model(hf_id)
    assert "\n" not in str(e.value) and "nearest:" in str(e.value)


def test_every_listed_id_keys_back_to_its_own_entry():
    """No two catalog architectures share a key except where left out, and every listed id's
    key resolves to the entry that lists it (or to none where shared)."""
    index = hf_index()
    keyed = hf_names.keyed(index)
    for hf_id, model in index.items():
        assert keyed.get(hf_names.key(hf_id), model) == model, hf_id
    assert len(set(keyed.values())) == len({m for m in list_models() if load_model(m).hf_ids})


def test_a_shared_key_resolves_to_neither():
    index = {"a/Foo-7B": "foo_a", "b/Foo-7B-Instruct": "foo_b", "a/Bar-7B": "bar"}
    shared = hf_names.keyed(index)
    assert shared.get(hf_names.key("c/Foo-7B-FP8")) is None and shared.get(hf_names.key("c/Bar-7B-AWQ")) == "bar"


def test_a_matched_checkpoint_serves_from_the_default_cache():
    """The checkpoint's own KV format is unknown for an unlisted id: the framework's default
    (16-bit under TensorRT-LLM), where the listed ModelOpt id asks for FP8."""
    kw = dict(hardware="h100_sxm", tp=4, concurrency=16, prompt=2048, generate=256, weights="fp8", framework="trtllm")
    listed = predict.serving(model="nvidia/Llama-3.1-70B-Instruct-FP8", **kw)
    variant = predict.serving(model="nvidia/Llama-3.1-70B-Instruct-FP8-v2", **kw)
    assert str(listed.kv.values) == "fp8" and str(variant.kv.values) == "bf16"
    assert bool(variant.fits) and float(variant.tpot_s) > float(listed.tpot_s)
