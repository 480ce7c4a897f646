"""Published measurements (reference/measurements.csv, copied from shared/reference with
its source column) as a DataFrame with values in SI units."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

REFERENCE_CSV = Path(__file__).parent / "reference" / "measurements.csv"

# unit as written in the CSV -> factor to SI (s, bytes, FLOP/s, bytes/s, tokens/s)
UNIT_TO_SI = {
    "TFLOP/s": 1e12, "PFLOP/s": 1e15, "GB/s": 1e9, "TB/s": 1e12, "PB/s": 1e15,
    "GB": 1e9, "TB": 1e12, "ms": 1e-3, "s": 1.0, "tok/s": 1.0, "tok/s/GPU": 1.0,
    "tok/s/user": 1.0, "tok/s/req": 1.0, "%": 0.01,
}


WSE_CSV = Path(__file__).parent / "reference" / "wse_measurements.csv"
WSE_SERVICE_CSV = Path(__file__).parent / "reference" / "wse_service.csv"  # Cerebras Inference figures
WSE_TRAINING_CSV = Path(__file__).parent / "reference" / "wse_training.csv"  # CS-2 training rows (ids T...)
# WaferLLM's LLaMA2-13B, CodeLLaMA-34B and QWen2-72B rows on WSE-2 (ids W...)
WSE_MODELS_CSV = Path(__file__).parent / "reference" / "wse_waferllm_models.csv"


@lru_cache(maxsize=None)
def _load(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str).set_index("id")
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    if "unit" in df:
        df["value_si"] = df["value"] * df["unit"].map(UNIT_TO_SI)
    return df


def _row(path: Path, row_id: str) -> pd.Series:
    df = _load(path)
    if row_id not in df.index:
        raise KeyError(f"measurement {row_id!r} is not in {path.name}")
    return df.loc[row_id]


def reference() -> pd.DataFrame:
    """GPU and training rows (measurements.csv), indexed by id, `value_si` where the unit is known."""
    return _load(REFERENCE_CSV)


def row(row_id: str) -> pd.Series:
    """One measurement row; KeyError names the id."""
    return _row(REFERENCE_CSV, row_id)


def wse_reference() -> pd.DataFrame:
    """Published wafer-scale measurements (wse_measurements.csv, then the Cerebras
    Inference service figures of wse_service.csv, the CS-2 training rows of
    wse_training.csv and WaferLLM's rows of its larger models, wse_waferllm_models.csv),
    indexed by id."""
    return pd.concat([_load(WSE_CSV), _load(WSE_SERVICE_CSV), _load(WSE_TRAINING_CSV), _load(WSE_MODELS_CSV)])


def wse_row(row_id: str) -> pd.Series:
    """One wafer-scale row: ids S... from wse_service.csv, T... from wse_training.csv, W...
    from wse_waferllm_models.csv, the rest from wse_measurements.csv."""
    path = {"S": WSE_SERVICE_CSV, "T": WSE_TRAINING_CSV, "W": WSE_MODELS_CSV}.get(row_id[:1], WSE_CSV)
    return _row(path, row_id)
