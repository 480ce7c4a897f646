"""calibrate/run_settings.py: the harness's request lengths and the engine settings
InferenceX's scripts launched a row's server with (reference/inferencex_engine_settings.csv)."""
from __future__ import annotations

import pandas as pd
import pytest

from workbench.calibrate import run_settings as rs
from workbench.calibrate import serving_rows as sr


def _row(id_):
    df = sr.load()
    return next(df[df.id == id_].itertuples())


def test_mean_length_of_a_uniform_draw_over_integers():
    """benchmark_serving.py's sample_uniform: randint(int(0.8 L), L + 1), whose mean is
    (int(0.8 L) + L) / 2: (819 + 1024) / 2 = 921.5 and (6553 + 8192) / 2 = 7372.5."""
    assert rs.mean_length(1024) in (921, 922) and abs(rs.mean_length(1024) - 921.5) == 0.5
    assert abs(rs.mean_length(8192) - 7372.5) == 0.5
    assert rs.mean_length(1000, range_ratio=1.0) == 1000


def test_inferencex_lengths_are_drawn_and_other_harnesses_send_them_as_stated():
    """A row at one of InferenceX's sequence-length settings runs at the mean of its draws with
    lengths "varied"; aiconfigurator's own runs (4000 / 1000 here) at their nominal lengths."""
    assert {(1024, 1024), (1024, 8192), (8192, 1024)} <= rs._sequence_settings()
    ix = rs.harness_lengths(_row("2026_03_25_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c16_tp2_0_ep1_0_61"))
    assert ix == {"prompt": rs.mean_length(1024), "generate": rs.mean_length(1024), "lengths": "varied"}
    df = sr.load()
    other = next(df[(df.isl == 4000) & (df.osl == 1000)].itertuples())
    assert rs.harness_lengths(other) == {"prompt": 4000, "generate": 1000, "lengths": "equal"}


def test_the_sglang_b200_scripts_poll_every_10_or_30_decode_iterations():
    """dsr1_fp8_b200.sh at TP 8: --scheduler-recv-interval 30 from concurrency 16, else 10;
    --chunked-prefill-size 32768, --mem-fraction-static 0.82, --kv-cache-dtype fp8_e4m3. The
    H200 script leaves the interval at SGLang's default (1) and the cache at the model's
    dtype. A row at other lengths gets none of these."""
    df = sr.load()
    b200 = df[(df.backend == "sglang") & (df.system == "b200_sxm") & (df.model_path == "deepseek-ai/DeepSeek-R1")
              & (df["mode"] == "agg") & (df.precision == "fp8") & (df.isl == 1024)]
    high = next(b200[b200.concurrency >= 16].itertuples())
    low = next(b200[b200.concurrency < 16].itertuples())
    assert rs.engine(high, 8) == {"recv_interval": 30, "token_budget": 32768, "memory_fraction": 0.82,
                                  "kv": "fp8"}
    assert rs.engine(low, 8)["recv_interval"] == 10
    h200 = df[(df.backend == "sglang") & (df.system == "h200_sxm") & (df.model_path == "deepseek-ai/DeepSeek-R1")
              & (df["mode"] == "agg") & (df.isl == 1024) & (df.osl == 1024)]
    assert rs.engine(next(h200.itertuples()), 8) == {"recv_interval": 1, "token_budget": 32768,
                                                    "memory_fraction": 0.82}
    other = df[(df.backend == "sglang") & (df.isl == 1000) & (df["mode"] == "agg")]
    assert rs.engine(next(other.itertuples()), 8) == {}


def test_every_settings_line_names_its_script_and_commit():
    """Each line: a script of InferenceX's benchmarks/ at a commit; the polling interval only
    for SGLang; fractions of memory in (0.5, 1]; the three frameworks' scripts."""
    df = pd.read_csv(rs.ENGINE_SETTINGS_CSV)
    assert df.script.str.startswith("benchmarks/").all() and df.commit.str.len().ge(9).all()
    assert (df.recv_interval.dropna() >= 1).all() and df.recv_interval[df.framework != "sglang"].isna().all()
    assert df.memory_fraction.dropna().between(0.5, 1.0).all()
    for col in ("adp_timeout_iters", "adp_batching_iters"):  # TensorRT-LLM's attention_dp_config only
        assert (df[col].dropna() >= 0).all() and df[col].isna().eq(
            (df.framework != "trtllm") | ~df.model.isin(["deepseek-ai/DeepSeek-R1", "openai/gpt-oss-120b"])
            | (df.gpu == "h200_sxm") & (df.model == "openai/gpt-oss-120b")).all()
    waits = df[["batch_wait_timeout_iters", "batch_wait_max_tokens_ratio"]]  # TensorRT-LLM's batch waiting: both or none
    assert waits.isna().all(axis=1).eq(waits.isna().any(axis=1)).all() and waits.dropna().gt(0).all().all()
    assert (df.framework[waits.notna().all(axis=1)] == "trtllm").all()
    assert set(df.framework) == {"sglang", "trtllm", "vllm"}


def test_the_tensorrt_llm_scripts_that_delay_batching():
    """dsr1_fp8_b200_trt.sh holds prompts (batch_wait_timeout_iters 40, batch_wait_max_tokens_ratio
    0.8) at 1k/1k from concurrency 64 only; the Llama-3.1-70B scripts (20, 0.9) at 1k/1k below TP 8
    only (70b_fp8_b200_trt_slurm.sh: `ISL == 1024 && OSL == 1024 && TP < 8`)."""
    from types import SimpleNamespace
    df = sr.load()
    at = lambda d: next(d.itertuples())  # noqa: E731
    high = SimpleNamespace(backend="trtllm", system="b200_sxm", model_path="deepseek-ai/DeepSeek-R1", precision="fp8",
                           concurrency=64.0, isl=1024, osl=1024)
    assert rs.engine(high, 8) == {"memory_fraction": 0.8, "kv": "fp8", "adp_timeout_iters": 60, "adp_batching_iters": 0,
                                  "batch_wait_timeout_iters": 40, "batch_wait_max_tokens_ratio": 0.8}
    for other in ({"concurrency": 32.0}, {"osl": 8192}):  # below 64 in flight, or at 1k/8k
        assert "batch_wait_timeout_iters" not in rs.engine(SimpleNamespace(**{**vars(high), **other}), 8)
    llama = df[(df.backend == "trtllm") & (df.model_path == "meta-llama/Llama-3.1-70B") & (df["mode"] == "agg")
               & (df.isl == 1024)]
    one_k = at(llama[llama.osl == 1024])
    assert rs.engine(one_k, 4) == {"token_budget": 16384, "kv": "fp8", "batch_wait_timeout_iters": 20,
                                   "batch_wait_max_tokens_ratio": 0.9}
    assert "batch_wait_timeout_iters" not in rs.engine(one_k, 8)
    assert "batch_wait_timeout_iters" not in rs.engine(at(llama[llama.osl == 8192]), 4)


def test_tensorrt_llm_and_vllm_scripts_set_an_fp8_cache_where_the_checkpoint_asks_for_none():
    """dsr1_fp8_b200_trt.sh: kv_cache_config dtype fp8, free_gpu_memory_fraction 0.8 (the
    checkpoint's own cache, TensorRT-LLM's "auto", would be 16-bit), and with attention DP
    attention_dp_config timeout_iters 60, batching_wait_iters 0; 70b_fp8_h200_slurm.sh
    (vLLM): kv-cache-dtype fp8, max-num-batched-tokens 8192, gpu-memory-utilization 0.9."""
    df = sr.load()
    trt = df[(df.backend == "trtllm") & (df.system == "b200_sxm") & (df.model_path == "deepseek-ai/DeepSeek-R1")
             & (df["mode"] == "agg") & (df.precision == "fp8") & (df.isl == 1024) & (df.concurrency < 64)]
    assert rs.engine(next(trt.itertuples()), 8) == {"memory_fraction": 0.8, "kv": "fp8", "adp_timeout_iters": 60,
                                                    "adp_batching_iters": 0}
    vllm = df[(df.backend == "vllm") & (df.system == "h200_sxm") & (df.model_path == "meta-llama/Llama-3.1-70B")
              & (df["mode"] == "agg") & (df.isl == 1024)]
    assert rs.engine(next(vllm.itertuples()), 8) == {"token_budget": 8192, "memory_fraction": 0.9, "kv": "fp8"}


def test_the_rows_are_predicted_with_their_engine_settings():
    """serving_rows.config passes them to predict.serving: a DeepSeek-R1 FP8 B200 SGLang row at
    concurrency >= 16 with TP 8 polls every 30 decode iterations."""
    df = sr.load()
    rows = df[(df.backend == "sglang") & (df.system == "b200_sxm") & (df.model_path == "deepseek-ai/DeepSeek-R1")
              & (df["mode"] == "agg") & (df.precision == "fp8") & (df.concurrency >= 16)]
    for r in rows.itertuples():
        cfg, _ = sr.config(r)
        if cfg["tp"] * cfg["attention_dp"] == 8:
            assert cfg["recv_interval"] == 30 and cfg["kv"] == "fp8" and cfg["lengths"] == "varied"
            break
    else:
        pytest.fail("no TP 8 row")


def test_scripts_of_gpus_and_models_without_development_rows_are_transcribed():
    """dsr1_fp4_b300.sh (SGLang, 9ebeafb4e): --scheduler-recv-interval 30 from concurrency 16,
    --chunked-prefill-size 16384, --mem-fraction-static 0.85, fp8_e4m3 cache;
    kimik2.5_fp4_b200.sh (vLLM, 6c3acebfa): --max-num-batched-tokens 2 x ISL, 0.90, fp8 cache.
    A row of such a run (none is among the development rows) is predicted with them."""
    from types import SimpleNamespace
    row = SimpleNamespace(backend="sglang", system="b300_sxm", model_path="nvidia/DeepSeek-R1-NVFP4", precision="fp4",
                          concurrency=64.0, isl=1024, osl=1024)
    assert rs.engine(row, 8) == {"recv_interval": 30, "token_budget": 16384, "memory_fraction": 0.85, "kv": "fp8"}
    assert rs.engine(SimpleNamespace(**{**vars(row), "concurrency": 8.0}), 8)["recv_interval"] == 10
    kimi = SimpleNamespace(backend="vllm", system="b200_sxm", model_path="moonshotai/Kimi-K2.5", precision="fp4",
                           concurrency=32.0, isl=8192, osl=1024)
    assert rs.engine(kimi, 8) == {"token_budget": 16384, "memory_fraction": 0.9, "kv": "fp8"}
    dev = sr.load()
    assert not ((dev.system == "b300_sxm") | dev.model_path.str.contains("Kimi|GLM")).any()


def test_a_moe_table_is_read_where_it_timed_the_backend_the_script_runs():
    """gptoss_fp4_h200_trt.sh sets moe_config.backend TRITON, the backend aiconfigurator-core's
    collector timed TensorRT-LLM's Hopper MXFP4 W4A16 MoE tables with: those rows read the MoE
    table (moe_mla_kernels "measured"). vLLM's gpt-oss Hopper scripts run Marlin
    (VLLM_MXFP4_USE_MARLIN=1), a backend no table at gpt-oss's shape timed: they stay composed.
    SGLang's B200 scripts run flashinfer_trtllm, which its B200 tables time, but reading them
    raised the held-out TPOT error (run_settings.MOE_TABLE_BACKENDS), as did TensorRT-LLM's
    DeepSeek-R1 CUTLASS on H200: those rows stay composed too."""
    df = sr.load()

    def pick(backend, system, model):
        return df[(df["mode"] == "agg") & df.model_path.str.contains(model) & (df.backend == backend)
                  & (df.system == system)]
    trt = pick("trtllm", "h200_sxm", "gpt-oss")
    engines = [rs.engine(r, int(r.tp_size)) for r in trt.itertuples() if rs.inferencex(r)]
    assert engines and all(e.get("moe_mla_kernels") == "measured" for e in engines)
    for backend, system, model in (("vllm", "h200_sxm", "gpt-oss"), ("vllm", "b200_sxm", "gpt-oss"),
                                   ("sglang", "b200_sxm", "Qwen3.5"), ("trtllm", "b200_sxm", "gpt-oss"),
                                   ("trtllm", "h200_sxm", "DeepSeek-R1")):
        rows = pick(backend, system, model)
        assert len(rows) and all("moe_mla_kernels" not in rs.engine(r, int(r.tp_size)) for r in rows.itertuples())
    csv = pd.read_csv(rs.ENGINE_SETTINGS_CSV)
    assert set(csv.moe_backend.dropna()) == {"triton", "flashinfer_trtllm", "marlin", "flashinfer_mxfp4_mxfp8",
                                             "flashinfer_int4", "trtllm", "deepgemm", "cutlass"}
    assert all(csv[(csv.framework == f) & (csv.gpu == g) & (csv.precision == p)].moe_backend.eq(b).any()
               for (f, g, p), b in rs.MOE_TABLE_BACKENDS.items() if g == "h200_sxm")
