"""The explorer's pure callbacks and its real ipywidgets, driven without a browser: every
number shown must be the one predict.inference (plus costs.add_costs) gives for the
controls' values, and invalid settings must become messages, not exceptions."""
from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure

from workbench import explore, predict
from workbench.costs import add_costs
from workbench.errors import InputError

pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parents[1]
GPU_VARS = ("ttft_s", "tpot_s", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device",
            "memory_per_device_bytes", "fits")


def _api(hw, **controls):
    """What the page must show for chip `hw`: predict.inference with the controls' values
    (GPUs: tp, pp; wafers: devices = systems), plus costs."""
    s = explore.normalize_state({k: v for k, v in controls.items() if k != "hardware"})
    common = dict(model=s["model"], batch=s["batch"], prompt=s["prompt"], generate=s["generate"],
                  weights=s["weights"], activations=None if s["activations"] == "auto" else s["activations"],
                  kv=None if s["kv"] == "auto" else s["kv"])
    if hw in explore.WAFERS:
        return add_costs(predict.inference(hardware=hw, devices=explore.state.wafer_devices(s["systems"]), **common))
    return add_costs(predict.inference(hardware=hw, tp=s["tp"], pp=s["pp"], **common))


def _shown(table_html: str) -> dict:
    """hardware -> {variable: SI value} from the table's data attributes, and the text."""
    rows = {}
    for hw, body in re.findall(r'<tr data-hardware="([^"]+)"[^>]*>(.*?)</tr>', table_html):
        rows[hw] = {v: float(x) for v, x in re.findall(r'data-var="([^"]+)" data-value="([^"]+)"', body)}
        rows[hw]["_text"] = body
    return rows


# --------------------------------------------------------------------------- state


def test_normalize_state_fills_defaults_and_checks():
    s = explore.normalize_state({"hardware": "cs2", "batch": 4.0})
    assert s["hardware"] == ("cs2",) and s["batch"] == 4 and s["model"] == explore.DEFAULTS["model"]
    assert set(s) == set(explore.CONTROLS)
    with pytest.raises(InputError, match="control 'bogus' is not known"):
        explore.normalize_state(bogus=1)
    with pytest.raises(InputError, match="hardware='tpu' is not known"):
        explore.normalize_state(hardware=["h100_sxm", "tpu"])
    with pytest.raises(InputError, match="hardware=\\(\\) is not allowed"):
        explore.normalize_state(hardware=())
    with pytest.raises(InputError, match="batch=0 is not allowed"):
        explore.normalize_state(batch=0)
    with pytest.raises(InputError, match="weights='fp9' is not known"):
        explore.normalize_state(weights="fp9")


def test_attention_weights_reach_the_gpus_and_the_wafers_say_they_keep_one_format():
    """The attention_weights control is predict.inference(attention_weights=) on the GPUs;
    the wafers are computed with `weights` and a message says so; 'same' is the weights'."""
    state = dict(hardware=["b200", "cs3"], model="gpt_oss_120b", weights="fp4", attention_weights="bf16", tp=2)
    ds = explore.compute(state)
    ref = predict.inference(hardware="b200", model="gpt_oss_120b", weights="fp4", attention_weights="bf16", tp=2,
                            pp=1, batch=8, prompt=2048, generate=256)
    for name in ("tpot_s", "ttft_s", "memory_per_device_bytes"):
        assert float(ds[name].sel(hardware="b200")) == pytest.approx(float(ref[name]), rel=1e-12)
    assert ds.attrs["problems"] == ["cs3: attention_weights=bf16 applies to GPUs; a wafer's layers keep weights=fp4"]
    same = explore.compute(dict(state, attention_weights="same"))
    assert same.attrs["problems"] == [] and float(same.memory_per_device_bytes.sel(hardware="b200")) < \
        float(ds.memory_per_device_bytes.sel(hardware="b200"))  # BF16 attention holds more bytes than FP4
    with pytest.raises(InputError, match="attention_weights='fp8_2:4' is not known"):
        explore.normalize_state(attention_weights="fp8_2:4")


def test_controls_offer_every_gpu_and_both_wafer_systems():
    from workbench.specs import list_gpus, list_models
    assert set(explore.HARDWARE) == set(list_gpus()) | {"cs3", "cs2"}
    ex = explore.Explorer()
    assert [value for _, value in ex.controls["hardware"].options] == list(explore.HARDWARE)
    assert ("cs3 (wafer)", "cs3") in ex.controls["hardware"].options
    assert list(ex.controls["model"].options) == list_models()


# --------------------------------------------------------------------------- compute


def test_compute_equals_predict_for_gpus_and_wafers_side_by_side():
    state = dict(hardware=["cs3", "h100_sxm", "h200_sxm"], model="llama_3_1_70b", weights="fp8", batch=16,
                 prompt=1024, generate=128, tp=4, pp=2, systems=4)
    ds = explore.compute(state)
    assert list(ds.hardware.values) == ["cs3", "h100_sxm", "h200_sxm"]  # the order chosen
    assert set(ds.dims) == {"hardware"} and ds.attrs["problems"] == []
    for hw in state["hardware"]:
        ref = _api(hw, **state)
        for var in GPU_VARS + ("cost_per_million_tokens_usd",):
            np.testing.assert_allclose(ds[var].sel(hardware=hw).values, ref[var].values.ravel()[0], rtol=1e-12,
                                       err_msg=f"{hw} {var}")
    assert float(ds.devices.sel(hardware="h100_sxm")) == 8 and float(ds.devices.sel(hardware="cs3")) == 4
    assert ds.tpot_s.attrs["units"] == "s" and ds.decode_io_s.attrs["units"] == "s"


def test_a_layout_that_cannot_run_is_a_flagged_row_and_the_other_group_still_shows():
    ds = explore.compute(dict(hardware=["h100_sxm", "cs3"], tp=3))  # 64 heads: tp=3 cannot run
    assert list(ds.hardware.values) == ["h100_sxm", "cs3"]
    assert not bool(ds.fits.sel(hardware="h100_sxm")) and bool(ds.fits.sel(hardware="cs3"))
    assert "tp=3 does not divide n_heads=64" in str(ds.reason.sel(hardware="h100_sxm").values)
    ds = explore.compute(dict(hardware=["h100_sxm", "cs3"], activations="fp8"))
    assert list(ds.hardware.values) == ["h100_sxm"]
    assert "activations='fp8' is not allowed on 'cs3'" in ds.attrs["problems"][0]
    gpus = explore.compute(dict(hardware=["h100_sxm", "b200"], tp=3))
    assert not gpus.fits.any()


def test_infeasible_points_stay_flagged_with_their_reason():
    ds = explore.compute(dict(hardware=["a100_sxm", "h100_sxm"], weights="fp8", activations="fp8", tp=8))
    assert not bool(ds.fits.sel(hardware="a100_sxm")) and bool(ds.fits.sel(hardware="h100_sxm"))
    assert explore.infeasible(ds) == ["a100_sxm: does not fit (no fp8 math units on a100_sxm)"]
    # FP8 weights alone run weight-only (W8A16, vLLM's FP8 Marlin) where no FP8 units are
    w8 = explore.compute(dict(hardware=["a100_sxm"], weights="fp8", tp=8))
    assert w8.fits.all() and explore.infeasible(w8) == []
    big = explore.compute(dict(hardware=["h100_sxm"], model="llama_3_1_405b", weights="bf16", tp=1))
    assert not big.fits.item() and big.memory_per_device_bytes.item() > big.memory_capacity_bytes.item()
    assert "exceed memory" in explore.infeasible(big)[0]


# --------------------------------------------------------------------------- table


def test_summary_table_and_its_html_show_the_dataset():
    ds = explore.compute(dict(hardware=["h100_sxm", "a100_sxm", "cs3"], weights="fp8"))
    df = explore.summary_table(ds)
    assert list(df.index) == ["h100_sxm", "a100_sxm", "cs3"]
    for col in ("ttft_s", "tpot_s", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device",
                "cost_per_million_tokens_usd", "memory_per_device_bytes", "memory_capacity_bytes"):
        np.testing.assert_array_equal(df[col].to_numpy(), ds[col].values)
    html = explore.table_html(df)
    rows = _shown(html)
    assert rows["h100_sxm"]["tpot_s"] == float(ds.tpot_s.sel(hardware="h100_sxm"))
    tpot_ms = float(ds.tpot_s.sel(hardware="h100_sxm")) * 1e3
    assert f">{tpot_ms:.4g}</td>" in rows["h100_sxm"]["_text"]  # shown in the header's ms
    assert df.loc["a100_sxm", "fits"] == True  # noqa: E712  (FP8 weights run W8A16 without FP8 units)
    nofit = explore.compute(dict(hardware=["h100_sxm", "a100_sxm"], weights="fp8", activations="fp8"))
    html = explore.table_html(explore.summary_table(nofit))
    assert "does not fit: no fp8 math units" in _shown(html)["a100_sxm"]["_text"]
    assert 'class="wb-row-nofit"' in html and ">n/a<" in _shown(html)["a100_sxm"]["_text"]
    with pytest.raises(InputError, match="more than one value"):
        explore.summary_table(explore.sweep(dict(hardware=["h100_sxm"]), "batch"))


def test_messages_html_escapes_and_is_empty_without_messages():
    assert explore.messages_html() == ""
    out = explore.messages_html(["tp=3 <bad>"], ["cs3: does not fit"])
    assert "wb-error" in out and "wb-warn" in out and "&lt;bad&gt;" in out


# --------------------------------------------------------------------------- figures


def _texts(fig: Figure) -> str:
    """Every text in a figure: titles, annotations, legend labels."""
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title()] + [t.get_text() for t in ax.texts] + ax.get_legend_handles_labels()[1]
    return " | ".join(out)


def test_figures_for_gpus_and_wafers():
    state = dict(hardware=["h100_sxm", "h200_sxm", "cs3"])
    ds = explore.compute(state)
    figs = explore.figures(ds, state)
    assert set(figs) == {"roofline", "breakdown", "memory"}
    assert all(isinstance(f, Figure) for f in figs.values())
    gids = {line.get_gid() for line in figs["roofline"].axes[0].lines}
    assert {"roof:h100_sxm", "roof:h200_sxm"} <= gids and not any("cs3" in str(g) for g in gids)
    roof_text = _texts(figs["roofline"])
    assert "h100_sxm decode" in roof_text and "h200_sxm prefill" in roof_text and "cs3 (wafer" in roof_text
    legend = figs["breakdown"].axes[0].get_legend_handles_labels()[1]
    assert {"matmul", "attention", "elementwise", "comm", "compute"} <= set(legend)
    # each bar stacks to the sum of its parts: GPU kernels on GPUs, wafer terms on wafers
    ax = figs["breakdown"].axes[0]
    tops = np.zeros(3)
    for bars in ax.containers:
        tops += np.nan_to_num([b.get_height() for b in bars])
    want = [float(ds.decode_matmul_s[0] + ds.decode_attention_s[0] + ds.decode_elementwise_s[0] + ds.decode_comm_s[0]),
            float(ds.decode_matmul_s[1] + ds.decode_attention_s[1] + ds.decode_elementwise_s[1] + ds.decode_comm_s[1]),
            float(ds.decode_compute_s[2] + ds.decode_comm_s[2] + ds.decode_io_s[2])]
    np.testing.assert_allclose(tops / 1e3, want, rtol=1e-9)  # drawn in ms
    assert [t.get_text() for t in figs["memory"].axes[0].get_yticklabels()] == ["h100_sxm", "h200_sxm", "cs3"]
    for f in figs.values():
        assert explore.png(f)[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in explore.svg(f)[:1000]


def test_memory_figure_marks_what_does_not_fit_and_roofline_names_missing_units():
    ds = explore.compute(dict(hardware=["a100_sxm", "h100_sxm"], model="llama_3_1_405b", weights="fp8",
                              activations="fp8", tp=1))
    figs = explore.figures(ds)
    ticks = [t.get_text() for t in figs["memory"].axes[0].get_yticklabels()]
    assert ticks == ["a100_sxm\ndoes not fit", "h100_sxm\ndoes not fit"]
    fp8 = explore.figures(explore.compute(dict(hardware=["a100_sxm", "h100_sxm"], weights="fp8",
                                               activations="fp8")))["memory"]
    assert [t.get_text() for t in fp8.axes[0].get_yticklabels()] == ["a100_sxm\ninfeasible", "h100_sxm"]
    assert "a100_sxm (fp8: no such math units)" in _texts(figs["roofline"])
    only_wafers = explore.figures(explore.compute(dict(hardware=["cs2"], model="llama_3_1_8b", systems=1)))
    assert "no GPU selected" in _texts(only_wafers["roofline"])
    state = dict(hardware=["h100_sxm", "cs3"], activations="fp8")  # the wafer was asked for but failed
    assert "h100_sxm" in _texts(explore.figures(explore.compute(state), state)["roofline"])


# --------------------------------------------------------------------------- sweep


def test_sweep_equals_predict_over_the_range():
    state = dict(hardware=["h100_sxm", "cs3"], batch=8, tp=8, systems=4)
    ds = explore.sweep(state, "batch")
    assert list(ds.batch.values) == list(explore.POWERS["batch"])
    ref = add_costs(predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8,
                                      batch=list(explore.POWERS["batch"]), prompt=2048, generate=256,
                                      weights="fp8"))
    np.testing.assert_allclose(ds.tpot_s.sel(hardware="h100_sxm").values, ref.tpot_s.values, rtol=1e-12)
    wafer = predict.inference(hardware="cs3", model="llama_3_1_70b", devices=4, batch=list(explore.POWERS["batch"]),
                              prompt=2048, generate=256, weights="fp8")
    np.testing.assert_array_equal(ds.fits.sel(hardware="cs3").values, wafer.fits.values)


def test_sweep_ranges_follow_the_control():
    tp = explore.sweep(dict(hardware=["h100_sxm", "cs3"], model="llama_2_13b"), "tp")
    assert list(tp.hardware.values) == ["h100_sxm"]  # tp is a GPU control
    assert list(tp.tp.values) == [1, 2, 4, 5, 8, 10]  # divisors of 40 heads up to 16
    sysw = explore.sweep(dict(hardware=["h100_sxm", "cs3"]), "systems")
    assert list(sysw.hardware.values) == ["cs3"] and list(sysw.systems.values) == list(range(1, 17))
    with pytest.raises(InputError, match="sweeping systems needs a wafer"):
        explore.sweep(dict(hardware=["h100_sxm"]), "systems")
    with pytest.raises(InputError, match="control='bogus' is not known"):
        explore.sweep(dict(hardware=["h100_sxm"]), "bogus")


def test_sweep_view_marks_the_current_value_and_the_pareto_front():
    state = dict(hardware=["h100_sxm", "cs3"], batch=32)
    figs = explore.sweep_view(state, "batch", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device")
    assert set(figs) == {"sweep", "pareto"}
    top = figs["sweep"].axes[0]
    assert any(list(line.get_xdata()) == [32, 32] for line in top.lines)  # the current value
    assert "current batch=32" in figs["pareto"].axes[0].get_legend_handles_labels()[1]
    ds = explore.sweep(state, "batch")
    front = explore.pareto(ds, maximize=["output_tokens_per_s_per_user", "output_tokens_per_s_per_device"],
                           over=["batch"], by=["hardware"], where="fits")
    # the batch with the fastest tokens per user is on the front (under TensorRT-LLM that
    # need not be batch 1: at 2,048 tokens its H100 decode runs MMHA at batches 1-2 and the
    # faster XQA from 4, xqa_dispatch.py), and so is the one with the most per device
    h100 = ds.sel(hardware="h100_sxm")
    for metric in ("output_tokens_per_s_per_user", "output_tokens_per_s_per_device"):
        best = int(h100.batch[int(h100[metric].where(h100.fits).argmax("batch"))])
        assert bool(front.sel(hardware="h100_sxm", batch=best)), (metric, best)
    assert not front.sel(hardware="h100_sxm").all()  # and some batches are dominated
    with pytest.raises(InputError, match="metric_x='fits' is not known"):
        explore.sweep_view(state, "batch", "fits", "tpot_s")


# --------------------------------------------------------------------------- widgets


def test_explorer_widgets_update_the_outputs_to_the_api_values():
    ex = explore.Explorer(hardware=["h100_sxm", "cs3"], batch=8)
    c, o = ex.controls, ex.outputs
    first = _shown(o["table"].value)
    assert set(first) == {"h100_sxm", "cs3"} and o["messages"].value == ""
    figures = {k: o[k] for k in ("roofline", "breakdown", "memory")}
    c["batch"].value = 64
    shown = _shown(o["table"].value)
    for hw in ("h100_sxm", "cs3"):
        ref = _api(hw, batch=64)
        for var in ("ttft_s", "tpot_s", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device",
                    "cost_per_million_tokens_usd"):
            assert shown[hw][var] == pytest.approx(float(ref[var]), rel=1e-12), (hw, var)
    assert shown["h100_sxm"]["tpot_s"] != first["h100_sxm"]["tpot_s"]
    assert all(o[k] is f for k, f in figures.items())  # live figures: the same widgets, their data updated
    _check_live(ex, batch=64)
    c["hardware"].value = ("h200_sxm", "mi300x", "cs2")
    c["tp"].value, c["pp"].value, c["systems"].value = 4, 2, 8
    c["weights"].value, c["kv"].value = "bf16", "fp8"
    shown = _shown(o["table"].value)
    assert list(shown) == ["h200_sxm", "mi300x", "cs2"]
    for hw in shown:
        ref = _api(hw, batch=64, tp=4, pp=2, systems=8, weights="bf16", kv="fp8")
        assert shown[hw]["tpot_s"] == pytest.approx(float(ref.tpot_s), rel=1e-12)
    assert ex.state["tp"] == 4 and ex.ds is not None


def _check_live(ex, **sizes):
    """The live figures hold the API's numbers: the breakdown's stacked parts add up to
    each chip's TPOT less its launch overhead (the black tick is the TPOT), the memory bars
    to the memory per device, the capacity markers to the capacity, the roofline's decode
    points to FLOPs per step over TPOT."""
    bars, tick = ex.live["breakdown"].bars, ex.live["breakdown"].tick
    mem = ex.live["memory"]
    for i, hw in enumerate(bars.x):
        ref = _api(hw, **sizes)
        scale = float(ref.tpot_s) / float(tick.y[i])
        assert float(tick.y[i]) * scale == pytest.approx(float(ref.tpot_s), rel=1e-12)
        assert 0 < float(np.sum(bars.y[:, i])) * scale <= float(ref.tpot_s) * (1 + 1e-9)
        assert float(np.sum(mem.bars.y[:, i])) == pytest.approx(float(ref.memory_per_device_bytes) / 1e9, rel=1e-9)
        assert float(mem.cap.x[i]) == pytest.approx(float(ref.memory_capacity_bytes) / 1e9, rel=1e-12)
    decode = ex.live["roofline"].decode
    for hw, y in zip([n.split()[0] for n in decode.names], decode.y):
        ref = _api(hw, **sizes)
        assert float(y) == pytest.approx(float(ref.decode_step_flops_per_device / ref.tpot_s), rel=1e-9)


def test_explorer_shows_invalid_settings_as_messages():
    ex = explore.Explorer(hardware=["h100_sxm", "cs3"])
    c, o = ex.controls, ex.outputs
    c["tp"].value = 3  # does not divide the 64 heads: the GPU row is flagged, the wafer row computed
    assert "h100_sxm: does not fit (tp=3 does not divide n_heads=64" in o["messages"].value
    assert list(_shown(o["table"].value)) == ["h100_sxm", "cs3"]
    c["hardware"].value = ()  # nothing selected
    assert "hardware=() is not allowed" in o["messages"].value and ex.ds is None
    c["tp"].value = 8
    c["hardware"].value = ("a100_sxm", "h100_sxm")
    c["weights"].value = "fp8"
    c["activations"].value = "fp8"  # no fp8 units on A100: a flagged row, not an error
    assert "a100_sxm: does not fit (no fp8 math units on a100_sxm)" in o["messages"].value
    assert "does not fit: no fp8 math units" in _shown(o["table"].value)["a100_sxm"]["_text"]
    c["activations"].value = "auto"  # FP8 weights alone: W8A16 on the A100, no message
    assert "a100_sxm" not in o["messages"].value
    c["model"].value = "llama_3_1_405b"
    c["weights"].value = "bf16"
    c["tp"].value = 1
    assert o["messages"].value.count("exceed memory") == 2
    c["hardware"].value = ("cs3",)
    c["activations"].value = "fp8"
    assert "activations=&#x27;fp8&#x27; is not allowed on &#x27;cs3&#x27;" in o["messages"].value


def test_explorer_sweep_tab_follows_its_controls():
    ex = explore.Explorer(hardware=["h100_sxm", "cs3"])
    c, o = ex.controls, ex.outputs
    assert o["sweep"].value == b""  # drawn only when its tab is shown
    ex.tabs.selected_index = 1
    first = o["sweep"].value
    assert b"<svg" in bytes(first)[:1000] and b"<svg" in bytes(o["pareto"].value)[:1000]
    c["sweep"].value = "prompt"
    assert o["sweep"].value != first
    after_prompt = o["pareto"].value
    c["metric_y"].value = "cost_per_million_tokens_usd"
    assert o["pareto"].value != after_prompt
    c["batch"].value = 16  # a control change redraws the visible sweep too
    assert "sweep view" in o["timing"].value
    c["hardware"].value = ("h100_sxm",)
    c["sweep"].value = "systems"  # no wafer selected: a message drawn in place, no exception
    assert b"sweeping systems needs a wafer" in bytes(o["sweep"].value)


def test_update_is_fast_enough_to_follow_a_slider():
    ex = explore.Explorer(hardware=["h100_sxm", "h200_sxm", "cs3"])
    times = []
    for b in (16, 32, 64, 128):
        t = time.perf_counter()
        ex.controls["batch"].value = b
        times.append(time.perf_counter() - t)
    assert ex.timings["update_s"] <= max(times) + 1e-3
    assert min(times) < 3.0, times  # typically 0.25-0.3 s; generous for loaded CI machines


def test_notebook_parameters_match_the_explorer():
    nb = nbformat.read(ROOT / "notebooks" / "explorer.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    names = re.findall(r"^([a-z_]+):", params.source, flags=re.M)
    assert set(names) <= set(explore.CONTROLS)
    ns: dict = {}
    exec(params.source, ns)  # noqa: S102 - the committed parameters cell
    state = explore.normalize_state({k: ns[k] for k in names})
    assert isinstance(explore.compute(state), xr.Dataset)


def test_a_sweep_with_nothing_to_plot_says_why():
    """2:4-sparse weights are not modelled on wafers: a sweep of systems (wafers only) has no
    value to put on its log axes, and says so with the points' reason (it raised matplotlib's
    'Data cannot be log-scaled')."""
    state = dict(explore.normalize_state({}), weights="fp16_2:4")
    with pytest.raises(InputError, match="not modelled on wafers"):
        explore.sweep_view(state, "systems", "tpot_s", "ttft_s")


# --------------------------------------------------------------------------- reported bugs


def test_normalize_state_says_a_numeric_string_is_not_a_number():
    """States are Python values (no URL parsing here; the training state rejects '8' as
    errors.as_numbers does): a str size is a one-line InputError, not a bare TypeError."""
    for bad, match in (({"batch": "8"}, r"^batch='8' is not a number; allowed: a positive integer$"),
                       ({"systems": "0"}, r"^systems='0' is not a number; allowed: a positive integer or 0 "),
                       ({"tp": None}, r"^tp=None is not a number"), ({"pp": [2]}, r"^pp=\[2\] is not a number"),
                       ({"prompt": True}, r"^prompt=True is not a number")):
        with pytest.raises(InputError, match=match):
            explore.normalize_state(bad)
    assert explore.normalize_state({"batch": np.int64(8), "systems": np.float64(0)})["batch"] == 8


def test_a_chip_without_a_known_price_shows_with_no_cost_and_says_why():
    """b60 has no price (0: not known): its cost is NaN, the other chips are shown with
    theirs, and the table, the messages and the cost views say the price is not known."""
    ds = explore.compute({"hardware": ["h100_sxm", "b60"]})
    assert list(ds.hardware.values) == ["h100_sxm", "b60"] and ds.attrs["problems"] == []
    assert np.isnan(float(ds.cost_per_million_tokens_usd.sel(hardware="b60")))
    assert float(ds.output_tokens_per_s_per_device.sel(hardware="b60")) > 0
    np.testing.assert_allclose(float(ds.cost_per_million_tokens_usd.sel(hardware="h100_sxm")),
                               float(_api("h100_sxm").cost_per_million_tokens_usd), rtol=1e-12)
    assert explore.price_notes(ds) == ["b60: price per device-hour not known; no cost per M tokens"]
    rows = _shown(explore.table_html(explore.summary_table(ds)))
    assert ">price not known<" in rows["b60"]["_text"] and ">price not known<" not in rows["h100_sxm"]["_text"]
    ex = explore.Explorer(hardware=["h100_sxm"])
    ex.controls["hardware"].value = ("h100_sxm", "b60")
    assert set(_shown(ex.outputs["table"].value)) == {"h100_sxm", "b60"}
    assert "b60: price per device-hour not known" in ex.outputs["messages"].value
    figs = explore.sweep_view({"hardware": ["h100_sxm", "b60"]}, "batch", "output_tokens_per_s_per_user",
                              "cost_per_million_tokens_usd")
    assert "(price not known: b60)" in figs["sweep"].axes[1].get_title(loc="left")
    assert "price not known, no cost: b60" in _texts(figs["pareto"])
    with pytest.raises(InputError, match="b60: price per device-hour not known"):
        explore.sweep_view({"hardware": ["b60"]}, "batch", "cost_per_million_tokens_usd", "tpot_s")


def _stars(ax) -> list:
    """(x, y) of the star markers (the current point) drawn in data coordinates."""
    return [tuple(p) for c in ax.collections if list(c.get_sizes()) in ([160.0], [180.0])
            and c.get_transform() is not ax.get_xaxis_transform() for p in c.get_offsets()]


def _on_edge(ax) -> list:
    """x of the markers drawn on the bottom edge (x in data, y in axes coordinates)."""
    return sorted(float(x) for c in ax.collections if c.get_offset_transform() == ax.get_xaxis_transform()
                  for x, _ in c.get_offsets())


def test_sweep_view_of_systems_min_marks_the_systems_it_resolved_to():
    """systems 0 ("min") resolves to 3 CS-3s for llama 3.1 70B in FP8: the dashed line and
    the stars are at 3 in both views (they were at 0, off the range 1..16); systems 1-2 do
    not fit and have no value: hollow markers on the bottom edge, which the caption explains."""
    state = {"hardware": ["cs3"], "model": "llama_3_1_70b", "systems": 0}
    assert float(explore.compute(state).devices.sel(hardware="cs3")) == 3
    figs = explore.sweep_view(state, "systems", "output_tokens_per_s_per_user", "output_tokens_per_s_per_device")
    ds = explore.sweep(state, "systems")
    for ax, m in zip(figs["sweep"].axes, ("output_tokens_per_s_per_user", "output_tokens_per_s_per_device")):
        assert [list(line.get_xdata()) for line in ax.lines if line.get_linestyle() == "--"] == [[3, 3]]
        want = float(ds[m].sel(hardware="cs3", systems=3))
        [(x, y)] = _stars(ax)
        assert x == 3 and y == pytest.approx(want / plots_scale(ds[m]), rel=1e-12)
        assert _on_edge(ax) == [1.0, 2.0]
    assert "dashed: current min = 3" in figs["sweep"].axes[-1].get_xlabel()
    assert "bottom edge: does not fit, no value" in figs["sweep"].axes[-1].get_xlabel()
    pareto = figs["pareto"].axes[0]
    assert "current systems: min = 3" in pareto.get_legend_handles_labels()[1] and len(_stars(pareto)) == 1
    two = explore.sweep_view(dict(state, hardware=["cs3", "cs2"], model="mixtral_8x7b", weights="fp16"), "systems",
                             "tpot_s", "ttft_s")  # each wafer its own count: 3 and 4
    assert sorted(x for x, _ in _stars(two["sweep"].axes[0])) == [3, 4]
    assert "current min (cs3 3, cs2 4)" in two["sweep"].axes[-1].get_xlabel()


def plots_scale(da) -> float:
    from workbench import plots
    return plots.si_scale(da, da.attrs.get("units"))[0]
