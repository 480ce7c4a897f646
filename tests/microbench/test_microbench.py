"""The microbenchmarks on CPU at small sizes (skipped where torch is not installed, as in CI)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from workbench import microbench  # noqa: E402
from workbench.microbench import __main__ as cli  # noqa: E402

TINY = dict(gemm_shapes=[(32, 32, 32), (64, 64, 64)], gemm_dtypes=["fp32", "bf16"], attn_seq_lens=[32, 64],
            attn=dict(dtype="fp32", batch=1, n_heads=2, head_dim=16), memory_bytes=[2**14, 2**18],
            coll_bytes=[2**10, 2**14], reps=3, warmup=1)


@pytest.fixture(scope="module")
def ds():
    return microbench.run("cpu", quick=True, overrides=TINY)


def test_every_suite_measures(ds):
    df = microbench.to_frame(ds)
    assert sorted(set(df.kind)) == ["attention", "gemm", "launch", "memory"]
    assert (df.kind == "gemm").sum() == 4 and (df.kind == "memory").sum() == 4  # copy and triad per size
    assert (df.value_si > 0).all() and (df.time_s > 0).all() and (df.n_reps == 3).all()
    assert (df.time_min_s <= df.time_p25_s + 1e-15).all()
    assert ((df.time_p25_s <= df.time_s) & (df.time_s <= df.time_p75_s)).all()


def test_values_follow_from_the_median_time(ds):
    df = microbench.to_frame(ds)
    g = df[df.kind == "gemm"]
    np.testing.assert_allclose(g.value_si, 2 * g.m * g.n * g.k / g.time_s)
    a = df[df.kind == "attention"]
    np.testing.assert_allclose(a.value_si, 4 * a.batch * a.seq_len**2 * a.n_heads * a.head_dim * 0.5 / a.time_s)
    m = df[df.kind == "memory"]
    moved = np.where(m.op == "triad", 3, 2) * np.array([2**14, 2**14, 2**18, 2**18])
    np.testing.assert_allclose(m.size_bytes, moved)
    np.testing.assert_allclose(m.value_si, m.size_bytes / m.time_s)


def test_attrs_record_the_environment(ds):
    a = ds.attrs
    assert a["torch"] == torch.__version__ and a["device"] == "cpu" and a["hardware"] == "cpu"
    assert a["device_name"] and a["created_utc"] and a["quick"] == 1
    assert "collectives: 1 device(s)" in a["skipped"]  # one CPU rank: skipped, not failed


def test_command_line_writes_netcdf(tmp_path, capsys):
    out = tmp_path / "cpu.nc"
    assert cli.main(["--device", "cpu", "--quick", "--out", str(out), "--suites", "memory,launch"]) == 0
    back = microbench.load(out)
    assert set(back["kind"].values) == {"memory", "launch"}
    assert "measurements" in capsys.readouterr().out


def test_cuda_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        microbench.run("cuda")


def test_collectives_on_two_cpu_ranks():
    """torch.distributed with gloo on two local processes: the code path GPUs take with NCCL."""
    ds = microbench.run("cpu", suites=("collectives",), world_size=2, overrides={**TINY, "coll_bytes": [2**12, 2**16]})
    df = microbench.to_frame(ds)
    assert sorted(set(df.kind)) == ["all_gather", "all_reduce"] and (df.devices == 2).all()
    ar = df[df.kind == "all_reduce"]
    np.testing.assert_allclose(ar.value_si, ar.size_bytes / ar.time_s * 2 * (2 - 1) / 2)
