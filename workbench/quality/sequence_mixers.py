"""Published quality of sequence mixers: full, grouped-query and latent attention, sliding
windows, DeepSeek Sparse Attention and hybrids with linear layers (Gated DeltaNet, Kimi
Delta Attention, Mamba), each score cited.

The data live in `sequence_mixer_quality.csv`, one row per published score: `model` (the
evaluated checkpoint, as its publisher names it), `architecture` (the catalog spec with its
layer shapes, empty when the catalog has none), `mixer` (the kind of sequence mixer, one
of MIXERS), `benchmark` (one of BENCHMARKS), `context_tokens` (the context the score was
measured at; 0 for a short-context task or a benchmark of mixed lengths, see `notes`),
`score` (percent, as published), `comparison` (rows of one table share an evaluation setup:
compare scores within one comparison first), `source` (paper and table, or URL and
section) and `notes` (always a `conf=high|medium|low` tag).

Nothing here estimates a score: a model no source evaluated has no row. The kind of a
catalog model comes from its spec (`mixer_kind`), never from its name, so a new model file
is labelled by what it declares.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError, check_choice
from .quantization import check_tagged_and_unique  # one conf-tag convention

CSV_PATH = Path(__file__).with_name("sequence_mixer_quality.csv")
COLUMNS = ("model", "architecture", "mixer", "benchmark", "context_tokens", "score", "comparison", "source",
           "notes")
KEY = ("model", "benchmark", "context_tokens", "comparison")
# Kinds of sequence mixer. Hybrids keep a few softmax-attention layers beside linear layers
# with a recurrent state; `mamba_hybrid` is Mamba (v1) layers, which no catalog spec declares.
MIXERS = ("mha", "gqa", "mqa", "mla", "sliding_window", "dsa", "compressed", "gdn_hybrid", "kda_hybrid", "mamba2_hybrid",
          "mamba_hybrid")
MIXER_LABELS = {"mha": "full MHA", "gqa": "GQA", "mqa": "MQA", "mla": "MLA", "sliding_window": "sliding window",
                "dsa": "DSA", "compressed": "compressed (CSA + HCA)", "gdn_hybrid": "Gated DeltaNet hybrid", "kda_hybrid": "KDA hybrid",
                "mamba2_hybrid": "Mamba-2 hybrid", "mamba_hybrid": "Mamba hybrid"}
# Long-context benchmarks (RULER and its RULER-100 variant, Artificial Analysis Long Context
# Reasoning, LongBench v2) and the short-context ones the DSA comparison reports.
LONG_CONTEXT = ("ruler", "ruler100", "aa_lcr", "longbench_v2")
BENCHMARKS = LONG_CONTEXT + ("mmlu_pro", "gpqa_diamond", "livecodebench", "aime_2025", "browsecomp",
                             "swe_verified")
_LINEAR_MIXERS = {"gdn": "gdn_hybrid", "kda": "kda_hybrid", "mamba2": "mamba2_hybrid"}
_CITED = re.compile(r"arXiv \d{4}\.\d{4,5}|https?://")
_NAME = re.compile(r"^[a-z0-9_]+$")
_TEXT = ("model", "mixer", "benchmark", "comparison", "source", "notes")


def mixer_kind(spec) -> str:
    """The sequence-mixer kind of a ModelSpec, from what it declares: linear layers (their
    `linear_kind`: Gated DeltaNet, KDA or Mamba-2) make a hybrid; else an index top-k is
    DeepSeek Sparse Attention; a latent KV is MLA; sliding-window layers are a windowed
    model; else the KV heads against the query heads: MHA, MQA (one) or GQA."""
    if spec.n_linear_layers:
        kind = getattr(spec, "linear_kind", "gdn")
        return _LINEAR_MIXERS.get(kind, f"{kind}_hybrid")
    if spec.is_compressed:  # DeepSeek-V4: windows plus compressed (CSA: indexed) entries
        return "compressed"
    if spec.index_topk:
        return "dsa"
    if spec.is_mla:
        return "mla"
    if spec.n_sliding_layers:
        return "sliding_window"
    if spec.n_kv_heads == spec.n_heads:
        return "mha"
    return "mqa" if spec.n_kv_heads == 1 else "gqa"


def mixer_label(kind: str) -> str:
    """A reader's name of a mixer kind ('Gated DeltaNet hybrid'); the kind itself if unknown."""
    return MIXER_LABELS.get(kind, kind)


def validate(df: pd.DataFrame, *, origin: str = CSV_PATH.name) -> None:
    """Raise ValueError naming the file, the row (1-based data row) and the column of the
    first problem: columns, empty text, unknown mixer or benchmark, an architecture that
    is not a spec name, a context that is not a whole number >= 0, a score that is not a
    percentage, a source without an arXiv id or URL, a missing conf tag, a duplicate key."""
    if tuple(df.columns) != COLUMNS:
        raise ValueError(f"{origin}: columns are {list(df.columns)}; expected {list(COLUMNS)}")
    if df.empty:
        raise ValueError(f"{origin}: no rows")

    def fail(i, col, why):
        raise ValueError(f"{origin}: row {i + 1}: {col}={df[col].iloc[i]!r} {why}")

    for col in _TEXT:
        for i, v in enumerate(df[col]):
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{origin}: row {i + 1}: {col} is empty; every row needs a {col}")
    for col, allowed in (("mixer", MIXERS), ("benchmark", BENCHMARKS)):
        for i, v in enumerate(df[col]):
            if v not in allowed:
                fail(i, col, f"is not known; allowed: {', '.join(allowed)}")
    for i, v in enumerate(df["architecture"]):
        if not isinstance(v, str) or (v and not _NAME.match(v)):
            fail(i, "architecture", "is not a catalog name; allowed: a spec name (lower case, digits, _) or empty")
    for i, v in enumerate(df["comparison"]):
        if not _NAME.match(v):
            fail(i, "comparison", "is not allowed; allowed: lower case, digits and _")
    context = pd.to_numeric(df["context_tokens"], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(context) & (context >= 0) & (context == np.floor(context)))
    if bad.any():
        fail(int(np.flatnonzero(bad)[0]), "context_tokens", "is not a whole number of tokens >= 0")
    score = pd.to_numeric(df["score"], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(score) & (score >= 0) & (score <= 100))
    if bad.any():
        fail(int(np.flatnonzero(bad)[0]), "score", "is not a percentage in [0, 100]")
    for i, v in enumerate(df["source"]):
        if not _CITED.search(v):
            fail(i, "source", "cites neither an arXiv id nor a URL")
    check_tagged_and_unique(df, pd.DataFrame({k: df[k].astype(str) for k in KEY}).assign(context_tokens=context),
                            KEY, origin)


@functools.lru_cache(maxsize=1)
def _table() -> pd.DataFrame:
    df = pd.read_csv(CSV_PATH, dtype=str, keep_default_na=False)
    validate(df)
    return df.astype({"context_tokens": int, "score": float})


def table() -> pd.DataFrame:
    """The validated table of published scores (a copy: edit freely)."""
    return _table().copy()


def scores(benchmark: str, context_tokens: int | None = None) -> pd.DataFrame:
    """The rows of one benchmark (and one context, when given), with a `label` column of
    the mixer's reader name. An unknown benchmark, or a context no row of it was measured
    at, is an InputError naming the allowed values."""
    df = _table()
    check_choice("benchmark", benchmark, sorted(set(df.benchmark)))
    rows = df[df.benchmark == benchmark]
    if context_tokens is not None:
        check_choice("context_tokens", int(context_tokens), sorted(int(c) for c in set(rows.context_tokens)))
        rows = rows[rows.context_tokens == int(context_tokens)]
    return rows.assign(label=rows.mixer.map(mixer_label)).reset_index(drop=True)


def benchmark_context(benchmark: str) -> int:
    """The one context a benchmark's rows were measured at; an InputError when they were
    measured at several (pass the context) or at none (0: mixed or short lengths)."""
    contexts = sorted(set(scores(benchmark).context_tokens))
    if len(contexts) != 1 or contexts[0] <= 0:
        raise InputError(f"benchmark={benchmark!r} has no single context length "
                         f"({', '.join(map(str, contexts))}); allowed: pass one of them as context_tokens")
    return int(contexts[0])


def best_per_architecture(benchmark: str, context_tokens: int | None = None) -> pd.DataFrame:
    """For each catalog architecture with a score on `benchmark` (at `context_tokens`), its
    highest published score and the checkpoint and source behind it (an architecture's
    checkpoints differ in training, not in cost). Indexed by architecture."""
    rows = scores(benchmark, context_tokens)
    rows = rows[rows.architecture != ""]
    if rows.empty:
        return rows.set_index("architecture")
    best = rows.loc[rows.groupby("architecture").score.idxmax()]
    return best.set_index("architecture")[["model", "mixer", "label", "score", "context_tokens", "comparison",
                                           "source", "notes"]]
