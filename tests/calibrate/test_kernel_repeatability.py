"""Two frameworks' tables of one library kernel against each other (calibrate/kernel_repeatability.py):
the statistic on known noise, the pairing on a small tables folder, and what the committed
figures (specs/kernels/repeatability.csv, from aiconfigurator-core 0.12.0's tables) say."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from owned_csv_checks import refuses_others_files_and_empty_folders

from workbench.calibrate import kernel_repeatability as kr
from workbench.primitives.gemm import HOST_BOUND_FACTOR

# quantiles of |N(0, 1)|: the median 0.6745 and the 90th percentile 1.6449 (normal table)
HALF_NORMAL_MEDIAN, HALF_NORMAL_P90 = 0.6745, 1.6449


def _gemm_times(n_shapes: int, seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    idx = pd.MultiIndex.from_arrays([rng.integers(1, 8192, n_shapes) for _ in range(3)], names=["m", "n", "k"])
    return pd.Series(1e-5 * rng.uniform(1.0, 100.0, n_shapes), index=idx).groupby(level=[0, 1, 2]).first()


def test_the_floor_recovers_the_noise_of_each_table():
    """Each table's log-time carries independent N(0, sigma^2): their difference N(0, 2 sigma^2), so
    the pair's |ln ratio| quantiles over sqrt(2) are one table's: median 0.6745 sigma, p90 1.6449 sigma."""
    truth = _gemm_times(20000)
    rng = np.random.default_rng(1)
    sigma = 0.05
    a = truth * np.exp(sigma * rng.standard_normal(len(truth)))
    b = truth * np.exp(sigma * rng.standard_normal(len(truth)))
    s = kr.pair_agreement(a, b)
    assert s["shapes"] == len(truth)
    assert s["floor_median_abs_err"] == pytest.approx(np.expm1(HALF_NORMAL_MEDIAN * sigma), rel=0.05)
    assert s["floor_p90_abs_err"] == pytest.approx(np.expm1(HALF_NORMAL_P90 * sigma), rel=0.05)
    assert kr.pair_agreement(a, a)["p90_abs_log_ratio"] == 0.0  # one table against itself
    assert kr.pair_agreement(a.iloc[:kr.MIN_SHARED - 1], b) is None  # too few shared shapes to say


def test_only_the_same_library_kernel_is_paired(tmp_path):
    """Two frameworks' BF16 GEMMs through torch linear pair up; a GEMM of another kernel (vLLM's
    CUTLASS FP8) does not, nor a GPU with one framework's table."""
    xr = pytest.importorskip("xarray")
    truth = _gemm_times(400)
    shapes = truth.index.to_frame(index=False)

    def table(op, dtype, scale):
        return shapes.assign(kind="gemm", op=op, dtype=dtype, kv_dtype=np.nan, time_s=truth.to_numpy() * scale)

    frames = {"h100_sxm-sglang": [table("sglang_torch_linear", "bf16", 1.0), table("sglang_fp8", "fp8", 1.0)],
              "h100_sxm-vllm": [table("torch.nn.functional.linear", "bf16", 1.1),
                                table("CutlassFP8ScaledMMLinearKernel", "fp8", 3.0)],
              "b200-vllm": [table("torch.nn.functional.linear", "bf16", 1.0)]}
    for name, parts in frames.items():
        xr.Dataset.from_dataframe(pd.concat(parts, ignore_index=True)).to_netcdf(tmp_path / f"{name}.nc")
    df = kr.repeatability(tmp_path)
    assert df[["hardware", "kernel_class", "variant", "frameworks"]].values.tolist() == \
        [["h100_sxm", "gemm", "bf16", "sglang/vllm"]]
    assert df.median_abs_log_ratio.iloc[0] == pytest.approx(np.log(1.1))  # the 10% between the two, every shape


@pytest.fixture(scope="module")
def committed():
    return kr.load()


def test_two_collections_of_one_cublas_gemm_agree_at_the_median(committed):
    """BF16 GEMMs (torch linear, cuBLAS) of two frameworks' collections on every GPU: within 8%
    at the median shape, but 8-46% apart at the 90th percentile: the floor under a BF16 GEMM
    model's p90 error is several percent on every GPU (about p90 / sqrt(2) of the pair)."""
    bf16 = committed[(committed.kernel_class == "gemm") & (committed.variant == "bf16")]
    assert set(bf16.hardware) >= {"a100_sxm", "h100_sxm", "h200_sxm", "b200", "gb200", "b300", "gb300"}
    assert (bf16.median_abs_log_ratio < np.log(1.08)).all()
    assert (bf16.p90_abs_log_ratio > bf16.median_abs_log_ratio).all()
    assert (bf16.floor_p90_abs_err > 0.05).all()


def test_vllm_block_fp8_tables_hold_host_time(committed):
    """vLLM's DeepGEMM block-FP8 tables on Blackwell time its Python call path too: at the median
    shape more than HOST_BOUND_FACTOR x what SGLang's and TensorRT-LLM's DeepGEMM take on the same
    GPU, which agree with each other within 6% (gemm.HOST_BOUND_FACTOR's reading, from the pairs)."""
    fp8b = committed[(committed.kernel_class == "gemm") & (committed.variant == "fp8_block")
                     & committed.hardware.isin(["b200", "gb200", "b300", "gb300"])]
    with_vllm = fp8b[fp8b.frameworks.str.contains("vllm")]
    without = fp8b[~fp8b.frameworks.str.contains("vllm")]
    assert len(with_vllm) == 8 and len(without) == 4
    assert (with_vllm.median_abs_log_ratio > np.log(HOST_BOUND_FACTOR)).all()
    assert (without.median_abs_log_ratio < np.log(1.06)).all()


def test_the_command_writes_the_csv_and_refuses_an_empty_folder(tmp_path, capsys):
    from workbench.cli import main
    xr = pytest.importorskip("xarray")
    truth = _gemm_times(200)
    shapes = truth.index.to_frame(index=False)
    for fw, op in (("sglang", "sglang_torch_linear"), ("trtllm", "torch_flow")):
        frame = shapes.assign(kind="gemm", op=op, dtype="bf16", kv_dtype=np.nan, time_s=truth.to_numpy())
        xr.Dataset.from_dataframe(frame).to_netcdf(tmp_path / f"a100_sxm-{fw}.nc")
    out = tmp_path / "rep.csv"
    assert main(["calibrate", "kernel-repeatability", "--tables", str(tmp_path), "--out", str(out)]) == 0
    got = kr.load(out)
    assert got.frameworks.tolist() == ["sglang/trtllm"] and got.median_abs_log_ratio.tolist() == [0.0]
    assert main(["calibrate", "kernel-repeatability", "--tables", str(tmp_path), "--out", str(out)]) == 0  # its own
    refuses_others_files_and_empty_folders("kernel-repeatability", tmp_path, tmp_path, capsys)
