"""The GEMM roofline of the fitted surfaces (primitives/gemm_work.py): the weights read once,
or once per row tile up to a cap."""
import numpy as np
import pytest

from workbench.primitives.gemm_work import gemm_roofline, weight_passes


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
