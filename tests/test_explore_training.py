"""The training explorer's pure callbacks and its real ipywidgets, driven without a browser:
the numbers shown are predict.training's for the controls, the step-time and memory parts
add up to the totals the model reports, and invalid settings become messages."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure

from workbench import explore, predict
from workbench.errors import InputError
from workbench.explore.training import GPU_PARTS, PARTS
from workbench.specs import load_hardware, load_model

from test_explore import _shown  # the table's values by hardware

pytest.importorskip("ipywidgets")

GPUS = ("h100_sxm", "b200", "a100_sxm", "mi300x")
FITS_ON_WAFERS = dict(seq_len=4096)  # one 8192-token llama_3_8b sequence exceeds the wafer's SRAM
# 8k tokens without full recomputation: H100 (92.5 of 77 GB) and one sequence on CS-3 do not fit.
TIGHT = dict(seq_len=8192, recompute="selective")


def _api(hw, **controls):
    """What the page must show for chip `hw`: predict.training with the controls' values
    (GPUs: the layout, devices = tp·pp·dp; wafers: devices = systems)."""
    s = explore.normalize_training_state(controls)
    common = dict(model=s["model"], seq_len=s["seq_len"], global_batch=s["global_batch"], recompute=s["recompute"])
    if hw in ("cs3", "cs2"):  # a wafer refuses precision and zero (it computes bf16; no ZeRO)
        return predict.training(hardware=hw, devices=s["systems"], **common)
    return predict.training(hardware=hw, tp=s["tp"], pp=s["pp"], dp=s["dp"], micro_batch=s["micro_batch"],
                            zero=s["zero"], attention=None if s["attention"] == "measured" else s["attention"],
                            virtual_stages=s["virtual_stages"],
                            precision=s["precision"], **common)


def _p2p_s(ds, s):
    """One micro-batch's pipeline send/recv per slot, recovered from pp_comm_s, which
    predict.training counts over n_micro + (pp - 1) / virtual_stages slots."""
    return ds.pp_comm_s / (ds.n_micro_batches + (s["pp"] - 1) / s["virtual_stages"])


# --------------------------------------------------------------------------- state


def test_normalize_training_state_fills_defaults_and_checks():
    s = explore.normalize_training_state({"hardware": "cs2", "dp": 32.0, "zero": 3.0})
    assert s["hardware"] == ("cs2",) and s["dp"] == 32 and s["zero"] == 3 and isinstance(s["dp"], int)
    assert s["model"] == "llama_3_8b" and set(s) == set(explore.TRAINING_CONTROLS)
    assert explore.normalize_training_state()["hardware"] == ("h100_sxm", "b200", "cs3")
    for bad, match in ((dict(hardware=["h100_sxm", "tpu"]), "hardware='tpu' is not known"),
                       (dict(hardware=()), r"hardware=\(\) is not allowed"),
                       (dict(tp=0), "tp=0 is not allowed; allowed: a positive integer"),
                       (dict(seq_len=1.5), "seq_len=1.5 is not allowed"),
                       (dict(zero=5), "zero=5 is not known; allowed: 0, 1, 2, 3"),
                       (dict(attention="x"), "attention='x' is not known; allowed: measured, flash2, flash1, flash3, materialized"),
                       (dict(recompute="half"), "recompute='half' is not known"),
                       (dict(precision="fp16"), "precision='fp16' is not known; allowed: bf16, fp8"),
                       (dict(batch=8), "control 'batch' is not known")):
        with pytest.raises(InputError, match=match):
            explore.normalize_training_state(bad)


# --------------------------------------------------------------------------- compute


def test_compute_training_equals_predict_for_gpus_and_wafers_side_by_side():
    state = dict(hardware=["cs3", "h100_sxm", "b200"], tp=2, pp=2, dp=16, zero=2, micro_batch=2, systems=2,
                 **FITS_ON_WAFERS)
    ds = explore.compute_training(state)
    assert list(ds.hardware.values) == ["cs3", "h100_sxm", "b200"]  # the order chosen
    assert set(ds.dims) == {"hardware"} and ds.attrs["problems"] == [] and ds.attrs["notes"] == []
    for hw in state["hardware"]:
        ref = _api(hw, **state)
        for var in ("step_time_s", "tokens_per_s_per_device", "mfu", "memory_per_device_bytes", "fits"):
            np.testing.assert_allclose(ds[var].sel(hardware=hw).values, ref[var].values.ravel()[0], rtol=1e-12,
                                       err_msg=f"{hw} {var}")
    assert float(ds.devices.sel(hardware="h100_sxm")) == 2 * 2 * 16 and float(ds.devices.sel(hardware="cs3")) == 2
    assert ds.step_time_s.attrs["units"] == "s" and ds.pp_send_recv_s.attrs["units"] == "s"


def test_throughput_and_mfu_follow_from_the_step_time():
    """tokens/s per device = global_batch·seq_len / (step · devices); MFU = model FLOPs
    (6·N·tokens + 12·L·H·h·S·tokens, attention without causal halving) / (step · devices · peak)."""
    s = explore.normalize_training_state(hardware=GPUS, tp=2, dp=32)
    ds = explore.compute_training(s)
    m = load_model(s["model"])
    tokens = s["global_batch"] * s["seq_len"]
    flops = 6.0 * m.n_params_active * tokens + 12.0 * m.n_layers * m.n_heads * m.head_dim * s["seq_len"] * tokens
    for hw in GPUS:
        r = ds.sel(hardware=hw)
        step, devices = float(r.step_time_s), s["tp"] * s["pp"] * s["dp"]
        assert float(r.devices) == devices
        assert float(r.tokens_per_s_per_device) == pytest.approx(tokens / step / devices, rel=1e-12)
        assert float(r.mfu) == pytest.approx(flops / step / devices / load_hardware(hw).peak("bf16"), rel=1e-12)
        assert 0 < float(r.mfu) < 1


def test_gpu_step_parts_add_up_to_the_step_time():
    """predict.training's step is n_micro·slot + bubble + contention + exposed DP comm +
    optimizer, with slot = forward + backward + recompute + EP all-to-all + PP send/recv;
    its forward_s/backward_s/recompute_s are n_micro times the first three, so the seven
    reported parts equal the step exactly only for a dense model at pp=1. Otherwise they
    fall short by ep_comm_s + n_micro·p2p, which the explorer adds as pp_send_recv_s (an
    MoE model's all-to-all at the state's ep, 8 by default; a dense model trains at ep 1)."""
    dense = explore.compute_training(dict(hardware=GPUS, zero=0))
    np.testing.assert_allclose(sum(dense[p] for p in GPU_PARTS).values, dense.step_time_s.values, rtol=1e-12)
    assert (dense.pp_send_recv_s == 0).all()
    for state in (dict(hardware=GPUS, pp=4, dp=16, virtual_stages=2, recompute="full"),
                  dict(hardware=GPUS, model="mixtral_8x7b", tp=2, pp=2, dp=16, zero=3)):
        s = explore.normalize_training_state(state)
        ds = explore.compute_training(s)
        rest = ds.step_time_s - sum(ds[p] for p in GPU_PARTS)
        assert (rest > 0).all()
        np.testing.assert_allclose(rest.values, (ds.ep_comm_s + ds.n_micro_batches * _p2p_s(ds, s)).values,
                                   rtol=1e-9)
        assert bool((ds.ep_comm_s > 0).all()) == (s["model"] == "mixtral_8x7b")
        shown = [p for p in PARTS if p in ds and p != "weight_streaming_exposed_s"]
        np.testing.assert_allclose(sum(ds[p] for p in shown).values, ds.step_time_s.values, rtol=1e-12)
        assert all(bool((ds[p] >= 0).all()) for p in shown)


def test_wafer_step_parts_add_up_and_streaming_is_hidden_at_most_in_full():
    """A wafer layer takes max(compute, I/O): the step is the compute (forward, backward,
    the recomputed blocks) plus the I/O compute does not hide (>= 0, at most all the I/O),
    the optimizer update MemoryX does not hide and the fixed cost per step
    (workloads/wafer_training.py). Backward is twice the forward; full recompute adds the
    blocks' forward again (not the LM head's). A dense model hides its weight streaming; an
    MoE one (every expert streamed) does not. The bars of the page are these parts."""
    for model, recompute, exposed in (("llama_3_1_70b", "full", False), ("llama_3_8b", "selective", False),
                                      ("mixtral_8x7b", "selective", True), ("deepseek_v3", "full", True)):
        ds = explore.compute_training(dict(hardware=["cs3", "cs2"], model=model, recompute=recompute, systems=2,
                                           **FITS_ON_WAFERS))
        parts = sum(ds[p] for p in explore.training.PARTS if p in ds and p != "weight_streaming_exposed_s"
                    and p not in ("pipeline_bubble_s", "dp_comm_exposed_s", "pp_send_recv_s",
                                  "overlap_contention_s")) + ds.weight_streaming_exposed_s
        np.testing.assert_allclose(parts.values, ds.step_time_s.values, rtol=1e-12)
        assert (ds.weight_streaming_exposed_s >= 0).all()
        assert (ds.weight_streaming_exposed_s <= ds.weight_streaming_io_s).all()
        assert bool((ds.weight_streaming_exposed_s > 1e-9 * ds.step_time_s).all()) == exposed, model
        np.testing.assert_allclose(ds.backward_s.values, 2 * ds.forward_s.values, rtol=1e-12)
        if recompute == "full":
            assert ((ds.recompute_s > 0.9 * ds.forward_s) & (ds.recompute_s <= ds.forward_s)).all()
        else:
            assert (ds.recompute_s == 0).all()
        assert (ds.step_fixed_s > 0).all() and (ds.optimizer_s >= 0).all()
        for p in ("pipeline_bubble_s", "dp_comm_exposed_s"):  # reported, and zero on wafers
            assert (ds[p] == 0).all(), p


def test_memory_parts_add_up_and_zero_shards_them():
    """memory per device = weights + gradients + optimizer states + activations (GPUs;
    2 + 4 + 12 bytes per parameter of the TP·PP shard, ZeRO-1/2/3 dividing the last,
    then the gradients, then the weights by dp); wafers hold activations only."""
    s = explore.normalize_training_state(hardware=GPUS, tp=2, pp=2, dp=16)
    n = load_model(s["model"]).n_params / (s["tp"] * s["pp"])
    memory = [explore.compute_training(dict(s, zero=z)) for z in range(4)]
    for z, ds in enumerate(memory):
        parts = sum(ds[f"{k}_per_device_bytes"] for k in ("weights", "grads", "optimizer", "activations"))
        np.testing.assert_allclose(parts.values, ds.memory_per_device_bytes.values, rtol=1e-12)
        for k, per_param, from_zero in (("weights", 2, 3), ("grads", 4, 2), ("optimizer", 12, 1)):
            want = per_param * n / (s["dp"] if z >= from_zero else 1)
            np.testing.assert_allclose(ds[f"{k}_per_device_bytes"].values, want, rtol=1e-12)
    totals = np.array([ds.memory_per_device_bytes.values for ds in memory])
    assert (np.diff(totals, axis=0) < 0).all()  # every ZeRO stage shards one more state
    wafer = explore.compute_training(dict(hardware=["cs3"], **FITS_ON_WAFERS))
    assert wafer.activations_per_device_bytes.item() == wafer.memory_per_device_bytes.item() > 0


def test_a_gpu_layout_that_cannot_run_is_flagged_and_the_wafers_still_show():
    ds = explore.compute_training(dict(hardware=["h100_sxm", "b200", "cs3"], tp=3))  # 32 heads
    assert list(ds.hardware.values) == ["h100_sxm", "b200", "cs3"]
    for gpu in ("h100_sxm", "b200"):
        assert not bool(ds.fits.sel(hardware=gpu))
        assert "tp=3 does not divide n_heads=32" in str(ds.reason.sel(hardware=gpu).values)


def test_wafer_only_and_gpu_only_states():
    wafers = explore.compute_training(dict(hardware=["cs2", "cs3"], precision="fp8", **FITS_ON_WAFERS))
    assert list(wafers.hardware.values) == ["cs2", "cs3"] and wafers.fits.all()
    assert "cs2: precision='fp8' does not apply to wafers" in wafers.attrs["notes"][0]
    assert "pp_send_recv_s" not in wafers and "weight_streaming_exposed_s" in wafers
    gpus = explore.compute_training(dict(hardware=["b200"], precision="fp8"))
    assert list(gpus.hardware.values) == ["b200"] and gpus.attrs["notes"] == []
    assert "weight_streaming_exposed_s" not in gpus and bool(gpus.fits.squeeze())


def test_infeasible_points_stay_flagged_with_their_reason():
    ds = explore.compute_training(dict(hardware=["a100_sxm", "h100_sxm"], precision="fp8", dp=8, zero=3))
    assert not bool(ds.fits.sel(hardware="a100_sxm")) and bool(ds.fits.sel(hardware="h100_sxm"))
    assert explore.infeasible(ds) == ["a100_sxm: does not fit (no fp8 math units on a100_sxm)"]
    few = explore.compute_training(dict(hardware=["h100_sxm"], global_batch=32, dp=64))
    assert str(few.reason.squeeze().values) == "global_batch < dp x micro_batch" and not few.fits.squeeze()
    big = explore.compute_training(dict(hardware=["h100_sxm"], model="llama_3_1_70b", dp=8, zero=0))
    assert big.memory_per_device_bytes.item() > big.memory_capacity_bytes.item()
    assert "exceed memory" in str(big.reason.squeeze().values)


# --------------------------------------------------------------------------- table and figures


def test_summary_table_shows_the_dataset():
    ds = explore.compute_training(dict(hardware=["h100_sxm", "b200", "cs3"], **TIGHT))
    rows = _shown(explore.training_summary_table(ds))
    assert list(rows) == ["h100_sxm", "b200", "cs3"]
    for hw in rows:
        for var in ("step_time_s", "tokens_per_s_per_device", "mfu", "devices", "memory_per_device_bytes",
                    "memory_capacity_bytes"):
            assert rows[hw][var] == float(ds[var].sel(hardware=hw)), (hw, var)
    assert f">{float(ds.mfu.sel(hardware='b200')) * 100:.4g}</td>" in rows["b200"]["_text"]  # MFU in %
    assert "does not fit: weights + optimizer + activations exceed memory" in rows["h100_sxm"]["_text"]
    assert "fits" in rows["b200"]["_text"] and "wb-nofit" not in rows["b200"]["_text"]
    with pytest.raises(InputError, match="more than one value"):
        explore.training_summary_table(explore.training_sweep(dict(hardware=["h100_sxm"]), "dp"))


def test_figures_stack_to_the_totals():
    state = explore.normalize_training_state(hardware=["h100_sxm", "b200", "cs3"], pp=2, dp=32, **FITS_ON_WAFERS)
    ds = explore.compute_training(state)
    figs = explore.training_figures(ds, state)
    assert set(figs) == {"breakdown", "memory"} and all(isinstance(f, Figure) for f in figs.values())
    ax = figs["breakdown"].axes[0]
    tops = sum(np.array([b.get_height() for b in bars]) for bars in ax.containers)
    np.testing.assert_allclose(tops, ds.step_time_s.values, rtol=1e-9)  # drawn in s
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"forward (incl. TP comm)", "pipeline bubble", "PP send/recv", "step time"} <= set(legend)
    mem = figs["memory"].axes[0]
    widths = sum(np.array([b.get_width() for b in bars]) for bars in mem.containers)
    np.testing.assert_allclose(widths, ds.memory_per_device_bytes.values / 1e9, rtol=1e-9)  # drawn in GB
    caps = [line.get_xdata()[0] for line in mem.lines]
    np.testing.assert_allclose(caps, ds.memory_capacity_bytes.values / 1e9, rtol=1e-12)
    tight = explore.training_figures(explore.compute_training(dict(hardware=["h100_sxm", "cs3"], **TIGHT)))["memory"]
    assert [t.get_text() for t in tight.axes[0].get_yticklabels()] == ["h100_sxm\ndoes not fit", "cs3\ndoes not fit"]
    for f in figs.values():
        assert b"<svg" in explore.svg(f)[:1000]


# --------------------------------------------------------------------------- sweep


def test_sweeping_dp_trades_throughput_per_device_for_step_time():
    """At a fixed global batch more replicas mean fewer micro-batches each but about the
    same DP traffic per device: the step shortens while tokens/s per device and MFU do not
    rise (checked over ZeRO stages and layouts), and memory per device never grows (ZeRO
    shards over dp, fewer micro-batches in flight). Crossing from one NVLink domain to two
    may gain up to 1%: the rail rings then carry 1/8 of the traffic on the NICs."""
    for state in (dict(), dict(zero=3), dict(zero=0, pp=2), dict(model="llama_3_1_70b", tp=8, pp=4,
                                                                  virtual_stages=2)):
        ds = explore.training_sweep(dict(state, hardware=GPUS + ("cs3",)), "dp")
        assert list(ds.hardware.values) == list(GPUS)  # dp is a GPU control
        assert list(ds.dp.values) == [2 ** i for i in range(11)]
        s = explore.normalize_training_state(state)
        ref = predict.training(hardware="b200", model=s["model"], tp=s["tp"], pp=s["pp"], dp=list(ds.dp.values),
                               zero=s["zero"], virtual_stages=s["virtual_stages"], seq_len=s["seq_len"],
                               recompute=s["recompute"])
        np.testing.assert_allclose(ds.step_time_s.sel(hardware="b200").values, ref.step_time_s.values.ravel(),
                                   rtol=1e-12)
        for var in ("step_time_s", "memory_per_device_bytes"):
            assert (ds[var].diff("dp") <= 0).all(), (state, var)
        for var in ("tokens_per_s_per_device", "mfu"):
            assert (ds[var].diff("dp") <= 0.01 * ds[var].isel(dp=slice(None, -1)).values).all(), (state, var)
            assert (ds[var].isel(dp=-1) < ds[var].isel(dp=0)).all(), (state, var)


def test_sweeps_of_the_other_controls():
    s = dict(hardware=GPUS + ("cs3",), **FITS_ON_WAFERS)
    seq = explore.training_sweep(s, "seq_len")
    assert list(seq.hardware.values) == list(s["hardware"])  # applies to GPUs and wafers
    assert (seq.step_time_s.diff("seq_len") > 0).all()  # more tokens per sequence, same batch
    assert (seq.activations_per_device_bytes.sel(hardware=list(GPUS)).diff("seq_len") > 0).all()
    mb = explore.training_sweep(s, "micro_batch")
    assert (mb.activations_per_device_bytes.diff("micro_batch") > 0).all()
    pp = explore.training_sweep(s, "pp")
    assert list(pp.pp.values) == [1, 2, 4, 8, 16]
    want = (pp.pp - 1) / (pp.n_micro_batches + pp.pp - 1)  # 1F1B: (p-1) idle slots of n+p-1
    np.testing.assert_allclose(pp.bubble_fraction.values, want.transpose(*pp.bubble_fraction.dims).values,
                               rtol=1e-12)
    assert list(explore.training_sweep_values(dict(model="llama_2_13b"), "tp")) == [1, 2, 4, 5, 8, 10]
    systems = explore.training_sweep(s, "systems")
    assert list(systems.hardware.values) == ["cs3"] and list(systems.systems.values) == list(range(1, 17))
    assert (systems.step_time_s.diff("systems") < 0).all()  # the batch split over more systems
    with pytest.raises(InputError, match="sweeping systems needs a wafer"):
        explore.training_sweep(dict(hardware=["h100_sxm"]), "systems")
    with pytest.raises(InputError, match="sweeping tp needs a GPU"):
        explore.training_sweep(dict(hardware=["cs3"]), "tp")
    with pytest.raises(InputError, match="control='zero' is not known"):
        explore.training_sweep(s, "zero")


def test_sweep_view_marks_the_current_value():
    fig = explore.training_sweep_view(dict(hardware=["h100_sxm", "b200"], dp=32), "dp")
    top, bottom = fig.axes
    assert top.get_title(loc="left") == "MFU [%]" and bottom.get_title(loc="left") == "step time [s]"
    assert any(list(line.get_xdata()) == [32, 32] for line in top.lines)
    ds = explore.training_sweep(dict(hardware=["h100_sxm", "b200"], dp=32), "dp")
    b200 = next(line for line in top.lines if line.get_label() == "b200")
    want = np.where(ds.fits.sel(hardware="b200"), ds.mfu.sel(hardware="b200") * 100, np.nan)
    np.testing.assert_allclose(b200.get_ydata(), want, rtol=1e-12)  # hollow where it does not fit
    nothing = explore.training_sweep_view(dict(hardware=["a100_sxm"], precision="fp8"), "dp")  # no fp8 units
    assert all(np.isnan(line.get_ydata()).all() for line in nothing.axes[0].lines if line.get_label() == "a100_sxm")


# --------------------------------------------------------------------------- widgets


def test_training_explorer_updates_the_outputs_to_the_api_values():
    ex = explore.TrainingExplorer(hardware=["h100_sxm", "b200", "cs3"])
    c, o = ex.controls, ex.outputs
    assert set(explore.TRAINING_CONTROLS) | {"sweep"} == set(c)
    assert ex.widget.children and ex.state["dp"] == 64
    figures = {k: o[k] for k in ("breakdown", "memory")}
    c["dp"].value = 32
    shown = _shown(o["table"].value)
    assert list(shown) == ["h100_sxm", "b200", "cs3"]
    for hw in shown:
        ref = _api(hw, dp=32)
        for var in ("step_time_s", "tokens_per_s_per_device", "mfu", "memory_per_device_bytes"):
            assert shown[hw][var] == pytest.approx(float(ref[var]), rel=1e-12), (hw, var)
    assert all(o[k] is f for k, f in figures.items())  # live figures: the same widgets, their data updated
    step = ex.live["breakdown"]
    for i, hw in enumerate(step.bars.x):  # the stacked parts add up to the step time (the black tick)
        ref = _api(hw, dp=32)
        scale = float(ref.step_time_s) / float(step.tick.y[i])
        assert float(np.sum(step.bars.y[:, i])) * scale == pytest.approx(float(ref.step_time_s), rel=1e-6)
        assert float(np.sum(ex.live["memory"].bars.y[:, i])) == pytest.approx(
            float(ref.memory_per_device_bytes) / 1e9, rel=1e-9)
    c["hardware"].value = ("mi300x", "cs2")
    c["zero"].value, c["recompute"].value, c["seq_len"].value, c["systems"].value = 3, "full", 4096, 8
    shown = _shown(o["table"].value)
    for hw in ("mi300x", "cs2"):
        ref = _api(hw, dp=32, zero=3, recompute="full", seq_len=4096, systems=8)
        assert shown[hw]["step_time_s"] == pytest.approx(float(ref.step_time_s), rel=1e-12)
    assert isinstance(ex.ds, xr.Dataset) and "updated in" in o["timing"].value


def test_training_explorer_shows_invalid_settings_as_messages():
    ex = explore.TrainingExplorer(**TIGHT)
    c, o = ex.controls, ex.outputs
    assert "h100_sxm: does not fit" in o["messages"].value and 'class="wb-msg wb-warn"' in o["messages"].value
    c["tp"].value = 3  # does not divide the 32 heads: the GPU rows are flagged, the wafer row computed
    assert "h100_sxm: does not fit (tp=3 does not divide n_heads=32" in o["messages"].value
    assert "cs3" in list(_shown(o["table"].value))
    c["hardware"].value = ()
    assert "hardware=() is not allowed" in o["messages"].value
    c["tp"].value, c["hardware"].value = 1, ("b200",)
    assert o["messages"].value == "" and list(_shown(o["table"].value)) == ["b200"]
    c["hardware"].value, c["seq_len"].value, c["precision"].value = ("b200", "cs2"), 4096, "fp8"
    assert "cs2: precision=&#x27;fp8&#x27; does not apply to wafers" in o["messages"].value
    assert "wb-msg wb-error" not in o["messages"].value  # a note, not an error
    assert list(_shown(o["table"].value)) == ["b200", "cs2"]


def test_training_explorer_sweep_tab_follows_its_controls():
    ex = explore.TrainingExplorer(hardware=["h100_sxm", "cs3"])
    c, o = ex.controls, ex.outputs
    assert o["sweep"].value == b""  # drawn only when its tab is shown
    ex.tabs.selected_index = 1
    first = o["sweep"].value
    assert b"<svg" in bytes(first)[:1000] and "sweep view" in o["timing"].value
    c["sweep"].value = "seq_len"
    assert o["sweep"].value != first
    after = o["sweep"].value
    c["global_batch"].value = 1024  # a control change redraws the visible sweep too
    assert o["sweep"].value != after
    c["hardware"].value = ("h100_sxm",)
    c["sweep"].value = "systems"  # no wafer selected: a message drawn in place, no exception
    assert b"sweeping systems needs a wafer" in bytes(o["sweep"].value)


def test_every_step_part_has_its_own_colour():
    """The breakdown stacks up to eleven parts (the wafers' latency per streamed layer the
    eleventh): each keeps a colour of its own."""
    from workbench.explore.training import PART_COLORS, PARTS
    assert set(PART_COLORS) == set(PARTS)
    assert len({tuple(c) for c in PART_COLORS.values()}) == len(PARTS)


def test_an_moe_model_trains_at_the_states_expert_parallelism():
    """`ep` (default 8) spreads an MoE model's experts: its local experts, hence the host
    launches Megatron-Core's eager MoE path exposes (moe_host_s), shrink as ep grows, and the
    all-to-all appears; a dense model trains at ep 1 whatever the control says (identical
    numbers), and an ep that does not divide the ranks is a flagged point (fits False, the
    reason shown), the wafer beside it still computed."""
    base = dict(hardware=["h100_sxm", "b200"], model="qwen3_30b_a3b", dp=64, recompute="selective")
    by_ep = {ep: explore.compute_training(dict(base, ep=ep)) for ep in (1, 8, 64)}
    host = [float(by_ep[ep].moe_host_s.sel(hardware="b200")) for ep in (1, 8, 64)]
    assert host[0] > host[1] > host[2] >= 0.0
    assert float(by_ep[1].ep_comm_s.sel(hardware="b200")) == 0.0 < float(by_ep[8].ep_comm_s.sel(hardware="b200"))
    dense = [explore.compute_training(dict(base, model="llama_3_8b", ep=ep)) for ep in (1, 8)]
    np.testing.assert_array_equal(dense[0].step_time_s.values, dense[1].step_time_s.values)
    bad = explore.compute_training(dict(base, hardware=["b200", "cs3"], dp=4, ep=8))
    assert not bool(bad.fits.sel(hardware="b200")) and bool(bad.fits.sel(hardware="cs3"))
    assert "ep*expert_tp=8*1 does not divide tp*dp*cp=4" in str(bad.reason.sel(hardware="b200").values)


def test_sweeping_ep_of_a_dense_model_is_one_clear_line():
    """ep splits experts: the training tab's sweep of ep on the default dense model says so
    (it raised a KeyError from the figure)."""
    with pytest.raises(InputError, match="sweeping ep needs a MoE model"):
        explore.training_sweep(dict(model="llama_3_8b", hardware=["h100_sxm"]), "ep")


# --------------------------------------------------------------------------- reported bugs


def test_the_expert_all_to_all_is_labelled_as_such_not_as_pp_send_recv():
    """predict.training's slot_comm_s holds the PP send/recv and the EP all-to-all; the
    explorer splits it: at pp=1 an MoE model's 0.62 s is the all-to-all (ep_comm_s), the
    PP send/recv 0; at pp=2 both are there and still add up to the slots' comm."""
    s = explore.normalize_training_state(hardware=["h100_sxm"], model="qwen3_30b_a3b", pp=1)
    ds = explore.compute_training(s)
    assert ds.pp_send_recv_s.item() == 0 and ds.ep_comm_s.item() == pytest.approx(0.6185, rel=1e-3)
    assert PARTS["ep_comm_s"] == "EP all-to-all (MoE experts)" and ds.ep_comm_s.attrs["units"] == "s"
    legend = [t.get_text() for t in explore.training_figures(ds, s)["breakdown"].axes[0].get_legend().get_texts()]
    assert "EP all-to-all (MoE experts)" in legend and "PP send/recv" not in legend
    s2 = dict(s, pp=2, dp=32)
    ds2 = explore.compute_training(s2)
    ref = predict.training(hardware="h100_sxm", model=s["model"], seq_len=s["seq_len"], global_batch=s["global_batch"],
                           recompute=s["recompute"], tp=1, pp=2, dp=32, ep=8, zero=s["zero"])
    np.testing.assert_allclose((ds2.pp_send_recv_s + ds2.ep_comm_s).values, ref.slot_comm_s.values.ravel(), rtol=1e-12)
    np.testing.assert_allclose(ds2.pp_send_recv_s.values, (ds2.n_micro_batches * _p2p_s(ds2, s2)).values, rtol=1e-9)
    assert (ds2.pp_send_recv_s > 0).all() and (ds2.ep_comm_s > 0).all()
    shown = sum(ds2[p] for p in PARTS if p in ds2 and p != "weight_streaming_exposed_s")
    np.testing.assert_allclose(shown.values, ds2.step_time_s.values, rtol=1e-12)


def test_training_sweep_step_time_ticks_read_as_plain_numbers():
    """The log step-time axis is labelled 3, 4, 6, 10, 20 as the inference sweep's
    (plots._log_ticks), not 3x10^0, 6x10^0."""
    fig = explore.training_sweep_view(explore.normalize_training_state(), "systems")
    explore.png(fig)  # draws: the tick labels are formatted
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels(which="both") if t.get_text()]
    assert labels and not any("times" in t or "^" in t for t in labels), labels
    assert all(float(t) > 0 for t in labels) and {"10", "20"} <= set(labels), labels


def test_training_sweep_draws_points_without_a_value_on_the_bottom_edge():
    """a100 has no fp8 units: every point of its sweep does not fit and has no value
    (NaN); they are drawn hollow on the bottom edge, and the caption says so."""
    fig = explore.training_sweep_view(dict(hardware=["a100_sxm"], precision="fp8"), "dp")
    dp = [float(x) for x in explore.training_sweep_values(explore.normalize_training_state(), "dp")]
    for ax in fig.axes:
        edge = [c for c in ax.collections if c.get_offset_transform() == ax.get_xaxis_transform()]
        hollow = [c for c in edge if len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0]
        assert sorted(float(x) for c in hollow for x, _ in c.get_offsets()) == dp
        assert [tuple(c.get_offsets()[0]) for c in edge if c not in hollow] == [(64, 0.04)]  # the current dp's star
    assert "hollow on the bottom edge: does not fit, no value" in fig.axes[1].get_xlabel()
