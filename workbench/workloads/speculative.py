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


def per_token_s(*, draft_step_s, verify_step_s, draft_len, acceptance):
    """Seconds per emitted token: k draft steps, then one target step verifying k+1
    positions, over the E tokens it emits on average. Shared by every backend: each gives
    its own draft step and its verify step (the target's step over k+1 rows per sequence)."""
    k = np.asarray(draft_len, dtype=float)
    return (k * draft_step_s + verify_step_s) / expected_tokens_per_step(acceptance=acceptance, draft_len=k)


def time_per_token_s(*, batches, step_s, row_s, draft_step_s, draft_len, acceptance):
    """Seconds per emitted token at each batch of `batches` (ascending), speculating
    `draft_len` = k tokens at per-token `acceptance`: k draft steps, then one target step
    over k+1 positions, whose row-proportional part `row_s` (matmuls, elementwise, comm:
    the step less its KV read) is taken at batch·(k+1) rows while the KV read stays per
    sequence; divided by the tokens the step emits on average."""
    k = float(draft_len)
    rows_k = np.interp(batches * (k + 1.0), batches, row_s)
    verify = rows_k + (step_s - row_s)
    return per_token_s(draft_step_s=draft_step_s, verify_step_s=verify, draft_len=k, acceptance=acceptance)
