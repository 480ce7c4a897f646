"""The regression grid: a few thousand points across every predict.* function (GPUs and
wafers, dense and MoE, inference, serving, disaggregation and training), recorded before
the architecture / workload / mapping restructuring (issue 13) and replayed by
test_regression_grid.py. `python tests/regression/record.py` writes the reference.

Each call is (name, function, kwargs). Changes made on purpose are listed in
test_regression_grid.CHANGED with the reason. The GPU calls recorded before the measured
kernel tables (issue 15) run with framework="none" (the analytical efficiencies, unchanged);
the *_tables calls, recorded with the committed surfaces, run each GPU's default framework.
"""
from __future__ import annotations

GPUS = ["a100_sxm", "h100_sxm", "h200_sxm", "b200", "mi300x"]
WAFERS = ["cs2", "cs3", "wse3"]

CALLS = [
    ("inference_gpu_dense", "inference", dict(framework="none", 
        hardware=GPUS, model=["llama_3_1_8b", "llama_3_1_70b", "qwen3_32b"], tp=[1, 8], pp=[1, 2],
        batch=[1, 64], prompt=[128, 4096], generate=256, weights=["bf16", "fp8"])),
    ("inference_gpu_moe", "inference", dict(framework="none", 
        hardware=GPUS, model=["mixtral_8x7b", "deepseek_v3", "gpt_oss_120b", "qwen3_235b_a22b"], tp=8,
        ep=[1, 8], imbalance=[1.0, 1.5], batch=[1, 32], prompt=[512, 4096], generate=128, weights=["fp8", "fp4"])),
    ("inference_gpu_max_batch", "inference", dict(framework="none", 
        hardware=GPUS, model=["llama_3_1_70b", "mixtral_8x7b", "llama_3_1_8b"], tp=[4, 8], batch="max",
        prompt=[1024, 8192], generate=512, weights=["bf16", "fp8", "int4"], kv=["bf16", "fp8"])),
    ("inference_gpu_dp", "inference", dict(framework="none", 
        hardware=["h100_sxm", "b200"], model="llama_3_1_8b", devices=[8, 16], tp=[1, 2, 8], batch=[1, 16],
        prompt=2048, generate=128, weights="bf16", activations=["bf16", "fp8"])),
    ("inference_wafer_regions", "inference", dict(
        hardware=WAFERS, model=["llama_3_1_8b", "llama_3_1_70b", "mixtral_8x7b"], devices=[1, 4],
        batch=[1, 8], prompt=[512, 2048], generate=128, weights=["fp16", "fp8"], mapping=["mesh", "gpu_style"])),
    ("inference_wafer_grid", "inference", dict(
        hardware=["cs2", "cs3"], model="llama_3_1_8b", pe_grid=[256, 600], batch=[1, 4], prompt=1024,
        generate=64, weights="fp16", mapping=["mesh", "gpu_style"])),
    ("inference_wafer_streaming", "inference", dict(
        hardware=["cs2", "cs3"], model=["llama_3_1_8b", "llama_3_1_70b"], devices=[1, 2], batch=[1, 16],
        prompt=[512, 2048], generate=128, weights="fp16", placement="streaming")),
    ("inference_wafer_max_batch", "inference", dict(
        hardware=["cs3"], model=["llama_3_1_8b", "llama_3_1_70b"], devices=[1, 4], batch="max",
        prompt=[512, 4096], generate=256, weights="fp16")),
    ("training_gpu", "training", dict(
        hardware=["a100_sxm", "h100_sxm", "b200"], model=["llama_3_8b", "llama_3_70b"], devices=64,
        tp=[1, 8], pp=[1, 4], seq_len=[2048, 8192], global_batch=256, micro_batch=[1, 2], zero=[0, 1, 3],
        recompute=["none", "full"], precision="bf16")),
    ("training_gpu_variants", "training", dict(
        hardware=["h100_sxm", "mi300x"], model=["llama_3_8b", "mixtral_8x7b"], devices=128, tp=8, pp=2, cp=[1, 2],
        ep=[1, 8], seq_len=8192, global_batch=512, virtual_stages=[1, 2], recompute="selective",
        attention=["flash2", "flash1", "materialized"], precision=["bf16", "fp8"])),
    ("training_wafer", "training", dict(
        hardware=["cs2", "cs3"], model=["llama_3_8b", "llama_3_70b", "gpt3_175b"], devices=[1, 4, 16],
        seq_len=[2048, 8192], global_batch=[256, 1024], recompute=["none", "full"])),
    ("gemm_gpu", "gemm", dict(framework="none", 
        hardware=GPUS, m=[1, 16, 128, 4096, 16384], n=[1024, 8192, 28672], k=[512, 8192],
        dtype=["bf16", "fp8", "fp4"])),
    ("gemm_wafer", "gemm", dict(
        hardware=["wse2", "wse3", "cs3"], m=[1, 64, 2048], n=[4096, 16384], k=[4096, 16384], dtype="fp16",
        pe_grid=[128, 512], mapping=["mesh", "gpu_style"])),
    ("gemm_wafer_default_grid", "gemm", dict(
        hardware=["wse2", "wse3"], m=[1, 1024], n=8192, k=8192, dtype="fp16")),
    ("attention_gpu", "attention", dict(framework="none", 
        hardware=GPUS, batch=[1, 8], seq_len=[512, 4096, 32768], n_heads=[32, 64], head_dim=128,
        dtype=["bf16", "fp8"], causal=[True, False], kernel=["flash2", "flash1", "materialized"])),
    ("collective_gpu", "collective", dict(framework="none", 
        hardware=GPUS, devices=[2, 8, 16, 64, 512], op=["all_reduce", "all_gather", "reduce_scatter",
                                                        "all_to_all", "send_recv"],
        size_bytes=[1e3, 1e6, 1e9])),
    ("serving_h100_8b", "serving", dict(framework="none", hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8")),
    ("serving_h200_70b_spec", "serving", dict(framework="none", hardware="h200_sxm", model="llama_3_1_70b", tp=8, weights="fp8",
                                              draft_len=3, acceptance=0.7)),
    ("serving_h100_draft", "serving", dict(framework="none", hardware="h100_sxm", model="llama_3_1_70b", tp=8, weights="fp8",
                                           draft_len=4, acceptance=0.6, draft_model="llama_3_1_8b",
                                           arrival_rate=[0.5, 1.0, 2.0])),
    ("serving_cs3", "serving", dict(hardware="cs3", model="llama_3_1_8b", devices=1, weights="fp16")),
    ("serving_moe", "serving", dict(framework="none", hardware="b200", model="mixtral_8x7b", tp=4, weights="fp8")),
    ("disaggregated_gpu", "disaggregated", dict(framework="none", prefill_hardware="h100_sxm", decode_hardware="h200_sxm",
                                                model="llama_3_1_70b", prefill_tp=8, decode_tp=8, weights="fp8")),
    ("disaggregated_mixed", "disaggregated", dict(framework="none", prefill_hardware="h100_sxm", decode_hardware="cs3",
                                                  model="llama_3_1_8b", prefill_tp=1, decode_devices=1,
                                                  weights="fp16")),
    # recorded with the kernel tables of issue 15 (each GPU's default framework, trtllm)
    ("inference_gpu_tables", "inference", dict(
        hardware=["a100_sxm", "h100_sxm", "h200_sxm", "b200", "b300", "gb200", "gb300"],
        model=["llama_3_1_8b", "llama_3_1_70b", "mixtral_8x7b"], tp=[1, 8], batch=[1, 64], prompt=[128, 4096],
        generate=256, weights=["bf16", "fp8"])),
    ("gemm_gpu_tables", "gemm", dict(
        hardware=["a100_sxm", "h100_sxm", "h200_sxm", "b200", "b300", "gb200", "gb300"],
        m=[1, 16, 128, 4096, 16384], n=[1024, 8192, 28672], k=[512, 8192], dtype=["bf16", "fp8"])),
    ("attention_gpu_tables", "attention", dict(
        hardware=["a100_sxm", "h100_sxm", "h200_sxm", "b200"], batch=[1, 8], seq_len=[512, 4096, 16384],
        n_heads=[32, 64], head_dim=128, dtype="bf16", kernel=["framework", "flash3"],
        framework=["trtllm", "vllm", "sglang"])),
    ("collective_gpu_tables", "collective", dict(
        hardware=["a100_sxm", "h100_sxm", "b200", "gb200"], devices=[2, 8, 64], op=["all_reduce", "all_gather"],
        size_bytes=[1e3, 1e6, 1e9], framework=["trtllm", "vllm"])),
    ("serving_h100_8b_tables", "serving", dict(hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8")),
    # recorded at the fixed-concurrency serving of issue 16 with the committed surfaces and framework constants
    ("serving_fixed_concurrency_tables", "serving", dict(
        hardware=["h200_sxm", "b200"], model=["llama_3_1_70b", "deepseek_v3"], tp=8, concurrency=[1, 16, 256],
        prompt=[1024, 8192], generate=1024, weights="fp8", framework=["trtllm", "vllm", "sglang"])),
    ("serving_fixed_concurrency_mtp", "serving", dict(
        hardware="b200", model="deepseek_v3", tp=8, concurrency=[4, 64], prompt=1024, generate=1024, weights="fp4",
        framework=["trtllm", "sglang"], draft_len=[0, 3], acceptance=[0.6, 0.8])),
    ("disaggregated_fixed_pools", "disaggregated", dict(
        prefill_hardware="b200", decode_hardware="b200", model="deepseek_v3", concurrency=64, prompt=8192,
        generate=1024, weights="fp4", framework="trtllm", prefill_tp=4, prefill_workers=2, decode_tp=8,
        decode_workers=1, draft_len=3, acceptance=0.7)),
]
