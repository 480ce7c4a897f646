"""The knob value a target needs (analysis/requirement.py): fed back through predict.* it
meets the target (within 0.5%) and 0.99x of it (1.01x for a knob that helps as it
shrinks) misses; unreachable targets name what binds; GPUs and wafers alike."""
import numpy as np
import pytest

from workbench import analysis, predict
from workbench.errors import InputError

KW = dict(hardware="h100_sxm", model="llama_3_1_70b", devices=8, tp=8, prompt=2048, generate=256)


def _feed_back(fn, req, knob, metric, target, call, points):
    """Every point with a requirement: at the value the target holds, past it it fails."""
    up = not metric.endswith("_s")
    for sel in points:
        r = req.sel(sel)
        value = float(r.required)
        if not np.isfinite(value):
            continue
        helps_up = str(r.knob_helps.values) == "up"
        at = float(fn(**{**call, **sel}, hardware_overrides={knob: value})[metric])
        short = float(fn(**{**call, **sel}, hardware_overrides={knob: value * (0.99 if helps_up else 1.01)})[metric])
        if up:
            assert at >= target * (1 - 0.005) and short < target, (sel, at, short)
        else:
            assert at <= target * (1 + 0.005) and short > target, (sel, at, short)


def test_bandwidth_a_decode_target_needs():
    """70B on 8 H100s at 5 ms per token: batch 1 and 16 need 2.7x and 4.4x the HBM
    bandwidth; every value fed back meets the target and 0.99x of it misses."""
    call = dict(KW, batch=[1, 16])
    req = analysis.requirement(predict.inference, metric="tpot_s", target=0.005, knob="hbm_bandwidth_bytes_per_s",
                               **call)
    assert (req.knob_helps == "up").all() and (req.reason == "").all()
    assert 1.0 < float(req.ratio.sel(batch=1)) < float(req.ratio.sel(batch=16))
    _feed_back(predict.inference, req, "hbm_bandwidth_bytes_per_s", "tpot_s", 0.005, KW,
               [{"batch": 1}, {"batch": 16}])


def test_throughput_target_and_a_knob_that_helps_as_it_shrinks():
    """A throughput (higher is better) and a latency knob (smaller is better): the largest
    inter-GPU latency that keeps 95% of the spec's throughput per device at TP 8 (analytical
    collectives: a framework's measured all-reduce tables carry their own latency)."""
    call = dict(KW, batch=8, framework="none")
    base = float(predict.inference(**call).output_tokens_per_s_per_device)
    target = 0.95 * base
    req = analysis.requirement(predict.inference, metric="output_tokens_per_s_per_device", target=target,
                               knob="scale_up_latency_s", **call)
    assert str(req.knob_helps.values) == "down"
    assert float(req.required) > 1e-6  # the spec's 1 us already meets 95%: a larger latency is tolerated
    value = float(req.required)
    at = float(predict.inference(**call, hardware_overrides={"scale_up_latency_s": value})
               .output_tokens_per_s_per_device)
    worse = float(predict.inference(**call, hardware_overrides={"scale_up_latency_s": value * 1.01})
                  .output_tokens_per_s_per_device)
    assert at >= target * 0.995 and worse < target


def test_unreachable_targets_name_what_binds():
    """At batch 256 no HBM bandwidth brings TPOT to 5 ms: the point says which resource
    binds there; a model that cannot fit says it does not fit."""
    req = analysis.requirement(predict.inference, metric="tpot_s", target=0.005, knob="hbm_bandwidth_bytes_per_s",
                               **dict(KW, batch=256))
    assert np.isnan(float(req.required))
    assert "bound there" in str(req.reason.values) and "hbm_bandwidth_bytes_per_s" in str(req.reason.values)
    assert "no longer responds" in str(req.reason.values)
    big = analysis.requirement(predict.inference, metric="tpot_s", target=0.05, knob="hbm_bandwidth_bytes_per_s",
                               hardware="h100_sxm", model="llama_3_1_405b", batch=1, prompt=2048, generate=256)
    assert np.isnan(float(big.required)) and "does not fit" in str(big.reason.values)


def test_memory_capacity_a_batch_needs():
    """The least HBM capacity at which a batch fits: found where the metric is the memory
    a point needs (it does not improve with capacity, so the fit flag decides)."""
    call = dict(KW, batch=64, prompt=8192)
    req = analysis.requirement(predict.inference, metric="tpot_s", target=1.0, knob="hbm_capacity_bytes", **call)
    need = float(req.required)
    assert np.isfinite(need)
    assert bool(predict.inference(**call, hardware_overrides={"hbm_capacity_bytes": need}).fits)
    assert not bool(predict.inference(**call, hardware_overrides={"hbm_capacity_bytes": need * 0.99}).fits)


def test_a_wafer_clock_for_a_decode_target():
    """CS-3: the clock a 1-system Llama 3.1 8B needs for 4,000 tokens/s per user; the
    cycle-counted decode step scales as 1/clock, so the ratio is the speed-up asked."""
    call = dict(hardware="cs3", model="llama_3_1_8b", batch=1, prompt=1024, generate=256)
    tpot = float(predict.inference(**call).tpot_s)
    req = analysis.requirement(predict.inference, metric="tpot_s", target=tpot / 1.5, knob="clock_hz", **call)
    assert float(req.ratio) == pytest.approx(1.5, rel=0.01)


def test_one_call_per_step_over_a_grid():
    """The bisection runs on the whole grid at once: a 2 x 3 sweep gives a requirement per
    point, each equal to the one asked alone."""
    call = dict(KW, batch=[1, 4], generate=[64, 256, 1024])
    req = analysis.requirement(predict.inference, metric="tpot_s", target=0.006, knob="hbm_bandwidth_bytes_per_s",
                               **call)
    assert set(req.required.dims) == {"batch", "generate"}
    alone = analysis.requirement(predict.inference, metric="tpot_s", target=0.006, knob="hbm_bandwidth_bytes_per_s",
                                 **dict(KW, batch=4, generate=1024))
    assert float(req.required.sel(batch=4, generate=1024)) == pytest.approx(float(alone.required), rel=1e-6)


@pytest.mark.parametrize("kwargs,word", [
    (dict(knob="warp_drive"), "knob .warp_drive. is not a knob"),
    (dict(metric="happiness_s"), "metric="),
    (dict(target=-1.0), "target="),
    (dict(hardware=["h100_sxm", "b200"]), "hardware="),
])
def test_bad_input_names_the_argument(kwargs, word):
    call = dict(KW, batch=1, metric="tpot_s", target=0.005, knob="hbm_bandwidth_bytes_per_s")
    call.update(kwargs)
    with pytest.raises(InputError, match=word):
        analysis.requirement(predict.inference, **call)


@pytest.mark.parametrize("bad", [dict(metric="bound"), dict(metric="fits"),
                                 dict(knob=["hbm_bandwidth_bytes_per_s"])])
def test_a_metric_or_knob_that_cannot_be_solved_for_is_one_clear_line(bad):
    """A categorical or boolean output (bound, fits) is no metric to solve for, and a list is
    no knob: each refused by name with what is allowed (they raised a TypeError / ValueError
    from numpy or a hashing error)."""
    args = {**dict(metric="tpot_s", target=0.005, knob="hbm_bandwidth_bytes_per_s"), **bad}
    with pytest.raises(InputError, match=r"is not (a numeric output|allowed)"):
        analysis.requirement(predict.inference, hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=1, **args)


def test_a_knob_bounded_by_another_keeps_a_narrower_bracket():
    """CS-3's SRAM per PE may not fall below its reserve (6,144 B): the 1/64x end (768 B) is
    refused as input, so that end of the bracket narrows to the first root of the span the
    knob allows (1/8x: 6,144 B) and the analysis still answers, the bracket stated."""
    call = dict(hardware="cs3", model="llama_3_1_8b", devices=1, prompt=2048, generate=256, weights="fp16")
    req = analysis.requirement(predict.inference, metric="tpot_s", target=1e-4, knob="sram_per_pe_bytes", **call)
    lo, hi = req.attrs["bracket"]
    base = float(req.attrs["knob_value"])
    assert hi == pytest.approx(64.0 * base) and 6144.0 <= lo < base
    with pytest.raises(InputError, match="sram_per_pe_bytes"):
        predict.inference(**call, hardware_overrides={"sram_per_pe_bytes": base / 64.0})


def test_an_integer_knob_is_searched_over_integers():
    """A count is bracketed and bisected over integers (fractional values were refused by
    the spec): the scale-up domain 70B at TP 8 needs for 11 ms per token is 8 (7 misses),
    and the program mesh width a CS-3 needs for 5% less TPOT is an integer w where w - 1
    misses."""
    call = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8)
    req = analysis.requirement(predict.inference, metric="tpot_s", target=0.011, knob="scale_up_domain_size", **call)
    assert float(req.required) == 8.0 and str(req.reason.values) == "" and req.attrs["bracket"] == [1.0, 512.0]
    for domain, meets in ((7, False), (8, True)):
        tpot = float(predict.inference(**call, hardware_overrides={"scale_up_domain_size": domain}).tpot_s)
        assert (tpot <= 0.011) == meets
    wafer = dict(hardware="cs3", model="llama_3_1_8b", devices=1, batch=1, prompt=2048, generate=128, weights="fp16")
    target = 0.95 * float(predict.inference(**wafer).tpot_s)
    req_w = analysis.requirement(predict.inference, metric="tpot_s", target=target, knob="mesh_width", **wafer)
    w = float(req_w.required)
    assert req_w.attrs["knob_value"] == 757  # CS-3's program columns (specs/hardware/wse3.yaml program_cols)
    assert w == int(w) and w > 757
    at, short = (float(predict.inference(**wafer, hardware_overrides={"mesh_width": v}).tpot_s) for v in (w, w - 1))
    assert at <= target < short
    sms = analysis.requirement(predict.inference, metric="tpot_s", target=0.011, knob="n_sms", **call)
    assert float(sms.required) == int(float(sms.required))  # ran at all: n_sms = 132/64 was refused


def test_a_hypothetical_knob_the_call_sets():
    """FP4 math on an H100, given in hardware_overrides: the FP4 FLOP/s a 20% shorter TTFT
    needs, fed back (it was refused as not a knob of h100_sxm)."""
    call = dict(hardware="h100_sxm", model="llama_3_1_8b", weights="fp4", prompt=8192, generate=128)
    given = {"peak_flops_per_s_fp4": 4e15}
    target = 0.8 * float(predict.inference(**call, hardware_overrides=given).ttft_s)
    req = analysis.requirement(predict.inference, metric="ttft_s", target=target, knob="peak_flops_per_s_fp4",
                               hardware_overrides=given, **call)
    value = float(req.required)
    assert req.attrs["knob_value"] == 4e15 and value > 4e15
    _feed_back(predict.inference, req, "peak_flops_per_s_fp4", "ttft_s", target, call, [{}])
