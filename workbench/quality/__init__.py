"""Quality axis of a study: scaling-law loss and published quantization deltas.

`scaling_law` gives the Chinchilla loss L(N, D) and the compute-optimal split of a FLOP
budget; `quantization` serves the cited table of accuracy and perplexity changes caused
by quantizing weights, activations and the KV cache.
"""
from __future__ import annotations

from .quantization import (QUALITY_DTYPES, as_dataset, deltas, higher_is_better, quality_delta,
                           scheme_label)
from .scaling_law import chinchilla_loss, compute_optimal

__all__ = ["QUALITY_DTYPES", "as_dataset", "chinchilla_loss", "compute_optimal", "deltas",
           "higher_is_better", "quality_delta", "scheme_label"]
