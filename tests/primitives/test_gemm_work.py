"""The GEMM roofline of the fitted surfaces (primitives/gemm_work.py): the weights read once,
or once per row tile up to a cap; the math stretched to whole waves of fixed output tiles."""
import numpy as np
import pytest

from workbench.primitives.gemm_work import gemm_roofline, wave_quantization, weight_passes


def test_weight_passes_per_row_tile_closed_form():
    """gemm_work.weight_passes: one pass without a row tile; with 128-row tiles, one more
    pass over the [k, n] operand at m = 129 and at 257, up to the cap; the roofline's bytes
    count them."""
    m = np.array([1.0, 128.0, 129.0, 256.0, 257.0, 4096.0])
    assert np.all(weight_passes(m) == 1.0)
    np.testing.assert_array_equal(weight_passes(m, 128.0), [1, 1, 2, 2, 3, 32])
    np.testing.assert_array_equal(weight_passes(m, 128.0, 8.0), [1, 1, 2, 2, 3, 8])
    kw = dict(n=4096.0, k=8192.0, peak=1e18, bandwidth=1.0, a_bytes=1.0, b_bytes=1.0, c_bytes=2.0)
    one, _ = gemm_roofline(m=129.0, **kw)
    two, _ = gemm_roofline(m=129.0, tile_m=128.0, max_passes=8.0, **kw)
    assert two - one == pytest.approx(8192.0 * 4096.0)  # a second read of the weights, bandwidth 1 B/s


def test_wave_quantization_closed_form():
    """gemm_work.wave_quantization with 128 x 256 tiles on A100's 108 SMs (A100 whitepaper),
    n = 4096 (16 tile columns): m = 768 is 96 tiles, one wave, factor 1; m = 769 is 112 tiles,
    two waves of 108 (216 / 112); m = 1537 is 208 tiles, still two waves (216 / 208); within
    one wave, or without a tile or SM count, it is 1. The roofline's math time carries it
    (A100 cuBLAS BF16 in SGLang's table: 112 us at m = 768, 218 us at m = 769)."""
    m = np.array([1.0, 768.0, 769.0, 1537.0, 4096.0])
    np.testing.assert_allclose(wave_quantization(m, 4096.0, 128.0, 256.0, 108.0),
                               [1.0, 1.0, 216 / 112, 216 / 208, 540 / 512])
    assert np.all(wave_quantization(m, 4096.0) == 1.0)
    assert np.all(wave_quantization(m, 4096.0, 128.0, 256.0, 0.0) == 1.0)
    kw = dict(n=4096.0, k=4096.0, peak=1.0, bandwidth=1e30, a_bytes=2.0, b_bytes=2.0, c_bytes=2.0)
    plain, _ = gemm_roofline(m=769.0, **kw)
    waved, _ = gemm_roofline(m=769.0, wave_tile_m=128.0, wave_tile_n=256.0, n_sms=108.0, **kw)
    assert waved / plain == pytest.approx(216 / 112)


def test_wave_quantization_of_no_rows_is_one_without_a_warning():
    """A part masked to zero tokens (m = 0: no prefill chunk in an iteration) has no tiles:
    factor 1, computed without a 0 / 0 (numpy's RuntimeWarning showed in every serving sweep)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(wave_quantization(np.array([0.0, 0.0]), np.array([0.0, 4096.0]),
                                                        128.0, 256.0, 108.0), [1.0, 1.0])
