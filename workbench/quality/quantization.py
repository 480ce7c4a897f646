"""Published quality changes caused by quantizing weights, activations and the KV cache.

The data live in `quantization_deltas.csv` (one row per published measurement): the model
(our catalog name where one exists, else a free name), the quantized scheme
(`weights`, `activations`, `kv`, each a dtype name), the `method`, the `metric`, the
published `baseline_value` and `quantized_value`, `delta` = quantized - baseline,
`relative_delta` = delta / baseline, the `source` (paper and table, or model card URL and
section) and `notes` (always a `conf=high|medium|low` tag, plus anything approximated).

Nothing here estimates a number: a scheme no source measured is NaN. Metrics keep their
published scale (percent or fraction, as the source printed them), so compare across
rows through `relative_delta`. Metrics ending in `_ppl` are better when
lower; all others are better when higher (`higher_is_better`). Rows of one metric may
differ in evaluation setup (context length, task mix): read `notes` before comparing.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import InputError, check_choice

CSV_PATH = Path(__file__).with_name("quantization_deltas.csv")
COLUMNS = ("model", "weights", "activations", "kv", "method", "metric", "baseline_value",
           "quantized_value", "delta", "relative_delta", "source", "notes")
KEY = ("model", "weights", "activations", "kv", "method", "metric")
# Storage dtypes of a quantized tensor. units.DTYPES plus the sub-4-bit integer codes that
# KV-cache papers use (int3, int2); non-uniform codebooks (KVQuant's nuqN) are filed
# under intN of the same width, with the detail in `notes`.
QUALITY_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "int3", "int2", "fp4")
CONF_LEVELS = ("high", "medium", "low")
_CONF = re.compile(r"\bconf=(high|medium|low)\b")
_TEXT = ("model", "weights", "activations", "kv", "method", "metric", "source", "notes")
_NUMBERS = ("baseline_value", "quantized_value", "delta", "relative_delta")


def higher_is_better(metric: str) -> bool:
    """Perplexities (`*_ppl`) improve downwards; accuracies, averages and recoveries up."""
    return not metric.endswith("_ppl")


def validate(df: pd.DataFrame, *, origin: str = CSV_PATH.name) -> None:
    """Raise ValueError naming the file, the row (1-based data row) and the column of the
    first problem: columns, empty text, unknown dtype, non-numeric or non-finite value,
    delta or relative_delta inconsistent with the values, missing conf tag, duplicate key."""
    if tuple(df.columns) != COLUMNS:
        raise ValueError(f"{origin}: columns are {list(df.columns)}; expected {list(COLUMNS)}")
    if df.empty:
        raise ValueError(f"{origin}: no rows")
    for col in _TEXT:
        for i, v in enumerate(df[col]):
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{origin}: row {i + 1}: {col} is empty; every row needs a {col}")
    for col in ("weights", "activations", "kv"):
        for i, v in enumerate(df[col]):
            if v not in QUALITY_DTYPES:
                raise ValueError(f"{origin}: row {i + 1}: {col}={v!r} is not known; "
                                 f"allowed: {', '.join(QUALITY_DTYPES)}")
    values = {}
    for col in _NUMBERS:
        x = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(x)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{origin}: row {i + 1}: {col}={df[col].iloc[i]!r} is not a finite number")
        values[col] = x
    b, q, d, r = (values[c] for c in _NUMBERS)
    checks = (
        ("baseline_value", b == 0, "must be non-zero (relative_delta divides by it)"),
        ("delta", ~np.isclose(d, q - b, rtol=1e-6, atol=1e-6), "is not quantized_value - baseline_value"),
        ("relative_delta", ~np.isclose(r, (q - b) / np.where(b == 0, 1, b), rtol=1e-4, atol=1e-6),
         "is not delta / baseline_value"),
    )
    for col, bad, why in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{origin}: row {i + 1}: {col}={df[col].iloc[i]!r} {why}")
    check_tagged_and_unique(df, df, KEY, origin)


def check_tagged_and_unique(df: pd.DataFrame, keys: pd.DataFrame, key: tuple, origin: str) -> None:
    """Every row's notes carry a conf=high|medium|low tag, and no two rows share the `key`
    columns of `keys` (the table's own, or normalized copies of them): ValueError naming
    the row. Shared by the published-quality tables (this one, sequence_mixers.py)."""
    for i, note in enumerate(df["notes"]):
        if not _CONF.search(note):
            raise ValueError(f"{origin}: row {i + 1}: notes lack a conf tag; "
                             f"allowed: {', '.join('conf=' + c for c in CONF_LEVELS)}")
    dup = keys.duplicated(list(key), keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        shown = ", ".join(f"{k}={df[k].iloc[i]!r}" for k in key)
        raise ValueError(f"{origin}: row {i + 1}: duplicate of an earlier row ({shown})")


@functools.lru_cache(maxsize=1)
def _table() -> pd.DataFrame:
    df = pd.read_csv(CSV_PATH, dtype={c: str for c in _TEXT}, keep_default_na=False)
    validate(df)
    for col in _NUMBERS:
        df[col] = df[col].astype(float)
    return df


def deltas() -> pd.DataFrame:
    """The validated table of published quantization deltas (a copy: edit freely)."""
    return _table().copy()


def _known(col: str) -> list[str]:
    return sorted(set(_table()[col]))


def _models() -> list[str]:
    from ..specs import list_models  # catalog names are valid even without a published row
    return sorted(set(_known("model")) | set(list_models()))


def _match(model: str, weights: str, activations: str, kv: str, metric: str, method) -> pd.DataFrame:
    check_choice("model", model, _models())
    for arg, v in (("weights", weights), ("activations", activations), ("kv", kv)):
        check_choice(arg, v, QUALITY_DTYPES)
    check_choice("metric", metric, _known("metric"))
    if method is not None:
        check_choice("method", method, _known("method"))
    df = _table()
    sel = ((df.model == model) & (df.weights == weights) & (df.activations == activations)
           & (df.kv == kv) & (df.metric == metric))
    if method is not None:
        sel &= df.method == method
    return df[sel]


def quality_delta(model: str, weights: str, activations: str, kv: str,
                  metric: str = "wikitext2_ppl", method: str | None = None) -> float:
    """The published `delta` (quantized - baseline, in the metric's own units) for one
    model, scheme and metric, or NaN when no source measured it (never an estimate).

    With `method=None` the scheme must identify a single published row; when several
    methods were published for it (e.g. RTN, GPTQ and AWQ at int4 weights) an InputError
    names them so the caller picks one.
    """
    rows = _match(model, weights, activations, kv, metric, method)
    if rows.empty:
        return float("nan")
    if len(rows) > 1:
        raise InputError(
            f"method=None matches {len(rows)} published rows for model={model!r} weights={weights!r} "
            f"activations={activations!r} kv={kv!r} metric={metric!r}; "
            f"allowed: {', '.join(sorted(rows.method))}")
    return float(rows.delta.iloc[0])


def scheme_label(weights: str, activations: str, kv: str, method: str) -> str:
    """The `scheme` coordinate of `as_dataset`: dtypes and method in one label."""
    return f"W:{weights} A:{activations} KV:{kv} | {method}"


def as_dataset(metric: str = "wikitext2_ppl") -> xr.Dataset:
    """Published deltas of one metric as an xr.Dataset over (model, scheme).

    Data variables: `relative_delta` (dimensionless), `delta`, `baseline_value`,
    `quantized_value` (the metric's units) and `source`; NaN (or "") where nothing was
    published. The `scheme` dimension carries `weights`, `activations`, `kv` and `method`
    as coordinates, so a study can select e.g. `ds.where(ds.kv == "int4", drop=True)` or
    merge on the model dimension.
    """
    check_choice("metric", metric, _known("metric"))
    df = _table()
    df = df[df.metric == metric].copy()
    df["scheme"] = [scheme_label(*t) for t in zip(df.weights, df.activations, df.kv, df.method)]
    models = sorted(set(df.model))
    schemes = list(dict.fromkeys(df.sort_values(["kv", "activations", "weights", "method"]).scheme))
    idx = df.set_index(["model", "scheme"])
    full = pd.MultiIndex.from_product([models, schemes], names=["model", "scheme"])

    def grid(col, fill):
        return idx[col].reindex(full, fill_value=fill).to_numpy().reshape(len(models), len(schemes))

    per_scheme = df.drop_duplicates("scheme").set_index("scheme").loc[schemes]
    coords = {"model": models, "scheme": schemes,
              **{c: ("scheme", per_scheme[c].to_numpy()) for c in ("weights", "activations", "kv", "method")}}
    dims = ("model", "scheme")
    ds = xr.Dataset(
        {
            "relative_delta": (dims, grid("relative_delta", np.nan).astype(float),
                               {"units": "1",
                                "long_name": f"relative change of {metric} ((quantized - baseline) / baseline)"}),
            "delta": (dims, grid("delta", np.nan).astype(float),
                      {"long_name": f"change of {metric} (quantized - baseline)"}),
            "baseline_value": (dims, grid("baseline_value", np.nan).astype(float),
                               {"long_name": f"{metric}, unquantized baseline"}),
            "quantized_value": (dims, grid("quantized_value", np.nan).astype(float),
                                {"long_name": f"{metric}, quantized"}),
            "source": (dims, grid("source", "").astype(object), {"long_name": "published source"}),
        },
        coords=coords,
        attrs={"metric": metric, "higher_is_better": int(higher_is_better(metric)),
               "source_file": f"workbench/quality/{CSV_PATH.name}",
               "description": "published quantization deltas; NaN where no source measured the scheme"},
    )
    return ds
