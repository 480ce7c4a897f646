"""Bad and hostile input (issue 14, items 5, 6 and 8): every case is refused with one
InputError naming the argument, the value and what is allowed (the CLI: one line
`workbench: error: ...`, exit 2, no traceback), flagged as a point with fits=False and a
reason where it is a real configuration that cannot run, or accepted where it is right.

Cases are grouped by class: NAMES, NUMBERS, REFUSED_LAYOUTS / FLAGGED_LAYOUTS / ACCEPTED,
MODEL_FILES, SWEEP_YAML / SWEEP_OUT, CLI / CLI_FLAGGED, and the API tests at the end
(size guard, sweep.evaluate's checks)."""
from __future__ import annotations

import json
import os
import time
import tracemalloc

import numpy as np
import pytest

from workbench import _broadcast, predict, sweep
from workbench.cli import main
from workbench.errors import InputError
from workbench.specs import SpecError, load_hardware, load_model

LLAMA = dict(hardware="h100_sxm", model="llama_3_1_8b")
SERVE = dict(hardware="h100_sxm", model="llama_3_1_8b")
DISAGG = dict(prefill_hardware="h100_sxm", decode_hardware="h100_sxm", model="llama_3_1_8b")
GEMM = dict(hardware="h100_sxm", m=64, n=64, k=64)
TRAIN = dict(hardware="h100_sxm", model="llama_3_8b", devices=8, tp=8, seq_len=2048, global_batch=64)


def _cli_error(capsys, argv, match: str) -> str:
    """Exit 2, exactly one stderr line starting 'workbench: error:', no traceback."""
    rc = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, (rc, out, err)
    assert len(lines) == 1 and lines[0].startswith("workbench: error:") and "Traceback" not in err, err
    assert match in lines[0], lines[0]
    return lines[0]


def _cli_json(capsys, argv):
    rc = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err
    return json.loads(out)


# --------------------------------------------------------------------------- refused (API)
# (id, function, kwargs, text the message must hold)
NAMES = [
    ("hardware-empty-string", "inference", dict(LLAMA, hardware=""), "hardware='' is not known"),
    ("hardware-path-escape", "inference", dict(LLAMA, hardware="../../no/such/chip.yaml"), "is not a readable file"),
    ("hardware-none", "inference", dict(LLAMA, hardware=None), "hardware=None is not known"),
    ("hardware-number", "inference", dict(LLAMA, hardware=123), "hardware=123 is not known"),
    ("hardware-empty-list", "inference", dict(LLAMA, hardware=[]), "hardware=[] is not allowed"),
    ("hardware-nested", "inference", dict(LLAMA, hardware=[["h100_sxm"]]), "a flat list"),
    ("hardware-repeated", "inference", dict(LLAMA, hardware=["h100_sxm", "h100_sxm"]), "names 'h100_sxm' twice"),
    ("model-empty-list", "inference", dict(LLAMA, model=[]), "model=[] is not allowed"),
    ("model-none", "inference", dict(LLAMA, model=None), "model=None is not known"),
    ("model-missing-json", "inference", dict(LLAMA, model="nope/config.json"), "is not a readable file"),
    ("model-repeated", "inference", dict(LLAMA, model=["llama_3_1_8b", "llama_3_1_8b"]), "twice"),
    ("dtype-case", "gemm", dict(GEMM, dtype="FP8"), "dtype='FP8' is not known"),
    ("dtype-empty-list", "gemm", dict(GEMM, dtype=[]), "dtype=[] is not allowed"),
    ("op-unknown", "collective", dict(hardware="h100_sxm", devices=8, op="allreduce", size_bytes=1e6),
     "op='allreduce' is not known"),
    ("kernel-unknown", "attention", dict(hardware="h100_sxm", batch=1, seq_len=128, n_heads=8, head_dim=64,
                                         kernel="flash9"), "kernel='flash9' is not known"),
    ("zero-bool", "training", dict(TRAIN, zero=True), "zero=True is not known"),
    ("recompute-unknown", "training", dict(TRAIN, recompute="some"), "recompute='some' is not known"),
    ("batch-word", "inference", dict(LLAMA, batch="MAX"), "batch='MAX' is not allowed"),
]
NUMBERS = [
    ("tp-zero", "inference", dict(LLAMA, tp=0), "tp=0 is not allowed"),
    ("tp-fraction", "inference", dict(LLAMA, tp=1.5), "tp=1.5 is not allowed; allowed: a positive integer"),
    ("tp-nan", "inference", dict(LLAMA, tp=float("nan")), "tp=nan"),
    ("tp-true", "inference", dict(LLAMA, tp=True), "tp=True is not a number"),
    ("tp-numpy-bool", "inference", dict(LLAMA, tp=np.bool_(True)), "tp=True is not a number"),
    ("tp-string", "inference", dict(LLAMA, tp="2"), "tp='2' is not a number"),
    ("tp-arabic-indic", "inference", dict(LLAMA, tp="\u0662"), "is not a number"),
    ("tp-complex", "inference", dict(LLAMA, tp=2j), "is not a number"),
    ("tp-mixed-list", "inference", dict(LLAMA, tp=[1, "a"]), "is not a number"),
    ("tp-repeated", "inference", dict(LLAMA, tp=[8, 8]), "tp=[8, 8] repeats 8"),
    ("batch-empty-list", "inference", dict(LLAMA, batch=[]), "batch=[] is not allowed"),
    ("batch-nested", "inference", dict(LLAMA, batch=[[1, 2], [3, 4]]), "a flat list"),
    ("batch-ragged", "inference", dict(LLAMA, batch=[1, [2, 3]]), "batch="),
    ("prompt-inf", "inference", dict(LLAMA, prompt=float("inf")), "prompt=inf"),
    ("devices-negative", "inference", dict(LLAMA, devices=-8), "devices=-8"),
    ("pe-grid-zero", "inference", dict(LLAMA, hardware="cs3", pe_grid=0), "pe_grid=0"),
    ("imbalance-nan", "inference", dict(LLAMA, model="mixtral_8x7b", tp=8, imbalance=float("nan")), "imbalance=nan"),
    ("imbalance-below-one", "inference", dict(LLAMA, model="mixtral_8x7b", tp=8, imbalance=0.5), "imbalance=0.5"),
    ("size-bytes-negative", "collective", dict(hardware="h100_sxm", devices=8, op="all_reduce", size_bytes=-1),
     "size_bytes=-1"),
    ("m-string", "gemm", dict(GEMM, m="64"), "m='64' is not a number"),
    ("arrival-negative", "serving", dict(SERVE, arrival_rate=-1.0), "arrival_rate=-1"),
    ("arrival-zero", "serving", dict(SERVE, arrival_rate=[0.0, 1.0]), "arrival_rate=0"),
    ("arrival-nan", "serving", dict(SERVE, arrival_rate=float("nan")), "arrival_rate=nan"),
    ("arrival-string", "serving", dict(SERVE, arrival_rate="1"), "arrival_rate='1' is not a number"),
    ("arrival-repeated", "serving", dict(SERVE, arrival_rate=[1.0, 1.0]), "repeats 1.0"),
    ("ttft-slo-nan", "serving", dict(SERVE, ttft_slo=float("nan")), "ttft_slo=nan"),
    ("tpot-slo-inf", "serving", dict(SERVE, tpot_slo=float("inf")), "tpot_slo=inf"),
    ("quantile-string", "serving", dict(SERVE, quantile="0.9"), "quantile='0.9' is not a number"),
    ("quantile-one", "serving", dict(SERVE, quantile=1.0), "quantile=1 is not allowed; allowed: a number in (0, 1)"),
    ("acceptance-nan", "serving", dict(SERVE, acceptance=float("nan")), "acceptance=nan"),
    ("acceptance-string", "serving", dict(SERVE, acceptance="0.5"), "acceptance='0.5' is not a number"),
    ("draft-len-inf", "serving", dict(SERVE, draft_len=float("inf")), "draft_len=inf"),
    ("draft-len-bool", "serving", dict(SERVE, draft_len=True), "draft_len=True is not a number"),
    ("serving-prompt-nan", "serving", dict(SERVE, prompt=float("nan")), "prompt=nan"),
    ("disagg-ttft-nan", "disaggregated", dict(DISAGG, ttft_slo=float("nan")), "ttft_slo=nan"),
    ("disagg-prompt-string", "disaggregated", dict(DISAGG, prompt="abc"), "prompt='abc' is not a number"),
    ("disagg-quantile-inf", "disaggregated", dict(DISAGG, quantile=float("inf")), "quantile=inf"),
    ("disagg-total-zero", "disaggregated", dict(DISAGG, total_devices=0), "total_devices=0"),
    ("disagg-total-string", "disaggregated", dict(DISAGG, total_devices="64"), "total_devices='64' is not a number"),
    ("disagg-total-too-few", "disaggregated", dict(DISAGG, prefill_tp=8, decode_tp=8, total_devices=8),
     "total_devices=8 is not allowed; allowed: at least 16"),
    ("disagg-tp-nan", "disaggregated", dict(DISAGG, decode_tp=float("nan")), "decode_tp=nan"),
]
# Arguments a backend would ignore, contradictory sizes and lists where one value is taken.
REFUSED_LAYOUTS = [
    ("wafer-tp", "inference", dict(LLAMA, hardware="cs3", tp=8), "tp=8 is not allowed on 'cs3'"),
    ("wafer-training-zero", "training", dict(hardware="cs3", model="llama_3_8b", zero=1),
     "zero=1 is not allowed on 'cs3'"),
    ("wafer-training-zero-3", "training", dict(hardware="cs3", model="llama_3_8b", zero=3), "no ZeRO shards"),
    ("wafer-training-precision", "training", dict(hardware="cs3", model="llama_3_8b", precision="fp8"),
     "precision='fp8' is not allowed on 'cs3'; allowed: precision='bf16' (the wafer computes bf16"),
    ("wafer-training-mixed-zero", "training", dict(hardware=["h100_sxm", "cs3"], model="llama_3_8b", zero=1),
     "zero=1 is not allowed on 'cs3'"),
    ("wafer-training-virtual-stages", "training", dict(hardware="cs3", model="llama_3_8b", virtual_stages=2),
     "virtual_stages=2 is not allowed on 'cs3'"),
    ("wafer-training-dp", "training", dict(hardware="cs3", model="llama_3_8b", dp=4), "dp=4 is not allowed"),
    ("wafer-attention", "attention", dict(hardware="wse3", batch=1, seq_len=128, n_heads=8, head_dim=64),
     "predict.attention on 'wse3' is not modelled"),
    ("wafer-collective", "collective", dict(hardware="cs3", devices=2, op="all_reduce", size_bytes=1e6),
     "predict.collective on 'cs3' is not modelled"),
    ("gpu-serving-devices", "serving", dict(SERVE, tp=8, devices=4), "devices=4 is not allowed on 'h100_sxm'"),
    ("disagg-prefill-devices", "disaggregated", dict(DISAGG, prefill_tp=8, prefill_devices=3),
     "prefill_devices=3 is not allowed"),
    ("serving-tp-list", "serving", dict(SERVE, tp=[1, 2]), "tp=[1, 2] is not allowed here"),
    ("serving-hardware-list", "serving", dict(SERVE, hardware=["h100_sxm", "h200_sxm"]), "is not allowed here"),
    ("serving-weights-list", "serving", dict(SERVE, weights=["bf16", "fp8"]), "weights=['bf16', 'fp8'] is not"),
    ("disagg-prompt-list", "disaggregated", dict(DISAGG, prompt=[128, 256]), "prompt=[128, 256] is not allowed here"),
]


@pytest.mark.parametrize("fn,kwargs,match", [c[1:] for c in NAMES + NUMBERS + REFUSED_LAYOUTS],
                         ids=[c[0] for c in NAMES + NUMBERS + REFUSED_LAYOUTS])
def test_refused_with_one_named_input_error(fn, kwargs, match):
    with pytest.raises(InputError) as err:
        getattr(predict, fn)(**kwargs)
    message = str(err.value)
    assert match in message and "\n" not in message and "allowed" in message, message


# --------------------------------------------------------------------------- flagged (item 5)
# (id, function, kwargs, text the reason must hold, whether the costs stay)
FLAGGED_LAYOUTS = [
    ("prompt-beyond-context-gpu", "inference", dict(hardware="h100_sxm", model="llama_3_8b", prompt=8192,
                                                    generate=256),
     "prompt+generate=8192+256 exceeds max_seq_len=8192 of llama_3_8b", True),
    ("prompt-beyond-context-wafer", "inference", dict(hardware="cs3", model="llama_3_8b", prompt=8000, generate=256,
                                                      weights="fp16"),
     "prompt+generate=8000+256 exceeds max_seq_len=8192", True),
    ("prompt-beyond-context-streaming", "inference", dict(hardware="cs3", model="llama_3_8b", prompt=8192,
                                                          generate=1, placement="streaming", weights="fp16"),
     "exceeds max_seq_len=8192", True),
    ("cs3-a-million-systems", "inference", dict(hardware="cs3", model="llama_3_1_8b", devices=1000000),
     "devices=1000000 systems exceed n_layers=32 of llama_3_1_8b", False),
    ("wafer-training-more-systems-than-sequences", "training", dict(hardware="cs3", model="llama_3_8b", devices=64,
                                                                    global_batch=32, seq_len=2048),
     "devices=64 systems exceed global_batch=32", False),
    ("training-ep-not-dividing-experts", "training", dict(TRAIN, model="mixtral_8x7b", ep=3),
     "ep=3 does not divide n_experts=8 of mixtral_8x7b", False),
    ("training-ep-beyond-the-ranks", "training", dict(TRAIN, model="qwen3_235b_a22b", tp=4, ep=16),
     "ep*expert_tp=16*4 does not divide tp*dp*cp=8", False),
    ("training-tp-beyond-the-kv-heads", "training", dict(TRAIN, model="qwen3_235b_a22b", ep=8),
     "tp=8 does not divide n_kv_heads=4 of qwen3_235b_a22b", False),
    ("training-devices-not-the-layout", "training", dict(TRAIN, dp=4), "devices=8 != tp*pp*dp*cp=32", False),
    ("inference-tp-not-dividing-heads", "inference", dict(LLAMA, tp=3), "tp=3 does not divide n_heads=32", False),
    ("gemm-fp4-on-h100", "gemm", dict(GEMM, dtype="fp4"), "no fp4 math units on h100_sxm", False),
    ("attention-fp4-on-h100", "attention", dict(hardware="h100_sxm", batch=1, seq_len=1024, n_heads=8, head_dim=128,
                                                dtype="fp4"), "no fp4 math units on h100_sxm", False),
    ("gemm-fp8-on-a-wafer", "gemm", dict(GEMM, hardware="cs3", dtype="fp8"), "no fp8 math units on cs3", False),
]


@pytest.mark.parametrize("fn,kwargs,reason,kept", [c[1:] for c in FLAGGED_LAYOUTS],
                         ids=[c[0] for c in FLAGGED_LAYOUTS])
def test_a_configuration_that_cannot_run_is_a_flagged_point(fn, kwargs, reason, kept):
    ds = getattr(predict, fn)(**kwargs)
    assert not bool(ds.fits) and reason in str(ds.reason.values), str(ds.reason.values)
    time_var = {"inference": "tpot_s", "training": "step_time_s"}.get(fn, "time_s")
    assert bool(np.isfinite(ds[time_var]).all()) == kept
    if fn == "gemm":
        assert str(ds.bound.values) == "unsupported"


def test_serving_a_prompt_beyond_the_context_fits_nowhere():
    ds = predict.serving(hardware="h100_sxm", model="llama_3_8b", prompt=8192, generate=256, arrival_rate=[0.1, 1.0])
    assert not ds.fits.any() and float(ds.max_batch) == 0.0 and float(ds.goodput_tokens_per_s_per_device) == 0.0


# (id, function, kwargs): right, so accepted (fits, no reason); each next to a refused or flagged neighbour
ACCEPTED = [
    ("prompt-at-the-context", "inference", dict(hardware="h100_sxm", model="llama_3_8b", prompt=8000, generate=192)),
    ("wafer-systems-a-layer-each", "inference", dict(hardware="cs3", model="llama_3_1_8b", devices=32, prompt=512,
                                                     generate=16, weights="fp16")),
    ("training-beyond-the-released-context", "training", dict(hardware="h100_sxm", model="mpt_7b", dp=8,
                                                              seq_len=8192, global_batch=128, micro_batch=8,
                                                              recompute="full", zero=3, attention="flash1")),
    ("training-ep-dividing-the-ranks", "training", dict(TRAIN, model="mixtral_8x7b", devices=64, ep=8)),
    ("wafer-training-defaults", "training", dict(hardware="cs3", model="llama_3_8b", seq_len=2048)),
    ("gemm-fp4-with-a-hypothetical-peak", "gemm", dict(GEMM, dtype="fp4",
                                                       hardware_overrides={"peak_flops_per_s_fp4": 4e15})),
]


@pytest.mark.parametrize("fn,kwargs", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_a_right_configuration_is_accepted(fn, kwargs):
    ds = getattr(predict, fn)(**kwargs)
    if fn == "training" and "mixtral" in str(kwargs["model"]):  # memory may not fit; the layout must
        assert "ep=" not in str(ds.reason.values)
        return
    assert bool(ds.fits.all()) and set(np.unique(ds.reason.values.astype(str))) == {""}, str(ds.reason.values)


def test_zero_default_is_zero_1_on_gpus_with_identical_numbers():
    kw = dict(hardware="h100_sxm", model="llama_3_8b", devices=64, tp=8, seq_len=4096, global_batch=256)
    default, one = predict.training(**kw), predict.training(**kw, zero=1)
    for name in default.data_vars:
        np.testing.assert_array_equal(default[name].values, one[name].values, err_msg=name)


def test_explorer_keeps_precision_and_zero_off_the_wafers():
    from workbench import explore
    ds = explore.compute_training(dict(hardware=["h100_sxm", "cs3"], precision="fp8", zero=3, seq_len=4096))
    assert ds.attrs["problems"] == [] and "cs3: precision='fp8' does not apply to wafers" in ds.attrs["notes"][0]


# --------------------------------------------------------------------------- model files (items 5, 6, 8)
TINY = "name: tiny\nn_layers: 2\nd_model: 64\nn_heads: 2\nn_kv_heads: 2\nhead_dim: 32\nd_ff: 128\nvocab_size: 100\n"
MODEL_FILES = [
    ("gated-mlp-string", "m.yaml", TINY + 'gated_mlp: "false"\n', "gated_mlp='false' is not allowed"),
    ("tied-embeddings-word", "m.yaml", TINY + "tied_embeddings: yes please\n", "tied_embeddings='yes please'"),
    ("n-layers-string", "m.yaml", TINY.replace("n_layers: 2", 'n_layers: "2"'), "n_layers='2' is not allowed"),
    ("n-layers-fraction", "m.yaml", TINY.replace("n_layers: 2", "n_layers: 2.5"), "n_layers=2.5"),
    ("n-heads-zero", "m.yaml", TINY.replace("n_heads: 2", "n_heads: 0"), "n_heads=0"),
    ("missing-field", "m.yaml", TINY.replace("d_ff: 128\n", ""), "d_ff=None is not allowed"),
    ("unknown-key-huge-value", "m.yaml", TINY + "colour: " + "x" * 2_000_000 + "\n", "colour='xxx"),
    ("unknown-huge-key", "m.yaml", TINY + "? " + "k" * 100_000 + "\n: 1\n", "kkk"),
    ("not-utf8", "m.yaml", b"name: tiny\n\xff\xfe\x00 n_layers: 2\n", "is not UTF-8 text"),
    ("not-yaml", "m.yaml", "name: [tiny\n", "is not valid YAML"),
    ("a-list", "m.yaml", "- 1\n- 2\n", "holds a list, not a mapping"),
    ("empty", "m.yaml", "", "holds a NoneType, not a mapping"),
    ("hf-tie-string", "config.json", json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                                 "intermediate_size": 128, "vocab_size": 100,
                                                 "tie_word_embeddings": "false"}), "tie_word_embeddings='false'"),
    ("hf-layers-word", "config.json", json.dumps({"hidden_size": 64, "num_hidden_layers": "many",
                                                  "num_attention_heads": 2, "intermediate_size": 128,
                                                  "vocab_size": 100}), "wrong type"),
    ("hardware-bool-string", "hw.yaml", None, "in_network_reduction='true' is not allowed"),
    ("hardware-memory-scalar", "hw.yaml", None, "memory=5 is not allowed"),
    ("hardware-not-utf8", "hw.yaml", b"\xff\xfe", "is not UTF-8 text"),
]


def _hardware_yaml(case: str) -> str:
    import yaml
    data = yaml.safe_load((load_hardware.__globals__["HARDWARE_DIR"] / "h100_sxm.yaml").read_text())
    data["name"] = "my_chip"
    if case == "hardware-bool-string":
        data["links"][0]["in_network_reduction"] = "true"
    else:
        data["memory"] = 5
    return yaml.safe_dump(data)


def _write(tmp_path, case, name, text):
    path = tmp_path / name
    text = _hardware_yaml(case) if text is None else text
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("case,name,text,match", MODEL_FILES, ids=[c[0] for c in MODEL_FILES])
def test_a_bad_spec_file_is_one_short_error(tmp_path, case, name, text, match):
    path = _write(tmp_path, case, name, text)
    arg = "hardware" if name == "hw.yaml" else "model"
    kw = dict(LLAMA, **{arg: str(path)})
    with pytest.raises(InputError) as err:
        predict.inference(**kw)
    message = str(err.value)
    assert match in message and len(message) < 2000, message[:300]


def test_every_bool_field_of_every_spec_dataclass_refuses_a_string():
    """Each bool field of every spec class in the catalog (ModelSpec, HardwareSpec and its
    links and tiers, WaferSpec, SystemSpec) is checked in __post_init__."""
    import dataclasses
    from workbench.specs import list_hardware, list_models
    objects = [load_model(m) for m in list_models()]
    for h in list_hardware():
        spec = load_hardware(h)
        objects += [spec, *getattr(spec, "links", ()), *getattr(spec, "memory", ())]
    checked = set()
    for obj in objects:
        for f in dataclasses.fields(obj):
            if f.type in ("bool", bool):
                with pytest.raises(SpecError, match=f"{f.name}='false'"):
                    dataclasses.replace(obj, **{f.name: "false"})
                checked.add((type(obj).__name__, f.name))
    assert {("ModelSpec", "gated_mlp"), ("ModelSpec", "tied_embeddings"), ("Link", "in_network_reduction")} <= checked


# --------------------------------------------------------------------------- sweep YAML (items 6, 8)
OK_SWEEP = "function: gemm\naxes: {m: [1, 2]}\nfixed: {hardware: h100_sxm, n: 64, k: 64}\n"
SWEEP_YAML = [
    ("unknown-axis", "function: gemm\naxes: {m: [1, 2], bogus: [1]}\nfixed: {hardware: h100_sxm, n: 8, k: 8}\n",
     "axis 'bogus' is not an argument of gemm"),
    ("axis-also-fixed", "function: gemm\naxes: {m: [1, 2]}\nfixed: {hardware: h100_sxm, n: 8, k: 8, m: 4}\n",
     "m is both an axis and fixed"),
    ("budget-word", OK_SWEEP + "memory_budget_bytes: lots\n", "memory_budget_bytes='lots' is not a number"),
    ("budget-negative", OK_SWEEP + "memory_budget_bytes: -1\n", "memory_budget_bytes=-1 is not allowed"),
    ("fixed-a-list", "function: gemm\naxes: {m: [1, 2]}\nfixed: [hardware, h100_sxm]\n", "fixed=['hardware'"),
    ("axes-a-list", "function: gemm\naxes: [m, 1]\n", "axes=['m', 1] is not allowed"),
    ("axes-missing", "function: gemm\nfixed: {hardware: h100_sxm}\n", "axes={} is not allowed"),
    ("axis-nested", "function: gemm\naxes: {m: [[1, 2]]}\nfixed: {hardware: h100_sxm, n: 8, k: 8}\n",
     "axis m=[[1, 2]] is not allowed"),
    ("axis-empty", "function: gemm\naxes: {m: []}\nfixed: {hardware: h100_sxm, n: 8, k: 8}\n", "axis m=[]"),
    ("axis-repeated", "function: gemm\naxes: {m: [8, 8]}\nfixed: {hardware: h100_sxm, n: 8, k: 8}\n",
     "m=[8, 8] repeats 8"),
    ("unknown-key", OK_SWEEP + "colour: red\n", "colour='red' is not a sweep key"),
    ("unknown-function", "function: os.system\naxes: {m: [1]}\n", "function='os.system' is not known"),
    ("not-yaml", "function: gemm\naxes: {m: [1, 2\n", "is not valid YAML"),
    ("not-utf8", b"function: gemm\n\xff\xfe\n", "is not UTF-8 text"),
    ("a-list", "- gemm\n", "holds a list, not a mapping"),
    ("variables-unknown", OK_SWEEP + "variables: [nope]\n", "variables=['nope'] are not outputs"),
    ("variables-a-string", OK_SWEEP + "variables: time_s\n", "variables='time_s' is not allowed"),
    ("fixed-bad-value", "function: gemm\naxes: {m: [1, 2]}\nfixed: {hardware: h100_sxm, n: 8, k: '8'}\n",
     "k='8' is not a number"),
]


@pytest.mark.parametrize("text,match", [c[1:] for c in SWEEP_YAML], ids=[c[0] for c in SWEEP_YAML])
def test_malformed_sweep_yaml_is_one_line(tmp_path, capsys, text, match):
    spec = tmp_path / "s.yaml"
    spec.write_bytes(text if isinstance(text, bytes) else text.encode())
    _cli_error(capsys, ["sweep", str(spec), "--out", str(tmp_path / "out.nc")], match)
    assert sorted(os.listdir(tmp_path)) == ["s.yaml"]  # nothing written, no parts left


SWEEP_OUT = ["out-a-directory", "out-exists", "out-is-the-spec", "out-is-the-spec-forced", "out-folder-missing"]


@pytest.mark.parametrize("case", SWEEP_OUT)
def test_sweep_out_never_replaces_what_it_must_not(tmp_path, capsys, case):
    spec = tmp_path / "s.yaml"
    spec.write_text(OK_SWEEP)
    other = tmp_path / "mine.nc"
    other.write_text("not the workbench's")
    out, extra, match = {
        "out-a-directory": (tmp_path, [], "is a directory"),
        "out-exists": (other, [], "exists; allowed: a new path, or --force"),
        "out-is-the-spec": (spec, [], "is the sweep spec itself"),
        "out-is-the-spec-forced": (spec, ["--force"], "is the sweep spec itself"),
        "out-folder-missing": (tmp_path / "nope" / "x.nc", [], "cannot be written"),
    }[case]
    _cli_error(capsys, ["sweep", str(spec), "--out", str(out)] + extra, match)
    assert spec.read_text() == OK_SWEEP and other.read_text() == "not the workbench's"
    assert sorted(os.listdir(tmp_path)) == ["mine.nc", "s.yaml"]


def test_sweep_force_replaces_an_existing_output(tmp_path, capsys):
    spec, out = tmp_path / "s.yaml", tmp_path / "out.nc"
    spec.write_text(OK_SWEEP)
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    _cli_error(capsys, ["sweep", str(spec), "--out", str(out)], "exists")
    assert main(["sweep", str(spec), "--out", str(out), "--force"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["out.nc", "s.yaml"]


# --------------------------------------------------------------------------- the command line (items 6, 8)
INF = ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_1_8b"]
SRV = ["predict", "serving", "--hardware", "h100_sxm", "--model", "llama_3_1_8b"]
DIS = ["predict", "disaggregated", "--prefill-hardware", "h100_sxm", "--decode-hardware", "h100_sxm", "--model",
       "llama_3_1_8b"]
CLI = [
    ("empty-hardware", ["predict", "inference", "--hardware", "", "--model", "llama_3_1_8b"], "hardware='' is not"),
    ("comma-only-hardware", ["predict", "inference", "--hardware", ",", "--model", "llama_3_1_8b"],
     "hardware='' is not known"),
    ("arabic-indic-tp", INF + ["--tp", "\u0662"], "is not a number"),
    ("word-tp", INF + ["--tp", "True"], "tp='True' is not a number"),
    ("repeated-batch", INF + ["--batch", "1,1"], "batch=[1, 1] repeats 1"),
    ("model-and-model-file", INF + ["--model-file", "x.yaml"], "are both given"),
    ("set-not-a-knob", INF + ["--set", "bogus=1"], "'bogus' is not a knob"),
    ("set-no-equals", INF + ["--set", "bogus"], "set='bogus' is not allowed"),
    ("serving-comma-tp", SRV + ["--tp", "1,2"], "tp=[1, 2] is not allowed here"),
    ("serving-comma-hardware", ["predict", "serving", "--hardware", "h100_sxm,h200_sxm", "--model", "llama_3_1_8b"],
     "hardware=['h100_sxm', 'h200_sxm'] is not allowed here"),
    ("serving-comma-quantile", SRV + ["--quantile", "0.5,0.9"], "quantile=[0.5, 0.9] is not allowed here"),
    ("serving-nan-slo", SRV + ["--ttft-slo", "nan"], "ttft_slo=nan"),
    ("serving-negative-arrival", SRV + ["--arrival-rate", "-1"], "arrival_rate=-1"),
    ("disagg-total-zero", DIS + ["--total-devices", "0"], "total_devices=0 is not allowed"),
    ("disagg-comma-prompt", DIS + ["--prompt", "1,2"], "prompt=[1, 2] is not allowed here"),
    ("attention-on-a-wafer", ["predict", "attention", "--hardware", "cs3", "--batch", "1", "--seq-len", "8",
                              "--n-heads", "1", "--head-dim", "8"], "predict.attention on 'cs3' is not modelled"),
    ("collective-on-a-wafer", ["predict", "collective", "--hardware", "cs3", "--devices", "2", "--op", "all_reduce",
                               "--size-bytes", "1e6"], "predict.collective on 'cs3' is not modelled"),
    ("wafer-training-zero", ["predict", "training", "--hardware", "cs3", "--model", "llama_3_8b", "--zero", "1"],
     "zero=1 is not allowed on 'cs3'"),
    ("wafer-training-precision", ["predict", "training", "--hardware", "cs3", "--model", "llama_3_8b",
                                  "--precision", "fp8"], "precision='fp8' is not allowed on 'cs3'"),
    ("zero-a-word", ["predict", "training", "--hardware", "h100_sxm", "--model", "llama_3_8b", "--zero", "max"],
     "zero='max' is not known"),
    ("a-billion-points", INF + ["--batch", ",".join(map(str, range(1, 1001))),
                                "--prompt", ",".join(map(str, range(1, 1001))),
                                "--generate", ",".join(map(str, range(1, 1001)))], "workbench sweep"),
]


@pytest.mark.parametrize("argv,match", [c[1:] for c in CLI], ids=[c[0] for c in CLI])
def test_cli_bad_input_is_one_line_exit_2(capsys, argv, match):
    _cli_error(capsys, argv, match)


def test_cli_model_file_not_utf8(tmp_path, capsys):
    bad = tmp_path / "m.yaml"
    bad.write_bytes(b"n_layers: 2\n\xff\xfe bad\n")
    _cli_error(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model-file", str(bad)],
               f"model_file='{bad}' is not UTF-8 text")


def test_cli_model_file_with_a_huge_unknown_key_is_a_short_line(tmp_path, capsys):
    big = tmp_path / "m.yaml"
    big.write_text(TINY + "colour: " + "x" * 2_000_000 + "\n")
    line = _cli_error(capsys, ["predict", "inference", "--hardware", "h100_sxm", "--model-file", str(big)],
                      "colour='xxx")
    assert len(line) < 1000 and "xxx... is not allowed" in line


CLI_FLAGGED = [
    ("cs3-a-million-systems", ["predict", "inference", "--hardware", "cs3", "--model", "llama_3_1_8b", "--devices",
                               "1000000"], "devices=1000000 systems exceed n_layers=32"),
    ("gemm-fp4-on-h100", ["predict", "gemm", "--hardware", "h100_sxm", "--m", "64", "--n", "64", "--k", "64",
                          "--dtype", "fp4"], "no fp4 math units on h100_sxm"),
    ("prompt-beyond-context", ["predict", "inference", "--hardware", "h100_sxm", "--model", "llama_3_8b", "--prompt",
                               "16384"], "exceeds max_seq_len=8192"),
]


@pytest.mark.parametrize("argv,reason", [c[1:] for c in CLI_FLAGGED], ids=[c[0] for c in CLI_FLAGGED])
def test_cli_flagged_point_prints_fits_false_and_the_reason(capsys, argv, reason):
    record = _cli_json(capsys, argv)
    assert record["fits"] is False and reason in record["reason"]


# --------------------------------------------------------------------------- size guard (item 7)
def test_a_billion_point_dense_call_is_refused_before_allocating():
    axes = {k: list(range(1, 1001)) for k in ("batch", "prompt", "generate")}
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(InputError, match=r"1,000,000,000 points .* `workbench sweep` or sweep.evaluate"):
            predict.inference(**LLAMA, **axes)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 10 and peak < 100e6, peak


def test_the_guard_counts_categorical_combinations_too(monkeypatch):
    monkeypatch.setattr(_broadcast, "MAX_DENSE_POINTS", 10)
    with pytest.raises(InputError, match="a grid of 12 points"):
        predict.gemm(hardware=["h100_sxm", "h200_sxm", "b200"], m=[1, 2], n=[8, 16], k=8)
    assert predict.gemm(hardware=["h100_sxm", "b200"], m=[1, 2], n=[8, 16], k=8).time_s.size == 8


def test_a_sweep_over_the_dense_limit_runs_in_blocks(monkeypatch):
    g = dict(batch=[1, 2, 4, 8, 16], prompt=[128, 512, 2048], generate=[16, 64])
    dense = predict.inference(**LLAMA, **g)
    monkeypatch.setattr(_broadcast, "MAX_DENSE_POINTS", 8)
    with pytest.raises(InputError, match="sweep.evaluate"):
        predict.inference(**LLAMA, **g)
    ds = sweep.evaluate(predict.inference, sweep.grid(**g), fixed=LLAMA)  # 30 points in blocks of <= 8
    assert ds.tpot_s.shape == (5, 3, 2)
    # equal to rounding: a block with one value on an axis takes the scalar path of the efficiency
    # surfaces (that axis contracted first), the dense call the array path
    np.testing.assert_allclose(ds.tpot_s.transpose(*dense.tpot_s.dims).values, dense.tpot_s.values, rtol=1e-12)


def test_sweep_api_refuses_what_the_cli_refuses():
    with pytest.raises(InputError, match="fixed="):
        sweep.evaluate(predict.gemm, sweep.grid(m=[1, 2]), fixed=[("hardware", "h100_sxm")])
    with pytest.raises(InputError, match="is both an axis and fixed"):
        sweep.evaluate(predict.gemm, sweep.grid(m=[1, 2]), fixed=dict(hardware="h100_sxm", n=8, k=8, m=1))
    with pytest.raises(InputError, match="axis 'bogus'"):
        sweep.evaluate(predict.gemm, sweep.grid(bogus=[1]), fixed=dict(hardware="h100_sxm", n=8, k=8, m=1))
    with pytest.raises(InputError, match="repeats"):
        sweep.grid(tp=[8, 8])


def test_errors_cross_processes_and_stay_short():
    """A dask worker process raising a SpecError hands it back by pickling; a huge value
    never makes a huge message."""
    import pickle
    err = pickle.loads(pickle.dumps(SpecError("tiny", "colour", "x" * 10_000_000, "a field")))
    assert isinstance(err, SpecError) and len(str(err)) < 400 and str(err).endswith("expected a field")
    assert len(str(InputError("y" * 10_000_000))) <= 2000
