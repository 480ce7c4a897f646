"""`workbench ...`: the command line mirrors workbench.predict and prints JSON; bad input
exits 2 with one line naming the argument, and no traceback."""
from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest
import xarray as xr

from workbench import cli, predict, sweep
from workbench.cli import main
from workbench.specs import list_hardware, list_models

# DESIGN.md "Public interface": inference outputs.
OUTPUT_KEYS = ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_device",
               "output_tokens_per_s_per_user", "memory_per_device_bytes", "fits", "bound")
INFERENCE = ["predict", "inference", "--hardware", "h100_sxm", "--devices", "8", "--model", "llama_3_1_70b",
             "--tp", "8", "--batch", "64", "--prompt", "2048", "--generate", "256", "--weights", "fp8"]


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _same(cli_value, ds_value):
    v = ds_value.item() if hasattr(ds_value, "item") else ds_value
    if isinstance(v, (bool,)) or isinstance(cli_value, bool):
        return bool(v) == cli_value
    if isinstance(v, str):
        return v == cli_value
    return cli_value == pytest.approx(float(v), rel=1e-12)


def test_predict_inference_json_matches_python(capsys):
    rc, out, err = _run(capsys, INFERENCE + ["--json"])
    assert rc == 0 and err == ""
    record = json.loads(out)
    assert isinstance(record, dict)
    ds = predict.inference(hardware="h100_sxm", devices=8, model="llama_3_1_70b", tp=8, batch=64,
                           prompt=2048, generate=256, weights="fp8")
    for key in OUTPUT_KEYS:
        assert key in record, key
        assert _same(record[key], ds[key].values), (key, record[key], ds[key].values)
    assert isinstance(record["fits"], bool) and record["bound"] in ("compute", "memory", "communication")
    # Every variable of the Dataset is in the record (nothing silently dropped).
    assert set(ds.data_vars) <= set(record)


def test_comma_list_gives_records(capsys):
    rc, out, _ = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm,h200_sxm", "--model",
                               "llama_3_1_8b", "--batch", "1,8,64", "--json"])
    assert rc == 0
    records = json.loads(out)
    assert isinstance(records, list) and len(records) == 6
    ds = predict.inference(hardware=["h100_sxm", "h200_sxm"], model="llama_3_1_8b", batch=[1, 8, 64])
    for r in records:
        assert r["hardware"] in ("h100_sxm", "h200_sxm") and r["batch"] in (1, 8, 64)
        point = ds.sel(hardware=r["hardware"], batch=r["batch"])
        for key in OUTPUT_KEYS:
            assert _same(r[key], point[key].values), key


def test_batch_max_from_the_command_line(capsys):
    rc, out, _ = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_70b",
                               "--tp", "8", "--batch", "max", "--json"])
    assert rc == 0
    record = json.loads(out)
    ds = predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch="max")
    assert record["batch"] == float(ds.batch) and record["fits"] is True


def test_infeasible_point_prints_fits_false(capsys):
    rc, out, _ = _run(capsys, ["predict", "inference", "--hardware", "a100_sxm", "--model", "llama_3_1_8b",
                               "--weights", "fp8", "--activations", "fp8", "--json"])  # no FP8 units on A100
    assert rc == 0
    record = json.loads(out)
    assert record["fits"] is False and "fp8" in record["reason"]
    assert record["ttft_s"] is None or not math.isfinite(record["ttft_s"])  # NaN prints as null


def test_table_output_prints_the_whole_reason(capsys):
    """An infeasible point's reason is printed whole: pandas cuts a cell at 50 characters by
    default, which left "tp=3 does not divide n_heads=64 of qwen3_32b; ..." without what is allowed."""
    rc, out, _ = _run(capsys, ["predict", "serving", "--hardware", "b300", "--model", "Qwen/Qwen3-32B", "--tp", "3",
                               "--concurrency", "16"])
    assert rc == 0
    assert "tp=3 does not divide n_heads=64 of qwen3_32b; allowed: 1, 2, 4, 8, 16, 32, 64" in out


def test_table_output_without_json(capsys):
    rc, out, _ = _run(capsys, INFERENCE)
    assert rc == 0 and "ttft_s" in out and "tpot_s" in out


@pytest.mark.parametrize("kind, argv, keys", [
    ("gemm", ["--hardware", "b200", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "fp4"],
     ("time_s", "flops_per_s", "bound")),
    ("attention", ["--hardware", "h100_sxm", "--batch", "2", "--seq-len", "4096", "--n-heads", "32",
                   "--head-dim", "128", "--causal", "false"], ("time_s", "flops")),
    ("collective", ["--hardware", "h100_sxm", "--devices", "8", "--op", "all_reduce", "--size-bytes",
                    "1073741824"], ("time_s", "bus_bandwidth_bytes_per_s")),
])
def test_other_predictions(capsys, kind, argv, keys):
    rc, out, _ = _run(capsys, ["predict", kind] + argv + ["--json"])
    assert rc == 0
    record = json.loads(out)
    for key in keys:
        assert key in record
    if kind == "attention":
        assert record["flops"] == 4 * 2 * 4096**2 * 32 * 128  # non-causal FlashAttention count


@pytest.mark.parametrize("what, expected", [("hardware", list_hardware()), ("models", list_models())])
def test_list(capsys, what, expected):
    rc, out, _ = _run(capsys, ["list", what])
    assert rc == 0
    assert out.split() == expected
    assert "h100_sxm" in out or "llama_3_1_70b" in out


@pytest.mark.parametrize("argv, arg, value", [
    (["predict", "inference", "--hardware", "h800", "--model", "llama_3_1_8b"], "hardware", "h800"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "gpt5"], "model", "gpt5"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_70b", "--tp", "abc"], "tp", "abc"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b", "--batch", "0"], "batch", "0"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b", "--batch", "maximum"],
     "batch", "maximum"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b", "--kv", "fp6"], "kv", "fp6"),
    (["predict", "inference", "--hardware", "h100_sxm"], "model", ""),
    (["predict", "gemm", "--hardware", "h100_sxm", "--m", "1", "--n", "1", "--k", "1", "--dtype", "fp6"],
     "dtype", "fp6"),
    (["predict", "attention", "--hardware", "h100_sxm", "--batch", "1", "--seq-len", "8", "--n-heads", "1",
      "--head-dim", "8", "--causal", "maybe"], "causal", "maybe"),
    (["predict", "collective", "--hardware", "h100_sxm", "--devices", "8", "--op", "broadcast",
      "--size-bytes", "1e6"], "op", "broadcast"),
    (["predict", "inference", "--hardware", "h100_sxm", "--model-file", "/nonexistent/model.yaml"],
     "model_file", "/nonexistent/model.yaml"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, arg, value):
    rc, out, err = _run(capsys, argv)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert arg in lines[0] and value in lines[0], lines[0]
    assert "Traceback" not in err


def test_model_file_runs_a_model_outside_the_catalog(capsys, tmp_path):
    # A YAML of ModelSpec fields: Llama-2-7B's published config under another name.
    fields = {"name": "my_7b", "source": "test", "n_layers": 32, "d_model": 4096, "n_heads": 32,
              "n_kv_heads": 32, "head_dim": 128, "d_ff": 11008, "vocab_size": 32000}
    path = tmp_path / "my_7b.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    rc, out, _ = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model-file", str(path),
                               "--json"])
    assert rc == 0
    record = json.loads(out)
    ref = predict.inference(hardware="h100_sxm", model="llama_2_7b")
    assert record["tpot_s"] == pytest.approx(float(ref.tpot_s), rel=1e-12)


def test_installed_console_script():
    """The `workbench` entry point of pyproject.toml, run as a user would."""
    exe = Path(sys.executable).with_name("workbench")
    if not exe.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    proc = subprocess.run([str(exe), "predict", "gemm", "--hardware", "h100_sxm", "--m", "8192", "--n", "8192",
                           "--k", "8192", "--dtype", "fp8", "--framework", "none", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["flops"] == 2 * 8192**3  # 2·m·n·k
    # B08: cuBLASLt FP8 8192^3 on H100 = 1290.1 TFLOP/s; the ramp was fitted to it (provenance).
    assert record["flops_per_s"] == pytest.approx(1290.1e12, rel=0.02)
    assert record["bound"] == "compute"
    bad = subprocess.run([str(exe), "predict", "gemm", "--hardware", "h100_sxm", "--m", "0", "--n", "1",
                          "--k", "1"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "m=0" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("text, arg", [
    ("- 1\n- 2\n", "model_file"),  # a YAML list, not a mapping of fields
    ("name: m\nsource: t\nn_layers: 2\nd_model: 64\nn_heads: 4\nn_kv_heads: 4\nhead_dim: 16\n"
     "d_ff: 128\nvocab_size: 100\nn_layer: 3\n", "n_layer"),  # unknown field (typo of n_layers)
])
def test_bad_model_file_exits_2(capsys, tmp_path, text, arg):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    rc, out, err = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model-file", str(path)])
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and arg in err and "Traceback" not in err


def test_sweep_command_writes_netcdf(tmp_path):
    import xarray as xr
    spec = tmp_path / "s.yaml"
    spec.write_text("function: inference\naxes: {hardware: [h100_sxm, cs3], batch: [1, 8]}\n"
                    "fixed: {model: llama_3_1_8b, weights: fp16}\nvariables: [tpot_s, fits]\n")
    out = tmp_path / "s.nc"
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    ds = xr.open_dataset(out)
    assert dict(ds.sizes) == {"hardware": 2, "batch": 2} and set(ds.data_vars) == {"tpot_s", "fits"}
    assert ds.tpot_s.attrs["units"] == "s" and "git_sha" in ds.attrs
    ds.close()


def test_sweep_command_rejects_unknown_keys(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("function: inference\naxes: {batch: [1]}\nbogus: 1\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "x.nc")]) == 2
    assert "bogus" in capsys.readouterr().err


def test_predict_training_json_and_model_file(tmp_path, capsys):
    assert main(["predict", "training", "--hardware", "h100_sxm", "--model", "llama_3_8b", "--devices", "8",
                 "--seq-len", "4096", "--global-batch", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s", "tokens_per_s_per_device", "model_flops_per_s_per_device", "mfu",
                "hfu", "memory_per_device_bytes", "fits"):
        assert key in out
    spec = tmp_path / "m.yaml"
    spec.write_text("name: tiny\nn_layers: 4\nd_model: 512\nn_heads: 8\nn_kv_heads: 8\nhead_dim: 64\n"
                    "d_ff: 2048\nvocab_size: 32000\n")
    assert main(["predict", "training", "--hardware", "cs3", "--model-file", str(spec), "--global-batch", "64",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples_per_s"] > 0


def test_predict_serving_and_disaggregated_json(capsys):
    assert main(["predict", "serving", "--hardware", "h100_sxm", "--model", "llama_3_1_8b", "--weights", "fp8",
                 "--arrival-rate", "1,5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["arrival_rate"] for r in rows] == [1.0, 5.0] and all("tpot_s" in r for r in rows)
    assert main(["predict", "disaggregated", "--prefill-hardware", "h100_sxm", "--decode-hardware", "h200_sxm",
                 "--model", "llama_3_1_8b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["goodput_tokens_per_s_per_device"] > 0 and out["n_prefill_instances"] >= 1


# The generated CLI: every keyword argument of every predict.* function is an option.

@pytest.mark.parametrize("kind", cli.KINDS)
def test_help_lists_every_parameter_of_the_function(capsys, kind):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", kind, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    params = inspect.signature(getattr(predict, kind)).parameters
    missing = [p for p in params if f"--{p.replace('_', '-')} " not in out]
    assert not missing, f"predict.{kind} arguments not in --help: {missing}"


def test_sweep_functions_are_the_generated_table(tmp_path, capsys):
    assert set(cli.signature_table()) == set(cli.KINDS)
    spec = tmp_path / "s.yaml"
    spec.write_text("function: predict_everything\naxes: {batch: [1]}\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "x.nc")]) == 2
    err = capsys.readouterr().err
    assert "predict_everything" in err and all(k in err for k in cli.KINDS)


MOE = ["predict", "inference", "--hardware", "h100_sxm", "--model", "mixtral_8x7b", "--tp", "8"]


def test_ep_and_imbalance_reach_inference(capsys):
    rc, out, err = _run(capsys, MOE + ["--ep", "2", "--imbalance", "1.2", "--json"])
    assert rc == 0 and err == ""
    ref = predict.inference(hardware="h100_sxm", model="mixtral_8x7b", tp=8, ep=2, imbalance=1.2)
    base = predict.inference(hardware="h100_sxm", model="mixtral_8x7b", tp=8)
    assert json.loads(out)["tpot_s"] == pytest.approx(float(ref.tpot_s), rel=1e-12)
    assert float(ref.tpot_s) != pytest.approx(float(base.tpot_s), rel=1e-6)  # the arguments matter


def test_comma_list_of_a_new_argument_is_a_dimension(capsys):
    rc, out, _ = _run(capsys, MOE + ["--ep", "1,2,4", "--imbalance", "1,1.5", "--json"])
    assert rc == 0
    records = json.loads(out)
    assert sorted({(r["ep"], r["imbalance"]) for r in records}) == [(e, i) for e in (1, 2, 4) for i in (1.0, 1.5)]


@pytest.mark.parametrize("extra, words", [
    (["--imbalance", "abc"], ("imbalance", "abc")),
    (["--imbalance", "0.5"], ("imbalance", "0.5")),
    (["--ep", "0"], ("ep=0",)),
    (["--ep", "2,x"], ("ep", "'x'")),
    (["--bogus", "1"], ("--bogus",)),
    (["--tp"], ("--tp",)),
    (["--set", "n_layers"], ("set", "n_layers")),
    (["--model-file", "m.yaml"], ("model", "mixtral_8x7b", "model_file", "m.yaml")),
])
def test_bad_value_is_one_line_and_exit_2(capsys, extra, words):
    rc, out, err = _run(capsys, MOE + extra)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: "), err
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in err and "usage:" not in err


def test_parse_error_from_the_console_script_is_one_line():
    exe = Path(sys.executable).with_name("workbench")
    if not exe.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    proc = subprocess.run([str(exe), "predict", "gemm", "--hardware", "h100_sxm", "--m", "8"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "--n" in proc.stderr
    assert "usage:" not in proc.stderr and "Traceback" not in proc.stderr


def test_set_hardware_knob_is_a_sweep_dimension(capsys):
    rc, out, err = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b",
                                 "--set", "hbm_bandwidth_bytes_per_s=2e12,4e12", "--json"])
    assert rc == 0, err
    records = json.loads(out)
    assert [r["hbm_bandwidth_bytes_per_s"] for r in records] == [2e12, 4e12]
    assert records[1]["tpot_s"] < records[0]["tpot_s"]  # decode reads the weights from HBM


@pytest.fixture
def fake_inference(monkeypatch):
    """predict.inference replaced by a stand-in with arguments the real one may not have yet:
    what the CLI generates from a signature, and what reaches the function."""
    calls = []

    def inference(*, hardware, model, batch=1, new_knob=0.5, verbose=False, hardware_overrides: dict | None = None,
                  model_overrides: dict | None = None):
        """A stand-in. `new_knob` is a new argument the CLI has never seen."""
        calls.append(dict(hardware=hardware, model=model, batch=batch, new_knob=new_knob, verbose=verbose,
                          hardware_overrides=hardware_overrides, model_overrides=model_overrides))
        return xr.Dataset({"tpot_s": 1.0})
    monkeypatch.setattr(predict, "inference", inference)
    return calls


def test_new_argument_needs_no_cli_edit(capsys, fake_inference):
    with pytest.raises(SystemExit):
        main(["predict", "inference", "--help"])
    out = capsys.readouterr().out
    assert "--new-knob" in out and "is a new argument the CLI has never seen" in out  # help from the docstring
    assert "--verbose true|false" in out and "--hardware-overrides" in out
    assert main(["predict", "inference", "--hardware", "b200", "--model", "m", "--new-knob", "1,2.5",
                 "--verbose", "TRUE", "--batch", "max"]) == 0
    assert fake_inference[-1] == dict(hardware="b200", model="m", batch="max", new_knob=[1, 2.5], verbose=True,
                                      hardware_overrides=None, model_overrides=None)


def test_set_routes_knobs_and_files_pass_through(capsys, tmp_path, fake_inference):
    config = tmp_path / "config.json"
    config.write_text("{}")
    chip = tmp_path / "chip.yaml"
    chip.write_text("derives_from: h100_sxm\nname: chip\nchanges: none\n")
    assert main(["predict", "inference", "--hardware-file", str(chip), "--model-file", str(config),
                 "--set", "hbm_bandwidth_bytes_per_s=2e12,4e12", "--set", "n_layers=4,8",
                 "--set", "top_k=2", "--set", "nvlink_unidir_bytes_per_s=4.5e11"]) == 0
    call = fake_inference[-1]
    assert call["hardware"] == str(chip) and call["model"] == str(config)
    assert call["hardware_overrides"] == {"hbm_bandwidth_bytes_per_s": [2e12, 4e12],
                                          "nvlink_unidir_bytes_per_s": 4.5e11}
    assert call["model_overrides"] == {"n_layers": [4, 8], "top_k": 2}
    rc, _, err = _run(capsys, ["predict", "inference", "--hardware", "b200", "--hardware-file", "chip.yaml",
                               "--model", "m"])
    assert rc == 2 and "hardware='b200'" in err and "hardware_file='chip.yaml'" in err
    rc, _, err = _run(capsys, ["predict", "inference", "--model", "m"])
    assert rc == 2 and "hardware is required" in err and len(err.strip().splitlines()) == 1


def test_list_knobs_aligned(capsys, monkeypatch):
    rows = [("hbm_bandwidth_bytes_per_s", "bytes/s", 3.35e12), ("n_sms", "", 132), ("name", "", "h100_sxm")]
    monkeypatch.setitem(sys.modules, "workbench.backends",
                        types.SimpleNamespace(list_knobs=lambda hw: rows if hw == "h100_sxm" else [],
                                              knobs=lambda hw, every=False: {}))
    rc, out, _ = _run(capsys, ["list", "knobs", "h100_sxm"])
    assert rc == 0
    lines = out.splitlines()
    assert [line.split() for line in lines] == [["hbm_bandwidth_bytes_per_s", "bytes/s", "3.35e+12"],
                                                ["n_sms", "132"], ["name", "h100_sxm"]]
    assert len({line.index(v) for line, v in zip(lines, ("3.35e+12", "132", "h100_sxm"))}) == 1  # one column
    rc, _, err = _run(capsys, ["list", "knobs"])
    assert rc == 2 and "HARDWARE" in err


def test_list_knobs_of_real_hardware(capsys):
    backends = pytest.importorskip("workbench.backends")
    if not hasattr(backends, "list_knobs"):
        pytest.skip("workbench.backends.list_knobs landing concurrently")
    rc, out, _ = _run(capsys, ["list", "knobs", "h100_sxm"])
    assert rc == 0 and len(out.splitlines()) == len(backends.knobs("h100_sxm", every=True)) > 0
    assert "hbm_bandwidth_bytes_per_s" in out
    # H100 has no FP4 units, but the knob is settable (a hypothetical unit): listed as such
    assert [line for line in out.splitlines() if line.startswith("peak_flops_per_s_fp4")][0].endswith(
        "none (settable: a hypothetical unit)")


def test_a_layout_that_cannot_run_is_a_flagged_point_not_an_error(capsys):
    from workbench.cli import main
    rc = main(["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_70b", "--tp", "3",
               "--batch", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["fits"] is False and "tp=3 does not divide n_heads=64" in out["reason"]


def test_predict_prints_how_far_its_numbers_are_from_measurement(capsys):
    """Text output ends with the prediction's held-out error (attrs['held_out_error']) where it has one."""
    assert main(["predict", "gemm", "--hardware", "h100_sxm", "--m", "16", "--n", "4096", "--k", "4096"]) == 0
    out = capsys.readouterr().out
    assert "held-out |error| of the fitted kernel surfaces" in out and "h100_sxm trtllm gemm bf16: median" in out
    assert main(["predict", "gemm", "--hardware", "h100_sxm", "--m", "16", "--n", "4096", "--k", "4096",
                 "--framework", "none"]) == 0
    assert "held-out" not in capsys.readouterr().out


def test_sweep_files_and_outputs_refused_with_one_line(capsys, tmp_path):
    """A sweep file missing a required argument, hardware_overrides that is not a mapping, an
    output that is not .nc (a .csv was silently written as netCDF) or .zarr without zarr, and
    a config.json with no attention heads: exit 2 with one line (they raised tracebacks)."""
    import importlib.util
    spec = tmp_path / "s.yaml"
    cases = [("function: inference\naxes: {batch: [1, 8]}\nfixed: {model: llama_3_1_8b}\n", "a.nc",
              "hardware is missing"),
             ("function: inference\naxes: {batch: [1, 8]}\nfixed: {model: llama_3_1_8b, hardware: h100_sxm, "
              "hardware_overrides: 5}\n", "b.nc", "hardware_overrides=5 is not allowed"),
             ("function: inference\naxes: {batch: [1, 8]}\nfixed: {model: llama_3_1_8b, hardware: h100_sxm}\n", "c.csv",
              "is not allowed; allowed: a .nc file")]
    if importlib.util.find_spec("zarr") is None:
        cases.append((cases[-1][0], "d.zarr", "needs the zarr package"))
    for text, out, message in cases:
        spec.write_text(text)
        rc, _, err = _run(capsys, ["sweep", str(spec), "--out", str(tmp_path / out)])
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    cfg = tmp_path / "zeroh.json"
    cfg.write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, '
                   '"num_hidden_layers": 16, "num_attention_heads": 0, "intermediate_size": 8192, '
                   '"vocab_size": 128256}')
    rc, _, err = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model-file", str(cfg)])
    assert rc == 2 and "num_attention_heads=0" in err and len(err.strip().splitlines()) == 1


def test_a_knob_in_overrides_and_set_is_set_twice(capsys, fake_inference):
    """--set replaced the --hardware-overrides / --model-overrides value of its knob (one point at
    3e12 for a sweep over 1e12, 2e12): a knob set twice is an error, as the README says."""
    for flag, yaml_, knob, said in (
            ("--hardware-overrides", "{hbm_bandwidth_bytes_per_s: [1e12, 2e12]}", "hbm_bandwidth_bytes_per_s=3e12",
             "set hbm_bandwidth_bytes_per_s='3e12' repeats hardware_overrides hbm_bandwidth_bytes_per_s=[1"),
            ("--model-overrides", "{n_layers: 4}", "n_layers=8",
             "set n_layers='8' repeats model_overrides n_layers=4")):
        rc, out, err = _run(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_70b",
                                     flag, yaml_, "--set", knob, "--json"])
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert said in err and "allowed: " in err, err
    assert fake_inference == []


def test_a_sweep_out_that_cannot_be_written_is_one_line(capsys, tmp_path, monkeypatch):
    """A folder that passes the access test but refuses the parts folder (/proc as root) raised
    mkdtemp's traceback; an OSError about another path is not blamed on --out."""
    spec = tmp_path / "s.yaml"
    spec.write_text("function: inference\naxes: {batch: [1, 8]}\nfixed: {model: llama_3_1_8b, hardware: h100_sxm}\n")
    rc, _, err = _run(capsys, ["sweep", str(spec), "--out", "/proc/x.nc"])
    assert rc == 2 and "out='/proc/x.nc' cannot be written" in err and len(err.strip().splitlines()) == 1, err

    def refused(prefix, dir):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}xyz")
    monkeypatch.setattr(sweep.tempfile, "mkdtemp", refused)
    out = tmp_path / "s.nc"
    rc, _, err = _run(capsys, ["sweep", str(spec), "--out", str(out)])
    assert rc == 2 and err.strip() == f"workbench: error: out={str(out)!r} cannot be written: Permission denied"
    monkeypatch.setattr(sweep.tempfile, "mkdtemp", lambda prefix, dir: refused(prefix, "/elsewhere"))
    with pytest.raises(PermissionError):
        main(["sweep", str(spec), "--out", str(out)])


def test_a_closed_stdout_exits_141_quietly():
    """`workbench list hardware | head -1` (stdout's reader gone) ended in a BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "list", "hardware"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # before the interpreter has started: every write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_ctrl_c_is_one_line_and_exit_130(capsys, tmp_path, monkeypatch):
    """Ctrl-C in a sweep printed a 27-line KeyboardInterrupt traceback."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(sweep, "evaluate", interrupted)
    spec = tmp_path / "s.yaml"
    spec.write_text("axes: {batch: [1, 8]}\nfixed: {model: llama_3_1_8b, hardware: h100_sxm}\n")
    import importlib.util
    zarr = [("s.zarr", "may be incomplete")] if importlib.util.find_spec("zarr") else []  # written in place
    for out, said in [("s.nc", "nothing written"), *zarr]:
        rc, _, err = _run(capsys, ["sweep", str(spec), "--out", str(tmp_path / out)])
        assert rc == 130 and err.startswith("workbench: interrupted; ") and said in err
        assert len(err.strip().splitlines()) == 1 and not (tmp_path / out).exists()


def test_list_hardware_name(capsys):
    """`list hardware bogus` listed the whole catalog with exit 0."""
    rc, out, err = _run(capsys, ["list", "hardware", "bogus"])
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "hardware='bogus' is not known; allowed: " in err and "h100_sxm" in err
    rc, out, _ = _run(capsys, ["list", "hardware", "NVIDIA H100 SXM"])
    assert rc == 0 and out.startswith("h100_sxm: nvidia") and len(out.splitlines()) == 1


def test_version(capsys):
    """`workbench --version` said "arguments are required: command"."""
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    from workbench import __version__
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"workbench {__version__}"
