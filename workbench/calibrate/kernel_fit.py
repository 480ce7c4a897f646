"""Fit the kernel efficiency surfaces (primitives/kernel_fits.py) to measured kernel tables
(imported by calibrate/aiconfigurator.py) and score them on held-out shape neighbourhoods.

For every row: y = log(roofline / measured), the roofline from the catalog spec's peak and
memory bandwidth (primitives/kernel_fits.ROOFLINES). The surface minimizes

    sum (y - f(x))^2 + smooth * sum (second differences of f along each axis)^2

over its knot values (a sparse linear least-squares problem, calibrate/surface_solve.py;
GEMM tables with Huber weights against their rows timed far off their neighbours), so knots
without rows take the curvature-free continuation of their neighbours. The penalty acts
along the size axes; a shape-class axis (GQA group, head size, GPUs) has a knot at every
measured value and a weak penalty that only fills its unmeasured knots. Scoring: rows are grouped into
neighbourhoods, the cells of a coarse grid (a factor 2 in each size coordinate); each of
FOLDS folds holds out whole neighbourhoods, so no point is predicted by a fit that saw it
or its near neighbours. The fitted surfaces go to workbench/specs/kernels/<hw>-<fw>.json
with their held-out scores:

    workbench calibrate fit-kernels --tables DIR [--hardware h100_sxm] [--framework trtllm]

Two kinds of table are not fitted whole: a streaming kernel's table timed with a warm L2
keeps its cold rows (cold_rows: a served iteration reads its operands from DRAM), and a
TensorRT-LLM decode table may split by the framework's XQA/MMHA dispatch (_fit_decode,
primitives/xqa_dispatch.py).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..primitives.kernel_fits import ROOFLINES, EffGrid
from ..primitives.xqa_dispatch import FALLBACK, FRAMEWORK, runs_xqa
from .kernel_features import Table, gemm_features, knot_frame, tables
from .kernel_features import decode_features  # noqa: F401  (fits of synthetic tables use it)
from .surface_solve import SMOOTH, fit_grid
from ..specs.hardware import KERNELS_DIR  # the fitted tables' folder, defined once

FOLDS = 5
NEIGHBOURHOOD_LOG2 = 1.0  # a neighbourhood spans a factor 2 of every size coordinate
MAX_CLASS_KNOTS = 24  # a class axis with more measured values than this keeps the class's knots


def monotone(grid: EffGrid, roof_knots: np.ndarray, fixed_s: float, sizes: tuple, supported=None) -> EffGrid:
    """The surface with its time at the knots made non-decreasing along every size
    coordinate: t = fixed_s + roof / eff, replaced by the least time of any larger size
    along each size axis (a running minimum from the large end, which keeps it monotone
    along the others). A smaller problem can always run as a larger one, padded, so no
    size needs more time than a larger one; the tables' slow small sizes (a framework's
    kernel heuristic picking a poor tile at m = 2 or 14) are not propagated to every
    larger size, as a running maximum would. Knots no measured row touches (`supported`
    False) are lowered like the others but never lower their neighbours."""
    shape = grid.log_eff.shape
    roof = roof_knots.reshape(shape)
    t = fixed_s + roof / np.exp(grid.log_eff)
    held = np.ones(shape, bool) if supported is None else supported.reshape(shape)
    for ax, name in enumerate(grid.axes):
        if name in sizes:
            flipped = np.flip(np.where(held, t, np.inf), axis=ax)
            t = np.minimum(t, np.flip(np.minimum.accumulate(flipped, axis=ax), axis=ax))
    return EffGrid(grid.axes, grid.knots, np.log(roof / np.maximum(t - fixed_s, 1e-30)))


# An MoE source whose 99th-percentile measured time beats its roofline by more than this
# is left out (TensorRT-LLM's NVFP4 min-latency MoE on Blackwell: up to 3.3x at a few tokens
# over 16384-wide experts, so its timing cannot include reading the experts' weights).
MOE_MAX_EFF = 1.2
FIXED_SHARES = (0.0, 0.25, 0.5, 0.7, 0.85)  # candidate fixed latencies, as shares of the fastest row


def fit_fixed(grid: EffGrid, coords: dict, roof, measured, smooth: float = SMOOTH,
              shape_fix=None, kernel_class: str | None = None, floor_s: float | None = None) -> tuple[EffGrid, float]:
    """(surface, fixed latency): the candidate share of the fastest measured time (`floor_s`
    where given: the whole table's, some rows left out) whose surface has the smallest
    squared log error in time; `shape_fix(grid, t0, coords)` (monotone) is applied to each
    candidate before it is scored."""
    best = None
    fastest = min(float(np.min(measured)), np.inf if floor_s is None else float(floor_s))
    for share in FIXED_SHARES:
        t0 = share * fastest
        g = fit_grid(grid, coords, roof, measured, t0, smooth, kernel_class)
        g = shape_fix(g, t0, coords) if shape_fix else g
        loss = float(np.mean(np.log((t0 + roof / g(**coords)) / measured) ** 2))
        if best is None or loss < best[0]:
            best = (loss, g, t0)
    return best[1], best[2]


def empty_grid(kernel_class: str, coords: dict) -> EffGrid:
    """Knots of the class, trimmed to the span of the measured coordinates (one knot of
    margin), so the surface is not extrapolated by the penalty far beyond the data."""
    kc = ROOFLINES[kernel_class]
    knots = []
    for ax in kc.axes:
        kn = np.asarray(kc.knots(ax), float)
        x = np.log2(np.maximum(np.asarray(coords[ax], float), 1e-30))
        measured = np.unique(np.round(x, 6))
        if ax not in kc.sizes and 2 <= len(measured) <= MAX_CLASS_KNOTS:
            # a shape-class axis (GQA group, head size, GPUs) gets a knot at every measured
            # class: a group of 48 is its own kernel, not the mean of 32's and 64's
            knots.append(tuple(measured))
            continue
        lo = max(np.searchsorted(kn, x.min(), side="right") - 1, 0)
        hi = min(np.searchsorted(kn, x.max(), side="left"), len(kn) - 1)
        if hi - lo < 1:
            hi = min(lo + 1, len(kn) - 1)
            lo = hi - 1
        knots.append(tuple(kn[lo:hi + 1]))
    return EffGrid(kc.axes, tuple(knots), np.zeros(tuple(len(k) for k in knots)))


def neighbourhoods(coords: dict, axes: tuple) -> np.ndarray:
    """Fold of each row: its cell of a grid a factor 2**NEIGHBOURHOOD_LOG2 wide in every
    coordinate, cells dealt to folds by a fixed hash (splitmix64's finalizer over the cell
    indices, so neighbouring cells land in unrelated folds: a linear hash dealt runs of five
    consecutive cells, a factor 32 of one coordinate, to the same fold)."""
    cells = np.stack([np.floor(np.log2(np.maximum(np.asarray(coords[a], float), 1e-30)) / NEIGHBOURHOOD_LOG2)
                      for a in axes], -1).astype(np.int64)
    with np.errstate(over="ignore"):
        h = np.zeros(len(cells), np.uint64)
        for j in range(cells.shape[1]):
            h = _mix64(h ^ (cells[:, j].astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)))
    return (h % np.uint64(FOLDS)).astype(np.int64)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 arithmetic wraps)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


ABS_ERR_LEVELS = np.linspace(0.0, 1.0, 51)  # the |error| quantiles a score keeps, to pool surfaces (pooled)


def summarize(err: np.ndarray) -> dict:
    a = np.abs(err)
    return {"rows": int(len(err)), "median_abs_err": float(np.median(a)), "p90_abs_err": float(np.quantile(a, 0.9)),
            "median_signed_err": float(np.median(err)),
            "abs_err_quantiles": [float(f"{q:.4g}") for q in np.quantile(a, ABS_ERR_LEVELS)]}


def table_points(t: Table, hw) -> tuple:
    """(roofline seconds, coordinates, measured seconds) of a table's rows whose roofline
    and time are finite and positive: what a surface is fitted and scored on."""
    roof, coords = t.features(t.rows, hw, t.variant)
    roof, measured = np.asarray(roof, float), t.rows["time_s"].to_numpy(float)
    ok = np.isfinite(roof) & (roof > 0) & np.isfinite(measured) & (measured > 0)
    coords = {k: np.broadcast_to(np.asarray(v, float), roof.shape)[ok] for k, v in coords.items()}
    return roof[ok], coords, measured[ok]


def fit_table(t: Table, hw, smooth: float = SMOOTH) -> tuple[EffGrid, float, dict, pd.DataFrame]:
    """(surface and fixed latency fitted on every row, held-out score, per-row held-out
    errors)."""
    roof, coords, measured = table_points(t, hw)
    base = empty_grid(t.kernel_class, coords)
    sizes = ROOFLINES[t.kernel_class].sizes
    fold = neighbourhoods(coords, sizes)
    roof_knots, _ = t.features(knot_frame(t.kernel_class, base), hw, t.variant)

    def shape_fix(g, t0, seen):
        """Monotone in the sizes, supported by the knots the fitted rows (`seen`) touch."""
        flat, w = base.weights(seen)
        support = np.bincount(flat.ravel(), weights=w.ravel(), minlength=base.log_eff.size) > 0.05
        return monotone(g, np.asarray(roof_knots, float), t0, sizes, support)
    pred = np.full(len(roof), np.nan)
    for f in range(FOLDS):
        train = fold != f
        if train.all() or not train.any():
            continue
        g, t0 = fit_fixed(base, {k: v[train] for k, v in coords.items()}, roof[train], measured[train], smooth,
                          shape_fix, t.kernel_class, t.floor_s)
        held = ~train
        pred[held] = t0 + roof[held] / g(**{k: v[held] for k, v in coords.items()})
    err = pred / measured - 1.0
    scored = np.isfinite(err)
    full, t0 = fit_fixed(base, coords, roof, measured, smooth, shape_fix, t.kernel_class, t.floor_s)
    per_row = pd.DataFrame({**coords, "measured_s": measured, "held_out_pred_s": pred, "err": err,
                            "fold": fold})
    score = summarize(err[scored])
    score["worst"] = worst_regions(per_row[scored], ROOFLINES[t.kernel_class].sizes)
    return full, t0, score, per_row


def worst_regions(per_row: pd.DataFrame, sizes: tuple, n: int = 3, min_rows: int = 5) -> list[str]:
    """The `n` neighbourhoods (cells of the folds) with the largest median held-out |error|,
    each as its coordinate ranges and that median, signed ('m 1-2, n 32768-65536: +35%')."""
    cell = pd.DataFrame({a: np.floor(np.log2(per_row[a].to_numpy(float)) / NEIGHBOURHOOD_LOG2) for a in sizes})
    g = per_row.assign(abs_err=per_row["err"].abs(), **{f"cell_{a}": cell[a].to_numpy() for a in sizes})
    keys = [f"cell_{a}" for a in sizes]
    stats = g.groupby(keys).agg(rows=("err", "size"), abs_err=("abs_err", "median"), err=("err", "median"))
    stats = stats[stats["rows"] >= min_rows].sort_values("abs_err", ascending=False).head(n)
    out = []
    for key, r in stats.iterrows():
        key = key if isinstance(key, tuple) else (key,)
        span = ", ".join(f"{a} {2 ** (c * NEIGHBOURHOOD_LOG2):g}-{2 ** ((c + 1) * NEIGHBOURHOOD_LOG2):g}"
                         for a, c in zip(sizes, key))
        out.append(f"{span}: {r['err']:+.0%} ({int(r['rows'])} rows)")
    return out


# Kernel classes that stream their weights or KV cache from DRAM once per call: a served
# iteration finds those operands cold (every other layer's weights and cache pass through
# the L2 between two calls of one layer's kernel), a table that times the same call again
# and again may find them in the L2.
STREAMING_CLASSES = ("gemm", "decode_attention", "mla_decode", "moe")
# A table times a warm L2 when its rows that fit the L2 beat the DRAM roofline: the 99th
# percentile of their DRAM efficiency above WARM_MIN_EFF, which no cold read reaches. On
# the GDDR cards it does (L40S: 2.5x for BF16 GEMMs, 4x for decode attention; RTX PRO
# 6000: 2x), on the HBM GPUs never (p99 0.5-1.05: their tables read cold). The warm
# rows reach WARM_SPAN x the L2 (L40S's GEMMs: DRAM efficiency 2.6 up to 1.41x its 96 MiB,
# 0.84 beyond: the L2 keeps part of an operand a little larger than itself).
WARM_MIN_EFF = 1.2
WARM_SPAN = 1.5


class _DramOnly:
    """A chip's numbers with an infinite peak: a roofline of its features is DRAM bytes
    over bandwidth."""

    def __init__(self, hw):
        self._hw = hw

    def peak(self, dtype):
        return np.inf

    def __getattr__(self, name):
        return getattr(self._hw, name)


def cold_rows(t: Table, hw) -> tuple[Table, int]:
    """(the table without its L2-resident rows, how many were left out): a streaming
    kernel's table on a chip whose tables time a warm L2 (WARM_MIN_EFF) keeps only the rows
    whose DRAM bytes exceed WARM_SPAN x the L2, so its surface times the cold reads of a
    served iteration; other tables come back whole."""
    if t.kernel_class not in STREAMING_CLASSES or not np.isfinite(getattr(hw, "l2_bytes", np.nan)):
        return t, 0
    dram_s, _ = t.features(t.rows, _DramOnly(hw), t.variant)
    dram_s = np.asarray(dram_s, float)
    nbytes = dram_s * hw.hbm.bandwidth_bytes_per_s
    resident = nbytes <= WARM_SPAN * hw.l2_bytes
    eff = dram_s / t.rows["time_s"].to_numpy(float)
    small = resident & np.isfinite(eff)
    if not small.any() or np.quantile(eff[small], 0.99) <= WARM_MIN_EFF:
        return t, 0
    floor_s = float(t.rows["time_s"].min())  # a kernel's fixed latency does not depend on where its operands sit
    return Table(t.kernel_class, t.variant, t.rows[~resident], t.features, floor_s), int(resident.sum())


def fit_dataset(df: pd.DataFrame, hw, smooth: float = SMOOTH, classes=None) -> dict:
    """{(class, variant): (EffGrid, score)} for every table of one GPU and framework (of
    the kernel `classes` named, all when None); a streaming kernel's table timed with a
    warm L2 without its L2-resident rows (cold_rows, their count in the score)."""
    out = {}
    for t in tables(df):
        if classes is not None and t.kernel_class not in classes:
            continue
        t, warm = cold_rows(t, hw)
        if len(t.rows) < 20:
            continue
        if t.kernel_class == "moe":  # a source timed faster than its HBM roofline does not run the whole op
            roof, _ = t.features(t.rows, hw, t.variant)
            if np.nanpercentile(roof / t.rows["time_s"].to_numpy(float), 99) > MOE_MAX_EFF:
                continue
        left_out = {"warm_rows_left_out": warm} if warm else {}
        if t.kernel_class == "gemm":
            g, fixed_s, score = _fit_gemm(t, hw, smooth)
        elif t.kernel_class == "decode_attention":
            for variant, g, score in _fit_decode(t, hw, smooth):
                out[(t.kernel_class, variant)] = (g, dict(score, **left_out))
            continue
        else:
            g, fixed_s, score, _ = fit_table(t, hw, smooth)
        if t.kernel_class == "moe":  # the fused op's launch chain: no shape runs it faster (primitives/moe.py)
            left_out["fastest_s"] = float(t.rows["time_s"].min())
        out[(t.kernel_class, t.variant)] = (g, dict(score, fixed_s=fixed_s, **left_out))
    return out


def _held_out_mean(per_row: pd.DataFrame) -> float:
    """Mean held-out |error| of fit_table's per-row frame: how _fit_gemm and _fit_decode
    choose between candidate fits of one table."""
    return float(np.nanmean(np.abs(per_row["err"])))


# (tile_m, max_passes) candidates of gemm_work.weight_passes; (0, 0): the weights read once
GEMM_ROW_TILES = ((0.0, 0.0), (128.0, 8.0), (128.0, 16.0), (256.0, 8.0), (256.0, 16.0))
# (wave_tile_m, wave_tile_n) candidates of gemm_work.wave_quantization, tried with the row
# tile chosen: the output tiles of the CUTLASS / cuBLAS tensor-core GEMMs (128 x 256, 256 x 128,
# 128 x 128); (0, 0): no wave tail (stream-K and persistent kernels). Of the committed GEMM
# surfaces, A100's BF16 tables take 128 x 256, RTX PRO 6000's FP4 and FP8 128 x 128, a few
# Hopper and Blackwell tables one of them, most none (specs/kernels/README.md).
GEMM_WAVE_TILES = ((0.0, 0.0), (128.0, 256.0), (256.0, 128.0), (128.0, 128.0))


def _fit_gemm(t: Table, hw, smooth: float):
    """A GEMM table fitted once per candidate row tile and pass cap (gemm_work.weight_passes),
    then, with the best of those, once per candidate wave tile (gemm_work.wave_quantization):
    the one with the least held-out mean |error| kept. Whether the kernel re-reads its
    weights per row tile, and whether it leaves a wave tail, are properties of the kernel the
    table times, found from its rows."""
    def candidate(**params):
        tt = Table(t.kernel_class, t.variant, t.rows, functools.partial(gemm_features, **params), t.floor_s)
        g, fixed_s, score, per_row = fit_table(tt, hw, smooth)
        kept = {k: v for k, v in params.items() if v}
        return _held_out_mean(per_row), g, fixed_s, dict(score, **kept)
    best = min((candidate(tile_m=tile, max_passes=cap) for tile, cap in GEMM_ROW_TILES), key=lambda c: c[0])
    passes = {k: best[3].get(k, 0.0) for k in ("tile_m", "max_passes")}
    for tm, tn in GEMM_WAVE_TILES[1:]:
        c = candidate(**passes, wave_tile_m=tm, wave_tile_n=tn)
        best = c if c[0] < best[0] else best
    return best[1:]


def _fit_decode(t: Table, hw, smooth: float) -> list:
    """[(variant, surface, score)] of a decode-attention table: one surface, or, for a
    TensorRT-LLM table whose held-out rows it predicts better (mean |error|), two split by
    the framework's kernel dispatch (xqa_dispatch.runs_xqa): XQA's under the table's
    variant, scored on all the table's rows as dispatched, and the MMHA fallback's as
    variant@mmha."""
    g, fixed_s, score, per_row = fit_table(t, hw, smooth)
    single = [(t.variant, g, dict(score, fixed_s=fixed_s))]
    rows = t.rows
    if "@" in t.variant or not (rows["framework"] == FRAMEWORK).all():
        return single
    xqa = runs_xqa(slices=rows["batch"].to_numpy(float) * rows["n_kv_heads"].to_numpy(float),
                   history=rows["context"].fillna(0.0).to_numpy(float), n_sms=hw.n_sms)
    if min(xqa.sum(), (~xqa).sum()) < 20:
        return single
    parts = [fit_table(Table(t.kernel_class, t.variant, rows[mask], t.features, t.floor_s), hw, smooth)
             for mask in (xqa, ~xqa)]
    per = pd.concat([p[3] for p in parts], ignore_index=True)
    if _held_out_mean(per) >= _held_out_mean(per_row):
        return single
    scored = per[np.isfinite(per["err"])]
    both = dict(summarize(scored["err"].to_numpy()), worst=worst_regions(scored, ROOFLINES[t.kernel_class].sizes))
    (gx, fx, _, _), (gm, fm, sm, _) = parts
    return [(t.variant, gx, dict(both, fixed_s=fx, dispatch="xqa")), (t.variant + FALLBACK, gm, dict(sm, fixed_s=fm))]


def save(fits: dict, *, hardware: str, framework: str, source: str, out_dir: Path = KERNELS_DIR,
         classes=None) -> Path:
    """Write the surfaces; with `classes`, only those classes' surfaces are replaced in an
    existing file (the others, fitted before, kept)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{hardware}-{framework}.json"
    kept = []
    if classes is not None and path.exists():
        old = json.loads(path.read_text())
        kept = [s for s in old["surfaces"] if s["class"] not in classes]
        source = ", ".join(sorted(set(old["source"].split(", ")) | set(source.split(", "))))
    doc = {"hardware": hardware, "framework": framework, "source": source,
           "fit": f"calibrate/kernel_fit.py: {FOLDS} folds by neighbourhood (factor {2 ** NEIGHBOURHOOD_LOG2:g}), "
                  f"smooth={SMOOTH}",
           "surfaces": sorted(kept + [{"class": c, "variant": v, "score": s, **g.to_dict()}
                                      for (c, v), (g, s) in fits.items()], key=lambda d: (d["class"], d["variant"]))}
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return path


def catalog_name(file_hardware: str) -> str | None:
    """The catalog spec of a table's GPU, None for GPUs the catalog lacks."""
    from ..specs import list_hardware
    return file_hardware if file_hardware in list_hardware() else None


def table_frames(tables_dir: Path, *, hardware: str | None = None, framework: str | None = None):
    """(GPU, framework, frame) of every <gpu>-<framework>.nc of an import folder whose GPU
    has a catalog spec (the named `hardware` / `framework` only, where given), with that
    GPU's collective libraries' tables (NCCL, oneCCL) appended."""
    import xarray as xr
    from ..errors import InputError
    from ..primitives.collectives import COLLECTIVE_LIBRARIES
    files = sorted(p for p in Path(tables_dir).glob("*-*.nc")
                   if not p.stem.endswith(tuple(f"-{lib}" for lib in COLLECTIVE_LIBRARIES)))
    if not files:
        raise InputError(f"tables={str(tables_dir)!r} holds no <gpu>-<framework>.nc; allowed: the --out folder "
                         "of workbench calibrate import-kernels")
    for path in files:
        hw_name, fw = path.stem.rsplit("-", 1)
        if (hardware and hw_name != hardware) or (framework and fw != framework) or catalog_name(hw_name) is None:
            continue
        frames = [xr.open_dataset(path).to_dataframe()]
        libraries = (path.with_name(f"{hw_name}-{lib}.nc") for lib in COLLECTIVE_LIBRARIES)
        frames += [xr.open_dataset(p).to_dataframe() for p in libraries if p.exists()]  # NCCL, oneCCL tables
        yield hw_name, fw, pd.concat(frames, ignore_index=True)


def fit_folder(tables_dir: Path, *, hardware: str | None = None, framework: str | None = None,
               out_dir: Path = KERNELS_DIR, log=print, classes=None) -> list[Path]:
    """Fit every <hw>-<framework>.nc of `tables_dir` (with that GPU's NCCL tables) whose GPU
    has a catalog spec; one JSON of surfaces per GPU and framework in `out_dir` (with
    `classes`, only those kernel classes are refitted and replaced in it)."""
    from ..specs import load_hardware
    paths = []
    for hw_name, fw, df in table_frames(tables_dir, hardware=hardware, framework=framework):
        source = sorted(set(df["source"].str.split(" ").str[:2].str.join(" ")))
        fits = fit_dataset(df, load_hardware(hw_name), classes=classes)
        paths.append(save(fits, hardware=hw_name, framework=fw, source=", ".join(source), out_dir=out_dir,
                          classes=classes))
        for (c, v), (_, s) in sorted(fits.items()):
            log(f"{hw_name:9s} {fw:7s} {c:17s} {v:20s} rows={s['rows']:6d} held-out median |err| "
                f"{s['median_abs_err']:.1%}, p90 {s['p90_abs_err']:.1%}")
    return paths


def scores(kernels_dir: Path = KERNELS_DIR) -> pd.DataFrame:
    """The held-out score of every committed surface: hardware, framework, class, variant,
    rows, median and p90 |error|, median signed error, fixed latency and worst regions."""
    rows = []
    for path in sorted(Path(kernels_dir).glob("*-*.json")):
        doc = json.loads(path.read_text())
        for s in doc["surfaces"]:
            sc = s["score"]
            rows.append({"hardware": doc["hardware"], "framework": doc["framework"], "kernel_class": s["class"],
                         "variant": s["variant"], "rows": sc["rows"], "median_abs_err": sc["median_abs_err"],
                         "p90_abs_err": sc["p90_abs_err"], "median_signed_err": sc["median_signed_err"],
                         "fixed_s": sc.get("fixed_s", 0.0), "worst": "; ".join(sc.get("worst", [])),
                         "abs_err_quantiles": sc.get("abs_err_quantiles")})
    return pd.DataFrame(rows)


def host_bound(scores_df: pd.DataFrame) -> pd.Series:
    """Per surface: a scaled-format GEMM table whose fixed latency is over HOST_BOUND_FACTOR x
    that of its framework's table of the same math, which a served iteration does not read
    (primitives/gemm._served_surface reads the math's table instead)."""
    from ..primitives.gemm import SCALED_FORMAT_MATH, host_bound_table
    is_gemm = scores_df["kernel_class"] == "gemm"
    fixed = scores_df[is_gemm].set_index(["hardware", "framework", "variant"])["fixed_s"]
    math = scores_df["variant"].str.split("@").str[0].map(SCALED_FORMAT_MATH)
    math_fixed = fixed.reindex(pd.MultiIndex.from_arrays([scores_df["hardware"], scores_df["framework"], math]))
    flags = is_gemm.to_numpy() & host_bound_table(scores_df["fixed_s"].to_numpy(), math_fixed.fillna(np.inf).to_numpy())
    return pd.Series(flags, index=scores_df.index, name="host_bound")


def pooled(scores_df: pd.DataFrame, by=("hardware", "kernel_class"), samples: int = 200) -> pd.DataFrame:
    """Median and 90th-percentile held-out |error| of every row of the surfaces in each group
    (all frameworks and formats of a GPU's kernel class together), from each surface's stored
    |error| quantiles (ABS_ERR_LEVELS, read as a piecewise-linear quantile function) weighted
    by its rows; surfaces scored before the quantiles were stored are left out."""
    mid = (np.arange(samples) + 0.5) / samples
    out = []
    for key, g in scores_df.dropna(subset=["abs_err_quantiles"]).groupby(list(by)):
        values = np.concatenate([np.interp(mid, ABS_ERR_LEVELS, q) for q in g["abs_err_quantiles"]])
        weights = np.repeat(g["rows"].to_numpy(float) / samples, samples)
        order = np.argsort(values)
        cdf = np.cumsum(weights[order]) / weights.sum()
        median, p90 = values[order][np.searchsorted(cdf, [0.5, 0.9])]
        out.append({**dict(zip(by, key)), "surfaces": len(g), "rows": int(g["rows"].sum()),
                    "median_abs_err": float(median), "p90_abs_err": float(p90)})
    return pd.DataFrame(out)
