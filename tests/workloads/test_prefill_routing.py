"""How prompts reach a disaggregated deployment's prefill replicas (pools_closed_loop:
prefill_wait_s, `prefill_routing` of predict.disaggregated at a fixed concurrency): each
formula against a simulation of the queue it stands for, and what the choice does to a
deployment."""
from __future__ import annotations

import heapq

import numpy as np
import pytest

from workbench import predict
from workbench.errors import InputError
from workbench.workloads.pools_closed_loop import PREFILL_ROUTINGS, erlang_c, prefill_wait_s


def simulated_wait(servers: int, rho: float, routing: str, n: int = 100_000, seed: int = 0) -> float:
    """Mean wait of n Poisson arrivals (the first tenth dropped: the queue starts empty) at
    `servers` deterministic servers of service 1 and utilization rho: "random" sends each
    arrival to a server drawn at random, each serving its own arrivals first come first
    served; "shared_queue" serves all of them in arrival order at the first server free."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / (servers * rho), n))
    wait = np.empty(n)
    if routing == "random":
        pick, free = rng.integers(0, servers, n), np.zeros(servers)
        for i in range(n):
            start = max(t[i], free[pick[i]])
            wait[i], free[pick[i]] = start - t[i], start + 1.0
    else:
        heap = [0.0] * servers
        for i in range(n):
            start = max(t[i], heapq.heappop(heap))
            wait[i] = start - t[i]
            heapq.heappush(heap, start + 1.0)
    return float(wait[n // 10:].mean())


def test_erlang_c_closed_forms():
    """Erlang's C: one server waits with probability rho; two servers C = 2 rho^2 / (1 + rho)
    (the M/M/2 closed form); it rises with the load and falls with the servers at equal load."""
    rho = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(erlang_c(1, rho), rho, rtol=1e-12)
    np.testing.assert_allclose(erlang_c(2, rho), 2 * rho ** 2 / (1 + rho), rtol=1e-12)
    assert np.all(np.diff(erlang_c(8, rho)) > 0) and np.all(np.diff(erlang_c(np.array([1, 2, 4, 8]), 0.8)) < 0)


@pytest.mark.parametrize("servers,rho", [(1, 0.5), (1, 0.8), (4, 0.5), (4, 0.8), (4, 0.9), (8, 0.5), (8, 0.8),
                                         (16, 0.8), (16, 0.9), (40, 0.9)])
@pytest.mark.parametrize("routing", PREFILL_ROUTINGS)
def test_each_routing_wait_against_a_simulation_of_its_queue(servers, rho, routing):
    """Where the simulated wait is over 1% of a prefill batch, the formula is within 8% of the
    simulation (100,000 arrivals; the simulated mean itself moves 2-4% between seeds at
    utilization 0.9). Random routing is M/D/1 per replica whatever the replicas; a shared
    queue is Cosmetatos' M/D/c (the plain M/M/c half is 22% short at 8 servers and rho 0.5)."""
    sim = simulated_wait(servers, rho, routing)
    got = float(prefill_wait_s(rho, 1.0, servers, routing))
    print(f"{routing} c={servers} rho={rho}: formula {got:.4f} vs simulation {sim:.4f} ({got / sim - 1:+.1%})")
    if sim < 0.01:
        assert got < 0.01
    else:
        assert got == pytest.approx(sim, rel=0.08)


def test_shared_queue_waits_less_and_one_replica_is_the_same_queue():
    """At equal utilization a shared queue never waits longer than random routing, equals it
    with one server, and its wait falls as servers are added."""
    rho = np.linspace(0.05, 0.95, 19)
    for c in (1, 2, 4, 8, 40):
        shared, random = prefill_wait_s(rho, 1.0, c, "shared_queue"), prefill_wait_s(rho, 1.0, c, "random")
        assert np.all(shared <= random * (1 + 1e-12))
        if c == 1:
            np.testing.assert_allclose(shared, random, rtol=1e-12)
    waits = [float(prefill_wait_s(0.8, 1.0, c, "shared_queue")) for c in (1, 2, 4, 8, 40)]
    assert all(a > b for a, b in zip(waits, waits[1:]))
    with pytest.raises(ValueError, match="prefill_routing='round_robin' is not known; allowed: random, shared_queue"):
        prefill_wait_s(0.5, 1.0, 4, "round_robin")


QWEN_POOLS = dict(prefill_hardware="gb200", decode_hardware="gb200", model="nvidia/Qwen3-32B-NVFP4", prompt=15000,
                  generate=500, weights="fp4", framework="trtllm", decode_tp=4)


def test_routing_in_a_deployment():
    """serving_silicon.csv's 40-worker Qwen3-32B NVFP4 deployment on GB200 (15,000-token
    prompts, 6 TP4 decode workers, 552 in flight): each prompt to a random prefill worker
    queues about a second at the utilization the loop settles at; one shared queue over the
    40 workers waits a tenth of that or less (79 ms against 1.23 s with the constants of
    30dd018; 133 ms against 1.33 s with TensorRT-LLM's refit of the MoE-surface carry-over,
    the loop settling at a higher utilization: hence 0.11, not 0.1), so requests cycle faster and
    the pool runs busier. With one prefill worker the
    two are the same queue; the output names the routing."""
    kw = dict(QWEN_POOLS, concurrency=552, prefill_workers=40, decode_workers=6)
    random = predict.disaggregated(**kw)
    shared = predict.disaggregated(**kw, prefill_routing="shared_queue")
    assert random.attrs["prefill_routing"] == "random" and shared.attrs["prefill_routing"] == "shared_queue"
    assert float(random.prefill_wait_s) > 0.5 and float(shared.prefill_wait_s) < 0.11 * float(random.prefill_wait_s)
    assert float(shared.ttft_s) < float(random.ttft_s)
    assert float(shared.prefill_utilization) > float(random.prefill_utilization)
    one = dict(QWEN_POOLS, concurrency=8, prefill_workers=1, decode_workers=1)
    a, b = predict.disaggregated(**one), predict.disaggregated(**one, prefill_routing="shared_queue")
    assert float(a.ttft_s) == pytest.approx(float(b.ttft_s), rel=1e-9)


def test_the_loop_closes_at_the_shared_queue_wait():
    """In the closed loop (no first wave): the wait is prefill_wait_s of the shared queue over
    every batch slot at the utilization the loop settles at, Little's law holds, and more
    prefill workers never lengthen TTFT."""
    from workbench.backends import numbers
    from workbench.specs import load_model
    from workbench.workloads.pools_closed_loop import disaggregated_closed_loop
    hw = numbers("h200_sxm", framework="trtllm")
    kw = dict(prefill_hw=hw, decode_hw=hw, model=load_model("deepseek_v3"), prompt=8192.0, generate=1024.0,
              prefill_tp=8.0, prefill_attention_dp=1.0, prefill_ep=8.0, prefill_batch=1.0, decode_tp=1.0,
              decode_attention_dp=8.0, decode_ep=8.0, weights="fp8", activations="fp8", kv="fp8",
              prefill_overhead_s=0.0, decode_overhead_s=0.0, kv_link_bytes_per_s=8 * 50e9, decode_workers=2.0,
              prefill_routing="shared_queue")
    c = np.array([16.0, 64.0, 128.0, 256.0])
    r = disaggregated_closed_loop(concurrency=c, prefill_workers=3.0, **kw)
    rho = np.minimum(r["prefill_utilization"], 0.999)
    np.testing.assert_allclose(r["prefill_wait_s"], prefill_wait_s(rho, r["prefill_batch_s"], 3.0, "shared_queue"),
                               rtol=1e-9)
    np.testing.assert_allclose(r["requests_per_s"] * r["e2e_s"], c, rtol=1e-9)
    more = disaggregated_closed_loop(concurrency=c, prefill_workers=4.0, **kw)
    assert np.all(more["ttft_s"] <= r["ttft_s"] + 1e-12)


def test_bad_routing_is_one_clear_line():
    with pytest.raises(InputError, match="prefill_routing='rr' is not known; allowed: random, shared_queue"):
        predict.disaggregated(**QWEN_POOLS, concurrency=8, prefill_routing="rr")
    with pytest.raises(InputError, match="prefill_routing='shared_queue' is not allowed without concurrency"):
        predict.disaggregated(**QWEN_POOLS, prefill_routing="shared_queue")
