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


NEW_TIER_AND_LINK = """derives_from: h100_sxm
name: h100_hbm3e_nvl72
changes: HBM3e 141 GB at 4.8 TB/s and a 72-GPU NVLink5 domain
memory:
  - name: hbm3e
    capacity_bytes: 150.75e9
    bandwidth_bytes_per_s: 4.8e12
links:
  - name: nvlink5
    scope: scale_up
    unidir_bytes_per_s: 900.0e9
    domain_size: 72
"""


def test_an_entry_of_a_new_name_replaces_the_tier_or_the_link_of_its_scope(tmp_path):
    """A derived file's memory tier or link of a new name was appended and never read (the
    design gave the H100's numbers). It replaces the base's device memory, or the base's link of
    its scope, keeping the fields it does not give (nvlink4's latency and efficiency table)."""
    p = tmp_path / "h100_hbm3e_nvl72.yaml"
    p.write_text(NEW_TIER_AND_LINK)
    spec, base = load_hardware(str(p)), load_hardware("h100_sxm")
    assert [m.name for m in spec.memory] == ["hbm3e"] and spec.hbm.bandwidth_bytes_per_s == 4.8e12
    up = spec.link("scale_up")
    assert [ln.name for ln in spec.links] == ["nvlink5", base.link("scale_out").name]
    assert (up.unidir_bytes_per_s, up.domain_size) == (900e9, 72)
    assert up.latency_s == base.link("scale_up").latency_s and up.busbw_eff == base.link("scale_up").busbw_eff
    kw = dict(model="llama_3_1_70b", tp=8, batch=1, weights="fp8")
    assert float(predict.inference(hardware=str(p), **kw).tpot_s) < float(predict.inference(hardware="h100_sxm",
                                                                                            **kw).tpot_s)


@pytest.mark.parametrize("text, match", [
    # the base's nvlink4 changed and a new scale-up link beside it: two links of one scope
    ("links:\n  - name: nvlink4\n    domain_size: 16\n  - name: nvlink5\n    scope: scale_up\n"
     "    domain_size: 72\n", r"links.nvlink5='nvlink5' .*one entry per scale_up link: 'nvlink4' is already"),
    # two tiers of new names: the first replaces HBM3, the second would never be read
    ("memory:\n  - {name: hbm3e, bandwidth_bytes_per_s: 4.8e12}\n  - {name: lpddr5x, capacity_bytes: 4.8e11, "
     "bandwidth_bytes_per_s: 5.0e11}\n", r"memory.lpddr5x=.*one entry per tier: 'hbm3' is already replaced"),
    # a link of a new name that does not say which link it replaces
    ("links:\n  - name: nvlink5\n    domain_size: 72\n", r"links.nvlink5.scope=None .*scale_up or scale_out"),
])
def test_a_derived_file_cannot_add_a_part_no_model_reads(tmp_path, text, match):
    p = tmp_path / "x.yaml"
    p.write_text(f"derives_from: h100_sxm\nname: x\nchanges: a second part\n{text}")
    with pytest.raises(SpecError, match=match):
        load_hardware(str(p))
