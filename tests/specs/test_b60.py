"""Intel Arc Pro B60: a GPU of another vendor as data (specs/hardware/b60.yaml) with its measured
vLLM and oneCCL kernel tables (specs/kernels/b60-vllm.json, from aiconfigurator-core 0.12.0).
Cited figures: Intel product-page facts as tabulated by zolotukhin.ai (20 Xe cores, INT8 197
TOPS, 200 W, PCIe 5.0 x8), hmc-tech.com (BF16 98.3 TFLOPS), technical.city (456 GB/s)."""
import json
from pathlib import Path

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_hardware

KERNELS = Path(__file__).resolve().parents[2] / "workbench" / "specs" / "kernels"


def test_datasheet_numbers():
    hw = load_hardware("b60")
    assert hw.vendor == "intel" and hw.n_sms == 20 and hw.tdp_w == 200.0
    assert hw.peak("bf16") == 98.3e12 and hw.peak("int8") == 197.0e12
    assert hw.peak("fp8") == hw.peak("bf16")  # no FP8 XMX: FP8 GEMMs at the BF16 rate
    assert hw.hbm.bandwidth_bytes_per_s == 456.0e9
    assert hw.link("scale_up").unidir_bytes_per_s < 32.0e9  # PCIe 5.0 x8, no GPU-to-GPU fabric


def test_vllm_surfaces_and_oneccl_collectives():
    doc = json.loads((KERNELS / "b60-vllm.json").read_text())
    got = {(s["class"], s["variant"]) for s in doc["surfaces"]}
    assert {("gemm", "bf16"), ("attention", "bf16/bf16"), ("decode_attention", "bf16/bf16"),
            ("collective", "oneccl/all_reduce")} <= got
    # the measured oneCCL all-reduce is what a prediction under vLLM reads
    measured = predict.collective(hardware="b60", devices=4, op="all_reduce", size_bytes=16e6)
    analytical = predict.collective(hardware="b60", devices=4, op="all_reduce", size_bytes=16e6, framework="none")
    assert float(measured.time_s) != pytest.approx(float(analytical.time_s), rel=0.01)
    hw = numbers("b60", framework="vllm")
    assert hw.fitted("collective", "oneccl/all_reduce")[0] is not None


def test_decode_is_bounded_by_the_memory_roofline():
    """Llama 3.1 8B bf16 at batch 8: a step reads the 16 GB of weights at least once, so TPOT
    is above weights / 456 GB/s; with the measured GEMMs it stays within 2x of that bound."""
    ds = predict.inference(hardware="b60", model="llama_3_1_8b", batch=8, prompt=1024, generate=128)
    bound = 8.03e9 * 2.0 / 456.0e9
    assert bound < float(ds.tpot_s) < 2.0 * bound
    assert bool(ds.fits)
    too_big = predict.inference(hardware="b60", model="llama_3_1_70b", batch=1, prompt=1024, generate=128)
    assert not bool(too_big.fits)  # 141 GB of bf16 weights on one 24 GiB card


def test_importer_reads_the_oneccl_tables():
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from workbench.calibrate.aiconfigurator import import_kernels
    data = import_kernels(hardware="b60")
    assert set(data) == {("b60", "vllm"), ("b60", "oneccl")}
    df = data[("b60", "oneccl")].to_dataframe()
    assert set(df["kind"]) >= {"all_reduce", "all_gather"} and np.all(df["time_s"] > 0)


# Held-out scores of the B60's surfaces (5 folds by factor-2 neighbourhoods), as fitted
# (`workbench calibrate fit-kernels --tables DIR --hardware b60`): (median, p90) bounds a point
# or two above them. Its decode-attention tables are the noisiest of any GPU (vLLM's XPU paged
# attention on Level Zero); like the other PCIe cards it scores above the datacenter GPUs' bounds.
B60_BOUNDS = {("gemm", "bf16"): (0.075, 0.25), ("gemm", "fp8"): (0.075, 0.23),
              ("attention", "bf16/bf16"): (0.04, 0.18), ("attention", "bf16/fp8"): (0.04, 0.17),
              ("decode_attention", "bf16/bf16"): (0.09, 0.37), ("decode_attention", "bf16/fp8"): (0.10, 0.38),
              ("collective", "oneccl/all_reduce"): (0.025, 0.06), ("collective", "vllm/all_reduce"): (0.035, 0.13)}
# the runaway guard of the GDDR cards (tests/specs/test_more_gpu_specs.PCIE_RUNAWAY_MAX_EFF)
RUNAWAY = {"gemm": 6.0, "attention": 4.0, "decode_attention": 8.0, "collective": 4.0}


def test_held_out_scores_and_physical_surfaces():
    from workbench.primitives.kernel_fits import EffGrid
    doc = json.loads((KERNELS / "b60-vllm.json").read_text())
    seen = set()
    for s in doc["surfaces"]:
        bound = B60_BOUNDS.get((s["class"], s["variant"]))
        if bound:
            seen.add((s["class"], s["variant"]))
            assert s["score"]["median_abs_err"] <= bound[0] and s["score"]["p90_abs_err"] <= bound[1], \
                (s["class"], s["variant"], s["score"])
        g = EffGrid.from_dict(s)
        limit = RUNAWAY[s["class"]] * (2.0 if "+window" in s["variant"] else 1.0)
        assert np.exp(g.log_eff.max()) < limit, (s["class"], s["variant"])
    assert seen == set(B60_BOUNDS)
