"""A call of single values (no list, array or DataArray) takes _broadcast's point path; it
must return the very Dataset the general path builds: same variables, values, dtypes,
coordinates and attributes (issue 20: scalar calls under a millisecond)."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import _broadcast, predict
from workbench.backends import numbers

CALLS = {
    "inference gpu": lambda: predict.inference(hardware="h100_sxm", model="llama_3_1_8b", batch=8, prompt=1024,
                                               generate=256),
    "inference moe fp8": lambda: predict.inference(hardware="h100_sxm", model="deepseek_v3", tp=8, batch=8,
                                                   prompt=1024, generate=256, weights="fp8"),
    "inference wafer": lambda: predict.inference(hardware="cs3", model="llama_3_1_8b", batch=8, prompt=1024,
                                                 generate=256),
    "inference infeasible": lambda: predict.inference(hardware="h100_sxm", model="llama_3_1_70b", tp=3, batch=1,
                                                      prompt=128, generate=8),
    "serving": lambda: predict.serving(hardware="h200_sxm", model="qwen3_32b", tp=2, concurrency=16, prompt=1024,
                                       generate=256),
    "training": lambda: predict.training(hardware="h100_sxm", model="llama_3_1_8b", devices=64, tp=8,
                                         seq_len=4096, global_batch=256, micro_batch=1),
    "gemm": lambda: predict.gemm(hardware="b200", m=8, n=4096, k=4096),
    "collective": lambda: predict.collective(hardware="h100_sxm", op="all_reduce", size_bytes=1e8, devices=8),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_point_path_builds_the_general_paths_dataset(name, monkeypatch):
    fast = CALLS[name]()
    monkeypatch.setattr(_broadcast, "_is_point", lambda categorical, numeric: False)
    slow = CALLS[name]()
    assert fast.identical(slow), name
    for v in slow.variables:
        assert fast[v].dtype == slow[v].dtype and fast[v].attrs == slow[v].attrs, (name, v)


def test_scalar_surface_lookup_equals_the_array_lookup():
    """EffGrid's plain-Python point interpolation against its array path, on 2,000 random
    GEMM shapes inside and outside the knots (H100, TensorRT-LLM bf16 surface)."""
    g, _ = numbers("h100_sxm", framework="trtllm").fitted("gemm", "bf16")
    rng = np.random.default_rng(0)
    shapes = 2.0 ** rng.uniform([-2, 2, 2], [18, 19, 19], size=(2000, 3))
    point = np.array([g(m=m, n=n, k=k) for m, n, k in shapes])
    array = g(m=shapes[:, 0], n=shapes[:, 1], k=shapes[:, 2])
    np.testing.assert_allclose(point, array, rtol=1e-12)
