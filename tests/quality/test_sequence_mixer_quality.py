"""Published quality of sequence mixers: the CSV loads and validates, every row is cited
and in range, the mixer kind of each catalog architecture agrees with its spec, lookups
return the published number, and a bad table is rejected with the row and column named."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from workbench.errors import InputError
from workbench.quality import sequence_mixers as sm
from workbench.specs import list_models, load_model

# Hybrids whose specs another change adds to the catalog; their rows name them already.
PENDING = {"nvidia_nemotron_3_nano_30b_a3b", "kimi_linear_48b_a3b"}


@pytest.fixture(scope="module")
def df():
    return sm.table()


def test_loads_and_validates(df):
    assert tuple(df.columns) == sm.COLUMNS
    assert len(df) >= 40
    sm.validate(pd.read_csv(sm.CSV_PATH, dtype=str, keep_default_na=False))  # the raw file, too
    assert not df.duplicated(list(sm.KEY)).any()
    assert set(df.mixer) <= set(sm.MIXERS) and set(df.benchmark) <= set(sm.BENCHMARKS)
    assert df.score.between(0, 100).all() and (df.context_tokens >= 0).all()
    # Long-context rows say the length they were measured at, except the mixed-length LongBench v2.
    long = df[df.benchmark.isin(sm.LONG_CONTEXT) & (df.benchmark != "longbench_v2")]
    assert (long.context_tokens >= 4096).all()


def test_every_row_has_a_source_and_a_confidence(df):
    assert (df.source.str.strip().str.len() > 20).all()
    assert df.source.str.contains(r"arXiv \d{4}\.\d{4,5}|https?://").all()
    assert df.notes.str.contains(r"\bconf=(?:high|medium|low)\b").all()


def test_coverage_of_the_mixer_kinds(df):
    # Each kind the study compares has a published score, and the long-context benchmarks
    # cover full attention, GQA, MLA, sliding windows and the three linear hybrids.
    for kind in ("mha", "gqa", "mla", "sliding_window", "dsa", "gdn_hybrid", "kda_hybrid", "mamba2_hybrid"):
        assert (df.mixer == kind).any(), kind
    long = df[df.benchmark.isin(sm.LONG_CONTEXT)]
    assert {"mha", "gqa", "mla", "sliding_window", "gdn_hybrid", "kda_hybrid", "mamba2_hybrid"} <= set(long.mixer)
    # The DSA comparison: V3.2-Exp against its dense-MLA baseline on the same benchmarks.
    dsa = df[df.comparison == "deepseek_v32_exp_readme"]
    assert set(dsa[dsa.mixer == "dsa"].benchmark) == set(dsa[dsa.mixer == "mla"].benchmark)


def test_architectures_are_catalog_names(df):
    named = set(df.architecture) - {""}
    assert named - set(list_models()) <= PENDING


def test_mixer_agrees_with_the_spec_of_its_architecture(df):
    catalog = set(list_models())
    rows = df[(df.architecture != "") & df.architecture.isin(catalog)]
    assert len(rows) >= 20
    for arch, group in rows.groupby("architecture"):
        assert set(group.mixer) == {sm.mixer_kind(load_model(arch))}, arch


@pytest.mark.parametrize("model, kind", [
    ("llama_2_7b", "mha"), ("llama_3_1_8b", "gqa"), ("qwen3_30b_a3b", "gqa"), ("deepseek_v3", "mla"),
    ("gpt_oss_120b", "sliding_window"), ("qwen3_5_122b_a10b", "gdn_hybrid"), ("deepseek_v3_2", "dsa"),
])
def test_mixer_kind_of_catalog_specs(model, kind):
    assert sm.mixer_kind(load_model(model)) == kind


def test_mixer_kind_reads_the_linear_kind():
    base = dict(n_linear_layers=30, index_topk=0, is_mla=False, n_sliding_layers=0, n_kv_heads=2, n_heads=16,
                is_compressed=False)
    assert sm.mixer_kind(SimpleNamespace(**base)) == "gdn_hybrid"  # a spec without linear_kind: Gated DeltaNet
    assert sm.mixer_kind(SimpleNamespace(**base, linear_kind="kda")) == "kda_hybrid"
    assert sm.mixer_kind(SimpleNamespace(**base, linear_kind="mamba2")) == "mamba2_hybrid"
    assert sm.mixer_kind(SimpleNamespace(**dict(base, n_linear_layers=0, n_kv_heads=1))) == "mqa"
    assert sm.mixer_kind(load_model("deepseek_v4_flash")) == "compressed"  # CSA / HCA layers beside windows
    assert sm.mixer_label("kda_hybrid") == "KDA hybrid" and sm.mixer_label("new_kind") == "new_kind"


def test_published_numbers():
    # NVIDIA/RULER README main table: Llama-3.1-8B-Instruct at 128K scores 77.0.
    ruler = sm.scores("ruler", 131072).set_index("model")
    assert ruler.loc["Llama-3.1-8B-Instruct", "score"] == 77.0
    # Kimi Linear report (arXiv 2510.26692), Figure 1: RULER at 128k 84.3.
    assert ruler.filter(like="Kimi Linear", axis=0).score.item() == 84.3
    # DeepSeek-V3.2-Exp README: MMLU-Pro 85.0 for both the sparse model and V3.1-Terminus.
    mmlu = sm.scores("mmlu_pro").set_index("model")
    assert mmlu.loc["DeepSeek-V3.2-Exp", "score"] == mmlu.loc["DeepSeek-V3.1-Terminus", "score"] == 85.0
    # NVIDIA-NeMo/Nemotron super3 evaluate.md: AA-LCR gpt-oss-120b 51.00, Qwen3.5-122B-A10B 66.90.
    best = sm.best_per_architecture("aa_lcr")
    assert best.loc["gpt_oss_120b", "score"] == 51.0 and best.loc["qwen3_5_122b_a10b", "score"] == 66.9
    assert sm.benchmark_context("aa_lcr") == 100000


def test_best_per_architecture_keeps_the_highest_published_checkpoint():
    best = sm.best_per_architecture("ruler", 131072)
    # Qwen3-30B-A3B (79.2, RULER README) and its 2507 update (89.1, Qwen3-Next card): the update.
    assert best.loc["qwen3_30b_a3b", "score"] == 89.1
    assert best.loc["qwen3_30b_a3b", "model"] == "Qwen3-30B-A3B-Instruct-2507"
    assert "" not in best.index  # checkpoints outside the catalog are not architectures


def test_lookup_errors_name_the_allowed_values():
    with pytest.raises(InputError, match=r"^benchmark='bleu' is not known; allowed: .*aa_lcr"):
        sm.scores("bleu")
    with pytest.raises(InputError, match=r"^context_tokens=1234 is not known; allowed: 4096"):
        sm.scores("ruler", 1234)
    with pytest.raises(InputError, match="no single context length"):
        sm.benchmark_context("ruler")


def test_table_returns_a_copy():
    mine = sm.table()
    mine.loc[0, "score"] = 1e9
    assert sm.table().loc[0, "score"] != 1e9


def test_validate_rejects_bad_tables(rejects_bad_tables):
    raw = rejects_bad_tables(sm, [
        ("mixer", "linear", r"row 1: mixer='linear' is not known; allowed: mha"),
        ("benchmark", "niah", r"row 1: benchmark='niah' is not known"),
        ("source", " ", r"row 1: source is empty"),
        ("source", "a blog post somewhere", r"row 1: source=.* cites neither an arXiv id nor a URL"),
        ("score", "120", r"row 1: score='120' is not a percentage in \[0, 100\]"),
        ("score", "n/a", r"row 1: score='n/a' is not a percentage"),
        ("context_tokens", "-1", r"row 1: context_tokens='-1' is not a whole number"),
        ("context_tokens", "128k", r"row 1: context_tokens='128k' is not a whole number"),
        ("architecture", "Llama-2-7B", r"row 1: architecture='Llama-2-7B' is not a catalog name"),
        ("comparison", "RULER table", r"row 1: comparison='RULER table' is not allowed"),
        ("notes", "read from a figure", r"row 1: notes lack a conf tag"),
    ], more=lambda raw: [(raw.iloc[0:0], r"no rows")])
    third = raw.copy()
    third.loc[2, "score"] = "-5"
    with pytest.raises(ValueError, match=r"^test\.csv: row 3: "):  # the row is the data row, 1-based
        sm.validate(third, origin="test.csv")
