"""How far two measurements of the same kernel on the same GPU agree: the floor under any
kernel model's error.

The kernel tables come per serving framework, each collected by its own run of its own
collector (aiconfigurator-core's collectors for TensorRT-LLM, vLLM and SGLang). Several
frameworks time the same library kernel at the same shapes:

- BF16 GEMM: every collector calls torch.nn.functional.linear (cuBLAS): SGLang's
  `sglang_torch_linear`, vLLM's `torch.nn.functional.linear` (`vllm_default` on A100),
  TensorRT-LLM's `torch_flow` (its PyTorch flow's Linear), and `sglang` on A100;
- block-scaled FP8 GEMM through DeepGEMM: SGLang's `sglang_deepgemm_gemm_nt_f8f8bf16`,
  vLLM's `DeepGemmFp8BlockScaledMMKernel`, TensorRT-LLM's `deepgemm`;
- context attention through FlashAttention-3: SGLang's `fa3`, vLLM's `vllm_flash_attn_fa3`.

Their disagreement at equal shapes, |ln(t_a / t_b)|, is what one GPU's "same kernel" varies
between two collections (clocks, library versions, the collector's timing loop). A model
scored against one table cannot be expected to beat it: if each table's log-time carries an
independent error of equal spread, the pair's disagreement is sqrt(2) times one table's, so
a perfect model's |error| quantiles are about the pair's divided by sqrt(2) (`floor_*`).

    workbench calibrate kernel-repeatability --tables DIR   # -> specs/kernels/repeatability.csv
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

REPEATABILITY_CSV = Path(__file__).resolve().parents[1] / "specs" / "kernels" / "repeatability.csv"
# (kernel class, dtype, kv dtype or None): the ops that run one library kernel, per collector
SAME_KERNEL = {
    ("gemm", "bf16", None): ("sglang_torch_linear", "torch.nn.functional.linear", "vllm_default", "torch_flow",
                             "sglang"),
    ("gemm", "fp8_block", None): ("sglang_deepgemm_gemm_nt_f8f8bf16", "DeepGemmFp8BlockScaledMMKernel", "deepgemm"),
    ("attention", "bf16", "bf16"): ("fa3", "vllm_flash_attn_fa3"),
}
SHAPE = {"gemm": ["m", "n", "k"],
         "attention": ["batch", "seq_len", "n_heads", "n_kv_heads", "head_dim", "window", "causal"]}
MIN_SHARED = 50  # shared shapes below which a pair is not reported


def _times(df: pd.DataFrame, kernel_class: str, dtype: str, kv: str | None) -> pd.Series:
    """Median time per shape of the rows of one library kernel in one framework's table."""
    rows = df[(df["kind"] == kernel_class) & (df["dtype"] == dtype)
              & df["op"].isin(SAME_KERNEL[(kernel_class, dtype, kv)])]
    if kv is not None:
        rows = rows[rows["kv_dtype"] == kv]
    cols = SHAPE[kernel_class]
    if rows.empty:
        return pd.Series(dtype=float)
    return rows.assign(**{c: rows[c].fillna(0.0) for c in cols}).groupby(cols)["time_s"].median()


def pair_agreement(a: pd.Series, b: pd.Series) -> dict | None:
    """Median and 90th percentile of |ln(a / b)| over the shapes both hold (None below MIN_SHARED)."""
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner")
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    if len(both) < MIN_SHARED:
        return None
    d = np.abs(np.log(both["a"].to_numpy() / both["b"].to_numpy()))
    med, p90 = float(np.median(d)), float(np.quantile(d, 0.9))
    return {"shapes": int(len(d)), "median_abs_log_ratio": med, "p90_abs_log_ratio": p90,
            "floor_median_abs_err": float(np.expm1(med / np.sqrt(2.0))),
            "floor_p90_abs_err": float(np.expm1(p90 / np.sqrt(2.0)))}


def repeatability(tables_dir: Path) -> pd.DataFrame:
    """One row per GPU, library kernel and pair of frameworks that both time it."""
    import xarray as xr
    from ..primitives.collectives import COLLECTIVE_LIBRARIES
    frames = {}
    for path in sorted(Path(tables_dir).glob("*-*.nc")):
        hw, fw = path.stem.rsplit("-", 1)
        if fw not in COLLECTIVE_LIBRARIES:
            frames.setdefault(hw, {})[fw] = xr.open_dataset(path).to_dataframe()
    out = []
    for hw, by_fw in sorted(frames.items()):
        for (kernel_class, dtype, kv), (fa, fb) in itertools.product(SAME_KERNEL, itertools.combinations(sorted(by_fw), 2)):
            s = pair_agreement(_times(by_fw[fa], kernel_class, dtype, kv), _times(by_fw[fb], kernel_class, dtype, kv))
            if s is not None:
                out.append({"hardware": hw, "kernel_class": kernel_class,
                            "variant": dtype if kv is None else f"{dtype}/{kv}", "frameworks": f"{fa}/{fb}", **s})
    return pd.DataFrame(out)


HEADER = ("# Agreement of two frameworks' tables timing the same library kernel at equal shapes "
          "(calibrate/kernel_repeatability.py), from aiconfigurator-core's kernel tables "
          "(workbench calibrate import-kernels); written by workbench calibrate kernel-repeatability\n")


def write_owned(df: pd.DataFrame, path: Path, header: str, command: str) -> Path:
    """Write `df` as CSV under `header` to `path`, replacing only a file `command` wrote (it
    starts with `header`); written beside it and renamed over it, so a failed write leaves
    the old file whole."""
    from ..errors import InputError
    if path.exists() and (not path.is_file() or not path.read_text(errors="replace").startswith(header)):
        raise InputError(f"out={str(path)!r} exists and was not written by {command}; allowed: a new "
                         f"path or an earlier CSV of {command}")
    from ..safe_output import replace_file
    return replace_file(path, lambda tmp: tmp.write_text(header + df.to_csv(index=False, float_format="%.4g")))


def write(df: pd.DataFrame, path: Path = REPEATABILITY_CSV) -> Path:
    """Write the figures to `path` (write_owned: only over a file kernel-repeatability wrote)."""
    return write_owned(df, path, HEADER, "kernel-repeatability")


def load(path: Path = REPEATABILITY_CSV) -> pd.DataFrame:
    return pd.read_csv(path, comment="#")
