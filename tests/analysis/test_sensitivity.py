"""Elasticities of a prediction to hardware knobs (analysis/sensitivity.py): the signs and
sizes the roofline implies, and what a cycle-counted wafer model must give for its clock."""
import numpy as np
import pytest

from workbench import analysis, predict
from workbench.errors import InputError

KW = dict(hardware="h100_sxm", model="llama_3_1_8b", generate=128, weights="bf16")


def test_decode_leans_on_bandwidth_and_long_prefill_on_flops():
    """Issue 19: batch-1 decode has elasticity about -1 to HBM bandwidth and about 0 to peak
    FLOP/s while memory-bound; a 32k-token prefill the other way round. Not exactly -1:
    fixed kernel latencies do not scale with either resource."""
    e = analysis.sensitivity(predict.inference, knobs=["hbm_bandwidth_bytes_per_s", "peak_flops_per_s_bf16"],
                             batch=1, prompt=[512, 32768], **KW)
    dec = e.tpot_s.sel(prompt=512)
    assert -1.02 <= float(dec.sel(knob="hbm_bandwidth_bytes_per_s")) <= -0.8
    assert abs(float(dec.sel(knob="peak_flops_per_s_bf16"))) < 0.05
    pre = e.ttft_s.sel(prompt=32768)
    assert -1.02 <= float(pre.sel(knob="peak_flops_per_s_bf16")) <= -0.8
    assert abs(float(pre.sel(knob="hbm_bandwidth_bytes_per_s"))) < 0.1


def test_matches_a_direct_finite_difference():
    """The elasticity is the slope of log TPOT against log bandwidth: checked against two
    separate predictions 10% apart (within 2%)."""
    from workbench.backends import backend_for
    from workbench.specs import load_hardware
    e = float(analysis.sensitivity(predict.inference, knobs="hbm_bandwidth_bytes_per_s", batch=8, prompt=2048,
                                   **KW).tpot_s.squeeze())
    spec = load_hardware("h100_sxm")
    bw = backend_for(spec).knobs(spec)["hbm_bandwidth_bytes_per_s"][1]  # the spec's value
    lo, hi = (float(predict.inference(batch=8, prompt=2048, hardware_overrides={"hbm_bandwidth_bytes_per_s": v},
                                      **KW).tpot_s) for v in (bw / 1.05, bw * 1.05))
    assert e == pytest.approx((np.log(hi) - np.log(lo)) / (2 * np.log(1.05)), rel=0.02)


def test_a_wafer_time_scales_exactly_with_its_clock():
    """Every wafer time is cycles / clock (the I/O crossings aside: one system here)."""
    e = analysis.sensitivity(predict.inference, knobs=["clock_hz", "stage_cycles"], hardware="cs3",
                             model="llama_3_1_8b", devices=1, pe_grid=161, batch=1, prompt=2048, generate=128,
                             weights="fp16")
    assert float(e.tpot_s.sel(knob="clock_hz")) == pytest.approx(-1.0, abs=1e-6)
    assert 0 < float(e.tpot_s.sel(knob="stage_cycles")) < 1  # the reductions' share of the step


def test_bad_arguments_name_themselves():
    with pytest.raises(InputError, match="knob 'hbm' is not a knob of 'h100_sxm'"):
        analysis.sensitivity(predict.inference, knobs="hbm", **KW)
    with pytest.raises(InputError, match="one hardware name"):
        analysis.sensitivity(predict.inference, knobs="tdp_w", **dict(KW, hardware=["h100_sxm", "b200"]))
    with pytest.raises(InputError, match="rel_step=0.9 is not allowed"):
        analysis.sensitivity(predict.inference, knobs="tdp_w", rel_step=0.9, **KW)


def test_a_capacity_knob_sweeps_beside_the_others():
    """HBM capacity only decides what fits: TPOT has elasticity 0 to it (the knob axis of
    capacity broadcast against a batch sweep, which once failed on the fit flag's shape)."""
    e = analysis.sensitivity(predict.inference, knobs=["hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s"],
                             batch=[1, 8, 64], prompt=[512, 4096], **KW)
    assert np.allclose(e.tpot_s.sel(knob="hbm_capacity_bytes"), 0.0)
    assert (e.tpot_s.sel(knob="hbm_bandwidth_bytes_per_s") < -0.3).all()


def test_training_knobs_sweep_alone():
    """A training step's elasticities to peak FLOP/s (compute-bound: near +1 for tokens/s),
    capacity (0) and a wafer's MemoryX rate; each knob's axis broadcasts alone."""
    e = analysis.sensitivity(predict.training, knobs=["peak_flops_per_s_bf16", "hbm_capacity_bytes"],
                             metrics=["tokens_per_s"], hardware="h100_sxm", model="llama_3_1_8b", devices=8, dp=8,
                             seq_len=4096, global_batch=256)
    assert 0.5 < float(e.tokens_per_s.sel(knob="peak_flops_per_s_bf16")) <= 1.02
    assert float(e.tokens_per_s.sel(knob="hbm_capacity_bytes")) == 0.0
    w = analysis.sensitivity(predict.training, knobs=["clock_hz", "weight_store_bandwidth_bytes_per_s"],
                             metrics=["tokens_per_s"], hardware="cs3", model="llama_3_1_8b", devices=4, seq_len=2048,
                             global_batch=256)
    assert 0.0 <= float(w.tokens_per_s.sel(knob="clock_hz")) <= 1.02


def test_a_software_knob_the_framework_overhead():
    """framework_overhead_s (issue 19: the software knobs that matter) replaces the serving
    framework's fitted host time per iteration: at concurrency 1 two values 0.9 ms apart
    move TPOT by exactly 0.9 ms (one iteration per token), and TPOT leans on it less as
    the batch grows (more decode work per iteration)."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_8b", prompt=1024, generate=256, framework="vllm")
    ds = predict.serving(concurrency=1, hardware_overrides={"framework_overhead_s": [1e-4, 1e-3]}, **kw)
    t = ds.tpot_s.squeeze()
    assert float(t.isel(framework_overhead_s=1) - t.isel(framework_overhead_s=0)) == pytest.approx(0.9e-3, rel=1e-6)
    e = analysis.sensitivity(predict.serving, knobs="framework_overhead_s", metrics=["tpot_s"], concurrency=[1, 64],
                             **kw).tpot_s.squeeze("knob")
    assert 0.0 < float(e.sel(concurrency=64)) < float(e.sel(concurrency=1)) < 1.0


def test_an_unknown_metric_is_named_not_dropped():
    """metrics= naming no numeric output is refused with the allowed names (a misspelled one
    was silently dropped, an unknown one raised from xarray)."""
    from workbench.errors import InputError
    with pytest.raises(InputError, match=r"metrics='ttft_sx' is not a numeric output"):
        analysis.sensitivity(predict.inference, knobs=["hbm_bandwidth_bytes_per_s"], metrics=["tpot_s", "ttft_sx"],
                             hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=1)


def test_counts_are_the_integer_spec_fields():
    """The knobs whose spec field is an int (HardwareSpec.n_sms, collective_sms, the scale-up
    link's domain_size, WaferSpec.program_cols / program_rows)."""
    from workbench.analysis.sensitivity import integer_knobs
    assert integer_knobs() == {"n_sms", "collective_sms", "scale_up_domain_size", "mesh_width", "mesh_height"}


def test_integer_knobs_move_by_whole_steps():
    """n_sms, collective_sms and scale_up_domain_size are counts: each moves to integers
    (n_sms=129.36 was refused by the spec), at least 1 either side, and the elasticity is
    the slope of log TPOT between those two predictions."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8)
    e = analysis.sensitivity(predict.inference, knobs=["n_sms", "scale_up_domain_size", "collective_sms"], **kw)
    assert e.knob_low.values.tolist() == [129.0, 7.0, 23.0] and e.knob_high.values.tolist() == [135.0, 9.0, 25.0]
    lo, hi = (float(predict.inference(**kw, hardware_overrides={"scale_up_domain_size": v}).tpot_s) for v in (7, 9))
    assert float(e.tpot_s.sel(knob="scale_up_domain_size")) == pytest.approx(np.log(hi / lo) / np.log(9 / 7), rel=1e-9)
    assert np.isfinite(e.tpot_s).all()
    w = analysis.sensitivity(predict.inference, knobs="mesh_width", hardware="cs3", model="llama_3_1_8b", devices=1,
                             batch=1, prompt=2048, generate=128, weights="fp16")
    assert w.knob_low.values.tolist() == [742.0] and w.knob_high.values.tolist() == [772.0]
    assert np.isfinite(w.tpot_s).all()
    with pytest.raises(InputError, match=r"knob 'n_sms' = 131.5 on 'h100_sxm' is not allowed; allowed: an integer"):
        analysis.sensitivity(predict.inference, knobs="n_sms", hardware_overrides={"n_sms": 131.5}, **kw)


def test_a_hypothetical_knob_the_call_sets_is_a_knob():
    """FP4 math on an H100 (which has none) set through hardware_overrides, as predict
    accepts it: its elasticity is taken about the value given (it was refused as 'not a
    knob of h100_sxm'); one the call does not set is still refused, naming the way in."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_8b", weights="fp4", prompt=8192)
    e = analysis.sensitivity(predict.inference, knobs=["peak_flops_per_s_fp4"],
                             hardware_overrides={"peak_flops_per_s_fp4": 4e15}, **kw)
    assert -1.02 < float(e.ttft_s.squeeze()) < -0.3
    with pytest.raises(InputError, match=r"knob 'peak_flops_per_s_fp4' is not a knob of 'h100_sxm'.*overrides"):
        analysis.sensitivity(predict.inference, knobs=["peak_flops_per_s_fp4"], **kw)
