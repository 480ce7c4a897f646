"""Hypothetical designs as files (examples/hardware/*.yaml, issue 19 item 4): each derives
from a catalog chip, changes only what it says, and moves the predictions the way the
change must."""
from pathlib import Path

import dataclasses
import pytest

from workbench import predict
from workbench.specs import SpecError, load_hardware

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hardware"
FILES = sorted(EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_example_loads_and_states_its_base(path):
    spec = load_hardware(str(path))
    said = getattr(spec, "notes", "") or spec.source
    assert said.startswith("derived from "), said
    assert spec.name == path.stem


def _differences(a, b) -> set:
    return {f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}


def test_only_the_stated_fields_change():
    """h100_h200_hbm: memory (and its label); the wafer: SRAM per PE; the system: its I/O and
    MemoryX rate; the B200: its links (the scale-up domain), nothing else."""
    pairs = {"h100_h200_hbm": ("h100_sxm", {"memory"}), "wse3_2x_sram": ("wse3", {"sram_per_pe_bytes"}),
             "cs3_4x_io": ("cs3", {"io_bytes_per_s", "weight_store_bandwidth_bytes_per_s"}),
             "b200_nvl72": ("b200", {"links"})}
    for name, (base, fields) in pairs.items():
        new, old = load_hardware(str(EXAMPLES / f"{name}.yaml")), load_hardware(base)
        assert _differences(new, old) - {"name", "source", "notes"} == fields, name
    assert load_hardware(str(EXAMPLES / "b200_nvl72.yaml")).link("scale_up").domain_size == 72
    h = load_hardware(str(EXAMPLES / "h100_h200_hbm.yaml"))
    assert h.hbm.bandwidth_bytes_per_s == 4.8e12 and h.hbm.capacity_bytes == 150.75e9  # h200_sxm.yaml (A18a/b)


def test_the_changes_move_the_predictions_as_they_must():
    """More HBM bandwidth: batch-1 decode faster by at most the bandwidth ratio 4.8/3.35; a
    72-GPU NVLink domain: TP 16 no longer all-reduces over InfiniBand; 2x SRAM per PE:
    a 70B model needs fewer CS-3 wafers."""
    kw = dict(model="llama_3_1_70b", batch=1, prompt=2048, generate=256)
    base = float(predict.inference(hardware="h100_sxm", devices=8, tp=8, **kw).tpot_s)
    hbm = float(predict.inference(hardware=str(EXAMPLES / "h100_h200_hbm.yaml"), devices=8, tp=8, **kw).tpot_s)
    assert base / (4.8 / 3.35) <= hbm < base
    ib = predict.inference(hardware="b200", devices=16, tp=16, **kw)
    nvl = predict.inference(hardware=str(EXAMPLES / "b200_nvl72.yaml"), devices=16, tp=16, **kw)
    assert float(nvl.decode_comm_s) < float(ib.decode_comm_s) / 3
    w = predict.inference(hardware=["wse3", str(EXAMPLES / "wse3_2x_sram.yaml")], devices="min", **kw)
    assert int(w.devices.sel(hardware="wse3_2x_sram")) < int(w.devices.sel(hardware="wse3"))


def test_a_derived_file_must_say_what_changed(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("derives_from: h100_sxm\nname: x\ntdp_w: 1000.0\n")
    with pytest.raises(SpecError, match="changes"):
        load_hardware(str(p))
    p.write_text("derives_from: h900\nname: x\nchanges: nothing\n")
    with pytest.raises(SpecError, match="derives_from"):
        load_hardware(str(p))
