"""Sweeps: grids, dense vs dask-blocked evaluation, netCDF round trip, provenance, units."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench import predict, sweep
from workbench.errors import InputError

FIXED = dict(hardware="h100_sxm", model="llama_3_1_8b", weights="fp8", kv="fp8")


def _grid():
    return sweep.grid(batch=[1, 2, 4, 8, 16, 32, 64, 128], prompt=[128, 512, 2048, 8192], generate=[64, 256])


def test_grid_axes_and_bad_axis():
    g = sweep.grid(hardware=["h100_sxm", "cs3"], batch=[1, 8])
    assert g["hardware"].dims == ("hardware",) and list(g["batch"].values) == [1, 8]
    with pytest.raises(InputError, match="axis batch"):
        sweep.grid(batch=[])


def test_dense_result_has_units_provenance_and_grid_order():
    ds = sweep.evaluate(predict.inference, _grid(), fixed=FIXED)
    assert ds.tpot_s.dims == ("batch", "prompt", "generate")
    for name in ds.data_vars:
        assert "long_name" in ds[name].attrs, name
    assert ds.tpot_s.attrs["units"] == "s" and ds.memory_per_device_bytes.attrs["units"] == "B"
    assert ds.output_tokens_per_s_per_device.attrs["units"] == "tokens/s"
    for key in ("workbench_version", "git_sha", "created_utc", "function", "axes", "fixed"):
        assert key in ds.attrs
    assert "llama_3_1_8b" in ds.attrs["fixed"]


def test_blocked_evaluation_equals_dense():
    dense = sweep.evaluate(predict.inference, _grid(), fixed=FIXED)
    blocked = sweep.evaluate(predict.inference, _grid(), fixed=FIXED, memory_budget_bytes=2e4)
    xr.testing.assert_identical(dense.drop_attrs(), blocked.drop_attrs())


def test_netcdf_round_trip_is_identical(tmp_path):
    ds = sweep.evaluate(predict.inference, sweep.grid(hardware=["h100_sxm", "cs3"], batch=[1, 8]),
                        fixed=dict(model="llama_3_1_8b"))
    path = tmp_path / "sweep.nc"
    ds.to_netcdf(path)
    xr.testing.assert_identical(ds, xr.load_dataset(path))


def test_streaming_to_disk_matches_and_cleans_up(tmp_path):
    out = tmp_path / "big.nc"
    dense = sweep.evaluate(predict.inference, _grid(), fixed=FIXED, variables=["tpot_s", "fits", "bound"])
    ds = sweep.evaluate(predict.inference, _grid(), fixed=FIXED, variables=["tpot_s", "fits", "bound"],
                        memory_budget_bytes=2e4, out=str(out))
    xr.testing.assert_identical(dense.drop_attrs(), ds.load().drop_attrs())
    assert out.exists() and not (tmp_path / "big.nc.parts").exists()
    ds.close()


def test_unknown_variable_is_an_error():
    with pytest.raises(InputError, match="nope"):
        sweep.evaluate(predict.inference, _grid(), fixed=FIXED, variables=["nope"])


def test_distributed_scheduler():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        ds = sweep.evaluate(predict.inference, _grid(), fixed=FIXED, memory_budget_bytes=2e4,
                            scheduler=cluster.scheduler_address)
    dense = sweep.evaluate(predict.inference, _grid(), fixed=FIXED)
    xr.testing.assert_identical(dense.drop_attrs(), ds.drop_attrs())


def test_distributed_worker_processes_pickle_functions_and_specs(tmp_path):
    """Two worker processes (not threads): predict.inference, the block runner and spec
    objects (a HardwareSpec, a ModelSpec) cross process boundaries by pickling; in memory
    and streamed to netCDF, the result equals the dense one. Small grid: < 60 s on 2 cores."""
    distributed = pytest.importorskip("dask.distributed")
    from workbench.specs import load_hardware, load_model
    fixed = dict(hardware=load_hardware("h100_sxm"), model=load_model("llama_3_1_8b"), weights="fp8", kv="fp8")
    g = sweep.grid(batch=[1, 8, 64], prompt=[128, 2048], generate=[64, 256])
    dense = sweep.evaluate(predict.inference, g, fixed=fixed)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        ds = sweep.evaluate(predict.inference, g, fixed=fixed, memory_budget_bytes=2e4,
                            scheduler=cluster.scheduler_address)
        out = tmp_path / "dist.nc"
        streamed = sweep.evaluate(predict.inference, g, fixed=fixed, variables=["tpot_s", "fits"],
                                  memory_budget_bytes=2e4, scheduler=cluster.scheduler_address, out=str(out))
    xr.testing.assert_identical(dense.drop_attrs(), ds.drop_attrs())
    xr.testing.assert_identical(dense[["tpot_s", "fits"]].drop_attrs(), streamed.load().drop_attrs())
    streamed.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist.nc"]


def test_an_interrupted_streaming_sweep_leaves_no_parts(tmp_path, monkeypatch):
    """Ctrl-C after some blocks were written to disk: the parts go, no output appears."""
    real = sweep._compute

    def interrupted(tasks, scheduler, progress):
        real(tasks[: len(tasks) // 2], scheduler, progress)  # half the parts are on disk
        assert any(p.name.startswith(".big.nc.parts-") for p in tmp_path.iterdir())
        raise KeyboardInterrupt
    monkeypatch.setattr(sweep, "_compute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.evaluate(predict.inference, _grid(), fixed=FIXED, memory_budget_bytes=2e4, out=str(tmp_path / "big.nc"))
    assert list(tmp_path.iterdir()) == []


def test_a_failing_block_leaves_no_parts_and_keeps_the_previous_output(tmp_path):
    out = tmp_path / "big.nc"
    out.write_text("the previous result")

    def fails_on_long_prompts(**kw):
        if float(np.max(kw["prompt"].values)) > 1000:
            raise RuntimeError("a block failed")
        return predict.inference(**kw)
    with pytest.raises(RuntimeError, match="a block failed"):
        sweep.evaluate(fails_on_long_prompts, _grid(), fixed=FIXED, memory_budget_bytes=2e4, out=str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["big.nc"] and out.read_text() == "the previous result"


@pytest.mark.parametrize("hardware", [["h100_sxm", "cs3"], ["cs3", "h100_sxm"]])
def test_streaming_keeps_every_string_whole_across_blocks(tmp_path, hardware):
    """Blocks whose strings differ in width (a GPU's bound 'memory', a wafer's
    'mesh_reduction'; reasons '' beside a sentence; the hardware coordinate 'cs3' beside
    'h100_sxm'): the file written from several blocks holds every variable and coordinate
    as the in-memory evaluation does (the first block's width cut them: 'mesh_r', 'w', 'h10')."""
    g = sweep.grid(hardware=hardware, batch=[1, 64, 4096])
    fixed = dict(model="llama_3_1_8b", weights="fp16")
    dense = sweep.evaluate(predict.inference, g, fixed=fixed)
    ds = sweep.evaluate(predict.inference, g, fixed=fixed, memory_budget_bytes=100, out=str(tmp_path / "r.nc"))
    streamed = ds.load()
    ds.close()
    assert set(streamed.variables) == set(dense.variables)
    for name in dense.variables:
        want, got = dense[name].values, streamed[name].transpose(*dense[name].dims).values
        if want.dtype.kind in "OUS":
            assert got.astype(str).tolist() == want.astype(str).tolist(), name
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
    assert "mesh_reduction" in streamed.bound.values and list(streamed.hardware.values) == hardware


def test_cli_sweep_with_a_small_budget_keeps_strings_whole(tmp_path):
    """`workbench sweep spec.yaml --out x.nc` streams the same blocks: its strings whole."""
    from workbench.cli import main
    spec = tmp_path / "spec.yaml"
    spec.write_text("function: inference\naxes:\n  hardware: [h100_sxm, cs3]\n  batch: [1, 64, 4096]\n"
                    "fixed:\n  model: llama_3_1_8b\n  weights: fp16\nmemory_budget_bytes: 100\n")
    out = tmp_path / "x.nc"
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    dense = sweep.evaluate(predict.inference, sweep.grid(hardware=["h100_sxm", "cs3"], batch=[1, 64, 4096]),
                           fixed=dict(model="llama_3_1_8b", weights="fp16"))
    got = xr.load_dataset(out)
    for name in ("bound", "reason"):
        assert got[name].values.astype(str).tolist() == dense[name].values.astype(str).tolist()


@pytest.mark.parametrize("out,word", [("x.csv", "allowed: a .nc file"), ("missing_folder/x.nc", "cannot be written"),
                                      (".", "is a directory"), (3, "allowed: a .nc file path")])
def test_out_is_checked_before_the_sweep_runs(tmp_path, monkeypatch, out, word):
    """A bad `out` is one line naming it, before any block runs (x.csv was written as netCDF
    under that name; a missing folder failed after the whole sweep)."""
    monkeypatch.chdir(tmp_path)
    calls = []

    def counted(**kw):
        calls.append(1)
        return predict.inference(**kw)
    with pytest.raises(InputError, match=f"out=.*{word}") as e:
        sweep.evaluate(counted, _grid(), fixed=FIXED, memory_budget_bytes=2e4, out=out)
    assert "\n" not in str(e.value) and calls == [] and list(tmp_path.iterdir()) == []


def test_zarr_out_without_zarr_is_refused_up_front(tmp_path, monkeypatch):
    """out='x.zarr' without the zarr package: refused before the sweep runs (it raised a raw
    ImportError once every block had been computed)."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "zarr" else real(name, *a))
    calls = []

    def counted(**kw):
        calls.append(1)
        return predict.inference(**kw)
    with pytest.raises(InputError, match=r"out='.*x\.zarr' needs the zarr package"):
        sweep.evaluate(counted, _grid(), fixed=FIXED, memory_budget_bytes=2e4, out=str(tmp_path / "x.zarr"))
    assert calls == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("values", [[True, 2], [1, True]])
def test_an_axis_mixing_true_false_with_numbers_is_refused(values):
    """numpy reads true as 1: a batch axis of [true, 2] ran batches 1 and 2 (and [1, true]
    was refused as 'repeats 1', a value nobody wrote). Only true/false together is a yes/no axis."""
    from workbench import predict, sweep
    with pytest.raises(InputError, match=r"mixes true/false with other values; allowed: numbers"):
        sweep.grid(batch=values)
    with pytest.raises(InputError, match=r"batch=.* mixes true/false"):
        predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=values)
    assert sweep.grid(causal=[True, False])["causal"].values.tolist() == [True, False]
    with pytest.raises(InputError, match=r"mixes true/false"):
        sweep.grid(prompt=[False, 4.0])
