"""The disaggregated deployments InferenceX (SemiAnalysis' open serving benchmark, formerly
InferenceMAX, github.com/SemiAnalysisAI/InferenceX, Apache-2.0) ran, as its configuration
file published them: for each model, GPU, framework, prompt and output length and
concurrency, the prefill and decode workers, each pool's GPUs per worker (`*_tp`: the file's
`tp`, the attention's TP or, with `*_dp_attention`, its data-parallel width), expert
parallelism, and whether decode ran DeepSeek's multi-token-prediction head (MTP) and how deep
(`draft_len`, 0 where the file does not say).

    workbench calibrate import-recipes --inferencex PATH    # a clone of the repository (its git history)

Why: 286 disaggregated rows of reference/serving_silicon.csv state each pool's layout and the
concurrency but not how many workers each pool had, and the decode batch (concurrency /
decode workers) sets TPOT. The benchmark's configuration file
(`.github/configs/nvidia-master.yaml`, later `configs/nvidia-master.yaml`) names them for
every concurrency it ran; the importer reads every version of it in the repository's history
and keeps each deployment with the dates it was in the file (`first_date`, and `until_date`:
the first version without it, empty while it stayed to the end), so a row is matched
against the deployments the benchmark was configured to run on its `measured` date.

A row matches a deployment with its model's architecture (the rows name runs of
DeepSeek-R1-0528 DeepSeek-V3 or -R1, one spec), weight precision, GPU, framework, prompt,
output and concurrency, and the same GPUs per prefill and per decode worker (the rows record
TP x attention-DP). It is answered from the recipe when every deployment it matches on that
date names the same pools; two that differ (the file ran both MTP and plain decoding at the
same concurrency and layout, say) leave it unanswered with the reason. The rule is checked
where both sources speak: of the disaggregated rows that state their workers, every one the
recipes match (22) gets the workers and layout it states (tests/calibrate/test_recipes.py).
"""
from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pandas as pd

from ..errors import InputError

RECIPES_CSV = Path(__file__).resolve().parent / "reference" / "disagg_recipes.csv"
CONFIG_PATHS = (".github/configs/nvidia-master.yaml", "configs/nvidia-master.yaml")
# The configuration's `framework` -> the serving framework the rows name (dynamo serving each).
FRAMEWORKS = {"dynamo-trt": "trtllm", "dynamo-trtllm": "trtllm", "dynamo-sglang": "sglang", "dynamo-vllm": "vllm"}
# `model-prefix` -> catalog model, where the file's `model` names no catalog entry
# ("deepseek-r1-fp4", a local name of the early files; "MiniMaxAI/MiniMax-M3-MXFP8").
PREFIXES = {"dsr1": "deepseek_r1", "gptoss": "gpt_oss_120b", "minimaxm3": "minimax_m3"}
# A runner's GPU where its name alone is ambiguous: the H100 runners are DGX Cloud and
# CoreWeave HGX nodes (configs/runners.yaml: h100-dgxc-slurm_*, h100-cw_*), SXM parts.
RUNNERS = {"h100": "h100_sxm"}
POOL = ("workers", "tp", "ep", "dp_attention")
DEPLOYMENT = ("spec_decoding", "draft_len", *(f"{p}_{k}" for p in ("prefill", "decode") for k in POOL))
KEY = ("config", "model", "precision", "gpu", "framework", "isl", "osl", "concurrency", *DEPLOYMENT)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def draft_len(entry: dict) -> int:
    """The MTP depth of a search-space entry: DECODE_MTP_SIZE=k in its settings, else the
    `_mtp<k>_` of its recipe file's name; 0 where neither says (or no MTP)."""
    text = " ".join(str(s) for pool in ("prefill", "decode")
                    for s in entry.get(pool, {}).get("additional-settings") or [])
    m = re.search(r"DECODE_MTP_SIZE=(\d+)", text) or re.search(r"_mtp(\d+)_", text)
    return int(m.group(1)) if m else 0


@functools.lru_cache(maxsize=None)
def _model(model: str, prefix: str) -> str | None:
    from ..specs import catalog_name
    return catalog_name(model) or PREFIXES.get(prefix)


@functools.lru_cache(maxsize=None)
def _architecture(model: str) -> str:
    """serving_repeatability.architecture of a Hugging Face id or a catalog name."""
    from ..specs import catalog_name, load_model
    from .serving_repeatability import architecture
    if catalog_name(model) is None:
        try:
            model = load_model(model).hf_ids[0]
        except (InputError, IndexError):
            return model
    return architecture(model)


@functools.lru_cache(maxsize=None)
def _gpu(runner: str) -> str | None:
    from ..specs import hardware_names, list_gpus
    name = runner.split("-")[0]
    return RUNNERS.get(name) or hardware_names.resolve(name, list_gpus())


def entries(config: dict) -> list[dict]:
    """Every disaggregated (deployment, concurrency) of one version of the file."""
    out = []
    for name, e in config.items():
        if not (isinstance(e, dict) and e.get("disagg") and e.get("framework") in FRAMEWORKS):
            continue
        model = _model(str(e.get("model", "")), e.get("model-prefix", name.split("-")[0]))
        base = dict(config=name, model=model, precision=e.get("precision"),
                    gpu=_gpu(str(e.get("runner", ""))), framework=FRAMEWORKS[e["framework"]])
        # the fixed prompt / output lengths: `seq-len-configs`, from 2026-05 `scenarios: fixed-seq-len`
        for seq in e.get("seq-len-configs") or (e.get("scenarios") or {}).get("fixed-seq-len") or []:
            for s in seq.get("search-space") or []:
                if not ("prefill" in s and "decode" in s):
                    continue
                spec = s.get("spec-decoding", "none")
                pools = {f"{p}_{k}": (bool(s[p].get("dp-attn")) if k == "dp_attention" else
                                      int(s[p].get("num-worker" if k == "workers" else k, 1)))
                         for p in ("prefill", "decode") for k in POOL}
                for c in s.get("conc-list") or []:
                    out.append(dict(base, isl=int(seq["isl"]), osl=int(seq["osl"]), concurrency=int(c),
                                    spec_decoding=spec, draft_len=draft_len(s) if spec == "mtp" else 0, **pools))
    return out


def import_recipes(repo: Path | str) -> pd.DataFrame:
    """Every deployment of every version of the configuration in `repo`'s history, one row
    per deployment and stretch of versions that held it, with the first commit and date."""
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster over ~500 versions
    repo = Path(repo)
    if not (repo / ".git").exists() and not (repo / "HEAD").exists():
        raise InputError(f"inferencex={str(repo)!r} is not a git repository; allowed: a clone of "
                         "github.com/SemiAnalysisAI/InferenceX")
    versions = []
    for path in CONFIG_PATHS:
        for line in _git(repo, "log", "--format=%H %cI", "--", path).splitlines():
            sha, when = line.split()
            versions.append((pd.Timestamp(when).tz_convert("UTC"), sha, path))
    if not versions:
        raise InputError(f"inferencex={str(repo)!r} has no {' or '.join(CONFIG_PATHS)} in its history")
    open_, rows = {}, []
    for when, sha, path in sorted(versions):
        try:
            text = _git(repo, "show", f"{sha}:{path}")
            now = {tuple(d[k] for k in KEY) for d in entries(yaml.load(text, Loader=loader) or {})}
        except (yaml.YAMLError, subprocess.CalledProcessError, KeyError, TypeError, ValueError):
            continue  # a version that does not parse is skipped; the next one carries on
        for key in set(open_) - now:
            rows.append(dict(zip(KEY, key), **open_.pop(key), until_date=when.date().isoformat()))
        for key in now - set(open_):
            open_[key] = dict(first_commit=sha, first_date=when.date().isoformat())
    rows += [dict(zip(KEY, key), **v, until_date="") for key, v in open_.items()]
    return pd.DataFrame(rows, columns=[*KEY, "first_commit", "first_date", "until_date"]).sort_values(
        ["config", "isl", "osl", "concurrency", "first_date"]).reset_index(drop=True)


def write(df: pd.DataFrame, out: Path | str | None = None) -> Path:
    out = Path(out) if out else RECIPES_CSV
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    return out


def load(path: Path = RECIPES_CSV) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values={"model": [""], "gpu": [""]})


def pools(row, recipes: pd.DataFrame | None = None) -> tuple[dict | None, str]:
    """The pools of a disaggregated row that leaves its workers out, from the deployment the
    benchmark's file named for it on its `measured` date (its model matched by architecture:
    the rows name DeepSeek-R1 runs DeepSeek-V3 or -R1, one spec): ({prefill,decode}_{workers, tp, ep,
    attention_dp}, draft_len), or (None, why)."""
    from .serving_rows import system
    df = load() if recipes is None else recipes
    day = str(getattr(row, "measured", "") or "")
    arch = _architecture(row.model_path)
    same = df.model.map(lambda m: _architecture(m) == arch)
    m = df[same & (df.gpu == system(row.system)) &
           (df.framework == row.backend) & (df.precision == row.precision) & (df.isl == row.isl) &
           (df.osl == row.osl) & (df.concurrency == row.concurrency) &
           (df.prefill_tp == row.prefill_tp_size * row.prefill_attention_dp_size) &
           (df.decode_tp == row.decode_tp_size * row.decode_attention_dp_size) &
           (df.first_date <= day) & ((df.until_date == "") | (df.until_date > day))]
    found = m.drop_duplicates(list(DEPLOYMENT))
    if found.empty:
        return None, ("disaggregated row without its workers, and no deployment of the benchmark's published "
                      "configuration (calibrate/reference/disagg_recipes.csv) matches it on its date")
    if len(found) > 1:
        return None, (f"disaggregated row without its workers, and {len(found)} deployments of the benchmark's "
                      f"configuration match it ({', '.join(sorted(set(found.spec_decoding)))} decoding): ambiguous")
    d = found.iloc[0]
    out = {"draft_len": int(d.draft_len), "spec_decoding": d.spec_decoding}
    for p in ("prefill", "decode"):
        gpus, dp = int(d[f"{p}_tp"]), bool(d[f"{p}_dp_attention"])
        out.update({f"{p}_workers": int(d[f"{p}_workers"]), f"{p}_tp": 1 if dp else gpus,
                    f"{p}_attention_dp": gpus if dp else 1, f"{p}_ep": int(d[f"{p}_ep"])})
    return out, ""
