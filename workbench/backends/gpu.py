"""The GPU backend: a HardwareSpec and knob overrides -> GpuNumbers, layout checks, and
the predict.* workloads on GPUs (workloads/inference.py, training.py; the primitives).

Layouts (tp, pp, dp, cp, ep) that cannot run are flagged points (fits=False and a reason),
never exceptions: TP not dividing the heads, PP beyond the layers, devices not a multiple
of the model-parallel group, EP not dividing TP (inference) or the experts and tp·dp·cp
(training); so are inference sequences beyond the model's max_seq_len and math in a
dtype the chip has no units for.
"""
from __future__ import annotations

import numpy as np

from ..primitives.attention import attention_prefill
from ..primitives.collectives import collective
from ..primitives.gemm import gemm
from ..primitives.hardware_numbers import EffCurve, GpuNumbers, LinkNumbers
from ..units import DTYPE_BYTES, PEAK_DTYPES, SPARSE_2_4
from ..errors import InputError
from ..layout import GpuLayout, Problem, context_problems, serving_problems
from . import flag_problems, per_spec
from .kernel_tables import (NONE, fits_for, framework_kv, framework_layout, framework_of, iteration_overhead_s,
                            request_latency_s, served, serving_constants, tables_of)

@per_spec
def _knobs(spec, every: bool = False) -> dict:
    """Knob -> (unit, value). Peaks are listed for the chip's dtypes; with `every`, the
    dtypes it lacks too (a hypothetical unit may be given a peak)."""
    out = {f"peak_flops_per_s_{dt}": ("FLOP/s", float(spec.peak_flops_per_s.get(dt, np.nan)))
           for dt in PEAK_DTYPES if dt in spec.peak_flops_per_s or every}
    out["hbm_bandwidth_bytes_per_s"] = ("B/s", spec.hbm.bandwidth_bytes_per_s)
    out["hbm_capacity_bytes"] = ("B", spec.hbm.capacity_bytes)
    for scope in ("scale_up", "scale_out"):
        ln = spec.link(scope)
        out[f"{scope}_bandwidth_bytes_per_s"] = ("B/s per direction", ln.unidir_bytes_per_s)
        out[f"{scope}_latency_s"] = ("s", ln.latency_s)
    # devices per scale-up domain (the scale-out network reaches the whole cluster, `devices`:
    # a bounded scale-out size is modelled nowhere, so it is no knob)
    out["scale_up_domain_size"] = ("devices", float(spec.link("scale_up").domain_size))
    out.update({"kernel_launch_s": ("s", spec.kernel_launch_s), "memory_latency_s": ("s", spec.memory_latency_s),
                "n_sms": ("SMs", float(spec.n_sms)), "collective_sms": ("SMs", float(spec.collective_sms)),
                "tdp_w": ("W", spec.tdp_w), "price_usd_per_hour": ("USD/h", spec.price_usd_per_hour),
                # software: a serving engine's host time per iteration (the spec's default
                # framework's fitted constant, before its per-MoE-layer time; given, it
                # replaces both, for any framework)
                "framework_overhead_s": ("s", float(serving_constants()["iteration_overhead_s"].get(
                    spec.default_framework or NONE, 0.0)))})
    return out


def _numbers(spec, overrides: dict, framework: str = NONE) -> GpuNumbers:
    """The spec's numbers with the overrides (knob -> scalar or array) in their place, and
    the fitted kernel surfaces of `framework` (kernel_tables.resolve; NONE: none). A
    hypothetical chip (overridden knobs, or a spec whose kernel_tables names another GPU)
    keeps the measured efficiency of each kernel shape and moves its roofline."""
    v = {k: val for k, (_, val) in _knobs(spec).items()}
    v.update(overrides)
    peaks = {dt: v[f"peak_flops_per_s_{dt}"] for dt in PEAK_DTYPES if f"peak_flops_per_s_{dt}" in v}

    def link(scope):
        ln = spec.link(scope)
        domain = overrides.get("scale_up_domain_size", ln.domain_size) if scope == "scale_up" else ln.domain_size
        return LinkNumbers(unidir_bytes_per_s=v[f"{scope}_bandwidth_bytes_per_s"], latency_s=v[f"{scope}_latency_s"],
                           domain_size=domain, busbw_eff=EffCurve(ln.busbw_eff.size, ln.busbw_eff.eff),
                           in_network_reduction=ln.in_network_reduction, table_latency_s=ln.latency_s)
    return GpuNumbers(
        label=spec.name, peak_flops_per_s=peaks, gemm_peak_eff=dict(spec.gemm_peak_eff),
        attention_peak_eff=dict(spec.attention_peak_eff),
        gemm_eff=EffCurve(spec.gemm_eff.size, spec.gemm_eff.eff),
        memory_eff=EffCurve(spec.memory_eff.size, spec.memory_eff.eff),
        hbm_bandwidth_bytes_per_s=v["hbm_bandwidth_bytes_per_s"], hbm_capacity_bytes=v["hbm_capacity_bytes"],
        memory_latency_s=v["memory_latency_s"], kernel_launch_s=v["kernel_launch_s"],
        n_sms=v["n_sms"] if "n_sms" in overrides else spec.n_sms,
        collective_sms=v["collective_sms"] if "collective_sms" in overrides else spec.collective_sms,
        gemm_tile_m=spec.gemm_tile_m, gemm_tile_n=spec.gemm_tile_n,
        scale_up=link("scale_up"), scale_out=link("scale_out"), tdp_w=v["tdp_w"],
        sparse_speedup=dict(spec.sparse_2_4_speedup),
        kernels=fits_for(spec, framework), framework=framework,
        measured_moe_prefill=serving_constants()["prefill_moe_kernels"].get(framework) == "measured",
        framework_overhead_s=overrides.get("framework_overhead_s"),
        compute_capability=spec.compute_capability)


FLASH3_COMPUTE_CAPABILITY = 9.0  # FlashAttention-3 is written for Hopper's warpgroup MMA and TMA (Shah et al. 2024)


def _kernel_problems(hw: GpuNumbers, kernel) -> list:
    """FlashAttention-3 asked of a GPU it does not run on: a flagged point (NaN, the reason)."""
    if kernel != "flash3" or hw.compute_capability == FLASH3_COMPUTE_CAPABILITY:
        return []
    cc = f"compute capability {hw.compute_capability:.1f}" if hw.compute_capability else "not a CUDA device"
    return [Problem(True, {}, lambda: f"kernel=flash3: FlashAttention-3 runs on Hopper (compute capability 9.0) "
                                      f"only; {hw.label} is {cc}")]


def default_activations(weights: str, hw: GpuNumbers) -> str:
    """Math dtype implied by the weight format: FP8 and INT8 deployments quantize
    activations too (W8A8; block-scaled FP8 per 1x128 activation run) where the chip has
    FP8 units, and FP8 runs weight-only (W8A16) elsewhere, as vLLM's FP8 Marlin kernels run
    FP8 checkpoints on Ampere and Turing (docs.vllm.ai features/quantization/fp8: "FP8 models
    will run on compute capability >= 7.5 (Turing) as weight-only W8A16"); int4 is weight-only
    (W4A16); fp4 runs as NVFP4 (W4A4) where the chip has FP4 units and W4A16 elsewhere;
    2:4-sparse weights run their dense format's math."""
    if weights in SPARSE_2_4:
        return SPARSE_2_4[weights]
    if weights in ("fp8", "fp8_block") and not np.all(np.isfinite(hw.peak("fp8"))):
        return "bf16"
    if weights in ("fp8", "fp8_block", "int8", "fp16", "fp32"):
        return weights
    if weights == "fp4" and np.all(np.isfinite(hw.peak("fp4"))):
        return "fp4"
    return "bf16"


def _unsupported_sparse(hw: GpuNumbers, dtype: str, fits, reason) -> tuple:
    """fits and reason of a 2:4 GEMM: False where the chip has no sparse tensor cores for its math."""
    ok = np.isfinite(hw.sparse_speedup_for(SPARSE_2_4[dtype]))
    return fits & ok, np.where(ok, reason, f"no 2:4 sparse {SPARSE_2_4[dtype]} tensor cores on {hw.label}")


def with_weights(hw: GpuNumbers, weights: str, activations: str) -> tuple:
    """(numbers, problems) of a deployment's weight format: 2:4-sparse weights set
    hw.sparse_weights (the layers' weight GEMMs on the sparse tensor cores) and need their
    dense format's math on a chip with sparse tensor cores for it."""
    if weights not in SPARSE_2_4:
        return hw, []
    import dataclasses
    dense = SPARSE_2_4[weights]
    if activations != dense:  # flagged; costed as the dense format (no sparse GEMM of another math)
        return hw, [Problem(True, {}, lambda: f"weights={weights} run {dense} math on the sparse tensor cores; "
                                              f"activations={activations} is not allowed with them")]
    missing = not np.all(np.isfinite(hw.sparse_speedup_for(dense)))
    return dataclasses.replace(hw, sparse_weights=True), \
        [Problem(True, {}, lambda: f"no 2:4 sparse {dense} tensor cores on {hw.label}")] * missing


def part_maths(hw: GpuNumbers, *, weights: str, attention_weights, activations, kv, model=None) -> tuple:
    """(numbers with the weight format applied (with_weights), math of the routed experts,
    the other matmuls' math (None where they are the experts'), the KV cache's dtype,
    problems): each part computes in its format's default math (default_activations)
    unless `activations` says one for all; the KV cache is `kv`, else what the serving
    framework of the numbers picks for `model` served in these weight formats
    (kernel_tables.framework_kv), else 16-bit
    (fp16 where the attention math is)."""
    act = activations or default_activations(weights, hw)
    att_act = None if attention_weights is None else activations or default_activations(attention_weights, hw)
    fw = framework_of(hw)
    kvd = kv or (framework_kv(fw, model, hw, (weights, attention_weights)) if model is not None else None) or \
        ("fp16" if (att_act or act) == "fp16" else "bf16")
    hw, problems = with_weights(hw, weights, act)
    if attention_weights is not None and weights in SPARSE_2_4:
        problems = problems + [Problem(True, {}, lambda: f"attention_weights={attention_weights} beside 2:4-sparse "
                                                         f"weights={weights} is not modelled; allowed: "
                                                         "attention_weights=None")]
    return hw, act, att_act, kvd, problems


def pool_maths(prefill: GpuNumbers, decode: GpuNumbers | None, *, weights: str, attention_weights, activations,
               shared: tuple) -> tuple[dict, list]:
    """A disaggregated deployment's maths per GPU pool, as (own, problems). Each pool computes
    the weights in its own default math (default_activations: NVFP4 as W4A4 on a Blackwell
    pool, W4A16 on a Hopper one) unless `activations` names one for both. `own`: the prefill
    pool's (prefill_activations, prefill_attention_activations) for
    workloads/pools_closed_loop, empty where they equal `shared`, the pair resolved on the
    decode pool. `problems`: the first pool without units for its math (its time would be
    NaN), flagged fits=False with the reason."""
    act = activations or default_activations(weights, prefill)
    att = None if attention_weights is None else activations or default_activations(attention_weights, prefill)
    own = {} if (act, att) == tuple(shared) else {"prefill_activations": act, "prefill_attention_activations": att}
    from ..workloads.inference import math_support
    for side, hw, maths in (("prefill", prefill, (act, att)), ("decode", decode, shared)):
        used = [m for m in maths if m is not None]
        supported, missing = math_support(hw, used) if hw is not None and used else (True, None)
        if not np.all(supported):
            return own, [Problem(True, {}, lambda m=missing, label=hw.label, side=side:
                                 f"no {m} math units on {label} (the {side} pool); allowed: activations a format "
                                 "both pools compute in")]
    return own, []


def _unsupported(hw: GpuNumbers, dtype: str, shape) -> tuple:
    """(fits, reason) of a kernel in `dtype`: False where the chip has no such math units
    (its time is NaN: there is no such kernel to time)."""
    supported = np.broadcast_to(np.isfinite(hw.peak(dtype)), shape)
    return supported, np.where(supported, "", f"no {dtype} math units on {hw.label}").astype(object)


class GpuBackend:
    kind = "gpu"
    layout_args = ("tp", "pp", "dp", "cp", "ep")

    knobs = staticmethod(_knobs)
    numbers = staticmethod(_numbers)

    def inference(self, hw: GpuNumbers, model, *, weights, activations, kv, tp, pp, prompt, generate, batch=None,
                  devices=None, ep=1.0, imbalance=1.0, draft_model=None, draft_len=0.0, acceptance=1.0,
                  attention_weights=None, **_) -> dict:
        from ..workloads import inference as _inf
        layout = GpuLayout.for_inference(tp=tp, pp=pp, ep=ep, devices=devices)
        hw, act, att_act, kvd, sparse_problems = part_maths(hw, weights=weights, attention_weights=attention_weights,
                                                            activations=activations, kv=kv, model=model)
        common = dict(hw=hw, model=model, tp=layout.tp, pp=layout.pp, dp=layout.dp, prompt=prompt,
                      generate=generate, weights=weights, activations=act, kv=kvd, ep=layout.ep, imbalance=imbalance,
                      attention_weights=attention_weights, attention_activations=att_act)
        if batch is None:
            mem = dict(prompt=prompt, generate=generate, tp=tp, pp=pp, w_bytes=DTYPE_BYTES[attention_weights or weights],
                       kv_bytes=DTYPE_BYTES[kvd], stream_bytes=max(DTYPE_BYTES[att_act or act], 2.0),
                       routed_w_bytes=None if attention_weights is None else DTYPE_BYTES[weights])
            extra = {}
            if draft_model is not None:  # where it drafts, the draft's weights and cache beside the target's
                from ..workloads.speculative import draft_for
                d, drafts = _inf.memory_per_device(hw, draft_for(model, draft_model), batch=1.0, **mem), \
                    np.asarray(draft_len, float) > 0
                extra = dict(extra_fixed_bytes=d["weights_bytes"] * drafts, extra_per_seq_bytes=d["kv_per_seq_bytes"] * drafts)
            batch = _inf.max_batch(hw, model, **mem, **extra)
            r = _inf.inference(batch=np.maximum(batch, 1.0), **common)
            r["fits"] = r["fits"] & (batch >= 1)
            r["batch"] = batch
        else:
            r = _inf.inference(batch=batch, **common)
        if draft_model is not None:
            from ..workloads.speculative import draft_for
            r = self._speculative(r, common, batch=np.maximum(batch, 1.0), draft_model=draft_for(model, draft_model),
                                  draft_len=draft_len, acceptance=acceptance, layout=layout)
        r["activations"] = np.array(act, dtype=object)  # constant per call: broadcast as a view
        r["kv"] = np.array(kvd, dtype=object)
        problems = layout.problems(model, phase="inference") + context_problems(model, prompt=prompt,
                                                                                generate=generate) + sparse_problems
        if draft_model is not None:
            from ..workloads.speculative import draft_problems
            problems += draft_problems(model, draft_model, draft_len)  # a head ("mtp", "eagle") shares the tokenizer
        return flag_problems(r, problems)

    @staticmethod
    def _speculative(r: dict, common: dict, *, batch, draft_model, draft_len, acceptance, layout) -> dict:
        """Speculative decoding on the same GPUs: the draft's step at the batch, and the
        target verifying k+1 positions per sequence, its matmuls at batch x (k+1) rows while
        each sequence's KV cache is read once (the step at that many rows, its attention
        replaced by the batch's with k+1 queries per sequence: layers.decode_attention, where
        MLA computes every position's heads); speculative.with_speculation does the rest."""
        from ..workloads import inference as _inf
        from ..workloads.speculative import with_speculation
        k = np.asarray(draft_len, float)
        wide = _inf.inference(batch=batch * (k + 1.0), **common)
        folded = _inf.inference(batch=batch, queries=k + 1.0, **common) if common["model"].is_mla else r
        verify = wide["tpot_s"] - wide["decode_attention_s"] + folded["decode_attention_s"]
        draft = _inf.inference(batch=batch, **dict(common, model=draft_model))
        extra = (draft["weights_per_device_bytes"] + draft["kv_cache_per_device_bytes"]) * (k > 0)
        return with_speculation(r, draft_step_s=draft["tpot_s"], verify_step_s=verify, draft_len=k,
                                draft_prefill_s=draft["ttft_s"],
                                acceptance=acceptance, generate=common["generate"],
                                out_tokens=layout.dp * batch * common["generate"],
                                devices=layout.tp * layout.pp * layout.dp, extra_memory_bytes=extra)

    def training(self, hw: GpuNumbers, model, *, precision, zero, recompute, attention, tp, pp, cp, ep, seq_len,
                 global_batch, micro_batch, virtual_stages, devices=None, dp=None, expert_tp=None,
                 moe_host_s_per_local_expert=None, grad_bytes_per_param=None, **_) -> dict:
        from ..primitives.attention import resolve_kernel
        from ..workloads.training import training
        attention = resolve_kernel(hw, attention)  # None: the framework's kernel where there are tables
        if attention == "framework" and hw.kernels is None:
            raise InputError(f"attention='framework' is not allowed on {hw.label} without kernel tables; allowed: "
                             "framework= a serving framework with tables (workbench list frameworks), or attention "
                             "flash1/flash2/flash3/materialized")
        layout = GpuLayout.for_training(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, devices=devices, micro_batch=micro_batch,
                                        virtual_stages=virtual_stages, zero=int(zero), recompute=recompute,
                                        expert_tp=expert_tp)
        r = training(hw=hw, model=model, tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
                     expert_tp=layout.expert_tp,
                     seq_len=seq_len, global_batch=global_batch, micro_batch=layout.micro_batch, precision=precision,
                     zero=layout.zero, recompute=layout.recompute, virtual_stages=layout.virtual_stages,
                     attention=attention, moe_host_s_per_local_expert=moe_host_s_per_local_expert,
                     grad_bytes_per_param=grad_bytes_per_param)
        # what ran: the attention kernel and the framework whose tables timed the kernels
        r["attention_kernel"] = np.array(attention, dtype=object)
        r["kernel_tables"] = np.array(tables_of(hw), dtype=object)
        return flag_problems(r, layout.problems(model, phase="training", seq_len=seq_len, global_batch=global_batch)
                            + _kernel_problems(hw, attention))

    def closed_loop(self, hw: GpuNumbers, model, *, concurrency, prompt, generate, tp, attention_dp, ep, weights,
                    activations, kv, imbalance=1.0, moe_mla_kernels="framework", draft_model=None, draft_len=0.0,
                    acceptance=0.0, attention_weights=None, pp=1.0, token_budget=None, memory_fraction=None,
                    max_running=None, recv_interval=None, lengths="equal", adp_timeout_iters=None,
                    adp_batching_iters=None, batch_wait_timeout_iters=None, batch_wait_max_tokens_ratio=None,
                    **_) -> dict:
        """Fixed-concurrency serving (workloads/concurrency.py) under the framework whose
        tables the numbers carry: its token budget and per-iteration host overhead; with a
        `draft_model` (a spec, or speculative.MTP_HEAD), speculative decoding. A
        `token_budget` (tokens one iteration of an attention replica carries) or
        `memory_fraction` (of the device, or of its free memory under TensorRT-LLM's rule,
        given to the weights and KV cache), `max_running` (requests an attention replica runs
        at once), `recv_interval` (SGLang's polling) or `adp_timeout_iters` /
        `adp_batching_iters` (TensorRT-LLM's attention-DP balancing; None: off, and
        TensorRT-LLM's defaults 50 / 10 once one is given) or `batch_wait_timeout_iters` /
        `batch_wait_max_tokens_ratio` (its batch waiting; None: off) replaces the framework's default;
        `lengths` "varied" desynchronizes a lockstep schedule (concurrency.DESYNCHRONIZED)."""
        from ..workloads import adp_balance, concurrency as cc, serving_capacity as capacity
        import dataclasses
        fw = framework_of(hw)
        # the serving engine replays its iterations from CUDA graphs (the tables time kernels one by one)
        # moe_mla_kernels "framework": decode composed, an iteration that prefills by the framework's
        # rule (hw.measured_moe_prefill); "composed" or "measured": that path in every iteration
        hw = dataclasses.replace(served(hw, fw), measured_moe_mla=moe_mla_kernels == "measured",
                                 measured_moe_prefill=hw.measured_moe_prefill if moe_mla_kernels == "framework"
                                 else moe_mla_kernels == "measured")
        hw, act, att_act, kvd, sparse_problems = part_maths(hw, weights=weights, attention_weights=attention_weights,
                                                            activations=activations, kv=kv, model=model)
        consts = serving_constants()
        tp, attention_dp = framework_layout(fw, model, hw, tp, attention_dp)  # as the framework runs it
        budget, max_sequences = capacity.framework_limits(fw, hw, attention_dp)
        budget = budget if token_budget is None else token_budget  # the engine's settings, when given
        max_sequences = max_sequences if max_running is None else np.minimum(max_sequences, max_running)
        fraction = cc.MEMORY_UTILIZATION if memory_fraction is None else memory_fraction
        overhead_s = iteration_overhead_s(fw, model) if hw.framework_overhead_s is None \
            else hw.framework_overhead_s  # the knob, when given, replaces the framework's constants
        r = cc.closed_loop(hw=hw, model=model, concurrency=concurrency, prompt=prompt, generate=generate, tp=tp,
                           attention_dp=attention_dp, ep=ep, weights=weights, activations=act, kv=kvd,
                           overhead_s=overhead_s, waves=consts["benchmark_waves"],
                           overhead_s_per_sequence=consts["iteration_overhead_s_per_sequence"].get(fw, 0.0),
                           schedule=consts["schedule"].get(fw, "clumped"), lengths=lengths,
                           recv_interval=1.0 if recv_interval is None else recv_interval,
                           **adp_balance.settings(adp_timeout_iters, adp_batching_iters),
                           batch_wait_timeout_iters=0.0 if batch_wait_timeout_iters is None else batch_wait_timeout_iters,
                           batch_wait_max_tokens_ratio=0.0 if batch_wait_max_tokens_ratio is None
                           else batch_wait_max_tokens_ratio,
                           request_latency_s=request_latency_s(fw, model),
                           kv_memory_of=consts["kv_memory_of"].get(fw, "total"),
                           kv_reserved=consts["kv_reserved"].get(fw, "held"),
                           token_budget=budget, max_sequences=max_sequences, imbalance=imbalance,
                           attention_weights=attention_weights, attention_activations=att_act,
                           **({} if draft_model is None else capacity.draft_memory(
                               model, draft_model, weights=weights, kv=kvd, tp=tp, attention_dp=attention_dp,
                               prompt=prompt, generate=generate)),
                           draft_len=draft_len, acceptance=acceptance, pp=pp, memory_fraction=fraction)
        r["activations"] = np.array(act, dtype=object)
        r["kv"] = np.array(kvd, dtype=object)
        r["attention_tp_run"], r["attention_dp_run"] = tp + 0.0 * r["tpot_s"], attention_dp + 0.0 * r["tpot_s"]
        problems = serving_problems(model, tp=tp, attention_dp=attention_dp, ep=ep, pp=pp) + \
            context_problems(model, prompt=prompt, generate=generate) + sparse_problems
        if draft_model is not None:
            from ..workloads.speculative import draft_problems
            problems += draft_problems(model, draft_model, draft_len)
        return flag_problems(r, problems)

    def gemm(self, hw: GpuNumbers, *, dtype, m, n, k, **_) -> dict:
        b = DTYPE_BYTES[SPARSE_2_4.get(dtype, dtype)]  # a 2:4 format: dense activations and output
        g = gemm(hw=hw, m=m, n=n, k=k, dtype=dtype, a_bytes=b, b_bytes=DTYPE_BYTES[dtype], c_bytes=b)
        fits, reason = _unsupported(hw, dtype, np.shape(g["time_s"]))
        if dtype in SPARSE_2_4:
            fits, reason = _unsupported_sparse(hw, dtype, fits, reason)
        return {"time_s": g["time_s"], "flops_per_s": g["flops"] / g["time_s"],
                "compute_s": g["compute_s"], "memory_s": g["memory_s"], "flops": g["flops"],
                "bytes": g["bytes"], "fits": fits, "reason": reason,
                "bound": np.where(fits, np.where(g["compute_bound"], "compute", "memory"), "unsupported")}

    def attention(self, hw: GpuNumbers, *, dtype, causal, kernel, batch, seq_len, n_heads, head_dim, n_kv_heads=None,
                  **_) -> dict:
        if kernel == "framework" and hw.kernels is None:
            raise InputError(f"kernel='framework' is not allowed on {hw.label} without kernel tables; allowed: "
                             "a framework with tables (workbench list frameworks) or kernel flash1/flash2/flash3/"
                             "materialized")
        a = attention_prefill(hw=hw, batch=batch, seq_len=seq_len, n_heads=n_heads, head_dim=head_dim,
                              n_kv_heads=n_kv_heads, causal=bool(causal), dtype=dtype, act_bytes=DTYPE_BYTES[dtype],
                              kernel=kernel)
        fits, reason = _unsupported(hw, dtype, np.shape(a["time_s"]))
        r = {"time_s": a["time_s"], "flops_per_s": a["flops"] / a["time_s"], "flops": a["flops"],
             "bytes": a["bytes"], "compute_s": a["compute_s"], "memory_s": a["memory_s"],
             "backward_s": a["backward_s"], "fits": fits, "reason": reason}
        kv = n_heads if n_kv_heads is None else n_kv_heads
        grouping = Problem(np.mod(n_heads, kv) != 0, {"n_heads": n_heads, "n_kv_heads": kv},
                           lambda n_heads, n_kv_heads: f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads} "
                                                       "(each KV head serves a whole group of query heads)")
        return flag_problems(r, [grouping] + _kernel_problems(hw, kernel))

    def collective(self, hw: GpuNumbers, *, op, devices, size_bytes, **_) -> dict:
        c = collective(hw=hw, op=op, size=size_bytes, devices=devices)
        return {"time_s": c["time_s"], "bus_bandwidth_bytes_per_s": c["bus_bandwidth_bytes_per_s"],
                "algorithm_bandwidth_bytes_per_s": c["algorithm_bandwidth_bytes_per_s"]}

    def instance_devices(self, *, tp=1, pp=1, devices=None) -> float:
        """Devices one serving instance occupies."""
        return float(tp * pp)

    def kv_link_bytes_per_s(self, hw: GpuNumbers, *, tp=1, devices=None) -> float:
        """Rate at which an instance ships KV caches out: every GPU its own NIC."""
        return hw.link("scale_out").unidir_bytes_per_s * tp

    def serving_layout(self, *, tp=1, pp=1, devices=None, hardware: str = "", prefix: str = "") -> dict:
        """The inference arguments of one serving instance: tp·pp GPUs (`devices`, when
        given, must say so: it would be ignored otherwise)."""
        if devices is not None and devices != tp * pp:
            raise InputError(f"{prefix}devices={devices!r} is not allowed on {hardware!r} with {prefix}tp={tp}, "
                             f"pp={pp}; allowed: {prefix}devices={tp * pp} or none (a GPU serving instance is "
                             "tp*pp devices)")
        return dict(tp=tp, pp=pp)


BACKEND = GpuBackend()
