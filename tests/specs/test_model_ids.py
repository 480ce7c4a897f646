"""Models by their Hugging Face id: a catalog entry records the ids of the checkpoints with
its architecture (hf_ids); model="org/name" resolves to it, a file path still reads the file."""
from __future__ import annotations

import json

import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import SpecError, hf_index, load_model


@pytest.mark.parametrize("hf_id,name", [("deepseek-ai/DeepSeek-R1", "deepseek_r1"), ("openai/gpt-oss-120b", "gpt_oss_120b"),
                                        ("MiniMaxAI/MiniMax-M2.5", "minimax_m2_5"), ("nvidia/Qwen3-32B-NVFP4", "qwen3_32b")])
def test_an_id_resolves_to_its_catalog_entry(hf_id, name):
    assert load_model(hf_id).name == name and hf_index()[hf_id] == name


def test_every_id_is_listed_once():
    from workbench.specs import list_models
    ids = [i for m in list_models() for i in load_model(m).hf_ids]
    assert len(ids) == len(set(ids))


def test_minimax_m2_5_matches_its_config_and_card():
    """The catalog entry counts 228.7e9 parameters from its config.json (MiniMax-M2 card: 230e9)."""
    m = load_model("minimax_m2_5")
    assert m.n_params == pytest.approx(230e9, rel=0.01) and m.is_moe and m.n_experts == 256


def test_a_path_is_still_a_file(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                               "vocab_size": 100, "intermediate_size": 128}))
    assert load_model(str(cfg)).n_layers == 2
    with pytest.raises(InputError, match="not a readable file"):
        load_model(str(tmp_path / "missing.json"))
    with pytest.raises(InputError, match="neither a file nor the id of a catalog architecture"):
        load_model("someorg/not-a-model")


def test_serving_by_id():
    ds = predict.serving(hardware="h200_sxm", model="MiniMaxAI/MiniMax-M2.5", tp=4, ep=4, concurrency=32,
                         prompt=1024, generate=256, weights="fp8_block")
    assert bool(ds.fits) and str(ds.model.values) == "minimax_m2_5"


def test_bad_ids_are_refused():
    with pytest.raises(SpecError, match="hf_ids"):
        load_model({"name": "x", "source": "t", "n_layers": 2, "d_model": 64, "n_heads": 4, "n_kv_heads": 4,
                    "head_dim": 16, "d_ff": 128, "vocab_size": 100, "hf_ids": ["no-slash"]})
