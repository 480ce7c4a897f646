"""The public interface: predictions for scalars, lists and DataArrays, as xr.Dataset.

    from workbench import predict
    predict.inference(hardware="h100_sxm", devices=8, model="llama_3_1_70b", tp=8,
                      batch=64, prompt=2048, generate=256, weights="fp8", kv="fp8")

Every argument may be a scalar, a list or a DataArray; lists become sweep dimensions
named after the argument. Bad input raises InputError naming the argument, the value
and what is allowed; a configuration that does not fit is a result with fits=False.
"""
from __future__ import annotations

import numpy as np

from ._broadcast import as_axis, evaluate, values_of
from .errors import InputError, check_choice, check_positive
from .primitives.attention import attention_prefill
from .primitives.collectives import COLLECTIVES, collective as _collective
from .primitives.gemm import gemm as _gemm
from .primitives.mesh import MAPPINGS, mesh_gemm, mesh_gemv
from .specs import is_wafer, list_hardware, list_models, load_hardware, load_model
from .units import DTYPE_BYTES, DTYPES, unit_attrs
from .workloads import inference as _inf
from .workloads.wafer_inference import wafer_inference, wafer_max_batch, wafer_system
from .workloads.wafer_streaming import streaming_inference

PLACEMENTS = ("regions", "streaming")


def _check_hardware(hardware):
    check_choice("hardware", values_of(hardware), list_hardware())


def _check_dtype(arg, value, hardware=None):
    check_choice(arg, values_of(value), DTYPES)


def gemm(*, hardware, m, n, k, dtype="bf16", pe_grid=None, mapping="mesh"):
    """Time and achieved FLOP/s of C[m,n] = A[m,k] @ B[k,n] in `dtype` (inputs and output
    in that dtype, as cuBLASLt benchmarks run them). On a wafer (wse2, wse3, cs2, cs3) it
    runs on a pe_grid x pe_grid region (default: the largest square), as MeshGEMV when
    m == 1 and MeshGEMM otherwise, with `mapping` "mesh" or "gpu_style"."""
    _check_hardware(hardware)
    _check_dtype("dtype", dtype)
    check_choice("mapping", values_of(mapping), MAPPINGS)
    for arg, v in (("m", m), ("n", n), ("k", k)):
        check_positive(arg, v, integer=True)
    numeric = {"m": as_axis("m", m), "n": as_axis("n", n), "k": as_axis("k", k)}
    if pe_grid is not None:
        check_positive("pe_grid", pe_grid, integer=True)
        numeric["pe_grid"] = as_axis("pe_grid", pe_grid)

    def fn(hardware, dtype, mapping, m, n, k, pe_grid=None):
        hw = load_hardware(hardware)
        if is_wafer(hw):
            return _wafer_gemm(hw, dtype, mapping, m, n, k, pe_grid)
        b = DTYPE_BYTES[dtype]
        g = _gemm(hw=hw, m=m, n=n, k=k, dtype=dtype, a_bytes=b, b_bytes=b, c_bytes=b)
        return {"time_s": g["time_s"], "flops_per_s": g["flops"] / g["time_s"],
                "compute_s": g["compute_s"], "memory_s": g["memory_s"], "flops": g["flops"],
                "bytes": g["bytes"], "bound": np.where(g["compute_bound"], "compute", "memory")}

    return evaluate(fn, categorical={"hardware": as_axis("hardware", hardware), "dtype": as_axis("dtype", dtype),
                                     "mapping": as_axis("mapping", mapping)},
                    numeric=numeric, attrs={"function": "predict.gemm"})


def _wafer_gemm(hw, dtype, mapping, m, n, k, pe_grid):
    from .workloads.wafer_inference import wafer_system
    _, w = wafer_system(hw)
    P = np.minimum(pe_grid if pe_grid is not None else w.max_square_grid + 0.0 * m, w.max_square_grid)
    gemv = mesh_gemv(w, P=P, k=k, n=n, rows=m, dtype=dtype, mapping=mapping)
    gemm_ = mesh_gemm(w, P=P, m=m, k=k, n=n, dtype=dtype, mapping=mapping)
    use_gemv = m == 1
    cycles = np.where(use_gemv, gemv["cycles"], gemm_["cycles"])
    compute = np.where(use_gemv, gemv["compute_cycles"], gemm_["compute_cycles"])
    comm = np.where(use_gemv, gemv["comm_cycles"], gemm_["comm_cycles"])
    t = cycles / w.clock_hz
    flops = 2.0 * m * n * k
    return {"time_s": t, "flops_per_s": flops / t, "compute_s": compute / w.clock_hz,
            "comm_s": comm / w.clock_hz, "flops": flops, "pe_grid": P + 0.0 * t,
            "bound": np.where(compute >= comm, "compute", "mesh_reduction")}


def attention(*, hardware, batch, seq_len, n_heads, head_dim, dtype="bf16", causal=True, kernel="flash2"):
    """Attention forward over `seq_len` tokens: FLOPs 4·batch·seq²·heads·head_dim, halved
    when causal (the FlashAttention papers' convention), by a `kernel` of
    primitives/attention.ATTENTION_KERNELS; backward_s is its backward pass."""
    from .primitives.attention import ATTENTION_KERNELS
    _check_hardware(hardware)
    _check_dtype("dtype", dtype)
    check_choice("kernel", values_of(kernel), ATTENTION_KERNELS)
    for arg, v in (("batch", batch), ("seq_len", seq_len), ("n_heads", n_heads), ("head_dim", head_dim)):
        check_positive(arg, v, integer=True)
    check_choice("causal", values_of(causal), (True, False))

    def fn(hardware, dtype, causal, kernel, batch, seq_len, n_heads, head_dim):
        a = attention_prefill(hw=load_hardware(hardware), batch=batch, seq_len=seq_len, n_heads=n_heads,
                              head_dim=head_dim, causal=bool(causal), dtype=dtype,
                              act_bytes=DTYPE_BYTES[dtype], kernel=kernel)
        return {"time_s": a["time_s"], "flops_per_s": a["flops"] / a["time_s"], "flops": a["flops"],
                "bytes": a["bytes"], "compute_s": a["compute_s"], "memory_s": a["memory_s"],
                "backward_s": a["backward_s"]}

    return evaluate(fn, categorical={"hardware": as_axis("hardware", hardware), "dtype": as_axis("dtype", dtype),
                                     "causal": as_axis("causal", causal), "kernel": as_axis("kernel", kernel)},
                    numeric={"batch": as_axis("batch", batch), "seq_len": as_axis("seq_len", seq_len),
                             "n_heads": as_axis("n_heads", n_heads), "head_dim": as_axis("head_dim", head_dim)},
                    attrs={"function": "predict.attention"})


def collective(*, hardware, devices, op, size_bytes):
    """Time and bus bandwidth (nccl-tests convention) of collective `op` on `size_bytes`."""
    _check_hardware(hardware)
    check_choice("op", values_of(op), COLLECTIVES)
    check_positive("devices", devices, integer=True)
    check_positive("size_bytes", size_bytes)

    def fn(hardware, op, devices, size_bytes):
        c = _collective(hw=load_hardware(hardware), op=op, size=size_bytes, devices=devices)
        return {"time_s": c["time_s"], "bus_bandwidth_bytes_per_s": c["bus_bandwidth_bytes_per_s"],
                "algorithm_bandwidth_bytes_per_s": c["algorithm_bandwidth_bytes_per_s"]}

    return evaluate(fn, categorical={"hardware": as_axis("hardware", hardware), "op": as_axis("op", op)},
                    numeric={"devices": as_axis("devices", devices), "size_bytes": as_axis("size_bytes", size_bytes)},
                    attrs={"function": "predict.collective"})


def default_activations(weights: str, hw) -> str:
    """Math dtype implied by the weight format: FP8 and INT8 deployments quantize
    activations too (W8A8); int4 is weight-only (W4A16); fp4 runs as NVFP4 (W4A4) where
    the chip has FP4 units and W4A16 elsewhere."""
    if weights in ("fp8", "int8", "fp16", "fp32"):
        return weights
    if weights == "fp4" and np.isfinite(hw.peak("fp4")):
        return "fp4"
    return "bf16"


def inference(*, hardware, model, devices=None, tp=1, pp=1, batch=1, prompt=2048, generate=256,
              weights="bf16", activations=None, kv=None, pe_grid=None, mapping="mesh",
              placement="regions", ep=1, imbalance=1.0):
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
    over the mean."""
    _check_hardware(hardware)
    check_choice("model", [m for m in values_of(model) if isinstance(m, str)], list_models())
    _check_dtype("weights", weights)
    if activations is not None:
        _check_dtype("activations", activations)
    if kv is not None:
        _check_dtype("kv", kv)
    check_choice("mapping", values_of(mapping), MAPPINGS)
    check_choice("placement", values_of(placement), PLACEMENTS)
    batch_max = isinstance(batch, str)
    if batch_max and batch != "max":
        raise InputError(f"batch={batch!r} is not allowed; allowed: a positive integer or 'max'")
    for arg, v in (("tp", tp), ("pp", pp), ("prompt", prompt), ("generate", generate)) + \
            ((("batch", batch),) if not batch_max else ()):
        check_positive(arg, v, integer=True)
    if devices is not None:
        check_positive("devices", devices, integer=True)
    if pe_grid is not None:
        check_positive("pe_grid", pe_grid, integer=True)
    check_positive("ep", ep, integer=True)
    if min(values_of(imbalance)) < 1:
        raise InputError(f"imbalance={min(values_of(imbalance))} is not allowed; allowed: a number >= 1 "
                         "(busiest rank's routed tokens over the mean)")
    bad_ep = [(e, t) for e in values_of(ep) for t in values_of(tp) if int(t) % int(e)]
    if bad_ep:
        raise InputError(f"ep={bad_ep[0][0]} does not divide tp={bad_ep[0][1]}; allowed: a divisor of tp "
                         "(experts are spread over the TP devices)")
    wafers = [h for h in values_of(hardware) if is_wafer(load_hardware(h))]
    if wafers and (max(values_of(tp)) > 1 or max(values_of(pp)) > 1):
        raise InputError(f"tp={max(values_of(tp))}, pp={max(values_of(pp))} is not allowed on {wafers[0]!r}; "
                         "allowed: tp=1 and pp=1 (a wafer model is laid out by pe_grid and devices)")
    for name in values_of(model):
        spec = load_model(name)
        bad = [t for t in values_of(tp) if spec.n_heads % int(t)]
        if bad:
            divisors = [d for d in range(1, spec.n_heads + 1) if spec.n_heads % d == 0]
            raise InputError(f"tp={bad[0]} does not divide n_heads={spec.n_heads} of model {spec.name!r}; "
                             f"allowed: {', '.join(map(str, divisors))}")
        if values_of(pp) and max(values_of(pp)) > spec.n_layers:
            raise InputError(f"pp={max(values_of(pp))} exceeds n_layers={spec.n_layers} of model "
                             f"{spec.name!r}; allowed: 1..{spec.n_layers}")

    numeric = {"tp": as_axis("tp", tp), "pp": as_axis("pp", pp), "prompt": as_axis("prompt", prompt),
               "generate": as_axis("generate", generate), "ep": as_axis("ep", ep),
               "imbalance": as_axis("imbalance", imbalance)}
    if not batch_max:
        numeric["batch"] = as_axis("batch", batch)
    if devices is not None:
        numeric["devices"] = as_axis("devices", devices)
    if pe_grid is not None:
        numeric["pe_grid"] = as_axis("pe_grid", pe_grid)
    model_axis = as_axis("model", model) if isinstance(model, (list, tuple, str)) else model

    def fn(hardware, model, weights, activations, kv, mapping, placement, **sizes):
        hw, spec = load_hardware(hardware), load_model(model)
        if is_wafer(hw):
            return _wafer_point(hw, spec, weights, activations, kv, mapping, placement, **sizes)
        return _gpu_point(hw, spec, weights, activations, kv, **sizes)

    categorical = {"hardware": as_axis("hardware", hardware), "model": model_axis,
                   "weights": as_axis("weights", weights), "activations": as_axis("activations", activations),
                   "kv": as_axis("kv", kv), "mapping": as_axis("mapping", mapping),
                   "placement": as_axis("placement", placement)}
    ds = evaluate(fn, categorical=categorical, numeric=numeric,
                  attrs={"function": "predict.inference", "batching": "static"})
    if not wafers:  # the wafer-only settings say nothing about a GPU-only result
        ds = ds.drop_vars([c for c in ("mapping", "placement") if c in ds.coords and c not in ds.dims])
    return ds


def _gpu_point(hw, spec, weights, activations, kv, *, tp, pp, prompt, generate, batch=None, devices=None,
               pe_grid=None, ep=1.0, imbalance=1.0):
    act = activations or default_activations(weights, hw)
    kvd = kv or ("fp16" if act == "fp16" else "bf16")
    devices = tp * pp if devices is None else devices
    dp = devices / (tp * pp)
    if np.any(dp != np.floor(dp)) or np.any(dp < 1):
        raise InputError(f"devices={devices} is not a multiple of tp*pp={tp * pp}; allowed: "
                         "a multiple of tp*pp (the extra devices are data-parallel replicas)")
    common = dict(hw=hw, model=spec, tp=tp, pp=pp, dp=dp, prompt=prompt, generate=generate,
                  weights=weights, activations=act, kv=kvd, ep=ep, imbalance=imbalance)
    if batch is None:
        batch = _inf.max_batch(hw, spec, prompt=prompt, generate=generate, tp=tp, pp=pp,
                               w_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kvd],
                               stream_bytes=max(DTYPE_BYTES[act], 2.0))
        r = _inf.inference(batch=np.maximum(batch, 1.0), **common)
        r["fits"] = r["fits"] & (batch >= 1)
        r["batch"] = batch
    else:
        r = _inf.inference(batch=batch, **common)
    r["activations"] = np.array(act, dtype=object)  # constant per call: broadcast as a view
    r["kv"] = np.array(kvd, dtype=object)
    return r


def _wafer_point(hw, spec, weights, activations, kv, mapping, placement, *, tp, pp, prompt, generate,
                 batch=None, devices=None, pe_grid=None, ep=1.0, imbalance=1.0):
    system, wafer = wafer_system(hw)
    if activations not in (None, "fp16", "bf16"):
        raise InputError(f"activations={activations!r} is not allowed on {hw.name!r}; allowed: fp16, bf16 "
                         "(the PE datapath is FP16/FP32; narrower weights are a storage format)")
    kvd = kv or "fp16"
    devices = 1.0 + 0.0 * tp if devices is None else devices
    common = dict(system=system, wafer=wafer, model=spec, devices=devices, prompt=prompt, generate=generate,
                  weights=weights, kv=kvd, pe_grid=pe_grid, mapping=mapping)
    if placement == "streaming":
        if batch is None:
            raise InputError("batch='max' is not allowed with placement='streaming'; allowed: a positive integer")
        r = streaming_inference(batch=batch, **common)
    elif batch is None:
        batch = wafer_max_batch(**common)
        r = wafer_inference(batch=np.maximum(batch, 1.0), **common)
        r["fits"] = r["fits"] & (batch >= 1)
        r["batch"] = batch
    else:
        r = wafer_inference(batch=batch, **common)
    r["activations"] = np.array("fp16", dtype=object)
    r["kv"] = np.array(kvd, dtype=object)
    return r


def training(*, hardware, model, devices=None, tp=1, pp=1, dp=None, cp=1, ep=1, seq_len=2048, global_batch=512,
             micro_batch=1, precision="bf16", zero=1, recompute="none", virtual_stages=1, attention="flash2"):
    """One training step (workloads/training.py for GPUs, workloads/wafer_training.py for
    CS systems with weight streaming). `global_batch` is in sequences; `devices` defaults
    to tp·pp·dp·cp (GPUs) or 1 system; `dp` defaults to devices / (tp·pp·cp). `attention`
    names the GPU flash-attention kernel generation (primitives/attention.ATTENTION_KERNELS)."""
    from .primitives.attention import ATTENTION_KERNELS
    from .workloads.training import PRECISIONS, RECOMPUTE, training as _training
    from .workloads.wafer_training import wafer_training
    from .workloads.wafer_inference import wafer_system
    _check_hardware(hardware)
    check_choice("model", [m for m in values_of(model) if isinstance(m, str)], list_models())
    check_choice("precision", values_of(precision), PRECISIONS)
    check_choice("recompute", values_of(recompute), RECOMPUTE)
    check_choice("attention", values_of(attention), ATTENTION_KERNELS)
    check_choice("zero", values_of(zero), (0, 1, 2, 3))
    for arg, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("seq_len", seq_len),
                   ("global_batch", global_batch), ("micro_batch", micro_batch), ("virtual_stages", virtual_stages)):
        check_positive(arg, v, integer=True)
    for arg, v in (("devices", devices), ("dp", dp)):
        if v is not None:
            check_positive(arg, v, integer=True)
    for name in values_of(model):
        spec = load_model(name)
        bad = [t for t in values_of(tp) if spec.n_heads % int(t)]
        if bad:
            raise InputError(f"tp={bad[0]} does not divide n_heads={spec.n_heads} of model {spec.name!r}")
        if max(values_of(pp)) > spec.n_layers:
            raise InputError(f"pp={max(values_of(pp))} exceeds n_layers={spec.n_layers} of model {spec.name!r}")
    numeric = {k: as_axis(k, v) for k, v in dict(tp=tp, pp=pp, cp=cp, ep=ep, seq_len=seq_len, global_batch=global_batch,
                                                 micro_batch=micro_batch, virtual_stages=virtual_stages).items()}
    for k, v in (("devices", devices), ("dp", dp)):
        if v is not None:
            numeric[k] = as_axis(k, v)
    model_axis = as_axis("model", model) if isinstance(model, (list, tuple, str)) else model

    def fn(hardware, model, precision, zero, recompute, attention, tp, pp, cp, ep, seq_len, global_batch, micro_batch,
           virtual_stages, devices=None, dp=None):
        hw, spec = load_hardware(hardware), load_model(model)
        if is_wafer(hw):
            system, wafer = wafer_system(hw)
            return wafer_training(system=system, wafer=wafer, model=spec, devices=1.0 if devices is None else devices,
                                  seq_len=seq_len, global_batch=global_batch, precision=precision, recompute=recompute)
        group = tp * pp * cp
        if dp is None:
            dp = (group if devices is None else devices) / group
        if np.any(dp != np.floor(dp)) or np.any(dp < 1):
            raise InputError(f"devices={devices} is not a multiple of tp*pp*cp={group}; allowed: a multiple")
        return _training(hw=hw, model=spec, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, seq_len=seq_len,
                         global_batch=global_batch, micro_batch=micro_batch, precision=precision, zero=int(zero),
                         recompute=recompute, virtual_stages=virtual_stages, attention=attention)

    categorical = {"hardware": as_axis("hardware", hardware), "model": model_axis,
                   "precision": as_axis("precision", precision), "zero": as_axis("zero", zero),
                   "recompute": as_axis("recompute", recompute), "attention": as_axis("attention", attention)}
    return evaluate(fn, categorical=categorical, numeric=numeric, attrs={"function": "predict.training"})


BATCH_GRID = np.unique(np.round(np.geomspace(1, 4096, 48)))  # batches the step time is tabulated at


def _step_table(hardware, model, layout, prompt, generate, weights, kv):
    """Decode step time against batch (tabulated, then interpolated), prefill time of one
    prompt and the largest batch that fits, from the static-batch model."""
    common = dict(hardware=hardware, model=model, prompt=prompt, generate=generate, weights=weights, kv=kv, **layout)
    grid = inference(batch=BATCH_GRID.tolist(), **common)
    steps = grid.tpot_s.values
    first = inference(batch=1, **dict(common, generate=1))
    most = inference(batch="max", **common)
    max_batch = float(most.batch) if bool(most.fits) else 0.0
    return grid, steps, float(first.ttft_s), max_batch


def serving(*, hardware, model, devices=None, tp=1, pp=1, prompt=2048, generate=256, arrival_rate=None,
            ttft_slo=2.0, tpot_slo=0.05, quantile=0.9, weights="bf16", kv=None, acceptance=0.0, draft_len=0,
            draft_model=None):
    """Continuous batching under Poisson arrivals (workloads/serving.py). `arrival_rate` in
    requests/s per instance (a list sweeps it; default: a grid up to saturation). With
    draft_len > 0, speculative decoding by `draft_model` (or one extra target layer per
    drafted token, as MTP heads, when None) at per-token `acceptance`. Scalar categorical
    arguments only (sweep hardware or models by calling once per value)."""
    import xarray as xr

    from .workloads.serving import latencies
    from .workloads.speculative import expected_tokens_per_step
    for arg, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo), ("prompt", prompt), ("generate", generate)):
        check_positive(arg, v)
    if not 0 < quantile < 1:
        raise InputError(f"quantile={quantile} is not allowed; allowed: a number in (0, 1)")
    if not 0 <= acceptance <= 1:
        raise InputError(f"acceptance={acceptance} is not allowed; allowed: a probability in [0, 1]")
    if int(draft_len) != draft_len or draft_len < 0:
        raise InputError(f"draft_len={draft_len} is not allowed; allowed: an integer >= 0")
    spec = load_model(model)
    wafer = is_wafer(load_hardware(hardware))
    layout = dict(devices=devices or 1) if wafer else dict(tp=tp, pp=pp)
    grid, steps, prefill_s, max_batch = _step_table(hardware, model, layout, prompt, generate, weights, kv)
    per_device = (devices or 1) if wafer else tp * pp

    if draft_len > 0:
        k = float(draft_len)
        if draft_model is None:  # MTP: one more target layer per drafted token
            draft_steps = steps / spec.n_layers
        else:
            d = inference(hardware=hardware, model=draft_model, batch=BATCH_GRID.tolist(), prompt=prompt,
                          generate=generate, weights=weights, kv=kv, **layout)
            draft_steps = d.tpot_s.values
        row = grid.tpot_s.values - grid.get("decode_attention_s", 0.0 * grid.tpot_s).values
        rows_k = np.interp(BATCH_GRID * (k + 1), BATCH_GRID, row)
        verify = rows_k + (steps - row)
        e = float(expected_tokens_per_step(acceptance=acceptance, draft_len=k))
        steps = (k * draft_steps + verify) / e  # time per emitted token

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
    ds.attrs.update({"function": "predict.serving", "hardware": hardware, "model": spec.name,
                     "queueing_model": "Poisson arrivals; iterations decode the batch and prefill the new prompts (chunked)",
                     "ttft_slo_s": ttft_slo, "tpot_slo_s": tpot_slo, "quantile": quantile,
                     "speculative": f"draft_len={draft_len}, acceptance={acceptance}, draft={draft_model or 'MTP'}"})
    return ds


def disaggregated(*, prefill_hardware, decode_hardware, model, prefill_tp=1, decode_tp=1, prefill_devices=None,
                  decode_devices=None, prompt=2048, generate=256, ttft_slo=2.0, tpot_slo=0.05, quantile=0.9,
                  weights="bf16", kv=None, total_devices=64):
    """Prefill and decode in separate pools (workloads/disaggregated.py): capacities, the
    balancing ratio, goodput per device, the best integer split of `total_devices`, and the
    colocated baseline on the decode hardware."""
    import xarray as xr

    from .workloads.disaggregated import balance, best_split, decode_capacity, prefill_capacity
    spec = load_model(model)
    pre_hw, dec_hw = load_hardware(prefill_hardware), load_hardware(decode_hardware)
    pre_layout = dict(devices=prefill_devices or 1) if is_wafer(pre_hw) else dict(tp=prefill_tp)
    dec_layout = dict(devices=decode_devices or 1) if is_wafer(dec_hw) else dict(tp=decode_tp)
    first = inference(hardware=prefill_hardware, model=model, batch=1, prompt=prompt, generate=1, weights=weights,
                      kv=kv, **pre_layout)
    grid, steps, _, max_batch = _step_table(decode_hardware, model, dec_layout, prompt, generate, weights, kv)
    kv_bytes = spec.kv_cache_bytes(context=prompt, dtype=kv or "bf16")
    # KV leaves over the prefill instance's NICs (every GPU its own) or the CS system I/O.
    if is_wafer(pre_hw):
        from .workloads.wafer_inference import wafer_system
        link_bw = wafer_system(pre_hw)[0].io_bytes_per_s
    else:
        link_bw = pre_hw.link("scale_out").unidir_bytes_per_s * prefill_tp
    kv_s = kv_bytes / link_bw
    lam_p = prefill_capacity(prefill_s=float(first.ttft_s), kv_transfer_s=kv_s, ttft_slo_s=ttft_slo, quantile=quantile)
    lam_d, b_d = decode_capacity(batches=BATCH_GRID, step_s=steps, max_batch=max_batch, tpot_slo_s=tpot_slo,
                                 output_len=generate)
    dev_p = (prefill_devices or 1) if is_wafer(pre_hw) else prefill_tp  # devices per instance
    dev_d = (decode_devices or 1) if is_wafer(dec_hw) else decode_tp
    ratio, good = balance(prefill_rate=lam_p, decode_rate=lam_d, prefill_devices=dev_p, decode_devices=dev_d,
                          output_len=generate)
    n_p, n_d, good_int = best_split(total_devices=total_devices, prefill_rate=float(lam_p), decode_rate=float(lam_d),
                                    prefill_devices=dev_p, decode_devices=dev_d, output_len=generate)
    colocated = serving(hardware=decode_hardware, model=model, tp=decode_tp, devices=decode_devices, prompt=prompt,
                        generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, quantile=quantile, weights=weights,
                        kv=kv)
    ds = xr.Dataset({
        "prefill_s": float(first.ttft_s), "kv_transfer_s": kv_s, "kv_transfer_bytes": kv_bytes,
        "prefill_requests_per_s": float(lam_p), "decode_requests_per_s": float(lam_d), "decode_batch": float(b_d),
        "prefill_per_decode_instances": float(ratio), "goodput_tokens_per_s_per_device": float(good),
        "n_prefill_instances": n_p, "n_decode_instances": n_d, "split_goodput_tokens_per_s_per_device": good_int,
        "colocated_goodput_tokens_per_s_per_device": float(colocated.goodput_tokens_per_s_per_device),
    })
    for name in ds.data_vars:
        ds[name].attrs.update(unit_attrs(name))
    ds.attrs.update({"function": "predict.disaggregated", "prefill_hardware": prefill_hardware,
                     "decode_hardware": decode_hardware, "model": spec.name})
    return ds
