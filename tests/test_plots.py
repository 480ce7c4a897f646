"""plots.py: every plot on real predict.inference Datasets, labels with units, the
roofline's knee, operating points under the roof, image and bar geometry, bad input."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from workbench import plots, predict  # noqa: E402
from workbench.specs import load_hardware  # noqa: E402

# H100 SXM dense BF16 peak 989.4 TFLOP/s (measurements.csv A16a) and HBM3 3.35 TB/s
# (A17b): the roofline's ridge is at 989.4e12 / 3.35e12 = 295.3 FLOP/byte.
H100_BF16_PEAK, H100_HBM_BW = 989.4e12, 3.35e12


@pytest.fixture(scope="module")
def sweep() -> xr.Dataset:
    return predict.inference(hardware=["h100_sxm", "h200_sxm"], model="llama_3_1_70b", tp=8,
                             batch=[1, 4, 16, 64, 256], prompt=[512, 2048, 8192], weights="fp8")


@pytest.fixture(scope="module")
def point() -> xr.Dataset:
    return predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=8)


def _front(ds: xr.Dataset, x: str, y: str, along: str) -> xr.DataArray:
    """Points not dominated (both axes maximized), separately for each value of `along`."""
    out = []
    for v in ds[along].values:
        X, Y = ds[x].sel({along: v}).values, ds[y].sel({along: v}).values
        ok = ~((X[..., None, None] <= X) & (Y[..., None, None] <= Y)
               & ((X[..., None, None] < X) | (Y[..., None, None] < Y))).any(axis=(-1, -2))
        out.append(xr.DataArray(ok, dims=ds[x].sel({along: v}).dims))
    return xr.concat(out, along).assign_coords({along: ds[along]})


def _labels_have(ax, xunit: str, yunit: str) -> None:
    assert ax.get_xlabel() and ax.get_ylabel()
    assert xunit in ax.get_xlabel(), ax.get_xlabel()
    assert yunit in ax.get_ylabel(), ax.get_ylabel()


def _renders(fig) -> None:
    fig.savefig(io.BytesIO(), format="png")


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("values, unit, scale, shown", [
    (3.2e-3, "s", 1e-3, "ms"),
    (0.35, "s", 1e-3, "ms"),
    (4.0e-6, "s", 1e-6, "µs"),
    (120.0, "s", 1.0, "s"),  # seconds never become ks
    (989.4e12, "FLOP/s", 1e12, "TFLOP/s"),
    (3.35e12, "B/s", 1e12, "TB/s"),
    (85.52e9, "B", 1e9, "GB"),
    (4198.0, "tokens/s", 1.0, "tokens/s"),
    (2.5e6, "tokens/s", 1e6, "M tokens/s"),
    (0.8, "1", 1.0, "1"),
])
def test_si_scale_picks_the_prefix_for_the_largest_value(values, unit, scale, shown):
    assert plots.si_scale(np.array([values / 10, values]), unit) == (scale, shown)


def test_si_scale_ignores_nan_and_missing_units():
    assert plots.si_scale(np.array([np.nan, 2e-3]), "s") == (1e-3, "ms")
    assert plots.si_scale(np.array([np.nan]), "s") == (1.0, "s")
    assert plots.si_scale([5.0], None) == (1.0, "")


def test_label_is_long_name_and_scaled_unit(sweep):
    assert plots.label(sweep["tpot_s"]) == "tpot [ms]"
    assert plots.label(sweep["output_tokens_per_s_per_user"]) == "output per user [tokens/s]"
    assert plots.label(sweep["memory_per_device_bytes"]) == "memory per device [GB]"
    assert plots.label(sweep["batch"]) == "batch"  # a dim without units: no brackets


# --------------------------------------------------------------------------- roofline


def test_roofline_knee_is_peak_over_bandwidth():
    fig = plots.roofline("h100_sxm", dtype="bf16")
    ax = fig.axes[0]
    roof = next(ln for ln in ax.get_lines() if ln.get_gid() == "roof:h100_sxm")
    x, y = roof.get_xdata(), roof.get_ydata()
    ridge = H100_BF16_PEAK / H100_HBM_BW
    assert round(ridge) == 295
    assert x[1] == pytest.approx(ridge, rel=1e-9)
    scale, unit = plots.si_scale([H100_BF16_PEAK], "FLOP/s")
    assert unit == "TFLOP/s" and y[1] * scale == pytest.approx(H100_BF16_PEAK, rel=1e-9)
    # memory slope: y = bandwidth * intensity left of the knee, flat right of it
    assert y[0] * scale == pytest.approx(H100_HBM_BW * x[0], rel=1e-9)
    assert y[2] == y[1]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    _labels_have(ax, "FLOP/B", "TFLOP/s")
    _renders(fig)


def test_roofline_achievable_roof_is_dashed_and_below_the_peak():
    spec = load_hardware("h100_sxm")
    ax = plots.roofline("h100_sxm").axes[0]
    lines = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    ach, roof = lines["achievable:h100_sxm"], lines["roof:h100_sxm"]
    assert ach.get_linestyle() == "--"
    assert np.all(np.asarray(ach.get_ydata()) < np.asarray(roof.get_ydata()))
    scale, _ = plots.si_scale([H100_BF16_PEAK], "FLOP/s")
    assert ach.get_ydata()[2] * scale == pytest.approx(H100_BF16_PEAK * spec.gemm_peak_eff_for("bf16"))


def test_roofline_of_two_gpus_and_unknown_inputs():
    ax = plots.roofline(["h100_sxm", "h200_sxm"], dtype="fp8").axes[0]
    gids = {ln.get_gid() for ln in ax.get_lines()}
    assert {"roof:h100_sxm", "roof:h200_sxm"} <= gids
    with pytest.raises(ValueError, match="b100"):
        plots.roofline("b100")
    with pytest.raises(ValueError, match="wse3"):
        plots.roofline("wse3")
    with pytest.raises(ValueError, match="fp4"):
        plots.roofline("h100_sxm", dtype="fp4")
    with pytest.raises(ValueError, match="flops_per_s"):
        plots.roofline("h100_sxm", points={"label": "x", "intensity_flops_per_byte": 3.0})


def _under_roof(df: pd.DataFrame, dtype_of) -> None:
    for _, r in df.iterrows():
        spec = load_hardware(r.get("hardware", "h100_sxm"))
        roof = min(spec.peak(dtype_of(r)), spec.hbm.bandwidth_bytes_per_s * r["intensity_flops_per_byte"])
        assert 0 < r["flops_per_s"] <= roof * (1 + 1e-9), r["label"]


def test_roofline_points_of_one_point_lie_under_the_roof(point):
    df = plots.roofline_points(point, hardware="h100_sxm")
    assert list(df["label"]) == ["prefill", "decode"]
    _under_roof(df, lambda r: "bf16")
    pre, dec = df.iloc[0], df.iloc[1]
    # decode reads all weights once per token: intensity far below the ridge; prefill above
    assert dec["intensity_flops_per_byte"] < 30 < H100_BF16_PEAK / H100_HBM_BW < pre["intensity_flops_per_byte"]
    assert dec["intensity_flops_per_byte"] == pytest.approx(
        float(point["decode_step_flops_per_device"] / point["decode_step_bytes_per_device"]))
    fig = plots.roofline("h100_sxm", points=df)
    ax = fig.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 2
    assert {"prefill", "decode"} <= {t.get_text() for t in ax.texts}
    _renders(fig)


def test_roofline_points_of_a_sweep_use_each_hardware(sweep):
    df = plots.roofline_points(sweep)  # bandwidth from the hardware coordinate
    assert len(df) == 2 * sweep["tpot_s"].size
    assert set(df["hardware"]) == {"h100_sxm", "h200_sxm"} and "fits" in df
    _under_roof(df, lambda r: "fp8")  # weights=fp8: the GEMMs run in fp8
    assert "prefill hardware=h100_sxm, prompt=512, batch=1" in set(df["label"])
    with pytest.raises(ValueError, match="hardware"):
        plots.roofline_points(sweep.drop_vars("hardware").isel(hardware=0))
    with pytest.raises(ValueError, match="tpot_s"):
        plots.roofline_points(sweep.drop_vars("tpot_s"))


# --------------------------------------------------------------------------- Pareto


def test_pareto_front_draws_points_and_frontier_per_hue(sweep):
    x, y = "output_tokens_per_s_per_user", "output_tokens_per_s_per_device"
    d = sweep.sel(prompt=2048)
    mask = _front(d, x, y, "hardware")
    fig = plots.pareto_front(d, x, y, hue="hardware", mask=mask)
    ax = fig.axes[0]
    _labels_have(ax, "tokens/s", "tokens/s")
    fronts = [ln for ln in ax.get_lines() if ln.get_label() in ("h100_sxm", "h200_sxm")]
    assert len(fronts) == 2
    for ln, hw in zip(fronts, ["h100_sxm", "h200_sxm"]):
        m = mask.sel(hardware=hw).values
        want = np.sort(d[x].sel(hardware=hw).values[m])
        np.testing.assert_allclose(ln.get_xdata(), want)
        assert ln.get_drawstyle().startswith("steps")
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"h100_sxm", "h200_sxm"}
    _renders(fig)


def test_pareto_front_without_mask_or_hue_and_log(sweep):
    ax = plots.pareto_front(sweep, "tpot_s", "output_tokens_per_s", log=True).axes[0]
    assert ax.get_xscale() == "log"
    _labels_have(ax, "ms", "tokens/s")
    n = int(sweep["fits"].sum())  # infeasible points are left out
    assert sum(len(c.get_offsets()) for c in ax.collections) == n


def test_pareto_front_bad_input_names_it(sweep):
    with pytest.raises(ValueError, match="no_such_var"):
        plots.pareto_front(sweep, "no_such_var", "tpot_s")
    with pytest.raises(ValueError, match="gpu"):
        plots.pareto_front(sweep, "ttft_s", "tpot_s", hue="gpu")
    with pytest.raises(ValueError, match="boolean"):
        plots.pareto_front(sweep, "ttft_s", "tpot_s", mask=sweep["tpot_s"])
    with pytest.raises(ValueError, match="bound"):
        plots.pareto_front(sweep, "bound", "tpot_s")  # strings cannot be plotted


# --------------------------------------------------------------------------- breakdown


def test_breakdown_bars_sum_to_the_parts(sweep):
    d = sweep.sel(hardware="h100_sxm", prompt=8192)
    fig = plots.breakdown(d, parts=plots.DECODE_PARTS, by="batch", total="tpot_s")
    ax = fig.axes[0]
    total = sum(d[p] for p in plots.DECODE_PARTS).values
    scale, unit = plots.si_scale(total, "s")
    assert unit == "ms"
    _labels_have(ax, "batch", "ms")
    assert len(ax.containers) == len(plots.DECODE_PARTS)
    heights = np.array([[bar.get_height() for bar in c] for c in ax.containers])
    np.testing.assert_allclose(heights.sum(axis=0) * scale, total, rtol=1e-12)
    for c, p in zip(ax.containers, plots.DECODE_PARTS):  # each part in its own layer
        np.testing.assert_allclose([b.get_height() * scale for b in c], d[p].values, rtol=1e-12)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16", "64", "256"]
    # batch 256 at 8k context does not fit on H100: hatched, not dropped
    assert not bool(d["fits"].sel(batch=256))
    assert ax.containers[0][-1].get_hatch() == "//" and not ax.containers[0][0].get_hatch()
    _renders(fig)


def test_breakdown_infers_by_and_names_extra_dims(sweep):
    ax = plots.breakdown(sweep.sel(hardware="h200_sxm", batch=16), plots.PREFILL_PARTS).axes[0]
    assert ax.get_xlabel() == "prompt" and "s" in ax.get_ylabel()
    with pytest.raises(ValueError, match="hardware.*prompt|prompt.*hardware"):
        plots.breakdown(sweep, by="batch")
    with pytest.raises(ValueError, match="decode_flux_s"):
        plots.breakdown(sweep.sel(hardware="h100_sxm", prompt=512), ["decode_flux_s"], by="batch")
    with pytest.raises(ValueError, match="seq"):
        plots.breakdown(sweep.sel(hardware="h100_sxm", prompt=512), by="seq")
    with pytest.raises(ValueError, match="units"):
        plots.breakdown(sweep.sel(hardware="h100_sxm", prompt=512),
                        ["decode_compute_s", "decode_step_bytes_per_device"], by="batch")


# --------------------------------------------------------------------------- heatmap


def test_heatmap_image_matches_the_dims(sweep):
    d = sweep.sel(hardware="h100_sxm")
    fig = plots.heatmap(d, "tpot_s", x="batch", y="prompt")
    ax = fig.axes[0]
    img = ax.images[0].get_array()
    assert img.shape == (sweep.sizes["prompt"], sweep.sizes["batch"])
    scale, _ = plots.si_scale(d["tpot_s"].where(d["fits"]), "s")
    np.testing.assert_allclose(img.filled(np.nan) * scale,
                               d["tpot_s"].where(d["fits"]).transpose("prompt", "batch").values)
    assert img.mask[-1, -1]  # prompt 8192, batch 256 does not fit: grey cell
    cbar = fig.axes[1]
    assert cbar.get_ylabel() == "tpot [ms]"
    assert ax.get_xlabel() == "batch" and ax.get_ylabel() == "prompt"
    assert len(ax.texts) == img.size  # small grid: every cell annotated
    _renders(fig)


def test_heatmap_log_and_bad_input(sweep):
    fig = plots.heatmap(sweep.sel(prompt=2048), "output_tokens_per_s", x="batch", y="hardware", log=True)
    assert fig.axes[0].images[0].get_array().shape == (2, 5)
    assert "tokens/s" in fig.axes[1].get_ylabel()
    _renders(fig)
    with pytest.raises(ValueError, match="hardware"):
        plots.heatmap(sweep, "tpot_s", x="batch", y="prompt")
    with pytest.raises(ValueError, match="tpot_ms"):
        plots.heatmap(sweep, "tpot_ms", x="batch", y="prompt")
    with pytest.raises(ValueError, match="seq_len"):
        plots.heatmap(sweep, "tpot_s", x="seq_len", y="prompt")


# --------------------------------------------------------------------------- scaling


def test_scaling_curve_lines_and_exponent_labels(sweep):
    d = sweep.sel(prompt=2048)
    exp = xr.DataArray([0.85, 0.9], dims="hardware", coords={"hardware": sweep["hardware"].values})
    fig = plots.scaling_curve(d, "output_tokens_per_s", "batch", hue="hardware", exponent=exp)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    _labels_have(ax, "batch", "tokens/s")
    assert len(ax.get_lines()) == 2
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), sweep["batch"].values)
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["∝ batch$^{0.85}$", "∝ batch$^{0.90}$"]
    _renders(fig)


def test_scaling_curve_float_exponent_and_bad_input(sweep):
    d = sweep.sel(prompt=512, hardware="h200_sxm")
    ax = plots.scaling_curve(d, "tpot_s", "batch", exponent=0.25).axes[0]
    _labels_have(ax, "batch", "ms")
    assert [t.get_text() for t in ax.texts] == ["∝ batch$^{0.25}$"]
    with pytest.raises(ValueError, match="beam"):
        plots.scaling_curve(d, "tpot_s", "beam")
    with pytest.raises(ValueError, match="prompt"):
        plots.scaling_curve(sweep.sel(hardware="h100_sxm"), "tpot_s", "batch")
    with pytest.raises(ValueError, match="tpot"):
        plots.scaling_curve(d, "tpot", "batch")


# --------------------------------------------------------------------------- axes


def test_functions_draw_into_a_given_ax_and_leave_pyplot_alone(sweep):
    plt.close("all")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(12, 3))
    axes = fig.subplots(1, 3)
    d = sweep.sel(hardware="h100_sxm", prompt=2048)
    assert plots.roofline("h100_sxm", ax=axes[0]) is fig
    assert plots.breakdown(d, by="batch", ax=axes[1]) is fig
    assert plots.scaling_curve(d, "tpot_s", "batch", ax=axes[2]) is fig
    assert axes[1].containers and axes[2].get_lines()
    plots.heatmap(sweep.sel(hardware="h100_sxm"), "ttft_s", x="batch", y="prompt")
    assert plt.get_fignums() == []  # nothing registered with pyplot, nothing to show
