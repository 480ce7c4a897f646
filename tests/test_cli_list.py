"""`workbench list models NAME` (workbench/cli_list.py): a model's layers by kind and, beside
the KV cache a token adds, the state a sequence keeps whatever its length."""
from __future__ import annotations

import pytest

from workbench.cli import main
from workbench.specs import load_model


@pytest.mark.parametrize("name, kinds", [
    ("qwen3_next_80b_a3b", "12 full softmax attention, 36 Gated DeltaNet (linear"),
    ("nemotron_h_56b_base_8k", "10 full softmax attention, 54 Mamba-2 (linear"),
    ("kimi_linear_48b_a3b", "7 full MLA, 20 Kimi Delta Attention (linear"),
    ("gpt_oss_120b", "18 full softmax attention, 18 sliding-window softmax attention (128 tokens)"),
    ("llama_3_3_nemotron_super_49b_v1", "49 full softmax attention, 31 without a token mixer")])
def test_a_hybrid_shows_its_layer_kinds_and_fixed_state(capsys, name, kinds):
    """A linear hybrid printed only "KV cache X kB a token": its recurrent state (77 MB a
    sequence for Qwen3-Next, 913 MB for Nemotron-H-56B) and which layers hold a cache were missing."""
    assert main(["list", "models", name]) == 0
    out, spec = capsys.readouterr().out, load_model(name)
    assert f"layers: {kinds}" in out
    assert f"the {spec.n_full_attention_layers} softmax-attention layers" in out
    if spec.n_linear_layers:
        assert f"+ {spec.fixed_state_bytes_per_sequence / 1e6:.2f} MB a sequence whatever its length" in out
    else:
        assert "a sequence whatever its length" not in out


def test_a_dense_model_has_one_kind_and_no_fixed_state(capsys):
    assert main(["list", "models", "llama_3_1_8b"]) == 0
    out = capsys.readouterr().out
    assert "layers: 32 full softmax attention\n" in out and "MB a sequence" not in out
