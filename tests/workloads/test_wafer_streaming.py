"""Weight streaming: the primitive's overlap arithmetic and the streamed inference model."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import predict
from workbench.primitives.weight_streaming import stream_time, streamed_layer
from workbench.specs import load_model
from workbench.backends import numbers


def test_streamed_layer_bounds():
    """Overlapped streaming: time = max(compute, io), upper bound = compute + io; with
    gradients going out on the other direction of the full-duplex link, io = max of the two."""
    r = streamed_layer(compute_s=np.array([1.0, 3.0]), weight_bytes=200.0, io_bytes_per_s=100.0,
                       gradient_bytes=300.0)
    assert np.allclose(r["io_s"], 3.0)  # 300 B / 100 B/s out, 2 s in
    assert np.allclose(r["time_s"], [3.0, 3.0])
    assert np.allclose(r["time_upper_s"], [4.0, 6.0])
    assert list(r["io_bound"]) == [True, False]
    assert stream_time(nbytes=150e9, io_bytes_per_s=150e9, latency_s=1e-5) == pytest.approx(1.0 + 1e-5)


def test_streamed_decode_never_beats_the_io_roofline():
    """Each token streams every weight through the CS-3's 1.2 Tb/s (150 GB/s, A14): TPOT >=
    weight bytes / 150e9 (16 GB for Llama 3.1 8B in fp16 -> >= 0.107 s)."""
    m = load_model("llama_3_1_8b")
    io = numbers("cs3").io_bytes_per_s
    ds = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=[1, 16], prompt=1024, generate=64,
                           weights="fp16", placement="streaming")
    floor = (m.n_params - m.vocab_size * m.d_model) * 2.0 / io
    assert np.all(ds.tpot_s.values >= floor * 0.999)
    assert set(ds.bound.values.ravel()) == {"weight_streaming_io"}


def test_streaming_replicas_scale_throughput_and_kv_limits_batch():
    one = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=4, devices=1, weights="fp16",
                            placement="streaming")
    four = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=4, devices=4, weights="fp16",
                             placement="streaming")
    assert float(four.output_tokens_per_s) == pytest.approx(4 * float(one.output_tokens_per_s))
    big = predict.inference(hardware="cs3", model="llama_3_1_70b", batch=512, prompt=8192, weights="fp16",
                            placement="streaming")
    assert not bool(big.fits) and big.bound.item() == "capacity"


def test_streaming_is_far_slower_than_resident_weights_for_decode():
    ds = predict.inference(hardware="cs3", model="llama_3_1_8b", batch=1, weights="fp16",
                           placement=["regions", "streaming"])
    regions, streaming = ds.tpot_s.sel(placement="regions"), ds.tpot_s.sel(placement="streaming")
    assert float(streaming) > 100 * float(regions)


def test_batch_is_per_replica_as_on_gpus_and_replicas_are_reported():
    """batch means sequences per replica on every placement and on GPUs: streaming's devices
    are replicas of `batch` each (its throughput counts them all), as a GPU's devices beyond
    tp x pp are (h100_sxm tp 8 on 16 GPUs: twice the 8 GPUs' throughput at batch 1), and
    regions' devices pipeline one replica. `replicas` names the count."""
    kw = dict(hardware="cs3", model="llama_3_1_8b", batch=1, weights="fp16", placement="streaming")
    ds = predict.inference(devices=[1, 4], **kw)
    assert list(ds.replicas.values) == [1.0, 4.0] and list(ds.batch.values) == [1.0, 1.0]
    rate = ds.output_tokens_per_s.values
    assert rate[1] == pytest.approx(4 * rate[0]) and ds.tpot_s.values[1] == pytest.approx(ds.tpot_s.values[0])
    gpu = predict.inference(hardware="h100_sxm", model="llama_3_1_8b", tp=8, devices=[8, 16], batch=1, weights="fp16")
    g = gpu.output_tokens_per_s.values
    assert g[1] == pytest.approx(2 * g[0])


def test_a_streaming_point_that_does_not_fit_has_no_time():
    """KV cache of every layer beyond the SRAM: flagged, times NaN (as under regions)."""
    big = predict.inference(hardware="cs3", model="llama_3_1_70b", batch=512, prompt=8192, weights="fp16",
                            placement="streaming")
    assert not bool(big.fits) and np.isnan(float(big.tpot_s)) and np.isfinite(float(big.memory_per_device_bytes))
