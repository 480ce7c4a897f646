"""How well a kernel table predicts its own points from their measured neighbours: a
reference, taken from the data alone, for the kernel surfaces' held-out error.

For every point of a fit table (kernel_features.tables, the rows kernel_fit fits, in the
surface's own coordinates: m, n, k for a GEMM; slices and keys for decode attention; ...)
that has a measured neighbour on each side along one size coordinate, the others equal and
each neighbour within MAX_STEP, the point's time is interpolated from the two, linearly in
log time over log size, and compared with its measurement. No model enters; a point is
predicted from shapes closer to it than anything a held-out fold of kernel_fit leaves its
surface (whole factor-2 neighbourhoods are held out there).

Two figures per table:
- the interpolation's |error| (interpolated / measured - 1): what the table's immediate
  neighbours say about a point. A smooth surface scored on held-out neighbourhoods that
  comes close to it is as good as the table's own local consistency allows;
- `floor_*`: the same with each log error divided by sqrt(1 + w_a^2 + w_b^2) (w the two
  interpolation weights): if every log time carried independent noise of one spread, that
  is the spread of the noise itself, i.e. about the |error| a perfect model would show. It
  over-states the noise where curvature between neighbours is real (a wave or tile step
  counts as noise here) and under-states it slightly where a neighbour is the median of
  several rows.

    workbench calibrate kernel-roughness --tables DIR   # -> specs/kernels/roughness.csv
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..primitives.kernel_fits import ROOFLINES
from .kernel_fit import ABS_ERR_LEVELS, cold_rows, table_frames, table_points
from .kernel_features import tables

ROUGHNESS_CSV = Path(__file__).resolve().parents[1] / "specs" / "kernels" / "roughness.csv"
MAX_STEP = 4.0  # a neighbour at most this factor away along the axis counts (GEMM tables step by 2)
MIN_POINTS = 20  # a table with fewer interpolated points is not reported (kernel_fit.fit_dataset fits none under 20 rows)


def neighbour_errors(coords: dict, sizes: tuple, time_s) -> pd.DataFrame:
    """One row per (measured row, size axis) whose coordinate has a measured neighbour on
    each side: `axis`, `err` (interpolated / measured - 1) and `scale` = sqrt(1 + w_a^2 +
    w_b^2). A neighbour is the median time of the rows at its coordinate (a surface
    coordinate such as decode's slices = batch x KV heads gathers several shapes), so the
    row's own scatter about that median counts, as it does in a surface's score."""
    frame = pd.DataFrame({k: np.round(np.log2(np.maximum(np.asarray(v, float), 1e-30)), 6)
                          for k, v in coords.items()})
    frame["log_t"] = np.log(np.asarray(time_s, float))
    frame = frame[np.isfinite(frame["log_t"])]
    names = list(coords)
    merged = frame.groupby(names, as_index=False)["log_t"].median()
    out = []
    for axis in sizes:
        rest = [n for n in names if n != axis]
        g = merged.sort_values(rest + [axis]).reset_index(drop=True)
        line = g.groupby(rest, sort=False).ngroup() if rest else pd.Series(0, index=g.index)
        for side, step in (("a", 1), ("b", -1)):  # a: the neighbour below, b: above
            same = line.shift(step) == line
            g[f"x_{side}"] = g[axis].shift(step).where(same)
            g[f"y_{side}"] = g["log_t"].shift(step).where(same)
        rows = frame.merge(g.drop(columns="log_t"), on=names, how="inner")
        dx_a, dx_b = rows[axis] - rows["x_a"], rows["x_b"] - rows[axis]
        ok = (dx_a <= np.log2(MAX_STEP)) & (dx_b <= np.log2(MAX_STEP))  # NaN (no neighbour) fails too
        w_b = (dx_a / (dx_a + dx_b))[ok]
        pred = (1.0 - w_b) * rows["y_a"][ok] + w_b * rows["y_b"][ok]
        out.append(pd.DataFrame({"axis": axis, "err": np.expm1(pred - rows["log_t"][ok]).to_numpy(),
                                 "scale": np.sqrt(1.0 + (1.0 - w_b) ** 2 + w_b ** 2).to_numpy()}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["axis", "err", "scale"])


def _quantiles(a: np.ndarray) -> str:
    return ";".join(f"{q:.4g}" for q in np.quantile(a, ABS_ERR_LEVELS))


def table_roughness(df: pd.DataFrame, hw) -> list[dict]:
    """One record per fit table of one GPU and framework's frame (its L2-resident rows set
    aside as the fit sets them aside: kernel_fit.cold_rows)."""
    out = []
    for t in tables(df):
        t, _ = cold_rows(t, hw)
        _, coords, measured = table_points(t, hw)
        e = neighbour_errors(coords, ROOFLINES[t.kernel_class].sizes, measured)
        if len(e) < MIN_POINTS:
            continue
        raw = np.abs(e["err"].to_numpy(float))
        floor = np.abs(np.expm1(np.log1p(e["err"].to_numpy(float)) / e["scale"].to_numpy(float)))
        out.append({"kernel_class": t.kernel_class, "variant": t.variant, "points": int(len(e)),
                    "median_abs_err": float(np.median(raw)), "p90_abs_err": float(np.quantile(raw, 0.9)),
                    "floor_median_abs_err": float(np.median(floor)), "floor_p90_abs_err": float(np.quantile(floor, 0.9)),
                    "abs_err_quantiles": _quantiles(raw), "floor_abs_err_quantiles": _quantiles(floor)})
    return out


def roughness(tables_dir: Path, hardware: str | None = None) -> pd.DataFrame:
    """Every fit table of the imported folder whose GPU has a catalog spec (kernel_fit.
    table_frames: with its collective libraries' tables, as the fit reads them)."""
    from ..specs import load_hardware
    out = []
    for hw_name, fw, df in table_frames(tables_dir, hardware=hardware):
        out += [{"hardware": hw_name, "framework": fw, **rec} for rec in table_roughness(df, load_hardware(hw_name))]
    return pd.DataFrame(out)


def pooled(df: pd.DataFrame, which: str = "abs_err_quantiles") -> pd.DataFrame:
    """Median and p90 of the interpolation |error| (`which`="floor_abs_err_quantiles": of the
    noise floor) over every point of each GPU's kernel class, the tables weighted by their
    points (kernel_fit.pooled's mixing)."""
    from .kernel_fit import pooled as mix
    scores = pd.DataFrame({"hardware": df["hardware"], "kernel_class": df["kernel_class"], "rows": df["points"],
                           "abs_err_quantiles": [list(map(float, q.split(";"))) for q in df[which]]})
    return mix(scores).rename(columns={"surfaces": "tables", "rows": "points"})


POOL = "all"  # the framework and variant of a pooled row


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """What the CSV keeps: one row per table that has a committed surface (kernel_fit.scores;
    a host-bound table that a served GEMM sets aside, kernel_fit.host_bound, left out as
    model_vs_silicon's pools leave it out), then one row per GPU and kernel class pooling
    them (framework and variant POOL)."""
    from .kernel_fit import host_bound, scores
    s = scores()
    fitted = s[~host_bound(s)][["hardware", "framework", "kernel_class", "variant"]]
    df = df.merge(fitted, on=list(fitted.columns), how="inner")
    raw, floor = pooled(df), pooled(df, "floor_abs_err_quantiles")
    pools = raw.assign(framework=POOL, variant=POOL, floor_median_abs_err=floor["median_abs_err"],
                       floor_p90_abs_err=floor["p90_abs_err"]).drop(columns="tables")
    cols = ["hardware", "framework", "kernel_class", "variant", "points", "median_abs_err", "p90_abs_err",
            "floor_median_abs_err", "floor_p90_abs_err"]
    return pd.concat([df[cols], pools[cols]], ignore_index=True)


def pools(df: pd.DataFrame) -> pd.DataFrame:
    """The pooled rows of a summary (load()), indexed by hardware and kernel class."""
    return df[df["framework"] == POOL].set_index(["hardware", "kernel_class"])


HEADER = ("# How well each kernel table predicts its points from their measured neighbours "
          "(calibrate/kernel_roughness.py), from aiconfigurator-core's kernel tables "
          "(workbench calibrate import-kernels); written by workbench calibrate kernel-roughness\n")


def write(df: pd.DataFrame, path: Path = ROUGHNESS_CSV) -> Path:
    """Write the figures to `path` (kernel_repeatability.write_owned: only over a file
    kernel-roughness wrote)."""
    from .kernel_repeatability import write_owned
    return write_owned(df, path, HEADER, "kernel-roughness")


def load(path: Path = ROUGHNESS_CSV) -> pd.DataFrame:
    return pd.read_csv(path, comment="#")
