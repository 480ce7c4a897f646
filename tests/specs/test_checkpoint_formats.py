"""specs/checkpoint_formats.py: the weight formats a Hugging Face checkpoint stores (its own
quantization config), and weights=None serving a model named by its id as that checkpoint ships."""
import json
import re

import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.specs import load_model
from workbench.specs import checkpoint_formats as cf
from workbench.units import DENSE_DTYPES, DTYPE_BYTES, DTYPES


def _write(folder, stem, config=None, hf_quant=None):
    (folder / f"{stem}_config.json").write_text(json.dumps({"model_type": "x", **(config or {})}))
    if hf_quant is not None:
        (folder / f"{stem}_hf_quant_config.json").write_text(json.dumps({"quantization": hf_quant}))


def test_each_rule_on_configs_written_as_the_publishers_write_them(tmp_path):
    """One config per rule of the module docstring: DeepSeek's block-FP8 (quant_method fp8, 128 x 128
    blocks), per-tensor FP8 without blocks, gpt-oss's MXFP4 experts beside unconverted self_attn,
    NVIDIA's ModelOpt NVFP4 with and without attention excluded, its per-tensor FP8, a MIXED_PRECISION
    MoE (NVFP4 experts, FP8 attention) and dense model (its MLPs' format for every matmul), and a
    full-precision checkpoint (no row)."""
    _write(tmp_path, "a--Block", {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    _write(tmp_path, "a--Tensor", {"quantization_config": {"quant_method": "fp8"}})
    _write(tmp_path, "a--Oss", {"quantization_config": {"quant_method": "mxfp4",
                                                          "modules_to_not_convert": ["model.layers.*.self_attn"]}})
    _write(tmp_path, "n--Fp4Attn", hf_quant={"quant_algo": "NVFP4", "exclude_modules": ["lm_head",
                                                                                       "model.layers.0.self_attn.q_proj"]})
    _write(tmp_path, "n--Fp4All", hf_quant={"quant_algo": "NVFP4", "exclude_modules": ["model.layers.0.mlp.gate"]})
    _write(tmp_path, "n--Fp8", hf_quant={"quant_algo": "FP8", "exclude_modules": ["lm_head"]})
    _write(tmp_path, "n--MixedMoe", hf_quant={"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "NVFP4"}, "model.layers.1.mlp.experts": {"quant_algo": "NVFP4"},
        "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}, "model.layers.0.mlp.shared_expert.up_proj":
        {"quant_algo": "W4A16_NVFP4"}}})
    _write(tmp_path, "n--MixedDense", hf_quant={"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.up_proj": {"quant_algo": "W4A16_NVFP4"}, "model.layers.0.mlp.down_proj":
        {"quant_algo": "W4A16_NVFP4"}, "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}}})
    _write(tmp_path, "a--Full")
    got = {r["hf_id"]: (r["weights"], r["attention_weights"], r["rule"]) for r in cf.derive(tmp_path)}
    assert got == {"a/Block": ("fp8_block", "", "fp8 blocks"), "a/Tensor": ("fp8", "", "fp8 per tensor"),
                   "a/Oss": ("fp4", "bf16", "mxfp4 experts"), "n/Fp4Attn": ("fp4", "bf16", "modelopt"),
                   "n/Fp4All": ("fp4", "", "modelopt"), "n/Fp8": ("fp8", "", "modelopt"),
                   "n/MixedMoe": ("fp4", "fp8", "modelopt mixed"), "n/MixedDense": ("fp4", "", "modelopt mixed")}


def test_the_committed_table_is_the_package_s_configs_read_by_the_rules():
    """Every row of the CSV is what the rules read from the installed aiconfigurator-core's
    model_configs (the `silicon` extra; CI installs it), and every config there of a checkpoint
    the catalog lists has its row, so the table cannot drift from the configs it cites (a later
    package version's new checkpoints are not required of it)."""
    pytest.importorskip("aiconfigurator_core")
    from workbench.specs import list_models
    from workbench.specs.catalog_import import package_configs
    folder, _ = package_configs()
    committed = cf.rows()
    derived = {r["hf_id"]: {k: str(v) for k, v in r.items()} for r in cf.derive(folder)}
    listed = {i for m in list_models() for i in load_model(m).hf_ids}
    assert {i: derived.get(i) for i in committed} == committed
    assert set(derived) & listed <= set(committed)


def test_every_listed_checkpoint_resolves_to_its_catalog_entry_with_formats_the_model_knows():
    table = cf._table()
    assert len(table) >= 40
    for hf_id, (weights, attention) in table.items():
        assert load_model(hf_id).checkpoint == hf_id
        assert weights in DTYPES and (attention is None or attention in DENSE_DTYPES)


def test_a_model_named_by_its_id_is_served_as_its_checkpoint_ships():
    """DeepSeek-R1's only checkpoint stores block-FP8 weights: by its id it fits on 8 H200 (671B
    weights at 1 byte and a 4-byte scale per 128 x 128 block, over 8 GPUs, under 141 GB each), where
    the catalog name, bf16 by default, does not; and the prediction is the one with the formats given."""
    kw = dict(hardware="h200_sxm", tp=8, ep=8, concurrency=32, prompt=1024, generate=256, framework="sglang")
    by_id = predict.serving(model="deepseek-ai/DeepSeek-R1", **kw)
    given = predict.serving(model="deepseek-ai/DeepSeek-R1", weights="fp8_block", **kw)
    by_name = predict.serving(model="deepseek_r1", **kw)
    assert str(by_id.weights.values) == "fp8_block" and bool(by_id.fits)
    assert float(by_id.tpot_s) == float(given.tpot_s) and float(by_id.ttft_s) == float(given.ttft_s)
    assert str(by_name.weights.values) == "bf16" and not bool(by_name.fits)
    ratio = float(by_id.weights_per_device_bytes) / float(by_name.weights_per_device_bytes)
    assert ratio == pytest.approx(DTYPE_BYTES["fp8_block"] / DTYPE_BYTES["bf16"], rel=0.02)


def test_gpt_oss_by_id_takes_its_mxfp4_experts_and_bf16_attention():
    kw = dict(hardware="b200", tp=1, concurrency=16, prompt=1024, generate=256)
    by_id = predict.inference(hardware="b200", model="openai/gpt-oss-120b", batch=8, prompt=1024, generate=256)
    given = predict.inference(hardware="b200", model="openai/gpt-oss-120b", batch=8, prompt=1024, generate=256,
                              weights="fp4", attention_weights="bf16")
    assert float(by_id.tpot_s) == float(given.tpot_s) and str(by_id.attention_weights.values) == "bf16"
    own = predict.serving(model="openai/gpt-oss-120b", attention_weights="fp8", **kw)  # a given part wins
    assert str(own.weights.values) == "fp4" and str(own.attention_weights.values) == "fp8"


def test_models_of_different_formats_need_weights_named():
    with pytest.raises(InputError, match=r"weights=None is not allowed.*deepseek-ai/DeepSeek-R1: fp8_block"):
        predict.inference(hardware="h200_sxm", model=["deepseek-ai/DeepSeek-R1", "llama_3_1_70b"], tp=8)
    ds = predict.inference(hardware="h200_sxm", model=["deepseek-ai/DeepSeek-R1", "llama_3_1_70b"], tp=8,
                           weights="fp8")
    assert ds.sizes["model"] == 2


def test_an_unrecorded_id_is_served_in_the_format_its_name_says():
    """No config of nvidia/Qwen3-32B-NVFP4 is at hand: its -NVFP4 word names NVFP4 weights (every
    matmul), an -AWQ copy INT4, a name without a format word none (bf16)."""
    assert not cf.recorded("nvidia/Qwen3-32B-NVFP4")
    assert cf.checkpoint_formats("nvidia/Qwen3-32B-NVFP4") == ("fp4", None)
    assert cf.checkpoint_formats("someone/Llama-3.1-70B-Instruct-AWQ") == ("int4", None)
    assert cf.checkpoint_formats("meta-llama/Llama-3.1-70B") is None
    ds = predict.inference(hardware="b200", model="nvidia/Qwen3-32B-NVFP4", batch=4)
    assert str(ds.weights.values) == "fp4"


def test_list_models_names_each_checkpoint_s_formats(capsys):
    from workbench.cli import main
    assert main(["list", "models", "deepseek-ai/DeepSeek-R1"]) == 0
    out = capsys.readouterr().out
    spec = load_model("deepseek_r1")
    assert f"{spec.n_params / 1e9:.1f}B parameters" in out
    assert "* deepseek-ai/DeepSeek-R1" in out and "weights fp8_block" in out
    assert re.search(r"nvidia/DeepSeek-R1-NVFP4 +weights fp4 \(named by the id", out)
    # a dated release the entry lists, in its base's format (checkpoint_formats.recorded_base)
    assert re.search(r"deepseek-ai/DeepSeek-R1-0528 +weights fp8_block \(its base deepseek-ai/DeepSeek-R1's: ASSUMED\)",
                     out)


def test_the_command_line_shows_the_formats_it_served_a_point_in(capsys):
    """A point's categorical inputs as resolved come first in the table and the JSON, so a user
    sees the checkpoint's format that weights=None chose."""
    import json
    from workbench.cli import main
    args = ["predict", "inference", "--hardware", "h200_sxm", "--model", "deepseek-ai/DeepSeek-R1", "--tp", "8"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["hardware", "h200_sxm"] and ["weights", "fp8_block"] in [ln.split() for ln in lines]
    assert main(args + ["--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["weights"] == "fp8_block" and record["model"] == "deepseek_r1" and "tpot_s" in record


def test_compressed_tensors_under_a_multimodal_text_config(tmp_path):
    """llm-compressor's compressed-tensors, as Kimi-K2.5 and Kimi-K3 ship it: under the
    wrapper's `text_config`, INT4 groups of 32 (type int) and MXFP4 (type float), the
    attention projections, shared experts and dense MLPs in `ignore` (16 bits); a config
    whose groups disagree has no row."""
    def ct(kind, ignore):
        return {"text_config": {"quantization_config": {
            "quant_method": "compressed-tensors", "ignore": ignore,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": kind,
                                                                            "group_size": 32}}}}}}
    _write(tmp_path, "m--Int4", ct("int", ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"]))
    _write(tmp_path, "m--Mx", ct("float", ["re:.*lm_head.*"]))
    mixed = ct("int", [])
    mixed["text_config"]["quantization_config"]["config_groups"]["group_1"] = {"weights": {"num_bits": 8,
                                                                                          "type": "float"}}
    _write(tmp_path, "m--Mixed", mixed)
    got = {r["hf_id"]: (r["weights"], r["attention_weights"], r["rule"]) for r in cf.derive(tmp_path)}
    assert got == {"m/Int4": ("int4", "bf16", "compressed-tensors"), "m/Mx": ("fp4", "", "compressed-tensors")}


def test_kimi_k2_5_by_id_is_served_in_int4_and_fits_eight_h200():
    """Kimi-K2.5 ships INT4 routed experts (its 1T parameters are about 0.6 TB): by its id
    it fits 8 H200 at 66 GB of weights a GPU, where read as BF16 it did not fit (257 GB)."""
    ds = predict.serving(hardware="h200_sxm", model="moonshotai/Kimi-K2.5", tp=8, ep=8, concurrency=16,
                         framework="vllm")
    assert bool(ds.fits) and float(ds.weights_per_device_bytes) == pytest.approx(66.3e9, rel=0.02)
    assert str(ds.weights.values) == "int4" and str(ds.attention_weights.values) == "bf16"


def test_a_dated_revision_keeps_its_base_checkpoint_s_format():
    """DeepSeek-R1-0528, DeepSeek-V3-0324 and Kimi-K2-Instruct-0905 ship block FP8 like the
    listed checkpoints they revise (they were served in 16 bits: 168 GB a GPU on 8 H200, no
    fit); an id whose own words name a format keeps that reading; an unlisted base stays bf16."""
    assert cf.checkpoint_formats("deepseek-ai/DeepSeek-R1-0528") == ("fp8_block", None)
    assert cf.recorded_base("moonshotai/Kimi-K2-Instruct-0905") == "moonshotai/Kimi-K2-Instruct"
    assert cf.checkpoint_formats("nvidia/DeepSeek-R1-0528-FP4") == ("fp4", None)
    assert cf.checkpoint_formats("meta-llama/Llama-3.1-8B-Instruct") is None
    ds = predict.inference(hardware="h200_sxm", model="deepseek-ai/DeepSeek-R1-0528", tp=8, batch=1)
    assert bool(ds.fits) and str(ds.weights.values) == "fp8_block"
