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
from .primitives.attention import ATTENTION_KERNELS
from .primitives.collectives import COLLECTIVES
from .primitives.mesh import MAPPINGS
from .specs import MODEL_KNOBS, load_hardware, load_model, with_model_knobs
from .units import DTYPES, unit_attrs

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


def _resolve_model(models: dict, model, point: dict):
    spec = models[model]
    knobs = {k: point.pop(k) for k in list(point) if k in MODEL_KNOBS}
    return with_model_knobs(spec, knobs) if knobs else spec


def _split(point: dict, knob_names) -> tuple[dict, dict]:
    """(knob values, the rest) of a point's keyword arguments."""
    knobs = {k: point.pop(k) for k in knob_names if k in point}
    return knobs, point


def _dispatch(method: str, specs: dict, knob_axes: dict, models: dict | None = None):
    """The function `evaluate` runs per combination of categorical values: resolve the
    point's model (with its knobs), hardware knobs and serving framework (its kernel
    tables), then the hardware's backend evaluates `method` on the numbers."""
    def fn(hardware, **point):
        args = (_resolve_model(models, point.pop("model"), point),) if models is not None else ()
        knobs, point = _split(point, knob_axes)
        spec = specs[hardware]
        be = backend_for(spec)
        fw = point.pop("framework", "none")
        fw = kernel_tables.resolve(spec, fw) if be.kind == "gpu" else "none"
        return getattr(be, method)(be.numbers(spec, knobs, fw), *args, **point)
    return fn


def _check_framework(framework, specs: dict, *, default: str) -> object:
    """`framework` checked against each hardware: a name with tables for every GPU given,
    "none" (no tables), or None (each GPU's default_framework; `default` "none" where the
    prediction defaults to no tables). Wafers take none."""
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
    check_choice(arg, values_of(value), DTYPES)


def gemm(*, hardware, m, n, k, dtype="bf16", pe_grid=None, mapping="mesh", framework=None, hardware_overrides=None):
    """Time and achieved FLOP/s of C[m,n] = A[m,k] @ B[k,n] in `dtype` (inputs and output
    in that dtype, as cuBLASLt benchmarks run them). On a wafer (wse2, wse3, cs2, cs3) it
    runs on a pe_grid x pe_grid region (default: the largest square), as MeshGEMV when
    m == 1 and MeshGEMM otherwise, with `mapping` "mesh" or "gpu_style". `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
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

    return evaluate(_dispatch("gemm", specs, knob_axes),
                    categorical={"hardware": hw_axis, "dtype": as_axis("dtype", dtype),
                                 "mapping": as_axis("mapping", mapping), "framework": as_axis("framework", framework)},
                    numeric={**numeric, **knob_axes}, attrs={"function": "predict.gemm"})


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
    _check_dtype("dtype", dtype)
    framework = _check_framework(framework, specs, default="spec")
    if kernel is not None:  # None (one value): each GPU's framework kernel where it has tables, else flash2
        check_choice("kernel", values_of(kernel), ATTENTION_KERNELS)
    if n_kv_heads is not None:
        check_positive("n_kv_heads", n_kv_heads, integer=True)
    for arg, v in (("batch", batch), ("seq_len", seq_len), ("n_heads", n_heads), ("head_dim", head_dim)):
        check_positive(arg, v, integer=True)
    check_choice("causal", values_of(causal), (True, False))
    knob_axes = _knob_axes(hardware_overrides, specs)

    return evaluate(_dispatch("attention", specs, knob_axes),
                    categorical={"hardware": hw_axis, "dtype": as_axis("dtype", dtype),
                                 "causal": as_axis("causal", causal), "kernel": as_axis("kernel", kernel),
                                 "framework": as_axis("framework", framework)},
                    numeric={"batch": as_axis("batch", batch), "seq_len": as_axis("seq_len", seq_len),
                             "n_heads": as_axis("n_heads", n_heads), "head_dim": as_axis("head_dim", head_dim),
                             **_axes(n_kv_heads=n_kv_heads), **knob_axes},
                    attrs={"function": "predict.attention"})


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

    return evaluate(_dispatch("collective", specs, knob_axes),
                    categorical={"hardware": hw_axis, "op": as_axis("op", op), "framework": as_axis("framework", framework)},
                    numeric={"devices": as_axis("devices", devices), "size_bytes": as_axis("size_bytes", size_bytes),
                             **knob_axes},
                    attrs={"function": "predict.collective"})


def inference(*, hardware, model, devices=None, tp=1, pp=1, batch=1, prompt=2048, generate=256,
              weights="bf16", activations=None, kv=None, pe_grid=None, mapping="mesh",
              placement="regions", ep=1, imbalance=1.0, framework=None, hardware_overrides=None,
              model_overrides=None):
    """Static-batch inference: prefill of `prompt` tokens then `generate` output tokens per
    sequence. `batch="max"` uses the largest batch that fits in memory.

    GPUs (workloads/inference.py): `devices` defaults to tp·pp; more devices run
    data-parallel replicas. Wafer-scale systems (cs2, cs3, or a bare wse2/wse3 as one
    system; workloads/wafer_inference.py): `devices` is the number of systems the model is
    pipelined across, `pe_grid` the side of each layer's PE region (default: the fastest
    that fits), `mapping` "mesh" (WaferLLM) or "gpu_style", and `placement` "regions"
    (weights resident, a region per layer) or "streaming" (whole wafer per layer, weights
    streamed from MemoryX; devices are replicas); tp and pp must be 1. MoE models: `ep`
    (dividing tp) spreads the experts over that many of the TP devices, with all-to-all
    dispatch and combine; `imbalance` >= 1 is the busiest rank's share of routed tokens
    over the mean. A layout that cannot run (tp not dividing the heads, pp beyond the
    layers, devices not a multiple of tp·pp, ep not dividing tp, more pipelined systems
    than layers) is a point with fits=False, its reason and NaN outputs; prompt + generate
    beyond the model's max_seq_len is fits=False with its reason (the costs kept). `framework` (trtllm, vllm, sglang; `workbench list frameworks HW`) selects the
    measured kernel tables of that serving framework; None: the GPU's default_framework;
    "none": the spec's analytical efficiencies."""
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="spec")
    _check_dtype("weights", weights)
    for arg, v in (("activations", activations), ("kv", kv)):
        if v is not None:
            _check_dtype(arg, v)
    check_choice("mapping", values_of(mapping), MAPPINGS)
    check_choice("placement", values_of(placement), PLACEMENTS)
    batch_max = isinstance(batch, str)
    if batch_max and batch != "max":
        raise InputError(f"batch={brief(batch)} is not allowed; allowed: a positive integer or 'max'")
    for arg, v in (("tp", tp), ("pp", pp), ("prompt", prompt), ("generate", generate), ("ep", ep)) + \
            ((("batch", batch),) if not batch_max else ()):
        check_positive(arg, v, integer=True)
    for arg, v in (("devices", devices), ("pe_grid", pe_grid)):
        if v is not None:
            check_positive(arg, v, integer=True)
    check_positive("imbalance", imbalance)
    if min(values_of(imbalance)) < 1:
        raise InputError(f"imbalance={min(values_of(imbalance))} is not allowed; allowed: a number >= 1 "
                         "(busiest rank's routed tokens over the mean)")
    for name, spec in specs.items():
        be = backend_for(spec)
        if hasattr(be, "check_inference"):
            be.check_inference(name, tp=tp, pp=pp, ep=ep, activations=activations, batch_max=batch_max,
                               placement=placement)
    numeric = _axes(tp=tp, pp=pp, prompt=prompt, generate=generate, ep=ep, imbalance=imbalance,
                    batch=None if batch_max else batch, devices=devices, pe_grid=pe_grid)
    knob_axes = _knob_axes(hardware_overrides, specs)
    model_axes, models = _model_axes(model, model_overrides)

    categorical = {"hardware": hw_axis, **model_axes,
                   "weights": as_axis("weights", weights), "activations": as_axis("activations", activations),
                   "kv": as_axis("kv", kv), "mapping": as_axis("mapping", mapping),
                   "placement": as_axis("placement", placement), "framework": as_axis("framework", framework)}
    ds = evaluate(_dispatch("inference", specs, knob_axes, models), categorical=categorical,
                  numeric={**numeric, **knob_axes}, attrs={"function": "predict.inference", "batching": "static"})
    if all(backend_for(s).kind == "gpu" for s in specs.values()):  # wafer-only settings say nothing here
        ds = ds.drop_vars([c for c in ("mapping", "placement") if c in ds.coords and c not in ds.dims])
    ds = ds.drop_vars([c for c in ("framework",) if c in ds.coords and c not in ds.dims and ds[c].item() is None])
    return ds


def training(*, hardware, model, devices=None, tp=1, pp=1, dp=None, cp=1, ep=1, seq_len=2048, global_batch=512,
             micro_batch=1, precision="bf16", zero=None, recompute="none", virtual_stages=1, attention="flash2",
             framework="none", hardware_overrides=None, model_overrides=None):
    """One training step (workloads/training.py for GPUs, workloads/wafer_training.py for
    CS systems with weight streaming). `global_batch` is in sequences; `devices` defaults
    to tp·pp·dp·cp (GPUs) or 1 system; `dp` defaults to devices / (tp·pp·cp). `zero` is
    the ZeRO stage on GPUs (None: 1). `attention` names the GPU flash-attention kernel
    generation (primitives/attention.ATTENTION_KERNELS). A layout that cannot run is a
    point with fits=False and its reason (a seq_len beyond the model's max_seq_len is not:
    a training run sets its own context, layout.context_problems); GPU layout arguments
    (zero included) and a precision other than bf16 given for a wafer are an error (the
    wafer would ignore them). `framework` (default "none": the analytical efficiencies the
    training rows are calibrated with) may name a serving framework's kernel tables for
    the GEMMs, attention ("framework" kernel) and collectives."""
    from .workloads.training import PRECISIONS, RECOMPUTE
    hw_axis, specs = _hardware_axis(hardware)
    framework = _check_framework(framework, specs, default="none")
    check_choice("precision", values_of(precision), PRECISIONS)
    check_choice("recompute", values_of(recompute), RECOMPUTE)
    check_choice("attention", values_of(attention), ATTENTION_KERNELS)
    if zero is not None:
        check_choice("zero", values_of(zero), (0, 1, 2, 3))
    for arg, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("seq_len", seq_len),
                   ("global_batch", global_batch), ("micro_batch", micro_batch), ("virtual_stages", virtual_stages)):
        check_positive(arg, v, integer=True)
    for arg, v in (("devices", devices), ("dp", dp)):
        if v is not None:
            check_positive(arg, v, integer=True)
    for name, spec in specs.items():
        be = backend_for(spec)
        if hasattr(be, "check_training"):
            be.check_training(name, tp=(tp, 1), pp=(pp, 1), cp=(cp, 1), ep=(ep, 1), dp=(dp, None),
                              micro_batch=(micro_batch, 1), virtual_stages=(virtual_stages, 1),
                              attention=(attention, "flash2"), zero=(zero, None), precision=(precision, "bf16"))
    zero = 1 if zero is None else zero  # GPUs: ZeRO-1 (optimizer states sharded over dp·cp)
    numeric = _axes(tp=tp, pp=pp, cp=cp, ep=ep, seq_len=seq_len, global_batch=global_batch, micro_batch=micro_batch,
                    virtual_stages=virtual_stages, devices=devices, dp=dp)
    knob_axes = _knob_axes(hardware_overrides, specs)
    model_axes, models = _model_axes(model, model_overrides)

    categorical = {"hardware": hw_axis, **model_axes,
                   "precision": as_axis("precision", precision), "zero": as_axis("zero", zero),
                   "recompute": as_axis("recompute", recompute), "attention": as_axis("attention", attention),
                   "framework": as_axis("framework", framework)}
    return evaluate(_dispatch("training", specs, knob_axes, models), categorical=categorical,
                    numeric={**numeric, **knob_axes}, attrs={"function": "predict.training"})


def _check_one(fn: str, **values) -> None:
    """Arguments that predict.`fn` takes once per call: one value each."""
    for arg, v in values.items():
        check_scalar(arg, v, f"one value (predict.{fn} evaluates one configuration; call it once per value "
                             "to sweep it)")


def _check_slos(*, ttft_slo, tpot_slo, quantile, **sizes) -> None:
    """Counts (None: not given) positive integers, latency targets positive, the quantile in (0, 1)."""
    for arg, v in sizes.items():
        if v is not None:
            check_positive(arg, v, integer=True)
    for arg, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        check_positive(arg, v)
    check_range("quantile", quantile, low=0.0, high=1.0, open_low=True, open_high=True, allowed="a number in (0, 1)")


BATCH_GRID = np.unique(np.round(np.geomspace(1, 4096, 48)))  # batches the step time is tabulated at


def _step_table(hardware, model, layout, prompt, generate, weights, kv, overrides, framework=None):
    """Decode step time against batch (tabulated, then interpolated), prefill time of one
    prompt and the largest batch that fits, from the static-batch model."""
    common = dict(hardware=hardware, model=model, prompt=prompt, generate=generate, weights=weights, kv=kv,
                  hardware_overrides=overrides, framework=framework, **layout)
    grid = inference(batch=BATCH_GRID.tolist(), **common)
    steps = grid.tpot_s.values
    first = inference(batch=1, **dict(common, generate=1))
    most = inference(batch="max", **common)
    max_batch = float(most.batch) if bool(most.fits) else 0.0
    return grid, steps, float(first.ttft_s), max_batch


def serving(*, hardware, model, devices=None, tp=1, pp=1, prompt=2048, generate=256, arrival_rate=None,
            ttft_slo=2.0, tpot_slo=0.05, quantile=0.9, weights="bf16", kv=None, acceptance=0.0, draft_len=0,
            draft_model=None, framework=None, hardware_overrides=None):
    """Continuous batching under Poisson arrivals (workloads/serving.py). `arrival_rate` in
    requests/s per instance (a list sweeps it; default: a grid up to saturation). With
    draft_len > 0, speculative decoding by `draft_model` (or one extra target layer per
    drafted token, as MTP heads, when None) at per-token `acceptance`. Scalar categorical
    arguments and knobs only (sweep hardware or models by calling once per value)."""
    import xarray as xr

    from .workloads.serving import latencies
    from .workloads.speculative import time_per_token_s
    _check_one("serving", hardware=hardware, model=model, devices=devices, tp=tp, pp=pp, prompt=prompt,
               generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, quantile=quantile, weights=weights, kv=kv,
               acceptance=acceptance, draft_len=draft_len, draft_model=draft_model)
    _check_slos(tp=tp, pp=pp, devices=devices, prompt=prompt, generate=generate, ttft_slo=ttft_slo,
                tpot_slo=tpot_slo, quantile=quantile)
    check_range("acceptance", acceptance, low=0.0, high=1.0, allowed="a probability in [0, 1]")
    check_range("draft_len", draft_len, low=0.0, high=np.inf, integer=True, allowed="an integer >= 0")
    if arrival_rate is not None:  # requests/s: a positive number or a flat list of distinct ones
        check_positive("arrival_rate", arrival_rate)
        as_axis("arrival_rate", arrival_rate)
    spec = load_model(model)
    hw = load_hardware(hardware)
    _knob_axes(hardware_overrides, {hw.name: hw}, scalar_only=True)
    be = backend_for(hw)
    layout = be.serving_layout(tp=tp, pp=pp, devices=devices, hardware=hw.name)
    _check_one("serving", framework=framework)
    _check_framework(framework, {hw.name: hw}, default="spec")
    grid, steps, prefill_s, max_batch = _step_table(hw, model, layout, prompt, generate, weights, kv,
                                                    hardware_overrides, framework)
    per_device = be.instance_devices(tp=tp, pp=pp, devices=devices)

    if draft_len > 0:
        if draft_model is None:  # MTP: one more target layer per drafted token
            draft_steps = steps / spec.n_layers
        else:
            d = inference(hardware=hw, model=draft_model, batch=BATCH_GRID.tolist(), prompt=prompt,
                          generate=generate, weights=weights, kv=kv, hardware_overrides=hardware_overrides,
                          framework=framework, **layout)
            draft_steps = d.tpot_s.values
        row = grid.tpot_s.values - grid.get("decode_attention_s", 0.0 * grid.tpot_s).values
        steps = time_per_token_s(batches=BATCH_GRID, step_s=steps, row_s=row, draft_step_s=draft_steps,
                                 draft_len=draft_len, acceptance=acceptance)

    def decode_step_s(B):
        return np.interp(B, BATCH_GRID, steps)

    if arrival_rate is None:
        saturation = max_batch / (generate * decode_step_s(max(max_batch, 1.0))) if max_batch else 1.0 / prefill_s
        arrival_rate = np.linspace(0.02, 1.0, 50) * min(saturation, 1.0 / prefill_s)
    lam = np.atleast_1d(np.asarray(arrival_rate, dtype=float))
    r = latencies(arrival_rate=lam, output_len=float(generate), prefill_s=prefill_s, decode_step_s=decode_step_s,
                  quantile=quantile)
    fits = r["batch"] <= max_batch
    meets = fits & (r["ttft_quantile_s"] <= ttft_slo) & (r["tpot_s"] <= tpot_slo)
    out_rate = lam * generate
    ds = xr.Dataset({
        "batch": ("arrival_rate", r["batch"]), "tpot_s": ("arrival_rate", r["tpot_s"]),
        "ttft_mean_s": ("arrival_rate", r["ttft_mean_s"]), "ttft_quantile_s": ("arrival_rate", r["ttft_quantile_s"]),
        "e2e_mean_s": ("arrival_rate", r["e2e_mean_s"]), "prefill_utilization": ("arrival_rate", r["prefill_utilization"]),
        "output_tokens_per_s": ("arrival_rate", out_rate),
        "output_tokens_per_s_per_device": ("arrival_rate", out_rate / per_device),
        "output_tokens_per_s_per_user": ("arrival_rate", 1.0 / r["tpot_s"]),
        "fits": ("arrival_rate", fits), "meets_slo": ("arrival_rate", meets),
    }, coords={"arrival_rate": lam})
    best = np.where(meets, out_rate / per_device, 0.0)
    ds["goodput_tokens_per_s_per_device"] = best.max()
    ds["max_batch"] = max_batch
    for name in ds.data_vars:
        ds[name].attrs.update(unit_attrs(name))
    ds["arrival_rate"].attrs.update({"units": "1/s", "long_name": "request arrival rate"})
    ds.attrs.update({"function": "predict.serving", "hardware": hw.name, "model": spec.name,
                     "queueing_model": "Poisson arrivals; iterations decode the batch and prefill the new prompts (chunked)",
                     "ttft_slo_s": ttft_slo, "tpot_slo_s": tpot_slo, "quantile": quantile,
                     "speculative": f"draft_len={draft_len}, acceptance={acceptance}, draft={draft_model or 'MTP'}"})
    return ds


def disaggregated(*, prefill_hardware, decode_hardware, model, prefill_tp=1, decode_tp=1, prefill_devices=None,
                  decode_devices=None, prompt=2048, generate=256, ttft_slo=2.0, tpot_slo=0.05, quantile=0.9,
                  weights="bf16", kv=None, total_devices=64, framework=None):
    """Prefill and decode in separate pools (workloads/disaggregated.py): capacities, the
    balancing ratio, goodput per device, the best integer split of `total_devices`, and the
    colocated baseline on the decode hardware. KV caches leave the prefill instance over
    its backend's link (every GPU its own NIC; a CS system's I/O). `framework` selects the
    kernel tables of the GPU pools (None: each GPU's default; a wafer pool takes none)."""
    import xarray as xr

    from .workloads.disaggregated import balance, best_split, decode_capacity, prefill_capacity
    _check_one("disaggregated", prefill_hardware=prefill_hardware, decode_hardware=decode_hardware, model=model,
               prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_devices=prefill_devices,
               decode_devices=decode_devices, prompt=prompt, generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
               quantile=quantile, weights=weights, kv=kv, total_devices=total_devices)
    _check_slos(prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_devices=prefill_devices,
                decode_devices=decode_devices, prompt=prompt, generate=generate, total_devices=total_devices,
                ttft_slo=ttft_slo, tpot_slo=tpot_slo, quantile=quantile)
    spec = load_model(model)
    pre_hw = load_hardware(prefill_hardware, arg="prefill_hardware")
    dec_hw = load_hardware(decode_hardware, arg="decode_hardware")
    pre_be, dec_be = backend_for(pre_hw), backend_for(dec_hw)
    pre_layout = pre_be.serving_layout(tp=prefill_tp, devices=prefill_devices, hardware=pre_hw.name, prefix="prefill_")
    dec_layout = dec_be.serving_layout(tp=decode_tp, devices=decode_devices, hardware=dec_hw.name, prefix="decode_")
    _check_one("disaggregated", framework=framework)
    fw_p, fw_d = (framework if be.kind == "gpu" else None for be in (pre_be, dec_be))
    for hw_, fw_ in ((pre_hw, fw_p), (dec_hw, fw_d)):
        _check_framework(fw_, {hw_.name: hw_}, default="spec")
    dev_p = pre_be.instance_devices(tp=prefill_tp, devices=prefill_devices)  # devices per instance
    dev_d = dec_be.instance_devices(tp=decode_tp, devices=decode_devices)
    if total_devices < dev_p + dev_d:
        raise InputError(f"total_devices={total_devices} is not allowed; allowed: at least {dev_p + dev_d:g} "
                         f"(one prefill instance of {dev_p:g} devices and one decode instance of {dev_d:g})")
    first = inference(hardware=pre_hw, model=model, batch=1, prompt=prompt, generate=1, weights=weights,
                      kv=kv, framework=fw_p, **pre_layout)
    grid, steps, _, max_batch = _step_table(dec_hw, model, dec_layout, prompt, generate, weights, kv, None, fw_d)
    kv_bytes = spec.kv_cache_bytes(context=prompt, dtype=kv or "bf16")
    kv_s = kv_bytes / pre_be.kv_link_bytes_per_s(pre_be.numbers(pre_hw, {}), tp=prefill_tp, devices=prefill_devices)
    lam_p = prefill_capacity(prefill_s=float(first.ttft_s), kv_transfer_s=kv_s, ttft_slo_s=ttft_slo, quantile=quantile)
    lam_d, b_d = decode_capacity(batches=BATCH_GRID, step_s=steps, max_batch=max_batch, tpot_slo_s=tpot_slo,
                                 output_len=generate)
    ratio, good = balance(prefill_rate=lam_p, decode_rate=lam_d, prefill_devices=dev_p, decode_devices=dev_d,
                          output_len=generate)
    n_p, n_d, good_int = best_split(total_devices=total_devices, prefill_rate=float(lam_p), decode_rate=float(lam_d),
                                    prefill_devices=dev_p, decode_devices=dev_d, output_len=generate)
    colocated = serving(hardware=dec_hw, model=model, tp=decode_tp, devices=decode_devices, prompt=prompt,
                        generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, quantile=quantile, weights=weights,
                        kv=kv, framework=fw_d)
    ds = xr.Dataset({
        "prefill_s": float(first.ttft_s), "kv_transfer_s": kv_s, "kv_transfer_bytes": kv_bytes,
        "prefill_requests_per_s": float(lam_p), "decode_requests_per_s": float(lam_d), "decode_batch": float(b_d),
        "prefill_per_decode_instances": float(ratio), "goodput_tokens_per_s_per_device": float(good),
        "n_prefill_instances": n_p, "n_decode_instances": n_d, "split_goodput_tokens_per_s_per_device": good_int,
        "colocated_goodput_tokens_per_s_per_device": float(colocated.goodput_tokens_per_s_per_device),
    })
    for name in ds.data_vars:
        ds[name].attrs.update(unit_attrs(name))
    ds.attrs.update({"function": "predict.disaggregated", "prefill_hardware": pre_hw.name,
                     "decode_hardware": dec_hw.name, "model": spec.name})
    return ds
