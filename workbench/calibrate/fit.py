"""Fit a GPU spec's efficiency tables to kernel measurements and return a new spec variant
(`h100_sxm@calibrated`, built with dataclasses.replace; the YAML is never edited).

Measurements are rows in the measurement schema (workbench.microbench.schema; the published
rows come through calibrate.gap.observations): kind, hardware, dtype, m, n, k, size_bytes,
devices, op, metric, value_si. Each table is inverted from the model's own formula:

- GEMM (primitives/gemm.py): achieved = F / (peak(dtype) · wave) = gemm_peak_eff(dtype) ·
  gemm_eff(s), s = 2mnk / wave the executed work; one shared ramp, one level per dtype.
  GEMMs the spec calls memory-significant (memory_s > half the measured time) say nothing
  about the ramp and are not used. A row that is the best over a shape search (config
  `best_of_shapes`, the MAMF rows) measures the plateau: it is fitted and predicted at the
  better of its shape and PLATEAU_SHAPE (16384^3, where the tests compare it).
- memory_eff (memory_time): eff = measured bytes/s / HBM bandwidth at the bytes moved, for
  streams that read and write (copy, triad; a read-only `dot` runs faster and is not used).
- busbw_eff of the scale-up link (primitives/collectives.py): eff = traffic / (bandwidth ·
  (t - steps · latency)), t = size / algbw, for groups inside the scale-up domain.
- kernel_launch_s: the median of `launch` rows replayed from a CUDA graph (op "graph").

A table is log(eff) at knots, linear in log(size) between them, as EfficiencyTable
interpolates. The fit moves a prior table by a correction that is smooth in log(size)
(penalized first differences) and small where no row speaks, by linear least squares.
The prior is the spec's own table (prior="spec": what no row measures stays as it was), or
(prior="pooled") the same fit run on the other hardware's rows, so a fit never sees the
spec's YAML, whose tables came from these very rows: leave_one_out uses it, so that a row
is never predicted by a table that was fitted to it.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..primitives.attention import attention_prefill
from ..primitives.collectives import COLLECTIVES, collective
from ..primitives.gemm import gemm, memory_time, wave_efficiency
from ..backends import as_numbers
from ..specs import EfficiencyTable, HardwareSpec, load_hardware
from ..units import DTYPE_BYTES

SMOOTH = 0.1  # weight of the first differences of the correction (per decade of size)
RIDGE = 0.03  # pull of the correction toward zero where no row speaks
LEVEL_RIDGE = 0.001  # pull of a dtype's GEMM level toward the prior: level shifts go there
MEMORY_SIGNIFICANT = 0.5  # a GEMM whose modelled memory time exceeds this share is not fitted
MEMORY_OPS = ("copy", "triad", "")  # streams fitted to memory_eff ("" : op not stated)
PLATEAU_SHAPE = (16384.0, 16384.0, 16384.0)  # where a best-of-shapes row is compared (as the tests do)
TABLES = ("gemm", "memory", "collective", "launch")


def base_name(name: str) -> str:
    """`h100_sxm@calibrated` -> `h100_sxm`."""
    return str(name).split("@")[0]


# ---- the least-squares table fit ------------------------------------------------------------
def _hat(u, knots_u):
    """Interpolation weights of np.interp (held constant beyond the ends) as a matrix."""
    u, knots_u = np.asarray(u, float), np.asarray(knots_u, float)
    w = np.zeros((u.size, knots_u.size))
    if knots_u.size == 1:
        w[:, 0] = 1.0
        return w
    uc = np.clip(u, knots_u[0], knots_u[-1])
    j = np.clip(np.searchsorted(knots_u, uc, side="right") - 1, 0, knots_u.size - 2)
    t = (uc - knots_u[j]) / (knots_u[j + 1] - knots_u[j])
    rows = np.arange(u.size)
    w[rows, j] = 1.0 - t
    w[rows, j + 1] = t
    return w


def fit_log_table(x, y, knots, prior_log, *, groups=None, prior_levels=None, fit_levels=True):
    """Least squares for log(eff) at `knots` (and one additive log level per group, held
    at prior_levels unless fit_levels): log y_i = level[g_i] + interp(log x_i; knots, theta).
    Returns (theta, levels)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ku = np.log10(np.asarray(knots, float))
    K = ku.size
    prior_log = np.asarray(prior_log, float)
    levels0 = np.asarray(prior_levels if prior_levels is not None else [], float)
    n_g = levels0.size
    W = _hat(np.log10(x), ku)
    G = np.zeros((x.size, n_g))
    if n_g:
        G[np.arange(x.size), np.asarray(groups, int)] = 1.0
    rhs = np.log(y) - W @ prior_log - G @ levels0
    if not fit_levels:
        G, n_g = G[:, :0], 0
    D = np.zeros((max(K - 1, 0), K))
    for j in range(K - 1):
        du = ku[j + 1] - ku[j]
        D[j, j], D[j, j + 1] = -1.0 / du, 1.0 / du
    A = np.vstack([np.hstack([W, G]),
                   np.hstack([SMOOTH * D, np.zeros((K - 1, n_g))]),
                   np.hstack([RIDGE * np.eye(K), np.zeros((K, n_g))]),
                   np.hstack([np.zeros((n_g, K)), LEVEL_RIDGE * np.eye(n_g)])])
    b = np.concatenate([rhs, np.zeros(A.shape[0] - rhs.size)])
    sol = np.linalg.lstsq(A, b, rcond=None)[0]
    return prior_log + sol[:K], levels0 + (sol[K:] if fit_levels else 0.0)


def _knots(prior: EfficiencyTable, x) -> np.ndarray:
    """The prior's sizes, plus the data's extremes where they lie beyond them."""
    k = np.asarray(prior.size, float)
    x = np.asarray(x, float)
    if x.size and x.min() < k[0] / 2:
        k = np.concatenate([[x.min()], k])
    if x.size and x.max() > k[-1] * 2:
        k = np.concatenate([k, [x.max()]])
    return k


def _table(knots, theta, source: str) -> EfficiencyTable:
    """log eff -> an EfficiencyTable capped at 1 whose time never falls as size grows
    (log-log slope at most 1 between knots)."""
    eff = np.minimum(np.exp(theta), 1.0)
    for j in range(1, eff.size):
        eff[j] = min(eff[j], eff[j - 1] * knots[j] / knots[j - 1])
    return EfficiencyTable(size=tuple(float(f"{s:.6g}") for s in knots),
                           eff=tuple(float(f"{e:.5g}") for e in eff), source=source)


# ---- inverting the model per table ---------------------------------------------------------
def _rows(rows: pd.DataFrame, hw_name: str, kinds) -> pd.DataFrame:
    r = rows[(rows["hardware"].map(base_name) == base_name(hw_name)) & rows["kind"].isin(kinds)]
    return r[np.isfinite(pd.to_numeric(r["value_si"], errors="coerce"))]


def best_of_shapes(row) -> bool:
    config = row.get("config") if hasattr(row, "get") else getattr(row, "config", None)
    return bool(isinstance(config, dict) and config.get("best_of_shapes"))


def _gemm_points(hw: HardwareSpec, rows: pd.DataFrame):
    """(executed size, achieved fraction of peak after wave quantization, dtype) per usable GEMM."""
    out = []
    for _, r in _rows(rows, hw.name, ["gemm"]).iterrows():
        m, n, k, dt = float(r["m"]), float(r["n"]), float(r["k"]), str(r["dtype"])
        if best_of_shapes(r):
            m, n, k = PLATEAU_SHAPE
        peak = hw.peak(dt)
        if r["metric"] != "flops_per_s" or not np.isfinite(peak) or dt not in DTYPE_BYTES:
            continue
        t = 2 * m * n * k / float(r["value_si"])
        mem = memory_time(hw=as_numbers(hw), nbytes=(m * k + k * n + m * n) * DTYPE_BYTES[dt])
        if mem > MEMORY_SIGNIFICANT * t:
            continue
        wave = float(wave_efficiency(hw=as_numbers(hw), m=m, n=n, k=k))
        out.append((2 * m * n * k / wave, float(r["value_si"]) / (peak * wave), dt))
    return out


def _memory_points(hw: HardwareSpec, rows: pd.DataFrame):
    r = _rows(rows, hw.name, ["memory"])
    r = r[(r["metric"] == "bytes_per_s") & r["op"].isin(MEMORY_OPS)]
    return [(float(s), float(v) / hw.hbm.bandwidth_bytes_per_s) for s, v in zip(r["size_bytes"], r["value_si"])]


def _collective_points(hw: HardwareSpec, rows: pd.DataFrame):
    link = hw.link("scale_up")
    out = []
    for _, r in _rows(rows, hw.name, list(COLLECTIVES)).iterrows():
        op, p, size = str(r["kind"]), float(r["devices"]), float(r["size_bytes"])
        if not (2 <= p <= link.domain_size):
            continue
        c = COLLECTIVES[op]
        if r["metric"] == "bus_bandwidth_bytes_per_s":
            t = size / (float(r["value_si"]) / c.busbw_factor(p))
        elif r["metric"] == "time_s":
            t = float(r["value_si"])
        else:
            continue
        wire = t - c.steps(p, link.in_network_reduction) * link.latency_s
        if wire > 0:
            out.append((size, c.traffic(size, p, link.in_network_reduction) / (link.unidir_bytes_per_s * wire)))
    return out


# ---- priors ----------------------------------------------------------------------------------
def _others(rows: pd.DataFrame, hw_name: str) -> list[HardwareSpec]:
    from ..specs import list_hardware
    names = sorted({base_name(h) for h in rows["hardware"]} - {base_name(hw_name)})
    specs = [load_hardware(n) for n in names if n in list_hardware()]
    return [s for s in specs if isinstance(s, HardwareSpec)]


def _gemm_prior(hw: HardwareSpec, rows, prior: str, knots_from: EfficiencyTable):
    """(knot sizes, log ramp, {dtype: log level}) to start from."""
    if prior == "pooled":
        pts = [(s, a, f"{o.name}/{d}") for o in _others(rows, hw.name) for s, a, d in _gemm_points(o, rows)]
        if pts:
            x, y, g = map(np.asarray, zip(*pts))
            names = sorted(set(g))
            knots = _knots(knots_from, x)
            theta, lv = fit_log_table(x, y, knots, np.zeros(knots.size), groups=[names.index(v) for v in g],
                                      prior_levels=np.full(len(names), np.log(np.median(y))))
            shift = theta.max()
            theta, lv = theta - shift, lv + shift
            by_dtype = {}
            for name, v in zip(names, lv):
                by_dtype.setdefault(name.split("/")[1], []).append(v)
            levels = {d: float(np.mean(v)) for d, v in by_dtype.items()}
            levels["*"] = float(np.mean(lv))
            return knots, theta, levels
    theta = np.log(np.asarray(knots_from.eff, float))
    return np.asarray(knots_from.size, float), theta, {d: float(np.log(v)) for d, v in hw.gemm_peak_eff.items()}


def _table_prior(hw, rows, prior: str, table: EfficiencyTable, points_of):
    """(knot sizes, log eff) to start from, for memory and collective tables."""
    if prior == "pooled":
        pts = [p for o in _others(rows, hw.name) for p in points_of(o, rows)]
        if pts:
            x, y = map(np.asarray, zip(*pts))
            knots = _knots(table, x)
            theta, _ = fit_log_table(x, y, knots, np.full(knots.size, np.log(np.median(y))))
            return knots, np.minimum(theta, 0.0)
    return np.asarray(table.size, float), np.log(np.asarray(table.eff, float))


def _rebase(knots0, theta0, knots):
    """A prior given at knots0, read at other knots (log-log interpolation, as tables do)."""
    return np.interp(np.log10(knots), np.log10(knots0), theta0)


# ---- the fit -------------------------------------------------------------------------------
def calibrate(hardware, rows: pd.DataFrame, *, prior: str = "spec", suffix: str = "calibrated",
              tables=TABLES, gemm_levels: bool = True) -> HardwareSpec:
    """A new HardwareSpec named `<name>@<suffix>` whose GEMM ramp and levels, memory_eff,
    scale-up busbw_eff and kernel_launch_s are fitted to this hardware's rows in `rows`
    (rows of other hardware only shape the prior when prior="pooled"). A table without
    rows keeps the prior's values (the spec's, or the pooled fit's). gemm_levels=False
    holds gemm_peak_eff at the prior and fits the ramp alone."""
    if prior not in ("spec", "pooled"):
        raise ValueError(f"prior={prior!r} is not allowed; allowed: spec, pooled")
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(base_name(hardware))
    if not isinstance(hw, HardwareSpec):
        raise ValueError(f"hardware={hw.name!r} is not a GPU spec; allowed: a GPU "
                         "(wafer specs are fitted by wafer_fit)")
    changes, used = {}, []
    label = f"workbench.calibrate.fit (prior {prior})"
    if "gemm" in tables:
        pts = _gemm_points(hw, rows)
        knots0, theta0, levels0 = _gemm_prior(hw, rows, prior, hw.gemm_eff)
        if pts:
            x, y, d = map(np.asarray, zip(*pts))
            knots = _knots(EfficiencyTable(size=tuple(knots0), eff=tuple(np.ones(knots0.size))), x)
            dtypes = sorted(set(d))
            start = [levels0.get(t, levels0.get("*", np.log(hw.gemm_peak_eff_for(t)))) for t in dtypes]
            theta, lv = fit_log_table(x, y, knots, _rebase(knots0, theta0, knots),
                                      groups=[dtypes.index(t) for t in d], prior_levels=start,
                                      fit_levels=gemm_levels)
            shift = max(theta.max(), 0.0)  # the ramp tops at 1: a higher level moves into the dtype levels
            theta = theta - shift
            peak_eff = {t: float(min(np.exp(v + shift), 1.0)) for t, v in
                        {**{t: levels0.get(t, levels0.get("*", np.log(v))) for t, v in hw.gemm_peak_eff.items()},
                         **dict(zip(dtypes, lv))}.items()}
            changes["gemm_eff"] = _table(knots, theta, f"{label}: {len(pts)} GEMMs")
            changes["gemm_peak_eff"] = {t: float(f"{v:.4g}") for t, v in peak_eff.items()}
            used.append(f"{len(pts)} GEMM")
        elif prior == "pooled":
            changes["gemm_eff"] = _table(knots0, theta0, f"{label}: pooled, no own GEMM rows")
            changes["gemm_peak_eff"] = {t: float(f"{min(np.exp(levels0.get(t, levels0.get('*', np.log(v)))), 1.0):.4g}")
                                        for t, v in hw.gemm_peak_eff.items()}
    if "memory" in tables:
        changes["memory_eff"] = _fit_table(hw, rows, prior, hw.memory_eff, _memory_points, label, "memory", used)
    if "collective" in tables:
        up = hw.link("scale_up")
        table = _fit_table(hw, rows, prior, up.busbw_eff, _collective_points, label, "collective", used)
        links = tuple(dataclasses.replace(ln, busbw_eff=table) if ln is up else ln for ln in hw.links)
        changes["links"] = links
    if "launch" in tables:
        r = _rows(rows, hw.name, ["launch"])
        r = r[(r["op"] == "graph") & (r["metric"] == "time_s")]
        if len(r):
            changes["kernel_launch_s"] = float(np.median(r["value_si"].astype(float)))
            used.append(f"{len(r)} launch")
    notes = f"{hw.name} calibrated by {label} on {', '.join(used) or 'no'} rows; the YAML is unchanged"
    return dataclasses.replace(hw, name=f"{base_name(hw.name)}@{suffix}", notes=notes, **changes)


def _fit_table(hw, rows, prior, table, points_of, label, what, used) -> EfficiencyTable:
    knots0, theta0 = _table_prior(hw, rows, prior, table, points_of)
    pts = points_of(hw, rows)
    if not pts:
        return table if prior == "spec" else _table(knots0, theta0, f"{label}: pooled, no own {what} rows")
    x, y = map(np.asarray, zip(*pts))
    knots = _knots(EfficiencyTable(size=tuple(knots0), eff=tuple(np.ones(knots0.size))), x)
    theta, _ = fit_log_table(x, y, knots, _rebase(knots0, theta0, knots))
    used.append(f"{len(pts)} {what}")
    return _table(knots, theta, f"{label}: {len(pts)} {what} rows")


# ---- predictions with a spec object --------------------------------------------------------
KERNEL_KINDS = ("gemm", "attention", "memory", "launch") + tuple(COLLECTIVES)


def predict_kernel(hw: HardwareSpec, row) -> float:
    """The model's value of a kernel row's metric with spec `hw` (the formulas of
    predict.gemm / predict.attention / predict.collective and memory_time)."""
    kind, metric = str(row["kind"]), str(row["metric"])
    hw = as_numbers(hw)
    if kind == "gemm":
        b = DTYPE_BYTES[row["dtype"]]
        shapes = [(float(row["m"]), float(row["n"]), float(row["k"]))]
        shapes += [PLATEAU_SHAPE] if best_of_shapes(row) else []
        rates = [gemm(hw=hw, m=m, n=n, k=k, dtype=row["dtype"], a_bytes=b, b_bytes=b, c_bytes=b) for m, n, k in shapes]
        return max(float(g["flops"] / g["time_s"]) for g in rates)
    if kind == "attention":
        a = attention_prefill(hw=hw, batch=float(row["batch"]), seq_len=float(row["seq_len"]),
                              n_heads=float(row["n_heads"]), head_dim=float(row["head_dim"]),
                              causal=bool(row["causal"]), dtype=row["dtype"], act_bytes=DTYPE_BYTES[row["dtype"]])
        return float(a["flops"] / a["time_s"])
    if kind == "memory":
        s = float(row["size_bytes"])
        return float(s / memory_time(hw=as_numbers(hw), nbytes=s))
    if kind == "launch":
        return float(hw.kernel_launch_s)
    if kind in COLLECTIVES:
        c = collective(hw=hw, op=kind, size=float(row["size_bytes"]), devices=float(row["devices"]))
        return float(c["time_s"] if metric == "time_s" else c["bus_bandwidth_bytes_per_s"])
    raise ValueError(f"kind={kind!r} is not a kernel; allowed: {', '.join(KERNEL_KINDS)}")


def leave_one_out(hardware, rows: pd.DataFrame, *, prior: str = "pooled") -> pd.DataFrame:
    """For each kernel row of `hardware`: the spec's prediction (before), the fit on every
    row (in_sample) and the fit on every row but that one (loo), with their errors
    (model / measured - 1). The gap between in_sample and loo errors is the over-fit."""
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(base_name(hardware))
    own = _rows(rows, hw.name, KERNEL_KINDS)
    full = calibrate(hw, rows, prior=prior)
    out = []
    for i, r in own.iterrows():
        held_out = calibrate(hw, rows.drop(index=i), prior=prior)
        measured = float(r["value_si"])
        vals = {"before": predict_kernel(hw, r), "in_sample": predict_kernel(full, r),
                "loo": predict_kernel(held_out, r)}
        out.append({"row": i, "kind": r["kind"], "measured": measured, **vals,
                    **{f"err_{k}": v / measured - 1 for k, v in vals.items()}})
    return pd.DataFrame(out).set_index("row") if out else pd.DataFrame(
        columns=["kind", "measured", "before", "in_sample", "loo", "err_before", "err_in_sample", "err_loo"])
