"""Every catalog model served on a Blackwell, a Hopper and a PCIe GPU under each framework
(predict.serving at TP 8, FP8 weights, 1 and 64 requests in flight): each point is answered
with a finite, positive TTFT and a TPOT no faster than reading the active matmul weights
once (n_matmul_params_active x 1 byte / 8 devices / HBM bandwidth, the decode roofline), or
flagged with a reason. The held-out serving rows name models and GPUs the dev rows have no
row for; this is the model's side of that: nothing it can be asked about breaks."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import list_models, load_model


@pytest.mark.parametrize("hardware", ["b200", "h200_sxm", "l40s"])
@pytest.mark.parametrize("framework", ["trtllm", "vllm", "sglang"])
def test_every_catalog_model_is_answered_or_flagged(hardware, framework):
    bw = numbers(hardware).hbm_bandwidth_bytes_per_s
    answered = 0
    for name in list_models():
        ds = predict.serving(hardware=hardware, model=name, tp=8, concurrency=[1, 64], prompt=1024, generate=256,
                             weights="fp8", framework=framework)
        fits, reason = np.asarray(ds.fits), np.asarray(ds.reason).astype(str)
        tpot, ttft = np.asarray(ds.tpot_s), np.asarray(ds.ttft_s)
        floor = load_model(name).n_matmul_params_active * 1.0 / 8.0 / bw
        assert np.all(np.isfinite(tpot[fits]) & np.isfinite(ttft[fits]) & (ttft[fits] > 0)), name
        assert np.all(tpot[fits] >= floor), (name, tpot[fits].min(), floor)
        assert np.all(np.char.str_len(reason[~fits]) > 0), name
        answered += int(fits.sum())
    assert answered >= len(list_models())  # most of the catalog fits 8 GPUs at one request
