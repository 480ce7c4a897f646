"""Blackwell and Blackwell Ultra catalog entries (b300, gb200, gb300): every spec loads, its dense
per-GPU peaks follow from the board or rack figures NVIDIA quotes (with sparsity where NVIDIA
says so), the NVLink domains are the HGX board (8) and the NVL72 rack (72), the numbers carried
over from b200 are b200's, and predictions run.

The cited figures are those in the YAML comments: NVIDIA GB200 NVL72 and GB300 NVL72 product
pages (rack totals over 72 GPUs), the NVIDIA HGX B300 table (board totals over 8 GPUs), the NVIDIA
Technical Blog 'Inside NVIDIA Blackwell Ultra' (15 PFLOPS dense NVFP4, 288 GB, 8 TB/s, 1400 W).
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from gpu_spec_checks import check_gpu_spec, spec_value
from workbench.specs import load_hardware

NEW = ["b300", "gb200", "gb300"]
P, T = 1e15, 1e12  # PFLOP/s, TFLOP/s (and TB/s)
GIB = 2.0 ** 30  # NVIDIA's memory "GB" is binary (the CAPACITY note of test_hardware.py), its rack "TB" 1000 of those

# (hardware, attribute path, expected SI value, relative tolerance, cited figure)
CITED = [
    # GB200 NVL72: rack FP16/BF16 360 PFLOPS, FP8/FP6 720, FP4 1,440 (with sparsity); per GPU
    # TF32 2.5 PFLOPS and INT8 10 POPS (with sparsity); 13.4 TB HBM3e at 576 TB/s per rack.
    ("gb200", "peak.bf16", 360 * P / 72 / 2, 0.0, "rack 360 PFLOPS FP16/BF16 sparse / 72 / 2 = 2.5 PF"),
    ("gb200", "peak.fp16", 360 * P / 72 / 2, 0.0, "rack 360 PFLOPS FP16/BF16 sparse / 72 / 2"),
    ("gb200", "peak.fp8", 720 * P / 72 / 2, 0.0, "rack 720 PFLOPS FP8 sparse / 72 / 2 = 5 PF"),
    ("gb200", "peak.fp4", 1440 * P / 72 / 2, 0.0, "rack 1,440 PFLOPS FP4 sparse / 72 / 2 = 10 PF"),
    ("gb200", "peak.tf32", 2.5 * P / 2, 0.0, "per GPU TF32 2.5 PFLOPS sparse / 2"),
    ("gb200", "peak.int8", 10 * P / 2, 0.0, "per GPU INT8 10 POPS sparse / 2"),
    ("gb200", "hbm.capacity", 13.4e3 / 72 * GIB, 0.006, "rack 13.4 TB / 72 = 186.1 GB (per GPU 186 GB), GB in GiB"),
    ("gb200", "hbm.bandwidth", 576 * T / 72, 0.0, "rack 576 TB/s / 72 = 8 TB/s"),
    # GB300 NVL72: rack FP4 1,440 sparse | 1,080 dense PFLOPS; FP8/FP6 720, FP16/BF16 360 PFLOPS,
    # INT8 24 POPS (with sparsity); 20 TB HBM3e at 576 TB/s per rack.
    ("gb300", "peak.fp4", 1080 * P / 72, 0.0, "rack 1,080 PFLOPS FP4 dense / 72 = 15 PF"),
    ("gb300", "peak.fp4", 15 * P, 0.0, "NVIDIA blog: '15 PetaFLOPS dense NVFP4'"),
    ("gb300", "peak.fp8", 720 * P / 72 / 2, 0.0, "rack 720 PFLOPS FP8 sparse / 72 / 2 = 5 PF"),
    ("gb300", "peak.bf16", 360 * P / 72 / 2, 0.0, "rack 360 PFLOPS FP16/BF16 sparse / 72 / 2 = 2.5 PF"),
    ("gb300", "peak.int8", 24 * P / 72 / 2, 0.001, "rack 24 POPS INT8 sparse / 72 / 2 = 0.167 POPS"),
    ("gb300", "hbm.capacity", 20e3 / 72 * GIB, 0.005, "rack 20 TB / 72 = 278 GB (Verda per GPU 279 GB), GB in GiB"),
    ("gb300", "hbm.bandwidth", 576 * T / 72, 0.0, "rack 576 TB/s / 72 = 8 TB/s"),
    # HGX B300 (8 GPUs): FP4 144 sparse | 105 dense PFLOPS; FP8/FP6 72, FP16/BF16 36, TF32 18
    # PFLOPS and INT8 2 POPS (with sparsity). Per GPU 270 GB usable (MLPerf 'B300-SXM-270GB').
    ("b300", "peak.fp4", 105 * P / 8, 0.0, "board 105 PFLOPS FP4 dense / 8 = 13.125 PF"),
    ("b300", "peak.fp8", 72 * P / 8 / 2, 0.0, "board 72 PFLOPS FP8 sparse / 8 / 2 = 4.5 PF"),
    ("b300", "peak.bf16", 36 * P / 8 / 2, 0.0, "board 36 PFLOPS FP16/BF16 sparse / 8 / 2 = 2.25 PF"),
    ("b300", "peak.tf32", 18 * P / 8 / 2, 0.0, "board 18 PFLOPS TF32 sparse / 8 / 2"),
    ("b300", "peak.int8", 2 * P / 8 / 2, 0.0, "board 2 POPS INT8 sparse / 8 / 2 = 0.125 POPS"),
    ("b300", "hbm.capacity", 270 * GIB, 0.006, "270 GB usable per GPU (288 GB physical), in GiB"),
    ("b300", "hbm.bandwidth", 8 * T, 0.0, "NVIDIA blog: 8 TB/s per GPU"),
]


@pytest.mark.parametrize("name", NEW)
def test_spec_loads_and_is_a_gpu(name):
    check_gpu_spec(name, max_price_usd_per_hour=20)


@pytest.mark.parametrize("name, path, expected, rtol, cited", CITED, ids=[f"{c[0]}-{c[1]}" for c in CITED])
def test_value_follows_from_the_cited_figure(name, path, expected, rtol, cited):
    assert spec_value(load_hardware(name), path) == pytest.approx(expected, rel=rtol, abs=0), cited


def test_gb200_dense_fp4_is_half_the_sparse_datasheet_figure():
    # NVIDIA's per-GPU GB200 figures are with sparsity: FP4 20 PFLOPS, FP8 10, FP16/BF16 5.
    hw = load_hardware("gb200")
    assert hw.peak("fp4") == 20 * P / 2
    assert hw.peak("fp8") == 10 * P / 2
    assert hw.peak("bf16") == 5 * P / 2


@pytest.mark.parametrize("name, sparse_fp4", [("gb300", 1440 * P / 72), ("b300", 144 * P / 8)])
def test_blackwell_ultra_dense_fp4_is_not_half_the_sparse_figure(name, sparse_fp4):
    # Blackwell Ultra raised dense NVFP4 without raising sparse: GB300 NVL72 1,440 sparse | 1,080
    # dense PFLOPS, HGX B300 144 | 105. The spec holds the dense figure, above sparse / 2.
    fp4 = load_hardware(name).peak("fp4")
    assert sparse_fp4 / 2 < fp4 < sparse_fp4


@pytest.mark.parametrize("name", NEW)
def test_lower_precision_is_never_slower(name):
    hw = load_hardware(name)
    assert hw.peak("tf32") <= hw.peak("bf16") <= hw.peak("fp8") <= hw.peak("fp4")
    assert hw.peak("fp16") == hw.peak("bf16")  # one FP16/BF16 row in every table


def test_blackwell_ultra_fp4_is_one_and_a_half_blackwell():
    # NVIDIA blog: Blackwell Ultra 15 PFLOPS dense NVFP4 vs Blackwell 10 (GB300 vs GB200, same power class
    # of the NVL72 rack); HGX B300 13.125 vs HGX B200 9 (b200.yaml, A19c).
    assert load_hardware("gb300").peak("fp4") == 1.5 * load_hardware("gb200").peak("fp4")
    assert load_hardware("b300").peak("fp4") > load_hardware("b200").peak("fp4")


@pytest.mark.parametrize("name, blackwell", [("b300", "b200"), ("gb300", "gb200")])
def test_blackwell_ultra_cut_int8(name, blackwell):
    # HGX B300 INT8 2 POPS vs HGX B200 72 POPS (8 GPUs, sparse); GB300 NVL72 24 POPS (rack, sparse).
    ultra, base = load_hardware(name), load_hardware(blackwell)
    assert ultra.peak("int8") < 0.05 * base.peak("int8")
    assert ultra.peak("int8") < ultra.peak("bf16")


@pytest.mark.parametrize("name, domain, nic", [
    ("b300", 8, 100e9),    # HGX B300 8-GPU board; ConnectX-8 800 Gb/s per GPU
    ("gb200", 72, 50e9),   # GB200 NVL72 rack; ConnectX-7 400 Gb/s per GPU
    ("gb300", 72, 100e9),  # GB300 NVL72 rack; ConnectX-8 800 Gb/s per GPU
])
def test_links(name, domain, nic):
    hw = load_hardware(name)
    up = hw.link("scale_up")
    assert up.domain_size == domain
    assert up.unidir_bytes_per_s == 900e9  # NVLink 5: 1.8 TB/s bidirectional per GPU
    assert up.in_network_reduction  # NVLS
    assert hw.link("scale_out").unidir_bytes_per_s == nic


@pytest.mark.parametrize("name", NEW)
def test_carried_over_from_b200(name):
    # Where no Blackwell Ultra or GB200 microbenchmark row was read the efficiency tables, tiles and
    # overheads are b200's. The NVLink curve: B300 has its own measured NCCL table (within 8% of
    # B200's at every knot); the NVL72 racks take B200's up to 512 MiB and Verda's GB300 rack (B22)
    # at 8 GiB (tests/primitives/test_collectives.py).
    hw, b200 = load_hardware(name), load_hardware("b200")
    ours, theirs = hw.link("scale_out").busbw_eff, b200.link("scale_out").busbw_eff
    assert (ours.size, ours.eff) == (theirs.size, theirs.eff)
    up, b200_up = hw.link("scale_up").busbw_eff, b200.link("scale_up").busbw_eff
    at = np.asarray(b200_up.size, float)
    mine = np.interp(np.log(at), np.log(up.size), up.eff)
    if name == "b300":
        np.testing.assert_allclose(mine, b200_up.eff, rtol=0.08)
    else:
        np.testing.assert_array_equal(mine[:-1], b200_up.eff[:-1])  # to 512 MiB; 8 GiB from B22
    for table in ("gemm_eff", "memory_eff"):
        assert (getattr(hw, table).size, getattr(hw, table).eff) == (getattr(b200, table).size, getattr(b200, table).eff)
    assert hw.attention_peak_eff == b200.attention_peak_eff
    # the achievable GEMM rate is carried through the two chips' measured GEMM tables
    # (calibrate/peak_carry.py, tests/calibrate/test_peak_carry.py), not copied
    assert set(hw.gemm_peak_eff) == set(b200.gemm_peak_eff) and hw.gemm_peak_eff != b200.gemm_peak_eff
    assert (hw.gemm_tile_m, hw.gemm_tile_n, hw.collective_sms) == (b200.gemm_tile_m, b200.gemm_tile_n, b200.collective_sms)
    assert (hw.memory_latency_s, hw.kernel_launch_s, hw.l2_bytes) == (b200.memory_latency_s, b200.kernel_launch_s, b200.l2_bytes)


@pytest.mark.parametrize("name, sms, tdp", [
    ("b300", 148, 1100.0),   # measured 148 SMs (as B200); HGX B300 up to 1,100 W
    ("gb200", 152, 1200.0),  # measured 152 SMs; GB200 NVL72 configurable up to 1,200 W
    ("gb300", 152, 1400.0),  # measured 152 SMs (160 on the full die); 1,400 W
])
def test_sms_and_power(name, sms, tdp):
    hw = load_hardware(name)
    assert (hw.n_sms, hw.tdp_w) == (sms, tdp)


def test_gb200_inference_fits_and_decodes_like_b200():
    call = dict(model="llama_3_1_70b", tp=8, batch=8, prompt=1024, generate=128, weights="fp8")
    gb200, b200 = predict.inference(hardware="gb200", **call), predict.inference(hardware="b200", **call)
    assert bool(gb200["fits"])
    tpot = float(gb200["tpot_s"])
    assert np.isfinite(tpot) and 0 < tpot < 1.2 * float(b200["tpot_s"])  # same die, same 8 TB/s HBM


@pytest.mark.parametrize("name", NEW)
def test_inference_runs(name):
    ds = predict.inference(hardware=name, model="llama_3_1_70b", tp=8, batch=8, prompt=1024, generate=128,
                           weights="fp8")
    assert bool(ds["fits"]) and np.isfinite(float(ds["ttft_s"])) and float(ds["tpot_s"]) > 0


def test_gb300_all_reduce_over_64_gpus_stays_in_the_nvlink_domain():
    # 64 GPUs: one GB300 NVL72 NVLink domain (72) vs eight HGX B300 boards (8 each) over 800 Gb/s NICs.
    call = dict(op="all_reduce", devices=64, size_bytes=1e9)
    gb300 = float(predict.collective(hardware="gb300", **call)["time_s"])
    b300 = float(predict.collective(hardware="b300", **call)["time_s"])
    assert 0 < gb300 < b300
    # Inside the domain the time is set by NVLink alone: GB200's NVLink is the same, its NIC half as fast.
    # (the specs' analytical curves: the two racks' measured NCCL tables differ by a few %)
    same = dict(call, framework="none")
    assert float(predict.collective(hardware="gb300", **same)["time_s"]) == pytest.approx(
        float(predict.collective(hardware="gb200", **same)["time_s"]), rel=1e-9)
