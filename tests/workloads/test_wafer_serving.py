"""predict.serving on CS systems at a fixed concurrency (workloads/wafer_serving.py): the
closed-loop formulas against a discrete-event simulation of the same scheduler on the
static wafer model's own costs, Little's law, monotonicity in concurrency, the reduction to
the static model at one request, the KV cache bounding the running requests, and the GPU
layout arguments refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError

from closed_loop_draws import decode_step

CS3_8B = dict(hardware="cs3", model="llama_3_1_8b", weights="fp16", kv="fp16", devices=1)


def simulate(*, concurrency, generate, ready_s, stall_s, step_s, requests=2000, seed=0, jitter=0.5, draft_len=0,
             acceptance=0.0):
    """Mean TTFT and TPOT of a pipelined wafer's scheduler, request by request: when prompts
    wait, one prefill pass takes them all, holding the regions for stall_s(q) while their
    first tokens come ready_s(q) after it starts (a pipeline's makespan); otherwise a decode
    step of the b requests past their first token takes step_s(b) and gives each a token.
    A finished request is replaced by one that arrives at a uniformly random moment of the
    next step (the client's round trip); output lengths are uniform in generate x [1 -
    jitter, 1 + jitter], which spreads the arrivals. The first `concurrency` x 3 requests
    (the first waves) are not counted. With draft_len k > 0 a decode step is a speculative
    one (step_s: its k draft steps and the verify), and each request keeps its first token
    plus the drafted ones up to the first rejection (each accepted with probability
    `acceptance`), never past its output length: a Monte Carlo of the acceptance process."""
    rng = np.random.default_rng(seed)

    def length():
        return max(2, int(round(generate * rng.uniform(1.0 - jitter, 1.0 + jitter))))
    t, waiting, pending, prefilling, decoding, done = 0.0, [0.0] * concurrency, [], [], [], []
    while len(done) < requests:
        for p in [p for p in prefilling if p[1] <= t]:  # [arrival, first token time, output length]
            decoding.append([p[0], p[1], 1, p[2]])
        prefilling = [p for p in prefilling if p[1] > t]
        waiting += [a for a in pending if a <= t]
        pending = [a for a in pending if a > t]
        if waiting:
            q = len(waiting)
            prefilling += [[a, t + ready_s(q), length()] for a in waiting]
            waiting, t = [], t + stall_s(q)
        elif decoding:
            tau = step_s(len(decoding))
            t += tau
            decoding = decode_step(decoding, end_s=t, step_s=tau, rng=rng, done=done, pending=pending,
                                   draft_len=draft_len, acceptance=acceptance)
        else:  # idle until the next arrival or first token
            t = min([a for a in pending] + [p[1] for p in prefilling])
    kept = done[3 * concurrency:]
    return (np.mean([f - a for a, f, e, g in kept]), np.mean([(e - f) / (g - 1) for a, f, e, g in kept]))


def _costs(concurrency, prompt, generate, grid, **speculation):
    """The static wafer model's costs at the serving point's decode grid, tabulated for
    1..concurrency sequences: decode step (a speculative step's, under `speculation`),
    prefill pass makespan and stall."""
    b = list(range(1, concurrency + 1))
    kw = dict(CS3_8B, prompt=prompt, pe_grid=grid)
    dec = predict.inference(batch=b, generate=generate, **kw, **speculation)
    pre = predict.inference(batch=b, generate=2, **kw)
    step = dec.tpot_s.values * (dec.tokens_per_step.values if speculation else 1.0)
    table = lambda v: (lambda n: float(v[int(n) - 1]))  # noqa: E731
    return table(step), table(pre.ttft_s.values), table(pre.prefill_stage_busy_s.values)


# Spread arrivals (output lengths +-50%), prompts of 512 and 2,048 tokens, 4 to 64 requests
# in flight: TPOT within 5%, TTFT within 10% of the simulated scheduler (when this was
# written: TPOT -1.2% to 0.0%, TTFT -0.6% to +5.6%). Prompts landing anywhere in time
# (arrivals "in_time", the GPU engines' form) would put TTFT 25-104% high at 16 and 64
# requests: a prefill pass lasts 10-40 decode steps, and no request ends inside one.
@pytest.mark.parametrize("concurrency,prompt,generate", [(4, 512, 128), (16, 512, 128), (64, 512, 256),
                                                         (16, 2048, 128)])
def test_formulas_match_a_simulated_pipelined_scheduler(concurrency, prompt, generate):
    r = predict.serving(concurrency=concurrency, prompt=prompt, generate=generate, **CS3_8B)
    assert bool(r.fits) and float(r.running) == concurrency
    step_s, ready_s, stall_s = _costs(concurrency, prompt, generate, float(r.pe_grid_decode))
    ttft, tpot = simulate(concurrency=concurrency, generate=generate, ready_s=ready_s, stall_s=stall_s,
                          step_s=step_s)
    print(f"C={concurrency} p={prompt}: TPOT {float(r.tpot_s) / tpot - 1:+.1%}, "
          f"TTFT {float(r.steady_ttft_s) / ttft - 1:+.1%} of the simulation")
    assert float(r.tpot_s) == pytest.approx(tpot, rel=0.05)
    assert float(r.steady_ttft_s) == pytest.approx(ttft, rel=0.10)
    if concurrency >= 16:
        assert _in_time_ttft(concurrency, prompt, generate) > 1.2 * ttft


def _in_time_ttft(concurrency, prompt, generate):
    """The steady TTFT with the prompts' arrivals spread in time instead."""
    from workbench.backends import numbers
    from workbench.specs import load_model
    from workbench.workloads.wafer_serving import wafer_closed_loop
    return float(wafer_closed_loop(w=numbers("cs3"), model=load_model("llama_3_1_8b"), concurrency=concurrency,
                                   prompt=prompt, generate=generate, devices=1.0, weights="fp16", kv="fp16",
                                   arrivals="in_time")["steady_ttft_s"])


# Speculative decoding on the wafer at a fixed concurrency (a 1B draft in regions beside the
# 8B, k = 3 tokens at acceptance 0.7): against the scheduler drawing every acceptance, TPOT
# within 5%, TTFT within 10% (when this was written: TPOT -1.4% / +0.1%, TTFT -2.6% / +6.4%).
@pytest.mark.parametrize("concurrency", [4, 16])
def test_speculation_matches_a_monte_carlo_of_acceptance(concurrency):
    spec = dict(draft_model="llama_3_2_1b", draft_len=3, acceptance=0.7)
    r = predict.serving(concurrency=concurrency, prompt=512, generate=128, **spec, **CS3_8B)
    step_s, ready_s, stall_s = _costs(concurrency, 512, 128, float(r.pe_grid_decode), **spec)
    ttft, tpot = simulate(concurrency=concurrency, generate=128, ready_s=ready_s, stall_s=stall_s, step_s=step_s,
                          draft_len=3, acceptance=0.7)
    print(f"C={concurrency} speculating: TPOT {float(r.tpot_s) / tpot - 1:+.1%}, "
          f"TTFT {float(r.steady_ttft_s) / ttft - 1:+.1%} of the simulation")
    assert float(r.tpot_s) == pytest.approx(tpot, rel=0.05)
    assert float(r.steady_ttft_s) == pytest.approx(ttft, rel=0.10)


def test_one_request_is_the_static_model():
    """Concurrency 1: nothing else runs, so TTFT is the static pipelined prefill and TPOT
    the static decode step at batch 1 (the first wave is the same request)."""
    for model, devices in (("llama_3_1_8b", 1), ("llama_3_1_70b", 4)):
        kw = dict(CS3_8B, model=model, devices=devices, prompt=1024, generate=256)
        r = predict.serving(concurrency=1, **kw)
        s = predict.inference(batch=1, **kw)
        assert float(r.ttft_s) == pytest.approx(float(s.ttft_s), rel=1e-12)
        assert float(r.tpot_s) == pytest.approx(float(s.tpot_s), rel=1e-12)
        assert float(r.ttft_client_s) - float(r.ttft_s) == pytest.approx(float(s.ttft_client_s - s.ttft_s))
        assert r.attrs["wafer_scheduler"].startswith("ASSUMED")  # the output says what it rests on


def test_littles_law_and_monotone_in_concurrency():
    """Requests in flight = completion rate x (steady TTFT + (g - 1) TPOT) at every
    concurrency, also past the KV cache's room (Llama 3.1 70B on 4 CS-3 holds 5 requests of
    2,048 tokens: the rest queue); TTFT, TPOT and throughput never fall as C grows, and the
    throughput stops growing once the cache is full."""
    c = [1, 2, 4, 8, 16, 64]
    r = predict.serving(concurrency=c, **dict(CS3_8B, model="llama_3_1_70b", devices=4), prompt=1024,
                        generate=1024)
    cycle = r.steady_ttft_s + (1024 - 1) * r.tpot_s
    np.testing.assert_allclose((r.requests_per_s * cycle).values, c, rtol=1e-9)
    for v in ("ttft_s", "tpot_s", "output_tokens_per_s_per_device"):
        assert np.all(np.diff(r[v].values) >= -1e-12 * r[v].values[:-1]), v
    cap = float(r.running_limit[0])
    assert 1 <= cap < 64 and np.all(r.running.values == np.minimum(c, cap))
    full = r.concurrency.values >= cap
    assert np.ptp(r.output_tokens_per_s_per_device.values[full]) < 1e-9 * float(r.output_tokens_per_s_per_device[-1])
    assert np.all(r.queue_s.values[~full] == 0.0) and np.all(r.queue_s.values[r.concurrency.values > cap] > 0.0)


def test_prefill_passes_slow_decoding_and_speculation_speeds_it():
    """At 16 requests in flight each request's TPOT carries the others' prefill passes: above
    the static decode step at the same batch; a 1B draft (4 tokens at acceptance 0.8) makes
    the one-request TPOT faster, as the static model's."""
    r = predict.serving(concurrency=16, prompt=2048, generate=128, **CS3_8B)
    s = predict.inference(batch=16, prompt=2048, generate=128, pe_grid=float(r.pe_grid_decode),
                          **CS3_8B)
    assert float(r.tpot_s) > 1.5 * float(s.tpot_s)
    spec = dict(draft_model="llama_3_2_1b", draft_len=4, acceptance=0.8, prompt=512, generate=256)
    base = predict.serving(concurrency=1, prompt=512, generate=256, **CS3_8B)
    fast = predict.serving(concurrency=1, **spec, **CS3_8B)
    static = predict.inference(batch=1, **spec, **CS3_8B)
    assert float(fast.tpot_s) < float(base.tpot_s)
    assert float(fast.tpot_s) == pytest.approx(float(static.tpot_s), rel=1e-12)


def test_devices_min_and_bad_input():
    r = predict.serving(concurrency=4, prompt=1024, generate=128, **dict(CS3_8B, model="llama_3_1_70b",
                                                                           devices="min"))
    s = predict.inference(batch=1, prompt=1024, generate=128, **dict(CS3_8B, model="llama_3_1_70b", devices="min"))
    assert float(r.devices) == float(s.devices) >= 2 and bool(r.fits)
    for bad, match in ((dict(tp=2), "tp=2 is not allowed on 'cs3'"),
                       (dict(token_budget=2048), "token_budget=2048 is not allowed on 'cs3'"),
                       (dict(memory_fraction=0.5), "memory_fraction=0.5 is not allowed on 'cs3'"),
                       (dict(devices="most"), "devices='most' is not allowed")):
        with pytest.raises(InputError, match=match):
            predict.serving(**{**CS3_8B, "concurrency": 4, **bad})
    with pytest.raises(InputError, match="devices=2 is not allowed with concurrency on 'h100_sxm'"):
        predict.serving(hardware="h100_sxm", model="llama_3_1_8b", concurrency=4, devices=2)


def test_a_wafer_decode_pool_behind_gpu_prefill():
    """predict.disaggregated at a fixed concurrency with CS systems decoding (8 B200 prefill
    Llama 3.1 70B in FP8, the fewest CS-3 that hold it decode): at one request TPOT is the
    static wafer decode step at batch 1 on those systems and TTFT is the prefill batch, the
    KV transfer over the slower end (the GPUs' NICs or the systems' I/O) and the prefill
    framework's request latency; at every concurrency the decode pool holds at most its KV
    cache's room, and TTFT and TPOT never fall; in steady state (no first wave) Little's law
    closes the loop through the wafer pool."""
    from workbench.backends import numbers
    from workbench.specs import load_model
    kw = dict(prefill_hardware="b200", decode_hardware="cs3", model="llama_3_1_70b", prompt=2048, generate=256,
              weights="fp8", prefill_tp=8)
    runs = [predict.disaggregated(concurrency=c, **kw) for c in (1, 8, 64, 256)]
    one = runs[0]
    systems = float(one.decode_devices)
    static = predict.inference(hardware="cs3", model="llama_3_1_70b", batch=1, prompt=2048, generate=256,
                               weights="fp8", kv="fp16", devices=systems, pe_grid=float(one.pe_grid_decode))
    assert systems == float(predict.inference(hardware="cs3", model="llama_3_1_70b", batch=1, prompt=2048,
                                              generate=256, weights="fp8", kv="fp16", devices="min").devices)
    assert float(one.tpot_s) == pytest.approx(float(static.tpot_s), rel=1e-12)
    w, b200 = numbers("cs3"), numbers("b200", framework="trtllm")
    link = min(8 * b200.link("scale_out").unidir_bytes_per_s, w.io_bytes_per_s * systems)
    kv_bytes = load_model("llama_3_1_70b").kv_cache_bytes(context=2048, dtype="fp16")
    assert float(one.kv_transfer_s) == pytest.approx(kv_bytes / link, rel=1e-9)
    assert float(one.devices) == 8 + systems and one.attrs["decode_attention_run"] == f"{systems:g} CS systems"
    for r in runs:
        assert bool(r.fits) and float(r.decode_running) <= float(r.decode_running_limit) + 1e-9
    for v in ("ttft_s", "tpot_s"):
        values = [float(r[v]) for r in runs]
        assert np.all(np.diff(values) >= -1e-12 * np.array(values[:-1])), v
    from workbench.workloads.pools_closed_loop import disaggregated_closed_loop
    from workbench.workloads.wafer_serving import wafer_decode_pool
    c = np.array([1.0, 8.0, 64.0, 256.0])
    model = load_model("llama_3_1_70b")
    pool = wafer_decode_pool(w=w, model=model, per_replica=c, prompt=2048.0, generate=256.0, devices=systems,
                             weights="fp8", kv="fp16")
    steady = disaggregated_closed_loop(
        prefill_hw=b200, decode_hw=None, model=model, concurrency=c, prompt=2048.0, generate=256.0, prefill_tp=8.0,
        prefill_attention_dp=1.0, prefill_ep=1.0, prefill_workers=1.0, prefill_batch=1.0, decode_tp=1.0,
        decode_attention_dp=1.0, decode_ep=1.0, decode_workers=1.0, weights="fp8", activations="fp8", kv="fp16",
        prefill_overhead_s=0.0, decode_overhead_s=0.0, kv_link_bytes_per_s=link, decode_pool=pool)
    np.testing.assert_allclose(steady["requests_per_s"] * steady["e2e_s"], c, rtol=1e-9)
    for bad, match in ((dict(decode_tp=2), "decode_tp=2 is not allowed on 'cs3'"),
                       (dict(decode_devices="most"), "decode_devices='most' is not allowed"),
                       (dict(prefill_devices=8), "prefill_devices=8 is not allowed with concurrency")):
        with pytest.raises(InputError, match=match):
            predict.disaggregated(concurrency=4, **{**kw, **bad})
    with pytest.raises(InputError, match="decode_devices=2 is not allowed with concurrency on 'b200'"):
        predict.disaggregated(concurrency=4, **{**kw, "decode_hardware": "b200", "decode_devices": 2})
    with pytest.raises(InputError, match="prefill_hardware='cs3' is not allowed with concurrency"):
        predict.disaggregated(concurrency=4, **{**kw, "prefill_hardware": "cs3", "decode_hardware": "b200"})


def test_an_unknown_arrival_rule_is_refused():
    from workbench.workloads.concurrency import prefill_alone_spread
    with pytest.raises(ValueError, match="arrivals='poisson' is not known; allowed: in_time, after_decode"):
        prefill_alone_spread(None, r=4.0, prompt=512.0, n_prefill=1.0, token_budget=np.inf, steps=127.0,
                             decode_iter=1e-3, arrivals="poisson")


def test_open_loop_speculation_on_cs_systems_counts_the_draft():
    """Open-loop serving (Poisson arrivals) on CS-3 with the MTP head drafting 3 tokens at 0.7:
    devices="min" counts the draft's regions (predict.inference's rule: 5 systems for Llama
    3.1 70B where the target alone takes 4), the step per emitted token is the static
    model's speculative one (it was composed as on GPUs, the 1-layer head spread over 4
    systems: every point unfit, goodput 0 and no reason), faster than without a draft on as
    many systems; a draft that does not fit the systems given is flagged with the reason."""
    kw = dict(hardware="cs3", model="llama_3_1_70b", prompt=2048, generate=256, weights="fp16", kv="fp16")
    spec = dict(draft_len=3, acceptance=0.7)
    need = int(predict.inference(devices="min", batch=1, **kw, **spec).devices)
    assert need == int(predict.inference(devices="min", batch=1, **kw).devices) + 1 == 5
    ds = predict.serving(devices="min", **kw, **spec)
    systems = float(ds.output_tokens_per_s[0] / ds.output_tokens_per_s_per_device[0])
    assert systems == need and float(ds.goodput_tokens_per_s_per_device) > 0 and bool(ds.fits[0])
    static = predict.inference(devices=need, batch=1, **kw, **spec)
    assert float(ds.tpot_s[0]) == pytest.approx(float(static.tpot_s), rel=0.05)  # lightest load: batch ~1
    plain = predict.serving(devices=need, arrival_rate=[float(ds.arrival_rate[0])], **kw)
    assert float(ds.tpot_s[0]) < 0.6 * float(plain.tpot_s[0])
    short = predict.serving(devices=need - 1, **kw, **spec)
    assert not bool(short.fits.any()) and float(short.goodput_tokens_per_s_per_device) == 0.0
    assert str(short.reason.values[0]) == "the layer regions do not fit on the wafers"
