"""Fixed-concurrency serving of every catalog model on pairs of GPUs that should order one
way (a chip with the same compute and more or faster memory), to find where the chips'
measured kernel tables disagree with their datasheets. Nothing is fitted.

    .venv/bin/python benchmarks/cross_gpu_order.py [--models llama_3_1_8b,qwen3_32b] [--show 8]

For each model, framework and weight format, each GPU serves 2,048 / 512-token requests at
1, 16 and 64 in flight at the smallest TP of 1, 2, 4, 8 that holds the model; for each pair
(newer, older) with the same TP the end-to-end time ratio newer / older is printed by
quantile with the pairs above 1.1. When written (76 models, 3 frameworks, 9 GPUs, BF16 / FP8 /
FP4: 15,399 points in 156 s on this 2-core machine): H200 / H100 at most 0.99, median 0.86 (the
ordering tests/workloads/test_serving_hardware_order.py asserts); B300 / B200 up to 1.04 at the
smallest TP, up to 1.08 at TP 8 (B300's measured vLLM all-reduce: 27 us for 512 KiB on 8 GPUs,
B200's 17 us); B200 / H200 up to 1.80 for GLM-5 under vLLM in FP4 at one request (B200's FP4 DSA
module table, about 0.2 ms a layer at batch 1, against H200's composed block).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from workbench import predict
from workbench.errors import InputError
from workbench.specs import list_models

GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200", "b300", "gb200", "gb300", "l40s", "rtx_pro_6000")
PAIRS = (("h200_sxm", "h100_sxm"), ("b300", "b200"), ("gb200", "b200"), ("gb300", "b300"), ("gb300", "gb200"),
         ("b200", "h200_sxm"), ("b200", "h100_sxm"))
CONCURRENCY = [1, 16, 64]
TPS = [1, 2, 4, 8]  # the layouts tried, smallest first
PROMPT, GENERATE = 2048, 512


def sweep(models) -> pd.DataFrame:
    """End-to-end seconds of each (model, framework, weights, GPU, concurrency) at the
    smallest TP that fits, with that TP: one predict.serving call sweeps TP x concurrency."""
    rows = []
    for model in models:
        for fw in ("trtllm", "vllm", "sglang"):
            for hw in GPUS:
                for weights in ("bf16", "fp8", "fp4"):
                    try:
                        ds = predict.serving(hardware=hw, model=model, tp=TPS, concurrency=CONCURRENCY,
                                             prompt=PROMPT, generate=GENERATE, weights=weights, framework=fw)
                    except InputError:
                        continue  # a framework without this GPU, a format without this model
                    fitting = ds.fits.all("concurrency").to_numpy()
                    if not fitting.any():
                        continue
                    smallest = ds.isel(tp=int(np.argmax(fitting)))
                    rows += [dict(model=model, framework=fw, weights=weights, hardware=hw, tp=float(smallest.tp),
                                  concurrency=c, e2e_s=float(v))
                             for c, v in zip(CONCURRENCY, smallest.e2e_s.transpose("concurrency").to_numpy())]
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated catalog names (default: every model)")
    ap.add_argument("--show", type=int, default=8, help="pairs above 1.1 to list per GPU pair")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    models = args.models.split(",") if args.models else list_models()
    t0 = time.perf_counter()
    df = sweep(models)
    print(f"{len(df):,} points in {time.perf_counter() - t0:.0f} s")
    keys = ["model", "framework", "weights", "concurrency"]
    e2e = df.pivot_table(index=keys, columns="hardware", values="e2e_s")
    tp = df.pivot_table(index=keys, columns="hardware", values="tp")
    for newer, older in PAIRS:
        if newer not in e2e or older not in e2e:
            continue
        ratio = (e2e[newer] / e2e[older])[tp[newer] == tp[older]].dropna().sort_values()
        if ratio.empty:
            continue
        q = ratio.quantile([0.0, 0.5, 0.95, 1.0]).round(2).tolist()
        print(f"{newer} / {older}: {len(ratio)} points at the same TP, min / median / p95 / max {q}")
        above = ratio[ratio > 1.1]
        if len(above):
            print(above.tail(args.show).round(2).to_string())


if __name__ == "__main__":
    main()
