"""The deployments InferenceX (SemiAnalysis' open serving benchmark, formerly InferenceMAX,
github.com/SemiAnalysisAI/InferenceX, Apache-2.0) ran, as its configuration file published
them: for each model, GPU, framework image, prompt and output length and concurrency, the
prefill and decode workers of a disaggregated run (`mode` "disagg"; `*_tp` the GPUs per
worker: the file's `tp`, the attention's TP or, with `*_dp_attention`, its data-parallel
width, or its `ep` where that is wider: entries from 2026 write a DEP8 pool as tp 1, ep 8,
dp-attn, as the recipe they name runs it, e.g. vllm/deepseek-v4/8k1k/disagg-b200-1p1d-dep8-
tp8-mtp.yaml: tensor-parallel-size 1, data-parallel-size 8, gpus_per_prefill 8; entries that
size their pools in nodes take nodes x GPUs per node / workers, `pools_from_nodes`), the one
instance of an aggregated run (`mode` "agg", in the decode columns), expert parallelism,
whether decode ran the model's multi-token-prediction head (MTP) and how deep (`draft_len`,
0 where nothing says), the decode engine's batch cap (`decode_max_batch`), the acceptance
length a run enforced (`acceptance_length`) and, where the repository vendors the recipe an
entry names, the decode cache's format (`decode_kv`; 0 or "" where unstated).

    workbench calibrate import-recipes --inferencex PATH    # a clone of the repository (its git history)

Why: 286 disaggregated rows of reference/serving_silicon.csv state each pool's layout and the
concurrency but not how many workers each pool had, and the decode batch (concurrency /
decode workers) sets TPOT; and no row says whether its run decoded with MTP, which makes
decode 1.25-2x faster. The benchmark's configuration file (`.github/configs/nvidia-master.yaml`,
from 2026-07 `configs/nvidia-master.yaml`) names both for every concurrency it ran; the
importer reads every version of it in the repository's history and keeps each deployment
with the dates it was in the file (`first_date`, and `until_date`: the first version
without it, empty while it stayed to the end), so a row is matched against what the
benchmark was configured to run on its `measured` date.

A row matches a deployment with its model's architecture (the rows name runs of
DeepSeek-R1-0528 DeepSeek-V3 or -R1, one spec), weight precision, GPU, framework, prompt,
output and concurrency, and its GPUs (per prefill and per decode worker; an aggregated row's
TP x attention-DP, and its framework version equal to the entry's image tag, the one thing
that tells the benchmark's MTP and plain entries apart). Pools: `pools`; MTP depth:
`speculation` (aggregated) or `pools` (disaggregated). Where the matches disagree (the file
ran MTP and plain decoding at the same concurrency, layout and image) the row stays
unanswered with the reason. The rule is checked where both sources speak: of the
disaggregated rows that state their workers, every one the recipes match (22) gets the
workers and layout it states (tests/calibrate/test_recipes.py).
"""
from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pandas as pd

from ..errors import InputError

RECIPES_CSV = Path(__file__).resolve().parent / "reference" / "inferencex_deployments.csv"
CONFIG_PATHS = (".github/configs/nvidia-master.yaml", "configs/nvidia-master.yaml")
# The configuration's `framework` -> the serving framework the rows name (dynamo serving each).
FRAMEWORKS = {"dynamo-trt": "trtllm", "dynamo-trtllm": "trtllm", "dynamo-sglang": "sglang", "dynamo-vllm": "vllm",
              "trt": "trtllm", "sglang": "sglang", "vllm": "vllm"}
# `model-prefix` -> catalog model, where the file's `model` names no catalog entry
# ("deepseek-r1-fp4", a local name of the early files; "MiniMaxAI/MiniMax-M3-MXFP8").
PREFIXES = {"dsr1": "deepseek_r1", "gptoss": "gpt_oss_120b", "minimaxm3": "minimax_m3"}
# A runner's GPU where its name alone is ambiguous: the H100 runners are DGX Cloud and
# CoreWeave HGX nodes (configs/runners.yaml: h100-dgxc-slurm_*, h100-cw_*), SXM parts.
# The RTX PRO 6000 runners ("rtx6000pro-lat") are the server edition the catalog holds.
RUNNERS = {"h100": "h100_sxm", "rtx6000pro": "rtx_pro_6000"}
POOL = ("workers", "tp", "ep", "dp_attention")
DEPLOYMENT = ("spec_decoding", "draft_len", *(f"{p}_{k}" for p in ("prefill", "decode") for k in POOL))
KEY = ("config", "mode", "model", "precision", "gpu", "framework", "image_tag", "isl", "osl", "concurrency",
       *DEPLOYMENT, "decode_max_batch", "acceptance_length", "decode_kv", "pools_from_nodes")
COLUMNS = (*KEY, "first_commit", "first_date", "until_date")  # the CSV's first line, which marks it as written here


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _settings(entry: dict) -> list[str]:
    """The `additional-settings` lines of a search-space entry's prefill and decode pools."""
    return [str(s) for pool in ("prefill", "decode") for s in entry.get(pool, {}).get("additional-settings") or []]


def draft_len(entry: dict) -> int:
    """The MTP depth of a search-space entry: DECODE_MTP_SIZE=k in its settings, else the
    `_mtp<k>` of its recipe file's name (`..._eplb0_mtp3_1184.yaml`, `..._mtp1.yaml`), else
    SGLang's speculative-num-steps; 0 where none says (or no MTP)."""
    text = " ".join(_settings(entry))
    m = (re.search(r"DECODE_MTP_SIZE=(\d+)", text) or re.search(r"_mtp(\d+)[_.]", text) or
         re.search(r"SPECULATIVE_NUM_STEPS=(\d+)", text) or re.search(r"speculative-num-steps[= ](\d+)", text))
    return int(m.group(1)) if m else 0


def decode_max_batch(entry: dict) -> int:
    """The decode engine's most running requests per attention replica of a disaggregated
    search-space entry: DECODE_MAX_BATCH_SIZE=n in its settings, else the `_batch<n>` of its
    recipe file's name (`ctx2_gen1_dep16_batch256_eplb0_mtp0.yaml`, whose decode
    `max_batch_size` is 256 per attention-DP rank: the srt-slurm recipes the file names, e.g.
    recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_tep16_batch2_eplb0_mtp0.yaml and
    recipes/dsr1-128k8k/gb200/ctx3_ctx_pp8_gen1_dep16_batch8_eplb0_mtp2.yaml, max_batch_size
    2 and 8); 0 where none says (the KV cache is then the only bound)."""
    text = " ".join(_settings(entry))
    m = re.search(r"DECODE_MAX_BATCH_SIZE=(\d+)", text) or re.search(r"_batch(\d+)[_.]", text)
    return int(m.group(1)) if m else 0


# The srt-slurm recipes the file's CONFIG_FILE settings name, as the repository vendors them
# from 2026-05 (recipes/<path> -> benchmarks/multi_node/srt-slurm-recipes/<path>).
VENDORED = "benchmarks/multi_node/srt-slurm-recipes/"


def _mapping(section: dict, key: str) -> dict:
    """`section[key]` where it is a mapping, else an empty one."""
    found = section.get(key)
    return found if isinstance(found, dict) else {}


def recipe_settings(recipe: dict, mode: str) -> dict:
    """What a vendored srt-slurm recipe sets for the decode pool (`mode` "disagg") or the one
    instance ("agg"): decode_max_batch (TensorRT-LLM max_batch_size, SGLang max-running-
    requests, vLLM max-num-seqs), draft_len (TensorRT-LLM's speculative_config max_draft_len
    or num_nextn_predict_layers, vLLM's speculative-config num_speculative_tokens, SGLang's
    speculative-num-steps) and decode_kv (its KV-cache dtype, "fp8" or "bf16"); 0 / "" where
    it says nothing (a cache dtype "auto" included)."""
    import json
    sections = [v for k, v in ((recipe or {}).get("backend") or {}).items()
                if k.endswith("_config") and isinstance(v, dict)]  # trtllm_config, sglang_config, vllm_config
    names = ("decode",) if mode == "disagg" else ("aggregated", "agg")
    pool = next((f[k] for f in sections for k in names if isinstance(f.get(k), dict)), {})
    batch = next((pool[k] for k in ("max_batch_size", "max-running-requests", "max-num-seqs") if k in pool), 0)
    trt_spec, cache = _mapping(pool, "speculative_config"), _mapping(pool, "kv_cache_config")
    raw = pool.get("speculative-config") or "{}"  # JSON text, or a YAML mapping
    try:
        vllm_spec = raw if isinstance(raw, dict) else json.loads(raw)
    except (TypeError, ValueError):
        vllm_spec = {}
    depth = (trt_spec.get("max_draft_len") or trt_spec.get("num_nextn_predict_layers")
             or vllm_spec.get("num_speculative_tokens") or pool.get("speculative-num-steps") or 0)
    kv = str(cache.get("dtype") or pool.get("kv-cache-dtype") or "")
    kv = "fp8" if kv.startswith("fp8") else ("bf16" if kv in ("bf16", "bfloat16") else "")
    return {"decode_max_batch": int(batch or 0), "draft_len": int(depth or 0), "decode_kv": kv}


# GPUs per node of the runners whose pools the file sizes in nodes: a GB200 / GB300 NVL72
# compute tray holds 4 GPUs (18 trays x 4 = 72, NVIDIA GB200 NVL72 datasheet); 8 elsewhere
# (HGX / DGX B200, B300, H100, H200 boards).
GPUS_PER_NODE = {"gb200": 4, "gb300": 4}


def _node_pools(pools: dict, entry: dict, gpu: str | None) -> dict:
    """The pools of a disaggregated entry that sizes them in nodes (PREFILL_NODES=n and
    DECODE_NODES=n in its settings) and leaves tp and ep at 1 with attention DP: the early
    GB200 SGLang entries, whose comments say "tp, ep, and dp-attn do nothing because they are
    hardcoded in" the launch script and name each pool's layout as DEP (nvidia-master.yaml,
    2025-12, dsr1-fp8-gb200-dynamo-sglang: '1 prefill worker at DEP4 and 4 decode workers at
    DEP4' with PREFILL_NODES=1, DECODE_NODES=4): each worker spans nodes x GPUs per node /
    workers GPUs, attention data-parallel and experts parallel across them."""
    out, text = dict(pools, pools_from_nodes=False), " ".join(_settings(entry))
    for p in ("prefill", "decode"):
        m, workers = re.search(rf"\b{p.upper()}_NODES=(\d+)", text), pools[f"{p}_workers"]
        if m and workers and pools[f"{p}_tp"] == pools[f"{p}_ep"] == 1 and pools[f"{p}_dp_attention"]:
            out[f"{p}_tp"] = out[f"{p}_ep"] = max(int(m.group(1)) * GPUS_PER_NODE.get(gpu, 8) // workers, 1)
            out["pools_from_nodes"] = True
    return out


def _config_file(entry: dict) -> str:
    """The recipe path an entry's CONFIG_FILE setting names (without a `:override` suffix), or ""."""
    found = (re.match(r"CONFIG_FILE=(\S+)", s) for s in _settings(entry))
    return next((m.group(1).split(":", 1)[0] for m in found if m), "")


def _with_recipe(pools: dict, entry: dict, recipe_of, mode: str) -> dict:
    """The entry's pools completed by its vendored recipe (recipe_of(path) -> parsed recipe or
    None): the decode batch and MTP depth where the file's settings and names leave them out,
    and the cache's format."""
    path = _config_file(entry)
    found = recipe_of(path) if recipe_of and path.startswith("recipes/") else None
    if not found:
        return dict(pools, decode_kv="")
    r = recipe_settings(found, mode)
    return dict(pools, decode_max_batch=pools["decode_max_batch"] or r["decode_max_batch"], decode_kv=r["decode_kv"],
                draft_len=pools["draft_len"] or (r["draft_len"] if pools["spec_decoding"] == "mtp" else 0))


def acceptance_length(entry: dict) -> float:
    """The mean acceptance length (tokens per verify step) a speculating entry enforced with
    synthetic acceptance (SYNTHETIC_ACCEPTANCE=true and SYNTHETIC_ACCEPTANCE_LENGTH=L in its
    settings, the benchmark's runners/inject_synthetic_acceptance.py, from 2026-07: the
    golden SPEED-Bench coding value for the model and depth, golden_al_distribution/*.yaml),
    0 where the run accepted what its drafts earned."""
    text = " ".join(_settings(entry))
    m = re.search(r"SYNTHETIC_ACCEPTANCE_LENGTH=(\d+(?:\.\d+)?)", text)
    return float(m.group(1)) if m and re.search(r"SYNTHETIC_ACCEPTANCE=true", text, re.I) else 0.0


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
    name = runner.split(":")[-1].split("-")[0]  # "cluster:b200-dgxc" -> b200
    return RUNNERS.get(name) or hardware_names.resolve(name, list_gpus())


def concurrencies(space: dict) -> list[int]:
    """A search space's concurrencies: its `conc-list`, or `conc-start` to `conc-end` doubling,
    the end included (utils/matrix_logic/generate_sweep_configs.py: conc *= step_size, 2
    unless its caller says otherwise, clamped to the end)."""
    if space.get("conc-list"):
        return [int(c) for c in space["conc-list"]]
    start, end = int(space.get("conc-start", 0)), int(space.get("conc-end", 0))
    out, c = [], start
    while 0 < c < end:
        out.append(c)
        c *= 2
    return out + [end] if 0 < start <= end else out


def aggregated_draft_len(framework: str, dp_attention: bool) -> int:
    """MTP depth of an aggregated run whose entry does not state it: the benchmark's
    single-node TensorRT-LLM scripts set num_nextn_predict_layers to 3, or 1 with attention
    DP (benchmarks/single_node/dsr1_fp8_b200_trt_mtp.sh, dsr1_fp4_b200_trt_mtp.sh,
    dsr1_fp8_h200_trt_mtp.sh, 2026-03); other frameworks: 0 (not stated)."""
    return (1 if dp_attention else 3) if framework == "trtllm" else 0


def _aggregated(space: dict, framework: str) -> dict:
    """An aggregated entry's one instance, written in the decode columns (no prefill pool)."""
    dp = bool(space.get("dp-attn"))
    spec = space.get("spec-decoding", "none")
    depth = (draft_len(space) or aggregated_draft_len(framework, dp)) if spec == "mtp" else 0
    return dict(spec_decoding=spec, draft_len=depth, prefill_workers=0, prefill_tp=0, prefill_ep=0,
                prefill_dp_attention=False, decode_workers=1, decode_tp=int(space.get("tp", 1)),
                decode_ep=int(space.get("ep", 1)), decode_dp_attention=dp, decode_max_batch=0,
                acceptance_length=acceptance_length(space) if depth else 0.0, pools_from_nodes=False)


def entries(config: dict, recipe_of=None) -> list[dict]:
    """Every (deployment, concurrency) of one version of the file: disaggregated pools, and
    aggregated instances (`mode` "agg": the instance in the decode columns, 0 prefill workers);
    `recipe_of(path)`: the parsed srt-slurm recipe a CONFIG_FILE names, where the version
    vendors it (_with_recipe)."""
    out = []
    for name, e in config.items():
        framework = FRAMEWORKS.get(e.get("framework")) if isinstance(e, dict) else None
        if framework is None:
            continue
        model = _model(str(e.get("model", "")), e.get("model-prefix", name.split("-")[0]))
        base = dict(config=name, mode="disagg" if e.get("disagg") else "agg", model=model,
                    precision=e.get("precision"), gpu=_gpu(str(e.get("runner", ""))), framework=framework,
                    image_tag=str(e.get("image", "")).rsplit(":", 1)[-1])
        # the fixed prompt / output lengths: `seq-len-configs`, from 2026-05 `scenarios: fixed-seq-len`
        for seq in e.get("seq-len-configs") or (e.get("scenarios") or {}).get("fixed-seq-len") or []:
            for s in seq.get("search-space") or []:
                if base["mode"] == "agg":
                    pools = _aggregated(s, framework)
                elif "prefill" in s and "decode" in s:
                    spec = s.get("spec-decoding", "none")
                    pools = {f"{p}_{k}": (bool(s[p].get("dp-attn")) if k == "dp_attention" else
                                          int(s[p].get("num-worker" if k == "workers" else k, 1)))
                             for p in ("prefill", "decode") for k in POOL}
                    for p in ("prefill", "decode"):  # GPUs per worker: an ep wider than tp spans ep GPUs
                        pools[f"{p}_tp"] = max(pools[f"{p}_tp"], pools[f"{p}_ep"])
                    pools = _node_pools(pools, s, base["gpu"])
                    pools.update(spec_decoding=spec, draft_len=draft_len(s) if spec == "mtp" else 0,
                                 decode_max_batch=decode_max_batch(s),
                                 acceptance_length=acceptance_length(s) if spec == "mtp" else 0.0)
                else:
                    continue
                pools = _with_recipe(pools, s, recipe_of, base["mode"])
                for c in concurrencies(s):
                    out.append(dict(base, isl=int(seq["isl"]), osl=int(seq["osl"]), concurrency=c, **pools))
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
    open_, rows, blobs = {}, [], {}

    def vendored(sha):
        """recipe_of for one version: path -> parsed recipe, each blob read once."""
        listing = _git(repo, "ls-tree", "-r", sha, "--", VENDORED).splitlines()
        at = {line.split("\t", 1)[1][len(VENDORED):]: line.split()[2] for line in listing if "\t" in line}

        def recipe_of(path):
            blob = at.get(path[len("recipes/"):])
            if blob is not None and blob not in blobs:
                try:
                    blobs[blob] = yaml.load(_git(repo, "cat-file", "-p", blob), Loader=loader)
                except yaml.YAMLError:
                    blobs[blob] = None
            return blobs.get(blob)
        return recipe_of

    for when, sha, path in sorted(versions):
        try:
            text = _git(repo, "show", f"{sha}:{path}")
            now = {tuple(d[k] for k in KEY) for d in entries(yaml.load(text, Loader=loader) or {}, vendored(sha))}
        except (yaml.YAMLError, subprocess.CalledProcessError, KeyError, TypeError, ValueError):
            continue  # a version that does not parse is skipped; the next one carries on
        for key in set(open_) - now:
            rows.append(dict(zip(KEY, key), **open_.pop(key), until_date=when.date().isoformat()))
        for key in now - set(open_):
            open_[key] = dict(first_commit=sha, first_date=when.date().isoformat())
    rows += [dict(zip(KEY, key), **v, until_date="") for key, v in open_.items()]
    # every column in the order: the same history writes the same file
    return pd.DataFrame(rows, columns=list(COLUMNS)).sort_values(
        ["config", "isl", "osl", "concurrency", "first_date", *KEY]).reset_index(drop=True)


def check_out(out: Path | str | None = None) -> Path:
    """The CSV to write (default RECIPES_CSV): a new file, or one import-recipes wrote (its
    first line is COLUMNS), as kernel_repeatability.write_owned asks; never a folder.
    Checked before the history is read."""
    path = Path(out) if out else RECIPES_CSV
    if path.is_dir():
        raise InputError(f"out={str(path)!r} is a folder; allowed: a CSV file path")
    if path.exists() or path.is_symlink():
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                owned = f.readline().rstrip("\r\n") == ",".join(COLUMNS)
        except OSError:
            owned = False
        if not owned:
            raise InputError(f"out={str(path)!r} exists and was not written by import-recipes; allowed: a new "
                             "path or an earlier CSV of import-recipes")
    return path


def write(df: pd.DataFrame, out: Path | str | None = None) -> Path:
    """Write the deployments to `out` (check_out: only over a CSV import-recipes wrote),
    beside it first and renamed over it, so a failed write leaves the old file whole."""
    from ..safe_output import replace_file
    out = check_out(out)

    def to_csv(tmp):
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(tmp, index=False)
    return replace_file(out, to_csv)


def import_to(repo: Path | str, out: Path | str | None = None) -> tuple[Path | None, str]:
    """`workbench calibrate import-recipes`: import_recipes(repo) written to `out` (checked
    first, check_out) -> (the path written or None, a warning or ""). A history without
    deployments writes a header-only CSV where none was, and replaces no earlier one."""
    path = check_out(out)
    df = import_recipes(repo)
    if not df.empty:
        return write(df, path), ""
    warning = f"inferencex={str(repo)!r} holds no deployments in its {' or '.join(CONFIG_PATHS)}"
    if path.exists():
        return None, f"{warning}; out={str(path)!r} kept as it was"
    return write(df, path), f"{warning}; wrote a CSV without rows"


def load(path: Path = RECIPES_CSV) -> pd.DataFrame:
    """The deployments CSV; `until_date` stays "" (text) where a deployment stayed to the end."""
    return pd.read_csv(path, keep_default_na=False)


INDEX = ("mode", "gpu", "framework", "precision", "isl", "osl", "concurrency")  # what a row names exactly


@functools.lru_cache(maxsize=4)
def _index(path: Path = RECIPES_CSV) -> dict:
    """load() with each deployment's model architecture (`arch`), grouped by INDEX: read once."""
    df = load(path)
    return {k: g for k, g in df.assign(arch=df.model.map(_architecture)).groupby(list(INDEX))}


def _matching(row, mode: str) -> pd.DataFrame:
    """The deployments of `mode` the file held on the row's `measured` date for its model's
    architecture, GPU, framework, precision, lengths and concurrency."""
    from .serving_rows import system
    key = (mode, system(row.system), row.backend, row.precision, int(row.isl), int(row.osl), int(row.concurrency))
    df = _index().get(key)
    if df is None:
        return pd.DataFrame(columns=[*KEY, "arch", "first_commit", "first_date", "until_date"])
    day = str(getattr(row, "measured", "") or "")
    return df[(df.arch == _architecture(row.model_path)) & (df.first_date <= day) &
              ((df.until_date == "") | (df.until_date > day))]


def _agreed(values, none):
    """The one value a column of matching deployments holds, `none` where it holds several
    (versions of one deployment that differ in what their recipes set) or none."""
    found = set(values)
    return found.pop() if len(found) == 1 else none


def _same_gpus(row) -> pd.DataFrame:
    """The disaggregated deployments matching a row (_matching) with its GPUs per prefill and
    per decode worker: as the deployment ran them, or, for one sized in nodes
    (`pools_from_nodes`), the tp 1 and ep 1 its file wrote and the rows copy."""
    m = _matching(row, "disagg")
    prefill = row.prefill_tp_size * row.prefill_attention_dp_size
    decode = row.decode_tp_size * row.decode_attention_dp_size
    as_written = m.pools_from_nodes.astype(bool) & (prefill == 1) & (decode == 1)
    return m[((m.prefill_tp == prefill) & (m.decode_tp == decode)) | as_written]


def pools(row) -> tuple[dict | None, str]:
    """The pools of a disaggregated row that leaves its workers out, from the deployment the
    benchmark's file named for it on its `measured` date (its model matched by architecture:
    the rows name DeepSeek-R1 runs DeepSeek-V3 or -R1, one spec): ({prefill,decode}_{workers,
    tp, ep, attention_dp}, spec_decoding, draft_len, decode_max_batch, acceptance_length and
    decode_kv: 0 or "" where unstated or the matches differ in it), or (None, why)."""
    m = _same_gpus(row)
    found = m.drop_duplicates(list(DEPLOYMENT))
    if found.empty:
        return None, ("disaggregated row without its workers, and no deployment of the benchmark's published "
                      f"configuration ({RECIPES_CSV.name}) matches it on its date")
    if len(found) > 1:
        return None, (f"disaggregated row without its workers, and {len(found)} deployments of the benchmark's "
                      f"configuration match it ({', '.join(sorted(set(found.spec_decoding)))} decoding): ambiguous")
    d = found.iloc[0]
    out = {"draft_len": int(d.draft_len), "spec_decoding": d.spec_decoding,
           "decode_max_batch": int(_agreed(m.decode_max_batch, 0)),
           "acceptance_length": float(_agreed(m.acceptance_length, 0.0)), "decode_kv": _agreed(m.decode_kv, "")}
    for p in ("prefill", "decode"):
        gpus, dp = int(d[f"{p}_tp"]), bool(d[f"{p}_dp_attention"])
        out.update({f"{p}_workers": int(d[f"{p}_workers"]), f"{p}_tp": 1 if dp else gpus,
                    f"{p}_attention_dp": gpus if dp else 1, f"{p}_ep": int(d[f"{p}_ep"])})
    return out, ""


def engine_settings(row) -> dict:
    """For a disaggregated row that states its pools: the decode batch cap and cache format of
    the deployments the file held on its date with the same workers and GPUs per worker
    ({"decode_max_batch": n, "decode_kv": kv}; 0 / "" where they say nothing or differ). MTP
    and plain entries of one deployment share their engines: their agreement is enough."""
    from .serving_rows import _n
    m = _same_gpus(row)
    m = m[(m.prefill_workers == _n(row.prefill_num_workers)) & (m.decode_workers == _n(row.decode_num_workers))]
    return {"decode_max_batch": int(_agreed(m.decode_max_batch, 0)), "decode_kv": _agreed(m.decode_kv, "")}


def _aggregated_matches(row) -> pd.DataFrame:
    """The aggregated entries that ran the row's framework version at its concurrency on its GPUs."""
    from .serving_rows import _n
    m = _matching(row, "agg")
    return m[(m.image_tag == str(row.backend_version)) & (m.decode_tp == _n(row.tp_size) * _n(row.attention_dp_size))]


def stated_acceptance_length(row) -> float:
    """The acceptance length an aggregated row's run enforced (acceptance_length), 0 where its
    entries state none or differ."""
    return float(_agreed(_aggregated_matches(row).acceptance_length, 0.0))


def speculation(row) -> tuple[int | None, str]:
    """(MTP depth, "") of an aggregated row from the entries of the file that ran its
    framework version (`image_tag` = the row's backend_version) at its concurrency on its
    GPUs: 0 where they ran plain decoding or none matches, the depth where they ran MTP, or
    (None, why) where they disagree or ran MTP at a depth not stated. The benchmark's MTP and
    plain entries list the same concurrencies and differ by image (TensorRT-LLM 1.2.0rc6.post3
    against post2 for DeepSeek-R1 on B200), so the version tells them apart."""
    found = _aggregated_matches(row).drop_duplicates(["spec_decoding", "draft_len"])
    if found.empty or set(found.spec_decoding) == {"none"}:
        return 0, ""
    if len(found) > 1:
        return None, (f"the benchmark's configuration ran {', '.join(sorted(set(found.spec_decoding)))} decoding "
                      "at this deployment: ambiguous")
    if int(found.draft_len.iloc[0]) == 0:
        return None, "the benchmark's configuration ran this deployment with speculative decoding of unstated depth"
    return int(found.draft_len.iloc[0]), ""
