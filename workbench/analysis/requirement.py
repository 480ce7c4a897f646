"""Requirements: the knob value a target needs, at every point of a prediction.

    analysis.requirement(predict.inference, metric="tpot_s", target=0.005,
                         knob="hbm_bandwidth_bytes_per_s", hardware="h100_sxm",
                         model="llama_3_1_70b", devices=8, tp=8, batch=[1, 16, 64])

A time, memory, cost, power or energy metric (`*_s`, `*_bytes`, `*_usd`, ...) meets its
target at or below it; any other (tokens/s, MFU, tokens per joule) at or above it. The
knob is bracketed between `span`-fold below and above its value (the spec's, or the
override the call gives); at each point the end where the metric is better says which way
the knob helps. Where it helps as it grows (bandwidth, peak FLOP/s, SRAM) the answer is
the smallest value that meets the target; where it helps as it shrinks (latencies,
overheads, price) the largest. The search is a bisection in log(knob) run on the whole
grid at once: each step is one vectorized call of `fn` with the knob as a per-point
array, so a sweep costs `steps` calls (17 for the default bracket, to 1e-4), not `steps`
per point.

No value in the bracket meets the target: NaN, and `reason` says how close the helpful
end comes and whether the metric still responds to the knob there (elasticity ~0:
another resource binds; the prediction's `bound` is added for the metrics it describes),
or that the point does not fit there, with the prediction's reason. The whole bracket
meets it: the bracket's unhelpful end, flagged in `reason` as a bound only.

A count (SMs, the scale-up domain, the wafer's program mesh: sensitivity.integer_knobs)
is searched over integers: the bracket's ends rounded inward, the bisection's midpoints
rounded geometric means, until the two ends are adjacent integers (as many steps as that
takes, unless `steps` is given); the answer is an integer.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError, brief, check_range
from ..units import unit_attrs
from .sensitivity import knob_table, knob_value, numeric_outputs


LOWER_IS_BETTER_UNITS = ("s", "B", "USD", "W", "J")  # times, memory, cost, power, energy


def lower_is_better(metric: str) -> bool:
    """Times, bytes, dollars, watts and joules meet a target from below; rates, MFU and
    tokens per joule from above (the unit the metric's name implies: units.unit_attrs)."""
    return unit_attrs(metric).get("units") in LOWER_IS_BETTER_UNITS


ELASTICITY_STEP = 0.02  # relative step of the elasticity reported at the bracket's end
# the metrics a prediction's `bound` describes (the decode step, the training step); a TTFT is not one
BOUND_METRICS = ("tpot_s", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device", "output_tokens_per_s",
                 "cost_per_million_tokens_usd", "tokens_per_j", "step_time_s", "tokens_per_s",
                 "tokens_per_s_per_device", "mfu")
REL_TOL = 1e-4  # the bisection stops when the bracket is this narrow, relative (default steps)


def requirement(fn, *, metric: str, target: float, knob: str, span: float = 64.0, steps: int | None = None,
                **call) -> xr.Dataset:
    """The knob value that meets `target` for `metric` at every point of fn(**call), as a
    Dataset with the call's dimensions: `required` (the knob value, NaN when unreachable),
    `ratio` (required / the knob's value in the call), `metric_at_required`, the metric and
    its elasticity to the knob at the bracket's helpful end (`metric_at_bracket_end`,
    `elasticity_at_bracket_end`: how far the knob alone can take it), `knob_helps` ('up' or
    'down') and `reason` ('' when a value was found)."""
    check_range("span", span, low=1.0 + 1e-9, high=1e6, allowed="a bracket factor > 1")
    steps_given = steps
    if steps is None:  # halvings of the bracket's log width down to REL_TOL
        steps = int(np.ceil(np.log2(2.0 * np.log(span) / np.log1p(REL_TOL))))
    check_range("steps", steps, low=1, high=200, allowed="1 to 200 bisection steps")
    if not np.isscalar(target) or not np.isfinite(target) or target <= 0:
        raise InputError(f"target={brief(target)} is not allowed; allowed: one positive number in the metric's units")
    hardware, table, given, counts = knob_table(call)
    base = knob_value(knob, hardware, table, given, "to bracket", counts)
    count = knob in counts  # a count: the bracket's ends and every value tried are integers

    def value(log_x):  # the knob's value at log(knob) = log_x
        return np.round(np.exp(log_x)) if count else np.exp(log_x)

    def run(setting):
        ds = fn(**call, hardware_overrides={**given, knob: setting})
        numeric = numeric_outputs(ds)
        if metric not in numeric:
            raise InputError(f"metric={metric!r} is not a numeric output of {getattr(fn, '__name__', fn)}; "
                             "allowed: " + ", ".join(numeric))
        return ds

    def end(sign):  # (value, prediction) of a bracket end: span-fold, or as near as the knob's range allows
        tries = span ** (2.0 ** -np.arange(6.0))  # span, its root, ...: a knob bounded by another (SRAM above
        for i, f in enumerate(tries):             # its reserve) keeps a narrower bracket on that side
            v = base * f ** sign
            v = max(float(np.ceil(v)), 1.0) if count and sign < 0 else float(np.floor(v)) if count else v
            try:
                return v, run(v)
            except InputError as e:  # only the knob's own range narrows it; the last try's error stands
                if knob not in str(e) or i == len(tries) - 1:
                    raise
    (lo_v, lo_ds), (hi_v, hi_ds) = end(-1.0), end(1.0)
    lo_f, hi_f = base / lo_v, hi_v / base
    up = not lower_is_better(metric)
    m_lo, m_hi = lo_ds[metric], hi_ds[metric]
    m_lo, m_hi = xr.broadcast(m_lo, m_hi)
    # where the knob does not move the metric, a time-like knob (latency, cycles) is taken
    # to help as it shrinks, any other as it grows
    shrinks = table[knob][0] in ("s", "cycles")
    with np.errstate(invalid="ignore"):
        helps_up = xr.where(m_hi == m_lo, not shrinks, (m_hi > m_lo) if up else (m_hi < m_lo))
    helps_up = helps_up | ~np.isfinite(m_lo)
    # the helpful end and the unhelpful end of each point's bracket, in log(knob)
    log_lo, log_hi = np.log(lo_v), np.log(hi_v)
    good = xr.where(helps_up, log_hi, log_lo)
    bad = xr.where(helps_up, log_lo, log_hi)
    m_good = xr.where(helps_up, m_hi, m_lo)
    m_bad = xr.where(helps_up, m_lo, m_hi)
    fits_good = xr.where(helps_up, _fits_of(hi_ds, m_hi), _fits_of(lo_ds, m_lo))
    ok_good = _ok(m_good, target, up) & fits_good
    ok_bad = _ok(m_bad, target, up) & xr.where(helps_up, _fits_of(lo_ds, m_lo), _fits_of(hi_ds, m_hi))
    # bisection: `bad` never meets, `good` meets (where reachable); a count's by integers
    # (geometric means rounded, each strictly inside its bracket) until adjacent
    if count and steps_given is None:
        steps = int(np.ceil(np.log2(max(np.log(hi_v / lo_v) * hi_v, 2.0)))) + 2
    a, b = bad.copy(), good.copy()
    for _ in range(steps):
        if count:
            va, vb = value(a), value(b)
            wide = np.abs(vb - va) > 1
            if not bool(wide.any()):
                break
            m = np.clip(np.round(np.sqrt(va * vb)), np.minimum(va, vb) + 1, np.maximum(va, vb) - 1)
            mid = xr.where(wide, np.log(m.where(wide, 1.0)), b)
        else:
            mid = 0.5 * (a + b)
        ds = run(value(mid))
        ok = _ok(ds[metric], target, up) & _fits_of(ds, ds[metric])
        a, b = xr.where(ok, a, mid), xr.where(ok, mid, b)
    required = xr.where(ok_bad, value(bad), xr.where(ok_good, value(b), np.nan))
    final = run(xr.where(np.isfinite(required), required, base))
    at = final[metric].where(np.isfinite(required))
    # how much the metric still responds to the knob at the helpful end (one more call)
    end_v = value(good)
    if count:
        move = np.maximum(1.0, np.round(ELASTICITY_STEP * end_v))
        past_v = xr.where(helps_up, end_v + move, np.maximum(end_v - move, 1.0))
    else:
        past_v = end_v * xr.where(helps_up, 1.0 + ELASTICITY_STEP, 1.0 - ELASTICITY_STEP)
    past = run(past_v)[metric]
    with np.errstate(invalid="ignore", divide="ignore"):
        still = ((np.log(past) - np.log(m_good)) / np.log(past_v / end_v)).where(past_v != end_v)
    reason = _reasons(ok_good, ok_bad, fits_good, helps_up, (hi_ds, lo_ds), m_good, still, metric, target, knob,
                      (lo_f, hi_f))
    out = xr.Dataset({"required": required, "ratio": required / base, "metric_at_required": at,
                      "metric_at_bracket_end": m_good.where(fits_good), "elasticity_at_bracket_end": still,
                      "knob_helps": xr.where(helps_up, "up", "down"), "reason": reason})
    out["required"].attrs.update(units=table[knob][0], long_name=f"{knob} that meets {metric} {'>=' if up else '<='} "
                                                               f"{target:g}")
    out.attrs.update({"function": "analysis.requirement", "hardware": hardware, "metric": metric, "target": target,
                      "knob": knob, "knob_value": float(base), "bracket": [float(lo_v), float(hi_v)],
                      "integer_knob": int(count)})
    return out


def _ok(m, target, up):
    with np.errstate(invalid="ignore"):
        return (m >= target if up else m <= target) & np.isfinite(m)


def _fits_of(ds: xr.Dataset, like: xr.DataArray) -> xr.DataArray:
    """The prediction's `fits` flag broadcast to the metric (True where it has none)."""
    if "fits" not in ds:
        return xr.ones_like(like, dtype=bool)
    return xr.broadcast(ds["fits"].astype(bool), like)[0]


def _reasons(ok_good, ok_bad, fits_good, helps_up, ends, m_good, still, metric, target, knob, spans):
    """Per point (vectorized): '' where a value was found inside the bracket, else what
    binds at the helpful end of the bracket (`spans`: its factors below and above the knob)."""
    hi_ds, lo_ds = ends
    lo, hi = (f"{f:.3g}" for f in spans)

    def at_end(var):
        """The prediction's text output `var` at each point's helpful end ('' if none)."""
        if var not in hi_ds:
            return np.full(m_good.shape, "")
        a = xr.where(helps_up, hi_ds[var].astype(str), lo_ds[var].astype(str))
        return xr.broadcast(a, m_good)[0].transpose(*m_good.dims).values.astype(str)

    up = np.broadcast_to(helps_up.transpose(*m_good.dims).values, m_good.shape)
    at = np.where(up, f"{hi}x {knob}", f"1/{lo}x {knob}")
    why, bound = at_end("reason"), at_end("bound")
    cat = np.char.add
    reach = cat(cat(cat(f"{metric} reaches only ", np.char.mod("%.4g", m_good.values)), f" (target {target:g}) at "),
                at)
    e = xr.broadcast(still, m_good)[0].transpose(*m_good.dims).values
    reach = cat(cat(reach, np.where(np.abs(e) < 0.05, ", where it no longer responds to it (elasticity ",
                                    ", where it still responds (elasticity ")), cat(np.char.mod("%+.2f", e), ")"))
    if metric in BOUND_METRICS:
        reach = cat(reach, np.where((bound != "") & (bound != "nan"), cat("; the model's bound there: ", bound), ""))
    nofit = cat(cat("does not fit at ", at), np.where(why != "", cat(": ", why), ""))
    whole = np.where(up, f"met across the whole bracket (1/{lo}x to {hi}x): the requirement is at most "
                         "this value", f"met across the whole bracket (1/{lo}x to {hi}x): the requirement "
                                       "is at least this value")
    good = np.broadcast_to(ok_good.transpose(*m_good.dims).values, m_good.shape)
    bad = np.broadcast_to(ok_bad.transpose(*m_good.dims).values, m_good.shape)
    fit = np.broadcast_to(fits_good.transpose(*m_good.dims).values, m_good.shape)
    out = np.where(good, np.where(bad, whole, ""), np.where(fit, reach, nofit))
    return xr.DataArray(out.astype(str), dims=m_good.dims, coords=m_good.coords)
