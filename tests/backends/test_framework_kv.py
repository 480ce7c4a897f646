"""The KV-cache dtype a serving framework stores when `kv` is left unset (backends/kernel_tables.
framework_kv, specs/serving/frameworks.yaml kv_cache_auto and kv_cache_fp8_attention):
TensorRT-LLM and vLLM inherit the format a quantized checkpoint's config asks for (NVFP4 weights
of a checkpoint that stores none: the NVFP4 copy's, kv_cache_nvfp4_copy), SGLang keeps
16 bits except for a DSA model's cache on Blackwell and DeepSeek-V4's everywhere; what that does to the KV room in closed form;
and each checkpoint's recorded format against the config files it was read from."""
from __future__ import annotations

import re

import pytest

from workbench import predict
from workbench.specs import SpecError, list_models, load_hardware, load_model
from workbench.units import DTYPE_BYTES


def _kv(model, framework, hardware="b200", weights="fp4", kv=None, **kw):
    ds = predict.serving(hardware=hardware, model=model, tp=8, concurrency=16, prompt=2048, generate=256,
                         weights=weights, framework=framework, kv=kv, **kw)
    return str(ds.kv.values), ds


@pytest.mark.parametrize("framework,expected", [("trtllm", "fp8"), ("vllm", "fp8"), ("sglang", "bf16")])
def test_a_modelopt_checkpoint_brings_its_fp8_cache_to_the_frameworks_that_inherit_it(framework, expected):
    """nvidia/Qwen3-235B-A22B-NVFP4's hf_quant_config.json says kv_cache_quant_algo FP8: TensorRT-LLM and
    vLLM (>= 0.13) store the cache so under "auto", SGLang keeps BF16."""
    assert _kv("nvidia/Qwen3-235B-A22B-NVFP4", framework)[0] == expected


def test_the_same_architecture_by_its_base_id_or_name_keeps_16_bits_and_kv_overrides():
    """In the base checkpoint's own formats (Qwen/Qwen3-235B-A22B-FP8's block FP8, or BF16) the
    cache keeps 16 bits; NVFP4 weights of it are the NVFP4 copy's (test_nvfp4_weights_...)."""
    assert _kv("Qwen/Qwen3-235B-A22B", "trtllm", weights="fp8_block")[0] == "bf16"
    assert _kv("qwen3_235b_a22b", "trtllm", weights="bf16")[0] == "bf16"  # a catalog name loads no checkpoint
    assert _kv("Qwen/Qwen3-235B-A22B", "trtllm")[0] == "fp8"  # fp4 weights: the NVFP4 copy's cache
    assert _kv("nvidia/Qwen3-235B-A22B-NVFP4", "trtllm", kv="bf16")[0] == "bf16"  # the user's word wins
    assert load_model("nvidia/Qwen3-235B-A22B-NVFP4").checkpoint == "nvidia/Qwen3-235B-A22B-NVFP4"
    assert load_model("nvidia/Qwen3-235B-A22B-NVFP4") == load_model("qwen3_235b_a22b")  # one architecture


@pytest.mark.parametrize("hardware,expected", [("b200", "fp8"), ("gb300", "fp8"), ("h200_sxm", "bf16")])
def test_sglang_stores_a_dsa_cache_in_fp8_on_blackwell(hardware, expected):
    """SGLang's server, DeepSeek NSA: fp8_e4m3 when the compute capability's major is >= 10, bfloat16
    on Hopper; the rule is SGLang's: TensorRT-LLM on the base checkpoint keeps 16 bits."""
    assert load_hardware(hardware).compute_capability == {"b200": 10.0, "gb300": 10.3, "h200_sxm": 9.0}[hardware]
    assert _kv("deepseek-ai/DeepSeek-V3.2", "sglang", hardware=hardware, weights="fp8")[0] == expected
    assert _kv("deepseek-ai/DeepSeek-V3.2", "trtllm", hardware=hardware, weights="fp8")[0] == "bf16"


@pytest.mark.parametrize("hardware", ["b200", "h200_sxm"])
def test_sglang_stores_deepseek_v4s_compressed_cache_in_fp8_on_every_gpu(hardware):
    assert _kv("deepseek-ai/DeepSeek-V4-Flash", "sglang", hardware=hardware, weights="fp8")[0] == "fp8"
    assert _kv("deepseek-ai/DeepSeek-V4-Flash", "vllm", hardware=hardware, weights="fp8")[0] == "bf16"


def test_an_fp8_cache_doubles_the_room_for_requests():
    """Llama-3.1-70B FP8 on 8 H100 under TensorRT-LLM: the ModelOpt checkpoint's FP8 cache holds each
    token in half the bytes of the base id's BF16 one (80 layers x 8 KV heads x 128 x 2 (K, V) x 1 B over
    the 8 GPUs, for the prompt and the whole output, which TensorRT-LLM reserves when it admits a
    request: GUARANTEED_NO_EVICT, frameworks.yaml kv_reserved), so the largest running batch at the
    same weights doubles (to the integer, in the KV room's floor)."""
    a = predict.serving(hardware="h100_sxm", model="nvidia/Llama-3.1-70B-Instruct-FP8", tp=8, concurrency=16,
                        prompt=8192, generate=1024, weights="fp8", framework="trtllm")
    b = predict.serving(hardware="h100_sxm", model="meta-llama/Llama-3.1-70B", tp=8, concurrency=16,
                        prompt=8192, generate=1024, weights="fp8", framework="trtllm")
    assert float(a.kv_per_request_bytes) * 2 == pytest.approx(float(b.kv_per_request_bytes))
    assert float(a.kv_per_request_bytes) == pytest.approx(80 * 8 * 128 * 2 * 1.0 * (8192 + 1024) / 8)
    assert float(a.running_limit) == pytest.approx(2 * float(b.running_limit), abs=1.0)


def test_fixed_pools_take_the_rule_too():
    ds = predict.disaggregated(prefill_hardware="b200", decode_hardware="b200", model="nvidia/DeepSeek-V3.2-NVFP4",
                               concurrency=64, prompt=4096, generate=512, weights="fp4", framework="trtllm",
                               prefill_tp=8, decode_tp=8, prefill_workers=1, decode_workers=1, prefill_batch=1)
    assert ds.attrs["kv"] == "fp8"


@pytest.mark.parametrize("key, model, bad", [
    ("hf_kv_cache", "qwen3_32b", ({"someone/Else-FP8": "fp8"}, {"nvidia/Qwen3-32B-NVFP4": "fp7"}))])
def test_a_recorded_format_must_name_one_of_the_ids_and_a_dtype(key, model, bad):
    from workbench.specs import build
    from workbench.specs.model import ModelSpec
    base = {k: v for k, v in vars(load_model(model)).items() if k not in (key, "checkpoint")}
    for entry in bad:  # an id the spec does not list; a dtype that does not exist
        with pytest.raises(SpecError, match=key):
            build(ModelSpec, {**base, key: entry}, origin="t")


def test_every_recorded_format_is_what_its_checkpoint_config_says():
    """Each hf_kv_cache entry against aiconfigurator-core 0.12.0's copy of the checkpoint's configs
    (model_configs/<org>--<name>_hf_quant_config.json kv_cache_quant_algo, or the config.json's
    quantization_config kv_cache_scheme of 8-bit floats); every shipped checkpoint config that asks
    for an FP8 cache and whose id the catalog lists is recorded."""
    pytest.importorskip("aiconfigurator_core", reason="aiconfigurator-core (the silicon extra) is not installed")
    from workbench.specs.catalog_import import checkpoint_kv, package_configs
    configs, _ = package_configs()

    def asks(hf_id):
        return checkpoint_kv(configs, hf_id)[0]

    recorded = {i: kv for m in list_models() for i, kv in load_model(m).hf_kv_cache.items()}
    listed = {i for m in list_models() for i in load_model(m).hf_ids}
    assert len(recorded) >= 20
    for hf_id, kv in recorded.items():
        assert kv in DTYPE_BYTES and asks(hf_id) == kv, hf_id
    for hf_id in listed - set(recorded):
        assert asks(hf_id) is None, hf_id


@pytest.mark.parametrize("model,framework,expected", [
    ("deepseek-ai/DeepSeek-R1", "trtllm", "fp8"), ("deepseek-ai/DeepSeek-R1", "vllm", "fp8"),
    ("deepseek-ai/DeepSeek-R1", "sglang", "bf16"), ("meta-llama/Llama-3.1-70B", "trtllm", "fp8"),
    ("llama_3_1_70b", "vllm", "fp8"), ("openai/gpt-oss-120b", "trtllm", "bf16"), ("gpt_oss_120b", "vllm", "bf16"),
    ("nvidia/MiniMax-M3-NVFP4", "trtllm", "bf16")])
def test_nvfp4_weights_of_a_checkpoint_that_stores_none_come_from_the_nvfp4_copy(model, framework, expected):
    """Neither TensorRT-LLM nor vLLM quantizes weights to NVFP4 when it loads them: NVFP4 weights of a
    model whose loaded checkpoint (its id; a catalog name's first id) stores no 4-bit weights are
    NVIDIA's ModelOpt NVFP4 copy, whose cache is FP8 (frameworks.yaml kv_cache_nvfp4_copy).
    gpt-oss's own checkpoint stores its experts in MXFP4 (checkpoint_formats.csv: served as they are, 16-bit
    cache); nvidia/MiniMax-M3-NVFP4 stores 4-bit weights (MIXED_PRECISION) and asks for no FP8 cache;
    SGLang keeps 16 bits whatever it loads."""
    assert _kv(model, framework, weights="fp4")[0] == expected


def test_fp8_weights_name_no_copy_and_fp4_attention_weights_do():
    """vLLM quantizes to FP8 at load time (--quantization fp8), so FP8 weights of a base checkpoint
    keep its 16-bit cache; NVFP4 attention weights beside block-FP8 experts are still NVFP4 weights
    the base checkpoint does not hold; an explicit kv wins."""
    assert _kv("meta-llama/Llama-3.1-70B", "vllm", weights="fp8")[0] == "bf16"
    assert _kv("deepseek-ai/DeepSeek-R1", "trtllm", weights="fp8_block")[0] == "bf16"
    assert _kv("deepseek-ai/DeepSeek-R1", "trtllm", weights="fp8_block", attention_weights="fp4")[0] == "fp8"
    assert _kv("deepseek-ai/DeepSeek-R1", "trtllm", weights="fp4", kv="bf16")[0] == "bf16"


def test_the_nvfp4_copy_rule_is_what_every_shipped_copy_asks_for():
    """The evidence behind kv_cache_nvfp4_copy: every checkpoint in aiconfigurator-core's model_configs
    whose ModelOpt quant_algo is NVFP4 asks for an FP8 cache (19 of 19 in 0.12.0), each of them a
    checkpoint the format table (specs/checkpoint_formats.csv, which the rule reads) says stores
    4-bit weights."""
    pytest.importorskip("aiconfigurator_core", reason="aiconfigurator-core (the silicon extra) is not installed")
    from workbench.backends.kernel_tables import serving_constants
    from workbench.specs.catalog_import import _quantization, checkpoint_kv, package_configs
    from workbench.specs.checkpoint_formats import checkpoint_formats
    configs, _ = package_configs()
    shipped = {re.sub(r"(_hf_quant)?_config\.json$", "", p.name).replace("--", "/", 1)
               for p in configs.glob("*_config.json")}
    nvfp4 = {i for i in shipped if any(q.get("quant_algo") == "NVFP4" for _, q in _quantization(configs, i))}
    assert len(nvfp4) >= 19
    assert {i: checkpoint_kv(configs, i)[0] for i in nvfp4} == {i: "fp8" for i in nvfp4}
    assert set(serving_constants()["kv_cache_nvfp4_copy"].values()) == {"fp8"}
    assert {i: checkpoint_formats(i)[0] for i in nvfp4} == {i: "fp4" for i in nvfp4}



def test_tensorrt_llm_reserves_the_whole_request_where_vllm_holds_what_it_has():
    """The same deployment's cache per running request: prompt + output under TensorRT-LLM
    (GUARANTEED_NO_EVICT reserves it at admission), prompt + half the output under vLLM (pages
    as tokens come, staggered requests holding half their output on average); an unknown
    reservation is refused by name."""
    from workbench.workloads import concurrency as cc
    kw = dict(hardware="h100_sxm", model="meta-llama/Llama-3.1-70B", tp=8, concurrency=16, prompt=8192,
              generate=1024, weights="fp8", kv="fp8")
    per_token = 80 * 8 * 128 * 2 * 1.0 / 8
    trt = predict.serving(framework="trtllm", **kw)
    vllm = predict.serving(framework="vllm", **kw)
    assert float(trt.kv_per_request_bytes) == pytest.approx(per_token * (8192 + 1024))
    assert float(vllm.kv_per_request_bytes) == pytest.approx(per_token * (8192 + 512))
    with pytest.raises(ValueError, match="kv_reserved='all' is not known; allowed: held, whole"):
        cc._steady_state(hw=None, model=None, concurrency=1, prompt=1, generate=2, tp=1, attention_dp=1, ep=1,
                         weights="fp8", activations="fp8", kv="fp8", overhead_s=0.0, token_budget=8192.0,
                         kv_reserved="all")
