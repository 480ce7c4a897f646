"""Serving models against simulation, Monte Carlo and brute force (issue: serving-level
inference): the continuous-batching queueing model against a discrete-event simulation,
speculative decoding's expected tokens against sampling, MoE experts touched against
sampling, and the disaggregation balance point against every integer split."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.workloads.disaggregated import balance, best_split
from workbench.workloads.ops import expected_experts_touched
from workbench.workloads.serving import latencies
from workbench.workloads.speculative import expected_tokens_per_step


def simulate(lam, G, c, step, n_requests=20000, seed=0):
    """Iteration-level continuous batching: each iteration decodes one token per running
    request and prefills every prompt that arrived before it started (chunked prefill)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / lam, n_requests))
    t, nxt, remaining = 0.0, 0, []
    ttft, batches, durations = [], [], []
    while nxt < n_requests or remaining:
        new = np.searchsorted(arrivals, t, side="right") - nxt
        if not remaining and new == 0:
            t = arrivals[nxt]
            continue
        B = len(remaining)
        duration = (step(B) if B else 0.0) + new * c
        t += duration
        if B:
            batches.append(B)
            durations.append(duration)
        remaining = [r - 1 for r in remaining if r > 1]
        ttft.extend(t - arrivals[nxt:nxt + new])
        remaining += [G - 1] * new
        nxt += new
    warm = len(batches) // 10
    return np.mean(batches[warm:]), np.mean(durations[warm:]), np.mean(ttft[len(ttft) // 10:])


@pytest.mark.parametrize("lam,G,c", [(10.0, 100, 0.02), (30.0, 200, 0.005), (5.0, 50, 0.05)])
def test_queueing_model_against_simulation(lam, G, c):
    step = lambda B: 0.01 + 1e-4 * np.asarray(B, dtype=float)  # noqa: E731
    model = latencies(arrival_rate=lam, output_len=float(G), prefill_s=c, decode_step_s=step)
    sim_batch, sim_iter, sim_ttft = simulate(lam, G, c, step)
    print(f"lam {lam}: batch {float(model['batch']):.1f} vs {sim_batch:.1f}, iteration "
          f"{float(model['iteration_s']) * 1e3:.2f} vs {sim_iter * 1e3:.2f} ms, TTFT "
          f"{float(model['ttft_mean_s']) * 1e3:.1f} vs {sim_ttft * 1e3:.1f} ms")
    assert float(model["batch"]) == pytest.approx(sim_batch, rel=0.10)
    assert float(model["iteration_s"]) == pytest.approx(sim_iter, rel=0.10)
    assert float(model["ttft_mean_s"]) == pytest.approx(sim_ttft, rel=0.20)


def test_beyond_saturation_is_flagged_unstable():
    step = lambda B: 0.01 + 1e-4 * np.asarray(B, dtype=float)  # noqa: E731
    # decode retires at most (1 - rho) / (G·b) = 0.8 / (200·1e-4) = 40 req/s: 40 is the edge
    r = latencies(arrival_rate=np.array([20.0, 45.0]), output_len=200.0, prefill_s=0.005, decode_step_s=step)
    assert list(r["stable"]) == [True, False] and np.isinf(r["tpot_s"][1])


def test_a_slow_contraction_still_finds_the_fixed_point():
    """A decode step linear in the batch, d(B) = a + b B, has the fixed point
    B* = lam G a / (1 - rho - lam G b) in closed form; with lam G b / (1 - rho) = 0.905 the
    fixed-point rounds close on it geometrically at that ratio and 60 of them leave it 2e-3
    short, which read as beyond saturation (TPOT inf, fits=True) before the limit was
    extrapolated. It is stable, and its batch and TPOT are the closed form's."""
    from workbench.workloads.serving import steady_state
    a, b, lam, G, c = 2e-3, 9e-4, 0.5, 2000.0, 0.01  # lam G b / (1 - rho) = 0.9 / 0.995
    s = steady_state(arrival_rate=np.array([lam]), output_len=G, prefill_s=c, decode_step_s=lambda B: a + b * B)
    rho = lam * c
    exact = lam * G * a / (1.0 - rho - lam * G * b)
    assert bool(s["stable"][0])
    assert float(s["batch"][0]) == pytest.approx(exact, rel=1e-9)
    assert float(s["iteration_s"][0]) == pytest.approx((a + b * exact) / (1.0 - rho), rel=1e-9)


@pytest.mark.parametrize("a,k", [(0.6, 1), (0.8, 3), (0.9, 5), (0.5, 7)])
def test_speculative_expected_tokens_against_sampling(a, k):
    """Leviathan et al. 2023 eq. 1: E = (1 - a^(k+1)) / (1 - a) for i.i.d. acceptance."""
    rng = np.random.default_rng(1)
    accepted = rng.random((200000, k)) < a
    prefix = np.cumprod(accepted, axis=1).sum(axis=1)  # accepted drafts before the first rejection
    assert float(expected_tokens_per_step(acceptance=a, draft_len=k)) == pytest.approx(np.mean(prefix + 1), rel=0.01)


@pytest.mark.parametrize("E,k,T", [(8, 2, 1), (8, 2, 16), (256, 8, 64), (64, 6, 512)])
def test_experts_touched_against_sampling(E, k, T):
    rng = np.random.default_rng(2)
    samples = max(300, 4_000_000 // (T * E))
    draws = np.argsort(rng.random((samples, T, E)), axis=2)[:, :, :k]  # top-k distinct experts per token
    touched = np.array([len(np.unique(d)) for d in draws])
    assert float(expected_experts_touched(n_experts=E, top_k=k, tokens=T)) == pytest.approx(touched.mean(), rel=0.02)


def test_disaggregation_balance_against_brute_force():
    lam_p, lam_d, dev_p, dev_d, G = 3.0, 11.0, 8, 8, 256
    ratio, good = balance(prefill_rate=lam_p, decode_rate=lam_d, prefill_devices=dev_p, decode_devices=dev_d,
                          output_len=G)
    assert float(ratio) == pytest.approx(lam_d / lam_p)
    best = max((G * min(n_p * lam_p, n_d * lam_d) / (8 * (n_p + n_d)), n_p, n_d)
               for n_p in range(1, 17) for n_d in range(1, 17) if n_p + n_d <= 16)
    n_p, n_d, g = best_split(total_devices=128, prefill_rate=lam_p, decode_rate=lam_d, prefill_devices=dev_p,
                             decode_devices=dev_d, output_len=G)
    assert (g, n_p, n_d) == pytest.approx(best)
    assert g <= float(good) + 1e-9  # integer splits never beat the balanced continuous ratio


def test_predict_serving_slo_and_speculation():
    base = predict.serving(hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8", kv="fp8",
                           ttft_slo=1.0, tpot_slo=0.03)
    assert float(base.goodput_tokens_per_s_per_device) > 0
    ok = base.meets_slo.values
    assert np.all(base.tpot_s.values[ok] <= 0.03) and np.all(base.ttft_quantile_s.values[ok] <= 1.0)
    assert np.all(np.diff(base.batch.values[np.isfinite(base.batch.values)]) >= 0)  # more load, bigger batch
    spec = predict.serving(hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8", kv="fp8",
                           ttft_slo=1.0, tpot_slo=0.03, draft_len=3, acceptance=0.8)
    low = predict.serving(hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8", kv="fp8", arrival_rate=[0.1])
    low_spec = predict.serving(hardware="h100_sxm", model="llama_3_1_8b", tp=1, weights="fp8", kv="fp8",
                               arrival_rate=[0.1], draft_len=3, acceptance=0.8)
    assert float(low_spec.tpot_s[0]) < float(low.tpot_s[0])  # at light load speculation cuts TPOT
    assert float(spec.goodput_tokens_per_s_per_device) > 0


def test_predict_disaggregated_runs_and_is_consistent():
    d = predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="h200_sxm", model="llama_3_1_70b",
                              prefill_tp=8, decode_tp=8, weights="fp8", kv="fp8", total_devices=128)
    assert float(d.prefill_per_decode_instances) == pytest.approx(
        float(d.decode_requests_per_s) / float(d.prefill_requests_per_s))
    assert float(d.split_goodput_tokens_per_s_per_device) <= float(d.goodput_tokens_per_s_per_device) + 1e-9
    assert float(d.kv_transfer_bytes) == pytest.approx(2048 * 80 * 2 * 8 * 128 * 1.0)  # fp8 KV, 80 layers, 8 KV heads
    assert bool(d.fits) and str(d.reason.values) == ""


def test_the_slo_analysis_says_why_a_pool_serves_nothing():
    """Without concurrency, a pool that cannot hold the model reads goodput 0: fits=False and
    the reason name the pool (before, a zero goodput came with no reason: one CS-3 cannot hold
    Llama-3.1-70B's layer regions; DeepSeek-V3 in FP8 is 671 GB, two H100s hold 160 GB)."""
    wafer = predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="cs3", model="llama_3_1_70b",
                                  prefill_tp=2, decode_tp=1, prompt=1024, generate=256, weights="fp16")
    assert float(wafer.goodput_tokens_per_s_per_device) == 0.0 and not bool(wafer.fits)
    assert str(wafer.reason.values) == "decode: the layer regions do not fit on the wafers"
    held = predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="cs3", model="llama_3_1_70b",
                                 prefill_tp=2, decode_tp=1, decode_devices=4, prompt=1024, generate=256, weights="fp16")
    assert bool(held.fits) and float(held.goodput_tokens_per_s_per_device) > 0.0
    gpu = predict.disaggregated(prefill_hardware="h100_sxm", decode_hardware="h100_sxm", model="deepseek_v3",
                                prefill_tp=2, decode_tp=2, prompt=1024, generate=256, weights="fp8")
    assert not bool(gpu.fits) and str(gpu.reason.values).startswith("prefill: ")
