"""The fitted kernel surfaces of a GPU under a serving framework, as the GPU backend hands
them to the primitives: workbench/specs/kernels/<gpu>-<framework>.json (written by
`workbench calibrate fit-kernels`, read once per process)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .._broadcast import values_of
from ..errors import InputError, brief, check_range
from ..primitives.kernel_fits import EffGrid, KernelFits
from ..specs.checkpoint_formats import checkpoint_formats, recorded
from ..specs.hardware import KERNELS_DIR, kernel_table_names  # the fitted tables' folder, defined once

FRAMEWORKS = ("trtllm", "vllm", "sglang")
NONE = "none"  # framework=NONE: the analytical efficiencies of the spec, no tables


def frameworks(spec) -> list[str]:
    """The frameworks with fitted tables for `spec` (through its kernel_tables)."""
    name = getattr(spec, "kernel_tables", "")
    if not name:
        return []
    have = kernel_table_names().get(name, [])
    return [fw for fw in FRAMEWORKS if fw in have]


@lru_cache(maxsize=64)
def _load(name: str, framework: str) -> KernelFits:
    doc = json.loads((KERNELS_DIR / f"{name}-{framework}.json").read_text())
    grids, scores = {}, {}
    for s in doc["surfaces"]:
        key = (s["class"], s["variant"])
        grids[key] = EffGrid.from_dict(s)
        scores[key] = dict(s["score"])
    return KernelFits(hardware=name, framework=framework, grids=grids, source=doc["source"], scores=scores)


def runs_here(spec) -> list[str]:
    """The frameworks that run on `spec` without kernel tables for it: those whose documented
    platforms include its vendor (specs/serving/frameworks.yaml `runs_on`) and that have no
    tables for it."""
    have = frameworks(spec)
    vendor = getattr(spec, "vendor", "")
    return [fw for fw in FRAMEWORKS if fw not in have and vendor in serving_constants()["runs_on"].get(fw, [])]


# predict.serving's engine settings (None: the framework's defaults); from adp_timeout_iters on,
# TensorRT-LLM's executor options (attention-DP balancing, batch waiting)
ENGINE_SETTINGS = ("token_budget", "memory_fraction", "max_running", "recv_interval", "adp_timeout_iters",
                   "adp_batching_iters", "batch_wait_timeout_iters", "batch_wait_max_tokens_ratio")
TRTLLM_ONLY = ENGINE_SETTINGS[4:]  # recv_interval: SGLang's alone (--scheduler-recv-interval)
FRAMEWORK_NAMES = {"trtllm": "TensorRT-LLM", "sglang": "SGLang"}
FRACTIONS = {"memory_fraction": "a fraction in (0, 1]", "batch_wait_max_tokens_ratio": "a fraction in [0, 1]"}


def check_engine_settings(engine: dict, specs, framework) -> None:
    """Refuse by name an engine setting out of its range (fractions; counts, TensorRT-LLM's
    iteration counts from 0: off), or one of TensorRT-LLM's options where another framework
    runs (on any of `specs` under `framework`)."""
    for arg, v in ((a, engine[a]) for a in ENGINE_SETTINGS if engine.get(a) is not None):
        if arg in FRACTIONS:
            check_range(arg, v, low=0.0, high=1.0, open_low=arg == "memory_fraction", allowed=FRACTIONS[arg])
        else:
            check_range(arg, v, low=float(not arg.endswith("_iters")), high=np.inf, integer=True,
                        allowed="an integer >= 0" if arg.endswith("_iters") else "a positive integer")
        only = "trtllm" if arg in TRTLLM_ONLY else "sglang" if arg == "recv_interval" else None
        if only and any(resolve(s, fw) != only for s in specs for fw in values_of(framework)):
            raise InputError(f"{arg}={brief(v)} is not allowed with framework={brief(framework)}; allowed: "
                             f"{FRAMEWORK_NAMES[only]}'s option, with framework={only!r}")


def resolve(spec, framework) -> str:
    """The framework a prediction on `spec` uses: the one named, or the spec's default
    (NONE where the spec has no tables). A framework with tables for the chip runs its
    fitted kernels; one without them that runs on the chip's vendor (runs_here) runs its
    engine (schedule, token budget, host constants, KV-cache rules) over the spec's
    analytical kernel efficiencies; any other is an error."""
    framework = None if framework is None else str(framework)
    if framework is None:
        default = getattr(spec, "default_framework", "")
        return default if default and default in frameworks(spec) else NONE
    if framework == NONE:
        return NONE
    usable = frameworks(spec) + runs_here(spec)
    if framework not in usable:
        raise InputError(f"framework={framework!r} has no kernel tables for {spec.name!r} and does not run on "
                         f"{getattr(spec, 'vendor', '?')} GPUs; allowed: {', '.join(usable + [NONE])}")
    return framework


def fits_for(spec, framework: str) -> KernelFits | None:
    """The surfaces of a resolved framework (None for NONE, and for a framework that runs on
    the chip without tables for it)."""
    if framework == NONE or framework not in frameworks(spec):
        return None
    return _load(spec.kernel_tables, framework)


SERVING_CONSTANTS = Path(__file__).resolve().parents[1] / "specs" / "serving" / "frameworks.yaml"


@lru_cache(maxsize=1)
def serving_constants() -> dict:
    """The fitted constants of each serving framework (specs/serving/frameworks.yaml)."""
    import yaml
    return yaml.safe_load(SERVING_CONSTANTS.read_text())


def served(hw, framework: str):
    """`hw` as the framework's serving engine runs its kernels (specs/serving/frameworks.yaml):
    decode iterations replayed from CUDA graphs (kernel_graph_saving_s; an eager prefill takes
    it off again: workloads/inference.eager) and, where fused_activation_quant says so, the
    GEMMs' inputs quantized by the kernel before."""
    import dataclasses
    consts = serving_constants()
    return dataclasses.replace(hw, graph_saving_s=consts["kernel_graph_saving_s"].get(framework, 0.0),
                               fused_input_quant=bool(consts["fused_activation_quant"].get(framework, False)))


def _tabled(specs, framework) -> list:
    """(spec, framework, KernelFits) for each of the GPU `specs` under each value of
    `framework` (resolved per chip) where the chip has that framework's tables."""
    resolved = {(spec.name, resolve(spec, v)): spec for spec in specs for v in values_of(framework)}
    return [(spec, fw, fits) for (_, fw), spec in resolved.items() if (fits := fits_for(spec, fw)) is not None]


def table_held_out_error(specs, framework, kernel_class: str, variants) -> str:
    """The held-out error of the fitted kernel surfaces a kernel prediction reads: for each of
    the GPU `specs` under each value of `framework` with tables (_tabled), each variant's
    median and 90th-percentile |error| on the measured shapes its fit held out by fold (the
    surface's score in specs/kernels/HARDWARE-FRAMEWORK.json); "" where none."""
    def whose(spec, fits):  # a chip reading another's tables (its family's, a hypothetical design's base)
        return "" if fits.hardware == spec.name else f" (on {fits.hardware}'s tables; {spec.name}'s own unmeasured)"
    notes = [f"{spec.name} {fw} {kernel_class} {variant}: median {sc['median_abs_err']:.1%}, "
             f"p90 {sc['p90_abs_err']:.1%} over {sc['rows']:,} measured shapes{whose(spec, fits)}"
             for spec, fw, fits in _tabled(specs, framework) for variant in values_of(variants)
             if (sc := fits.scores.get((kernel_class, variant)))]
    return "held-out |error| of the fitted kernel surfaces (specs/kernels): " + "; ".join(notes) if notes else ""


HELD_OUT_PARTS = (("tpot_held_out", "TPOT"), ("ttft_held_out", "TTFT"))  # frameworks.yaml sections


def held_out_error(specs, framework) -> str:
    """What the measured serving runs say of the serving predictions `framework` gives on
    the GPU `specs` (each value of it resolved per chip): per framework, TPOT's and TTFT's
    median |error| on a model and on a GPU held out of its constants' fit, over the runs
    they were fitted on (frameworks.yaml tpot_held_out and ttft_held_out, written by
    `workbench calibrate fit-serving`). Only where the chip has the framework's kernel
    tables, as every fitted run had: a chip the framework runs on without them (runs_here)
    takes the spec's analytical kernels, which those runs do not validate. "" where none."""
    consts, notes = serving_constants(), []
    for fw in sorted({fw for _, fw, _ in _tabled(specs, framework)}):
        parts = [f"{label} {e['leave_one_model_out']:.1%} with the run's model held out, {e['leave_one_gpu_out']:.1%} "
                 f"with its GPU held out ({e['runs']} runs)" for key, label in HELD_OUT_PARTS
                 if (e := consts.get(key, {}).get(fw))]
        notes.append(f"{fw}: " + ("; ".join(parts) if parts else "no measured serving runs"))
    return ("median |error| against the measured aggregated serving runs held out of the constants' fit "
            "(specs/serving/frameworks.yaml): " + " | ".join(notes)
            if notes else "")


def request_latency_s(framework: str, model) -> float:
    """A framework's host latency of one request before its first token (specs/serving/
    frameworks.yaml): its latency per layer over the layers without routed experts plus its
    latency per MoE layer over those (an eager prefill dispatches a MoE layer's routing,
    permutation and grouped GEMMs from the host: more work than a dense MLP's)."""
    consts = serving_constants()
    moe = float(model.n_moe_layers)
    return (consts["request_latency_s_per_layer"].get(framework, 0.0) * (model.n_layers - moe)
            + consts["request_latency_s_per_moe_layer"].get(framework, 0.0) * moe)


def iteration_overhead_s(framework: str, model) -> float:
    """A framework's time per serving iteration outside the kernel tables (specs/serving/
    frameworks.yaml): its host overhead per iteration plus its time per MoE layer (the small
    routing, permutation and combine kernels around the grouped expert GEMMs) over the
    model's MoE layers."""
    consts = serving_constants()
    return (consts["iteration_overhead_s"].get(framework, 0.0)
            + consts["iteration_overhead_s_per_moe_layer"].get(framework, 0.0) * float(model.n_moe_layers))


def framework_of(hw) -> str:
    """The serving framework whose engine a GPU's numbers run (NONE: no framework); its
    fitted tables are hw.kernels where the chip has them (tables_of)."""
    return hw.framework


def tables_of(hw) -> str:
    """The framework whose fitted kernel tables a GPU's numbers carry (NONE without)."""
    return hw.kernels.framework if hw.kernels is not None else NONE


def _attention_kind(model) -> str | None:
    """The attention kind the frameworks' rules name: "compressed" (DeepSeek-V4's CSA/HCA
    layers), "dsa" (an indexer's top-k attention), else None."""
    if model.n_csa_layers + model.n_hca_layers:
        return "compressed"
    return "dsa" if model.index_topk else None


def framework_kv(framework: str, model, hw, weights=()) -> str | None:
    """The KV-cache dtype a serving framework stores when the user leaves it unset ("auto"),
    where that is not the attention math's 16-bit format; None otherwise. Three documented
    rules (specs/serving/frameworks.yaml): a framework whose `kv_cache_auto` is "checkpoint"
    takes the format the loaded checkpoint's quantization config asks for (the spec's
    hf_kv_cache for the id it was loaded by), and where `weights` (the formats the matmuls
    are served in) hold NVFP4 that the loaded checkpoint (the id it was loaded by, else the
    spec's first) is not recorded to store itself (specs/checkpoint_formats.csv, read from its
    config; an id only named NVFP4 is such a copy), the cache of the NVFP4 copy it must
    have loaded instead (`kv_cache_nvfp4_copy`); `kv_cache_fp8_attention` names, per
    framework, the attention kinds whose cache it keeps in FP8 from a CUDA compute
    capability on ("compressed": DeepSeek-V4's CSA/HCA layers; "dsa": an indexer's top-k
    attention)."""
    consts = serving_constants()
    if consts["kv_cache_auto"].get(framework) == "checkpoint":
        kv = dict(model.hf_kv_cache).get(model.checkpoint)
        if kv:
            return kv
        loaded = model.checkpoint or (model.hf_ids[0] if model.hf_ids else "")
        copy = consts["kv_cache_nvfp4_copy"].get(framework)
        if copy and "fp4" in {str(w).split("_")[0] for w in weights if w} and \
                not (recorded(loaded) and checkpoint_formats(loaded)[0] == "fp4"):
            return copy
    kind = _attention_kind(model)
    least = consts["kv_cache_fp8_attention"].get(framework, {}).get(kind)
    cc = hw.compute_capability
    return "fp8" if least is not None and cc > 0 and cc >= least else None


def framework_layout(framework: str, model, hw, tp, attention_dp) -> tuple:
    """(attention TP, attention-DP replicas) a serving framework runs for the (tp,
    attention_dp) asked: the same, except where `dp_attention_forced` (specs/serving/
    frameworks.yaml) names the model's attention kind for the framework on a CUDA GPU, where
    every GPU of the instance is its own attention replica (tp 1, attention_dp tp x
    attention_dp)."""
    kind = _attention_kind(model)
    if kind in serving_constants()["dp_attention_forced"].get(framework, []) and hw.compute_capability > 0:
        devices = tp * attention_dp
        return 1.0 + 0.0 * devices, devices
    return tp, attention_dp

