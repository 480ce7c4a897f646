"""Speed and memory of predict.inference: one vectorized call over a one-million-point
grid against a loop of scalar calls of the same function.

    .venv/bin/python benchmarks/bench_inference.py [--points 1000000] [--loop 200]

Prints points per second for both and the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from workbench import predict

from _report import best_time, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--loop", type=int, default=200, help="scalar calls to time")
    args = ap.parse_args()
    side = round(args.points ** (1 / 3))
    batch = np.unique(np.geomspace(1, 1024, side).round()).tolist()
    side_b = len(batch)
    prompt = np.linspace(128, 32768, side).round().tolist()
    generate = np.linspace(16, 4096, max(args.points // (side_b * side), 1)).round().tolist()
    n = len(batch) * len(prompt) * len(generate)

    predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=8, weights="fp8")  # warm caches
    ds, vec_s = best_time(lambda: predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8, batch=batch,
                                                    prompt=prompt, generate=generate, weights="fp8", kv="fp8"))
    assert ds.tpot_s.size == n

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.loop):
        predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=8,
                          batch=int(rng.choice(batch)), prompt=int(rng.choice(prompt)),
                          generate=int(rng.choice(generate)), weights="fp8", kv="fp8")
    loop_s = time.perf_counter() - t0

    summary(n=n, vec_s=vec_s, loop_calls=args.loop, loop_s=loop_s, ds=ds)
    scalar_calls()


def _median_ms(fn, calls: int = 300) -> float:
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def scalar_calls() -> None:
    """The per-call cost of one configuration (issue 20: predict.inference <= 1 ms median,
    predict.training <= 2 ms), next to llm-analysis's per-configuration time where it is
    installed (pip install llm-analysis; Llama-2-7B on an H100 SXM, fp16, batch 8)."""
    inf = _median_ms(lambda: predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=8, prompt=1024,
                                               generate=256))
    train = _median_ms(lambda: predict.training(hardware="h100_sxm", model="llama_3_1_8b", devices=64, tp=8,
                                                seq_len=4096, global_batch=256, micro_batch=1))
    print(f"scalar call, median of 300: predict.inference {inf:.2f} ms, predict.training {train:.2f} ms")
    try:
        from llm_analysis.analysis import infer
    except ImportError:
        print("llm-analysis is not installed: its per-configuration time is not compared (pip install llm-analysis)")
        return
    ms = _median_ms(lambda: infer(model_name="NousResearch_Llama-2-7b-hf", gpu_name="h100-sxm-80gb",
                                  dtype_name="w16a16e16", log_level="ERROR", batch_size_per_gpu=8, seq_len=1024,
                                  num_tokens_to_generate=256), calls=100)
    print(f"llm-analysis infer(): {ms:.2f} ms per configuration (its analytical model, no kernel tables)")

if __name__ == "__main__":
    main()
