"""predict.serving and predict.disaggregated: serving with continuous batching (a fixed
concurrency, or open-loop arrivals), and separate prefill and decode pools. Imported into
workbench.predict, which is the interface; this module holds them so that neither grows
past a screenful of functions."""
from __future__ import annotations

import numpy as np

from ._broadcast import as_axis, evaluate, values_of
from .backends import backend_for
from .errors import InputError, brief, check_choice, check_positive, check_range
from .predict import (_axes, _check_attention_weights, _check_dtype, _check_framework, _check_one, _dispatch,
                      _hardware_axis, _knob_axes, _model_axes, _speculation, checkpoint_weights, inference)
from .specs import load_hardware, load_model
from .units import with_units
from .backends.kernel_tables import ENGINE_SETTINGS, check_engine_settings, held_out_error
from .serving_checks import check_generate as _check_generate, check_slos as _check_slos
from .workloads.concurrency import LENGTHS


def _min_systems(*, hardware, model, devices, prompt, generate, weights, kv, hardware_overrides,
                 speculation=None) -> int:
    """devices="min" resolved once for a serving instance: the fewest systems that hold the
    model at batch 1 (predict.inference's rule; GPUs refuse it there by name), and its draft's
    regions when `speculation` (draft_model, draft_len, acceptance) is given."""
    ds = inference(hardware=hardware, model=model, devices=devices, batch=1, prompt=prompt, generate=generate,
                   weights=weights, kv=kv, hardware_overrides=hardware_overrides, **(speculation or {}))
    if not bool(ds.fits):
        raise InputError(f"devices='min' is not allowed for {model!r} on {hardware!r}: {ds.reason.item()}")
    return int(ds.devices)


BATCH_GRID = np.unique(np.round(np.geomspace(1, 4096, 48)))  # batches the step time is tabulated at


def _step_table(hardware, model, layout, prompt, generate, weights, kv, overrides, framework=None,
                attention_weights=None, speculation=None):
    """Decode step time against batch (tabulated, then interpolated), prefill time of one
    prompt, the largest batch that fits and why none does (else ""), from the static-batch model; with `speculation`
    (draft_model, draft_len, acceptance: CS systems, whose static model places the draft's
    regions beside the target's) the time per emitted token and the batch left beside the draft."""
    common = dict(hardware=hardware, model=model, prompt=prompt, generate=generate, weights=weights, kv=kv,
                  hardware_overrides=overrides, framework=framework, attention_weights=attention_weights, **layout,
                  **(speculation or {}))
    grid = inference(batch=BATCH_GRID.tolist(), **common)
    steps = np.fmax.accumulate(grid.tpot_s.values)  # a larger batch never steps faster (Little's law past saturation)
    first = inference(batch=1, **dict(common, generate=1))
    most = inference(batch="max", **common)
    max_batch = float(most.batch) if bool(most.fits) else 0.0
    return grid, steps, float(first.ttft_s), max_batch, "" if bool(most.fits) else str(most.reason.item())


MOE_MLA_KERNELS = ("framework", "composed", "measured")


def _closed_loop(*, hardware, model, concurrency, prompt, generate, tp, ep, attention_dp, weights, activations, kv,
                 framework, hardware_overrides, model_overrides, moe_mla_kernels="framework", draft_model=None,
                 draft_len=0, acceptance=0.0, attention_weights=None, pp=1, engine=None, lengths="equal",
                 devices=None):
    """predict.serving at a fixed concurrency: every argument sweeps (lists are dimensions);
    draft_len > 0 or a draft_model is speculative decoding (the target's MTP head without
    a draft_model), with the draft length of least TPOT as `best_draft_len` when swept.
    Wafers: `devices` CS systems (or "min"), the GPU layout arguments refused by name."""
    for v in values_of(moe_mla_kernels):
        check_choice("moe_mla_kernels", v, MOE_MLA_KERNELS)
    draft = _speculation(draft_model, draft_len, acceptance)
    speculative = draft is not None
    hw_axis, specs = _hardware_axis(hardware)
    devices_min = isinstance(devices, str)
    if devices_min and devices != "min":
        raise InputError(f"devices={brief(devices)} is not allowed; allowed: a positive integer, 'min' or None")
    if devices is not None and not devices_min:
        check_positive("devices", devices, integer=True)
    backends = {name: backend_for(spec) for name, spec in specs.items()}
    kinds = {be.kind for be in backends.values()}  # "gpu", "wafer"
    for name, be in backends.items():
        if be.kind == "gpu" and devices is not None:
            raise InputError(f"devices={brief(devices)} is not allowed with concurrency on {name!r}; allowed: None (a "
                             "GPU instance is tp x attention_dp x pp devices)")
        if be.kind != "gpu":
            be.check_closed_loop(name, tp=tp, ep=ep, attention_dp=attention_dp, pp=pp, activations=activations,
                                 moe_mla_kernels=moe_mla_kernels, **engine)
    _check_dtype("weights", weights)
    _check_attention_weights(attention_weights, specs)
    for arg, v in (("activations", activations), ("kv", kv)):
        if v is not None:
            _check_dtype(arg, v)
    for arg, v in (("concurrency", concurrency), ("prompt", prompt), ("generate", generate), ("tp", tp), ("ep", ep),
                   ("attention_dp", attention_dp), ("pp", pp)):
        check_positive(arg, v, integer=True)
    for v in values_of(lengths):
        check_choice("lengths", v, LENGTHS)
    _check_generate(generate)
    framework = _check_framework(framework, specs, default="spec")
    check_engine_settings(engine, specs.values(), framework)  # ranges, and TensorRT-LLM's options under it only
    knob_axes = _knob_axes(hardware_overrides, specs)
    model_axes, models = _model_axes(model, model_overrides)
    extra = {**({"draft_model": draft} if speculative else {}), **({"devices_min": True} if devices_min else {})}
    ds = evaluate(_dispatch("closed_loop", specs, knob_axes, models, extra=extra or None),
                  categorical={"hardware": hw_axis, **model_axes, "weights": as_axis("weights", weights),
                               "attention_weights": as_axis("attention_weights", attention_weights),
                               "activations": as_axis("activations", activations), "kv": as_axis("kv", kv),
                               "framework": as_axis("framework", framework),
                               "moe_mla_kernels": as_axis("moe_mla_kernels", moe_mla_kernels),
                               "lengths": as_axis("lengths", lengths)},
                  hide=() if "gpu" in kinds else ("moe_mla_kernels",),
                  numeric={**_axes(concurrency=concurrency, prompt=prompt, generate=generate, tp=tp, ep=ep,
                                   attention_dp=attention_dp, pp=pp, devices=None if devices_min else devices,
                                   **({"draft_len": draft_len, "acceptance": acceptance} if speculative else {}),
                                   **{arg: v for arg, v in engine.items() if v is not None}),
                           **knob_axes},
                  attrs={"function": "predict.serving", "batching": "continuous, fixed concurrency (closed loop)",
                         "tpot": "(end-to-end - TTFT) / (generate - 1), mean over requests",
                         **({"speculative": f"draft={draft if isinstance(draft, str) else draft.name}"}
                            if speculative else {})})
    if held := held_out_error([specs[n] for n, be in backends.items() if be.kind == "gpu"], framework):
        ds.attrs["held_out_error"] = held
    if kinds - {"gpu"}:
        ds.attrs["wafer_scheduler"] = ("ASSUMED (Cerebras' serving scheduler is not public): each prompt a pipelined "
                                       "pass holding decoding for its busiest stage's share; workloads/wafer_serving.py")
    if "draft_len" in ds.dims:  # swept: the draft length with the least TPOT where it fits
        tpot = ds.tpot_s.where(ds.fits).fillna(np.inf)
        ds["best_draft_len"] = tpot.idxmin("draft_len").where(ds.fits.any("draft_len"))
        ds["best_draft_len"].attrs.update({"long_name": "draft length with the least time per output token"})
    return ds


def serving(*, hardware, model, devices=None, tp=1, pp=1, prompt=2048, generate=256, arrival_rate=None,
            ttft_slo=2.0, tpot_slo=0.05, quantile=0.9, weights=None, kv=None, acceptance=0.0, draft_len=0,
            draft_model=None, framework=None, hardware_overrides=None, concurrency=None, ep=1, attention_dp=1,
            activations=None, model_overrides=None, moe_mla_kernels="framework", attention_weights=None,
            token_budget=None, memory_fraction=None, max_running=None, recv_interval=None, lengths="equal",
            adp_timeout_iters=None, adp_batching_iters=None, batch_wait_timeout_iters=None,
            batch_wait_max_tokens_ratio=None):
    """Serving with continuous batching.

    With `concurrency` (requests in flight; a new one starts as each finishes, as the serving benchmarks of
    TensorRT-LLM, vLLM and SGLang run): mean `ttft_s`, `tpot_s` (= (end-to-end - TTFT) / (generate - 1)), `e2e_s`
    (both with the harness's first wave averaged in), the steady state's throughput per instance, device and user
    (Little's law: requests_per_s x (steady_ttft_s + (generate - 1) tpot_s) = concurrency), the mean `batch`, `fits`
    and `reason`, and the step's parts (workloads/concurrency.py: `framework_overhead_s` is the host overhead's
    share of TPOT, the framework's per-iteration and per-sequence constants over the iterations and sequences a
    token waits for; `kernel_tpot_s` the rest). One instance spans tp·attention_dp GPUs per pipeline stage;
    attention runs TP-way in each of `attention_dp` replicas holding concurrency/attention_dp requests; MoE layers
    run over all of a stage's GPUs, experts split `ep`-way. With `pp` stages each GPU holds 1/pp of the layers
    (their weights and every request's cache there) and min(requests, pp) micro-batches are in flight, each through
    every stage: PP buys capacity, not speed. Every argument sweeps.
    `weights` is the routed experts' format (None: the checkpoint's) and `attention_weights` (None: the same)
    every other matmul's, each computing in its format's math unless `activations` says (predict.inference).
    `token_budget` (closed loop) is the tokens one iteration of an attention replica carries, as the engine was
    set: TensorRT-LLM's max_num_tokens, vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size over its
    DP size (None: the framework's default, workloads/serving_capacity.framework_limits).
    `memory_fraction` (closed loop) is the share of memory the weights and KV cache may take: vLLM's
    gpu_memory_utilization and SGLang's mem_fraction_static of the device, TensorRT-LLM's
    free_gpu_memory_fraction of what the weights, activations and runtime leave free (None: 0.9,
    workloads/inference.MEMORY_UTILIZATION).
    `max_running` (closed loop): the most requests an attention replica runs at once (SGLang's
    --max-running-requests, vLLM's max_num_seqs, TensorRT-LLM's max_batch_size; None: the framework's default),
    `recv_interval` SGLang's --scheduler-recv-interval (decode iterations between polls for new requests; None:
    1), `adp_timeout_iters` / `adp_batching_iters` TensorRT-LLM's attention_dp_config with enable_balance (its
    timeout_iters / batching_wait_iters; None: off; adp_balance.py), `batch_wait_timeout_iters` / `_max_tokens_ratio`
    its batch waiting (None: off; batch_wait.py; these four with framework="trtllm" only). `lengths`: "equal"
    (every request the prompt and output given: those that finish together are replaced together) or "varied"
    (lengths differ between requests around those means, as benchmarks drawing them at random do: completions
    and arrivals spread, so a lockstep schedule takes its spread form, workloads/concurrency.DESYNCHRONIZED).
    `moe_mla_kernels`: "composed" (routed experts as grouped GEMMs on the framework's GEMM tables), "measured"
    (the framework's measured MoE-layer and EP dispatch / combine kernel tables) or "framework" (the default:
    composed in decode-only iterations, which the measured serving runs favour held out, and in an iteration
    that prefills as the framework's prefill_moe_kernels in specs/serving/frameworks.yaml says). MLA decode
    reads the framework's measured MLA kernel tables under all three, where it has them (analytical with
    absorbed weights where not).

    Without it, open loop: Poisson arrivals (workloads/serving.py). `arrival_rate` in requests/s per instance (a
    list sweeps it; default: a grid up to saturation). With draft_len > 0, speculative decoding by
    `draft_model` (or, when None, the target's MTP head: one more layer of its shape with its lm_head,
    speculative.mtp_draft) at per-token `acceptance`, open or closed loop; at a fixed concurrency draft_len and
    acceptance sweep, `tokens_per_step`, `decode_draft_s` and, when draft_len is swept, `best_draft_len` come
    back (on CS systems the static wafer model's speculation, the draft's regions beside the target's;
    devices="min" counts them). An open-loop point that does not fit says why in `reason`. Scalar categorical
    arguments and knobs only (sweep hardware or models by calling once per value)."""
    import xarray as xr
    engine = {arg: v for arg, v in locals().items() if arg in ENGINE_SETTINGS}  # the engine's settings
    weights, attention_weights = checkpoint_weights(model, model_overrides, weights, attention_weights)
    if concurrency is not None:
        if arrival_rate is not None:
            raise InputError(f"arrival_rate={brief(arrival_rate)} is not allowed with concurrency; allowed: None (the "
                             "closed-loop model has no arrival_rate yet)")
        return _closed_loop(hardware=hardware, model=model, concurrency=concurrency, prompt=prompt, generate=generate,
                            tp=tp, ep=ep, attention_dp=attention_dp, pp=pp, weights=weights, activations=activations, kv=kv,
                            framework=framework, hardware_overrides=hardware_overrides, model_overrides=model_overrides,
                            moe_mla_kernels=moe_mla_kernels, draft_model=draft_model, draft_len=draft_len,
                            acceptance=acceptance, attention_weights=attention_weights, devices=devices, lengths=lengths,
                            engine=engine)
    for arg, v, default in (("ep", ep, 1), ("attention_dp", attention_dp, 1), ("activations", activations, None),
                            ("model_overrides", model_overrides, None), ("moe_mla_kernels", moe_mla_kernels, "framework"),
                            ("lengths", lengths, "equal"), *((arg, engine[arg], None) for arg in ENGINE_SETTINGS)):
        if v is not default and v != default:
            raise InputError(f"{arg}={brief(v)} is not allowed without concurrency; allowed: {default} (the "
                             "open-loop model takes tp, pp, weights, kv)")

    from .workloads.serving import latencies
    from .workloads.speculative import time_per_token_s
    _check_one("serving", hardware=hardware, model=model, devices=devices, tp=tp, pp=pp, prompt=prompt,
               generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, quantile=quantile, weights=weights, kv=kv,
               acceptance=acceptance, draft_len=draft_len, draft_model=draft_model, attention_weights=attention_weights)
    hw = load_hardware(hardware)
    be = backend_for(hw)
    on_wafer = be.kind != "gpu"
    # CS systems speculate in their static model (the draft's regions on the same wafers)
    wafer_speculation = dict(draft_model=draft_model, draft_len=draft_len, acceptance=acceptance) \
        if on_wafer and draft_len > 0 else None
    if isinstance(devices, str):  # devices="min" on a wafer: the fewest systems that hold the model (and draft)
        devices = _min_systems(hardware=hardware, model=model, devices=devices, prompt=prompt, generate=generate,
                               weights=weights, kv=kv, hardware_overrides=hardware_overrides,
                               speculation=wafer_speculation)
    _check_slos(tp=tp, pp=pp, devices=devices, prompt=prompt, generate=generate, ttft_slo=ttft_slo,
                tpot_slo=tpot_slo, quantile=quantile)
    check_range("acceptance", acceptance, low=0.0, high=1.0, allowed="a probability in [0, 1]")
    check_range("draft_len", draft_len, low=0.0, high=np.inf, integer=True, allowed="an integer >= 0")
    if arrival_rate is not None:  # requests/s: a positive number or a flat list of distinct ones
        check_positive("arrival_rate", arrival_rate)
        as_axis("arrival_rate", arrival_rate)
    spec = load_model(model)
    _knob_axes(hardware_overrides, {hw.name: hw}, scalar_only=True)
    layout = be.serving_layout(tp=tp, pp=pp, devices=devices, hardware=hw.name)
    _check_one("serving", framework=framework)
    _check_framework(framework, {hw.name: hw}, default="spec")
    grid, steps, prefill_s, max_batch, why_none_fits = _step_table(
        hw, model, layout, prompt, generate, weights, kv, hardware_overrides, framework, attention_weights,
        speculation=wafer_speculation)
    per_device = be.instance_devices(tp=tp, pp=pp, devices=devices)

    if draft_len > 0 and not on_wafer:  # the draft on GPUs: a model, or the target's MTP head (speculative.mtp_draft)
        from .workloads.speculative import MTP_HEAD, draft_for
        d = inference(hardware=hw, model=draft_for(spec, MTP_HEAD if draft_model is None else draft_model),
                      batch=BATCH_GRID.tolist(), prompt=prompt, generate=generate, weights=weights, kv=kv,
                      hardware_overrides=hardware_overrides, framework=framework,
                      attention_weights=attention_weights, **layout)
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
    fits = (r["batch"] <= max_batch) & r["stable"]  # beyond saturation the queue grows without bound
    meets = fits & (r["ttft_quantile_s"] <= ttft_slo) & (r["tpot_s"] <= tpot_slo)
    reason = np.where(fits, "", why_none_fits or np.where(r["stable"], f"the running batch exceeds the largest that "
                      f"fits in memory (max_batch={max_batch:g})", "beyond saturation: the queue grows without bound"))
    out_rate = lam * generate
    ds = xr.Dataset({
        "batch": ("arrival_rate", r["batch"]), "tpot_s": ("arrival_rate", r["tpot_s"]),
        "ttft_mean_s": ("arrival_rate", r["ttft_mean_s"]), "ttft_quantile_s": ("arrival_rate", r["ttft_quantile_s"]),
        "e2e_mean_s": ("arrival_rate", r["e2e_mean_s"]), "prefill_utilization": ("arrival_rate", r["prefill_utilization"]),
        "output_tokens_per_s": ("arrival_rate", out_rate),
        "output_tokens_per_s_per_device": ("arrival_rate", out_rate / per_device),
        "output_tokens_per_s_per_user": ("arrival_rate", 1.0 / r["tpot_s"]),
        "fits": ("arrival_rate", fits), "reason": ("arrival_rate", reason), "meets_slo": ("arrival_rate", meets),
    }, coords={"arrival_rate": lam})
    best = np.where(meets, out_rate / per_device, 0.0)
    ds["goodput_tokens_per_s_per_device"] = best.max()
    ds["max_batch"] = max_batch
    with_units(ds)
    ds["arrival_rate"].attrs.update({"units": "1/s", "long_name": "request arrival rate"})
    ds.attrs.update({"function": "predict.serving", "hardware": hw.name, "model": spec.name,
                     "queueing_model": "Poisson arrivals; iterations decode the batch and prefill the new prompts (chunked)",
                     "ttft_slo_s": ttft_slo, "tpot_slo_s": tpot_slo, "quantile": quantile,
                     "speculative": f"draft_len={draft_len}, acceptance={acceptance}, draft={draft_model or 'MTP'}"})
    return ds


def _fixed_pools(*, prefill_hardware, decode_hardware, model, concurrency, prompt, generate, weights, activations,
                 kv, framework, prefill_tp, prefill_ep, prefill_attention_dp, prefill_workers, prefill_batch, decode_tp,
                 decode_ep, decode_attention_dp, decode_workers, draft_model=None, draft_len=0, acceptance=0.0,
                 attention_weights=None, prefill_pp=1, decode_pp=1, decode_devices=None, prefill_devices=None,
                 prefill_routing="random", decode_max_batch=None):
    """predict.disaggregated at a fixed concurrency (workloads/pools_closed_loop.disaggregated_closed_loop);
    draft_len > 0: the decode pool speculates (the target's MTP head without a draft_model).
    A CS-system decode pool: `decode_workers` instances of `decode_devices` systems each (an
    integer, or None / "min": the fewest that hold the model)."""
    if prefill_devices is not None:
        raise InputError(f"prefill_devices={brief(prefill_devices)} is not allowed with concurrency; allowed: None (a "
                         "prefill instance is prefill_tp x prefill_attention_dp x prefill_pp GPUs)")
    if decode_devices is not None and not isinstance(decode_devices, str):
        check_positive("decode_devices", decode_devices, integer=True)
    import xarray as xr

    from .backends.gpu import part_maths, pool_maths
    from .backends.kernel_tables import (framework_layout, framework_of, iteration_overhead_s, request_latency_s,
                                         resolve, served, serving_constants)
    from .backends import flag_problems
    from .layout import context_problems, serving_problems
    from .workloads.serving_capacity import draft_memory
    from .workloads.speculative import draft_problems
    from .workloads.inference import eager
    from .workloads.pools_closed_loop import PREFILL_ROUTINGS, disaggregated_closed_loop
    check_choice("prefill_routing", prefill_routing, PREFILL_ROUTINGS)
    if decode_max_batch is not None:
        check_positive("decode_max_batch", decode_max_batch, integer=True)
    sizes = dict(concurrency=concurrency, prompt=prompt, generate=generate, prefill_tp=prefill_tp, prefill_ep=prefill_ep,
                 prefill_attention_dp=prefill_attention_dp, prefill_workers=prefill_workers,
                 prefill_batch=prefill_batch, decode_tp=decode_tp, decode_ep=decode_ep,
                 decode_attention_dp=decode_attention_dp, decode_workers=decode_workers, prefill_pp=prefill_pp,
                 decode_pp=decode_pp)
    _check_one("disaggregated", prefill_hardware=prefill_hardware, decode_hardware=decode_hardware, model=model,
               weights=weights, activations=activations, kv=kv, framework=framework, draft_model=draft_model,
               draft_len=draft_len, acceptance=acceptance, attention_weights=attention_weights, **sizes)
    for arg, v in sizes.items():
        check_positive(arg, v, integer=True)
    _check_generate(generate)
    draft = _speculation(draft_model, draft_len, acceptance)
    _check_dtype("weights", weights)
    _check_attention_weights(attention_weights, {})  # the pools' hardware is checked for GPUs below
    spec = load_model(model)
    pools = {}
    dec_spec = load_hardware(decode_hardware, arg="decode_hardware")
    dec_be = backend_for(dec_spec)
    wafer_decode = dec_be.kind != "gpu"  # CS systems decode: GPUs prefill (workloads/wafer_serving.wafer_decode_pool)
    if wafer_decode:
        dec_be.check_decode_pool(dec_spec.name, decode_tp=decode_tp, decode_ep=decode_ep,
                                 decode_attention_dp=decode_attention_dp, decode_pp=decode_pp)
    elif decode_devices is not None:
        raise InputError(f"decode_devices={brief(decode_devices)} is not allowed with concurrency on "
                         f"{dec_spec.name!r}; allowed: None (a GPU decode instance is decode_tp x decode_attention_dp "
                         "x decode_pp GPUs)")
    pre_spec = load_hardware(prefill_hardware, arg="prefill_hardware")
    for side, hw_spec in (("prefill", pre_spec),) + ((("decode", dec_spec),) if not wafer_decode else ()):
        be = backend_for(hw_spec)
        if be.kind != "gpu":
            raise InputError(f"{side}_hardware={hw_spec.name!r} is not allowed with concurrency; allowed: GPUs (a CS "
                             "system can be the decode pool)")
        fw = resolve(hw_spec, framework)
        consts = serving_constants()
        # the decode pool replays CUDA graphs of its decode-only iterations; a prefill pool runs eagerly
        # (workloads/concurrency.py: only decode-only batches are captured)
        hw = served(be.numbers(hw_spec, {}, fw), fw)
        hw = hw if side == "decode" else eager(hw)  # no graph saving; its MoE layers by the framework's prefill rule
        pools[side] = (hw, be, {f"{side}_overhead_s": iteration_overhead_s(fw, spec),
                                f"{side}_overhead_s_per_sequence": consts["iteration_overhead_s_per_sequence"].get(fw, 0.0)},
                       request_latency_s(fw, spec))
    _, act, att_act, kvd, mixed = part_maths(pools["prefill" if wafer_decode else "decode"][0], weights=weights,
                                             model=spec, attention_weights=attention_weights, activations=activations,
                                             kv=kv or ("fp16" if wafer_decode else None))
    for side in ("prefill",) + (("decode",) if not wafer_decode else ()):  # attention as each framework runs it
        hw_side = pools[side][0]
        sizes[f"{side}_tp"], sizes[f"{side}_attention_dp"] = framework_layout(
            framework_of(hw_side), spec, hw_side, sizes[f"{side}_tp"], sizes[f"{side}_attention_dp"])
    prefill_tp, prefill_attention_dp = sizes["prefill_tp"], sizes["prefill_attention_dp"]
    decode_tp, decode_attention_dp = sizes["decode_tp"], sizes["decode_attention_dp"]
    pre_hw, pre_be, pre_h, pre_latency_s = pools["prefill"]
    link = pre_be.kv_link_bytes_per_s(pre_hw, tp=prefill_tp * prefill_attention_dp)
    if wafer_decode:  # the CS systems' decode pool: its own draft regions and cache, no host time per step
        from .workloads.speculative import draft_for
        kv_memory_of = "total"  # the wafer pool's room is its own (decode_pool["cap"])
        dec_hw, dec_h, speculating = None, {"decode_overhead_s": 0.0, "decode_overhead_s_per_sequence": 0.0}, \
            ({} if draft is None else dict(draft=draft_for(spec, draft), draft_len=draft_len, acceptance=acceptance))
        w = dec_be.numbers(dec_spec, {}, "none")
        pool = dec_be.decode_pool(w, spec, per_replica=concurrency / decode_workers, prompt=prompt, generate=generate,
                                  weights=weights, kv=kvd, devices=decode_devices, **speculating)
        link = min(link, pool["kv_ingest_bytes_per_s"])  # the slower end of the transfer
    else:
        dec_hw, _, dec_h, _ = pools["decode"]
        kv_memory_of = serving_constants()["kv_memory_of"].get(framework_of(dec_hw), "total")
        # the decode pool's draft (a model, or the target's MTP head), its memory and speculation
        speculating = {} if draft is None else dict(
            draft_memory(spec, draft, weights=weights, kv=kvd, tp=decode_tp, attention_dp=decode_attention_dp,
                         prompt=prompt, generate=generate), draft_len=draft_len, acceptance=acceptance)
    pre_maths, unsupported = pool_maths(pre_hw, dec_hw, weights=weights, attention_weights=attention_weights,
                                        activations=activations, shared=(act, att_act))  # each GPU pool's own
    r = disaggregated_closed_loop(
        prefill_hw=pre_hw, decode_hw=dec_hw, model=spec, weights=weights, activations=act, kv=kvd, **speculating,
        **pre_maths,
        attention_weights=attention_weights, attention_activations=att_act,
        **pre_h, **dec_h, waves=serving_constants()["benchmark_waves"],
        request_latency_s=pre_latency_s, kv_link_bytes_per_s=link, decode_pool=pool if wafer_decode else None,
        prefill_routing=prefill_routing, kv_memory_of=kv_memory_of,
        decode_max_batch=np.inf if decode_max_batch is None else float(decode_max_batch),
        **{k: float(v) for k, v in sizes.items()})
    problems = [p for side, tp, adp, ep, pp in (("prefill", prefill_tp, prefill_attention_dp, prefill_ep, prefill_pp),)
                + ((("decode", decode_tp, decode_attention_dp, decode_ep, decode_pp),) if not wafer_decode else ())
                for p in serving_problems(spec, tp=tp, attention_dp=adp, ep=ep, prefix=f"{side}_", pp=pp)] + mixed \
        + unsupported + context_problems(spec, prompt=prompt, generate=generate) \
        + draft_problems(spec, draft, draft_len)
    if wafer_decode:
        problems += pool["problems"]
        r["decode_devices"], r["pe_grid_decode"] = pool["devices"] + 0.0 * r["tpot_s"], pool["pe_grid_decode"]
    r = flag_problems({k: np.asarray(v) for k, v in r.items()}, problems)
    ds = xr.Dataset({k: np.asarray(v).item() for k, v in r.items()})
    with_units(ds)
    ds.attrs.update({"function": "predict.disaggregated", "mode": "fixed pools at a fixed concurrency (closed loop)",
                     "prefill_hardware": pre_hw.label, "decode_hardware": dec_spec.name if wafer_decode else dec_hw.label,
                     "model": spec.name, "prefill_routing": prefill_routing, "activations": act, "kv": kvd,
                     "held_out_error": held_out_error([pre_spec] + ([] if wafer_decode else [dec_spec]), framework),
                     "prefill_attention_run": f"tp {float(prefill_tp):g} x dp {float(prefill_attention_dp):g}",
                     "decode_attention_run": f"{float(pool['devices']):g} CS systems" if wafer_decode else
                     f"tp {float(decode_tp):g} x dp {float(decode_attention_dp):g}"})
    return ds


def disaggregated(*, prefill_hardware, decode_hardware, model, prefill_tp=1, decode_tp=1, prefill_devices=None,
                  decode_devices=None, prompt=2048, generate=256, ttft_slo=2.0, tpot_slo=0.05, quantile=0.9,
                  weights=None, kv=None, total_devices=64, framework=None, concurrency=None, activations=None,
                  prefill_ep=1, prefill_attention_dp=1, prefill_workers=1, prefill_batch=1, decode_ep=1,
                  decode_attention_dp=1, decode_workers=1, draft_model=None, draft_len=0, acceptance=0.0,
                  attention_weights=None, prefill_pp=1, decode_pp=1, prefill_routing="random", decode_max_batch=None):
    """Prefill and decode in separate pools.

    With `concurrency` (requests in flight, as the serving benchmarks run): fixed pools of
    `prefill_workers` instances of prefill_tp x prefill_attention_dp GPUs, each replica
    prefilling `prefill_batch` prompts per iteration, and `decode_workers` decode instances
    of decode_tp x decode_attention_dp GPUs; MoE layers split `*_ep`-way over an
    instance's GPUs; `*_pp` pipeline stages multiply an instance's GPUs, each stage holding
    1/pp of the layers. Returns mean ttft_s (prefill queueing + prefill + KV transfer over
    the prefill instance's link), tpot_s, throughput per device and user, fits and reason
    (workloads/pools_closed_loop.disaggregated_closed_loop). One value per argument. Pools of two
    GPU kinds compute in their own maths unless `activations` names one (backends/gpu.pool_maths).
    `prefill_routing`: "random" (each prompt to a prefill replica drawn at random, as SGLang's
    PD load balancer does; each replica queues its own) or "shared_queue" (one queue every
    free replica takes the next prompt from). `decode_max_batch`: the decode engine's most
    running requests per attention replica (max_batch_size, max-running-requests,
    max_num_seqs; None: what its KV cache holds); the requests beyond wait before prefill.

    Without it (workloads/disaggregated.py): capacities under the SLOs, the balancing
    ratio, goodput per device, the best integer split of `total_devices`, and the
    colocated baseline on the decode hardware. KV caches leave the prefill instance over
    its backend's link (every GPU its own NIC; a CS system's I/O). `framework` selects the
    kernel tables of the GPU pools (None: each GPU's default; a wafer pool takes none).
    `attention_weights`: every matmul's format but the routed experts' (`weights`), GPU
    pools only; weights=None: the checkpoint's formats (predict.inference)."""
    import xarray as xr
    weights, attention_weights = checkpoint_weights(model, None, weights, attention_weights)
    if concurrency is not None:
        return _fixed_pools(prefill_hardware=prefill_hardware, decode_hardware=decode_hardware, model=model,
                            concurrency=concurrency, prompt=prompt, generate=generate, weights=weights,
                            activations=activations, kv=kv, framework=framework, prefill_tp=prefill_tp,
                            prefill_ep=prefill_ep, prefill_attention_dp=prefill_attention_dp,
                            prefill_workers=prefill_workers, prefill_batch=prefill_batch, decode_tp=decode_tp,
                            decode_ep=decode_ep, decode_attention_dp=decode_attention_dp,
                            decode_workers=decode_workers, draft_model=draft_model, draft_len=draft_len,
                            acceptance=acceptance, attention_weights=attention_weights, prefill_pp=prefill_pp,
                            decode_pp=decode_pp, decode_devices=decode_devices, prefill_devices=prefill_devices,
                            prefill_routing=prefill_routing, decode_max_batch=decode_max_batch)
    for arg, v, default in (("activations", activations, None), ("prefill_ep", prefill_ep, 1),
                            ("draft_model", draft_model, None), ("draft_len", draft_len, 0),
                            ("prefill_attention_dp", prefill_attention_dp, 1), ("prefill_workers", prefill_workers, 1),
                            ("prefill_batch", prefill_batch, 1), ("decode_ep", decode_ep, 1),
                            ("decode_attention_dp", decode_attention_dp, 1), ("decode_workers", decode_workers, 1),
                            ("prefill_pp", prefill_pp, 1), ("decode_pp", decode_pp, 1),
                            ("prefill_routing", prefill_routing, "random"), ("decode_max_batch", decode_max_batch, None)):
        if v is not default and v != default:
            raise InputError(f"{arg}={brief(v)} is not allowed without concurrency; allowed: {default} (the "
                             "SLO-balancing analysis sizes the pools itself)")

    from .workloads.disaggregated import balance, best_split, decode_capacity, prefill_capacity
    _check_one("disaggregated", prefill_hardware=prefill_hardware, decode_hardware=decode_hardware, model=model,
               prefill_tp=prefill_tp, decode_tp=decode_tp, prefill_devices=prefill_devices,
               decode_devices=decode_devices, prompt=prompt, generate=generate, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
               quantile=quantile, weights=weights, kv=kv, total_devices=total_devices, attention_weights=attention_weights)
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
                      kv=kv, framework=fw_p, attention_weights=attention_weights, **pre_layout)
    grid, steps, _, max_batch, why_none = _step_table(dec_hw, model, dec_layout, prompt, generate, weights, kv, None,
                                                      fw_d, attention_weights)
    why_not = f"prefill: {first.reason.item()}" if not bool(first.fits) else f"decode: {why_none}" if why_none else ""
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
                        kv=kv, framework=fw_d, attention_weights=attention_weights)
    ds = xr.Dataset({
        "prefill_s": float(first.ttft_s), "kv_transfer_s": kv_s, "kv_transfer_bytes": kv_bytes,
        "prefill_requests_per_s": float(lam_p), "decode_requests_per_s": float(lam_d), "decode_batch": float(b_d),
        "prefill_per_decode_instances": float(ratio), "goodput_tokens_per_s_per_device": float(good),
        "n_prefill_instances": n_p, "n_decode_instances": n_d, "split_goodput_tokens_per_s_per_device": good_int,
        "colocated_goodput_tokens_per_s_per_device": float(colocated.goodput_tokens_per_s_per_device),
        "fits": not why_not, "reason": why_not,  # a pool that cannot hold one request serves none
    })
    with_units(ds)
    ds.attrs.update({"function": "predict.disaggregated", "prefill_hardware": pre_hw.name,
                     "decode_hardware": dec_hw.name, "model": spec.name})
    return ds
