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


def acceptance_for_tokens_per_step(tokens, *, draft_len, rounds: int = 60):
    """The per-token acceptance a at which k = `draft_len` drafted tokens emit `tokens` per
    verify step on average (expected_tokens_per_step inverted, by bisection on [0, 1]: it
    rises with a; 60 rounds leave 2^-60 of the span); `tokens` between 1 and k + 1. A run
    that states its mean acceptance length (tokens per step, as synthetic acceptance enforces
    it) is predicted at this a."""
    t, k = np.asarray(tokens, float), np.asarray(draft_len, float)
    shape = np.broadcast(t, k).shape
    lo, hi = np.zeros(shape), np.ones(shape)
    for _ in range(rounds):
        mid = 0.5 * (lo + hi)
        short = expected_tokens_per_step(acceptance=mid, draft_len=k) < t
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    return 0.5 * (lo + hi)


MTP_HEAD = "mtp"  # draft_model value meaning the target's own multi-token-prediction head
# Acceptance of a token drafted by DeepSeek-V3's MTP module: "the acceptance rate of the
# second token prediction ranges between 85% and 90% across various generation topics"
# (DeepSeek-V3 technical report, arXiv 2412.19437, sec. 5.4.3); the low end, taken per drafted
# token at every depth (an ASSUMED i.i.d. chain: deeper drafts of one module accept no more).
MTP_ACCEPTANCE = 0.85
EAGLE_HEAD = "eagle"  # draft_model value meaning an EAGLE-3 head trained for the target
HEADS = (MTP_HEAD, EAGLE_HEAD)


def draft_for(model, draft_model):
    """The draft's spec: `draft_model` itself, or the target's MTP or EAGLE-3 head."""
    if isinstance(draft_model, str) and draft_model in HEADS:
        return mtp_draft(model) if draft_model == MTP_HEAD else eagle_draft(model)
    return draft_model


def eagle_draft(model):
    """An EAGLE-3 draft head (Li et al., arXiv:2503.01840): one Llama-style decoder layer at
    the target's width (its attention heads and head size, its config's dense
    intermediate_size, a gated MLP) with an LM head over the target's vocabulary, run once per
    drafted token, as NVIDIA's published heads are built (nvidia/Llama-4-Maverick-17B-128E-
    Eagle3, nvidia/gpt-oss-120b-Eagle3: a single layer whatever the target, dense for a MoE
    target); the projection fusing three of the target's hidden states (3d x d) is not
    counted, its embedding and LM head are (not shared with the target)."""
    from ..specs import load_model
    return load_model(dict(name=f"{model.name}_eagle3_head", n_layers=1, d_model=model.d_model, n_heads=model.n_heads,
                           n_kv_heads=model.n_kv_heads, head_dim=model.head_dim, d_ff=model.d_ff,
                           vocab_size=model.vocab_size, gated_mlp=True, tied_embeddings=False))


def mtp_draft(model):
    """The draft of multi-token prediction (DeepSeek-V3's MTP module): one more layer of the
    target's shape (a MoE layer for a MoE target) with the target's embedding and lm_head,
    run once per drafted token. Its attention is full softmax attention, except in a target
    whose every layer is windowed: DeepSeek-V4's MTP layer is its sliding window alone, neither
    compressed (compress_ratios has 62 entries for 61 layers and the MTP layer's is 0,
    DeepSeek-V4-Pro and -Flash config.json) nor indexed. A sparse target's layer keeps its
    indexer (GLM-5's and MiniMax-M3's indexed layers); the layer has both a mixer and an MLP
    (a hybrid target's MLP-free or mixer-free blocks are not its shape)."""
    import dataclasses
    windowed = model.n_sliding_layers == model.n_layers and model.is_compressed
    return dataclasses.replace(model, name=f"{model.name} MTP", n_layers=1, n_dense_layers=min(model.n_dense_layers, 1)
                               if not model.is_moe else 0, n_linear_layers=0, n_sliding_layers=1 if windowed else 0,
                               n_csa_layers=0, n_hca_layers=0, index_topk=0 if windowed else model.index_topk,
                               index_layers=min(model.index_layers, 0 if windowed else 1), n_mlp_free_layers=0,
                               n_mixer_free_layers=0)


def with_speculation(r: dict, *, draft_step_s, verify_step_s, draft_len, acceptance, generate, out_tokens,
                     devices, extra_memory_bytes=0.0, draft_prefill_s=0.0) -> dict:
    """A static-batch result `r` (tpot_s, ttft_s, memory) with speculative decoding: the time
    per token from per_token_s, the end-to-end time and rates that follow, the draft's
    memory added and fits re-checked (every backend's inference uses this one rule). Where
    it drafts (draft_len > 0) the draft prefills the prompts too, before the first token
    (`draft_prefill_s`: its cache is built in the prefill step, as the serving closed loop
    counts it)."""
    out = dict(r)
    tpot = per_token_s(draft_step_s=draft_step_s, verify_step_s=verify_step_s, draft_len=draft_len,
                       acceptance=acceptance)
    ttft = r["ttft_s"] + np.where(np.asarray(draft_len, float) > 0, draft_prefill_s, 0.0)
    e2e = ttft + (generate - 1.0) * tpot
    out.update({"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "output_tokens_per_s": out_tokens / e2e,
                "output_tokens_per_s_per_device": out_tokens / e2e / devices,
                "output_tokens_per_s_per_user": 1.0 / tpot,
                "tokens_per_step": expected_tokens_per_step(acceptance=acceptance, draft_len=draft_len) + 0.0 * tpot})
    if np.any(np.asarray(extra_memory_bytes) > 0):
        used = r["memory_per_device_bytes"] + extra_memory_bytes
        out["memory_per_device_bytes"] = used
        over = used > r["memory_capacity_bytes"]
        out["fits"] = r["fits"] & ~over
        out["reason"] = np.where(r["fits"] & over, "the draft model's weights and KV cache exceed memory",
                                 r["reason"]).astype(object)
    return out


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


VOCAB_PADDING = 0.02  # of the target's vocabulary: embedding tables padded apart (Qwen2.5: 152,064 and 151,936)


def draft_problems(model, draft, draft_len) -> list:
    """A draft model (not the target's own MTP or EAGLE head) proposes tokens the target then
    verifies, so it must share the target's tokenizer: where it drafts (draft_len > 0) a
    draft whose vocabulary differs by more than padding (VOCAB_PADDING) cannot run
    (Qwen3-0.6B's 151,936 tokens for Llama-3.1's 128,256)."""
    from ..layout import Problem
    if draft is None or isinstance(draft, str) or \
            abs(draft.vocab_size - model.vocab_size) <= VOCAB_PADDING * model.vocab_size:
        return []
    k = np.asarray(draft_len, float)
    return [Problem(k > 0, {"draft_len": k},
                    lambda draft_len: f"draft_model={draft.name} has a {draft.vocab_size:,}-token vocabulary and "
                                      f"{model.name} {model.vocab_size:,}; allowed: a draft of the target's tokenizer, "
                                      "or its own head ('mtp', 'eagle')")]
