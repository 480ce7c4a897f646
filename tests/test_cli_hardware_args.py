"""The CLI's --set and --hardware-file (cli._kwargs, cli._hardware_file): a knob set twice is
an error, not the last value silently kept; a hardware file's errors name --hardware-file."""
from __future__ import annotations

import pytest

from workbench.cli import main


def _err(capsys, argv) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: "), err
    return lines[0]


@pytest.mark.parametrize("first, second", [("n_layers=4", "n_layers=8"),
                                           ("hbm_bandwidth_bytes_per_s=2e12", "hbm_bandwidth_bytes_per_s=4e12,8e12")])
def test_a_knob_set_twice_is_an_error_naming_both(capsys, first, second):
    line = _err(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b",
                         "--set", first, "--set", second])
    knob = first.split("=")[0]
    assert f"set {knob}={second.split('=')[1]!r} repeats set {knob}={first.split('=')[1]!r}" in line
    assert f"allowed: one --set per knob, a sweep as a comma list (--set {knob}=" in line


def test_a_missing_hardware_file_names_hardware_file(capsys, tmp_path):
    line = _err(capsys, ["predict", "inference", "--hardware-file", "/nonexistent.yaml", "--model", "llama_3_1_8b"])
    assert "hardware_file='/nonexistent.yaml' is not a readable file; allowed: a hardware YAML file" in line
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    line = _err(capsys, ["predict", "inference", "--hardware-file", str(bad), "--model", "llama_3_1_8b"])
    assert f"hardware_file='{bad}' is not valid YAML" in line


def test_a_bare_file_name_is_a_file_not_a_catalog_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mychip").write_text("derives_from: h100_sxm\nname: mychip\nchanges: 2x TDP\ntdp_w: 1400.0\n")
    assert main(["predict", "gemm", "--hardware-file", "mychip", "--m", "8", "--n", "8", "--k", "8", "--json"]) == 0
    assert '"hardware": "mychip"' in capsys.readouterr().out
