"""Fixed-concurrency serving across chips of one die: a chip with the same compute and
more, faster memory never serves a deployment more slowly, though each chip reads its own
measured kernel tables (calibrate/kernel_fit.py fits each GPU's separately).

H200 is H100's GH100 die with 141 GB of HBM3e at 4.8 TB/s against 80 GB at 3.35 TB/s
(NVIDIA H200 and H100 datasheets; specs/hardware/h200_sxm.yaml, h100_sxm.yaml). When
written, over 76 catalog models x 3 frameworks x 3 weight formats x 1/16/64 requests at the
smallest layout that fits both (2,048 / 512 tokens), end-to-end time on H200 was at most 0.99
of H100's, 0.86 at the median (benchmarks/cross_gpu_order.py). No such order holds for B300 over B200 (Blackwell Ultra: B200's 8 TB/s and dense
BF16/FP8 peaks, more memory): their measured tables differ where the chips should not, vLLM's
custom all-reduce on 8 GPUs taking 27 us for 512 KiB on B300 and 17 us on B200
(aiconfigurator-core 0.12.0 b300_sxm/b200_sxm comm/vllm/0.24.0), so Qwen3-235B at TP 8 and 64
requests decodes 8% slower on B300 (communication 5.0 against 3.4 ms a step); the model
follows the tables.
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict

# dense, MoE, MoE with MXFP4 experts and a Gated DeltaNet hybrid, each at a TP that holds its
# FP8 weights on 80 GB GPUs (DeepSeek-V3's 671 GB do not fit 8 H100s)
TP = {"llama_3_1_8b": 1, "qwen3_32b": 2, "llama_3_1_70b": 4, "gpt_oss_120b": 2, "qwen3_235b_a22b": 8,
      "qwen3_next_80b_a3b": 2}
CONCURRENCY = [1, 16, 64]


def _e2e(hardware, model, framework, weights):
    ds = predict.serving(hardware=hardware, model=model, tp=TP[model], concurrency=CONCURRENCY, prompt=2048,
                         generate=512, weights=weights, framework=framework)
    return ds.e2e_s.where(ds.fits).to_numpy()


@pytest.mark.parametrize("framework", ["trtllm", "vllm", "sglang"])
@pytest.mark.parametrize("model", list(TP))
def test_h200_never_serves_slower_than_h100(model, framework):
    slow, fast = _e2e("h100_sxm", model, framework, "fp8"), _e2e("h200_sxm", model, framework, "fp8")
    both = np.isfinite(slow) & np.isfinite(fast)
    assert both.any(), f"{model} fits neither chip at tp {TP[model]}"
    assert np.all(fast[both] <= slow[both]), (model, framework, fast / slow)
