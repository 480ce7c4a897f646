"""The weight formats a Hugging Face checkpoint stores, read from its own quantization config.

A model named by its Hugging Face id is served as that checkpoint ships: `weights=None` (the
default of predict.inference, predict.serving and predict.disaggregated) takes the routed
experts' format (every matmul's, for a dense model) and `attention_weights` the format of the
other matmuls (attention projections, dense MLPs, shared experts) where it differs, from
`checkpoint_formats.csv`. A checkpoint it does not list is what a format word of its id names
(NAMED_FORMATS: `nvidia/Llama-3.1-8B-Instruct-FP8` fp8, `nvidia/Qwen3-32B-NVFP4` fp4, an -AWQ or
-GPTQ copy int4; every matmul in it: its config is not at hand to say which parts it keeps), or,
without such a word, what the listed checkpoint it revises stores (recorded_base:
`deepseek-ai/DeepSeek-R1-0528` as `deepseek-ai/DeepSeek-R1`); anything else (a full-precision
id, a catalog name, a file) bf16. The file is written by

    python -m workbench.specs.checkpoint_formats   # from the installed aiconfigurator-core

from the package's `model_configs/` (`<org>--<name>_config.json` and, for NVIDIA's ModelOpt
checkpoints, `<org>--<name>_hf_quant_config.json`), by these rules (each row names its own):

- `quantization_config.quant_method` "fp8" with a `weight_block_size`: every linear layer in
  block-scaled FP8 (DeepSeek-V3/R1, Qwen3-*-FP8, GLM-5-FP8, MiniMax-M2.5: 128 x 128 blocks), the
  router and lm_head aside; without one, per-tensor "fp8".
- `quant_method` "mxfp4" (gpt-oss): the experts in MXFP4 ("fp4"), the modules it does not
  convert (`modules_to_not_convert`: self_attn, router) in 16 bits.
- `quant_method` "compressed-tensors" (llm-compressor; Kimi-K2.5 and Kimi-K3, whose multimodal
  config keeps it under `text_config`): the weights of its config group, 4-bit integers
  ("int", Kimi-K2.5's INT4 groups of 32) "int4", 4-bit floats (Kimi-K3's mxfp4-pack-quantized)
  "fp4", 8-bit floats "fp8" ("fp8_block" with a block strategy), 8-bit integers "int8"; where
  its `ignore` list names the attention projections, the matmuls other than the routed
  experts in 16 bits.
- ModelOpt (`hf_quant_config.json` `quantization`, or `quant_method` "modelopt"): `quant_algo`
  "FP8" per-tensor FP8, "NVFP4" NVFP4 ("fp4"); where the excluded modules (`exclude_modules`,
  `ignore`) name attention projections (self_attn, attn, linear_attn, mixer) the non-expert
  matmuls stay in 16 bits. "MIXED_PRECISION": each part's own `quantized_layers` entry, the
  experts' (or, in a dense model, the MLPs') format as `weights` and the attention layers' (16
  bits where none is listed) as `attention_weights`.

The formats are what the checkpoint stores; a framework may run a part in another math (an
FP8 checkpoint on a GPU without FP8 units computes weight-only: backends/gpu.default_activations).
"""
from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

from ..errors import InputError, brief

CSV_PATH = Path(__file__).parent / "checkpoint_formats.csv"
FIELDS = ("hf_id", "weights", "attention_weights", "rule", "files")
ATTENTION = re.compile(r"(self_attn|\battn\b|\.attn|linear_attn|mixer)", re.I)
EXPERTS = re.compile(r"\bexperts\b", re.I)
SHARED = re.compile(r"shared_expert", re.I)
MLP = re.compile(r"\.mlp\.|(gate|up|down)_proj$|\bw\d$", re.I)
MODELOPT_ALGO = {"FP8": "fp8", "NVFP4": "fp4", "W4A16_NVFP4": "fp4", "MXFP8": "fp8", "W4A8_AWQ": "int4",
                 "W4A16_AWQ": "int4"}  # ModelOpt quant_algo -> the format it stores


def _quant_sections(folder: Path, hf_id: str) -> tuple:
    """(config.json quantization_config, hf_quant_config.json quantization, the files read):
    catalog_import._quantization's sections, which the KV-cache formats come from too."""
    from .catalog_import import _quantization
    found = dict(_quantization(folder, hf_id))
    stem = hf_id.replace("/", "--")
    return found.get(f"{stem}_config.json"), found.get(f"{stem}_hf_quant_config.json"), sorted(found)


def _names_attention(patterns) -> bool:
    return any(ATTENTION.search(str(p)) for p in (patterns or []))


def _majority(formats: list) -> str | None:
    return max(sorted(set(formats)), key=formats.count) if formats else None


def _mixed(layers: dict) -> tuple[str | None, str]:
    """(routed experts' format, the other matmuls') of a ModelOpt MIXED_PRECISION
    `quantized_layers` (each format the one most of the part's listed modules take); a model
    without experts: its MLPs' format for both (attention in the MLPs' format: weights= covers
    every matmul of a dense model)."""
    algos = {name: MODELOPT_ALGO.get(str(q.get("quant_algo"))) for name, q in layers.items() if isinstance(q, dict)}
    routed = {n: f for n, f in algos.items() if EXPERTS.search(n) and not SHARED.search(n) and f}
    attention = [f for n, f in algos.items() if ATTENTION.search(n) and n not in routed and not SHARED.search(n) and f]
    if not routed:
        main = _majority([f for n, f in algos.items() if MLP.search(n) and not ATTENTION.search(n) and f])
        return main, main
    return _majority(list(routed.values())), _majority(attention) or "bf16"


def formats_of(folder: Path, hf_id: str) -> dict | None:
    """The row of one checkpoint (FIELDS), or None where its configs declare no quantization."""
    cfg, hq, files = _quant_sections(folder, hf_id)
    row = {"hf_id": hf_id, "files": " ".join(files)}
    method = (cfg or {}).get("quant_method")
    if hq is not None or method == "modelopt":
        q = hq if hq is not None else cfg
        algo = str(q.get("quant_algo"))
        excluded = list(q.get("exclude_modules") or []) + list((cfg or {}).get("ignore") or [])
        if algo == "MIXED_PRECISION":
            main, attention = _mixed(q.get("quantized_layers") or {})
            if main is None:
                return None
            return {**row, "weights": main, "attention_weights": "" if attention == main else attention,
                    "rule": "modelopt mixed"}
        if algo not in MODELOPT_ALGO:
            return None
        w = MODELOPT_ALGO[algo]
        return {**row, "weights": w, "attention_weights": "bf16" if _names_attention(excluded) else "",
                "rule": "modelopt"}
    if method == "fp8":
        block = bool(cfg.get("weight_block_size"))
        return {**row, "weights": "fp8_block" if block else "fp8", "attention_weights": "",
                "rule": "fp8 blocks" if block else "fp8 per tensor"}
    if method == "mxfp4":
        return {**row, "weights": "fp4", "attention_weights": "bf16" if _names_attention(
            cfg.get("modules_to_not_convert")) else "", "rule": "mxfp4 experts"}
    if method == "compressed-tensors":
        w = _compressed_tensors_format(cfg)
        if w is None:
            return None
        return {**row, "weights": w, "attention_weights": "bf16" if _names_attention(cfg.get("ignore")) else "",
                "rule": "compressed-tensors"}
    return None


def _compressed_tensors_format(cfg: dict) -> str | None:
    """The weight format of a compressed-tensors config's groups (all the same), or None."""
    found = set()
    for group in (cfg.get("config_groups") or {}).values():
        w = (group or {}).get("weights") or {}
        bits, kind = w.get("num_bits"), w.get("type")
        found.add({(4, "int"): "int4", (4, "float"): "fp4", (8, "int"): "int8",
                   (8, "float"): "fp8_block" if w.get("strategy") == "block" else "fp8"}.get((bits, kind)))
    return found.pop() if len(found) == 1 else None


def derive(folder: Path) -> list[dict]:
    """Every quantized checkpoint of a model_configs folder, sorted by id."""
    from .catalog_import import hf_id
    ids = sorted(hf_id(p) for p in Path(folder).glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))
    return [r for r in (formats_of(Path(folder), i) for i in ids) if r is not None]


def rows(path: Path = CSV_PATH) -> dict:
    """The committed table: {hf_id: row (FIELDS, as written)}."""
    with Path(path).open(newline="") as f:
        return {r["hf_id"]: r for r in csv.DictReader(line for line in f if not line.startswith("#"))}


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return {i: (r["weights"], r["attention_weights"] or None) for i, r in rows().items()}


def recorded(hf_id: str) -> bool:
    """Whether the table lists the checkpoint (its own configs read), not just its name."""
    return hf_id in _table()


# a weight-format word of a Hugging Face id (its last "-" words) -> the format (module doc)
NAMED_FORMATS = {"fp8": "fp8", "nvfp4": "fp4", "fp4": "fp4", "mxfp4": "fp4", "int4": "int4", "awq": "int4",
                 "gptq": "int4", "w4a16": "int4", "int8": "int8", "w8a8": "int8"}


def checkpoint_formats(hf_id: str) -> tuple[str, str | None] | None:
    """(weights, attention_weights or None: the same) a listed checkpoint stores, or the format
    a word of an unlisted id names; None for neither."""
    if recorded(hf_id):
        return _table()[hf_id]
    words = [w for w in re.split(r"[-_]", hf_id.split("/")[-1].lower()) if w in NAMED_FORMATS]
    if words:
        return NAMED_FORMATS[words[-1]], None
    base = recorded_base(hf_id)
    return _table()[base] if base else None


def recorded_base(hf_id: str) -> str | None:
    """The listed checkpoint an unlisted id is a dated or revised release of: the longest
    listed id of the same publisher that the id extends by "-" words (deepseek-ai/DeepSeek-R1
    for DeepSeek-R1-0528, deepseek-ai/DeepSeek-V3 for DeepSeek-V3-0324, moonshotai/
    Kimi-K2-Instruct for Kimi-K2-Instruct-0905: each released in its base's block FP8, the
    same config's quantization_config). An id whose own words name a format is read by them
    first (checkpoint_formats); ASSUMED for the rest: a publisher's revision keeps its base's
    format."""
    bases = [i for i in _table() if hf_id.lower().startswith(i.lower() + "-")]
    return max(bases, key=len) if bases else None


def resolve(specs, attention_weights=None) -> tuple:
    """(weights, attention_weights) of a prediction with weights=None: the formats of the
    checkpoint each model was loaded by (its Hugging Face id: checkpoint_formats; bf16 for any
    other), attention_weights the checkpoint's unless given. Models of different formats in one
    call need weights=."""
    found = {(getattr(s, "checkpoint", "") or s.name): checkpoint_formats(getattr(s, "checkpoint", "") or "")
             or ("bf16", None) for s in specs}
    if len(set(found.values())) > 1:
        listed = ", ".join(f"{m}: {w}" + (f" (attention {a})" if a else "") for m, (w, a) in found.items())
        raise InputError(f"weights=None is not allowed for models whose checkpoints store different formats "
                         f"({brief(listed)}); allowed: a weights= format for all of them")
    w, a = next(iter(found.values()))
    return w, attention_weights if attention_weights is not None else a


def write(folder: Path, version: str, path: Path = CSV_PATH) -> Path:
    rows = derive(folder)
    with path.open("w", newline="") as f:
        f.write(f"# Weight formats each quantized checkpoint stores, from aiconfigurator-core {version} model_configs "
                "(Apache-2.0); written by python -m workbench.specs.checkpoint_formats, rules in its docstring\n")
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def main(argv=None) -> int:
    from .catalog_import import package_configs
    folder, version = package_configs()
    print(f"wrote {write(folder, version)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
