"""The gap between model and silicon: published rows and microbenchmark datasets in one
schema, predicted through the public interface, before and after calibration, and the
model_vs_silicon study run with its smoke parameters."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from workbench import predict
from workbench.calibrate import gap
from workbench.calibrate.measurements import reference, row, wse_reference
from workbench.microbench.schema import COLUMNS, record, save, to_dataset
from workbench.studies import run_study


@pytest.fixture(scope="module")
def obs():
    return gap.observations()


@pytest.fixture(scope="module")
def res(obs):
    return gap.compare(obs)


def _microbench(path=None):
    """A measurement dataset as workbench.microbench writes it (no torch needed)."""
    ds = to_dataset([record(kind="gemm", hardware="h100_sxm", dtype="bf16", m=4096, n=4096, k=4096, devices=1,
                            metric="flops_per_s", value_si=6.1e14, source="synthetic"),
                     record(kind="memory", op="copy", hardware="h100_sxm", dtype="fp32", size_bytes=2.0**31, devices=1,
                            metric="bytes_per_s", value_si=2.9e12, source="synthetic"),
                     record(kind="memory", op="copy", hardware="cpu", dtype="fp32", size_bytes=2.0**24, devices=1,
                            metric="bytes_per_s", value_si=1.1e11, source="synthetic")],
                    {"device_name": "synthetic"})
    if path is not None:
        save(ds, path)
    return ds


def test_reference_points_cite_rows_that_exist(obs):
    ids = set(reference().index) | set(wse_reference().index)
    assert set(obs.id) <= ids
    assert set(COLUMNS) <= set(obs.columns)
    assert set(obs.kind) <= set(gap.PREDICTORS)
    assert (obs.value_si > 0).all() and obs.value_si.notna().all()
    assert set(obs.category) == {"GPU kernel", "GPU inference", "GPU training", "wafer"}


def test_values_in_si_from_the_rows_and_their_notes(obs):
    b08 = obs[(obs.id == "B08") & (obs.m == 8192)].iloc[0]
    assert b08.value_si == pytest.approx(row("B08")["value_si"]) == pytest.approx(1290.1e12)
    assert obs[(obs.id == "B08") & (obs.m == 2048)].value_si.item() == pytest.approx(1011.3e12)
    assert obs[(obs.id == "C07") & (obs.metric == "ttft_s")].value_si.max() == pytest.approx(0.036)
    assert obs[obs.id == "E04c"].value_si.item() == pytest.approx(0.52)  # 52 % -> a fraction
    assert obs[obs.id == "C125"].value_si.item() == pytest.approx(1.2e-6)  # 0.0012 ms
    assert obs[obs.id == "C073"].value_si.item() == pytest.approx(2699.9)


def test_before_is_what_the_tests_compute(res):
    """The same configurations as tests/workloads/*_vs_measurements.py give the same numbers."""
    c01 = res[res.id == "C01"].iloc[0]
    ds = predict.inference(hardware="h100_sxm", model="llama_2_7b", batch=768, prompt=128, generate=128,
                           weights="fp8", kv="fp8")
    assert c01.predicted_before == pytest.approx(float(ds.output_tokens_per_s_per_device))
    e07 = res[res.id == "E07b"].iloc[0]
    mpt7 = predict.training(hardware="h100_sxm", model="mpt_7b", dp=8, seq_len=2048, global_batch=48,
                            micro_batch=6, zero=3, attention="flash1")  # tests/workloads/test_training_vs_measurements.py
    assert e07.error_before == pytest.approx(float(mpt7.tokens_per_s_per_device) / 10643 - 1, abs=1e-6)  # E07b
    b12 = res[(res.id == "B12") & (res.op == "triad")].iloc[0]
    assert abs(b12.error_before) < 0.02  # provenance: the memory table's plateau is this row
    c07 = res[(res.id == "C07") & np.isclose(res.value_si, 0.036)].iloc[0]
    ds = predict.inference(hardware="h100_sxm", model="llama_2_7b", batch=1, prompt=2048, generate=1,
                           weights="fp8", kv="fp8")
    assert c07.error_before == pytest.approx(0.036 / float(ds.ttft_s) - 1)  # a time: inverted, + = optimistic
    assert c07.error_before > 0


def test_fitted_rows_are_in_sample_before(res):
    kern = res[(res.category == "GPU kernel") & res.fitted]
    assert kern.error_before.abs().max() < 0.06  # MAMF rows: the plateau sits below the MAMF fraction


def test_after_calibration(res):
    kern = res[res.category == "GPU kernel"]
    assert (kern.after_from == "LOO").all() and kern.predicted_in_sample.notna().all()
    # The fit reproduces the rows it saw; leave-one-out is worse, most at the ends of a sweep.
    assert kern.error_in_sample.abs().median() < 0.02
    assert kern.error_after.abs().median() > kern.error_in_sample.abs().median()
    gpu_e2e = res[res.category.isin(["GPU inference", "GPU training"])]
    assert (gpu_e2e.after_from == "calibrated").all()
    assert (gpu_e2e.predicted_after != gpu_e2e.predicted_before).any()
    wafer = res[res.category == "wafer"]
    assert (wafer.after_from == "unchanged").all()
    np.testing.assert_array_equal(wafer.predicted_after, wafer.predicted_before)


def test_error_table_and_worst(res):
    table = gap.error_table(res)
    assert list(table.index) == ["GPU inference", "GPU kernel", "GPU training", "wafer", "all"]
    assert table.loc["all", "n"] == len(res)
    assert table.loc["all", "worst |error_before|"] == pytest.approx(res.error_before.abs().max())
    w = gap.worst(res, 5)
    assert len(w) == 5 and w.error_before.abs().is_monotonic_decreasing
    assert w.dominant_before.str.len().min() > 0


def test_dominant_terms_name_a_part_of_the_model(res):
    by_id = res.set_index("id")
    assert "memory-bound" in res[(res.id == "B08") & (res.n == 192)].dominant_before.item()
    assert "of step" in by_id.loc["E07b", "dominant_before"]
    assert "of TTFT" in res[res.id == "C07"].dominant_before.iloc[0]
    assert "layer cycles" in by_id.loc["C075", "dominant_before"]
    assert "busbw_eff" in res[res.id == "B21"].dominant_before.iloc[0]


def test_speed_error_convention():
    assert gap.speed_error(2.0, 1.0, "flops_per_s") == pytest.approx(1.0)
    assert gap.speed_error(0.5, 1.0, "ttft_s") == pytest.approx(1.0)  # half the time: twice the speed
    assert gap.speed_error(0.5, 1.0, "mfu") == pytest.approx(-0.5)


def test_microbenchmark_datasets_join_the_same_table(tmp_path):
    path = tmp_path / "h100.nc"
    _microbench(path)
    obs = gap.observations([path], reference_rows=False)
    assert list(obs.category) == ["GPU kernel", "GPU kernel", "no spec"]
    res = gap.compare(obs)
    assert res.predicted_before.iloc[:2].notna().all() and np.isnan(res.predicted_before.iloc[2])
    both = gap.observations([_microbench()])
    assert len(both) == len(gap.reference_points()) + 3


def test_study_runs_with_smoke_parameters(tmp_path):
    path = tmp_path / "h100_microbench.nc"
    _microbench(path)
    out = run_study("model_vs_silicon", smoke=True, out_root=tmp_path / "reports", overrides={"datasets": [str(path)]})
    for name in ("model_vs_silicon.ipynb", "sweep.nc", "run.json", "model_vs_silicon.html"):
        assert (out / name).exists(), name
    run = json.loads((out / "run.json").read_text())
    assert run["smoke"] and run["parameters"]["hardware"] == ["h100_sxm", "a100_sxm", "wse2", "cs3"]
    with xr.open_dataset(out / "sweep.nc") as ds:
        assert ds.attrs["study"] == "model_vs_silicon"
        assert {"value_si", "predicted_before", "error_before", "error_after"} <= set(ds.data_vars)
        ids = set(ds["id"].values)
        assert {"h100_sxm:gemm:0", "B21", "C075", "C198"} <= ids and "C191" not in ids  # cs2 not in smoke
        assert set(ds["hardware"].values) <= {"h100_sxm", "a100_sxm", "wse2", "cs3"}
    html = (out / "model_vs_silicon.html").read_text()
    assert "Answer." in html and "Conclusion" in html and "Traceback" not in html


def test_a_row_the_model_cannot_predict_leaves_the_others(monkeypatch):
    """A predictor that raises on one row (here the memory one) gives that row NaN and the
    error as its dominant term; the table's other rows are predicted."""
    def broken(r):
        raise ValueError("no such copy")
    monkeypatch.setitem(gap.PREDICTORS, "memory", broken)
    obs = gap.observations([_microbench()], reference_rows=False)
    out = gap.predict_rows(obs)
    assert np.isfinite(out.predicted.iloc[0]) and np.isnan(out.predicted.iloc[1])
    assert out.dominant.iloc[1] == "not predicted: ValueError: no such copy"


def test_every_reference_row_is_predicted_without_error(res):
    failed = res[res.dominant_before.astype(str).str.startswith("not predicted")]
    assert failed.empty, failed[["id", "dominant_before"]].to_string()
