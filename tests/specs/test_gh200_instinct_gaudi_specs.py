"""GH200 (the Hopper GPU of the Grace Hopper superchip), AMD's MI325X and MI355X and Intel's Gaudi 2
and Gaudi 3: every figure is the cited one, each chip sits where its measured sibling puts it, and
predictions run.

Cited figures (stas00/ml-engineering compute/accelerator/README.md, 2026 version, the source of
measurements.csv A16-A21 and B01-B20): the 'TFLOPS comparison table' (dense, per GPU), the BF16
peak formula table (MI355X: 2400 MHz x 512 FMAs per Matrix Core per clock x 1024 Matrix Cores x 2),
the memory table and the 'Maximum Achievable Matmul FLOPS comparison table' (measurements.csv B23,
B24, B26, B27, B29-B32, added by the workbench). MI355X's 1,400 W: The Register, 2025-06-12; its
Infinity Fabric links: AMD's MI355X specifications (153.6 GB/s bidirectional per link, 7 links).
Gaudi's links: Intel's Gaudi 2 and Gaudi 3 white papers (24 RoCE ports of 100 / 200 GbE, 21 of them
joining the 8 cards of a server, 3 to each peer).
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import kernel_tables
from workbench.calibrate.measurements import row
from workbench.specs import list_gpus, load_hardware
from workbench.units import GIB
from gpu_spec_checks import spec_value

T, G = 1e12, 1e9
NEW = ("gh200", "mi325x", "mi355x", "gaudi2", "gaudi3")

# (hardware, attribute path, expected SI value, relative tolerance, cited figure)
CITED = [
    ("gh200", "peak.bf16", 989 * T, 0.001, "TFLOPS table: bf16 989"),
    ("gh200", "peak.fp8", 1979 * T, 0.001, "TFLOPS table: fp8 1979"),
    ("gh200", "peak.tf32", 494.5 * T, 0.001, "TFLOPS table: tf32 494.5"),
    ("gh200", "hbm.capacity", 141 * GIB, 0.001, "MAMF table: '900W 141GiB HBM3e version'"),
    ("gh200", "hbm.bandwidth", 4.8 * T, 0.0, "memory table: GH200 SXM (2) 4.80 TB/s"),
    ("mi325x", "peak.bf16", 1300 * T, 0.006, "TFLOPS table: bf16 1300 (MI300X datasheet 1307.4)"),
    ("mi325x", "peak.fp8", 2610 * T, 0.002, "TFLOPS table: fp8 2610"),
    ("mi325x", "peak.fp32", 163.4 * T, 0.0, "TFLOPS table: fp32 163.4"),
    ("mi325x", "hbm.capacity", 256 * G, 0.0, "memory table: 256 GB"),
    ("mi325x", "hbm.bandwidth", 6.0 * T, 0.0, "memory table: 6.00 TB/s"),
    ("mi355x", "peak.bf16", 2400e6 * 512 * 1024 * 2, 1e-4, "formula table: 2400 MHz x 512 x 1024 x 2"),
    ("mi355x", "peak.bf16", 2500 * T, 0.007, "TFLOPS table: bf16 2500 (AMD's 2.5 PFLOPS)"),
    ("mi355x", "peak.fp8", 5000 * T, 0.007, "TFLOPS table: fp8 5000"),
    ("mi355x", "peak.fp4", 10100 * T, 0.004, "TFLOPS table: fp4 10100 dense"),
    ("mi355x", "peak.fp32", 157.3 * T, 0.0, "TFLOPS table: fp32 157.3"),
    ("mi355x", "hbm.capacity", 288 * G, 0.0, "memory table: 288 GB"),
    ("mi355x", "hbm.bandwidth", 8.0 * T, 0.0, "memory table: 8.00 TB/s"),
    ("gaudi2", "peak.bf16", 1650e6 * 256 * 256 * 2 * 2, 1e-4, "formula table: 1650 MHz x 256*256 x 2 MMEs x 2"),
    ("gaudi2", "peak.bf16", 432 * T, 0.002, "TFLOPS table: bf16 432"),
    ("gaudi2", "peak.fp8", 865 * T, 0.0, "TFLOPS table: fp8 865"),
    ("gaudi2", "hbm.capacity", 96 * G, 0.0, "memory table: 96 GB"),
    ("gaudi2", "hbm.bandwidth", 2.46 * T, 0.0, "memory table: 2.46 TB/s"),
    ("gaudi3", "peak.bf16", 1600e6 * 256 * 256 * 8 * 2, 1e-4, "formula table: 1600 MHz x 256*256 x 8 MMEs x 2"),
    ("gaudi3", "peak.fp8", 1677 * T, 0.001, "TFLOPS table: fp8 1677 (note 19: as bf16)"),
    ("gaudi3", "peak.fp16", 459 * T, 0.0, "TFLOPS table: fp16 459"),
    ("gaudi3", "peak.fp32", 229 * T, 0.0, "TFLOPS table: fp32 229"),
    ("gaudi3", "hbm.capacity", 128 * G, 0.0, "memory table: 128 GB"),
    ("gaudi3", "hbm.bandwidth", 3.7 * T, 0.0, "memory table: 3.70 TB/s"),
]


@pytest.mark.parametrize("name,path,expected,rtol,cited", CITED)
def test_spec_is_the_cited_figure(name, path, expected, rtol, cited):
    assert spec_value(load_hardware(name), path) == pytest.approx(expected, rel=rtol, abs=0.0), cited


@pytest.mark.parametrize("name,vendor,tdp_w", [("gh200", "nvidia", 900.0), ("mi325x", "amd", 1000.0),
                                               ("mi355x", "amd", 1400.0), ("gaudi2", "habana", 600.0),
                                               ("gaudi3", "habana", 900.0)])
def test_catalog_entries(name, vendor, tdp_w):
    """In the GPU catalog, with a source, dense peaks in FLOP/s, the measured module's power
    (GH200: the MAMF row's 900 W module; MI325X: 1000 W; MI355X: 1.4 kW; Gaudi 2 and 3: their
    OAM cards, 600 and 900 W) and a device-hour price."""
    hw = load_hardware(name)
    assert name in list_gpus() and hw.vendor == vendor and hw.source.strip()
    assert all(isinstance(v, float) and v > 1e12 for v in hw.peak_flops_per_s.values())
    assert hw.tdp_w == tdp_w and 0 < hw.price_usd_per_hour < 10


def test_mi355x_links_are_seven_of_its_infinity_fabric_links():
    """153.6 GB/s bidirectional per link, 7 peers in the 8-GPU mesh: 537.6 GB/s per direction,
    1.2x the MI300X/MI325X's 7 x 64 GB/s."""
    mi355x, mi325x = (load_hardware(n).link("scale_up") for n in ("mi355x", "mi325x"))
    assert mi355x.unidir_bytes_per_s == pytest.approx(7 * 153.6e9 / 2)
    assert mi325x.unidir_bytes_per_s == load_hardware("mi300x").link("scale_up").unidir_bytes_per_s == 448e9
    assert mi355x.domain_size == mi325x.domain_size == 8


@pytest.mark.parametrize("name,dtype,mamf_row", [("gh200", "bf16", "B23"), ("gh200", "fp8", "B24"),
                                                 ("mi325x", "bf16", "B26"), ("mi355x", "bf16", "B27"),
                                                 ("gaudi2", "bf16", "B29"), ("gaudi2", "fp8", "B30"),
                                                 ("gaudi3", "bf16", "B31"), ("gaudi3", "fp8", "B32")])
def test_large_gemm_is_the_measured_mamf(name, dtype, mamf_row):
    """The model's large-GEMM plateau (16384^3) against the MAMF row within 3% (the ramp's
    plateau sits 1.8-2.1% below the spec's efficiency on every chip, MI300X's B20 included)."""
    got = float(predict.gemm(hardware=name, m=16384, n=16384, k=16384, dtype=dtype, framework="none").flops_per_s)
    assert got == pytest.approx(row(mamf_row)["value_si"], rel=0.03)


def test_gh200_is_the_h200_die_at_900_w():
    """Same peaks and the H200's kernel tables (aiconfigurator-core times no GH200); its
    measured GEMM efficiency above the H200's by the MAMF rows' ratio (828.6 vs 794.5 BF16)."""
    gh, h = load_hardware("gh200"), load_hardware("h200_sxm")
    assert gh.peak_flops_per_s == h.peak_flops_per_s and gh.kernel_tables == "h200_sxm"
    assert kernel_tables.frameworks(gh) == kernel_tables.frameworks(h) == ["trtllm", "vllm", "sglang"]
    big = predict.gemm(hardware=["gh200", "h200_sxm"], m=16384, n=16384, k=16384, dtype="bf16", framework="none")
    ratio = float(big.flops_per_s[0] / big.flops_per_s[1])
    assert ratio == pytest.approx(row("B23")["value_si"] / row("B01")["value_si"], rel=0.005)
    # a served kernel from the tables is the H200's at the same framework
    t = dict(m=64, n=8192, k=8192, dtype="bf16", framework="trtllm")
    assert float(predict.gemm(hardware="gh200", **t).time_s) == float(predict.gemm(hardware="h200_sxm", **t).time_s)


def test_instinct_and_gaudi_parts_have_no_kernel_tables():
    """No table of aiconfigurator-core times them: framework none by default; vLLM and SGLang run
    their engines on the AMD parts, vLLM alone on Gaudi (its Gaudi plugin; frameworks.yaml runs_on)."""
    for name, engines in (("mi325x", ["vllm", "sglang"]), ("mi355x", ["vllm", "sglang"]), ("gaudi2", ["vllm"]),
                          ("gaudi3", ["vllm"])):
        spec = load_hardware(name)
        assert kernel_tables.frameworks(spec) == [] and kernel_tables.resolve(spec, None) == "none"
        assert kernel_tables.runs_here(spec) == engines


def test_gaudi_links_are_21_of_its_24_roce_ports():
    """3 ports to each of the 7 other cards of a server (21) inside, 3 out: Gaudi 2's 100 GbE and
    Gaudi 3's 200 GbE ports, 12.5 and 25 GB/s per direction each."""
    for name, port in (("gaudi2", 12.5e9), ("gaudi3", 25e9)):
        spec = load_hardware(name)
        assert spec.link("scale_up").unidir_bytes_per_s == pytest.approx(21 * port)
        assert spec.link("scale_out").unidir_bytes_per_s == pytest.approx(3 * port)
        assert spec.link("scale_up").domain_size == 8


def test_fp4_math_only_on_cdna4():
    """MI355X has FP4 (MXFP4) matrix units; MI325X, CDNA3 like MI300X, does not: its FP4 GEMM is
    flagged, an FP4-weight deployment runs weight-only on BF16 math."""
    gemm = predict.gemm(hardware=["mi325x", "mi355x"], m=8192, n=8192, k=8192, dtype="fp4")
    assert list(gemm.fits.values) == [False, True] and "no fp4 math units on mi325x" in str(gemm.reason.values[0])
    inf = predict.inference(hardware=["mi325x", "mi355x"], model="llama_3_1_70b", tp=1, batch=1, prompt=1024,
                            generate=128, weights="fp4")
    assert list(inf.activations.values) == ["bf16", "fp4"] and bool(np.all(inf.fits))


def test_memory_makes_the_difference_between_mi300x_and_mi325x():
    """The same compute: a memory-bound decode step is faster by up to the bandwidth ratio
    (6.0 / 5.3), and the larger HBM holds a larger batch."""
    kw = dict(model="llama_3_1_70b", tp=8, prompt=2048, generate=512, weights="fp8")
    ds = predict.inference(hardware=["mi300x", "mi325x"], batch=8, **kw)
    speedup = float(ds.tpot_s[0] / ds.tpot_s[1])
    assert 1.0 < speedup <= 6.0 / 5.3 * 1.001
    most = predict.inference(hardware=["mi300x", "mi325x"], batch="max", **kw)  # the largest batch that fits
    assert float(most.batch[1]) > 1.3 * float(most.batch[0])


@pytest.mark.parametrize("name", NEW)
def test_predictions_run(name):
    """Inference, fixed-concurrency serving (GH200 under its default framework's tables, the
    Instinct parts on the analytical efficiencies) and training give finite, fitting points."""
    inf = predict.inference(hardware=name, model="llama_3_1_70b", tp=4, batch=16, prompt=2048, generate=256,
                            weights="fp8")
    srv = predict.serving(hardware=name, model="llama_3_1_70b", tp=4, concurrency=[1, 32], prompt=2048,
                          generate=256, weights="fp8")
    trn = predict.training(hardware=name, model="llama_3_1_8b", devices=64, tp=2, seq_len=8192, global_batch=128)
    for ds, var in ((inf, "tpot_s"), (srv, "tpot_s"), (trn, "mfu")):
        assert bool(np.all(ds.fits)) and bool(np.all(np.isfinite(ds[var]))) and bool(np.all(ds[var] > 0))
    assert 0.2 < float(trn.mfu) < 0.7


def test_instinct_parts_without_their_own_figure_carry_mi300x_measured_ones():
    """MI325X is MI300X's CDNA3 compute dies: it carries MI300X's measured FlashAttention-2
    efficiency (B37); both newer parts carry its measured HBM fraction (B35: triad 4.09 of 5.3 TB/s)
    at their own bandwidth. Each part's FP8 GEMM efficiency is its own measurement (B34, B39, B40)."""
    mi300x, mi325x, mi355x = (load_hardware(n) for n in ("mi300x", "mi325x", "mi355x"))
    assert mi325x.attention_peak_eff_for("bf16") == mi300x.attention_peak_eff_for("bf16") == 0.2725
    measured_fraction = row("B35")["value_si"] / mi300x.hbm.bandwidth_bytes_per_s  # 4.09 of 5.3 TB/s
    for spec in (mi300x, mi325x, mi355x):
        bw = spec.hbm.bandwidth_bytes_per_s
        assert spec.memory_eff(1.0e9) == pytest.approx(measured_fraction * 1e9 / (1e9 + bw * 1e-6), rel=0.002)
    assert [s.gemm_peak_eff_for("fp8") for s in (mi300x, mi325x, mi355x)] == [0.4868, 0.5385, 0.6743]
    assert mi300x.gemm_peak_eff_for("fp8") == pytest.approx(row("B34")["value_si"] / mi300x.peak("fp8"), abs=1e-4)
    assert mi325x.gemm_peak_eff_for("fp8") == pytest.approx(row("B39")["value_si"] / mi325x.peak("fp8"), abs=1e-4)
