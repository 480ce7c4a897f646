"""Published quantization deltas: the CSV loads and validates, every row is cited and
arithmetically consistent, lookups return the published number or NaN (never a guess),
and the Dataset view lines up with the table."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from workbench.errors import InputError
from workbench.quality import quantization as q
from workbench.quality import as_dataset, deltas, quality_delta
from workbench.specs import list_models


@pytest.fixture(scope="module")
def df():
    return deltas()


def test_loads_and_validates(df):
    assert tuple(df.columns) == q.COLUMNS
    assert len(df) >= 25
    q.validate(pd.read_csv(q.CSV_PATH, dtype=str, keep_default_na=False))  # the raw file, too
    assert not df.duplicated(list(q.KEY)).any()
    for col in ("weights", "activations", "kv"):
        assert set(df[col]) <= set(q.QUALITY_DTYPES)
    for col in ("baseline_value", "quantized_value", "delta", "relative_delta"):
        assert df[col].dtype == float and np.isfinite(df[col]).all()


def test_every_row_has_a_source_and_a_confidence(df):
    assert (df.source.str.strip().str.len() > 10).all()
    assert df.notes.str.contains(r"\bconf=(?:high|medium|low)\b").all()
    # A source is a paper (arXiv id) or a URL.
    assert df.source.str.contains(r"arXiv \d{4}\.\d{4,5}|https?://").all()


def test_delta_arithmetic(df):
    np.testing.assert_allclose(df.delta, df.quantized_value - df.baseline_value, atol=1e-9)
    np.testing.assert_allclose(df.relative_delta, df.delta / df.baseline_value, atol=1e-6)


def test_coverage_of_the_study_axes(df):
    def has(**kw):
        sel = np.ones(len(df), dtype=bool)
        for k, v in kw.items():
            sel &= (df[k] == v).to_numpy()
        return sel.any()

    # Weight-only int4 with RTN, GPTQ and AWQ at 7B, 13B and 70B.
    for model in ("llama_2_7b", "llama_2_13b", "llama_2_70b"):
        for method in ("RTN", "GPTQ", "AWQ"):
            assert has(model=model, weights="int4", activations="fp16", kv="fp16", method=method)
    assert has(weights="int8", activations="int8", method="SmoothQuant")
    for model in ("llama_3_1_8b", "llama_3_1_70b", "llama_3_1_405b"):
        assert has(model=model, weights="fp8", activations="fp8")
    for kv in ("fp8", "int4", "int2"):
        assert has(weights="fp16", activations="fp16", kv=kv)
    assert has(weights="int4", activations="int4", kv="int4", method="QuaRot")
    assert has(weights="int4", activations="int4", kv="int4", method="SpinQuant")
    assert has(weights="fp4", activations="fp4")


def test_catalog_names_are_used_where_they_exist(df):
    catalog = set(list_models())
    for model in ("llama_2_7b", "llama_2_13b", "llama_2_70b", "llama_3_8b", "llama_3_70b",
                  "llama_3_1_8b", "llama_3_1_70b", "llama_3_1_405b", "mixtral_8x7b"):
        assert model in catalog and model in set(df.model)
    # No near-miss spellings of catalog names (llama-2-7b, Llama_2_7B, ...).
    normal = {m.replace("-", "_").lower(): m for m in catalog}
    for m in set(df.model):
        assert normal.get(m.replace("-", "_").lower(), m) == m


def test_quality_delta_returns_the_published_number():
    # AWQ (Lin et al. 2024, arXiv 2306.00978) Table 4: Llama-2-7B WikiText-2 PPL,
    # FP16 5.47 -> INT4-g128 AWQ 5.60, a delta of +0.13.
    assert quality_delta("llama_2_7b", "int4", "fp16", "fp16", method="AWQ") == pytest.approx(0.13)
    # SmoothQuant (arXiv 2211.10438) Table 7: Llama-2-70B W8A8 3.320 -> 3.359; unique scheme,
    # so no method is needed.
    assert quality_delta("llama_2_70b", "int8", "int8", "fp16") == pytest.approx(0.039)
    # QuaRot (arXiv 2404.00456) Table 2: Llama-2-70B W4A4KV4 zero-shot average 77.07 -> 75.98.
    assert quality_delta("llama_2_70b", "int4", "int4", "int4", metric="zeroshot6_avg_acc",
                         method="QuaRot") == pytest.approx(-1.09)


def test_quality_delta_is_nan_when_nothing_was_published():
    # A scheme no source in the table measured: fp8 KV on Llama-2-7B perplexity.
    assert math.isnan(quality_delta("llama_2_7b", "fp8", "fp8", "fp8"))
    # A catalog model without any row.
    assert math.isnan(quality_delta("deepseek_v3", "fp4", "fp4", "bf16"))
    # A known method, but not for this model.
    assert math.isnan(quality_delta("llama_3_8b", "int4", "fp16", "fp16", method="AWQ"))


def test_ambiguous_scheme_asks_for_a_method():
    with pytest.raises(InputError, match=r"method=None.*allowed: AWQ, GPTQ, RTN"):
        quality_delta("llama_2_7b", "int4", "fp16", "fp16")


@pytest.mark.parametrize("kwargs, arg", [
    (dict(model="llama2-7b"), "model"),
    (dict(weights="int5"), "weights"),
    (dict(activations="fp32"), "activations"),
    (dict(kv="e4m3"), "kv"),
    (dict(metric="wikitext_ppl"), "metric"),
    (dict(method="AWQv2"), "method"),
])
def test_errors_name_the_argument_and_the_allowed_values(kwargs, arg):
    args = dict(model="llama_2_7b", weights="int4", activations="fp16", kv="fp16")
    args.update(kwargs)
    with pytest.raises(InputError, match=rf"^{arg}=.*allowed: "):
        quality_delta(**args)


def test_validate_rejects_bad_tables(df, rejects_bad_tables):
    rejects_bad_tables(q, [
        ("kv", "int5", r"row 1: kv='int5' is not known"),
        ("source", " ", r"row 1: source is empty"),
        ("delta", "0.5", r"row 1: delta=.* is not quantized_value - baseline_value"),
        ("relative_delta", "0.5", r"row 1: relative_delta=.* is not delta / baseline_value"),
        ("baseline_value", "n/a", r"row 1: baseline_value='n/a' is not a finite number"),
        ("notes", "read from a figure", r"row 1: notes lack a conf tag"),
    ])


def test_deltas_returns_a_copy():
    mine = deltas()
    mine.loc[0, "delta"] = 1e9
    assert deltas().loc[0, "delta"] != 1e9


def test_as_dataset_lines_up_with_the_table(df):
    ds = as_dataset("wikitext2_ppl")
    assert isinstance(ds, xr.Dataset) and ds.relative_delta.dims == ("model", "scheme")
    assert ds.attrs["metric"] == "wikitext2_ppl" and ds.attrs["higher_is_better"] == 0
    rows = df[df.metric == "wikitext2_ppl"]
    assert int(np.isfinite(ds.relative_delta).sum()) == len(rows)  # every row once, nothing else
    for r in rows.itertuples():
        cell = ds.sel(model=r.model, scheme=q.scheme_label(r.weights, r.activations, r.kv, r.method))
        assert float(cell.relative_delta) == r.relative_delta
        assert float(cell.delta) == r.delta and cell.source.item() == r.source
    # Scheme coordinates select by dtype: the KV-only int4 schemes.
    kv4 = ds.where((ds.kv == "int4") & (ds.weights == "fp16"), drop=True)
    assert set(kv4.method.values) == {"INT4 per-token", "KVQuant-4bit-1%"}
    # Unpublished cells are NaN, never filled in.
    cell = ds.sel(model="mixtral_8x7b", scheme=q.scheme_label("int4", "int4", "int4", "QuaRot"))
    assert np.isnan(float(cell.relative_delta)) and cell.source.item() == ""


def test_as_dataset_for_an_accuracy_metric_and_an_unknown_one():
    ds = as_dataset("openllm_v1_avg")
    assert ds.attrs["higher_is_better"] == 1
    assert (ds.relative_delta.fillna(0) <= 0.01).all()  # FP8 W8A8 is within 1% on every model
    with pytest.raises(InputError, match="metric="):
        as_dataset("bleu")
