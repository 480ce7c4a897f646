"""The measured serving runs (reference/serving_silicon.csv) as predict.serving (or
predict.disaggregated) calls, the error of each, and the TTFT constants fitted to them (each
framework's request latency per dense and per MoE layer, the harness's waves); the TPOT
constants (CUDA-graph saving, overheads per iteration, per sequence and per MoE layer) are
fitted in calibrate/serving_overheads.py.

    workbench calibrate fit-serving     # refits specs/serving/frameworks.yaml, prints held-out errors

A row is expressible when its deployment can be described: a catalog model (by its Hugging
Face id: each model YAML's hf_ids) on a catalog GPU, in a known weight format, aggregated or
in disaggregated pools whose sizes the row states. Others are listed with the reason they
are not answered.

Error = model / measured - 1 for times (TTFT, TPOT): positive is a prediction slower than
measured.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import predict
from ..backends.kernel_tables import FRAMEWORKS
from ..errors import InputError
from . import recipes, run_settings

ROWS = Path(__file__).resolve().parent / "reference" / "serving_silicon.csv"


def system(name: str) -> str | None:
    """The catalog GPU of a row's `system`: the package's own system names as the kernel
    importer maps them (aiconfigurator.HARDWARE: "b200_sxm" is b200, "rtx_pro_6000_server"
    rtx_pro_6000), else a GPU named as vendors write it (specs/hardware_names: "h100_pcie",
    "gh200", "NVIDIA H200 SXM"), else None."""
    from ..specs import hardware_names, list_gpus
    from .aiconfigurator import HARDWARE
    return HARDWARE.get(name) or (hardware_names.resolve(name, list_gpus()) if isinstance(name, str) else None)


# The benchmarks' weight formats (aiconfigurator-core sdk/common.py GEMMQuantMode and
# MoEQuantMode, every member) -> the catalog's (weights, activations): None takes the weight
# format's default math (backends/gpu.default_activations); a weight-only format ("_wo",
# "w4a16") computes in bf16, "w4a8"/"w4afp8" in fp8. MXFP4 and NVFP4 are fp4, INT4 int4.
QUANT = {"bf16": ("bf16", None), "bfloat16": ("bf16", None), "float16": ("fp16", None),
         "fp8": ("fp8", None), "fp8_static": ("fp8", None), "fp8_ootb": ("fp8", None),
         "fp8_block": ("fp8_block", None), "sq": ("int8", None), "int8_wo": ("int8", "bf16"),
         "int4_wo": ("int4", None), "w4afp8": ("int4", "fp8"), "nvfp4": ("fp4", None), "mxfp4": ("fp4", None),
         "nvfp4_wo": ("fp4", "bf16"), "w4a16_nvfp4": ("fp4", "bf16"), "w4a16_mxfp4": ("fp4", "bf16"),
         "w4a16_mxfp4_cutlass": ("fp4", "bf16"), "w4a8_mxfp4_mxfp8": ("fp4", "fp8"),
         "w4a8_mxfp4_mxfp8_trtllm": ("fp4", "fp8")}
PRECISION_QUANT = {"fp8": "fp8", "fp4": "nvfp4", "bf16": "bf16", "fp16": "float16"}  # rows without a format


def quant(r) -> tuple[tuple[str, str | None] | None, str]:
    """((weights, activations), "") of a row, from its MoE format (its GEMM format without
    one, its `precision` without either, bf16 without all), or (None, why) for a format not known."""
    mode = next((m for m in (r.moe_quant_mode, r.gemm_quant_mode) if isinstance(m, str)),
                PRECISION_QUANT.get(r.precision, "bf16") if isinstance(r.precision, str) else "bf16")
    if mode not in QUANT:
        return None, f"weight format {mode!r} is not known; allowed: {', '.join(QUANT)}"
    return QUANT[mode], ""


def attention_weights(r) -> str | None:
    """The format of a row's attention and dense GEMMs where it differs from its experts'
    (`gemm_quant_mode` beside `moe_quant_mode`: SGLang's DeepSeek and Qwen3.5 rows record
    per-tensor FP8 GEMMs beside block-FP8 experts), else None."""
    gemm, moe = r.gemm_quant_mode, r.moe_quant_mode
    if not (isinstance(gemm, str) and isinstance(moe, str)) or gemm == moe or gemm not in QUANT:
        return None
    w, a = QUANT[gemm]
    return w if a is None and w != QUANT.get(moe, (None,))[0] else None


def load(path: Path = ROWS) -> pd.DataFrame:
    return pd.read_csv(path)


def _n(v, default=1):
    return int(v) if v == v and v else default


# The KV cache of the benchmark's disaggregated TensorRT-LLM and SGLang deployments where
# the recipe it ran is not at hand (recipes.recipe_settings reads it where it is): FP8, as
# their recipes set it (InferenceX benchmarks/multi_node/srt-slurm-recipes: kv_cache_config
# dtype fp8 in each of the 94 TensorRT-LLM recipe files, kv-cache-dtype fp8_e4m3 in each of the
# 13 SGLang DeepSeek-R1 ones; the srt-slurm recipes its early configuration names, e.g.
# recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_tep16_batch2_eplb0_mtp0.yaml, the same), where the
# frameworks' own default ("auto") would keep a block-FP8 checkpoint's cache in 16 bits.
DISAGGREGATED_KV = {"trtllm": "fp8", "sglang": "fp8"}


def _disaggregated(r, weights: str, activations: str | None) -> tuple[dict | None, str]:
    """predict.disaggregated arguments of a disaggregated row: its pools as it states them, or
    where it leaves the workers out, as the benchmark's configuration ran them (recipes.pools,
    with the MTP head where that run decoded with it)."""
    hw = system(r.system)
    moe = _kind(r.model_path) == "moe"  # a dense model's stated MoE split describes nothing that runs
    kv = DISAGGREGATED_KV.get(r.backend)
    if _states_workers(r):
        pools = dict(prefill_tp=_n(r.prefill_tp_size), prefill_ep=_n(r.prefill_moe_ep_size) if moe else 1,
                     prefill_attention_dp=_n(r.prefill_attention_dp_size), prefill_workers=_n(r.prefill_num_workers),
                     decode_tp=_n(r.decode_tp_size), decode_ep=_n(r.decode_moe_ep_size) if moe else 1,
                     decode_attention_dp=_n(r.decode_attention_dp_size), decode_workers=_n(r.decode_num_workers))
        # the decode engine's batch cap and cache, where the benchmark ran this deployment
        engine = recipes.engine_settings(r)
        if engine["decode_max_batch"]:
            pools["decode_max_batch"] = engine["decode_max_batch"]
        kv = engine["decode_kv"] or kv
    else:  # the workers from the deployment the benchmark published for the row (calibrate/recipes.py)
        pools, why = recipes.pools(r)
        if pools is None:
            return None, why
        spec, depth = pools.pop("spec_decoding"), pools.pop("draft_len")
        most, length = pools.pop("decode_max_batch"), pools.pop("acceptance_length")
        kv = pools.pop("decode_kv") or kv  # the cache format the recipe set, else the rule
        if spec != "none" and not depth:
            return None, "the benchmark's configuration ran this deployment with MTP of unstated depth"
        pools.update(prefill_ep=pools["prefill_ep"] if moe else 1, decode_ep=pools["decode_ep"] if moe else 1,
                     **_mtp(depth, length), **({"decode_max_batch": most} if most else {}))
    return dict(function="disaggregated", prefill_hardware=hw, decode_hardware=hw, model=r.model_path,
                concurrency=_n(r.concurrency), prompt=_n(r.isl), generate=_n(r.osl), weights=weights,
                activations=activations, attention_weights=attention_weights(r), framework=r.backend,
                kv=kv, prefill_batch=_n(r.prefill_batch_size), prefill_pp=_n(getattr(r, "prefill_pp_size", 1)),
                decode_pp=_n(getattr(r, "decode_pp_size", 1)), **pools), ""


def _states_workers(r) -> bool:
    """Whether a disaggregated row states both pools' worker counts (NaN where it does not)."""
    return r.prefill_num_workers == r.prefill_num_workers and r.decode_num_workers == r.decode_num_workers


def _mtp(depth: int, length: float = 0.0) -> dict:
    """predict.* arguments of a run that decoded with the model's MTP head `depth` tokens
    ahead (none for 0): at the acceptance that gives the mean acceptance `length` the run
    enforced (synthetic acceptance, recipes.acceptance_length), else at the acceptance
    DeepSeek-V3's report gives (speculative.MTP_ACCEPTANCE)."""
    from ..workloads.speculative import MTP_ACCEPTANCE, acceptance_for_tokens_per_step
    if not depth:
        return {}
    a = float(acceptance_for_tokens_per_step(length, draft_len=depth)) if length else MTP_ACCEPTANCE
    return {"draft_len": depth, "acceptance": a}


def layout(r) -> tuple[int, int, int]:
    """(tp, attention_dp, ep) of an aggregated row as it ran.

    Some rows record the attention layout multiplied by the expert parallelism: tp_size (or
    attention_dp_size) = tp x ep and moe_tp_size = tp (or the attention-DP size), so that
    tp_size x attention_dp_size = moe_tp_size x moe_ep_size holds for a device count ep
    times too large. Their ids name the layout that ran (`..._tp8_ep8_957` with tp_size 64,
    moe_tp_size 8, moe_ep_size 8) and the same measurement appears under the plain encoding
    (`..._tp8_0_ep8_0_1262`: tp_size 8, moe_tp_size 1, moe_ep_size 8). Such a row is read
    back when its devices exceed the system's scale-up domain (8 GPUs on an HGX board: one
    aggregated instance does not span boards over TP) while devices / ep fits in it: the
    layout divided by ep, the MoE layers then EP over the same devices (MoE TP = devices /
    ep).

    A dense model's row reads ep = 1 whatever its MoE columns say (it has no MoE layers; the
    measured rows write 0 or 1 there).

    Other rows of MoE models record no attention-DP while their MoE layers span more
    devices than the attention TP (`..._tp1_epnone_...` with moe_tp_size 2): vLLM shards the
    MoE layers over data-parallel x tensor-parallel ranks (fused_moe/config.py,
    flatten_tp_across_dp: MoE TP = dp x tp without expert parallelism), so such a row ran
    moe_tp x ep / tp attention replicas; it is read that way (Qwen3-235B-FP8 on one H200
    at tp 1 would not hold its 235 GB of weights)."""
    from ..specs import load_hardware
    moe = _kind(r.model_path) == "moe"
    tp, dp = _n(r.tp_size), _n(r.attention_dp_size)
    ep = _n(r.moe_ep_size) if moe else 1  # no MoE layers: a stated MoE split describes nothing that runs
    domain = load_hardware(system(r.system)).link("scale_up").domain_size
    moe_tp = _n(r.moe_tp_size)
    if moe and dp == 1 and moe_tp * ep > tp and (moe_tp * ep) % tp == 0:
        dp = moe_tp * ep // tp
    if ep > 1 and moe_tp > 1 and domain and tp * dp > domain >= tp * dp // ep and moe_tp * ep == tp * dp:
        if dp % ep == 0:
            dp //= ep
        elif tp % ep == 0:
            tp //= ep
    return tp, dp, ep


def replicas(r) -> int:
    """Engine replicas an aggregated row's concurrency was spread over: concurrency /
    (batch_size x attention_dp_size) where the row's batch_size (the engine's maximum batch,
    per attention rank) times its attention-DP size is a whole fraction >= 2 of it, else 1.
    One engine cannot run more than its batch at once, and these rows do not show the queue
    that would follow: nvidia/Qwen3-32B-NVFP4 on GB200 (ids ..._15000x500_c448_tp2_0_epnone_2
    and _3: batch 14, concurrency 448) measured a 0.75 and 0.97 s TTFT, where 448 requests
    queued for 14 slots would wait 31 request lifetimes (> 100 s); the ratio, 32 engines of
    2 GPUs, fills 64 of an NVL72 rack, as the disaggregated row of the same benchmark
    (..._disagg_15000x500_c552: 6 decode workers x batch 92 = 552) spells out its workers."""
    batch, dp = _n(r.batch_size, 0), max(_n(r.attention_dp_size), 1)
    if r.mode != "agg" or batch <= 0:
        return 1
    k = _n(r.concurrency) / (batch * dp)
    return int(round(k)) if k >= 2 and abs(k - round(k)) < 1e-9 else 1


def config(r) -> tuple[dict | None, str]:
    """(arguments of predict.serving, or of predict.disaggregated with function=
    "disaggregated", and ""), or (None, why not) for a row it cannot express."""
    from ..specs import catalog_name
    if catalog_name(r.model_path) is None:
        return None, f"model {r.model_path} is not in the catalog"
    if system(r.system) is None:
        return None, f"system {r.system} is not in the catalog"
    fmt, why = quant(r)
    if fmt is None:
        return None, why
    if r.mode != "agg":
        return _disaggregated(r, *fmt)
    tp, attention_dp, ep = layout(r)
    depth, why = recipes.speculation(r)  # MTP, where the benchmark's configuration ran the row's version with it
    if depth is None:
        return None, why
    # the harness's lengths and the engine's settings where the row's benchmark set them
    # (calibrate/run_settings.py)
    return dict(hardware=system(r.system), model=r.model_path, tp=tp, pp=_n(getattr(r, "pp_size", 1)),
                attention_dp=attention_dp, ep=ep, concurrency=_n(r.concurrency) / replicas(r),
                weights=fmt[0], activations=fmt[1], attention_weights=attention_weights(r), framework=r.backend,
                **run_settings.harness_lengths(r), **run_settings.engine(r, tp * attention_dp),
                **_mtp(depth, recipes.stated_acceptance_length(r) if depth else 0.0)), ""


def _kind(model_path: str) -> str:
    """'moe' or 'dense' for a catalog model, 'unknown' for one the catalog lacks."""
    from ..specs import catalog_name, load_model
    return ("moe" if load_model(model_path).is_moe else "dense") if catalog_name(model_path) else "unknown"


# what an aggregated row keeps of its prediction (the TTFT parts refit the TTFT constants)
TPOT_PARTS = ("kernel_tpot_s", "tpot_iterations", "tpot_sequences")  # TPOT = kernel + h x iterations + h_seq x sequences
AGG_OUTPUTS = ("ttft_s", "tpot_s") + TPOT_PARTS + ("steady_ttft_s", "first_wave_ttft_s", "request_latency_s", "queue_s")
NUMERIC = ("tp", "pp", "attention_dp", "ep", "concurrency", "prompt", "generate")  # predict.serving's per-row sizes


FAILED = "the model failed on this row"  # how a row's reason starts when predicting it raised


def failed(e: Exception) -> str:
    """A row's reason when reading or predicting it raised something other than the API's
    InputError: one bad row (or row group) of a batch is reported with the error, the
    batch's other rows still predicted (tests check that no row of the shipped benchmarks
    meets this)."""
    return f"{FAILED}: {type(e).__name__}: {e}"


def _serve(cfgs: list[dict]) -> list[tuple[dict, str]]:
    """(prediction, reason) of aggregated rows sharing hardware, model, weights and
    framework: one predict.serving call with the sizes as DataArrays along `row`."""
    import xarray as xr
    first = cfgs[0]
    sizes = {k: xr.DataArray([c[k] for c in cfgs], dims="row") for k in NUMERIC}
    try:
        ds = predict.serving(**{k: v for k, v in first.items() if k not in NUMERIC}, **sizes)
    except InputError as e:  # one row group the API refuses (a framework without tables for the GPU)
        return [({}, str(e))] * len(cfgs)
    except Exception as e:  # noqa: BLE001  a failure of the model on these rows: theirs, not the batch's
        # one row of the group may be the one it fails on: each alone, only those failing again failed
        return [_serve([c])[0] for c in cfgs] if len(cfgs) > 1 else [({}, failed(e))]
    out = []
    for i in range(len(cfgs)):
        p = ds.isel(row=i)
        out.append(({k: float(p[k]) for k in AGG_OUTPUTS}, "") if bool(p.fits) else ({}, str(p.reason.values)))
    return out


def _one(cfg: dict) -> tuple[dict, str]:
    try:
        ds = getattr(predict, cfg.pop("function", "serving"))(**cfg)
    except InputError as e:
        return {}, str(e)
    except Exception as e:  # noqa: BLE001  (as in _serve)
        return {}, failed(e)
    if not bool(ds.fits):
        return {}, str(ds.reason.values)
    return {k: float(ds[k]) for k in ("ttft_s", "tpot_s") + TPOT_PARTS}, ""


def predict_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Every row with its prediction (NaN and the reason where not answered), `pools_from`
    ("row", or "recipe" where the benchmark's configuration gave a disaggregated row's
    workers) and `draft_len` (the MTP depth its run decoded with, 0 for none). Aggregated rows
    of one hardware, model, weight format and framework are one vectorized call."""
    out, groups = [], {}
    for r in df.itertuples():
        try:
            cfg, why = config(r)
        except Exception as e:  # noqa: BLE001  a row the reader fails on is that row's failure
            cfg, why = None, failed(e)
        out.append({"id": r.id, "backend": r.backend, "system": r.system, "model": r.model_path, "mode": r.mode,
                    "concurrency": r.concurrency, "isl": r.isl, "osl": r.osl,
                    "measured_ttft_s": r.silicon_ttft_ms / 1e3, "measured_tpot_s": r.silicon_tpot_ms / 1e3,
                    "moe": _kind(r.model_path), "not_answered": why,
                    "harness": "inferencex" if run_settings.inferencex(r) else "other",  # its client (run_settings)
                    # where the deployment came from: the row, or for what it leaves out the
                    # benchmark's configuration (calibrate/recipes.py); the MTP depth it decoded with
                    "pools_from": "row" if r.mode == "agg" or _states_workers(r) else "recipe",
                    "draft_len": (cfg or {}).get("draft_len", 0)})
        if cfg is None:
            continue
        if "function" in cfg:  # fixed disaggregated pools: one value per argument
            pred, out[-1]["not_answered"] = _one(cfg)
            out[-1].update(pred)
        else:
            key = tuple((k, v) for k, v in cfg.items() if k not in NUMERIC)
            groups.setdefault(key, []).append((len(out) - 1, cfg))
    for members in groups.values():
        for (i, _), (pred, why) in zip(members, _serve([c for _, c in members])):
            out[i].update(pred)
            out[i]["not_answered"] = why
    res = pd.DataFrame(out)
    for m in ("ttft", "tpot"):
        res[f"{m}_err"] = res.get(f"{m}_s", np.nan) / res[f"measured_{m}_s"] - 1.0
    return res


def held_out_median(errors) -> float:
    """np.nanmedian of the held-out errors (an infinite one counts); NaN, without numpy's
    all-NaN warning, where none exists (one GPU or one model: nothing to hold out)."""
    e = np.asarray(errors, float)
    e = e[~np.isnan(e)]
    return float(np.median(e)) if e.size else float("nan")


WAVES = (1.0, 1.5, 2.0, 3.0, 5.0, 10.0, float("inf"))  # candidates of the harness constant


def _layer_counts(model_path: str) -> tuple[float, float]:
    """(layers without routed experts, MoE layers) of a catalog model."""
    from ..specs import catalog_name, load_model
    spec = load_model(catalog_name(model_path))
    return float(spec.n_layers - spec.n_moe_layers), float(spec.n_moe_layers)


LATENCY_STEP_S = 1e-4  # resolution of the request-latency fit, per layer
LATENCY_KEYS = ("request_latency_s_per_layer", "request_latency_s_per_moe_layer")
# The request latencies are fitted on the rows with at most this many requests in flight: there
# a request's TTFT is its prefill, the iteration it lands in and its latency; above it the
# bursts and queueing the schedules model coarsely dominate, and their error would pass into
# the latency (with every row, SGLang's per-layer latency jumped 0 -> 3.2 ms on a 3% change of
# 129 rows' TTFT: its only dense model's rows are at concurrency 64-512, so no row fixed it).
# And on the rows of the harness whose client, request count and engine settings are known
# (InferenceX's: run_settings): the other harnesses' runs (aiconfigurator's own collection)
# state neither, and their low-concurrency TTFT grows with the prompt (TensorRT-LLM's Qwen3-32B
# and Llama-3.1-8B: 1.3 ms per layer beyond the model at 1k-token prompts, 4.3-4.9 at 4k), a
# prompt-length effect of an unstated configuration that a per-request latency would carry to
# every run (fitted with them, TensorRT-LLM's dense latency was 3.3 ms per layer, where its
# InferenceX rows need 0.1: Llama-3.1-70B's 56 rows TTFT median |err| 109%, 19% without them,
# those other runs' then 57% short; every row's TTFT leave-one-model-out 27.8 -> 26.6%,
# leave-one-GPU-out 26.9 -> 26.2%).
LATENCY_FIT_MAX_CONCURRENCY = 16
LATENCY_FIT_HARNESS = "inferencex"


def fit_ttft_constants(res: pd.DataFrame) -> tuple[float, dict]:
    """The harness's waves (one global number) and each framework's request latency per
    layer and per MoE layer, from the aggregated rows' TTFT parts: for each candidate
    `waves`, TTFT = steady + (first wave - steady) / waves without the latency; the two
    latencies are, per framework, the least_median_shift of that with the model's
    (layers without routed experts, MoE layers) as scales over its rows at concurrency <=
    LATENCY_FIT_MAX_CONCURRENCY run by LATENCY_FIT_HARNESS's client (a term with no model of
    its kind among them, dense or MoE, stays 0: nothing there identifies it); the candidate with the least median |TTFT
    error| over all rows wins. Scored leave-one-model-out: each model's rows predicted with
    the waves and latencies chosen on the other models' rows; and leave-one-GPU-out, each
    GPU's rows with those chosen on the other GPUs' rows."""
    a = res[res["mode"] == "agg"].dropna(subset=["steady_ttft_s"])
    counts = {m: _layer_counts(m) for m in a["model"].unique()}
    scales = pd.DataFrame(a["model"].map(counts).tolist(), index=a.index, columns=["dense", "moe"])
    lat0 = a["request_latency_s"]
    steady, burst = a["steady_ttft_s"] - lat0, a["first_wave_ttft_s"] - lat0

    def latency(rows, h):
        """Each row's latency: its (dense, MoE) layer counts times its framework's two latencies."""
        per_row = np.array([h.get(fw, (0.0, 0.0)) for fw in rows["backend"]], float).reshape(-1, 2)
        return pd.Series((scales.loc[rows.index].to_numpy() * per_row).sum(axis=1), index=rows.index)

    def latencies(base, rows):
        """Each framework's two latencies from its low-concurrency rows (module constant)."""
        h = {}
        fit_rows = (rows["concurrency"] <= LATENCY_FIT_MAX_CONCURRENCY) & (rows["harness"] == LATENCY_FIT_HARNESS)
        for fw, g in rows[fit_rows].groupby("backend"):
            sc = scales.loc[g.index].to_numpy()
            kinds = np.array([np.any(sc[:, 1] == 0), np.any(sc[:, 1] > 0)])  # a dense model, an MoE model
            h[fw] = np.zeros(2)
            h[fw][kinds] = least_median_shift(base.loc[g.index], g["measured_ttft_s"], sc[:, kinds],
                                              step=LATENCY_STEP_S)
        return h

    def choose(rows):
        best = None
        for w in WAVES:
            base = (steady + (burst - steady) / w).loc[rows.index]
            h = latencies(base, rows)
            err = (base + latency(rows, h)) / rows["measured_ttft_s"] - 1.0
            score = float(np.median(np.abs(err)))
            if best is None or score < best[0]:
                best = (score, w, h)
        return best

    score, waves, h = choose(a)
    def held_out(by):
        """Each group's rows (by model or by GPU) with the waves and latencies chosen on the
        other groups' rows."""
        errs = []
        for _, g in (a.groupby(by) if by in a else ()):
            if len(g) < len(a):
                _, w, hg = choose(a.drop(g.index))
                base = steady.loc[g.index] + (burst.loc[g.index] - steady.loc[g.index]) / w
                errs.append((base + latency(g, hg)) / g["measured_ttft_s"] - 1.0)
        return pd.concat(errs) if errs else pd.Series(np.nan, index=a.index)
    held, gpu = held_out("model"), held_out("system")
    out = {}
    for fw, g in a.groupby("backend"):
        e, eg = held.reindex(g.index), gpu.reindex(g.index)
        out[fw] = {**dict(zip(LATENCY_KEYS, map(float, h.get(fw, np.zeros(2))))), "rows": int(len(g)),
                   "loo_model_median_abs_err": float(np.median(np.abs(e))), "loo_model_median_err": float(np.median(e)),
                   "loo_gpu_median_abs_err": held_out_median(np.abs(eg))}
    return waves, {"frameworks": out, "median_abs_err": score,
                   "loo_model_median_abs_err": float(np.median(np.abs(held))),
                   "loo_gpu_median_abs_err": held_out_median(np.abs(gpu))}


def gpu_note(fit: dict) -> str:
    """The leave-one-GPU-out part of a fitted constant's frameworks.yaml comment ("" without one)."""
    return f"; leave-one-GPU-out {fit['loo_gpu_median_abs_err']:.1%}" if "loo_gpu_median_abs_err" in fit else ""


def write_ttft_constants(waves: float, fit: dict, path: Path | None = None) -> Path:
    """Rewrite `benchmark_waves` and the two request-latency sections of
    specs/serving/frameworks.yaml (its comments kept)."""
    from ..backends.kernel_tables import SERVING_CONSTANTS
    note = (lambda f: f"{f['rows']} rows; leave-one-model-out TTFT median |err| "
                      f"{f['loo_model_median_abs_err']:.1%} (median {f['loo_model_median_err']:+.1%})" + gpu_note(f))
    sections = {key: _section(fit["frameworks"], key, note) for key in LATENCY_KEYS}
    sections["ttft_held_out"] = held_out_section(fit["frameworks"])
    score = f"{waves}" + (f"  # TTFT median |err| {fit['median_abs_err']:.1%}; leave-one-model-out "
                          f"{fit['loo_model_median_abs_err']:.1%}" if "median_abs_err" in fit else "") + \
        gpu_note(fit)
    return _rewrite(path or SERVING_CONSTANTS, sections, {"benchmark_waves": score})


def held_out_section(fits: dict) -> list[str]:
    """The lines of a `*_held_out` section of frameworks.yaml: each fitted framework's rows and
    leave-one-model-out and leave-one-GPU-out median |error| (.nan where nothing was held out)."""
    num = (lambda v: f"{v:.4f}" if np.isfinite(v) else ".nan")
    return [f"  {fw}: {{runs: {f['rows']}, leave_one_model_out: {num(f['loo_model_median_abs_err'])}, "
            f"leave_one_gpu_out: {num(f.get('loo_gpu_median_abs_err', np.nan))}}}"
            for fw, f in ((fw, fits.get(fw)) for fw in FRAMEWORKS) if f]


def _section(fits: dict, key: str, note) -> list[str]:
    """The indented lines of one per-framework section: each framework's `key` with `note`."""
    lines = []
    for fw in FRAMEWORKS:
        f = fits.get(fw)  # a dot in 0.0: YAML reads 1e-06 as text
        lines.append(f"  {fw}: {f[key]:.4e}  # {note(f)}" if f else f"  {fw}: 0.0  # no answered rows")
    return lines + ["  none: 0.0"]


def _rewrite(path: Path, sections: dict, scalars: dict | None = None) -> Path:
    """Replace the indented lines under each `name:` of `sections` with the given lines and
    set each top-level `name: value` of `scalars`; every other line (comments included) kept."""
    from ..backends.kernel_tables import serving_constants
    out, skip = [], False
    for line in path.read_text().split("\n"):
        if skip and line.startswith("  "):
            continue
        skip = False
        key = line.split(":", 1)[0]
        if scalars and key in scalars and not line.startswith((" ", "#")):
            line = f"{key}: {scalars[key]}"
        out.append(line)
        if key in sections and line.rstrip().endswith(":"):
            out += sections[key]
            skip = True
    path.write_text("\n".join(out))
    serving_constants.cache_clear()
    return path


def summary(res: pd.DataFrame, by=("system", "backend")) -> pd.DataFrame:
    a = res.dropna(subset=["tpot_s"])
    return a.groupby(list(by)).agg(rows=("id", "size"),
                                   tpot_median_abs_err=("tpot_err", lambda e: float(np.median(np.abs(e)))),
                                   tpot_median_err=("tpot_err", "median"),
                                   ttft_median_abs_err=("ttft_err", lambda e: float(np.median(np.abs(e)))),
                                   ttft_median_err=("ttft_err", "median"))


OVERHEAD_STEP_S = 1e-5  # resolution of the host-overhead fit (calibrate/serving_overheads.py)


def least_median_shift(base, measured, scale=1.0, step: float = OVERHEAD_STEP_S):
    """The h >= 0 that minimises the median |error| of base + h * scale against measured
    (the figure the rows are scored by), on a grid of `step` up to the 90th percentile of
    (measured - base) / scale. The median gap, used before, weights the slow rows: it left
    each framework's fast rows predicted too slow. A 2-D `scale` (rows x terms) fits one h
    per term on the product grid and returns them as a tuple."""
    base, y = np.asarray(base, float), np.asarray(measured, float)
    several = np.ndim(scale) == 2
    cols = np.asarray(scale, float).T if several else np.broadcast_to(np.asarray(scale, float), base.shape)[None]
    if not len(y):
        return (0.0,) * len(cols) if several else 0.0
    axes = []
    for c in cols:
        used = c >= 0.5 * cols.sum(axis=0)  # the rows this term dominates set its grid's top
        top = max(float(np.quantile((y[used] - base[used]) / c[used], 0.9)), 0.0) if used.any() else 0.0
        axes.append(np.arange(0.0, top + step, step))
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(cols))  # candidates x terms
    score = np.median(np.abs((base[None, :] + grid @ cols) / y[None, :] - 1.0), axis=1)
    best = grid[np.argmin(score)]
    return tuple(map(float, best)) if several else float(best[0])
