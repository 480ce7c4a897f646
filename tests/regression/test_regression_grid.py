"""Replays the regression grid (calls.py, 4,682 points across every predict.* function)
against the values recorded before the architecture / workload / mapping restructuring:
every recorded output must agree to 1e-9 relative, except the changes made on purpose,
listed in CHANGED (numbers) and RELABELLED (labels of points whose numbers stay) with
their reason (stated in the closing notes of issues 13 and 14)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from calls import CALLS  # noqa: E402
from record import table  # noqa: E402
from workbench import predict  # noqa: E402

RTOL = 1e-9
# Changes made on purpose: (call, model or "*") -> (relative tolerance for those points, why).
# Every other point, and every categorical output (fits, bound, reason), must agree to RTOL.
_ROUTER = ("wafers now run every matmul of the one layer table (workloads/ops.py): the MoE router GEMV, "
           "missing before, adds one GEMV and its mesh reduction per layer (Mixtral: TPOT +8.7% median, "
           "+4.2..+9.8%; TTFT +0.1..+23%)")
_QKV = ("wafer regions hold the fused QKV matrix the decode GEMV computes (ceil(D/P)·ceil((H+2K)h/P) per PE; "
        "the separate Q, K, V tiles counted before rounded differently): per-PE bytes -0.2% median, "
        "a few chosen grids move by a tile")
_MTP = ("issue 18: the MTP draft is one more layer of the target with its lm_head (speculative.mtp_draft, one "
        "implementation for inference and serving), not 1/L of the step: TPOT +1.8% median, at most +3.5% on any output")
CHANGED: dict[tuple[str, str], tuple[float, str]] = {}
# Calls re-recorded (record.py --only=...) after a change made on purpose to their outputs,
# with why; they replay to RTOL against the new record. Before issue 17 they carried the
# router and QKV changes above (_ROUTER, _QKV).
_PIPELINE = ("issue 17: wafer prefill is a pipeline of chunks through the layer regions (workloads/"
             "wafer_pipeline.py), on the decode regions by default: TTFT -95% median, e2e and throughput follow; "
             "prefill_io_s became prefill_unpipelined_s (the old whole-prompt-per-layer sum); decode keeps up to "
             "one micro-batch per layer in flight (wafer_inference.decode_step), so TPOT at batch <= n_layers is "
             "the batch-1 step and a region buffers one micro-batch's activations: larger batches fit")
_FOLDS = ("issue 15: every kernel surface refitted (specs/kernels/*.json): the folds deal factor-2 neighbourhoods "
          "to folds by a mixing hash (a linear hash had dealt runs of five consecutive cells, a factor 32, to one "
          "fold), the GQA group and head size get a knot per measured value and only a weak penalty (group 64 runs "
          "another kernel than 32), a windowed decode's coordinate is the whole cache; then the serving constants "
          "refitted (workbench calibrate fit-serving): the table-driven calls move by a few percent")
_SIMULATED = ("issue 21: the PE-mesh simulation (workbench/simulate) executed every mapping and the closed forms "
              "that disagreed were fixed (primitives/mesh.py): the K-tree allreduce's broadcast stage, chain "
              "allreduces adding on the fly (one add, not P-1), Cannon's P-1 shifts of A + B through one ramp, "
              "gpu_style SUMMA bulk-synchronous with CE forwarding, T10 / Ladder relaying B behind A and Ladder "
              "from the owner's distance; stage_cycles refitted 70.2 -> 62.5 and RELAY 1.5 -> 1.44 B/cycle: mesh "
              "TPOT +1..+5%, gpu_style TPOT -19..+1% and TTFT -85..-39% (its large prefill messages' adds now "
              "stream), gpu_style GEMMs -25..+131%, a few chosen grids and max batches move")
_WINDOW = ("issue 18: sliding-window layers prefill over their band (attention_prefill window=: the executed tiles "
           "of w + 128 keys per query, cached keys beyond w unread) and decode their window through the framework's "
           "windowed surface where it has one; each kind of softmax layer costed with its own head shapes "
           "(layers._by_kind): gpt-oss TTFT -1..-13% at 4k prompts, TPOT within 0.6%")
_EP = ("issue 16: expert parallelism under tensor-parallel attention moves no tokens beyond the all-reduce (every "
       "rank of the replica holds them; layers.expert_all_to_all), and the routed experts are timed on the busiest "
       "EP rank (ops.busiest_rank_experts: its pairs z(ep) standard deviations above the mean); then the serving "
       "constants refitted: the EP points of the MoE grid move (before: " + _WINDOW + ")")
_W8A16 = ("FP8 weights on a chip without FP8 units (A100) run weight-only, W8A16 as vLLM's FP8 Marlin runs them "
          "(backends/gpu.default_activations): the a100_sxm fp8 points, flagged 'no fp8 math units' before, are "
          "predicted (every other point identical)")
_XQA = ("issue 15: TensorRT-LLM's decode runs XQA or its MMHA fallback by the framework's rule (primitives/"
        "xqa_dispatch.py), each with its own surface where the two predict the table better (A100, H100, H200 with "
        "a 16-bit cache): inference TPOT -0.8..+3.6% on 43% of the points; the H100 8B serving curve within 0.35% "
        "below its capacity, past it (18/s and up, where the queue diverges) its batch and TPOT move freely")
_AR16 = ("issue 16: a tensor-parallel all-reduce sums the row-parallel GEMMs' 16-bit outputs also when the GEMMs "
         "take FP8 or FP4 inputs (ops.tp_allreduce_bytes, as AIConfigurator's comm_quant_mode=half): the FP8 and "
         "FP4 points at tp > 1 move, inference TTFT +25% median (+6..+92%), TPOT +0.2..+33%; then the serving "
         "constants refitted (workbench calibrate fit-serving)")
_HEAD16 = ("issue 16: a quantized checkpoint keeps its embeddings and LM head in 16 bits (inference.weight_bytes, "
           "_lm_head; every FP8/NVFP4/MXFP4 config aiconfigurator-core ships excludes lm_head): the FP8 and FP4 points "
           "move, TPOT +0.1..+6% (the 8B model at tp 1 most), weights +1.8% for Llama-3.1-8B in FP8, max batch down "
           "as much")
_HEAD16_AR16 = _HEAD16 + "; before: " + _AR16  # the 16-bit LM head, after the 16-bit all-reduces
_B200_HBM = ("B200 device memory is nvidia-smi's memory.total, 183359 MiB = 192.27 GB (the marketed '180 GB' in "
             "GiB, as H100/H200/A100 already were), not 180e9 bytes: memory_capacity_bytes +6.8% on the b200 points, "
             "the largest batch that fits +7% (its TTFT and TPOT follow), training's capacity likewise; every other "
             "number identical")
_BLACKWELL_HBM = ("GB200, GB300 and B300 device memory likewise nvidia-smi's (189471, 284208, 275040 MiB: "
                  "aiconfigurator-core systems/*.yaml), +6.8% each; " + _B200_HBM)
_B200_AFTER = _B200_HBM + "; before: " + _HEAD16_AR16
_SGLANG_CHUNK = ("issue 16: SGLang's prefill chunk follows its server defaults (concurrency.SGLANG_CHUNK_TIERS: 16384 "
                 "tokens on B200/GB200/B300, 4096 on L40S, divided by the DP size under DP attention) and the serving "
                 "constants refitted on it (SGLang's host overhead 5.60 -> 5.72 ms per iteration): the sglang points "
                 "move; before: ")
_PARTS_REFIT = ("issue 16: precision per part (attention_weights=): the serving rows recording per-tensor FP8 GEMMs "
                "beside block-FP8 experts (SGLang's DeepSeek and Qwen3.5 rows) are predicted so, the request "
                "latencies fitted on the rows at concurrency <= 16 (serving_rows.LATENCY_FIT_MAX_CONCURRENCY), and the "
                "serving constants refitted (workbench calibrate fit-serving): SGLang's CUDA-graph saving 20 -> 12 us "
                "per kernel, host overhead 5.73 -> 5.60 ms per iteration and 29 -> 20 us per sequence, 3.1 -> 3.2 ms "
                "per MoE layer; TensorRT-LLM's request latency 2.0 -> 2.2 ms per layer and 2.0 -> 1.7 ms per MoE "
                "layer; vLLM's 1.1 -> 1.0 ms per MoE layer")
_SGLANG_REFIT = (" Then SGLang's host overheads as `workbench calibrate fit-serving` gives them again (2.50 -> "
                 "2.51 ms per iteration, 34 -> 33 us per sequence: the committed values were a neighbouring point of "
                 "the fit's 10 us / 1 us grids), when the fit began reporting leave-one-GPU-out errors.")
_MOE_LAYER = ("issue 16: a framework's time per iteration adds its time per MoE layer over the model's MoE layers "
              "(frameworks.yaml iteration_overhead_s_per_moe_layer, kept where it lowers the leave-one-model-out "
              "TPOT error: SGLang 48 us per MoE layer with 2.47 ms per iteration, was 5.72 ms; TensorRT-LLM and "
              "vLLM 0): the sglang points move; before: ")
_DECODE_OCCUPANCY = ("issue 16: a disaggregated decode replica holds the requests decoding, lambda (g - 1) TPOT "
                     "over the replicas by Little's law on the decode stage (pools_closed_loop.DECODE_ROUNDS), not "
                     "every request in flight, and the serving constants refitted on it (TensorRT-LLM's host "
                     "overhead 1.33 -> 1.03 ms per iteration and 4 -> 3 us per sequence; SGLang's CUDA-graph saving "
                     "12 -> 10 us per kernel, 2.47 -> 2.50 ms per iteration, 32 -> 34 us per sequence, 48 -> 44 us "
                     "per MoE layer): ")
_TRAINING_EP = ("training: the routed experts timed as Megatron-Core runs them under expert parallelism (E/ep experts a "
                "device, expert TP = TP, T k ep / E tokens each; before: every expert on every device at T k / E "
                "tokens): Mixtral 8x7B at ep 8 +0.3% step time, the dense model and ep 1 unchanged")
_MOE_HOST = ("training: Megatron-Core's exposed host time per local expert (workloads/training."
             "MOE_HOST_S_PER_LOCAL_EXPERT, 0.45 ms per local expert, MoE layer and micro-batch, fitted to the "
             "Megatron-Bridge 25.11 MoE rows, less the experts' GEMM time it overlaps) in every micro-batch slot: "
             "Mixtral 8x7B at tp 8, ep 1 (8 local experts split 8 ways) +5% to +96% step time (most at cp 2 and "
             "fp8, where the experts' GEMMs are shortest); at ep 8 (one local expert) and the dense model "
             "unchanged (before: " + _TRAINING_EP + ")")
_A2A_SP = ("training: the expert all-to-all carries a TP rank's own T / tp tokens (sequence parallelism; "
           "before: the whole micro-batch's on every TP rank): Mixtral 8x7B at tp 8, ep 8 -11% to -22% step "
           "time, ep 1 and the dense model unchanged (before: " + _MOE_HOST + ")")
_TRAINING_TABLES = ("issue 15: GPU training runs its GEMMs, attention and collectives on the GPU's measured kernel "
                    "tables (predict.training framework=None: the default_framework's; attention=None: the "
                    "framework's kernel), as serving does; the MoE host constant refitted under them (0.45 -> 0.41 ms "
                    "per local expert). Against the 93 measured GPU training rows median |speed error| 11.2% -> 9.6%, "
                    "the never-fitted Megatron-Bridge 26.02.01 rows 17.6% -> 10.9%; outputs attention_kernel and "
                    "kernel_tables name what ran, and wafer training has no `attention` coordinate (a GPU kernel)")
_RUNTIME_MEMORY = ("issue 16: TensorRT-LLM's KV cache is 0.9 of the memory left after the weights, activations "
                   "and the runtime's own (CUDA context 551 MB, NCCL buffers 342-392 MiB per GPU: aiconfigurator-core "
                   "systems/h100_sxm.yaml misc); a KV-limited point holds fewer requests (2 of 72 points of the tables "
                   "grid: TPOT +1.2%, TTFT +2.4% at most) and the no-room reason names that memory")
_MI300X_MAMF = ("issue 15: MI300X's achievable GEMM rate is its measured MAMF (measurements B20: 668.4 of 1307.4 "
                "TFLOP/s under ROCm 6.3, stas00/ml-engineering) in place of the 0.70 assumed: only the mi300x points "
                "move, compute-bound time x 1.37 (B300, GB200 and A100 PCIe took their own MAMF rows B15-B19 too, "
                "but they run on kernel tables here)")
_B200_NCCL = ("issue 15: the analytical NVLink 5 curve (framework none, and the scale-up part of collectives "
              "beyond a table's 8 GPUs) is set from the measured 8-GPU NCCL all-reduce tables of B200 and B300 "
              "(aiconfigurator-core 0.12.0, NCCL 2.29.2; GB200 and GB300 take B200's, and Verda's 72-GPU GB300 "
              "NVL72 nccl-tests, measurements B22, at 8 GiB) in place of H100's B21 curve, which ran 1.3-1.7x "
              "faster than measured from 16 to 256 MiB: only b200 points move (framework-none TTFT up to +40%, "
              "TPOT up to +13%, training steps +0.3% at most; the open-loop serving grid's arrival rates follow "
              "its prefill)")
_A100_NCCL = ("issue 15: A100 SXM's analytical NVSwitch curve is its measured 8-GPU NCCL 2.27.3 all-reduce table "
              "(aiconfigurator-core 0.12.0) to 512 MiB and B25 at 8 GiB, in place of H100's B21 shape scaled to B25 "
              "(0.44-0.97x the measured rate): only a100_sxm points move (framework-none collective times up to -65%, "
              "TPOT up to -32%, TTFT up to -37%; training steps unchanged)")
_WAVE_TAIL = ("issue 15: a fitted GEMM surface may carry its kernel's output tile (kernel_fit.GEMM_WAVE_TILES, "
              "chosen per table by held-out error): the math of a GEMM past one wave of tiles is stretched to whole "
              "waves (gemm_work.wave_quantization). A100's cuBLAS BF16 tables take 128 x 256 (held-out GEMM median "
              "|err| 5.1% -> 4.9%, p90 17.4% -> 16.5%); only a100_sxm points move: GEMM time -12% to +36% (the steps "
              "at m = 769 and 2561), TTFT -4% to +15%, TPOT within 0.3%, training steps -3% to +4%")
REBASED = {
    "training_gpu_variants": _MI300X_MAMF + " (before: " + _TRAINING_TABLES + " (before: " + _A2A_SP + "))",
    "serving_fixed_concurrency_tables": (_RUNTIME_MEMORY + " (before: " + _DECODE_OCCUPANCY + _MOE_LAYER + _SGLANG_CHUNK
                                          + _PARTS_REFIT + _SGLANG_REFIT + ")"),
    "serving_fixed_concurrency_mtp": (_RUNTIME_MEMORY + " (before: " + _DECODE_OCCUPANCY + _MOE_LAYER + _SGLANG_CHUNK
                                          + _PARTS_REFIT + _SGLANG_REFIT + ")"),
    "disaggregated_fixed_pools": _DECODE_OCCUPANCY + _PARTS_REFIT,
    "inference_gpu_dense": _MI300X_MAMF + " (before: " + _B200_AFTER + " (before: " + _W8A16 + "))",
    "inference_gpu_max_batch": _MI300X_MAMF + " (before: " + _B200_AFTER + " (before: " + _W8A16 + "))",
    "inference_gpu_moe": _MI300X_MAMF + " (before: " + _B200_AFTER + " (before: " + _EP + "; then " + _W8A16 + "))",
    "gemm_gpu": _MI300X_MAMF, "attention_gpu": _MI300X_MAMF,
    "inference_gpu_dp": _B200_AFTER, "serving_h100_draft": _HEAD16_AR16, "serving_moe": _B200_AFTER,
    "disaggregated_gpu": _HEAD16_AR16, "training_gpu": _TRAINING_TABLES + " (before: " + _B200_HBM + ")",
    "serving_h200_70b_spec": _HEAD16_AR16 + " (before: " + _MTP + ")",
    "inference_gpu_tables": _BLACKWELL_HBM + "; before: " + _HEAD16_AR16 + " (before: " + _XQA + "; " + _FOLDS + "; then " + _W8A16 + ")",
    "attention_gpu_tables": _FOLDS,
    "collective_gpu_tables": _FOLDS, "serving_h100_8b_tables": _HEAD16 + "; before: " + _XQA + " (before: " + _FOLDS + ")",
    "serving_h100_8b": _HEAD16,
    "inference_wafer_regions": _SIMULATED + " (before: " + _PIPELINE + ")", "inference_wafer_grid": _SIMULATED,
    "inference_wafer_max_batch": _SIMULATED, "inference_wafer_streaming": _SIMULATED + " (before: " + _QKV + ")",
    "gemm_wafer": _SIMULATED, "gemm_wafer_default_grid": _SIMULATED,
    "serving_cs3": _SIMULATED + "; the open-loop serving of a CS-3 takes its prefill time from it",
    "disaggregated_mixed": _SIMULATED + " (its colocated CS-3 baseline)",
    "training_wafer": (_TRAINING_TABLES + "; wafer numbers unchanged (before: issue 17: weight-streaming training "
                       "as Cerebras runs it (workloads/wafer_training.py): block "
                       "checkpointing by default on CS systems, the optimizer update in MemoryX after the last "
                       "micro-batch's backward, a fixed cost per step (17.5 ms, fitted on C181/C182): step time "
                       "+3% median, up to +49%; then " + _SIMULATED + " (step times unchanged, the reported grid "
                       "moves); then a latency per streamed layer (cs2.yaml layer_stream_latency_s, 1.9 ms "
                       "fitted on the CS-2 rows C179-C182, C191, C192): step time +5.7% median, +2.5% to +33%)"),
}


def _rebase(reason: str, names) -> None:
    """Record `reason` for each grid of `names`, the reason it was re-recorded before kept after it."""
    for name in names:
        REBASED[name] = reason + (" (before: " + REBASED[name] + ")" if name in REBASED else "")


_rebase(_B200_NCCL, ("inference_gpu_dense", "inference_gpu_moe", "inference_gpu_max_batch", "inference_gpu_dp",
                     "training_gpu", "collective_gpu", "serving_moe",
                     "collective_gpu_tables"))  # the latest change first
_rebase(_A100_NCCL, ("inference_gpu_dense", "inference_gpu_moe", "inference_gpu_max_batch", "training_gpu",
                     "collective_gpu", "collective_gpu_tables"))
_rebase(_WAVE_TAIL, ("training_gpu", "inference_gpu_tables", "gemm_gpu_tables"))
_MI300X_RCCL = ("issue 15: MI300X's xGMI collective curve is its measured RCCL all-reduce (measurements B28, AMD ROCm "
                "blog: rccl-tests on 8 MI300X, 66.9-318.0 GB/s busbw from 1 MiB to 8 GiB) with a 0.936 us step (a "
                "small all-reduce's 13.1 us over 14 ring steps), in place of the A100 ring curve and 1.5 us assumed: "
                "only mi300x points move (collective time x0.31-x1.07, TPOT x0.60-x1.00, TTFT x0.57-x1.05, training "
                "steps x0.92-x0.99)")
_rebase(_MI300X_RCCL, ("collective_gpu", "training_gpu_variants", "inference_gpu_dense", "inference_gpu_moe",
                       "inference_gpu_max_batch"))
_EXPERT_REGIONS = ("issue 17: a MoE layer that a wafer region of side P cannot hold whole keeps its routed experts "
                   "in regions of the same side beside it (wafer_layers.layer_memory_per_pe expert_groups; a row's "
                   "experts in the busiest of them, the activations handed over and back), so the grid search also "
                   "weighs smaller regions: only Mixtral 8x7B under gpu_style on 4 systems moves (TPOT x0.18-x0.51, "
                   "TTFT x0.64-x1.28; 4 batch-8 fp16 points now fit; memory per device counts an expert region at "
                   "its own fullest PE); mesh-mapped and dense points unchanged")
_rebase(_EXPERT_REGIONS, ("inference_wafer_regions",))
_ROBUST_GEMM = ("issue 15: GEMM surfaces fitted with Huber weights (calibrate/surface_solve.py: rows timed 2-5x off "
                "their neighbours no longer bend the surface; pooled held-out GEMM median |err| lower on every GPU, "
                "B200 4.2% -> 3.5%, p90 15.4% -> 14.6%) and the serving constants refitted to them (workbench "
                "calibrate fit-serving: TensorRT-LLM host overhead 1.03 -> 1.35 ms per iteration, SGLang 2.51 -> "
                "3.05 ms + 30 us per MoE layer): GEMM times x0.88-x1.09, training steps x0.98-x1.00, static TPOT "
                "x0.98-x1.01, fixed-concurrency TPOT x0.95-x1.18, TTFT x0.95-x1.05")
_rebase(_ROBUST_GEMM, ("training_gpu", "training_gpu_variants", "inference_gpu_tables", "gemm_gpu_tables",
                       "serving_h100_8b_tables", "serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                       "disaggregated_fixed_pools"))

_NVFP4_COPY_KV = ("issue 16: NVFP4 weights of a checkpoint that stores none are NVIDIA's ModelOpt NVFP4 copy, whose cache is "
                  "FP8 under TensorRT-LLM's and vLLM's 'auto' (frameworks.yaml kv_cache_nvfp4_copy: 19 of the 19 such "
                  "copies in aiconfigurator-core 0.12.0 ask for it), and the serving constants refitted (workbench "
                  "calibrate fit-serving: TensorRT-LLM host overhead 1.35 -> 0.93 ms per iteration, vLLM 1.56 -> 1.00 "
                  "ms + 16 us per MoE layer): fixed-concurrency TPOT x0.91-x1.13, TTFT x0.95-x1.28")
_rebase(_NVFP4_COPY_KV, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                         "disaggregated_fixed_pools"))


_INSTINCT_MEASURED = ("AMD Instinct efficiencies from measurements in place of assumptions (measurements.csv B33-B41): "
                      "MI300X FP8 GEMM 0.511 -> 0.4868 (AMD's MAF, B34), HBM plateau 0.796 -> 0.772 (Azure's "
                      "BabelStream triad, B35), FlashAttention-2 0.35 -> 0.2725 (Azure's FA2 forward, B37); MI300X "
                      "GEMM time x1.036-x1.050, attention x1.02-x1.28, static TTFT x1.00-x1.09, TPOT x1.00-x1.04, "
                      "training step x1.01-x1.10; only the MI300X points of these calls move")
_rebase(_INSTINCT_MEASURED, ("inference_gpu_dense", "inference_gpu_moe", "inference_gpu_max_batch",
                             "training_gpu_variants", "gemm_gpu", "attention_gpu"))


_MTP_RUNS_REFIT = ("issue 16: the serving rows whose runs decoded with MTP, and the disaggregated rows' workers, "
                   "taken from the InferenceX configuration (calibrate/recipes.py), and the serving constants "
                   "refitted to them (workbench calibrate fit-serving: TensorRT-LLM host overhead 0.93 -> 1.01 ms "
                   "per iteration, 7 -> 8 us per sequence): only TensorRT-LLM points move, fixed-concurrency TPOT "
                   "x1.000-x1.015, TTFT x1.000-x1.004, the fixed pools' TPOT x1.006")
_rebase(_MTP_RUNS_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                          "disaggregated_fixed_pools"))


_DECODE_CAP_MLA = ("issue 16: MLA decodes absorbed (layers.decode_attention: 2 x (512 + 64 + 512) FLOPs per head "
                   "and key, DeepSeek-V2 sec. 2.1.2) from the framework's measured MLA tables wherever it has them, "
                   "a verify step's positions folding into its heads; disaggregated decode pools hold at most "
                   "decode_max_batch requests and size their KV cache by the decode framework's memory rule; "
                   "SGLang and vLLM prefill MLA over 16-bit keys and values; the serving constants refitted "
                   "(TensorRT-LLM 1.01 -> 1.04 ms per iteration, 8 -> 10 us per sequence; SGLang 3.09 -> 3.13 ms, "
                   "22 -> 27 us, 34 -> 52 us per MoE layer, graph saving 8 -> 20 us): DeepSeek-V3 static TPOT "
                   "x1.000-x1.012 (framework none), fixed-concurrency TPOT x0.908-x1.071 and TTFT x0.960-x1.222, "
                   "MTP TPOT x0.971-x1.077, the fixed pools' TPOT x1.071 and TTFT x0.986")
_rebase(_DECODE_CAP_MLA, ("inference_gpu_moe", "serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                          "disaggregated_fixed_pools"))


_SGLANG_DEP_ROWS_REFIT = ("issue 16: 14 more serving rows answered (SGLang GB200 DEP decode pools sized in "
                          "nodes, expert splits that do not divide the experts: ops.expert_slots) and the serving "
                          "constants refitted to the 1,141 rows (SGLang 3.13 -> 5.70 ms per iteration, 27 -> 18 us "
                          "per sequence, 52 -> 0 us per MoE layer, graph saving 20 -> 10 us; the MoE-layer term ties "
                          "in leave-one-model-out error and is dropped): only SGLang points move, fixed-concurrency "
                          "TPOT x0.977-x1.456 and TTFT x0.887-x1.026, MTP TPOT x0.991-x1.079 and TTFT x0.988-x1.011")
_rebase(_SGLANG_DEP_ROWS_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp"))


_HARNESS_REFIT = ("issue 16: the serving rows at InferenceX's sequence lengths predicted at the mean of its length "
                  "draws ([0.8 L, L]) with lengths 'varied', and its SGLang scripts' engine settings (polling every "
                  "10 / 30 decode iterations on B200); a batch of prompts beyond the token budget runs as several "
                  "prefill iterations in the spread prefill-alone form; the serving constants refitted (SGLang 5.70 "
                  "-> 3.05 ms per iteration, 18 -> 20 us per sequence, 0 -> 32 us per MoE layer, graph saving 10 -> "
                  "8 us, request latency 0 -> 0.8 ms per dense layer; vLLM 1.00 -> 1.48 ms per iteration, 14 -> 12 "
                  "us per sequence, 16 -> 0 us per MoE layer, graph saving 1 -> 0 us, request latency 0.9 -> 1.2 ms "
                  "per MoE layer and 0.1 -> 0 ms per dense layer; TensorRT-LLM 1.04 -> 1.02 ms per iteration, "
                  "request latency 1.6 -> 1.7 ms per MoE layer): fixed-concurrency TTFT x0.995-x3.490 SGLang (its "
                  "dense-layer latency at concurrency 1), x1.000-x1.041 TensorRT-LLM, x0.799-x1.184 vLLM; TPOT "
                  "x0.744-x1.013 / x0.997-x1.000 / x0.992-x1.121; MTP TTFT x1.007-x1.043, TPOT x0.938-x0.999; the "
                  "fixed pools' TTFT x1.008 and TPOT x0.999")
_rebase(_HARNESS_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                         "disaggregated_fixed_pools"))


_SCRIPT_SETTINGS_REFIT = ("issue 16: the TensorRT-LLM and vLLM rows at InferenceX's lengths with their scripts' "
                          "settings too (an FP8 cache in every TensorRT-LLM DeepSeek-R1 and Llama script, each "
                          "framework's tokens per iteration and memory fraction), and fit-serving in two passes, "
                          "each framework keeping its better one (SGLang's constants alternated between two "
                          "near-tied states run to run): SGLang 3.05 -> 5.98 ms per iteration, 20 -> 15 us per "
                          "sequence, 32 -> 0 us per MoE layer, graph saving 8 -> 12 us, request latency 0.8 -> 0.6 "
                          "ms per dense layer; TensorRT-LLM 1.02 -> 0.40 ms per iteration, 10 -> 5 us per sequence, "
                          "graph saving 8 -> 6 us; vLLM 1.48 -> 1.57 ms per iteration, 12 -> 7 us per sequence, "
                          "request latency 0 -> 0.2 ms per dense layer: fixed-concurrency TTFT x0.834-x1.005 SGLang, "
                          "x0.994-x1.006 TensorRT-LLM, x0.990-x1.567 vLLM; TPOT x0.964-x1.382 / x0.955-x1.098 / "
                          "x0.950-x1.010; MTP TTFT x0.992-x1.006, TPOT x0.993-x1.082; the fixed pools' TTFT x1.004 "
                          "and TPOT x1.008")
_rebase(_SCRIPT_SETTINGS_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                                 "disaggregated_fixed_pools"))


_TRTLLM_RESERVATION = ("issue 16: TensorRT-LLM's aggregated engine reserves a request's whole prompt and output "
                       "when it admits it (its default capacity policy GUARANTEED_NO_EVICT; frameworks.yaml "
                       "kv_reserved), where it held p + g/2; its constants refitted (0.40 -> 0.51 ms per "
                       "iteration, 5 -> 1 us per sequence): TensorRT-LLM points only, fixed-concurrency TTFT "
                       "x0.993-x1.101 and TPOT x0.960-x1.016, MTP TTFT x0.999-x1.001 and TPOT x0.992-x1.013; "
                       "the fixed pools (a TensorRT-LLM decode pool) TTFT x1.001 and TPOT x0.995")
_rebase(_TRTLLM_RESERVATION, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                              "disaggregated_fixed_pools"))


_PROMPTS_THROUGH_THE_BUDGET = ("issue 16: in the spread schedule (TensorRT-LLM, vLLM) the q prompts prefilled with a "
                               "request go through the token budget as several iterations where q x p exceeds it "
                               "(they were cut at one budget's tokens, losing the rest's prefill work), as SGLang's "
                               "polled batches already did: the 8,192-token prompts at 16-64 in flight, TensorRT-LLM "
                               "and vLLM only, TTFT x1.000-x1.040 and TPOT x1.000-x1.141; the constants refitted "
                               "unchanged")
_rebase(_PROMPTS_THROUGH_THE_BUDGET, ("serving_fixed_concurrency_tables",))


_LOCKSTEP_REFIT = ("issue 16: an MoE model's attention-DP replicas step in lockstep, so without TensorRT-LLM's "
                   "balancer every replica's prefill stalls every replica (workloads/concurrency lockstep); "
                   "refitted: SGLang 5.98 -> 5.99 ms per iteration and request latency 0.6 -> 0.2 ms per dense "
                   "layer, 3.2 -> 3.3 ms per MoE layer: SGLang points only, fixed-concurrency TTFT x0.559-x1.020 "
                   "(the dense models' latency) and TPOT x1.000-x1.001, MTP TTFT x1.008-x1.021")
_rebase(_LOCKSTEP_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp"))


_EAGER_PREFILL_BATCH_WAIT = ("issue 16: an iteration that prefills runs eagerly (the engines replay CUDA graphs of "
                             "decode-only iterations only: no graph saving there, and a prefill pool none), "
                             "TensorRT-LLM's batch waiting (workloads/batch_wait.py; the grid sets none), and the "
                             "request latencies fitted to InferenceX's runs only (serving_rows.LATENCY_FIT_HARNESS: "
                             "0 ms per dense layer for every framework, 2.0 / 0.9 / 2.9 ms per MoE layer for "
                             "TensorRT-LLM / vLLM / SGLang); refitted TensorRT-LLM 0.51 -> 0.42 ms per iteration, "
                             "SGLang 5.99 -> 5.94 ms: fixed-concurrency TTFT x0.155-x1.100 (TensorRT-LLM's dense "
                             "latency 2.2 -> 0 ms per layer), TPOT x0.974-x1.045; MTP TTFT x0.926-x1.106, TPOT "
                             "x0.990-x1.032; the fixed pools TTFT x1.043, TPOT x1.001")
_rebase(_EAGER_PREFILL_BATCH_WAIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                                    "disaggregated_fixed_pools"))
_MOE_TABLE_BACKEND_REFIT = ("issue 16: the serving rows whose script picks the MoE backend the framework's table for "
                            "their format timed read that table (run_settings.MOE_TABLE_BACKENDS: TensorRT-LLM's "
                            "gpt-oss on H200, TRITON); refitted TensorRT-LLM 0.42 -> 0.36 ms per iteration, 3 -> 1 us "
                            "per sequence, 2.0 -> 1.8 ms request latency per MoE layer (the grid's own calls are "
                            "unchanged in kind): fixed-concurrency TTFT x0.928-x1.000, TPOT x0.975-x1.000; MTP TTFT "
                            "x0.925-x1.000, TPOT x0.990-x1.000; the fixed pools TTFT x0.984, TPOT x0.993")
_rebase(_MOE_TABLE_BACKEND_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp",
                                   "disaggregated_fixed_pools"))
_PREFILL_MOE_RULE = ("issue 16: predict.serving's default moe_mla_kernels is 'framework': decode-only iterations compose "
                     "the routed experts, an iteration that prefills times them as frameworks.yaml prefill_moe_kernels "
                     "says (vLLM: its measured fused-MoE tables; TensorRT-LLM, SGLang: composed), chosen by held-out "
                     "error; vLLM refitted 1.57 -> 1.49 ms per iteration, 7 -> 6 us per sequence, 0.9 -> 0.8 ms request "
                     "latency per MoE layer: vLLM TTFT x0.945-x1.163, TPOT x0.985-x1.041, TensorRT-LLM and SGLang "
                     "points unchanged; the moe_mla_kernels coordinate reads 'framework' (MTP grid values unchanged)")
_rebase(_PREFILL_MOE_RULE, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp"))
_OPEN_LOOP_LIMIT = ("the open-loop batch's fixed point extrapolated (workloads/serving.steady_state: Aitken's "
                    "delta-squared on the last rounds, kept where it is a fixed point): near saturation the 60 rounds "
                    "closed on it too slowly and a stable point read as unstable (TPOT inf, fits=True); the grid's "
                    "16.3 req/s point is now batch 203.3 of 221, TPOT 48.7 ms, within the 50 ms target, so goodput "
                    "per device 4,010 -> 4,177 tokens/s (x1.042); serving_h200_70b_spec and serving_moe each one "
                    "point inf -> finite (outside the targets), the other changed points batch x1.0000000-x1.0000568. "
                    "Beyond saturation a point is now fits=False with its reason")
_rebase(_OPEN_LOOP_LIMIT, ("serving_h100_8b", "serving_h200_70b_spec", "serving_moe", "serving_h100_8b_tables"))
_NVFP4_SCALES = ("fp4 is NVFP4 as stored, 0.5 + 1/16 B per element with its E4M3 scales (units.DTYPE_BYTES), the "
                 "bytes the fp4 GEMM and MoE tables' rooflines were fitted with: a served fp4 GEMM reproduces its table "
                 "(B200 TensorRT-LLM median -0.3%, was -4.8%; -7.9% at m <= 16); fp4 GEMMs x1.036-x1.121, fp4 "
                 "inference TPOT x1.001-x1.086, TTFT x1.000-x1.047; refitted serving constants (TensorRT-LLM 0.36 -> "
                 "1.27 ms per iteration, 1 -> 2 us per sequence, graph saving 6 -> 10 us per kernel; vLLM 1.49 -> 1.60 ms, 0 -> 3 us, 6 -> 17 "
                 "us per sequence; SGLang 5.94 -> 5.66 ms, 13 -> 17 us per sequence, 2.9 -> 3.0 ms request latency "
                 "per MoE layer): fixed-concurrency TTFT x0.979-x1.029, TPOT x0.777-x1.088; MTP TTFT x1.015-x1.034, "
                 "TPOT x0.922-x1.061; the fixed pools TTFT x1.030, TPOT x1.032")
_rebase(_NVFP4_SCALES, ("inference_gpu_moe", "gemm_gpu", "serving_fixed_concurrency_tables",
                        "serving_fixed_concurrency_mtp", "disaggregated_fixed_pools"))
_VLLM_FUSED_QUANT = ("vLLM's served FP8 / block-FP8 / NVFP4 GEMMs take their input quantized by the kernel before "
                     "(frameworks.yaml fused_activation_quant, chosen by held-out error: TPOT leave-one-model-out 11.7 -> "
                     "9.4%): the format's surface with the BF16 table's fixed latency; refitted vLLM 1.60 -> 0.95 ms per "
                     "iteration + 12 us per MoE layer, 17 -> 20 us per sequence, graph saving 3 -> 0 us, request latency "
                     "0 -> 0.1 ms per dense layer: the grid's vLLM points TTFT x0.989-x1.228, TPOT x0.958-x1.109, the "
                     "others unchanged")
_rebase(_VLLM_FUSED_QUANT, ("serving_fixed_concurrency_tables",))
_MOE_CARRY_REFIT = ("a MoE surface queried beyond the shapes its table measured carries the framework's BF16 MoE "
                    "surface's trend along that axis (moe.carried_efficiency: TensorRT-LLM's MXFP4 W4A16 table on "
                    "H200 spans gpt-oss's expert width alone); TensorRT-LLM refitted: 1.27 -> 0.65 ms per iteration, "
                    "2 -> 0 us per sequence, graph saving 10 -> 8 us per kernel (its TPOT leave-one-model-out 10.6 -> "
                    "10.0%, its disaggregated rows, never fitted, 12.5 -> 9.0%): the grid's TensorRT-LLM points TPOT "
                    "x0.978-x1.116, TTFT x0.981-x1.006; MTP TPOT x1.002-x1.048, TTFT x0.995-x0.997; the fixed pools "
                    "TTFT x0.995, TPOT x1.007; the other frameworks' points unchanged")
_rebase(_MOE_CARRY_REFIT, ("serving_fixed_concurrency_tables", "serving_fixed_concurrency_mtp", "disaggregated_fixed_pools"))
_PER_POINT_DRAFT = ("a point of a draft_len sweep that does not draft (draft_len=0) holds no draft: its KV room is the "
                    "deployment's without it (the grid's draft_len=0 points: max_running up, e.g. SGLang 847 -> 867; "
                    "TPOT and TTFT unchanged where the room did not bind)")
_rebase(_PER_POINT_DRAFT, ("serving_fixed_concurrency_mtp",))
_OPEN_LOOP_MONOTONE = ("the open-loop step table is non-decreasing in the batch (its running maximum): a CS-3 batch the "
                       "memory cannot hold, tabulated on another grid, no longer opens a fixed point of Little's law "
                       "past saturation; 4 of 50 points near saturation move (batch 71.3 -> 77.4 at 57 req/s)")
_rebase(_OPEN_LOOP_MONOTONE, ("serving_cs3",))
_WHOLE_SEQUENCES = ("a CS system's batch is ceil(global batch / systems) and its micro-batch a whole number of "
                    "sequences (Cerebras rel-2.5.0 automatic microbatching); memory_per_device_bytes and micro_batch "
                    "are the largest micro-batch's (28.0 -> 28.4 GB, GPT-3 175B on one CS-2 at 256); a point that does "
                    "not fit is bound 'capacity'; step times of divisible batches unchanged")
_rebase(_WHOLE_SEQUENCES, ("training_wafer",))
_GEMM_FLOOR = ("a GEMM timed by a fitted surface is never below its physical roofline (every FLOP at the peak, every "
               "operand moved once at the memory's rate): a surface's efficiency over 1 past its last knot put A100 "
               "BF16 GEMMs at 354 of 312 TFLOP/s; in these grids Mixtral's largest expert GEMMs move by < 0.1% (step "
               "12.5548 -> 12.5556 s, TTFT x1.0001)")
_rebase(_GEMM_FLOOR, ("training_gpu_variants", "inference_gpu_tables"))
_COLLECTIVE_FLOORS = ("a collective beyond the scale-up domain takes at least the same op over one whole domain on the "
                      "same buffer (its intra-domain phase; L40S's measured 8-GPU all-reduce is 10x the spec's link "
                      "time, and 16 L40S came out 10x faster than 8), and one below the smallest size its table "
                      "measured takes that size's time (latency-bound): 11 of 375 points move (H100 all-gather of "
                      "1 GB on 16 GPUs 3.10 -> 3.30 ms)")
_rebase(_COLLECTIVE_FLOORS, ("collective_gpu",))
_FLASH3_HOPPER = ("kernel='flash3' on a GPU that is not Hopper (compute capability 9.0) is a flagged point, NaN with the "
                  "reason: FlashAttention-3 is written for Hopper's warpgroup MMA and TMA (the grid's A100 flash3 points)")
_rebase(_FLASH3_HOPPER, ("attention_gpu_tables",))
_EXPERT_DP_AND_STAGES = ("GPU training (the MoE host constant refitted: 0.41 ms, unchanged in the end once the "
                         "measured rows' gradients were bf16): the routed experts' gradients and ZeRO states on their expert-data-parallel "
                         "group (Mixtral at EP8: optimizer 6.4x a device), a dense model's ep > 1 a flagged point "
                         "(the grid's llama_3_8b ep=8 points, NaN with the reason), and past one pipeline stage the "
                         "busiest holding the embedding or the output layer (pp=4 points: weights and states up to "
                         "+13%, steps up to +12%)")
_rebase(_EXPERT_DP_AND_STAGES, ("training_gpu", "training_gpu_variants"))
_WAFER_ROWS_AND_TILES = ("wafer: prefill counts the rows it runs against the SRAM its weights and KV leave (chunks and "
                         "sequences run together are those that fit), the lm_head spread over the regions that hold it, "
                         "one usable capacity (SRAM less the reserve: -12.5%), points that do not fit with NaN times and "
                         "the grid closest to fitting, predict.gemm's SRAM check and faster kernel (m > 1 on GEMV where "
                         "it fits), memory-port-bound datapaths named local_memory; the open-loop CS-3 curve follows its "
                         "faster decode (saturation rate +0.6%: the last points before it move most)")
_rebase(_WAFER_ROWS_AND_TILES, ("inference_wafer_regions", "inference_wafer_grid", "inference_wafer_streaming",
                                "inference_wafer_max_batch", "training_wafer", "gemm_wafer", "gemm_wafer_default_grid",
                                "serving_cs3", "disaggregated_mixed"))
_WAFER_USED_LESS_RESERVE = ("a wafer's memory_per_device_bytes leaves each PE's reserve out, as its capacity does "
                            "(usable_sram_bytes): 70B at generate='max' had shown 42.9 GB used of 38.2 GB and fit")
_rebase(_WAFER_USED_LESS_RESERVE, ("inference_wafer_regions", "inference_wafer_grid", "inference_wafer_streaming",
                                   "inference_wafer_max_batch"))
_TABLES_ROOFLINE_FLOOR = ("a table kernel never runs below its physical roofline in a served step "
                          "(kernel_fits.served_time): TensorRT-LLM's A100 decode-attention tables time large batches "
                          "at up to 1.7x the HBM bandwidth; a few attention and MoE table points sat under theirs too")
_rebase(_TABLES_ROOFLINE_FLOOR, ("inference_gpu_tables", "serving_fixed_concurrency_tables"))
_GEMM_LATENCY_FLOOR = ("a GEMM without tables takes at least one memory round trip (memory_latency_s): small router "
                       "and expert GEMMs on A100 without FP4/FP8 tables had taken nanoseconds")
_rebase(_GEMM_LATENCY_FLOOR, ("inference_gpu_moe", "serving_moe", "inference_gpu_tables"))
_RUNNING_LIMIT = ("the most requests a replica runs is the output running_limit (decode_running_limit for a "
                  "decode pool), no longer max_running: a swept max_running setting had replaced it")
_rebase(_RUNNING_LIMIT, ("serving_fixed_concurrency_mtp", "serving_fixed_concurrency_tables",
                         "disaggregated_fixed_pools"))
_PREFILL_PER_STAGE = ("prefill_flops_per_device counts a pipeline stage's 1/pp of the layers (the pp = 2 points "
                      "halve), as the decode step's already did; prefill_bytes_per_device joins it")
_rebase(_PREFILL_PER_STAGE, ("inference_gpu_dense",))


_UNSUPPORTED = "a GEMM in a dtype the chip has no math units for says bound='unsupported' (its time is NaN; issue 14)"
# Labels changed on purpose: (call, column) -> (the points, as a mask of the reference; their new label; why).
# The numbers of those points are unchanged and checked to RTOL like every other.
_OVERHEAD_BOUND = ("a decode step whose launch and host overhead exceeds its compute, memory and communication "
                   "times says bound='overhead' (it had named the largest of the other three)")


def _overhead_bound(ref):
    return (ref["decode_overhead_s"] > ref[["decode_compute_s", "decode_memory_s", "decode_comm_s"]].max(axis=1)) \
        .to_numpy()


RELABELLED = {
    ("gemm_gpu", "bound"): (lambda ref: ref["time_s"].isna().to_numpy(), lambda ref: "unsupported", _UNSUPPORTED),
    **{(name, "bound"): (_overhead_bound, lambda ref: "overhead", _OVERHEAD_BOUND)
       for name in ("inference_gpu_dense", "inference_gpu_moe", "inference_gpu_dp")},
}


def _rtol(name: str, ref: pd.DataFrame) -> np.ndarray:
    """The tolerance of each point: RTOL unless a listed change applies to it."""
    tol = np.full(len(ref), RTOL)
    if (name, "*") in CHANGED:
        tol[:] = CHANGED[(name, "*")][0]
    for (call, model), (rtol, _) in CHANGED.items():
        if call == name and model != "*" and "model" in ref:
            tol[(ref["model"] == model).to_numpy()] = rtol
    return tol


@pytest.mark.parametrize("name,fn,kwargs", CALLS, ids=[c[0] for c in CALLS])
def test_regression_grid(name, fn, kwargs):
    ref = pd.read_csv(HERE / "reference" / f"{name}.csv.gz", keep_default_na=False, na_values=["nan", "NaN", ""])
    ds = getattr(predict, fn)(**kwargs)
    new = table(ds)
    assert len(new) == len(ref), f"{name}: {len(new)} points, recorded {len(ref)}"
    keys = [d for d in ds.dims if d in ref.columns]  # the inputs that identify a point
    if keys:
        for k in keys:  # CSV reads 1000.0 back as an integer: numbers as floats, the rest as text
            numeric = pd.api.types.is_numeric_dtype(new[k]) and not pd.api.types.is_bool_dtype(new[k])
            ref[k], new[k] = (ref[k].astype(float), new[k].astype(float)) if numeric else \
                (ref[k].astype(str), new[k].astype(str))
        ref, new = ref.sort_values(keys).reset_index(drop=True), new.sort_values(keys).reset_index(drop=True)
        assert (ref[keys].values == new[keys].values).all(), f"{name}: the points differ"
    tol = _rtol(name, ref)
    for col in ref.columns:
        if col in keys:
            continue
        assert col in new.columns, f"{name}: output {col!r} is gone"
        r, n = ref[col], new[col]
        if pd.api.types.is_numeric_dtype(r) and not pd.api.types.is_bool_dtype(r):
            a, b = r.to_numpy(float), pd.to_numeric(n, errors="coerce").to_numpy(float)
            with np.errstate(invalid="ignore"):  # inf - inf: equal, caught by a == b
                bad = ~((a == b) | (np.abs(b - a) <= tol * np.abs(a)) | (np.isnan(a) & np.isnan(b)))
            assert not bad.any(), (f"{name}.{col}: {bad.sum()} of {len(a)} points differ, first at "
                                   f"{ref.loc[bad.argmax(), keys].to_dict()}: {a[bad][0]!r} -> {b[bad][0]!r}")
        else:
            a = r.fillna("").astype(str).str.replace("nan", "")
            b = n.fillna("").astype(str).str.replace("nan", "")
            if (name, col) in RELABELLED:
                where, label, _ = RELABELLED[(name, col)]
                mask = where(ref)
                assert mask.any(), f"{name}.{col}: the relabelled points are gone from the grid"
                new_label = label(ref)
                a = a.where(~mask, new_label if isinstance(new_label, str) else new_label.astype(str))
            bad = a.values != b.values
            assert not bad.any(), (f"{name}.{col}: {bad.sum()} points differ, first at "
                                   f"{ref.loc[bad.argmax(), keys].to_dict()}: {a[bad].iloc[0]!r} -> {b[bad].iloc[0]!r}")
