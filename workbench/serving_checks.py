"""Argument checks that predict.serving and predict.disaggregated share (predict_serving.py)."""
from __future__ import annotations

from ._broadcast import values_of
from .errors import InputError, check_positive, check_range


def check_slos(*, ttft_slo, tpot_slo, quantile, **sizes) -> None:
    """Counts (None: not given) positive integers, latency targets positive, the quantile in (0, 1)."""
    for arg, v in sizes.items():
        if v is not None:
            check_positive(arg, v, integer=True)
    for arg, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        check_positive(arg, v)
    check_range("quantile", quantile, low=0.0, high=1.0, open_low=True, open_high=True, allowed="a number in (0, 1)")


def check_generate(generate) -> None:
    """A closed loop's output length: at least 2 tokens, the TPOT it reports being
    (end-to-end - TTFT) / (generate - 1)."""
    if min(values_of(generate)) < 2:
        raise InputError(f"generate={min(values_of(generate))} is not allowed with concurrency; allowed: an "
                         "integer >= 2 (TPOT = (end-to-end - TTFT) / (generate - 1))")
