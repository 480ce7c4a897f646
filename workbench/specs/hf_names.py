"""A Hugging Face id the catalog does not list, matched to the catalog architecture it names.

Checkpoints of one architecture are published under many ids: the base and its post-training
(`-Instruct`, `-it`, `-Thinking`, `-RL`), an experimental release (`-Exp`), and quantized copies
(`nvidia/...-FP8`, `-NVFP4`, `-AWQ`, `-quantized.w8a8`) and their repackagings (`-FP4-v2`).
These keep a layer's shape: post-training keeps the config's sizes (ASSUMED for the context too;
where it does not, the variant needs an entry of its own: Kimi-K2-Thinking's 262,144 tokens
against Kimi-K2-Instruct's 131,072), quantization changes the weight format, which `weights=`
states. So an id that is not in any catalog entry's `hf_ids` is reduced to a key: the
organisation dropped, the words split on "-", the words that only name such a variant dropped
(VARIANT_WORDS, a word of them joined by "." too; a "v" version right after a format word,
PACK_VERSION), "Meta-Llama" read as "Llama" and "3_3" as "3.3" (Meta's and NVIDIA's spellings).
The id resolves to the catalog model whose listed ids give the same key, and only when exactly
one model does. Everything else that distinguishes models stays in the key (sizes, "VL",
"Coder", "Distill", version numbers such as V3 / V3.1), and so do dated re-releases
(`Qwen3-235B-A22B-Instruct-2507`: 262,144 tokens where Qwen3-235B-A22B has 40,960;
`Kimi-K2-Instruct-0905`) and release versions (`Mistral-7B-Instruct-v0.3`: a new vocabulary and
no window), which may change the config: such an id resolves only where a catalog entry lists it
(or a variant of it), else it is refused, never given its base's numbers.
`DeepSeek-R1-Distill-Qwen-32B` matches neither DeepSeek-R1 nor Qwen 32B (a distilled model whose
base the catalog holds is listed with it: DeepSeek-R1-Distill-Llama-70B).

The checkpoint's own KV-cache format is known only for listed ids (`hf_kv_cache`); a
matched id serves from the framework's default cache (`backends/kernel_tables.framework_kv`).
"""
from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

# Words that name a post-training, a release stage, a packaging or a weight format, never a layer's shape.
POST_TRAINING = frozenset({"instruct", "chat", "it", "base", "hf", "thinking", "reasoning", "terminus", "rl", "sft",
                           "exp"})  # exp: an experimental release (DeepSeek-V3.2-Exp, the layers V3.2 kept)
FORMAT_WORDS = frozenset({
    "fp8", "fp4", "nvfp4", "mxfp4", "bf16", "fp16", "int4", "int8", "awq", "gptq",  # weight formats
    "w4a16", "w8a8", "w8a16", "w4a8", "dynamic", "static", "pertensor", "perchannel", "block",
    "quantized", "fp8dynamic"})
VARIANT_WORDS = POST_TRAINING | FORMAT_WORDS
# -v2 of a quantized pack (nvidia/DeepSeek-R1-0528-FP4-v2): a "v" word right after a format word. After
# the size or a post-training word it is a release's version, kept (Mistral-7B-Instruct-v0.1 / v0.2 /
# v0.3 differ in window and vocabulary); before the size, the model's own (DeepSeek-V3, -V3.1)
PACK_VERSION = re.compile(r"^v\d+(\.\d+)?$")


def _all_in(word: str, words: frozenset) -> bool:
    """Whether the word, or each of its "."-joined parts (RedHatAI's "quantized.w8a8"), is one of `words`."""
    return all(part in words for part in word.split("."))


def key(hf_id: str) -> str:
    """The architecture key of a Hugging Face id (see the module)."""
    name = hf_id.split("/")[-1].lower()
    name = re.sub(r"(?<=\d)_(?=\d)", ".", name)          # Llama-3_3 -> llama-3.3
    name = re.sub(r"^meta-llama-", "llama-", name)       # Meta-Llama-3.1-8B -> llama-3.1-8b
    kept, after_format = [], False
    for w in (w for w in name.split("-") if w):
        if not (_all_in(w, VARIANT_WORDS) or (after_format and PACK_VERSION.match(w))):
            kept.append(w)
        after_format = _all_in(w, FORMAT_WORDS)
    return "-".join(kept)


def keyed(index: dict) -> dict:
    """key -> catalog model name over an {hf_id: model} index, keys that two models share
    left out (they name no one architecture)."""
    out, shared = {}, set()
    for hf_id, model in index.items():
        k = key(hf_id)
        if out.get(k, model) != model:
            shared.add(k)
        out[k] = model
    return {k: m for k, m in out.items() if k not in shared}


def closest(hf_id: str, index: dict, n: int = 3) -> list[str]:
    """The listed ids nearest to `hf_id` by name (for an error message)."""
    return difflib.get_close_matches(hf_id, list(index), n=n, cutoff=0.5)


# The transformers model_type names: what a family's code fills in where its config.json is silent (the
# tie default, a gated MLP whatever the activation, which layers a sliding_window masks), the families and
# keys whose layers the workbench has no kind for; model_configs/transformers_families.json cites the files.
FAMILIES = {k: v["types"] for k, v in json.loads((Path(__file__).parent / "model_configs" /
                                                 "transformers_families.json").read_text()).items() if k[0] != "_"}


def family_defaults(cfg: dict, prov: dict) -> dict:
    """`cfg` with what its family's transformers config class fills in where it is silent, each
    value's provenance written into `prov`: tie_word_embeddings (the class default: Gemma's True,
    Llama's False), and for a family windowed without layer_types (Mistral's window on every layer,
    Gemma 2's on every other, Gemma 3's and Cohere2's on all but every sliding_window_pattern-th)
    its sliding_window and layer_types."""
    kind, out = str(cfg.get("model_type") or ""), dict(cfg)
    if "tie_word_embeddings" not in cfg:
        out["tie_word_embeddings"] = kind in FAMILIES["tied_by_default"]
        prov["tied_embeddings"] = "no tie_word_embeddings: " + (f"{kind}'s transformers default" if kind in
                                                                 FAMILIES["tied_by_default"] else "not a tied family")
    if kind in FAMILIES["window_flagged"]:  # Qwen's sliding_window masks nothing without use_sliding_window
        out.setdefault("use_sliding_window", False)
    every, window, key = FAMILIES["sliding_window"].get(kind, (0, None, None))
    window = cfg["sliding_window"] if "sliding_window" in cfg else window
    if kind in FAMILIES["sliding_window"] and window and not cfg.get("layer_types") and cfg.get("num_hidden_layers"):
        every = int(cfg.get(key) or every) if key else every
        out.update(sliding_window=window, layer_types=["full_attention" if every and (i + 1) % every == 0 else
                                                       "sliding_attention" for i in range(int(cfg["num_hidden_layers"]))])
        prov["n_sliding_layers"] = f"model_type {kind}: " + (f"all but every {every}th layer" if every else "every "
                                                             "layer") + (f" ({key})" if key in cfg else "")
        prov["sliding_window"] = "sliding_window" if "sliding_window" in cfg else f"model_type {kind}'s default"
    return out


# ModelSpec field <- the first config.json key present.
_KEYS = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "n_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size",),
}
_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts")
_TOP_K = ("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "top_k_experts")
# width of the dense-MLP layers: Llama-4 and MiniMax-M3 name it apart from the expert width
_DENSE_FF = ("intermediate_size_mlp", "dense_intermediate_size", "intermediate_size", "n_inner", "ffn_dim")
_SHARED_FF = ("shared_intermediate_size", "share_expert_dim", "shared_expert_intermediate_size")
# config.json keys that hold counts or widths (a transformers config writes them as integers):
# those above and the others hf_config reads as counts
COUNT_KEYS = (*sum(_KEYS.values(), ()), *_EXPERTS, *_TOP_K, *_DENSE_FF, *_SHARED_FF,
              "moe_shared_expert_intermediate_size", "num_key_value_heads", "head_dim", "moe_intermediate_size",
              "n_shared_experts", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "first_k_dense_replace",
              "max_position_embeddings", "sliding_window")


def check_counts(cfg: dict, origin: str) -> None:
    """A count or width of the (text) config that is not a whole number (true, 32.7, "32") is
    refused naming it, as a model YAML's is: int() had read true as 1 layer and 1.5 as 1."""
    from ..errors import InputError
    for part in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        for key in COUNT_KEYS:
            v = part.get(key)
            whole = isinstance(v, int) or (isinstance(v, float) and v.is_integer())
            if v is not None and (isinstance(v, bool) or not whole or v < 0):
                raise InputError(f"spec {origin!r}: {key}={v!r} in config.json has the wrong type or value; "
                                 "allowed: a whole number >= 0")
