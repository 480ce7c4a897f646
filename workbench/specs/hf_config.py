"""Import a Hugging Face `config.json` as ModelSpec fields: the transformers key names of
the Llama, Mistral / Mixtral, Qwen2 / Qwen3 (dense and MoE), DeepSeek-V2/V3 (MLA) and
gpt-oss families mapped to the spec's. Unknown architectures still import when they use
the common keys; a key the spec needs and the file lacks is an error naming it.
"""
from __future__ import annotations

from ._base import SpecError

# ModelSpec field <- the first config.json key present.
_KEYS = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "n_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size",),
}
_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts")


def _first(cfg: dict, keys, origin: str, field: str, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    if default is not None:
        return default
    raise SpecError(origin, field, None, f"one of the config.json keys {list(keys)}")


def fields_from_hf_config(cfg: dict, *, origin: str) -> dict:
    """ModelSpec fields from a parsed config.json (`origin` names it in errors)."""
    out = {k: int(_first(cfg, keys, origin, k)) for k, keys in _KEYS.items()}
    out["n_kv_heads"] = int(_first(cfg, ("num_key_value_heads",), origin, "n_kv_heads", out["n_heads"]))
    if cfg.get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3): query/key head = nope + rope parts
        rope = int(cfg["qk_rope_head_dim"])
        out.update(head_dim=int(cfg["qk_nope_head_dim"]) + rope, qk_rope_head_dim=rope,
                   kv_lora_rank=int(cfg["kv_lora_rank"]), q_lora_rank=int(cfg.get("q_lora_rank") or 0),
                   v_head_dim=int(cfg.get("v_head_dim") or 0))
    else:
        out["head_dim"] = int(cfg.get("head_dim") or out["d_model"] // out["n_heads"])
    n_experts = int(_first(cfg, _EXPERTS, origin, "n_experts", 0))
    out["d_ff"] = int(_first(cfg, ("intermediate_size", "n_inner", "ffn_dim"), origin, "d_ff"))
    if n_experts:
        out.update(n_experts=n_experts, n_active_experts=int(_first(cfg, ("num_experts_per_tok",), origin,
                                                                     "n_active_experts")),
                   d_ff_expert=int(cfg.get("moe_intermediate_size") or out["d_ff"]),
                   n_shared_experts=int(cfg.get("n_shared_experts") or 0),
                   n_dense_layers=int(cfg.get("first_k_dense_replace") or 0))
    tied = cfg.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):  # "false" (a string) must not read as true
        raise SpecError(origin, "tie_word_embeddings", tied, "true or false (a JSON boolean)")
    out["tied_embeddings"] = tied
    if cfg.get("max_position_embeddings"):
        out["max_seq_len"] = int(cfg["max_position_embeddings"])
    types = cfg.get("layer_types") or []
    if cfg.get("sliding_window") and "sliding_attention" in types:  # gpt-oss, Gemma-style alternation
        out.update(sliding_window=int(cfg["sliding_window"]), n_sliding_layers=types.count("sliding_attention"))
    out["gated_mlp"] = str(cfg.get("hidden_act", cfg.get("activation_function", "silu"))) in (
        "silu", "swiglu", "gelu_pytorch_tanh", "geglu") or n_experts > 0
    return out


def is_hf_config(data: dict) -> bool:
    return any(k in data for k in ("hidden_size", "num_hidden_layers", "architectures", "model_type"))
