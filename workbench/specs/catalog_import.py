"""Catalog entries from a folder of Hugging Face config.json files (aiconfigurator-core's
`model_configs/`, files `<org>--<name>_config.json`): one model YAML per base model, its
quantized and instruction-tuned checkpoints grouped under `hf_ids`; a checkpoint whose base
model is already in the catalog only adds its id there (the entry's numbers stay as they
are, after checking that the config counts the same parameters). Configs of families the
workbench does not model (hf_config.UnsupportedFamily) are reported, not written.

    python -m workbench.specs.catalog_import [MODEL_CONFIGS_DIR] [--out DIR]

A written file says so in its first line and is rewritten by the next run; rerunning on an
unchanged folder changes nothing.
"""
from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from pathlib import Path

import yaml

from ._base import _Loader, build, read_yaml
from .hf_config import UnsupportedFamily, fields_from_hf_config, text_config
from .model import ModelSpec

HEADER = "# Written by workbench.specs.catalog_import from a Hugging Face config.json; rerun it, do not edit.\n"
LICENSE = "Apache-2.0"
# suffixes naming a checkpoint of a base model (weight format, tuning), stripped repeatedly
_SUFFIXES = ("-FP8-Static-PerTensor", "-FP8", "-NVFP4", "-BF16", "-Instruct", "-IT", "-Thinking", "-Base", "-v0.1")
_QUANT = re.compile(r"-(FP8|NVFP4)", re.I)

# Published totals, from the model cards (or the report the card points to): catalog name ->
# (parameters, where stated). Only figures a card states; others get no published_params.
PUBLISHED = {
    "qwen3_0_6b": (0.6e9, "Qwen3-0.6B model card: 0.6B parameters, 0.44B non-embedding"),
    "qwen3_1_7b": (1.7e9, "Qwen3-1.7B model card: 1.7B parameters, 1.4B non-embedding"),
    "qwen3_8b": (8.2e9, "Qwen3-8B model card: 8.2B parameters, 6.95B non-embedding"),
    "qwen3_30b_a3b": (30.5e9, "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated, 29.9B non-embedding"),
    "qwen3_5_397b_a17b": (397e9, "Qwen3.5-397B-A17B model card: 397B in total, 17B activated"),
    "qwen3_5_122b_a10b": (122e9, "Qwen3.5-122B-A10B model card: 122B in total, 10B activated"),
    "qwen3_5_35b_a3b": (35e9, "Qwen3.5-35B-A3B model card: 35B in total, 3B activated"),
    "qwen3_5_27b": (27e9, "Qwen3.5-27B model card: 27B parameters"),
    "qwen3_coder_480b_a35b": (480e9, "Qwen3-Coder-480B-A35B-Instruct model card: 480B total, 35B activated"),
    "llama_4_scout_17b_16e": (109e9, "Llama 4 model card, Llama 4 Scout: 17B activated, 109B total (vision "
                                     "encoder included)"),
    "llama_4_maverick_17b_128e": (400e9, "Llama 4 model card, Llama 4 Maverick: 17B activated, 400B total "
                                         "(vision encoder included)"),
    "kimi_k2": (1.04e12, "Kimi K2 technical report (arXiv 2507.20534): 1.04T total, 32B activated; the "
                         "Kimi-K2-Instruct model card rounds to 1T"),
    "kimi_k2_5": (1.04e12, "Kimi K2 technical report (arXiv 2507.20534), same text model: 1.04T total; the "
                           "Kimi-K2.5 model card: 1T total, 32B activated"),
    "mixtral_8x22b": (141e9, "Mistral AI release post 'Cheaper, Better, Faster, Stronger' (Mixtral 8x22B, "
                             "April 2024): 141B total, 39B active"),
    "nvidia_nemotron_3_nano_30b_a3b": (31.6e9, "Nemotron 3 Nano (NVIDIA, Dec 2025) model card: 31.6B total, 3.2B "
                                               "active (3.6B with embeddings)"),
    "nvidia_nemotron_3_super_120b_a12b": (120e9, "NVIDIA Nemotron 3 Super model card (NVIDIA-Nemotron-3-Super-120B-A12B): "
                                                  "120B total, 12B active; a latent-MoE Mamba-2 hybrid"),
    "nvidia_nemotron_3_ultra_550b_a55b": (550e9, "NVIDIA Nemotron 3 Ultra model card (NVIDIA-Nemotron-3-Ultra-550B-A55B): "
                                                 "550B total, 55B active"),
    "mimo_v2_flash": (309e9, "MiMo-V2-Flash README (github.com/XiaomiMiMo/MiMo-V2-Flash): 309B total, 15B "
                             "active parameters"),
    "deepseek_v4_flash": (284e9, "DeepSeek-V4 technical report and model card (huggingface.co/deepseek-ai/"
                                 "DeepSeek-V4-Flash), as quoted by rishipython.github.io/2026/04/27/deepseek-v4-csa-"
                                 "mhc.html: 284B total, 13B active"),
    "deepseek_v4_pro": (1.6e12, "DeepSeek-V4 technical report and model card (huggingface.co/deepseek-ai/"
                                "DeepSeek-V4-Pro), as quoted by rishipython.github.io/2026/04/27/deepseek-v4-csa-"
                                "mhc.html: 1.6T total, 49B active"),
    "llama_3_3_nemotron_super_49b_v1": (49e9, "Llama-3.3-Nemotron-Super-49B-v1 model card (huggingface.co/nvidia/"
                                              "Llama-3_3-Nemotron-Super-49B-v1): a 49B derivative of Llama-3.3-70B"),
    "gemma_4_26b_a4b": (25.2e9, "Gemma 4 26B A4B, as the model card is quoted (vast.ai/model/gemma-4-26b-a4b-it, "
                                "llmradar.eu): 25.2B total, 3.8B active"),
    "nemotron_h_56b_base_8k": (56e9, "Nemotron-H (NVIDIA, arXiv 2504.03624): Nemotron-H-56B-Base, 56B parameters"),
    "qwen3_next_80b_a3b": (80e9, "Qwen3-Next-80B-A3B-Instruct model card: 80B in total, 3B activated"),
    "kimi_linear_48b_a3b": (48e9, "Kimi Linear technical report (Moonshot AI, arXiv 2510.26692): 48B total, 3B "
                                  "activated"),
    "gpt_oss_20b": (20.91e9, "gpt-oss-120b & gpt-oss-20b model card (OpenAI, arXiv 2508.10925) Table 1: 20.91B "
                             "total, 3.61B active"),
}
# What a reader needs beyond what the config keys say, per catalog name.
EXTRA_NOTES = {
    "minimax_m2_7": "Same layers as minimax_m2_5 (MiniMax-M2.5); sigmoid routing with a bias; three MTP modules "
                    "(num_mtp_modules) not counted, not modelled.",
    "kimi_k2": "DeepSeek-V3 architecture (MLA, 384 routed experts + 1 shared, first layer dense).",
    "kimi_k2_5": "Kimi-K2 text model (DeepSeek-V3 architecture) behind a MoonViT vision encoder.",
    "kimi_k2_6": "Kimi-K2 text model (DeepSeek-V3 architecture) behind a vision encoder.",
    "kimi_k2_7_code": "Kimi-K2 text model (DeepSeek-V3 architecture) behind a vision encoder.",
    "step_3_7_flash": "Sliding-window attention (512 tokens) in three of every four layers; sigmoid routing with "
                      "a bias. The config lists no other per-layer attention shapes, so every layer has the same "
                      "heads.",
    "gpt_oss_20b": "The card's 3.61B active counts the unembedding but not the embedding table, i.e. "
                   "n_matmul_params_active. Attention sinks not counted; MXFP4 experts are a weight format.",
    "mimo_7b": "Qwen2-style dense model (attention biases not counted).",
}


def hf_id(path: Path) -> str:
    """`<org>--<name>_config.json` -> 'org/name'."""
    return path.name[:-len("_config.json")].replace("--", "/", 1)


def catalog_name(hf: str) -> str:
    """'Qwen/Qwen3-30B-A3B-FP8' -> 'qwen3_30b_a3b' (the base model, lowercase, underscores)."""
    model = hf.split("/", 1)[1]
    model = model[len("Meta-"):] if model.startswith("Meta-") else model
    while (hit := next((s for s in _SUFFIXES if model.lower().endswith(s.lower())), None)):
        model = model[:-len(hit)]
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")


def _sci(value: float) -> str:
    """1.04e12 -> '1.04e+12', 30.5e9 -> '30.5e+9' (the catalog's style)."""
    exp = 12 if value >= 1e12 else 9
    mantissa = f"{value / 10 ** exp:.6g}"
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e+{exp}"


def _fold(key: str, text: str) -> str:
    return f"{key}: >-\n" + textwrap.fill(text, 96, initial_indent="  ", subsequent_indent="  ",
                                          break_long_words=False, break_on_hyphens=False) + "\n"


def _comment(field: str, fields: dict, prov: dict) -> str:
    note = prov.get(field, "")
    if field == "d_ff" and fields.get("n_experts") and fields.get("n_dense_layers") == 0:
        note += " (unused: every layer is MoE)"
    if field == "n_kv_heads" and fields.get("kv_lora_rank"):
        note += "; the KV cache is the MLA latent, see kv_lora_rank"
    return note


def _notes(name: str, cfg: dict, spec: ModelSpec) -> str:
    text = text_config(cfg)
    parts = []
    if name in PUBLISHED:
        parts.append(f"published_params: {_sci(PUBLISHED[name][0])} ({PUBLISHED[name][1]}); the layers "
                     f"above count {spec.n_params / 1e9:.2f}e9 ({spec.n_params_active / 1e9:.2f}e9 active).")
    else:
        parts.append(f"No published total known to this catalog (no published_params); the layers above count "
                     f"{spec.n_params / 1e9:.2f}e9 ({spec.n_params_active / 1e9:.2f}e9 active).")
    if text is not cfg:
        parts.append(f"Multimodal checkpoint (model_type {cfg.get('model_type')}): its text model (text_config) "
                     "only; the vision encoder is neither counted nor modelled.")
    if name in EXTRA_NOTES:
        parts.append(EXTRA_NOTES[name])
    step = text.get("interleave_moe_layer_step")
    if spec.is_moe and step and step > 1:
        every = "other" if step == 2 else f"{step}th"
        parts.append(f"MoE in every {every} layer (interleave_moe_layer_step {step}, layers {step - 1}, "
                     f"{2 * step - 1}, ...), a dense MLP of intermediate_size_mlp in the other {spec.n_dense_layers}: "
                     "n_dense_layers counts them, and every cost depends on the count, not the positions.")
    if spec.sliding_window and text.get("attention_chunk_size") and str(text.get("model_type", "")).startswith("llama4"):
        parts.append(f"Chunked local attention (attention_chunk_size {spec.sliding_window}) in the "
                     f"{spec.n_sliding_layers} RoPE layers, every 4th layer global (NoPE; transformers' default "
                     f"no_rope_layer_interval 4): modelled as a {spec.sliding_window}-token sliding window, an "
                     f"upper bound on what a chunk attends (exact up to {spec.sliding_window} tokens of context).")
    if text.get("attn_res_block_size"):
        parts.append(f"Attention residuals (attn_res_block_size {text['attn_res_block_size']}): each layer's input "
                     "mixes the earlier blocks' outputs by attention over depth; its few weights and O(layers / block "
                     "size) x d_model FLOPs per token are not counted.")
    mtp = int(text.get("num_nextn_predict_layers") or 0)
    if mtp and "MTP" not in EXTRA_NOTES.get(name, ""):
        parts.append(f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) not counted, not modelled.")
    parts.append("RMSNorm / QK-norm weights, biases and router biases not counted.")
    return " ".join(parts)


def render(name: str, group: list, version: str) -> str:
    """The YAML text of one catalog entry: `group` is [(hf id, config path)], the first the
    checkpoint whose config.json is cited."""
    primary, path = group[0]
    cfg, prov = json.loads(path.read_text()), {}
    fields = fields_from_hf_config(cfg, origin=path.name, provenance=prov)
    pub = PUBLISHED.get(name)
    spec = build(ModelSpec, {**fields, "name": name, "source": "-", "published_params": pub[0] if pub else 0.0},
                 origin=name)
    source = (f"huggingface.co/{primary} config.json (as shipped in aiconfigurator-core {version} "
              f"model_configs/{path.name}, {LICENSE})" + (f"; {pub[1]}" if pub else ""))
    out = [HEADER, f"name: {name}\n", _fold("source", source)]
    for f in dataclasses.fields(ModelSpec):
        if f.name in fields and (fields[f.name] or f.name in ("n_shared_experts", "n_dense_layers", "tied_embeddings", "gated_mlp")):
            value = str(fields[f.name]).lower() if isinstance(fields[f.name], bool) else str(fields[f.name])
            line = f"{f.name}: {value}"
            out.append(f"{line:<24s} # {_comment(f.name, fields, prov)}\n")
    if pub:
        out.append(f"published_params: {_sci(pub[0])}\n")
    out.append(_fold("notes", _notes(name, cfg, spec)))
    out.append("# Hugging Face checkpoints of this architecture (model=\"org/name\" resolves to this entry;\n"
               "# the FP8 / NVFP4 ones are quantized copies: same layers, other weight format)\n")
    out.append(f"hf_ids: [{', '.join(i for i, _ in group)}]\n")
    out.append(kv_block([(i, p.parent) for i, p in group], version))
    text = "".join(out)
    back = build(ModelSpec, yaml.load(text, Loader=_Loader), origin=name)  # what a load will see
    assert back == dataclasses.replace(spec, source=back.source, notes=back.notes), name
    return text


def _quantization(folder: Path, hf: str):
    """(file name, quantization section) of each of a checkpoint's configs that has one: its
    config.json `quantization_config`, its hf_quant_config.json `quantization` (ModelOpt)."""
    stem = hf.replace("/", "--")
    for name, key in ((f"{stem}_config.json", "quantization_config"), (f"{stem}_hf_quant_config.json", "quantization")):
        config = json.loads((folder / name).read_text()) if (folder / name).exists() else {}
        # a multimodal wrapper (Kimi-K2.5, Kimi-K3) keeps its language model's under text_config
        q = config.get(key, (config.get("text_config") or {}).get(key))
        if isinstance(q, dict):
            yield name, q


def checkpoint_kv(folder: Path, hf: str) -> tuple:
    """(the KV-cache dtype a checkpoint's quantization config asks for, or None; the files
    that say so): its hf_quant_config.json `kv_cache_quant_algo` (ModelOpt), or its
    config.json `quantization_config` (`kv_cache_quant_algo`, or a `kv_cache_scheme` of 8-bit
    floats)."""
    found = []
    for name, q in _quantization(folder, hf):
        scheme = q.get("kv_cache_scheme")
        if isinstance(q.get("kv_cache_quant_algo"), str):
            found.append((q["kv_cache_quant_algo"].lower(), name))
        elif isinstance(scheme, dict) and scheme.get("num_bits") == 8 and scheme.get("type") == "float":
            found.append(("fp8", name))
    return (found[0][0] if found else None), sorted(n for _, n in found)


def _recorded_block(ids: list, read, field: str, intro: str, rule: str) -> str:
    """The model YAML lines recording `field`: {hf id: format} for each checkpoint of `ids`
    ([(hf id, the folder of its configs)]) whose configs `read` (folder, id) -> (format or
    None, files) finds one in, the files cited between `intro` and `rule`; "" where none."""
    found = [(i, *read(folder, i)) for i, folder in ids]
    found = [(i, fmt, files) for i, fmt, files in found if fmt]
    if not found:
        return ""
    files = sorted({f for _, _, fs in found for f in fs})
    return (intro + "".join(f"#   {f}\n" for f in files) + rule
            + f"{field}: {{" + ", ".join(f"{i}: {fmt}" for i, fmt, _ in found) + "}\n")


def kv_block(ids: list, version: str) -> str:
    """The model YAML lines recording each checkpoint's KV-cache format (`ids`: [(hf id,
    the folder of its configs)]), "" where none asks for one."""
    return _recorded_block(
        ids, checkpoint_kv, "hf_kv_cache",
        f"# KV-cache format each quantized checkpoint asks for (aiconfigurator-core {version} model_configs:\n",
        "# kv_cache_quant_algo, or quantization_config.kv_cache_scheme of 8-bit floats); TensorRT-LLM and\n"
        "# vLLM store the cache so when the KV dtype is left unset (specs/serving/frameworks.yaml kv_cache_auto)\n")


def _primary_first(ids: list) -> list:
    """The checkpoint to cite first: the full-precision one of the model's own organization."""
    return sorted(ids, key=lambda p: (bool(_QUANT.search(p[0])), p[0].startswith("nvidia/"), len(p[0]), p[0]))


def import_catalog(folder, out_dir, *, version: str) -> dict:
    """Write / extend the catalog in `out_dir` from the config.json files in `folder`.
    Returns {"written": [names], "extended": {name: [ids]}, "refused": {id: message},
    "mismatch": {id: message}}."""
    folder, out_dir = Path(folder), Path(out_dir)
    existing = {p.stem: read_yaml(p) for p in sorted(out_dir.glob("*.yaml"))  # written here: rewritten
                if not p.read_text(encoding="utf-8").startswith(HEADER)}
    owner = {i: n for n, d in existing.items() for i in d.get("hf_ids") or []}
    groups, refused, mismatch = {}, {}, {}
    for path in sorted(folder.glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        hf = hf_id(path)
        try:
            fields_from_hf_config(json.loads(path.read_text()), origin=path.name)
        except UnsupportedFamily as e:
            refused[hf] = str(e)
            continue
        groups.setdefault(catalog_name(hf), []).append((hf, path))
    report = {"written": [], "extended": {}, "refused": refused, "mismatch": mismatch}
    for name, group in sorted(groups.items()):
        group = _primary_first(group)
        target = next((owner[i] for i, _ in group if i in owner), name if name in existing else None)
        if target is None:
            (out_dir / f"{name}.yaml").write_text(render(name, group, version))
            report["written"].append(name)
            continue
        ref = build(ModelSpec, existing[target], origin=target)
        new = []
        for i, path in group:
            got = build(ModelSpec, {**fields_from_hf_config(json.loads(path.read_text()), origin=path.name),
                                    "name": i.split("/")[1], "source": "-"}, origin=i)
            if (got.n_params, got.kv_bytes_per_token()) != (ref.n_params, ref.kv_bytes_per_token()):
                mismatch[i] = f"counts {got.n_params:.4g} parameters, catalog entry {target} {ref.n_params:.4g}"
            elif i not in owner:
                new.append(i)
        if new:
            _add_ids(out_dir / f"{target}.yaml", new)
            report["extended"][target] = new
    return report


def _add_ids(path: Path, ids: list) -> None:
    """Append `ids` to the file's one-line `hf_ids: [...]` (the rest of the file untouched)."""
    text = path.read_text()
    line = re.search(r"^hf_ids: \[(.*)\]$", text, flags=re.M)
    if line is None:
        text = text.rstrip("\n") + f"\nhf_ids: [{', '.join(ids)}]\n"
    else:
        old = [s.strip() for s in line.group(1).split(",") if s.strip()]
        text = text[:line.start()] + f"hf_ids: [{', '.join(old + ids)}]" + text[line.end():]
    path.write_text(text)


# Configs the aiconfigurator package does not ship, kept in workbench/specs/model_configs/
# (the published fields, with their source in "_source"): catalog name -> extra checkpoint ids.
LOCAL_CONFIGS = Path(__file__).parent / "model_configs"
LOCAL_IDS = {"kimi_linear_48b_a3b": ["moonshotai/Kimi-Linear-48B-A3B-Base"],
             "qwen3_next_80b_a3b": ["Qwen/Qwen3-Next-80B-A3B-Thinking"]}


def render_local(name: str) -> str:
    """The catalog entry of a local config (LOCAL_CONFIGS): render()'s, citing the config's
    own `_source` and the published total instead of the package."""
    path = next(p for p in sorted(LOCAL_CONFIGS.glob("*_config.json")) if catalog_name(hf_id(p)) == name)
    primary, cfg = hf_id(path), json.loads(path.read_text())
    text = render(name, [(primary, path)], "-")
    start, end = text.index("source: >-"), text.index("n_layers:")
    pub = f"; {PUBLISHED[name][1]}" if name in PUBLISHED else ""
    text = text[:start] + _fold("source", f"{cfg['_source']}{pub}; as read: workbench/specs/model_configs/{path.name}") \
        + text[end:]
    return text.replace(HEADER, "# Written by workbench.specs.catalog_import from workbench/specs/model_configs/; rerun it, do "
                                "not edit.\n").replace(f"hf_ids: [{primary}]", f"hf_ids: [{', '.join([primary] + LOCAL_IDS[name])}]")


def package_configs() -> tuple:
    """(model_configs folder, version) of the installed aiconfigurator-core."""
    import importlib.metadata
    import importlib.util
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("aiconfigurator-core is not installed (pip install aiconfigurator-core)")
    return (Path(list(spec.submodule_search_locations)[0]) / "model_configs",
            importlib.metadata.version("aiconfigurator-core"))


def main(argv=None) -> int:
    import argparse
    from . import MODELS_DIR
    ap = argparse.ArgumentParser(prog="python -m workbench.specs.catalog_import", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", help="model_configs folder (default: the installed aiconfigurator-core's)")
    ap.add_argument("--out", default=str(MODELS_DIR), help="catalog folder to write (default: the catalog)")
    ns = ap.parse_args(argv)
    folder, version = package_configs()
    report = import_catalog(ns.folder or folder, ns.out, version=version)
    for name in LOCAL_IDS:
        (Path(ns.out) / f"{name}.yaml").write_text(render_local(name))
        report["written"].append(name)
    for key in ("written", "extended", "mismatch", "refused"):
        items = report[key].items() if isinstance(report[key], dict) else ((n, "") for n in report[key])
        for k, v in items:
            print(f"{key:9s} {k}  {v if isinstance(v, str) else ', '.join(v)}")
    return 1 if report["mismatch"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
