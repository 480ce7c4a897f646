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
