"""A Hugging Face id the catalog does not list, matched to the catalog architecture it names.

Checkpoints of one architecture are published under many ids: the base and its chat or
reasoning post-training (`-Instruct`, `-it`, `-Thinking`), dated re-releases
(`DeepSeek-R1-0528`, `Qwen3-235B-A22B-Instruct-2507`), and quantized copies (`nvidia/...-FP8`,
`-NVFP4`, `-AWQ`). None of these changes a layer's shape: post-training and re-releases keep
the config's sizes, quantization changes the weight format, which `weights=` states. So an id
that is not in any catalog entry's `hf_ids` is reduced to a key: the organisation dropped, the
words split on "-", the words that only name such a variant dropped (VARIANT_WORDS, dates
DATE_WORD, a "v" version after the size PACK_VERSION), "Meta-Llama" read as "Llama" and
"3_3" as "3.3" (Meta's and NVIDIA's spellings). The id resolves to the catalog model whose
listed ids give the same key, and only when exactly one model does. Everything else that
distinguishes models stays in the key (sizes, "VL", "Coder", "Distill", version numbers such as
V3 / V3.1), so `DeepSeek-R1-Distill-Qwen-32B` matches neither DeepSeek-R1 nor Qwen 32B (a
distilled model whose base the catalog holds is listed with it: DeepSeek-R1-Distill-Llama-70B).

The checkpoint's own KV-cache format is known only for listed ids (`hf_kv_cache`); a
matched id serves from the framework's default cache (`backends/kernel_tables.framework_kv`).
"""
from __future__ import annotations

import difflib
import re

# Words that name a post-training, a packaging or a weight format, never a layer's shape.
VARIANT_WORDS = frozenset({
    "instruct", "chat", "it", "base", "hf", "thinking", "reasoning", "terminus",  # post-training
    "fp8", "fp4", "nvfp4", "mxfp4", "bf16", "fp16", "int4", "int8", "awq", "gptq",  # weight formats
    "w4a16", "w8a8", "w8a16", "w4a8", "dynamic", "static", "pertensor", "perchannel", "block",
    "quantized", "fp8dynamic"})
DATE_WORD = re.compile(r"^\d{4}$")           # 0528, 0324, 2507, 0905: a dated re-release
# -v2 of a quantized pack, -v0.1 of a release, -v1.5 of a post-training: a "v" word after the
# size or a variant word (before them it is the model's own version: DeepSeek-V3, -V3.1)
PACK_VERSION = re.compile(r"^v\d+(\.\d+)?$")
SIZE_WORD = re.compile(r"^(\d+x)?\d+(\.\d+)?[bm]$")  # 8b, 0.6b, 8x7b, 235b


def key(hf_id: str) -> str:
    """The architecture key of a Hugging Face id (see the module)."""
    name = hf_id.split("/")[-1].lower()
    name = re.sub(r"(?<=\d)_(?=\d)", ".", name)          # Llama-3_3 -> llama-3.3
    name = re.sub(r"^meta-llama-", "llama-", name)       # Meta-Llama-3.1-8B -> llama-3.1-8b
    kept, after_size = [], False
    for w in (w for w in name.split("-") if w):
        variant = w in VARIANT_WORDS or DATE_WORD.match(w)
        if not (variant or (after_size and PACK_VERSION.match(w))):
            kept.append(w)
        after_size = after_size or bool(variant or SIZE_WORD.match(w))
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
