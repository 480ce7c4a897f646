"""The efficiency surfaces (primitives/kernel_fits.py): multilinear interpolation in log2 of
the shape, exact at the knots, constant beyond them, vectorized and dimension-preserving;
the rooflines of each kernel class in closed form."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from workbench.primitives.kernel_fits import (ATTENTION_TILE, ROOFLINES, EffGrid, attended_pairs,
                                              context_attention_roofline, decode_attention_roofline, gemm_roofline,
                                              sm_utilization)

GRID = EffGrid(axes=("m", "n"), knots=((0.0, 1.0, 3.0), (5.0, 6.0)),
               log_eff=np.log(np.array([[0.1, 0.2], [0.4, 0.5], [0.8, 0.9]])))


def test_exact_at_knots():
    for i, m in enumerate((1, 2, 8)):
        for j, n in enumerate((32, 64)):
            assert GRID(m=m, n=n) == pytest.approx(np.exp(GRID.log_eff[i, j]), rel=1e-12)


def test_log_linear_between_knots_and_constant_beyond():
    # halfway in log2 between m=2 and m=8 (m=4), n at a knot: the geometric mean
    assert GRID(m=4, n=32) == pytest.approx(np.sqrt(0.4 * 0.8), rel=1e-12)
    # bilinear in the interior cell
    assert GRID(m=np.sqrt(2), n=np.sqrt(32 * 64)) == pytest.approx(np.exp(np.mean(np.log([0.1, 0.2, 0.4, 0.5]))))
    assert GRID(m=1e6, n=1e6) == pytest.approx(0.9) and GRID(m=0.5, n=1.0) == pytest.approx(0.1)


def test_a_million_points_in_one_call_and_dataarrays_keep_dims():
    m = np.random.default_rng(0).uniform(1, 8, 1_000_000)
    e = GRID(m=m, n=48.0)
    assert e.shape == m.shape and np.all((e >= 0.1) & (e <= 0.9))
    da = GRID(m=xr.DataArray([1.0, 8.0], dims="m"), n=xr.DataArray([32.0, 64.0, 50.0], dims="n"))
    assert da.dims == ("m", "n") and da.shape == (2, 3)


def test_dict_round_trip():
    back = EffGrid.from_dict(GRID.to_dict())
    assert back.axes == GRID.axes and back.knots == GRID.knots
    np.testing.assert_allclose(back.log_eff, GRID.log_eff, atol=1e-4)  # stored to 4 decimals


def test_weights_are_a_partition_of_unity():
    flat, w = GRID.weights({"m": np.array([1.3, 5.0, 100.0]), "n": np.array([40.0, 33.0, 1.0])})
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert flat.shape == (3, 4) and flat.max() < GRID.log_eff.size


def test_gemm_roofline_closed_form():
    # 8192^3 bf16 on a 989.4 TFLOP/s, 3.35 TB/s chip: 2*8192^3 / 989.4e12 = 1.111 ms (compute)
    t, c = gemm_roofline(m=8192, n=8192, k=8192, peak=989.4e12, bandwidth=3.35e12, a_bytes=2, b_bytes=2, c_bytes=2)
    assert t == pytest.approx(2 * 8192 ** 3 / 989.4e12)
    # a GEMV (m=1) reads the 8192x8192 weight: 134 MB / 3.35 TB/s = 40 us (memory)
    t, _ = gemm_roofline(m=1, n=8192, k=8192, peak=989.4e12, bandwidth=3.35e12, a_bytes=2, b_bytes=2, c_bytes=2)
    assert t == pytest.approx((8192 * 2 + 8192 * 8192 * 2 + 8192 * 2) / 3.35e12)
    assert set(c) == set(ROOFLINES["gemm"].axes)


def test_attended_pairs_causal_and_banded():
    assert attended_pairs(4.0) == 10.0  # 1 + 2 + 3 + 4
    assert attended_pairs(4.0, causal=False) == 16.0
    assert attended_pairs(4.0, context=10.0) == 10.0 + 40.0
    # a window of 128 over 4096 queries executes whole tiles: 4096 * (128 + tile) pairs
    assert attended_pairs(4096.0, window=128.0) == 4096.0 * (128.0 + ATTENTION_TILE)
    assert attended_pairs(100.0, window=128.0) == attended_pairs(100.0)  # window longer than the keys


def test_sm_utilization_and_attention_roofline():
    assert sm_utilization(132.0, 132.0) == 1.0
    assert sm_utilization(133.0, 132.0) == pytest.approx(133 / 264)
    # 1 x 32 heads x 8 tiles of 128 queries = 256 blocks on 132 SMs: 2 waves, 97% busy
    t, _ = context_attention_roofline(batch=1, seq_len=1024, n_heads=32, n_kv_heads=8, head_dim=128, peak=989.4e12,
                                      bandwidth=3.35e12, act_bytes=2, kv_bytes=2, n_sms=132)
    flops = 2 * 32 * 256 * 1024 * 1025 / 2
    assert t == pytest.approx(flops / 989.4e12 / (256 / 264))


def test_decode_roofline_reads_the_cache():
    # 64 sequences x 4096 keys x 8 KV heads x (128 + 128) x 2 B = 1.07 GB... per layer: 1.07e9/3.35e12
    t, c = decode_attention_roofline(batch=64, kv_len=4096, n_heads=32, n_kv_heads=8, head_dim=128,
                                     peak=989.4e12, bandwidth=3.35e12, act_bytes=2, kv_bytes=2)
    kv = 64 * 4096 * 8 * 256 * 2
    assert t == pytest.approx((kv + 64 * 2 * 32 * 128 * 2) / 3.35e12)
    assert c["slices"] == 64 * 8 and c["group"] == 4
    tw, cw = decode_attention_roofline(batch=64, kv_len=4096, n_heads=32, n_kv_heads=8, head_dim=128, window=1024,
                                       peak=989.4e12, bandwidth=3.35e12, act_bytes=2, kv_bytes=2)
    # the window caps the keys read; the coordinate stays the cache the kernel plans over
    # (XQA at a 128-token window: 9 us at 256 cached tokens, 23 us at 65,536, batch 1)
    assert cw["keys"] == 4096 and tw == pytest.approx((64 * 1024 * 8 * 256 * 2 + 64 * 2 * 32 * 128 * 2) / 3.35e12)
