"""Wafer-scale specs (wse2, wse3, cs2, cs3): the files load, every figure equals the fact it
cites, the dense peak is derived from the PE rate (not the marketed figure), and a bad file
is an error naming the field.

Facts: shared/reference/wse_facts.md (copied to workbench/calibrate/reference/), cited by
section: "§1" = WSE-2 PE, "§2" = fabric, "§3" = clock, "§4" = program rectangle and I/O,
"§6" = WSE-3 / CS-3.
"""
from __future__ import annotations

import pytest

from workbench.errors import InputError
from workbench.specs import (HARDWARE_DIR, SpecError, SystemSpec, WaferSpec, is_wafer, list_gpus,
                             list_hardware, list_wafers, load_hardware)
from workbench.specs._base import read_yaml
from workbench.specs.wafer import wafer_from_dict

WAFERS = ("wse2", "wse3")
SYSTEMS = ("cs2", "cs3")


def _yaml(name: str) -> dict:
    return read_yaml(HARDWARE_DIR / f"{name}.yaml")


# ---- loading ------------------------------------------------------------------------------
def test_wafers_and_systems_are_in_the_catalog_and_not_gpus():
    assert set(WAFERS + SYSTEMS) <= set(list_hardware())
    assert set(list_wafers()) == set(WAFERS + SYSTEMS)
    assert not set(list_gpus()) & set(WAFERS + SYSTEMS)


@pytest.mark.parametrize("name", WAFERS)
def test_wafer_loads(name):
    w = load_hardware(name)
    assert isinstance(w, WaferSpec) and is_wafer(w)
    assert w.name == name and w.kind == "wafer" and w.vendor == "cerebras"
    assert w.source.strip()  # DESIGN.md: every spec file carries source:


@pytest.mark.parametrize("name, wafer", [("cs2", "wse2"), ("cs3", "wse3")])
def test_system_loads_and_names_its_wafer(name, wafer):
    s = load_hardware(name)
    assert isinstance(s, SystemSpec) and is_wafer(s)
    assert s.kind == "system" and s.wafer == wafer and s.source.strip()
    assert isinstance(load_hardware(s.wafer), WaferSpec)


# ---- figures equal the cited facts --------------------------------------------------------
# (wafer, field, expected, source)
FACTS = [
    # §1: "the WSE-2 provides a total of 850,000 processing elements, each with 48 KB" (Jacquelin IV.A)
    ("wse2", "n_pes", 850_000, "§1 PE count"),
    # §6: "900,000 AI-optimized cores" (Kundu et al. §1)
    ("wse3", "n_pes", 900_000, "§6 cores"),
    # §1: 48 KB = 8 banks x 6 KB = 8 x 6144 B = 49152 B (SDK 2.10 appendix)
    ("wse2", "sram_per_pe_bytes", 49152, "§1 SRAM per PE, banking"),
    ("wse3", "sram_per_pe_bytes", 49152, "§6 SRAM per PE (SDK 48 KB, no generation qualifier)"),
    ("wse2", "sram_banks", 8, "§1 SRAM banking: 8 banks x 6 KB"),
    ("wse3", "sram_banks", 8, "§1 SRAM banking (SDK 2.10 covers WSE-3)"),
    # §1 SIMD table: @fmach (fp16 FMA) width 4 on WSE-2, 8 on WSE-3; §6 Next Platform 8-wide
    ("wse2", "simd_fmas_per_cycle.fp16", 4, "§1 SIMD widths @fmach WSE-2"),
    ("wse3", "simd_fmas_per_cycle.fp16", 8, "§1 SIMD widths @fmach WSE-3; §6 FP16 SIMD"),
    # §1: one fp32 FMAC per cycle (WaferLLM §7)
    ("wse2", "simd_fmas_per_cycle.fp32", 1, "§1 FP32 FMA rate"),
    # §2: "Each link is able to move a 32 bit packet in each direction per cycle" = 4 B/cycle
    ("wse2", "link_bytes_per_cycle", 4, "§2 link width 32 bit"),
    ("wse3", "link_bytes_per_cycle", 4, "§2 link; WaferLLM §8 'retains the same NoC'"),
    # §2: "PE-to-PE communication latency is also one cycle" (SDK White Paper)
    ("wse2", "hop_cycles", 1, "§2 hop latency"),
    ("wse3", "hop_cycles", 1, "§2 hop latency"),
    # §2 / §6: colors 0-23 are routable on WSE-2 and WSE-3
    ("wse2", "routing_colors", 24, "§2 colors"),
    ("wse3", "routing_colors", 24, "§6 routable colors 0-23"),
    # §3: WaferLLM converts cycles with 1.1 GHz; csl-examples with 0.85 GHz
    ("wse2", "clock_hz", 1.1e9, "§3 1.1 GHz"),
    ("wse2", "clock_min_hz", 0.85e9, "§3 850 MHz"),
    ("wse2", "clock_max_hz", 1.1e9, "§3 1.1 GHz"),
    ("wse3", "clock_hz", 1.1e9, "§3 WaferLLM's WSE-3 code uses 1.1 GHz"),
    ("wse3", "clock_min_hz", 0.85e9, "§3 model range 0.85-1.1 GHz"),
    ("wse3", "clock_max_hz", 1.1e9, "§3 model range 0.85-1.1 GHz"),
    # §4: "if you are running on a real CS-2, fabric-dims must be 750,994"
    ("wse2", "program_cols", 750, "§4 usable fabric 750 x 994"),
    ("wse2", "program_rows", 994, "§4 usable fabric 750 x 994"),
    # §8 / A11a: WaferLLM compiles for --fabric-dims=757,996; §6: 762,1172 on WSE-3
    ("wse2", "fabric_cols", 757, "§8 WaferLLM WSE-2 compile fabric"),
    ("wse2", "fabric_rows", 996, "§8 WaferLLM WSE-2 compile fabric"),
    ("wse3", "fabric_cols", 762, "§6 SDK fabric dims 762 x 1172"),
    ("wse3", "fabric_rows", 1172, "§6 SDK fabric dims 762 x 1172"),
    # §1: 16 B read + 8 B write per cycle (Jacquelin IV.A; the conflict is noted in the YAML)
    ("wse2", "mem_read_bytes_per_cycle", 16, "§1 memory bandwidth (a)"),
    ("wse2", "mem_write_bytes_per_cycle", 8, "§1 memory bandwidth (a)"),
    # §1: 30 mW per core (ServeTheHome HC34)
    ("wse2", "pe_power_w", 0.03, "§1 core power"),
    # §1: vendor "AI PFLOPS" 62.5 PF (WSE-2), 125 PF (WSE-3)
    ("wse2", "vendor_peak_flops_per_s", 62.5e15, "§1 vendor AI PFLOPS"),
    ("wse3", "vendor_peak_flops_per_s", 125e15, "§1 vendor AI PFLOPS; §6 Kundu 125 PF"),
]


def _field(spec, path: str):
    head, _, key = path.partition(".")
    v = getattr(spec, head)
    return v[key] if key else v


@pytest.mark.parametrize("name, path, expected, source", FACTS, ids=[f"{f[0]}.{f[1]}" for f in FACTS])
def test_wafer_figure_equals_cited_fact(name, path, expected, source):
    assert _field(load_hardware(name), path) == expected, source


@pytest.mark.parametrize("name", SYSTEMS)
def test_system_io_is_1_2_tbps(name):
    # §4: "Each WSE is housed within a CS system, which provides 1.2 Tbps I/O to and from the
    # chip" (ALCF SC24): 1.2e12 bit/s / 8 bit per byte = 150e9 B/s.
    assert load_hardware(name).io_bytes_per_s == 1.2e12 / 8 == 150e9


def test_cs3_power_and_memoryx():
    # §5 / §6: Kundu Table 1: "System Power 23 kW", "Memory Capacity 1.2-1,200 TB".
    s = load_hardware("cs3")
    assert s.power_w == 23e3
    assert min(s.memoryx_capacity_bytes) >= 1.2e12 and max(s.memoryx_capacity_bytes) <= 1200e12


def test_cs2_power_is_the_measured_average():
    # §4: "CS-2 measured power: 16.1 kW baseline, 22.8 kW avg (25-pt stencil)" (Jacquelin V.C).
    assert load_hardware("cs2").power_w == 22.8e3


def test_program_rectangle_fits_in_the_fabric():
    # §4: the program rectangle is the fabric less support PEs; it can never exceed it, nor
    # the marketed core count.
    for name in WAFERS:
        w = load_hardware(name)
        assert w.program_cols <= w.fabric_cols and w.program_rows <= w.fabric_rows
        assert w.program_pes <= w.n_pes
        assert w.max_square_grid == min(w.program_cols, w.program_rows)
    # wse2: 750 x 994 = 745,500 PEs (§4, KAUST: 35,784,000 PEs / 48 CS-2 = 745,500).
    assert load_hardware("wse2").program_pes == 750 * 994 == 35_784_000 // 48


def test_wse3_program_rectangle_is_fabric_less_memcpy_columns():
    # §4: memcpy support PEs take "three columns on the West ... and two columns on the East":
    # 762 - 5 = 757 columns of the 762 x 1172 fabric (§6).
    w = load_hardware("wse3")
    assert (w.program_cols, w.program_rows) == (762 - 3 - 2, 1172)


def test_reserved_sram_leaves_room_and_is_consistent_with_the_4_cs3_service():
    # wse2.yaml comment / §6 "Inference mapping": Llama 3.1 70B (fp16) on 4 CS-3: 141 GB of
    # weights over 4 x ~887k PEs = 39.8 KB of each 48 KB, leaving <= 8 KB for the rest.
    for name in WAFERS:
        w = load_hardware(name)
        assert 0 < w.sram_reserved_per_pe_bytes < w.sram_per_pe_bytes
        assert w.sram_reserved_per_pe_bytes <= w.sram_per_pe_bytes - 141e9 / (4 * 887e3)


# ---- derived dense peak -------------------------------------------------------------------
def test_wse2_dense_fp16_peak_is_derived_from_the_pe_rate():
    # 2 flop per FMA x 4 FMA/cycle (§1 @fmach WSE-2) x 750 x 994 program PEs (§4) x 1.1 GHz (§3)
    # = 750 * 994 * 8 * 1.1e9 = 6.5604e15 FLOP/s.
    w = load_hardware("wse2")
    assert w.peak("fp16") == pytest.approx(750 * 994 * 8 * 1.1e9, rel=1e-12)
    assert w.peak("fp16") == pytest.approx(6.56e15, rel=1e-3)
    assert w.peak("bf16") == w.peak("fp16")  # bf16 runs on the fp16 datapath (wafer.py)
    # fp32: 1 FMAC/cycle (§1) -> 2 flop/cycle/PE.
    assert w.peak("fp32") == pytest.approx(2 * 1 * 750 * 994 * 1.1e9, rel=1e-12)
    # §9: all 850k PEs at 8 flop/cycle and 1.1 GHz = 7.48 PF (Zhang Table I: 7.5 PF); the
    # program rectangle is a subset, so the derived peak is below that.
    assert w.peak("fp16") < 850_000 * 8 * 1.1e9


def test_wse3_dense_fp16_peak_is_derived_from_the_pe_rate():
    # 2 x 8 (§1 @fmach WSE-3) x 757 x 1172 x 1.1e9 = 15.6e15 (wse3.yaml notes).
    w = load_hardware("wse3")
    assert w.peak("fp16") == pytest.approx(2 * 8 * 757 * 1172 * 1.1e9, rel=1e-12)
    assert w.peak("fp16") == pytest.approx(15.6e15, rel=2e-3)


@pytest.mark.parametrize("name", WAFERS)
def test_peak_scales_with_the_clock(name):
    # peak = 2 x simd x program PEs x clock: linear in the clock (§3: a parameter, 0.85-1.1 GHz).
    w = load_hardware(name)
    assert w.peak("fp16", clock_hz=0.85e9) == pytest.approx(w.peak("fp16") * 0.85 / 1.1, rel=1e-12)
    assert w.peak("fp16", clock_hz=w.clock_hz) == w.peak("fp16")


@pytest.mark.parametrize("name", WAFERS)
def test_dense_peak_is_not_the_vendor_figure(name):
    # §1: the vendor "AI PFLOPS" (62.5 / 125 PF) "do NOT match 850k x 8 x 1.1 GHz ... Do not use
    # as dense peak": the derived peak is far below it (6.56 vs 62.5; 15.6 vs 125).
    w = load_hardware(name)
    assert w.peak("fp16") < w.vendor_peak_flops_per_s / 5
    assert w.peak("fp16") != w.vendor_peak_flops_per_s


def test_a_dtype_without_a_unit_has_nan_peak():
    import math
    assert math.isnan(load_hardware("wse2").peak("fp8"))


# ---- invalid specs are errors naming the field -------------------------------------------
def _bad(name: str, **changes) -> dict:
    data = _yaml(name)
    data.update(changes)
    return data


@pytest.mark.parametrize("clock", [1.2e9, 0.8e9])
def test_clock_outside_its_range_is_an_error_naming_clock_hz(clock):
    with pytest.raises(SpecError, match="clock_hz") as e:
        wafer_from_dict(_bad("wse2", clock_hz=clock), origin="wse2")
    assert isinstance(e.value, (InputError, ValueError))
    assert "wse2" in str(e.value)


@pytest.mark.parametrize("reserved", [49152, 60000])
def test_reserve_at_or_above_the_sram_is_an_error_naming_the_field(reserved):
    with pytest.raises(SpecError, match="sram_reserved_per_pe_bytes"):
        wafer_from_dict(_bad("wse3", sram_reserved_per_pe_bytes=reserved), origin="wse3")


def test_unknown_key_is_an_error_naming_the_key():
    # DESIGN.md: "YAML keys are exactly the field names, so an unknown key is an error".
    with pytest.raises(SpecError, match="sram_per_pe_kb"):
        wafer_from_dict(_bad("wse2", sram_per_pe_kb=48), origin="wse2")
    with pytest.raises(SpecError, match="io_gbps"):
        wafer_from_dict(_bad("cs3", io_gbps=1200), origin="cs3")


def test_missing_key_is_an_error_naming_the_key():
    data = _yaml("wse2")
    del data["hop_cycles"]
    with pytest.raises(SpecError, match="hop_cycles"):
        wafer_from_dict(data, origin="wse2")


@pytest.mark.parametrize("field, value", [("n_pes", 0), ("program_cols", 750.5), ("link_bytes_per_cycle", 0),
                                          ("stage_cycles", -1.0), ("simd_fmas_per_cycle", {"fp16": 0}),
                                          ("simd_fmas_per_cycle", {"fp12": 4})])
def test_bad_values_are_errors_naming_the_field(field, value):
    with pytest.raises(SpecError, match=field):
        wafer_from_dict(_bad("wse2", **{field: value}), origin="wse2")


def test_bad_system_io_is_an_error_naming_the_field():
    with pytest.raises(SpecError, match="io_bytes_per_s"):
        wafer_from_dict(_bad("cs2", io_bytes_per_s=0), origin="cs2")


def test_good_files_round_trip():
    for name in WAFERS + SYSTEMS:
        assert wafer_from_dict(_yaml(name), origin=name) == load_hardware(name)


def test_a_program_rectangle_larger_than_the_fabric_is_an_error():
    with pytest.raises(SpecError, match=r"program_cols=800 is not allowed; expected <= fabric_cols = 762"):
        wafer_from_dict(_bad("wse3", program_cols=800), origin="wse3")
    with pytest.raises(SpecError, match=r"program_rows=1200.*fabric_rows = 1172"):
        wafer_from_dict(_bad("wse3", program_rows=1200), origin="wse3")


def test_a_name_must_be_a_string_and_a_rate_finite():
    with pytest.raises(SpecError, match="name=123"):
        wafer_from_dict(dict(_yaml("wse3"), name=123), origin="wse3")
    with pytest.raises(SpecError, match="io_bytes_per_s=inf"):
        wafer_from_dict(_bad("cs3", io_bytes_per_s=float("inf")), origin="cs3")
