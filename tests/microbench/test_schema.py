"""The measurement schema and the torch-free parts of workbench.microbench (CI has no torch)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from workbench import microbench
from workbench.microbench import __main__ as cli
from workbench.microbench.schema import COLUMNS, SchemaError, load, record, save, to_dataset, to_frame


def _records():
    return [record(kind="gemm", hardware="h100_sxm", dtype="fp8", m=1024, n=1024, k=1024, devices=1,
                   metric="flops_per_s", value_si=2.7e14, time_s=7.8e-6, time_p25_s=7.7e-6, time_p75_s=8e-6,
                   time_min_s=7.6e-6, n_reps=20, source="test"),
            record(kind="memory", op="triad", hardware="h100_sxm", dtype="fp32", size_bytes=3e9, devices=1,
                   metric="bytes_per_s", value_si=2.97e12, source="test"),
            record(kind="all_reduce", op="all_reduce", hardware="h100_sxm", size_bytes=2.0**30, devices=8,
                   metric="bus_bandwidth_bytes_per_s", value_si=4.66e11, source="test")]


def test_record_fills_every_column_and_rejects_unknown_fields():
    r = record(kind="launch", hardware="cpu", metric="time_s", value_si=4e-6)
    assert set(r) == set(COLUMNS)
    assert r["op"] == "" and np.isnan(r["m"])
    with pytest.raises(SchemaError, match="bogus"):
        record(kind="gemm", bogus=1)


def test_dataset_round_trip_through_netcdf(tmp_path):
    ds = to_dataset(_records(), {"device_name": "NVIDIA H100 80GB HBM3", "torch": "2.x", "quick": 1})
    assert ds.sizes["measurement"] == 3
    assert ds["value_si"].attrs["long_name"].startswith("measured value")
    assert ds["time_s"].attrs["units"] == "s" and ds["size_bytes"].attrs["units"] == "B"
    path = tmp_path / "m.nc"
    save(ds, path)
    back = load(path)
    assert back.attrs["device_name"] == "NVIDIA H100 80GB HBM3"
    df = to_frame(back)
    assert list(df["kind"]) == ["gemm", "memory", "all_reduce"]
    assert list(df["op"]) == ["", "triad", "all_reduce"]
    np.testing.assert_allclose(df["value_si"], [2.7e14, 2.97e12, 4.66e11])
    assert np.isnan(df.loc[1, "m"]) and df.loc[2, "devices"] == 8


@pytest.mark.parametrize("change,match", [
    (dict(kind="matmul"), "kind='matmul'"), (dict(metric="TFLOPS"), "metric='TFLOPS'"),
    (dict(value_si=-1.0), "finite and positive"), (dict(value_si=np.nan), "finite and positive")])
def test_validate_names_the_bad_field(change, match):
    rows = _records()
    rows[0].update(change)
    with pytest.raises(SchemaError, match=match):
        to_dataset(rows)


def test_validate_requires_every_variable():
    ds = to_dataset(_records()).drop_vars("metric")
    with pytest.raises(SchemaError, match="'metric' is missing"):
        microbench.validate(ds)


@pytest.mark.parametrize("name,spec", [("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H200", "h200_sxm"),
                                       ("NVIDIA A100-SXM4-80GB", "a100_sxm"), ("NVIDIA B200", "b200"),
                                       ("AMD Instinct MI300X", "mi300x"), ("NVIDIA L4", "nvidia_l4"),
                                       ("NVIDIA GH200 480GB", "gh200"), ("AMD Instinct MI325X", "mi325x"),
                                       ("AMD Instinct MI355X", "mi355x"), ("GAUDI3", "gaudi3")])
def test_device_names_map_to_specs(name, spec):
    assert microbench.spec_name(name) == spec


def test_a_clear_error_without_torch(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'workbench\[microbench\]'"):
        microbench.run()
    assert cli.main(["--device", "cpu", "--quick", "--out", str(tmp_path / "x.nc")]) == 2
    assert "needs PyTorch" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


def test_plans_cover_every_suite_and_quick_is_smaller():
    for device in ("cpu", "cuda"):
        quick, full = microbench.plan(device, True), microbench.plan(device, False)
        assert set(quick) == set(full)
        assert len(quick["gemm_shapes"]) < len(full["gemm_shapes"])
        assert max(quick["memory_bytes"]) <= max(full["memory_bytes"])


def test_moe_rows_and_files_written_before_the_moe_columns(tmp_path):
    """An MoE layer's row keeps its experts, top-k and split; a file written before those
    columns existed loads with them NaN (they do not apply to its rows)."""
    ds = to_dataset([record(kind="moe", hardware="h200_sxm", metric="time_s", value_si=1e-4, time_s=1e-4, m=64.0,
                            k=7168.0, n=2048.0, n_experts=256.0, top_k=8.0, tp=1.0, ep=8.0, dtype="fp8_block")])
    df = to_frame(ds)
    assert df.loc[0, "n_experts"] == 256 and df.loc[0, "ep"] == 8
    old = ds.drop_vars(["n_experts", "top_k", "tp", "ep"])
    old.to_netcdf(tmp_path / "old.nc", encoding={c: {"dtype": str} for c in ("kind", "op", "hardware", "framework",
                                                                              "dtype", "kv_dtype", "metric", "source")})
    back = load(tmp_path / "old.nc")
    assert np.isnan(float(back["top_k"][0])) and str(back["kind"].values[0]) == "moe"


@pytest.fixture
def fake_run(monkeypatch):
    """microbench.run replaced (no torch here): the `workbench microbench` path around it."""
    calls = []

    def run(**kwargs):
        calls.append(kwargs)
        return to_dataset(_records(), {"device_name": "fake", "quick": int(kwargs["quick"])})
    monkeypatch.setattr(cli, "run", run)
    return calls


def test_workbench_microbench_checks_out_before_it_runs(tmp_path, capsys, fake_run):
    """--out was checked after the whole run (a folder: a PermissionError traceback) and an
    existing file was silently replaced: one line and exit 2 before anything runs; --force
    replaces a file."""
    from workbench.cli import main
    notes = tmp_path / "notes.nc"
    notes.write_text("mine")
    (tmp_path / "folder.nc").mkdir()
    for out, said in ((notes, "exists; allowed: a new path, or --force"), (tmp_path / "folder.nc", "is a folder"),
                      (tmp_path / "a.txt", "allowed: a .nc file path"),
                      (tmp_path / "no" / "a.nc", "cannot be written")):
        assert main(["microbench", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"out={str(out)!r}" in err and said in err and len(err.strip().splitlines()) == 1, err
    assert fake_run == [] and notes.read_text() == "mine"
    assert main(["microbench", "--out", str(notes), "--force"]) == 0
    assert load(notes).sizes["measurement"] == 3
    assert sorted(f.name for f in tmp_path.iterdir()) == ["folder.nc", "notes.nc"]  # no temporary file left


def test_workbench_microbench_runs_the_full_sweep_unless_quick(tmp_path, capsys, fake_run):
    """--quick did nothing (every run was quick): the full sweep by default, --quick the small one."""
    from workbench.cli import main
    assert main(["microbench", "--out", str(tmp_path / "full.nc")]) == 0
    assert main(["microbench", "--quick", "--out", str(tmp_path / "quick.nc")]) == 0
    assert [c["quick"] for c in fake_run] == [False, True]
    with pytest.raises(SystemExit):
        main(["microbench", "--help"])
    assert "default: the full sweep" in capsys.readouterr().out


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, capsys, fake_run, monkeypatch):
    out = tmp_path / "old.nc"
    out.write_text("an earlier file")

    def full_disk(ds, path):
        open(path, "w").write("part")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(cli, "save", full_disk)
    assert cli.main(["--out", str(out), "--force"]) == 2
    assert "cannot be written: No space left on device" in capsys.readouterr().err
    assert out.read_text() == "an earlier file" and [f.name for f in tmp_path.iterdir()] == ["old.nc"]
