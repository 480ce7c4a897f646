"""`workbench ...`: the command line mirrors workbench.predict and prints JSON; bad input
exits 2 with one line naming the argument, and no traceback."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import predict
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
                               "--weights", "fp8", "--json"])
    assert rc == 0
    record = json.loads(out)
    assert record["fits"] is False and "fp8" in record["reason"]
    assert record["ttft_s"] is None or not math.isfinite(record["ttft_s"])  # NaN prints as null


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
    (["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_70b", "--tp", "3"], "tp", "3"),
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
                           "--k", "8192", "--dtype", "fp8", "--json"], capture_output=True, text=True, timeout=120)
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
