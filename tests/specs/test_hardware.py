"""Hardware catalog checks: every YAML loads, its numbers equal the datasheet figures they
cite, unknown keys are errors, and the efficiency tables are sane.

Reference figures are rows of ../shared/reference/measurements.csv (stas00/ml-engineering
TFLOPS and memory tables, vendor datasheets); each expected number names its row id.
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.specs import (HARDWARE_DIR, EfficiencyTable, HardwareSpec, SpecError,
                             list_gpus, load_hardware)
from workbench.specs._base import read_yaml
from workbench.specs.hardware import hardware_from_dict
from workbench.units import GIB, MIB

HARDWARE = list_gpus()
EXPECTED_HARDWARE = {"a100_sxm", "h100_sxm", "h200_sxm", "b200", "mi300x"}

# CAPACITY: NVIDIA's "80 GB" / "141 GB" HBM is binary-sized. The specs hold the device memory
# nvidia-smi reports (memory.total: H100 SXM 81559 MiB, A100 80GB 81920 MiB, H200 143771 MiB,
# B200 183359 MiB; GB200 189471, GB300 284208, B300 275040 MiB as aiconfigurator-core 0.12.0's
# systems/*.yaml quote them; cited in the YAML comments), which is the marketed figure in GiB within 0.5%:
# 81559 MiB = 79.65 GiB, 81920 MiB = 80.00 GiB, 143771 MiB = 140.40 GiB, 183359 MiB = 179.06
# GiB (B200's "180 GB usable", A19d, within 0.6%). MI300X (A21d) keeps the decimal figure the table quotes.
NVIDIA_SMI_MIB = {"h100_sxm": 81559, "a100_sxm": 81920, "h200_sxm": 143771, "b200": 183359,
                  "gb200": 189471, "gb300": 284208, "b300": 275040}

# (hardware, attribute path, expected SI value, relative tolerance, measurements.csv id)
# Datasheet figures are quoted to 3-4 significant digits ("989 TFLOP/s"), so a spec that
# keeps more digits (989.4e12) matches within the rounding of the quoted figure.
DATASHEET = [
    # NVIDIA H100 SXM: A16a 989 TFLOP/s dense BF16, A16b 1979 dense FP8, A17a 80 GB, A17b 3.35 TB/s.
    ("h100_sxm", "peak.bf16", 989e12, 0.005, "A16a"),
    ("h100_sxm", "peak.fp16", 989e12, 0.005, "A16a"),
    ("h100_sxm", "peak.fp8", 1979e12, 0.005, "A16b"),
    ("h100_sxm", "hbm.capacity", 80 * GIB, 0.005, "A17a"),  # see CAPACITY note below
    ("h100_sxm", "hbm.bandwidth", 3.35e12, 0.0, "A17b"),
    ("h100_sxm", "scale_up.unidir", 450e9, 0.0, "A22a"),  # NVLink4 line rate per direction
    # NVIDIA H200 SXM: same compute as H100 (A16 notes: "H200 identical compute"),
    # A18a 141 GB, A18b 4.8 TB/s.
    ("h200_sxm", "peak.bf16", 989e12, 0.005, "A16a"),
    ("h200_sxm", "peak.fp8", 1979e12, 0.005, "A16b"),
    ("h200_sxm", "hbm.capacity", 141 * GIB, 0.005, "A18a"),
    ("h200_sxm", "hbm.bandwidth", 4.8e12, 0.0, "A18b"),
    ("h200_sxm", "scale_up.unidir", 450e9, 0.0, "A22a"),
    # NVIDIA B200: A19a 2250 BF16, A19b 4500 FP8, A19c 9000 FP4 (dense), A19d 180 GB, A19e 8.0 TB/s.
    ("b200", "peak.bf16", 2250e12, 0.0, "A19a"),
    ("b200", "peak.fp8", 4500e12, 0.0, "A19b"),
    ("b200", "peak.fp4", 9000e12, 0.0, "A19c"),
    ("b200", "hbm.capacity", 180 * GIB, 0.006, "A19d"),  # see CAPACITY note (179.06 GiB)
    ("b200", "hbm.bandwidth", 8.0e12, 0.0, "A19e"),
    # NVIDIA A100 SXM 80GB: A20a 312 BF16, A20b 2.0 TB/s, A20c 80 GB.
    ("a100_sxm", "peak.bf16", 312e12, 0.0, "A20a"),
    ("a100_sxm", "hbm.bandwidth", 2.0e12, 0.0, "A20b"),
    ("a100_sxm", "hbm.capacity", 80 * GIB, 0.005, "A20c"),
    # AMD MI300X: A21a 1300 BF16, A21b 2610 FP8 (quoted rounded: the datasheet's 1307.4 / 2614.9
    # are within 1%), A21c 5.3 TB/s, A21d 192 GB.
    ("mi300x", "peak.bf16", 1300e12, 0.01, "A21a"),
    ("mi300x", "peak.fp8", 2610e12, 0.01, "A21b"),
    ("mi300x", "hbm.bandwidth", 5.3e12, 0.01, "A21c"),
    ("mi300x", "hbm.capacity", 192e9, 0.01, "A21d"),
]

# The unit each row of measurements.csv quotes, to SI.
_CSV_UNITS = {"TFLOP/s": 1e12, "GB": 1e9, "TB/s": 1e12, "GB/s": 1e9}
try:  # the copy packaged with calibrate/, else the shared reference folder of the checkout
    from workbench.calibrate.measurements import REFERENCE_CSV as _MEASUREMENTS
except ImportError:  # pragma: no cover
    _MEASUREMENTS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "measurements.csv"


def _value(hw: HardwareSpec, path: str) -> float:
    kind, what = path.split(".")
    if kind == "peak":
        return hw.peak(what)
    if kind == "hbm":
        return hw.hbm.capacity_bytes if what == "capacity" else hw.hbm.bandwidth_bytes_per_s
    if kind == "scale_up":
        return hw.link("scale_up").unidir_bytes_per_s
    raise AssertionError(path)


def _tables(hw: HardwareSpec):
    yield "gemm_eff", hw.gemm_eff
    yield "memory_eff", hw.memory_eff
    for ln in hw.links:
        yield f"links.{ln.name}.busbw_eff", ln.busbw_eff


# ---- catalog ---------------------------------------------------------------------------------
def test_catalog_has_every_chip():
    assert set(HARDWARE) >= EXPECTED_HARDWARE, sorted(EXPECTED_HARDWARE - set(HARDWARE))


@pytest.mark.parametrize("name", HARDWARE)
def test_hardware_file_loads(name):
    hw = load_hardware(name)
    assert isinstance(hw, HardwareSpec)
    assert hw.name == name == (HARDWARE_DIR / f"{name}.yaml").stem
    assert hw.source.strip(), "every spec file cites its source"
    assert hw.hbm.capacity_bytes > 1e9 and hw.hbm.bandwidth_bytes_per_s > 1e11  # SI, not GB
    assert all(isinstance(v, float) and v > 1e12 for dt, v in hw.peak_flops_per_s.items()
               if dt != "fp32"), hw.peak_flops_per_s  # FLOP/s, not TFLOP/s; floats, not strings
    assert hw.link("scale_up").domain_size >= 2
    assert hw.link("scale_out").unidir_bytes_per_s > 0
    assert hw.n_sms > 0 and hw.gemm_tile_m > 0 and hw.gemm_tile_n > 0


def test_unknown_hardware_name():
    with pytest.raises(InputError, match=r"hardware='tpu_v9'.*allowed: .*h100_sxm"):
        load_hardware("tpu_v9")


@pytest.mark.parametrize("name, path, expected, rtol, row", DATASHEET,
                         ids=[f"{d[0]}-{d[1]}-{d[4]}" for d in DATASHEET])
def test_spec_matches_datasheet(name, path, expected, rtol, row):
    got = _value(load_hardware(name), path)
    assert got == pytest.approx(expected, rel=rtol, abs=0), f"{name} {path} vs measurements.csv {row}"


@pytest.mark.skipif(not _MEASUREMENTS.exists(), reason="shared reference measurements.csv not present")
def test_expected_figures_are_transcribed_from_measurements_csv():
    """The DATASHEET numbers above are the csv's own figures (guards the transcription)."""
    with open(_MEASUREMENTS, newline="") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    for name, path, expected, rtol, row in DATASHEET:
        r = rows[row]
        unit = GIB if path == "hbm.capacity" and name in NVIDIA_SMI_MIB else _CSV_UNITS[r["unit"]]
        assert float(r["value"]) * unit == pytest.approx(expected, rel=1e-12), (row, r)


@pytest.mark.parametrize("name, mib", sorted(NVIDIA_SMI_MIB.items()))
def test_capacity_is_nvidia_smi_memory_total(name, mib):
    # The YAML stores the nvidia-smi figure rounded to 4 significant digits (85.52e9).
    assert load_hardware(name).hbm.capacity_bytes == pytest.approx(mib * MIB, rel=5e-4)


def test_a100_has_no_fp8_units():
    # Ampere has no FP8 tensor cores (A100 datasheet); peak() is NaN so predictions say
    # "does not fit / unsupported" instead of inventing a number.
    assert np.isnan(load_hardware("a100_sxm").peak("fp8"))
    assert np.isnan(load_hardware("h100_sxm").peak("fp4"))  # FP4 arrived with Blackwell


# ---- unknown / bad keys -------------------------------------------------------------------
def _h100_dict() -> dict:
    return read_yaml(HARDWARE_DIR / "h100_sxm.yaml")


def test_dict_round_trip_builds_the_same_spec():
    assert hardware_from_dict(_h100_dict(), origin="h100_sxm") == load_hardware("h100_sxm")


def test_unknown_top_level_key_is_an_error():
    data = _h100_dict()
    data["hbm_bandwith_bytes_per_s"] = 3.35e12  # a typo must not be a silent default
    with pytest.raises(SpecError, match="hbm_bandwith_bytes_per_s") as e:
        hardware_from_dict(data, origin="h100_sxm")
    assert "h100_sxm" in str(e.value)
    assert isinstance(e.value, ValueError)  # DESIGN.md: validation raises ValueError


def test_unknown_memory_tier_key_is_an_error():
    data = _h100_dict()
    data["memory"] = [dict(data["memory"][0], latency_ns=500)]
    with pytest.raises(SpecError, match="latency_ns"):
        hardware_from_dict(data, origin="h100_sxm")


def test_unknown_link_key_is_an_error():
    data = _h100_dict()
    data["links"] = [dict(data["links"][0], bidir_bytes_per_s=900e9)] + data["links"][1:]
    with pytest.raises(SpecError, match="bidir_bytes_per_s"):
        hardware_from_dict(data, origin="h100_sxm")


def test_unknown_efficiency_table_key_is_an_error():
    data = _h100_dict()
    data["gemm_eff"] = dict(data["gemm_eff"], slope=1.0)
    with pytest.raises(SpecError, match="slope"):
        hardware_from_dict(data, origin="h100_sxm")


def test_missing_required_key_is_an_error():
    data = _h100_dict()
    del data["n_sms"]
    with pytest.raises(SpecError, match="n_sms"):
        hardware_from_dict(data, origin="h100_sxm")


@pytest.mark.parametrize("field, value", [
    ("peak_flops_per_s", {"bf16": 989.4e12, "fp6": 1.0e15}),  # unknown dtype
    ("peak_flops_per_s", {"bf16": -1.0}),
    ("gemm_peak_eff", {"bf16": 1.2}),
    ("gemm_peak_eff", {"fp8": 0.7}),  # no bf16 fallback
    ("tdp_w", 0.0),
])
def test_bad_field_values_are_errors(field, value):
    data = _h100_dict()
    data[field] = value
    with pytest.raises(SpecError, match=field):
        hardware_from_dict(data, origin="h100_sxm")


def test_bad_link_scope_is_an_error():
    data = _h100_dict()
    data["links"] = [dict(data["links"][0], scope="scale_sideways")] + data["links"][1:]
    with pytest.raises(SpecError, match="scale_sideways"):
        hardware_from_dict(data, origin="h100_sxm")


def test_specs_are_frozen():
    hw = load_hardware("h100_sxm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.n_sms = 1


# ---- efficiency tables ----------------------------------------------------------------------
TABLES = [(name, key) for name in HARDWARE for key, _ in _tables(load_hardware(name))]


@pytest.mark.parametrize("name, key", TABLES, ids=[f"{n}-{k}" for n, k in TABLES])
def test_efficiency_tables_in_unit_interval(name, key):
    table = dict(_tables(load_hardware(name)))[key]
    eff = np.asarray(table.eff)
    assert np.all((eff > 0) & (eff <= 1)), eff
    assert table.source.strip(), "every table says where its numbers come from"


@pytest.mark.parametrize("name", HARDWARE)
def test_gemm_peak_eff_in_unit_interval(name):
    hw = load_hardware(name)
    assert all(0 < v <= 1 for v in hw.gemm_peak_eff.values()), hw.gemm_peak_eff


@pytest.mark.parametrize("name, key", [(n, k) for n in HARDWARE for k in ("gemm_eff", "memory_eff")])
def test_efficiency_monotone_in_size(name, key):
    """Bigger kernels amortize launch, latency and ramp: efficiency never falls with size."""
    table = getattr(load_hardware(name), key)
    assert np.all(np.diff(np.asarray(table.eff)) >= 0), table.eff
    # ... and the interpolated curve inherits it (log-log interpolation, clamped ends).
    sizes = np.logspace(np.log10(table.size[0]) - 2, np.log10(table.size[-1]) + 2, 400)
    assert np.all(np.diff(table(sizes)) >= -1e-15)


@pytest.mark.parametrize("name, key", TABLES, ids=[f"{n}-{k}" for n, k in TABLES])
def test_table_points_never_make_a_bigger_size_faster(name, key):
    """time = size / (peak · eff(size)). Between two table points time grows iff the
    efficiency grows more slowly than the size: log-log slope <= 1 (a kernel or message
    twice as big never finishes sooner)."""
    table = dict(_tables(load_hardware(name)))[key]
    s, e = np.log(np.asarray(table.size)), np.log(np.asarray(table.eff))
    assert np.all(np.diff(e) <= np.diff(s)), (table.size, table.eff)


def _interpolated_time_violations():
    bad = []
    for name, key in TABLES:
        table = dict(_tables(load_hardware(name)))[key]
        sizes = np.logspace(np.log10(table.size[0]) - 1, np.log10(table.size[-1]) + 1, 2000)
        t = sizes / table(sizes)
        if np.any(t[1:] < t[:-1] * (1 - 1e-12)):
            i = int(np.argmax(t[:-1] / t[1:]))
            bad.append(f"{name} {key}: size/eff {t[i]:.4g} at {sizes[i]:.4g} > {t[i + 1]:.4g} at {sizes[i + 1]:.4g}")
    return bad


def test_interpolated_time_never_falls_with_size():
    """size / eff(size) never falls between or beyond the table points: eff is a power law
    between points (log eff linear in log size) and every segment has log-log slope < 1
    (test above), so time ~ size^(1 - slope) grows."""
    bad = _interpolated_time_violations()
    assert not bad, "\n".join(bad)


def test_efficiency_table_interpolates_in_log_size_and_clamps():
    t = EfficiencyTable(size=(1e6, 1e8), eff=(0.2, 0.8))
    assert t(1e6) == pytest.approx(0.2)
    assert t(1e8) == pytest.approx(0.8)
    # log(eff) is linear in log(size) (a power law between points): at the geometric
    # midpoint of the sizes the eff is the geometric mean of the effs, sqrt(0.2 * 0.8) = 0.4.
    assert t(1e7) == pytest.approx(np.sqrt(0.2 * 0.8))
    # ... and anywhere on the segment eff = 0.2 * (size / 1e6) ** (log(4) / log(100)).
    assert t(10**6.5) == pytest.approx(0.2 * 4 ** 0.25)
    assert t(1.0) == pytest.approx(0.2) and t(1e12) == pytest.approx(0.8)  # held beyond ends
    assert t(np.array([1e6, 1e7, 1e8])) == pytest.approx([0.2, 0.4, 0.8])


@pytest.mark.parametrize("size, eff", [
    ((1e6, 1e8), (0.5, 1.01)),  # eff > 1
    ((1e6, 1e8), (0.0, 0.5)),  # eff == 0 (must be in (0, 1])
    ((1e6, 1e8), (-0.1, 0.5)),
    ((1e8, 1e6), (0.5, 0.6)),  # descending sizes
    ((1e6, 1e6), (0.5, 0.6)),  # repeated size (not strictly ascending)
    ((0.0, 1e6), (0.5, 0.6)),  # non-positive size (log interpolation)
    ((1e6, 1e8), (0.5,)),  # length mismatch
    ((), ()),  # empty
])
def test_efficiency_table_rejects_bad_tables(size, eff):
    with pytest.raises(SpecError):
        EfficiencyTable(size=size, eff=eff)


def test_efficiency_table_accepts_eff_of_one():
    assert EfficiencyTable(size=(1.0, 2.0), eff=(1.0, 1.0))(1.5) == 1.0


# ---- what a spec must not hold: parts no model reads, names that select nothing ----------------
def _h100_with(**changes) -> dict:
    data = _h100_dict()
    data.update(changes)
    return data


def test_a_second_memory_tier_or_a_second_link_of_a_scope_is_refused():
    """HardwareSpec.hbm reads memory[0] and link(scope) the first link of its scope: a second
    tier or link was silently unused (an HBM3e tier beside HBM3 gave the H100's numbers)."""
    data = _h100_dict()
    second = dict(data["memory"][0], name="hbm3e", bandwidth_bytes_per_s=4.8e12)
    with pytest.raises(SpecError, match=r"memory=\['hbm3', 'hbm3e'\].*exactly one tier"):
        hardware_from_dict(_h100_with(memory=[data["memory"][0], second]), origin="h100_sxm")
    nvl5 = dict(data["links"][0], name="nvlink5", unidir_bytes_per_s=900e9)
    with pytest.raises(SpecError, match=r"scope scale_up.*\['nvlink4', 'nvlink5'\].*exactly one link"):
        hardware_from_dict(_h100_with(links=[*data["links"], nvl5]), origin="h100_sxm")
    with pytest.raises(SpecError, match=r"scope scale_out.*\[\].*exactly one link"):
        hardware_from_dict(_h100_with(links=data["links"][:1]), origin="h100_sxm")


@pytest.mark.parametrize("field, value, allowed", [
    ("kernel_tables", "h900", "a100_sxm, b200"),  # a typo fell back to the analytical efficiencies
    ("default_framework", "tensorrt", "sglang, trtllm, vllm"),
])
def test_kernel_tables_and_default_framework_name_existing_tables(field, value, allowed):
    with pytest.raises(SpecError, match=rf"{field}='{value}' is not allowed; expected .*{allowed}"):
        hardware_from_dict(_h100_with(**{field: value}), origin="h100_sxm")
    assert hardware_from_dict(_h100_with(kernel_tables="", default_framework=""), origin="h").kernel_tables == ""


@pytest.mark.parametrize("scope, domain, allowed", [
    ("scale_up", 0, "a positive integer on a scale_up link"),  # 0 divided every collective: TPOT inf, fits
    ("scale_up", 7.5, "a positive integer"),
    ("scale_out", 64, "0 on a scale_out link"),  # read by nothing: a cluster size that changed nothing
])
def test_link_domain_size_is_what_its_scope_reads(scope, domain, allowed):
    data = _h100_dict()
    links = [dict(ln, domain_size=domain) if ln["scope"] == scope else ln for ln in data["links"]]
    with pytest.raises(SpecError, match=rf"domain_size={domain}.*{allowed}"):
        hardware_from_dict(_h100_with(links=links), origin="h100_sxm")


def test_infinite_numbers_and_non_string_names_are_refused():
    """.inf is no bandwidth (it was accepted: decode at infinite HBM speed); `name: 123` no name."""
    data = _h100_dict()
    with pytest.raises(SpecError, match="bandwidth_bytes_per_s=inf.*finite positive"):
        hardware_from_dict(_h100_with(memory=[dict(data["memory"][0], bandwidth_bytes_per_s=float("inf"))]),
                           origin="h100_sxm")
    with pytest.raises(SpecError, match="peak_flops_per_s.fp8=inf"):
        hardware_from_dict(_h100_with(peak_flops_per_s=dict(data["peak_flops_per_s"], fp8=float("inf"))),
                           origin="h100_sxm")
    with pytest.raises(SpecError, match="name=123 is not allowed; expected a non-empty string"):
        hardware_from_dict(_h100_with(name=123), origin="h100_sxm")


def test_a_missing_bf16_peak_is_named_as_missing():
    """Deleting peak_flops_per_s.bf16 reported sparse_2_4_speedup.bf16 (listed without a peak)."""
    data = _h100_dict()
    peaks = {k: v for k, v in data["peak_flops_per_s"].items() if k != "bf16"}
    with pytest.raises(SpecError, match=r"peak_flops_per_s.bf16=None is not allowed; expected a value"):
        hardware_from_dict(_h100_with(peak_flops_per_s=peaks), origin="h100_sxm")
