"""The wafer backend (Cerebras WSE in a CS system): a WaferSpec or SystemSpec and knob
overrides -> WaferNumbers, and the predict.* workloads on wafers (workloads/wafer_*.py,
primitives/mesh.py).

A wafer model is laid out by `devices` (CS systems), `pe_grid` and `mapping`; the GPU
layout arguments (tp, pp, cp, ep, zero, ...) and a training precision other than bf16 do
not apply and are refused by name. Layouts that cannot run (more pipelined systems than
layers, more data-parallel systems than sequences), inference sequences beyond the
model's max_seq_len, GEMMs in a dtype the PEs lack or whose tiles exceed a PE's usable
SRAM are flagged points. An inference point whose layer regions (or streamed layers) do
not fit in the wafers' SRAM is flagged with its times and rates NaN, its memory kept
(wafer_inference.no_times_where): nothing is placed to time. `batch` is sequences per
replica, as on GPUs: one replica over `devices` systems under placement "regions",
`devices` replicas under "streaming" (reported as `replicas`).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, brief
from ..layout import Problem, WaferLayout, context_problems
from ..primitives.hardware_numbers import WaferNumbers
from ..primitives._array import choose
from ..primitives.mesh import gemm_bytes_per_pe, gemv_bytes_per_pe, memory_port_bound, mesh_gemm, mesh_gemv
from ..specs import system_of
from ..units import DTYPE_BYTES, DTYPES, SPARSE_2_4
from . import flag_problems, per_spec

_WAFER_KNOBS = {  # knob -> (unit, WaferSpec field)
    "sram_per_pe_bytes": ("B", "sram_per_pe_bytes"),
    "sram_reserved_per_pe_bytes": ("B", "sram_reserved_per_pe_bytes"),
    "mesh_width": ("PEs", "program_cols"), "mesh_height": ("PEs", "program_rows"),
    "clock_hz": ("Hz", "clock_hz"),
    "mem_read_bytes_per_cycle": ("B/cycle per PE", "mem_read_bytes_per_cycle"),
    "mem_write_bytes_per_cycle": ("B/cycle per PE", "mem_write_bytes_per_cycle"),
    "link_bytes_per_cycle": ("B/cycle per link", "link_bytes_per_cycle"),
    "hop_cycles": ("cycles", "hop_cycles"), "stage_cycles": ("cycles", "stage_cycles"),
    "map_call_cycles": ("cycles", "map_call_cycles"),
}
_SYSTEM_KNOBS = {"io_bytes_per_s": ("B/s", "io_bytes_per_s"), "io_latency_s": ("s", "io_latency_s"),
                 "weight_store_bandwidth_bytes_per_s": ("B/s", "weight_store_bandwidth_bytes_per_s"),
                 "step_fixed_s": ("s", "step_fixed_s"), "layer_stream_latency_s": ("s", "layer_stream_latency_s"),
                 "service_request_latency_s": ("s", "service_request_latency_s")}


def _per_point_draft(run, draft_len) -> dict:
    """`run(draft_len)` where a sweep of draft_len mixes points that draft (k > 0) with
    points that do not: the first with the draft's regions on the wafers (its memory, its
    systems under devices="min"), the second without them, as each would be deployed; a
    sweep that does not mix is one call. Keys only the drafting points have (tokens_per_step)
    are 1 where nothing is drafted."""
    k = np.asarray(draft_len, dtype=float)
    if not (np.any(k > 0) and np.any(k <= 0)):
        return run(draft_len)
    drafting, plain = run(draft_len), run(0.0)
    return {key: np.where(k > 0, drafting.get(key, 1.0), plain.get(key, 1.0)) for key in {**plain, **drafting}}


def _grid_problems(w: WaferNumbers, **grids) -> list[Problem]:
    """A region side the program mesh cannot hold (larger than its short side: a region is a
    square of PEs) as flagged points naming the argument, for each grid argument given."""
    side = w.max_square_grid
    text = "/".join(f"{v:g}" for v in np.unique(side))

    def message(name):
        return lambda **v: (f"{name}={v[name]} exceeds the largest square region of {w.label}'s program mesh "
                            f"({text} PEs a side)")
    return [Problem(np.asarray(value, float) > side, {name: value}, message(name))
            for name, value in grids.items() if value is not None]


@per_spec
def _knobs(spec, every: bool = False) -> dict:
    system, wafer = system_of(spec)
    out = {k: (unit, getattr(wafer, f)) for k, (unit, f) in _WAFER_KNOBS.items()}
    out.update({f"fmas_per_cycle_{dt}": ("FMA/cycle per PE", float(wafer.simd_fmas_per_cycle.get(dt, np.nan)))
                for dt in DTYPES if dt in wafer.simd_fmas_per_cycle or (every and dt != "bf16")})
    out.update({k: (unit, getattr(system, f)) for k, (unit, f) in _SYSTEM_KNOBS.items()})
    # what a system costs to run, for the cost outputs (predict: costs.per_point)
    out.update({"power_w": ("W", system.power_w), "price_usd_per_hour": ("USD/h", system.price_usd_per_hour)})
    return out


def _numbers(spec, overrides: dict, framework: str = "none") -> WaferNumbers:
    """The system's numbers with the overrides in place (GPU serving frameworks do not
    apply: predict refuses a framework for a wafer)."""
    system, wafer = system_of(spec)
    v = {k: val for k, (_, val) in _knobs(spec).items()}
    v.update(overrides)
    fmas = {dt: v[f"fmas_per_cycle_{dt}"] for dt in DTYPES if f"fmas_per_cycle_{dt}" in v}
    return WaferNumbers(label=spec.name, fmas_per_cycle_by_dtype=fmas,
                        **{k: v[k] for k in _WAFER_KNOBS}, **{k: v[k] for k in _SYSTEM_KNOBS})


_WHY = {"zero": "weights stream from MemoryX, where the optimizer runs: there are no ZeRO shards",
        "token_budget": "a GPU engine's tokens per iteration; the wafer prefills a whole prompt as a pipeline of chunks",
        "memory_fraction": "a GPU engine's memory share; the wafer's KV cache is the SRAM its layer regions leave",
        "max_running": "a GPU engine's cap on running requests; the wafer runs what its SRAM's KV room holds",
        "recv_interval": "SGLang's polling for new requests; the wafer's scheduler is modelled on its own",
        "adp_timeout_iters": "TensorRT-LLM's attention-DP balancing; a wafer has no attention replicas",
        "adp_batching_iters": "TensorRT-LLM's attention-DP balancing; a wafer has no attention replicas",
        "batch_wait_timeout_iters": "TensorRT-LLM's batch waiting; the wafer's scheduler is modelled on its own",
        "batch_wait_max_tokens_ratio": "TensorRT-LLM's batch waiting; the wafer's scheduler is modelled on its own",
        "moe_mla_kernels": "GPU kernel tables; the wafer's layers are its mesh kernels",
        "precision": "the wafer computes bf16 on its fp16 datapath",
        "moe_host_s_per_local_expert": "a wafer runs its compiled program, with no host launch per expert",
        "micro_batch": "the compiler picks a system's micro-batch, the largest whose checkpoints fit in SRAM "
                       "(modelzoo micro_batch_size auto), reported as micro_batch"}


def _refuse(args: dict, hardware: str, layout: str = "a wafer model is laid out by devices, pe_grid and mapping") -> None:
    """GPU layout arguments given to a wafer: an error naming them (they would be ignored)."""
    for name, (value, default) in args.items():
        values = np.atleast_1d(np.asarray(getattr(value, "values", value), dtype=object)).ravel()
        bad = [v for v in values if v != default]
        if bad:
            raise InputError(f"{name}={brief(bad[0])} is not allowed on {hardware!r}; allowed: {name}={default!r} "
                             f"({_WHY.get(name, layout)})")


def _sparse_problems(weights) -> list:
    """A 2:4 weight format asked of a wafer: one flag (it is a GPU tensor-core format)."""
    return [Problem(True, {}, lambda: f"weights={weights}: 2:4 structured sparsity is a GPU sparse-tensor-core "
                                      "format, not modelled on wafers")] if weights in SPARSE_2_4 else []


def _fewest_systems(model, **size) -> tuple:
    """(devices="min": the fewest systems that hold the model at the given sizes, NaN
    replaced by 1; the flag where no number of systems holds a layer)."""
    from ..workloads.wafer_capacity import wafer_min_devices
    devices = wafer_min_devices(model=model, **size)
    problem = Problem(np.isnan(devices), {}, lambda: f"no number of systems holds a layer of {model.name}: a "
                      "layer is larger than a wafer's largest square region")
    return np.nan_to_num(devices, nan=1.0), [problem]


class WaferBackend:
    kind = "wafer"
    layout_args = ("devices", "pe_grid", "mapping", "placement")

    knobs = staticmethod(_knobs)
    numbers = staticmethod(_numbers)

    def check_inference(self, name: str, *, tp, pp, ep, activations, batch_max: bool, placement) -> None:
        _refuse({"tp": (tp, 1), "pp": (pp, 1), "ep": (ep, 1)}, name)
        acts = [a for a in np.atleast_1d(np.asarray(activations, dtype=object)).ravel() if a is not None]
        bad = [a for a in acts if a not in ("fp16", "bf16")]
        if bad:
            raise InputError(f"activations={bad[0]!r} is not allowed on {name!r}; allowed: fp16, bf16 "
                             "(the PE datapath is FP16/FP32; narrower weights are a storage format)")
        if batch_max and "streaming" in np.atleast_1d(np.asarray(placement, dtype=object)):
            raise InputError("batch='max' is not allowed with placement='streaming'; allowed: a positive integer")

    def check_closed_loop(self, name: str, *, tp, ep, attention_dp, pp, activations, moe_mla_kernels,
                          **engine) -> None:
        """predict.serving at a fixed concurrency: the GPU layout and engine settings
        (predict_serving.ENGINE_SETTINGS) refused by name."""
        _refuse({"tp": (tp, 1), "ep": (ep, 1), "attention_dp": (attention_dp, 1), "pp": (pp, 1),
                 "moe_mla_kernels": (moe_mla_kernels, "framework"),
                 **{arg: (v, None) for arg, v in engine.items()}}, name)
        self.check_inference(name, tp=1, pp=1, ep=1, activations=activations, batch_max=False, placement="regions")

    def check_decode_pool(self, name: str, **layout) -> None:
        """predict.disaggregated's GPU decode layout arguments refused by name for a CS pool."""
        _refuse({arg: (v, 1) for arg, v in layout.items()}, name)

    def decode_pool(self, w: WaferNumbers, model, *, per_replica, prompt, generate, weights, kv, devices=None,
                    draft=None, draft_len=0.0, acceptance=0.0) -> dict:
        """A decode pool of `devices` systems per instance (None or "min": the fewest that
        hold the model at batch 1) for the fixed pools (workloads/wafer_serving.wafer_decode_pool),
        with its layout's problems and the rate it takes KV caches in (each system its
        own layers' over its own I/O)."""
        from ..workloads.wafer_serving import wafer_decode_pool
        problems = []
        if devices is None or isinstance(devices, str):
            if devices not in (None, "min"):
                raise InputError(f"decode_devices={brief(devices)} is not allowed; allowed: a positive integer, 'min' "
                                 "or None")
            devices, problems = _fewest_systems(w=w, model=model, batch=1.0, prompt=prompt, generate=generate,
                                                weights=weights, kv=kv, draft=draft)
        pool = wafer_decode_pool(w=w, model=model, per_replica=per_replica, prompt=prompt, generate=generate,
                                 devices=float(devices), weights=weights, kv=kv, draft=draft, draft_len=draft_len,
                                 acceptance=acceptance)
        reason = str(np.asarray(pool["reason"]).item())
        problems += [Problem(~np.asarray(pool["fits"]), {}, lambda: reason)]
        problems += WaferLayout(systems=float(devices)).problems(model, phase="inference")
        # each system takes its own layers' caches over its own I/O
        return {**pool, "problems": problems, "kv_ingest_bytes_per_s": w.io_bytes_per_s * float(devices)}

    def check_training(self, name: str, **args) -> None:
        _refuse(args, name, "wafer training is laid out by devices, the data-parallel systems")

    def inference(self, w: WaferNumbers, model, *, draft_len=0.0, **args) -> dict:
        """The static model (_inference), each point with the draft's regions only where it
        drafts (_per_point_draft)."""
        return _per_point_draft(lambda k: self._inference(w, model, draft_len=k, **args), draft_len)

    def _inference(self, w: WaferNumbers, model, *, weights, kv, mapping, placement, prompt, generate=None, batch=None,
                   devices=None, pe_grid=None, decode_pe_grid=None, prefill_pe_grid=None, devices_min=False, tp=1.0,
                   draft_model=None, draft_len=0.0, acceptance=1.0, **_) -> dict:
        """`generate` None: the longest the KV cache allows (generate="max"); `batch` None:
        the largest that fits; `devices_min`: the fewest systems that hold the model at
        batch (1 when batch is "max") and generate (1 when "max")."""
        from ..workloads.speculative import draft_for, draft_problems
        from ..workloads.wafer_capacity import wafer_max_batch, wafer_max_generate
        from ..workloads.wafer_inference import wafer_inference
        from ..workloads.wafer_streaming import streaming_inference
        kvd = kv or "fp16"
        grid = decode_pe_grid if decode_pe_grid is not None else pe_grid
        draft = draft_for(model, draft_model) if np.any(np.asarray(draft_len) > 0) else None
        size = dict(w=w, model=model, prompt=prompt, weights=weights, kv=kvd, mapping=mapping, draft=draft)
        problems = _sparse_problems(weights)
        if devices_min:
            devices, flags = _fewest_systems(batch=1.0 if batch is None else batch, generate=1.0 if generate is None
                                             else generate, pe_grid=grid, **size)
            problems += flags
        layout = WaferLayout(systems=1.0 + 0.0 * tp if devices is None else devices, pe_grid=grid,
                             mapping=mapping, placement=placement)
        problems += _grid_problems(w, pe_grid=pe_grid, decode_pe_grid=decode_pe_grid, prefill_pe_grid=prefill_pe_grid)
        generated_max = generate is None
        if generated_max:
            generate, side = wafer_max_generate(devices=layout.systems, batch=1.0 if batch is None else batch,
                                                pe_grid=grid, **size)
            problems.append(Problem(generate < 1, {}, lambda: "no generated token fits in the KV cache"))
            generate = np.maximum(generate, 1.0)
            grid = side if grid is None else grid
        common = dict(w=w, model=model, devices=layout.systems, prompt=prompt, generate=generate,
                      weights=weights, kv=kvd, pe_grid=grid, mapping=layout.mapping)
        spec = dict(prefill_pe_grid=prefill_pe_grid, draft=draft, draft_len=draft_len, acceptance=acceptance)
        if layout.placement == "streaming":
            if draft is not None:
                raise InputError("speculative decoding (draft_len > 0) is not allowed with placement='streaming'; "
                                 "allowed: draft_len=0, or placement='regions'")
            r = streaming_inference(batch=batch, **common)
        elif batch is None:
            batch = wafer_max_batch(draft=draft, **common)
            r = wafer_inference(batch=np.maximum(batch, 1.0), **spec, **common)
            r["fits"] = r["fits"] & (batch >= 1)
            r["batch"] = batch
        else:
            r = wafer_inference(batch=batch, **spec, **common)
        if generated_max:
            r["generate"] = generate + np.zeros(np.shape(r["tpot_s"]))  # kept where the times are NaN
        r["devices"] = layout.systems + np.zeros(np.shape(r["tpot_s"]))
        r["activations"] = np.array("fp16", dtype=object)
        r["kv"] = np.array(kvd, dtype=object)
        problems += (layout.problems(model, phase="inference")
                     + context_problems(model, prompt=prompt, generate=generate) + draft_problems(model, draft, draft_len))
        return flag_problems(r, problems)

    def closed_loop(self, w: WaferNumbers, model, *, draft_len=0.0, **args) -> dict:
        """Fixed-concurrency serving (_closed_loop), each point with the draft's regions only
        where it drafts (_per_point_draft)."""
        return _per_point_draft(lambda k: self._closed_loop(w, model, draft_len=k, **args), draft_len)

    def _closed_loop(self, w: WaferNumbers, model, *, concurrency, prompt, generate, weights, kv, devices=None,
                     devices_min=False, mapping="mesh", draft_model=None, draft_len=0.0, acceptance=0.0, **_) -> dict:
        """Fixed-concurrency serving on `devices` CS systems (workloads/wafer_serving.py);
        `devices_min`: the fewest systems that hold the model at batch 1 (the rest of the
        requests' caches then bound how many run at once). GPU layout arguments are refused
        before this (predict.serving)."""
        from ..backends.kernel_tables import serving_constants
        from ..workloads.speculative import draft_for, draft_problems
        from ..workloads.wafer_serving import wafer_closed_loop
        kvd = kv or "fp16"
        draft = draft_for(model, draft_model) if draft_model is not None and np.any(np.asarray(draft_len) > 0) \
            else None
        problems = _sparse_problems(weights)
        if devices_min:
            devices, flags = _fewest_systems(w=w, model=model, batch=1.0, prompt=prompt, generate=generate,
                                             weights=weights, kv=kvd, mapping=mapping, draft=draft)
            problems += flags
        layout = WaferLayout(systems=1.0 if devices is None else devices, pe_grid=None, mapping=mapping,
                             placement="regions")
        r = wafer_closed_loop(w=w, model=model, concurrency=concurrency, prompt=prompt, generate=generate,
                              devices=layout.systems, weights=weights, kv=kvd, mapping=layout.mapping, draft=draft,
                              draft_len=draft_len, acceptance=acceptance,
                              waves=serving_constants()["benchmark_waves"])
        r["kv"] = np.array(kvd, dtype=object)
        problems += (layout.problems(model, phase="inference")
                     + context_problems(model, prompt=prompt, generate=generate) + draft_problems(model, draft, draft_len))
        return flag_problems(r, problems)

    @property
    def default_recompute(self) -> str:
        """The activation checkpointing predict.training's recompute=None means on a wafer:
        Cerebras' (workloads/wafer_training.CEREBRAS_RECOMPUTE, with its evidence)."""
        from ..workloads.wafer_training import CEREBRAS_RECOMPUTE
        return CEREBRAS_RECOMPUTE

    def training(self, w: WaferNumbers, model, *, precision, recompute=None, seq_len, global_batch, devices=None,
                 **_) -> dict:
        from ..workloads.wafer_training import wafer_training
        layout = WaferLayout(systems=1.0 if devices is None else devices)  # data-parallel systems
        r = wafer_training(w=w, model=model, devices=layout.systems, seq_len=seq_len, global_batch=global_batch,
                           precision=precision, recompute=self.default_recompute if recompute is None else recompute)
        return flag_problems(r, layout.problems(model, phase="training", global_batch=global_batch))

    def gemm(self, w: WaferNumbers, *, dtype, mapping, m, n, k, pe_grid=None, **_) -> dict:
        """On a pe_grid x pe_grid region (default: the largest square), with the faster of the
        two kernels whose tiles fit in a PE's usable SRAM (sram_per_pe_bytes less
        sram_reserved_per_pe_bytes), as the prefill chunks choose (wafer_pipeline.chunk_layer_s):
        MeshGEMV, one GEMV per row (its weight tile, each row's x tile and partial sums,
        mesh.gemv_bytes_per_pe), or MeshGEMM (the A, B and C tiles and the shifted tiles'
        receive buffers, mesh.gemm_bytes_per_pe); `kernel` names it. A point at which
        neither fits (or a side beyond the program mesh) is flagged: fits=False, the reason,
        its times NaN (no kernel holds it); `pe_memory_used_bytes` is the chosen kernel's
        (the smaller where neither fits)."""
        grid = w.max_square_grid
        P = np.minimum(pe_grid if pe_grid is not None else grid + 0.0 * m, grid)
        e = DTYPE_BYTES[dtype]  # a dtype the wafer computes (fp16/bf16: predict checked it)
        gemv = mesh_gemv(w, P=P, k=k, n=n, rows=m, dtype=dtype, mapping=mapping, w_bytes=e)
        gemm_ = mesh_gemm(w, P=P, m=m, k=k, n=n, dtype=dtype, mapping=mapping)
        usable = w.usable_sram_per_pe_bytes
        gv_bytes = gemv_bytes_per_pe(P=P, k=k, n=n, rows=m, w_bytes=e, act_bytes=e)
        gm_bytes = gemm_bytes_per_pe(P=P, m=m, k=k, n=n, elem_bytes=e)
        gv_fits, gm_fits = gv_bytes <= usable, gm_bytes <= usable
        use_gemv = np.where(gv_fits & gm_fits, gemv["cycles"] <= gemm_["cycles"],
                            np.where(gv_fits | gm_fits, gv_fits, gv_bytes <= gm_bytes))
        cycles = np.where(use_gemv, gemv["cycles"], gemm_["cycles"])
        compute = np.where(use_gemv, gemv["compute_cycles"], gemm_["compute_cycles"])
        comm = np.where(use_gemv, gemv["comm_cycles"], gemm_["comm_cycles"])
        t = cycles / w.clock_hz
        flops = 2.0 * m * n * k
        supported = np.broadcast_to(np.isfinite(w.fmas_per_cycle(dtype)), np.shape(t))
        held = np.broadcast_to(gv_fits | gm_fits, np.shape(t))
        fits = supported & held
        reason = choose([(~supported, f"no {dtype} math units on {w.label}"),
                         (~held, "the tiles of either kernel (MeshGEMV, MeshGEMM) exceed a PE's usable SRAM")], "")
        bound = choose([(~supported, "unsupported"), (~held, "capacity"), (comm > compute, "mesh_reduction"),
                        (memory_port_bound(w, dtype), "local_memory")], "compute")
        r = {"time_s": t, "flops_per_s": flops / t, "compute_s": compute / w.clock_hz,
             "comm_s": comm / w.clock_hz, "flops": flops, "pe_grid": P + 0.0 * t, "fits": fits, "reason": reason,
             "bound": bound, "kernel": np.where(use_gemv, "mesh_gemv", "mesh_gemm").astype(object),
             "pe_memory_used_bytes": np.where(use_gemv, gv_bytes, gm_bytes) + 0.0 * t}
        from ..workloads.wafer_inference import no_times_where
        return flag_problems(no_times_where(r, ~fits), _grid_problems(w, pe_grid=pe_grid))

    def attention(self, w, **_):
        raise InputError(f"predict.attention on {w.label!r} is not modelled; allowed: a GPU (wafer attention "
                         "runs inside predict.inference's layer model)")

    def collective(self, w, **_):
        raise InputError(f"predict.collective on {w.label!r} is not modelled; allowed: a GPU (wafer "
                         "reductions are part of the mesh model)")

    def instance_devices(self, *, tp=1, pp=1, devices=None) -> float:
        return float(devices or 1)

    def kv_link_bytes_per_s(self, w: WaferNumbers, *, tp=1, devices=None) -> float:
        """KV caches leave over the system I/O."""
        return w.io_bytes_per_s

    def serving_layout(self, *, tp=1, pp=1, devices=None, hardware: str = "", prefix: str = "") -> dict:
        """One serving instance: `devices` systems; GPU tp / pp are refused by name."""
        _refuse({f"{prefix}tp": (tp, 1), f"{prefix}pp": (pp, 1)}, hardware)
        return dict(devices=devices or 1)


BACKEND = WaferBackend()
