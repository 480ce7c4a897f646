"""The argument checks predict.serving and predict.disaggregated share."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.serving_checks import check_generate, check_slos


def test_generate_needs_two_tokens_for_a_tpot():
    check_generate(2)
    check_generate(np.array([2, 1024]))
    with pytest.raises(InputError, match=r"generate=1 is not allowed with concurrency; allowed: an integer >= 2"):
        check_generate([1, 64])


def test_slos_and_counts():
    check_slos(ttft_slo=2.0, tpot_slo=0.05, quantile=0.9, devices=None, tp=8)
    with pytest.raises(InputError, match="quantile=1"):
        check_slos(ttft_slo=2.0, tpot_slo=0.05, quantile=1.0)
    with pytest.raises(InputError, match="ttft_slo"):
        check_slos(ttft_slo=-1.0, tpot_slo=0.05, quantile=0.9)
    with pytest.raises(InputError, match="tp=1.5"):
        check_slos(ttft_slo=2.0, tpot_slo=0.05, quantile=0.9, tp=1.5)
