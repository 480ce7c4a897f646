"""The public interface: predictions for scalars, lists and DataArrays, as xr.Dataset.

    from workbench import predict
    predict.inference(hardware="h100_sxm", devices=8, model="llama_3_1_70b", tp=8,
                      batch=64, prompt=2048, generate=256, weights="fp8", kv="fp8")

Every argument may be a scalar, a list or a DataArray; lists become sweep dimensions
named after the argument. `hardware` is a catalog name, a spec object or the path of a
YAML file; `hardware_overrides` sets the hardware's knobs (`workbench list knobs HW`) and
`model_overrides` the model's (specs.MODEL_KNOBS), a list becoming a dimension named
after the knob. Bad input raises InputError naming the argument, the value and what is
allowed; a layout that cannot run or a configuration that does not fit is a point with
fits=False and a reason. This module checks and dispatches: the backend of each
hardware kind (backends/) evaluates.
"""
from __future__ import annotations

import numpy as np

from ._broadcast import as_axis, evaluate, values_of
from .backends import backend_for, check_knobs, kernel_tables
from .errors import InputError, brief, check_choice, check_positive, check_range, check_scalar
from .primitives.attention import ATTENTION_KERNELS, surface_name
from .primitives.collectives import COLLECTIVES
from .primitives.mesh import MAPPINGS
from .specs import MODEL_KNOBS, load_hardware, load_model, with_model_knobs
from .specs.checkpoint_formats import resolve as resolve_checkpoint
from .units import DENSE_DTYPES, DTYPE_BYTES, DTYPES

PLACEMENTS = ("regions", "streaming")


def _hardware_axis(hardware, arg: str = "hardware"):
    """(axis of labels, label -> spec): names, spec objects and YAML paths all resolve to
    specs once; the spec's name labels its results."""
    items = values_of(hardware)
    if not items:
        raise InputError(f"{arg}=[] is not allowed; allowed: one or more hardware names, specs or YAML paths")
    specs = _specs(arg, hardware, items, lambda h: load_hardware(h, arg=arg))
    labels = list(specs)
    many = isinstance(hardware, (list, tuple, np.ndarray)) or getattr(hardware, "ndim", 0) > 0
    return (as_axis(arg, labels) if many else labels[0]), specs


def _specs(arg: str, given, items: list, load) -> dict:
    """name -> spec of each item; a list must be flat and name each spec once (a repeat
    would be two coordinates with one label)."""
    if isinstance(given, (list, tuple)) and any(isinstance(v, (list, tuple, np.ndarray)) for v in given):
        raise InputError(f"{arg}={brief(given)} is not allowed; allowed: a value or a flat list of values")
    specs = {}
    for item in items:
        spec = load(item)
        if spec.name in specs:
            raise InputError(f"{arg}={brief(given)} names {spec.name!r} twice; allowed: distinct "
                             f"{'specs' if specs[spec.name] != spec else 'values'} (each is one coordinate)")
        specs[spec.name] = spec
    return specs


def _knob_axes(overrides, specs: dict, *, scalar_only: bool = False) -> dict:
    """Hardware knob overrides as numeric axes (a list is a dimension named after the knob)."""
    overrides = dict(overrides or {})
    for spec in specs.values():
        check_knobs(spec, overrides)
    if scalar_only:
        for k, v in overrides.items():
            if np.ndim(getattr(v, "values", v)) > 0:
                raise InputError(f"hardware_overrides {k}={v!r} is not allowed here; allowed: one number "
                                 "(call once per value to sweep it)")
    return {k: as_axis(k, v) for k, v in overrides.items()}


def _model_axes(model, model_overrides) -> tuple[dict, dict]:
    """(categorical axes, label -> spec): the model axis, labelled by each spec's name
    (a catalog name, a YAML or config.json path, a dict or a ModelSpec), and the model
    knobs as axes of their own; names and files are checked now."""
    items = values_of(model)
    if not items:
        raise InputError("model=[] is not allowed; allowed: one or more model names, dicts of fields or files")
    specs = _specs("model", model, items, load_model)
    labels = list(specs)
    many = isinstance(model, (list, tuple, np.ndarray)) or getattr(model, "ndim", 0) > 0
    axes = {"model": as_axis("model", labels) if many else labels[0]}
    for k, v in dict(model_overrides or {}).items():
        if k not in MODEL_KNOBS:
            raise InputError(f"model_overrides key {k!r} is not a model knob; allowed: {', '.join(MODEL_KNOBS)}")
        axes[k] = as_axis(k, v)
    return axes, specs


def checkpoint_weights(model, model_overrides, weights, attention_weights) -> tuple:
    """(weights, attention_weights): as given, or with weights=None those the models'
    checkpoints store (specs/checkpoint_formats.resolve)."""
    if weights is not None:
        return weights, attention_weights
    return resolve_checkpoint(_model_axes(model, model_overrides)[1].values(), attention_weights)


def _resolve_model(models: dict, model, point: dict):
    spec = models[model]
    knobs = {k: point.pop(k) for k in list(point) if k in MODEL_KNOBS}
    return with_model_knobs(spec, knobs) if knobs else spec


def _split(point: dict, knob_names) -> tuple[dict, dict]:
    """(knob values, the rest) of a point's keyword arguments."""
    knobs = {k: point.pop(k) for k in knob_names if k in point}
    return knobs, point


def _dispatch(method: str, specs: dict, knob_axes: dict, models: dict | None = None, extra: dict | None = None):
    """The function `evaluate` runs per combination of categorical values: resolve the
    point's model (with its knobs), hardware knobs and serving framework (its kernel
    tables), then the hardware's backend evaluates `method` on the numbers (`extra`:
    arguments that are rules, not axes, e.g. devices="min")."""
    def fn(hardware, **point):
        point.update(extra or {})
        args = (_resolve_model(models, point.pop("model"), point),) if models is not None else ()
        knobs, point = _split(point, knob_axes)
        spec = specs[hardware]
        be = backend_for(spec)
        fw = point.pop("framework", "none")
        fw = kernel_tables.resolve(spec, fw) if be.kind == "gpu" else "none"
        result = getattr(be, method)(be.numbers(spec, knobs, fw), *args, **point)
        return _with_costs(result, be.knobs(spec), knobs)
    return fn


def _with_costs(result: dict, table: dict, knobs: dict) -> dict:
    """The result's cost outputs from the point's price and power knobs (a GPU's board
    power, a CS system's power)."""
    from . import costs
    power = "power_w" if "power_w" in table else "tdp_w"
    return costs.per_point(result, price_usd_per_hour=knobs.get("price_usd_per_hour", table["price_usd_per_hour"][1]),
                           power_w=knobs.get(power, table[power][1]))


def _check_framework(framework, specs: dict, *, default: str) -> object:
    """`framework` checked against each hardware: a name that has tables for, or runs on,
    every GPU given (kernel_tables.resolve), "none" (no tables), or None (each GPU's
    default_framework; `default` "none" where the prediction defaults to no tables). Wafers
    take none."""
    allowed = (*kernel_tables.FRAMEWORKS, kernel_tables.NONE)
    values = values_of(framework)
    for v in values:
        if v is not None:
            check_choice("framework", v, allowed)
    for name, spec in specs.items():
        kind = backend_for(spec).kind
        for v in values:
            if v in (None, kernel_tables.NONE):
                continue
            if kind != "gpu":
                raise InputError(f"framework={v!r} is not allowed on {name!r}; allowed: none (serving frameworks "
                                 "run on GPUs)")
            kernel_tables.resolve(spec, v)
    return default if framework is None and default == kernel_tables.NONE else framework


def _axes(**values) -> dict:
    """Numeric axes of the arguments given (None: not given, left to the backend)."""
    return {k: as_axis(k, v) for k, v in values.items() if v is not None}


def _check_dtype(arg, value):
    """A dtype name: any format for weights and GEMMs, a dense one for activations, KV
    caches and attention_weights (2:4 sparsity is a format of all the weights,
    units.SPARSE_2_4)."""
    check_choice(arg, values_of(value), DTYPES if arg in ("weights", "dtype") else DENSE_DTYPES)


def _check_attention_weights(value, specs: dict) -> None:
    """attention_weights (None: the weights' format): a dense format, on GPUs only (a
    wafer's layers keep one format)."""
    if value is None:
        return
    _check_dtype("attention_weights", value)
    for name, spec in specs.items():
        if backend_for(spec).kind != "gpu":
            raise InputError(f"attention_weights={brief(value)} is not allowed on {name!r}; allowed: None (a "
                             "wafer's layers keep the one format `weights`)")


def gemm(*, hardware, m, n, k, dtype="bf16", pe_grid=None, mapping="mesh", framework=None, hardware_overrides=None):
    """Time and achieved FLOP/s of C[m,n] = A[m,k] @ B[k,n] in `dtype` (inputs and output
    in that dtype, as cuBLASLt benchmarks run them). On a wafer (wse2, wse3, cs2, cs3) it
    runs on a pe_grid x pe_grid region (default: the largest square), as MeshGEMV when
    m == 1 and MeshGEMM otherwise, with `mapping` "mesh", "gpu_style", "t10" or "ladder"
    (primitives/mesh.MAPPINGS). `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
    measured kernel tables of that serving framework; None: the GPU's default_framework;
    "none": the spec's analytical efficiencies."""
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="spec")
    _check_dtype("dtype", dtype)
    check_choice("mapping", values_of(mapping), MAPPINGS)
    for arg, v in (("m", m), ("n", n), ("k", k)):
        check_positive(arg, v, integer=True)
    numeric = {"m": as_axis("m", m), "n": as_axis("n", n), "k": as_axis("k", k)}
    if pe_grid is not None:
        check_positive("pe_grid", pe_grid, integer=True)
        numeric["pe_grid"] = as_axis("pe_grid", pe_grid)
    knob_axes = _knob_axes(hardware_overrides, specs)

    ds = evaluate(_dispatch("gemm", specs, knob_axes),
                  categorical={"hardware": hw_axis, "dtype": as_axis("dtype", dtype),
                               "mapping": as_axis("mapping", mapping), "framework": as_axis("framework", framework)},
                  numeric={**numeric, **knob_axes}, attrs={"function": "predict.gemm"})
    _state_held_out(ds, specs, framework, "gemm", dtype)
    return ds


def _state_held_out(ds, specs: dict, framework, kernel_class: str, variants, scope: str = "") -> None:
    """ds.attrs["held_out_error"]: the held-out error of the fitted surfaces of `kernel_class`
    and `variants` the GPUs of `specs` read (kernel_tables.table_held_out_error) and where
    they hold (`scope`), where any."""
    gpus = [s for s in specs.values() if backend_for(s).kind == "gpu"]
    if held := kernel_tables.table_held_out_error(gpus, framework, kernel_class, variants):
        ds.attrs["held_out_error"] = held + scope


def attention(*, hardware, batch, seq_len, n_heads, head_dim, dtype="bf16", causal=True, kernel=None,
              n_kv_heads=None, framework=None, hardware_overrides=None):
    """Attention forward over `seq_len` tokens: FLOPs 4·batch·seq²·heads·head_dim, halved
    when causal (the FlashAttention papers' convention), by a `kernel` of
    primitives/attention.ATTENTION_KERNELS (flash1, flash2, flash3, framework: the serving
    framework's own kernel from its tables, materialized; None: framework where the GPU
    has tables, else flash2); backward_s is its backward pass. `n_kv_heads` (default
    n_heads) for grouped-query attention. `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
    measured kernel tables of that serving framework; None: the GPU's default_framework;
    "none": the spec's analytical efficiencies."""
    hw_axis, specs = _hardware_axis(hardware)
    check_choice("dtype", values_of(dtype), DENSE_DTYPES)  # attention has no weights to sparsify
    framework = _check_framework(framework, specs, default="spec")
    if kernel is not None:  # None (one value): each GPU's framework kernel where it has tables, else flash2
        check_choice("kernel", values_of(kernel), ATTENTION_KERNELS)
    if n_kv_heads is not None:
        check_positive("n_kv_heads", n_kv_heads, integer=True)
    for arg, v in (("batch", batch), ("seq_len", seq_len), ("n_heads", n_heads), ("head_dim", head_dim)):
        check_positive(arg, v, integer=True)
    check_choice("causal", values_of(causal), (True, False))
    knob_axes = _knob_axes(hardware_overrides, specs)

    ds = evaluate(_dispatch("attention", specs, knob_axes),
                  categorical={"hardware": hw_axis, "dtype": as_axis("dtype", dtype),
                               "causal": as_axis("causal", causal), "kernel": as_axis("kernel", kernel),
                               "framework": as_axis("framework", framework)},
                  numeric={"batch": as_axis("batch", batch), "seq_len": as_axis("seq_len", seq_len),
                           "n_heads": as_axis("n_heads", n_heads), "head_dim": as_axis("head_dim", head_dim),
                           **_axes(n_kv_heads=n_kv_heads), **knob_axes},
                  attrs={"function": "predict.attention"})
    if kernel is None or "framework" in values_of(kernel):  # the framework's kernel: its surface (cache at the math's dtype)
        _state_held_out(ds, specs, framework, "attention",
                        sorted({surface_name(d, DTYPE_BYTES[d]) for d in values_of(dtype)}))
    return ds


def collective(*, hardware, devices, op, size_bytes, framework=None, hardware_overrides=None):
    """Time and bus bandwidth (nccl-tests convention) of collective `op` on `size_bytes`.
    With kernel tables, inside the scale-up domain: NCCL's measured curve, or the
    framework's own all-reduce where it is faster. `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
    measured kernel tables of that serving framework; None: the GPU's default_framework;
    "none": the spec's analytical efficiencies."""
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="spec")
    check_choice("op", values_of(op), COLLECTIVES)
    check_positive("devices", devices, integer=True)
    check_positive("size_bytes", size_bytes)
    knob_axes = _knob_axes(hardware_overrides, specs)

    ds = evaluate(_dispatch("collective", specs, knob_axes),
                  categorical={"hardware": hw_axis, "op": as_axis("op", op), "framework": as_axis("framework", framework)},
                  numeric={"devices": as_axis("devices", devices), "size_bytes": as_axis("size_bytes", size_bytes),
                           **knob_axes},
                  attrs={"function": "predict.collective"})
    _state_held_out(ds, specs, framework, "collective",  # NCCL's curve and the framework's own all-reduce
                    [f"{lib}/{o}" for o in values_of(op) for lib in ("nccl", *kernel_tables.FRAMEWORKS)],
                    " (inside a scale-up domain; beyond it the spec's links, which these tables do not measure)")
    return ds


def inference(*, hardware, model, devices=None, tp=1, pp=1, batch=1, prompt=2048, generate=256,
              weights=None, activations=None, kv=None, pe_grid=None, mapping="mesh",
              placement="regions", ep=1, imbalance=1.0, framework=None, hardware_overrides=None,
              model_overrides=None, decode_pe_grid=None, prefill_pe_grid=None, draft_model=None, draft_len=0,
              acceptance=0.8, attention_weights=None):
    """Static-batch inference: prefill of `prompt` tokens then `generate` output tokens per
    sequence. `batch="max"` uses the largest batch that fits in memory.

    GPUs (workloads/inference.py): `devices` defaults to tp·pp; more devices run
    data-parallel replicas. Wafer-scale systems (cs2, cs3, or a bare wse2/wse3 as one
    system; workloads/wafer_inference.py): `devices` is the number of systems the model is
    pipelined across, `pe_grid` the side of each layer's PE region (default: the fastest
    that fits), `mapping` "mesh" (WaferLLM), "gpu_style", or WaferLLM's two compiler
    baselines "t10" and "ladder" (primitives/mesh.py), and `placement` "regions"
    (weights resident, a region per layer) or "streaming" (whole wafer per layer, weights
    streamed from MemoryX; devices are replicas); tp and pp must be 1. With "regions" the
    prompt is prefilled as a pipeline of chunks through the layer regions
    (workloads/wafer_pipeline.py). Wafer-only: `devices="min"` (the fewest systems that hold
    the model, reported as `devices`), `generate="max"` (the longest generation the KV cache
    allows at that mapping's KV placement, reported as `generate`), `decode_pe_grid` (same
    as `pe_grid`) and `prefill_pe_grid` (default: the decode regions, where the weights
    are; another grid re-lays the weights out between phases, as WaferLLM does, at a cost
    not modelled). Speculative decoding, GPUs and wafers alike (workloads/speculative.py):
    `draft_model` (a catalog name or spec, on the same GPUs or in regions on the same
    wafers, its weights and cache counted) drafts `draft_len` tokens per step, each
    accepted with probability `acceptance`; with draft_len > 0 and no draft_model (or
    draft_model="mtp"), the target's own multi-token-prediction head (one more layer of its
    shape) drafts; draft_model="eagle", an EAGLE-3 head for it (speculative.eagle_draft). Both
    sweep; `tokens_per_step` reports the tokens a step emits on average. MoE models: `ep`
    (dividing tp) spreads the experts over that many of the TP devices, with all-to-all
    dispatch and combine; `imbalance` >= 1 is the busiest rank's share of routed tokens
    over the mean. A layout that cannot run (tp not dividing the heads, pp beyond the
    layers, devices not a multiple of tp·pp, ep not dividing tp, more pipelined systems
    than layers) is a point with fits=False, its reason and NaN outputs; prompt + generate
    beyond the model's max_seq_len is fits=False with its reason (the costs kept). `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
    measured kernel tables of that serving framework; None: the GPU's default_framework;
    "none": the spec's analytical efficiencies. GPUs: `attention_weights` is the format of
    every matmul but the routed experts (attention projections, dense MLPs, shared experts)
    when it differs from `weights`, the experts' (ops.part_formats: gpt-oss's BF16
    attention beside MXFP4 experts); each part computes in its format's default math
    unless `activations` says one for all. `weights=None`: the formats the checkpoint a model
    is named by stores (its Hugging Face id, specs/checkpoint_formats.py; bf16 where not
    listed), `attention_weights` too unless given."""
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="spec")
    weights, attention_weights = checkpoint_weights(model, model_overrides, weights, attention_weights)
    _check_dtype("weights", weights)
    _check_attention_weights(attention_weights, specs)
    for arg, v in (("activations", activations), ("kv", kv)):
        if v is not None:
            _check_dtype(arg, v)
    check_choice("mapping", values_of(mapping), MAPPINGS)
    check_choice("placement", values_of(placement), PLACEMENTS)
    batch_max = isinstance(batch, str)
    if batch_max and batch != "max":
        raise InputError(f"batch={brief(batch)} is not allowed; allowed: a positive integer or 'max'")
    generate_max, devices_min = isinstance(generate, str), isinstance(devices, str)
    if generate_max and generate != "max":
        raise InputError(f"generate={brief(generate)} is not allowed; allowed: a positive integer or 'max'")
    if devices_min and devices != "min":
        raise InputError(f"devices={brief(devices)} is not allowed; allowed: a positive integer, 'min' or None")
    if decode_pe_grid is not None and pe_grid is not None:
        raise InputError("decode_pe_grid and pe_grid are the same setting; allowed: one of them")
    for arg, v in (("tp", tp), ("pp", pp), ("prompt", prompt), ("ep", ep)) + \
            ((("batch", batch),) if not batch_max else ()) + ((("generate", generate),) if not generate_max else ()):
        check_positive(arg, v, integer=True)
    for arg, v in (("devices", None if devices_min else devices), ("pe_grid", pe_grid),
                   ("decode_pe_grid", decode_pe_grid), ("prefill_pe_grid", prefill_pe_grid)):
        if v is not None:
            check_positive(arg, v, integer=True)
    draft = _speculation(draft_model, draft_len, acceptance)
    speculative = draft is not None
    wafer_only = {"devices='min'": devices_min, "generate='max'": generate_max,
                  "decode_pe_grid": decode_pe_grid is not None, "prefill_pe_grid": prefill_pe_grid is not None}
    for name, spec in specs.items():
        for arg in [a for a, given in wafer_only.items() if given and backend_for(spec).kind == "gpu"]:
            raise InputError(f"{arg} is not allowed on {name!r}; allowed: a wafer-scale system (cs2, cs3, wse2, "
                             "wse3); a GPU instance is laid out by tp, pp and devices")
    check_positive("imbalance", imbalance)
    if min(values_of(imbalance)) < 1:
        raise InputError(f"imbalance={min(values_of(imbalance))} is not allowed; allowed: a number >= 1 "
                         "(busiest rank's routed tokens over the mean)")
    for name, spec in specs.items():
        be = backend_for(spec)
        if hasattr(be, "check_inference"):
            be.check_inference(name, tp=tp, pp=pp, ep=ep, activations=activations, batch_max=batch_max,
                               placement=placement)
    numeric = _axes(tp=tp, pp=pp, prompt=prompt, generate=None if generate_max else generate, ep=ep,
                    imbalance=imbalance, batch=None if batch_max else batch, devices=None if devices_min else devices,
                    pe_grid=pe_grid, decode_pe_grid=decode_pe_grid, prefill_pe_grid=prefill_pe_grid,
                    **({"draft_len": draft_len, "acceptance": acceptance} if speculative else {}))
    knob_axes = _knob_axes(hardware_overrides, specs)
    model_axes, models = _model_axes(model, model_overrides)

    categorical = {"hardware": hw_axis, **model_axes,
                   "weights": as_axis("weights", weights), "activations": as_axis("activations", activations),
                   "attention_weights": as_axis("attention_weights", attention_weights),
                   "kv": as_axis("kv", kv), "mapping": as_axis("mapping", mapping),
                   "placement": as_axis("placement", placement), "framework": as_axis("framework", framework)}
    extra = {"devices_min": devices_min, **({"draft_model": draft} if speculative else {})}
    gpus_only = all(backend_for(s).kind == "gpu" for s in specs.values())  # wafer-only settings say nothing here
    ds = evaluate(_dispatch("inference", specs, knob_axes, models, extra=extra),
                  categorical=categorical, hide=("mapping", "placement") if gpus_only else (),
                  numeric={**numeric, **knob_axes}, attrs={"function": "predict.inference", "batching": "static"})
    if "framework" in ds.coords and "framework" not in ds.dims and ds["framework"].item() is None:
        ds = ds.drop_vars("framework")
    if "draft_len" in ds.dims:  # swept: the draft length with the least time per token where it fits
        tpot = ds.tpot_s.where(ds.fits).fillna(np.inf)
        ds["best_draft_len"] = tpot.idxmin("draft_len").where(ds.fits.any("draft_len"))
        ds["best_draft_len"].attrs.update({"long_name": "draft length with the least time per token"})
    return ds


def training(*, hardware, model, devices=None, tp=1, pp=1, dp=None, cp=1, ep=1, expert_tp=None, seq_len=2048,
             global_batch=512, micro_batch=1, precision="bf16", zero=None, recompute=None, virtual_stages=1,
             attention=None, framework=None, moe_host_s_per_local_expert=None, grad_bytes_per_param=None,
             hardware_overrides=None, model_overrides=None):
    """One training step (workloads/training.py for GPUs, workloads/wafer_training.py for
    CS systems with weight streaming). `global_batch` is in sequences; `devices` defaults
    to tp·pp·dp·cp (GPUs) or 1 system; `dp` defaults to devices / (tp·pp·cp). `zero` is
    the ZeRO stage on GPUs (None: 1). `attention` names the GPU attention kernel
    (primitives/attention.ATTENTION_KERNELS; None: the framework's measured kernel where the
    GPU has tables, else flash2). `recompute` is the activation
    checkpointing, "none", "selective" or "full"; None (the default) is each hardware's
    own: "none" on GPUs, "full" on CS systems (Cerebras' compiler keeps each block's input
    and recomputes the block; the evidence is in workloads/wafer_training.py), reported as
    the `recompute` coordinate (or variable, when the hardware given differ). A layout that
    cannot run is a point with fits=False and its reason (a seq_len beyond the model's
    max_seq_len is not: a training run sets its own context, layout.context_problems); GPU
    layout arguments (zero and micro_batch included) and a precision other than bf16 given
    for a wafer are an error (the wafer would ignore them). `framework` selects the measured
    kernel tables the GEMMs, attention ("framework" kernel) and collectives run on (None: each
    GPU's default_framework; "none": the spec's analytical efficiencies): the library kernels
    Megatron-Core also calls (their error on the measured rows: `workbench run model_vs_silicon`).
    `moe_host_s_per_local_expert` (GPUs; None: Megatron-Core's fitted eager-launch time,
    workloads/training.MOE_HOST_S_PER_LOCAL_EXPERT; 0: experts launched from CUDA graphs) is
    the host time each local expert of an MoE layer costs per micro-batch (output moe_host_s).
    `expert_tp` (GPUs) splits each routed expert (--expert-tensor-parallel-size; None: tp, its
    default); `grad_bytes_per_param` (GPUs; None: 4, fp32) the gradients' buffer and reduction.

    On CS systems (weight streaming, data parallel over `devices`): each system runs its
    share of the batch in the fewest equal micro-batches whose checkpoints fit in the
    wafer's SRAM (modelzoo micro_batch_size "auto"), streaming every layer's weights in
    from MemoryX per micro-batch at min(io_bytes_per_s, weight_store_bandwidth_bytes_per_s)
    under the layer's compute; the optimizer runs in MemoryX under the backward pass
    (`optimizer_update_s`, exposed part `optimizer_s`); a step also costs `step_fixed_s`
    whatever its batch (a system knob, fitted on the CS-2 GPT-3 590M rows C181/C182), and
    each layer streamed in costs `layer_stream_latency_s` more per micro-batch (a system
    knob, fitted on the CS-2 rows; total in the output of that name). The step is
    forward_s + backward_s + recompute_s + weight_streaming_exposed_s + optimizer_s +
    step_fixed_s + layer_stream_latency_s; `micro_batch`, `n_micro_batches` and `pe_grid` report
    the layout chosen."""
    from .workloads.training import GRAD_BYTES, PRECISIONS, RECOMPUTE
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="spec")
    check_choice("precision", values_of(precision), PRECISIONS)
    defaults = {name: getattr(backend_for(spec), "default_recompute", "none") for name, spec in specs.items()}
    if recompute is None and len(set(defaults.values())) == 1:
        recompute = next(iter(defaults.values()))  # one default for all the hardware given: a coordinate
    if recompute is not None:
        check_choice("recompute", values_of(recompute), RECOMPUTE)
    if attention is not None:
        check_choice("attention", values_of(attention), ATTENTION_KERNELS)
    if zero is not None:
        check_choice("zero", values_of(zero), (0, 1, 2, 3))
    for arg, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("seq_len", seq_len),
                   ("global_batch", global_batch), ("micro_batch", micro_batch), ("virtual_stages", virtual_stages)):
        check_positive(arg, v, integer=True)
    for arg, v in (("devices", devices), ("dp", dp), ("expert_tp", expert_tp)):
        if v is not None:
            check_positive(arg, v, integer=True)
    if grad_bytes_per_param is not None:
        check_choice("grad_bytes_per_param", grad_bytes_per_param, GRAD_BYTES)
    if moe_host_s_per_local_expert is not None:
        check_range("moe_host_s_per_local_expert", moe_host_s_per_local_expert, low=0.0, high=np.inf, allowed="seconds >= 0")
    for name, spec in specs.items():
        be = backend_for(spec)
        if hasattr(be, "check_training"):
            be.check_training(name, tp=(tp, 1), pp=(pp, 1), cp=(cp, 1), ep=(ep, 1), dp=(dp, None), expert_tp=(expert_tp, None),
                              grad_bytes_per_param=(grad_bytes_per_param, None),
                              micro_batch=(micro_batch, 1), virtual_stages=(virtual_stages, 1),
                              attention=(attention, None), zero=(zero, None), precision=(precision, "bf16"),
                              moe_host_s_per_local_expert=(moe_host_s_per_local_expert, None))
    zero = 1 if zero is None else zero  # GPUs: ZeRO-1 (optimizer states sharded over the replicas)
    numeric = _axes(tp=tp, pp=pp, cp=cp, ep=ep, seq_len=seq_len, global_batch=global_batch, micro_batch=micro_batch,
                    virtual_stages=virtual_stages, devices=devices, dp=dp, expert_tp=expert_tp,
                    grad_bytes_per_param=grad_bytes_per_param,
                    moe_host_s_per_local_expert=moe_host_s_per_local_expert)
    knob_axes = _knob_axes(hardware_overrides, specs)
    model_axes, models = _model_axes(model, model_overrides)

    categorical = {"hardware": hw_axis, **model_axes,
                   "precision": as_axis("precision", precision), "zero": as_axis("zero", zero),
                   "recompute": as_axis("recompute", recompute), "attention": as_axis("attention", attention),
                   "framework": as_axis("framework", framework)}
    dispatch = _dispatch("training", specs, knob_axes, models)

    def own_default(hardware, recompute=None, **point):  # hardware with different defaults: reported per point
        out = dispatch(hardware=hardware, recompute=defaults[hardware], **point)
        out["recompute"] = np.array(defaults[hardware], dtype=object)
        return out
    return evaluate(dispatch if recompute is not None else own_default, categorical=categorical,
                    numeric={**numeric, **knob_axes}, attrs={"function": "predict.training"})


def _speculation(draft_model, draft_len, acceptance):
    """The draft of a call's speculative decoding after checking its arguments: None without
    speculation (draft_len 0 everywhere, no draft_model), a draft model's spec, or
    speculative.MTP_HEAD (the target's own head) when only draft_len is given, or the head
    named ("mtp", "eagle": speculative.HEADS)."""
    from .workloads.speculative import HEADS, MTP_HEAD
    check_range("draft_len", draft_len, low=0.0, high=np.inf, integer=True, allowed="an integer >= 0")
    if draft_model is None and not any(float(v) > 0 for v in values_of(draft_len)):
        return None
    if draft_model is not None and not isinstance(draft_model, dict):
        check_scalar("draft_model", draft_model, "one model (call once per draft model)")
    check_range("acceptance", acceptance, low=0.0, high=1.0, allowed="a probability in [0, 1]")
    if isinstance(draft_model, str) and draft_model in HEADS:
        return draft_model
    return _draft_spec(draft_model) if draft_model is not None else MTP_HEAD


def _draft_spec(draft_model):
    """The draft model's spec; a bad one is named as draft_model, not as the model."""
    try:
        return load_model(draft_model)
    except InputError as e:
        raise InputError("draft_" + str(e) if str(e).startswith("model=") else str(e)) from None


def _check_one(fn: str, **values) -> None:
    """Arguments that predict.`fn` takes once per call: one value each."""
    for arg, v in values.items():
        check_scalar(arg, v, f"one value (predict.{fn} evaluates one configuration; call it once per value "
                             "to sweep it)")


# Serving (open and closed loop) and disaggregated pools live in predict_serving.py; they
# are part of this interface: predict.serving, predict.disaggregated.
from .predict_serving import disaggregated, serving  # noqa: E402,F401  (after inference: it calls it)
