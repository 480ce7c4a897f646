"""The training model against public training rows: measurements.csv E04-E13, the
llm-foundry MPT sweep MF01-MF18 (added to the project's copy from the same README the E06-E10
rows cite) and Megatron-LM's weak-scaling table MG01-MG09 (Narayanan et al. SC21 Table 1,
whose last row is E04); none of them tuned anything; and the CS-2 rows of wse_measurements.csv.
Tolerance: 25% for GPU clusters; a factor of 1.5 for CS-2 weight streaming (its compute
efficiency comes from WaferLLM's inference kernels). Rows outside are xfail(strict) with
their error stated.

The MosaicML runs used llm-foundry's Triton flash attention (attn_impl='triton', the
default of scripts/train/benchmarking/submit_benchmarks.py), a FlashAttention-1-class
kernel: attention="flash1". Their FSDP 'DEFAULT' mixed precision gathers bf16 weights.
Megatron-LM in 2021 predates flash attention: QK^T and PV as batched GEMMs with the scores,
softmax and dropout in HBM (attention="materialized")."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.calibrate.measurements import row, wse_row

# Narayanan et al. SC21 Table 1 (1T model): 128 layers, hidden 25600, 160 heads, seq 2048,
# vocab 51200, TP8 PP64 DP6 on 3,072 A100, batch 3,072, full recomputation.
GPT_1T = dict(name="gpt_1t", source="Narayanan et al. SC21 Table 1", n_layers=128, d_model=25600, n_heads=160,
              n_kv_heads=160, head_dim=160, d_ff=102400, vocab_size=51200, gated_mlp=False, tied_embeddings=True,
              max_seq_len=2048)
MPT70 = dict(hardware="h100_sxm", model="mpt_70b", dp=64, seq_len=2048, global_batch=2048, micro_batch=8,
             recompute="full", zero=3, attention="flash1")  # E06: FSDP full shard, activation checkpointing
MPT7_H100 = dict(hardware="h100_sxm", model="mpt_7b", dp=8, seq_len=2048, global_batch=48, micro_batch=6, zero=3,
                 attention="flash1")
MPT7_A100 = dict(hardware="a100_sxm", model="mpt_7b", dp=8, seq_len=2048, global_batch=96, micro_batch=6, zero=3,
                 attention="flash1")
LLAMA3_FP8 = dict(hardware="h100_sxm", model="llama_3_8b", dp=8, seq_len=8192, global_batch=128, micro_batch=1,
                  precision="fp8", zero=3)  # E13: 'FSDP=1'

# MPT-7B on 8 H100 without checkpointing, micro-batch 6 (+30%; +24% under the analytical
# efficiencies): the GEMMs at the H100 kernel tables' efficiency (2025 cuBLAS), which the 2023
# run without checkpointing did not reach; the same model with checkpointing (MF01-MF05) is within 15%.
E07_OUTSIDE = "+30%: 2023 H100 software below the 2025 kernel tables at micro-batch 6 without checkpointing"
CASES = [
    ("E04c", dict(hardware="a100_sxm", model=GPT_1T, tp=8, pp=64, dp=6, seq_len=2048, global_batch=3072,
                  micro_batch=1, recompute="full", zero=0, attention="materialized"), "hfu", 0.01, None),
    ("E06a", MPT70, "mfu", 0.01, None),
    ("E06b", MPT70, "hfu", 0.01, None),
    ("E06c", MPT70, "tokens_per_s_per_device", 1.0, None),
    pytest.param("E07a", MPT7_H100, "mfu", 0.01, None, marks=pytest.mark.xfail(strict=True, reason=E07_OUTSIDE)),
    pytest.param("E07b", MPT7_H100, "tokens_per_s_per_device", 1.0, None,
                 marks=pytest.mark.xfail(strict=True, reason=E07_OUTSIDE)),
    ("E10a", MPT7_A100, "mfu", 0.01, None),
    ("E10b", MPT7_A100, "tokens_per_s_per_device", 1.0, None),
    ("E13a", LLAMA3_FP8, "tokens_per_s_per_device", 1.0, None),
]


@pytest.mark.parametrize("row_id,config,var,unit,_", CASES)
def test_gpu_training_rows(row_id, config, var, unit, _):
    measured = row(row_id)["value"] * unit
    ds = predict.training(**config)
    got = float(ds[var])
    print(f"{row_id} {var}: {got:.4g} vs {measured:.4g} ({got / measured - 1:+.1%})")
    assert bool(ds.fits), ds.reason.item()
    assert got == pytest.approx(measured, rel=0.25)


# llm-foundry MPT sweep (README tables, H100 80GB and A100 80GB): id -> (hardware, model,
# seq_len, GPUs, micro-batch, gradient accumulation, activation checkpointing).
MPT_SWEEP = {
    "MF01": ("h100_sxm", "mpt_7b", 1024, 8, 64, 2, True), "MF02": ("h100_sxm", "mpt_7b", 4096, 8, 16, 2, True),
    "MF03": ("h100_sxm", "mpt_7b", 8192, 8, 8, 2, True), "MF04": ("h100_sxm", "mpt_7b", 32768, 8, 2, 2, True),
    "MF05": ("h100_sxm", "mpt_7b", 65536, 8, 1, 2, True), "MF06": ("h100_sxm", "mpt_13b", 2048, 8, 2, 1, False),
    "MF07": ("h100_sxm", "mpt_13b", 4096, 8, 10, 3, True), "MF08": ("h100_sxm", "mpt_30b", 2048, 8, 3, 21, True),
    "MF09": ("h100_sxm", "mpt_30b", 2048, 32, 14, 3, True), "MF10": ("h100_sxm", "mpt_70b", 2048, 32, 2, 16, True),
    "MF11": ("a100_sxm", "mpt_7b", 1024, 8, 64, 2, True), "MF12": ("a100_sxm", "mpt_7b", 4096, 8, 16, 2, True),
    "MF13": ("a100_sxm", "mpt_7b", 8192, 8, 8, 2, True), "MF14": ("a100_sxm", "mpt_7b", 32768, 8, 2, 2, True),
    "MF15": ("a100_sxm", "mpt_7b", 65536, 8, 1, 2, True), "MF16": ("a100_sxm", "mpt_13b", 2048, 8, 2, 3, False),
    "MF17": ("a100_sxm", "mpt_13b", 8192, 8, 5, 3, True), "MF18": ("a100_sxm", "mpt_30b", 2048, 8, 3, 21, True),
}
# Outside 25%: MPT-13B on H100 without checkpointing, micro-batch 2, one micro-batch per step
# (+38%): small GEMMs and FSDP's per-unit host overheads are not modelled. MPT-70B on 32 H100
# (4 nodes), micro-batch 2 (+33%): FSDP gathers 70B parameters every micro-batch across the
# nodes, modelled as NCCL's ideal rail rings; the cluster's network is not published. MPT-30B
# on 8 H100, micro-batch 3 with 21 accumulation steps (+26%): FSDP ZeRO-3 gathers the 30B
# parameters over one node for every micro-batch. The GEMMs run at the H100 kernel tables'
# efficiency (2025 cuBLAS); the 2023 runs reached less on the larger models.
SWEEP_OUTSIDE = {"MF06": "+38%", "MF08": "+26%", "MF10": "+33%"}


def mpt_sweep_config(row_id):
    hw, model, seq, gpus, mb, ga, ckpt = MPT_SWEEP[row_id]
    return dict(hardware=hw, model=model, dp=gpus, seq_len=seq, global_batch=gpus * mb * ga, micro_batch=mb,
                zero=3, recompute="full" if ckpt else "none", attention="flash1")


@pytest.mark.parametrize("row_id", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=SWEEP_OUTSIDE[r]))
                                    if r in SWEEP_OUTSIDE else r for r in MPT_SWEEP])
def test_llm_foundry_mpt_sweep(row_id):
    measured = row(row_id)["value_si"]
    ds = predict.training(**mpt_sweep_config(row_id))
    got = float(ds.mfu)
    print(f"{row_id} {MPT_SWEEP[row_id][:3]} MFU {got:.1%} vs {measured:.1%} ({got / measured - 1:+.1%})")
    assert bool(ds.fits), ds.reason.item()
    assert got == pytest.approx(measured, rel=0.25)


# Megatron-LM weak scaling (SC21 Table 1, A100, seq 2048, vocab 51200, full recomputation):
# id -> (layers, hidden, heads, TP, PP, GPUs, global batch). Micro-batch size and the
# interleaving degree are not in the table: every combination of 1 and 2 is checked.
MEGATRON = {
    "MG01": (24, 2304, 24, 1, 1, 32, 512), "MG02": (30, 3072, 32, 2, 1, 64, 512),
    "MG03": (36, 4096, 32, 4, 1, 128, 512), "MG04": (40, 6144, 48, 8, 1, 256, 1024),
    "MG05": (48, 8192, 64, 8, 2, 512, 1536), "MG06": (60, 10240, 80, 8, 4, 1024, 1792),
    "MG07": (80, 12288, 96, 8, 8, 1536, 2304), "MG08": (96, 16384, 128, 8, 16, 1920, 2160),
    "MG09": (105, 20480, 128, 8, 35, 2520, 2520),
}


def megatron_config(row_id, micro_batch=1, virtual_stages=1, attention="materialized"):
    layers, d, heads, tp, pp, gpus, batch = MEGATRON[row_id]
    model = dict(name=row_id, n_layers=layers, d_model=d, n_heads=heads, n_kv_heads=heads, head_dim=d // heads,
                 d_ff=4 * d, vocab_size=51200, gated_mlp=False, tied_embeddings=True, max_seq_len=2048)
    v = virtual_stages if pp > 1 and (layers // pp) % virtual_stages == 0 else 1
    return dict(hardware="a100_sxm", model=model, tp=tp, pp=pp, dp=gpus // (tp * pp), seq_len=2048,
                global_batch=batch, micro_batch=micro_batch, recompute="full", zero=0, virtual_stages=v,
                attention=attention)


@pytest.mark.parametrize("virtual_stages", [1, 2])
@pytest.mark.parametrize("micro_batch", [1, 2])
@pytest.mark.parametrize("row_id", list(MEGATRON))
def test_megatron_weak_scaling(row_id, micro_batch, virtual_stages):
    """Achieved TFLOP/s per GPU as the paper counts it (with the recomputed forward: hfu x 312)."""
    measured = row(row_id)["value_si"]
    ds = predict.training(**megatron_config(row_id, micro_batch, virtual_stages))
    got = float(ds.hardware_flops_per_s_per_device)
    assert got == pytest.approx(float(ds.hfu) * 312e12)
    print(f"{row_id} mb{micro_batch} v{virtual_stages}: {got / 1e12:.0f} vs {measured / 1e12:.0f} TFLOP/s "
          f"({got / measured - 1:+.1%})")
    assert bool(ds.fits), ds.reason.item()
    assert got == pytest.approx(measured, rel=0.25)


def test_materialized_attention_explains_the_small_megatron_models():
    """The 1.7B model (hidden 2304, 24 heads) reached 137 TFLOP/s, no more than the larger
    ones: its S x S scores per head move through HBM several times per layer, a large share
    at small hidden sizes. With a flash kernel the model would put it 40% higher."""
    measured = row("MG01")["value_si"]
    flash = float(predict.training(**megatron_config("MG01", attention="flash2")).hfu) * 312e12
    materialized = float(predict.training(**megatron_config("MG01")).hfu) * 312e12
    assert flash > 1.3 * measured and materialized == pytest.approx(measured, rel=0.1)


# Megatron-Bridge / NeMo 25.11 performance summary (the table of E13a): id -> (hardware, model,
# GPUs, precision, GBS, MBS, seq, ZeRO (FSDP=0: distributed optimizer, FSDP=1: 3), TP, PP, CP, VP, EP).
# The recompute setting of the recipes is not in the table: none and selective are both checked.
NEMO = {
    "NM01": ("b200", "llama_3_8b", 8, "fp8", 128, 2, 8192, 1, 1, 1, 1, 1, 1),
    "NM02": ("b200", "llama_3_1_405b", 128, "fp8", 64, 1, 8192, 1, 4, 8, 2, 8, 1),
    "NM03": ("h100_sxm", "llama_3_70b", 64, "fp8", 128, 1, 8192, 1, 4, 8, 1, 5, 1),
    "NM04": ("h100_sxm", "llama_3_1_405b", 1024, "fp8", 512, 1, 8192, 1, 8, 8, 2, 8, 1),
    "NM05": ("h100_sxm", "gpt_oss_120b", 64, "bf16", 512, 4, 4096, 1, 1, 4, 1, 1, 8),
    "NM06": ("b200", "gpt_oss_120b", 64, "bf16", 512, 4, 4096, 1, 1, 1, 1, 1, 8),
    "NM07": ("b200", "qwen3_235b_a22b", 64, "fp8", 1024, 1, 4096, 1, 1, 8, 1, 2, 8),
    "NM08": ("b200", "deepseek_v3", 256, "fp8", 2048, 1, 4096, 1, 1, 16, 1, 1, 8),
    # DGX-GB300 and DGX-GB200 (NVL72), the same container: no training row on these GPUs before
    "NM09": ("gb300", "llama_3_8b", 8, "fp8", 128, 2, 8192, 1, 1, 1, 1, 1, 1),
    "NM10": ("gb300", "llama_3_70b", 64, "fp8", 256, 2, 8192, 3, 1, 1, 1, 1, 1),
    "NM11": ("gb300", "llama_3_1_405b", 256, "fp8", 1536, 1, 8192, 1, 2, 8, 2, 4, 1),
    "NM12": ("gb300", "deepseek_v3", 256, "bf16", 4096, 1, 4096, 1, 1, 2, 1, 4, 32),
    "NM13": ("gb300", "deepseek_v3", 256, "fp8", 4096, 1, 4096, 1, 1, 2, 1, 4, 32),
    "NM14": ("gb300", "gpt_oss_120b", 64, "bf16", 1280, 2, 8192, 1, 1, 1, 1, 1, 64),
    "NM15": ("gb300", "qwen3_30b_a3b", 8, "fp8", 512, 4, 4096, 1, 1, 1, 1, 1, 8),
    "NM16": ("gb300", "qwen3_235b_a22b", 256, "bf16", 8192, 2, 4096, 1, 1, 4, 1, 12, 16),
    "NM17": ("gb200", "llama_3_8b", 8, "fp8", 128, 2, 8192, 1, 1, 1, 1, 1, 1),
    "NM18": ("gb200", "llama_3_70b", 64, "fp8", 256, 2, 8192, 3, 1, 1, 1, 1, 1),
    "NM19": ("gb200", "llama_3_1_405b", 256, "fp8", 1536, 1, 8192, 1, 4, 16, 1, 4, 1),
    "NM20": ("gb200", "deepseek_v3", 256, "bf16", 4096, 1, 4096, 1, 1, 4, 1, 4, 64),
    "NM21": ("gb200", "deepseek_v3", 256, "fp8", 4096, 1, 4096, 1, 1, 8, 1, 4, 32),
    "NM22": ("gb200", "gpt_oss_120b", 64, "bf16", 1280, 1, 8192, 1, 1, 1, 1, 1, 64),
    "NM23": ("gb200", "qwen3_30b_a3b", 8, "fp8", 512, 4, 4096, 1, 1, 1, 1, 1, 8),
    "NM24": ("gb200", "qwen3_235b_a22b", 256, "bf16", 8192, 1, 4096, 1, 1, 8, 1, 3, 32),
    "NM25": ("b200", "qwen3_30b_a3b", 8, "fp8", 512, 1, 4096, 1, 1, 1, 1, 1, 8),
    "NM26": ("h100_sxm", "qwen3_30b_a3b", 16, "fp8", 512, 2, 4096, 1, 1, 2, 1, 24, 8),
}
# Outside 25% (the model's error with recompute none / selective; GEMMs, attention and collectives
# on the GPUs' kernel tables, predict.training's default; bf16 gradient reductions, the recipes').
# The MoE rows carry Megatron-Core's exposed host time per local expert
# (workloads/training.MOE_HOST_S_PER_LOCAL_EXPERT, fitted to these rows by
# calibrate/training_host.py: median |error| of the 16 MoE rows 34.6% without it, 9.3% with it).
# Still outside: GPT-OSS-120B on H100 +39/+36% (a layout the model says does not fit: the recipe
# recomputes or offloads more) and on B200 +97/+92% (its EP8 expert gradients reduced over IB
# since the experts' expert-data-parallel group, in bf16), GB300 +70/+61%, GB200 +67/+58% (every GPT-OSS
# recipe of 25.11 uses the all-to-all dispatcher without CUDA graphs, and its attention has
# sinks; at 2 local experts the launches hide under the experts' GEMMs; at EP64 on 64 GPUs no
# expert gradient is reduced at all); Qwen3-30B-A3B on H100 +107/+99% (H100's host launches
# slower than the constant, which the Blackwell rows set; FP8 current scaling adds amax kernels
# per GEMM); Llama-3-70B with FSDP on GB300 without recompute +26% (+21% selective, inside; GB300's
# GEMM rate is carried from GB200's measured MAMF, B17, B18; its bf16 reduce-scatters halve the
# FSDP traffic).
_ALL = ("none", "selective")
NEMO_OUTSIDE = {"NM05": _ALL, "NM06": _ALL, "NM14": _ALL, "NM22": _ALL, "NM26": _ALL, "NM10": ("none",)}
# Do not fit under the model's memory budget yet ran (the recipes recompute or offload more than
# selective recompute over every layer, as the model counts it): NM02 (171 of 162 GB usable on B200),
# GPT-OSS-120B at MBS 4 on H100 and B200 (NM05, NM06), Llama-3-70B with FSDP at MBS 2 x 8192 on one
# GB200/GB300 stage (NM10, NM18), Llama-3.1-405B on GB300/GB200 (NM11, NM19).
NEMO_TIGHT = {"NM02", "NM05", "NM06", "NM10", "NM11", "NM18", "NM19"}


def nemo_config(row_id, recompute):
    hw, model, gpus, prec, gbs, mbs, seq, zero, tp, pp, cp, vp, ep = NEMO[row_id]
    return dict(hardware=hw, model=model, tp=tp, pp=pp, cp=cp, ep=ep, dp=gpus // (tp * pp * cp), seq_len=seq,
                global_batch=gbs, micro_batch=mbs, precision=prec, zero=zero, recompute=recompute, virtual_stages=vp,
                grad_bytes_per_param=2)  # bf16 gradients: the perf recipes' ddp.grad_reduce_in_fp32 = False


@pytest.mark.parametrize("row_id,recompute", [
    pytest.param(r, rc, marks=pytest.mark.xfail(strict=True, reason="outside 25%, see NEMO_OUTSIDE"))
    if rc in NEMO_OUTSIDE.get(r, ()) else (r, rc) for r in NEMO for rc in _ALL])
def test_nemo_performance_summary(row_id, recompute):
    measured = row(row_id)["value_si"]
    ds = predict.training(**nemo_config(row_id, recompute))
    got = float(ds.tokens_per_s_per_device)
    print(f"{row_id} {NEMO[row_id][:2]} {recompute}: {got:.0f} vs {measured:.0f} tok/s/GPU ({got / measured - 1:+.1%})")
    assert bool(ds.fits) or row_id in NEMO_TIGHT, ds.reason.item()
    assert got == pytest.approx(measured, rel=0.25)


def test_nemo_rows_match_the_measurement_table():
    """Each NEMO entry is its measurements.csv row: GPUs, GBS, MBS and sequence length."""
    for rid, (hw, model, gpus, prec, gbs, mbs, seq, *_rest) in NEMO.items():
        r = row(rid)
        assert int(r["n_devices"]) == gpus and r["batch"] == f"GBS {gbs}, MBS {mbs}" and int(r["input_len"]) == seq, rid


def test_gb300_runs_faster_than_gb200_as_their_gemm_tables_say_not_their_datasheets():
    """The same Llama-3-8B FP8 recipe ran 19% faster on GB300 (37,556 tok/s/GPU, NM09) than on
    GB200 (31,508, NM17). NVIDIA's rack figures give both the same dense FP8 and BF16 peaks; their
    measured GEMM tables do not (GB300 14-17% faster on large shapes), and the specs carry the
    achievable rate over from B200 through those tables (calibrate/peak_carry.py): the model
    puts GB300 6% ahead (its GEMMs; attention, memory-bound kernels and collectives are timed
    alike on both), where equal peaks put it level: toward the measurement, not past it."""
    measured = row("NM09")["value_si"] / row("NM17")["value_si"]
    got = [float(predict.training(**nemo_config(r, "selective")).tokens_per_s_per_device) for r in ("NM09", "NM17")]
    assert measured == pytest.approx(1.19, abs=0.01)
    assert 1.04 < got[0] / got[1] < measured


def test_the_next_releases_dense_rows_never_fitted():
    """Megatron-Bridge's 26.02.01 table, dense FP8 / MXFP8 Llama rows (NN19-NN27: Llama-3-70B
    on GB300, GB200 (two recipes each) and H100, Llama-3.1-405B on GB300 and GB200), at
    selective recompute: median |speed error| 9.1%, every row -17% to +15% (recorded at the
    commit that added them). Nothing in the model was fitted to this table. Checked: each
    within 20%, the median within 12%."""
    from workbench.calibrate.gap import scored_points
    err = scored_points([f"NN{i}" for i in range(19, 28)])["error"]
    assert len(err) == 9
    assert (err.abs() < 0.20).all(), err.round(3).to_dict()
    assert err.abs().median() < 0.12


def test_a_mamba2_hybrid_trained_on_gpus_never_fitted():
    """Nemotron-3-Nano-30B-A3B (23 Mamba-2 layers, 6 softmax, MoE 128 experts top-6) in
    Megatron-Bridge's 26.02.01 table (NN28-NN31: GB300, GB200, B300, H100), nothing fitted to
    it: +11%, -3%, +17%, +18% with the Mamba-2 layers on the GPUs' measured chunked-scan
    kernels (+48%, +24%, +49%, +28% on the analytical kernel, when GPU training of hybrids was
    added), FlashAttention's backward ratio for theirs (ASSUMED). Checked: within 25% each."""
    from workbench.calibrate.gap import scored_points
    err = scored_points([f"NN{i}" for i in range(28, 32)])["error"]
    assert len(err) == 4 and (np.abs(err) < 0.25).all(), err.round(3).to_dict()
