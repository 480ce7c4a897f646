"""Speculative decoding (draft model or multi-token-prediction heads) in closed form.

With a per-token acceptance probability a (i.i.d., Leviathan et al. 2023, eq. 1) and k
drafted tokens, one verify step emits E = (1 - a^(k+1)) / (1 - a) tokens on average (the
accepted prefix plus the target's own next token). A step costs k draft steps plus one
target step over k+1 positions: the target reads its weights and each sequence's KV cache
once, while its matmuls see batch·(k+1) rows.
"""
from __future__ import annotations

import numpy as np


def expected_tokens_per_step(*, acceptance, draft_len):
    """E[tokens per verify step] = (1 - a^(k+1)) / (1 - a); k+1 when a = 1."""
    a = np.asarray(acceptance, dtype=float)
    k = np.asarray(draft_len, dtype=float)
    safe = np.where(a < 1.0, a, 0.5)
    return np.where(a < 1.0, (1.0 - safe ** (k + 1.0)) / (1.0 - safe), k + 1.0)


def verify_step_s(*, per_row_s, per_sequence_s, fixed_s, batch, draft_len):
    """Target step over k+1 positions: row-proportional work (matmuls, elementwise, comm)
    scales with batch·(k+1) through `per_row_s(rows)`, the KV read stays per sequence."""
    return per_row_s(batch * (draft_len + 1.0)) + per_sequence_s + fixed_s


def speculative(*, acceptance, draft_len, draft_step_s, verify_s) -> dict:
    """Tokens per second per user and the step breakdown for drafts of length k."""
    e = expected_tokens_per_step(acceptance=acceptance, draft_len=draft_len)
    step = draft_len * draft_step_s + verify_s
    return {"tokens_per_step": e, "step_s": step, "tokens_per_s_per_user": e / step,
            "draft_s": draft_len * draft_step_s, "verify_s": verify_s + 0.0 * e}
