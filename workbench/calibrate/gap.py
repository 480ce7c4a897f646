"""Model against silicon: every measurement the model can predict, published
(data/reference_points.yaml over reference/*.csv) or measured (workbench.microbench
datasets), in one table, predicted by the public interface, before and after calibration.

    obs = observations(datasets=["h100_sxm.nc"])   # one row per measurement
    gaps = compare(obs)                           # + predictions, errors, dominant terms
    error_table(gaps); worst(gaps, 10)

Error convention: error = model speed / measured speed - 1, on rates (FLOP/s, bytes/s,
tokens/s, MFU) as they are and on times (TTFT, kernel seconds) inverted, so a positive
error always means the model is optimistic (predicts faster than silicon).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from .. import predict
from ..microbench import schema
from ..primitives.collectives import COLLECTIVES
from ..primitives.gemm import memory_time, wave_efficiency
from ..backends import as_numbers, backend_for
from ..specs import HardwareSpec, list_hardware, load_hardware
from ..specs._base import read_yaml
from ..units import format_si
from . import fit
from .measurements import UNIT_TO_SI, reference, wse_reference

DATA_DIR = Path(__file__).parent / "data"
POINTS_YAML = DATA_DIR / "reference_points.yaml"
EXTRA = ("id", "category", "note", "fitted", "config", "assumes")
KERNELS = ("gemm", "attention", "memory", "launch") + tuple(COLLECTIVES)
DEFAULT_METRIC = {"gemm": "flops_per_s", "attention": "flops_per_s", "memory": "bytes_per_s", "launch": "time_s",
                  **{op: "bus_bandwidth_bytes_per_s" for op in COLLECTIVES},
                  "wafer_decode": "tokens_per_s", "wafer_prefill": "tokens_per_s", "wafer_e2e": "tokens_per_s"}
WSE_UNITS = {"tokens/s": 1.0, "samples/s": 1.0, "cycles": 1.0, "tokens": 1.0, **UNIT_TO_SI}


# ---- measurements as data ------------------------------------------------------------------
def _csv_value(row_id: str) -> tuple[float, str]:
    """(value in SI, source) of a row of measurements.csv or wse_measurements.csv."""
    ref = reference()
    if row_id in ref.index:
        r = ref.loc[row_id]
        return float(r["value_si"]), str(r["source"])
    r = wse_reference().loc[row_id]
    return float(r["value"]) * WSE_UNITS[str(r["unit"]).strip()], str(r["source"])


def _category(kind: str, hardware: str) -> str:
    if hardware not in list_hardware():
        return "no spec"
    if not isinstance(load_hardware(hardware), HardwareSpec):
        return "wafer"
    return "GPU kernel" if kind in KERNELS else f"GPU {kind}"


def reference_points(path: Path = POINTS_YAML) -> pd.DataFrame:
    """The published rows the model can predict, in the measurement schema plus id,
    category, note, fitted (the shipped spec was fitted to the row), config and assumes
    (what the prediction rests on that no source gives: the wafer rows')."""
    points = read_yaml(Path(path))["points"]  # the spec loader: reads 3.0e9 as a number
    rows = []
    for p in points:
        p = dict(p)
        config = dict(p.pop("config", None) or {})
        meta = {k: p.pop(k, None) for k in ("id", "note", "fitted", "value", "metric", "assumes")}
        kind = p.pop("kind")
        hardware = p.pop("hardware", None) or config.get("hardware")
        fields = {k: p.pop(k) for k in list(p) if k in schema.COLUMNS}
        config.update(p)  # kind-specific settings that the schema has no column for (P, pe_grid, ...)
        value, source = _csv_value(meta["id"])
        rows.append(schema.record(kind=kind, hardware=hardware, metric=meta["metric"] or DEFAULT_METRIC[kind],
                                  value_si=float(meta["value"]) if meta["value"] is not None else value,
                                  source=source, devices=fields.pop("devices", 1), **fields)
                    | {"id": meta["id"], "note": meta["note"] or "", "fitted": bool(meta["fitted"]), "config": config,
                       "assumes": meta["assumes"] or ""})
    return _finish(pd.DataFrame(rows))


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    df["category"] = [_category(k, h) for k, h in zip(df["kind"], df["hardware"])]
    for c in schema.NUMBERS:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df[list(schema.COLUMNS) + list(EXTRA)]


def dataset_points(ds) -> pd.DataFrame:
    """A microbenchmark dataset (xr.Dataset or a netCDF path) as observation rows."""
    ds = schema.load(ds) if not isinstance(ds, xr.Dataset) else schema.validate(ds)
    df = schema.to_frame(ds)
    df["id"] = [f"{h}:{k}:{i}" for i, (h, k) in enumerate(zip(df["hardware"], df["kind"]))]
    df["note"], df["fitted"], df["config"], df["assumes"] = "", False, [{} for _ in range(len(df))], ""
    return _finish(df)


def observations(datasets=(), *, reference_rows: bool = True, data_dir: bool = False) -> pd.DataFrame:
    """One table of measurements: the published rows and each microbenchmark dataset
    (paths or Datasets; data_dir=True adds every *.nc in workbench/calibrate/data/)."""
    parts = [reference_points()] if reference_rows else []
    paths = list(datasets) + (sorted(DATA_DIR.glob("*.nc")) if data_dir else [])
    parts += [dataset_points(d) for d in paths]
    if not parts:
        return _finish(pd.DataFrame({c: [] for c in schema.COLUMNS + EXTRA}))
    return pd.concat(parts, ignore_index=True)


# ---- predictions -----------------------------------------------------------------------------
PREDICTORS: dict = {}


def predictor(*kinds):
    """Register fn(row) -> (model value of row.metric, the term that dominates there)."""
    def deco(fn):
        for k in kinds:
            PREDICTORS[k] = fn
        return fn
    return deco


def _share(parts: dict, total: float, of: str = "") -> str:
    """The largest part and its share of `total`: "backward (66% of step)"."""
    name, v = max(((k, float(v)) for k, v in parts.items()), key=lambda kv: kv[1])
    return f"{name} ({v / total:.0%}{' of ' + of if of else ''})" if total > 0 else name


@predictor("gemm")
def _gemm(r):
    extra = {"pe_grid": int(r.config["pe_grid"])} if "pe_grid" in r.config else {}
    # published kernel rows score the spec's analytical efficiencies (what calibration fits);
    # the serving frameworks' kernel tables are scored on their own (kernel_fit.scores)
    if backend_for(load_hardware(r.hardware)).kind == "gpu":
        extra["framework"] = "none"
    ds = predict.gemm(hardware=r.hardware, m=int(r.m), n=int(r.n), k=int(r.k), dtype=r.dtype, **extra)
    value, bound, shape, note = float(ds[r.metric]), str(ds["bound"].item()), (r.m, r.n, r.k), ""
    if fit.best_of_shapes({"config": r.config}):  # MAMF: the model's best of this shape and the plateau
        plateau = predict.gemm(hardware=r.hardware, m=fit.PLATEAU_SHAPE[0], n=fit.PLATEAU_SHAPE[1],
                               k=fit.PLATEAU_SHAPE[2], dtype=r.dtype, **extra)
        if float(plateau[r.metric]) > value:
            note = f"; plateau 16384^3 (at its shape {value / float(plateau[r.metric]) - 1:+.0%})"
            value, bound, shape = float(plateau[r.metric]), str(plateau["bound"].item()), fit.PLATEAU_SHAPE
    hw = load_hardware(r.hardware)
    if "comm_s" in ds:
        return value, f"{bound} ({float(ds.comm_s) / float(ds.time_s):.0%} mesh reduction)"
    if bound == "compute":
        m, n, k = shape
        wave = float(wave_efficiency(hw=as_numbers(hw), m=m, n=n, k=k))
        return value, f"compute: ramp {float(hw.gemm_eff(2 * m * n * k / wave)):.2f}, waves {wave:.2f}{note}"
    return value, f"{bound}-bound{note}"


@predictor("attention")
def _attention(r):
    ds = predict.attention(hardware=r.hardware, batch=int(r.batch), seq_len=int(r.seq_len), n_heads=int(r.n_heads),
                           head_dim=int(r.head_dim), dtype=r.dtype, causal=bool(r.causal), framework="none")
    bound = "compute" if float(ds.compute_s) >= float(ds.memory_s) else "memory"
    return float(ds[r.metric]), f"{bound}-bound"


@predictor("memory")
def _memory(r):
    hw = load_hardware(r.hardware)
    bw = r.size_bytes / float(memory_time(hw=as_numbers(hw), nbytes=r.size_bytes))
    return bw, f"HBM stream at {bw / hw.hbm.bandwidth_bytes_per_s:.0%} of peak"


@predictor("launch")
def _launch(r):
    return float(load_hardware(r.hardware).kernel_launch_s), "kernel_launch_s"


@predictor(*COLLECTIVES)
def _collective(r):
    ds = predict.collective(hardware=r.hardware, devices=int(r.devices), op=r.kind, size_bytes=float(r.size_bytes),
                            framework="none")
    hw = load_hardware(r.hardware)
    up = hw.link("scale_up")
    alpha = COLLECTIVES[r.kind].steps(r.devices, up.in_network_reduction) * up.latency_s
    t = float(ds.time_s)
    term = f"latency ({alpha / t:.0%})" if alpha > t / 2 else \
        f"bandwidth: busbw_eff {float(up.busbw_eff(r.size_bytes)):.2f}"
    return float(ds[r.metric]), term


GPU_PHASES = {"prefill": ("prefill_matmul_s", "prefill_attention_s", "prefill_elementwise_s", "prefill_comm_s",
                          "prefill_overhead_s"),
              "decode": ("decode_matmul_s", "decode_attention_s", "decode_elementwise_s", "decode_comm_s",
                         "decode_overhead_s")}


@predictor("inference")
def _inference(r):
    ds = predict.inference(**r.config)
    value = float(ds[r.metric])
    bound = str(ds["bound"].item()) if "bound" in ds else "?"
    if "decode_matmul_s" not in ds:  # wafer: decode parts per token
        names = {"decode_compute_s": "compute", "decode_comm_s": "mesh communication",
                 "decode_io_s": "inter-system I/O"}
        parts = {v: ds[k] for k, v in names.items() if k in ds}
        return value, f"{bound}-bound; {_share(parts, sum(float(v) for v in parts.values()), 'a token')}"
    gen = float(r.config.get("generate", 1))
    prefill, decode = float(ds.ttft_s), gen * float(ds.tpot_s)
    phase = "prefill" if r.metric == "ttft_s" or prefill >= decode else "decode"
    parts = {k[:-2].replace("_", " "): ds[k] for k in GPU_PHASES[phase] if k in ds}
    total = sum(float(v) for v in parts.values())
    if r.metric == "ttft_s":
        return value, _share(parts, total, "TTFT")
    share = prefill / (prefill + decode) if phase == "prefill" else decode / (prefill + decode)
    return value, f"{_share(parts, total, phase)}; {phase} {share:.0%} of the request, {bound}-bound"


TRAINING_PARTS = ("forward_s", "backward_s", "recompute_s", "pipeline_bubble_s", "tp_comm_s", "cp_comm_s",
                  "ep_comm_s", "pp_comm_s", "dp_comm_exposed_s", "optimizer_s", "weight_streaming_io_s", "step_fixed_s",
                  "layer_stream_latency_s", "moe_host_s")


@predictor("training")
def _training(r):
    ds = predict.training(**r.config)
    parts = {k[:-2].replace("_", " "): ds[k] for k in TRAINING_PARTS if k in ds}
    bound = f", {ds['bound'].item()}-bound" if "bound" in ds else ""
    return float(ds[r.metric]), f"{_share(parts, float(ds.step_time_s), 'step')}{bound}"


def _layer_term(out) -> str:
    c, total = float(out["compute_cycles"]), float(out["cycles"])
    return f"compute ({c / total:.0%} of layer cycles)" if c >= total / 2 else \
        f"mesh reduction ({1 - c / total:.0%} of layer cycles)"


@predictor("wafer_decode", "wafer_prefill", "wafer_e2e")
def _wafer(r):
    """WaferLLM's per-layer tables (x the model's layers at 1.1 GHz) with the row's `mapping`
    (default "mesh"; "t10" and "ladder" for WaferLLM's baseline rows) and `model` (default
    Llama3-8B, its padded configs as WaferLLM's files give them; another catalog model by
    wafer_fit.waferllm_shapes). End-to-end rows take the grids `prefill_P` and `decode_P`
    (default 660 and 360, WaferLLM Table 2's own for Llama3-8B)."""
    from ..workloads.wafer_layers import decode_layer, prefill_layer
    from .wafer_fit import (CLOCK_HZ, DECODE_CONFIGS, DECODE_CONTEXT, E2E_DECODE_CONFIG, E2E_DECODE_P, N_LAYERS,
                            PREFILL_PROMPT, prefill_model, waferllm_model, waferllm_shapes)
    w = as_numbers(r.hardware)
    mapping = r.config.get("mapping", "mesh")
    other = r.config.get("model")
    decode_dims = {E2E_DECODE_P: E2E_DECODE_CONFIG, **DECODE_CONFIGS}  # WaferLLM's padded Llama3-8B per grid
    if other:
        dim, ffn, layers = waferllm_shapes(other)
        prefilled = waferllm_model(dim, ffn)
    else:
        layers, prefilled = N_LAYERS, prefill_model()

    def decoded(P):  # the model WaferLLM's decode kernels run on a P x P grid
        return waferllm_model(*waferllm_shapes(other, P)[:2]) if other else waferllm_model(*decode_dims[P])
    if r.kind == "wafer_decode":
        P = int(r.config["P"])
        out = decode_layer(w, decoded(P), P=float(P), batch=1.0, context=float(DECODE_CONTEXT), mapping=mapping)
        return CLOCK_HZ / (float(out["cycles"]) * layers), _layer_term(out)
    if r.kind == "wafer_prefill":
        P = float(r.config["P"])
        out = prefill_layer(w, prefilled, P=P, batch=1.0, prompt=float(PREFILL_PROMPT), mapping=mapping)
        return PREFILL_PROMPT * CLOCK_HZ / (float(out["cycles"]) * layers), _layer_term(out)
    # WaferLLM Table 2: prefill on 660 x 660, decode on 360 x 360 at the mean context.
    prompt, gen = float(r.config["prompt"]), float(r.config["generate"])
    Pp, Pd = int(r.config.get("prefill_P", 660)), int(r.config.get("decode_P", E2E_DECODE_P))
    pre = prefill_layer(w, prefilled, P=float(Pp), batch=1.0, prompt=prompt, mapping=mapping)
    dec = decode_layer(w, decoded(Pd), P=float(Pd), batch=1.0, context=prompt + gen / 2.0, mapping=mapping)
    pre_c, dec_c = float(pre["cycles"]), gen * float(dec["cycles"])
    phase, out = ("decode", dec) if dec_c >= pre_c else ("prefill", pre)
    return gen * CLOCK_HZ / ((pre_c + dec_c) * layers), f"{phase} {max(pre_c, dec_c) / (pre_c + dec_c):.0%}: " \
        + _layer_term(out)


def is_time(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith("_per_s")


def speed_error(predicted, measured, metric) -> np.ndarray:
    """Model speed / measured speed - 1 (times inverted): positive = the model is optimistic."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    t = np.asarray([is_time(x) for x in np.atleast_1d(metric)]) if np.ndim(metric) else is_time(metric)
    return np.where(t, m / p, p / m) - 1.0


def predict_rows(obs: pd.DataFrame, specs: dict | None = None) -> pd.DataFrame:
    """predicted and dominant for every row whose kind and hardware the model knows;
    `specs` (name -> spec object, e.g. calibrated_specs) replaces a row's catalog spec:
    hardware is data, so a calibrated spec goes through predict.* as it is."""
    specs = specs or {}
    vals, terms = [], []
    for r in obs.itertuples():
        if r.kind not in PREDICTORS or r.category == "no spec":
            vals.append(np.nan)
            terms.append("no model for this row")
            continue
        if r.hardware in specs:
            config = getattr(r, "config", None)
            if isinstance(config, dict) and config.get("hardware") in specs:
                config = {**config, "hardware": specs[config["hardware"]]}
            r = r._replace(hardware=specs[r.hardware], **({"config": config} if hasattr(r, "config") else {}))
        try:
            v, term = PREDICTORS[r.kind](r)
        except Exception as e:  # noqa: BLE001  one row the model cannot predict is that row's, not the table's
            v, term = np.nan, f"not predicted: {type(e).__name__}: {e}"
        vals.append(v)
        terms.append(term)
    return pd.DataFrame({"predicted": vals, "dominant": terms}, index=obs.index)


def scored_points(ids) -> pd.DataFrame:
    """The published rows `ids` (an id prefix, or a collection of ids) predicted with the
    shipped specs: `predicted` and `error` (speed_error) added, indexed by id."""
    obs = reference_points()
    keep = obs["id"].str.startswith(ids) if isinstance(ids, str) else obs["id"].isin(list(ids))
    sub = obs[keep].reset_index(drop=True)
    sub["predicted"] = predict_rows(sub)["predicted"]
    sub["error"] = speed_error(sub["predicted"], sub["value_si"], sub["metric"])
    return sub.set_index("id")


# ---- comparison before and after calibration -----------------------------------------------
def kernel_rows(obs: pd.DataFrame) -> pd.DataFrame:
    return obs[obs["category"] == "GPU kernel"]


def calibrated_specs(obs: pd.DataFrame, prior: str = "spec") -> dict:
    """name -> `<name>@calibrated` for every GPU with kernel rows, fitted on all of them."""
    kern = kernel_rows(obs)
    return {h: fit.calibrate(h, kern, prior=prior) for h in sorted(set(kern["hardware"]))}


def compare(obs: pd.DataFrame, *, calibrate: bool = True) -> pd.DataFrame:
    """Each observation with its prediction and error before calibration (the shipped
    specs) and after: kernel rows by leave-one-out (fit.leave_one_out, pooled prior: no fit
    that predicts a row has seen it), the other GPU rows with the specs calibrated on every
    kernel row (calibrated_specs), wafer rows unchanged (no GPU table enters them)."""
    df = obs.reset_index(drop=True).copy()
    before = predict_rows(df)
    df["predicted_before"], df["dominant_before"] = before["predicted"], before["dominant"]
    df["error_before"] = speed_error(df["predicted_before"], df["value_si"], df["metric"])
    df["size"] = np.where(df["kind"] == "gemm", 2.0 * df["m"] * df["n"] * df["k"], df["size_bytes"])
    if not calibrate:
        df["predicted_after"], df["dominant_after"], df["error_after"] = (
            df["predicted_before"], df["dominant_before"], df["error_before"])
        df["after_from"], df["predicted_in_sample"], df["error_in_sample"] = "not calibrated", np.nan, np.nan
        return df
    specs = calibrated_specs(df)
    after = predict_rows(df, specs)
    df["predicted_after"], df["dominant_after"] = after["predicted"], after["dominant"]
    df["after_from"] = np.where(df["category"].str.startswith("GPU"), "calibrated", "unchanged")
    df["predicted_in_sample"] = np.nan
    kern = kernel_rows(df)
    for h in sorted(set(kern["hardware"])):
        loo = fit.leave_one_out(h, kern, prior="pooled")
        df.loc[loo.index, "predicted_after"] = loo["loo"]
        df.loc[loo.index, "predicted_in_sample"] = loo["in_sample"]
        df.loc[loo.index, "after_from"] = "LOO"
    df["error_after"] = speed_error(df["predicted_after"], df["value_si"], df["metric"])
    df["error_in_sample"] = speed_error(df["predicted_in_sample"], df["value_si"], df["metric"])
    return df


def error_table(df: pd.DataFrame, by: str = "category") -> pd.DataFrame:
    """n, median and worst |error| per group (and over all rows), before and after."""
    cols = [c for c in ("error_before", "error_after") if c in df]
    ok = df[np.isfinite(df["error_before"])]

    def stats(g):
        out = {"n": len(g)}
        for c in cols:
            a = g[c].abs()
            out[f"median |{c}|"] = a.median()
            out[f"worst |{c}|"] = a.max()
        return pd.Series(out)

    table = pd.DataFrame({k: stats(g) for k, g in ok.groupby(by)}).T
    table.loc["all"] = stats(ok)
    table["n"] = table["n"].astype(int)
    return table


def describe(r) -> str:
    """A short label of a row's configuration."""
    if r.kind == "gemm":
        grid = f" on {r.config['pe_grid']}x{r.config['pe_grid']} PEs" if "pe_grid" in r.config else ""
        return f"{r.dtype} {int(r.m)}x{int(r.n)}x{int(r.k)}{grid}"
    if r.kind == "memory":
        return f"{r.op} {r.size_bytes / 1e9:g} GB"
    if r.kind in COLLECTIVES:
        return f"{int(r.devices)} dev, {r.size_bytes / 2**20:g} MiB"
    if r.kind == "attention":
        return f"{r.dtype} seq {int(r.seq_len)}"
    if r.kind in ("inference", "training"):
        c = r.config
        model = c["model"]["name"] if isinstance(c["model"], dict) else c["model"]
        if r.kind == "inference":
            draft = f" + {c['draft_model']} k{c['draft_len']}" if c.get("draft_model") else ""
            return f"{model} b{c['batch']} {c['prompt']}/{c['generate']} {c.get('weights', '')}{draft}"
        return f"{model} {c.get('precision', 'bf16')} s{c['seq_len']} gb{c['global_batch']}"
    c = r.config
    mapping = f", {c['mapping']}" if c.get("mapping", "mesh") != "mesh" else ""
    if "model" in c and r.kind.startswith("wafer_"):
        mapping = f", {c['model']}{mapping}"
    if r.kind == "wafer_decode":
        return f"decode, {c['P']}x{c['P']} PEs{mapping}"
    if r.kind == "wafer_prefill":
        return f"prefill, {c['P']}x{c['P']} PEs{mapping}"
    if r.kind == "wafer_e2e":
        grids = f", {c['prefill_P']}/{c['decode_P']} PEs" if "prefill_P" in c else ""
        return f"{c['prompt']}/{c['generate']} tokens{grids}{mapping}"
    return ", ".join(f"{k}={v}" for k, v in c.items())


def format_value(value: float, metric: str) -> str:
    """A measured or predicted value for people: 1.29 PFLOP/s, 36 ms, 1,800 tok/s, 46.4%."""
    if metric in ("mfu", "hfu"):
        return f"{value:.1%}"
    if "tokens_per_s" in metric:
        return f"{value:,.0f} tok/s"
    if "samples_per_s" in metric:
        return f"{value:,.0f} samples/s"
    unit = "FLOP/s" if "flops_per_s" in metric else "B/s" if "bytes_per_s" in metric else "s" if is_time(metric) else ""
    return format_si(value, unit)


def worst(df: pd.DataFrame, n: int = 10, when: str = "before") -> pd.DataFrame:
    """The n largest |error| rows with what dominates the model's time there."""
    d = df[np.isfinite(df[f"error_{when}"])].copy()
    d["what"] = [describe(r) for r in d.itertuples()]
    d = d.reindex(d[f"error_{when}"].abs().sort_values(ascending=False).index).head(n)
    return d[["id", "kind", "hardware", "what", "metric", "value_si", f"predicted_{when}", f"error_{when}",
              f"dominant_{when}", "fitted"]]


def to_dataset(df: pd.DataFrame, attrs: dict | None = None) -> xr.Dataset:
    """The comparison as a Dataset along `point` (numbers, and strings as text)."""
    numbers = ["value_si", "predicted_before", "error_before", "predicted_after", "error_after",
               "predicted_in_sample", "error_in_sample", "size", "m", "n", "k", "size_bytes", "devices"]
    strings = ["id", "kind", "hardware", "category", "metric", "dominant_before", "dominant_after", "after_from",
               "source"]
    data = {c: ("point", df[c].to_numpy(dtype=float)) for c in numbers if c in df}
    data.update({c: ("point", df[c].astype(str).to_numpy(dtype=object)) for c in strings if c in df})
    data["fitted"] = ("point", df["fitted"].astype(bool).to_numpy())
    ds = xr.Dataset(data, coords={"point": np.arange(len(df))})
    ds.attrs.update(attrs or {})
    return ds
