"""Kernel efficiencies fitted to measured kernel tables: roofline time divided by a smooth
efficiency surface over the kernel's shape.

A measured kernel runs slower than its roofline bound, max(FLOPs / peak, bytes / memory
bandwidth), by a factor that depends on its shape: small GEMMs cannot fill the SMs, skinny
ones are memory-bound GEMVs, few (sequence x head) slices leave decode attention short of
parallelism. EffGrid holds log(roofline / measured) on a grid of knots in log2 of the
shape coordinates and interpolates it multilinearly, holding it constant beyond the outer
knots. It is defined for every shape, measured or not, stays an array function (one call
for a million points), and scales with the hardware: a chip with another peak or bandwidth
keeps the efficiency of its shape and moves its roofline.

Each kernel class states its roofline and its coordinates once here (ROOFLINES); the fit
(calibrate/kernel_fit.py) and the primitives both read them, so what was fitted is what
is evaluated.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..units import DTYPE_BYTES
from ._array import _is_xr, block, blocks, where
from .gemm_work import gemm_roofline  # numpy only: the GEMM roofline with its weight passes


_SCALARS = (int, float, np.floating, np.integer)


def _factors(frac, exact: bool) -> tuple:
    """(lower, upper) knot factors of an axis: 1 - f and f, or (None, False) / (False, None)
    where f is 0 / 1 at every point (None: exactly 1, False: exactly 0, not summed: the sum
    of the other corners is the same number but for the sign of a zero, which exp drops)."""
    if exact and not np.any(frac):
        return None, False
    if exact and np.all(frac == 1.0):
        return False, None
    return 1.0 - frac, frac


def _corners(flat_table, strides, idx, factors):
    """The multilinear sum over the corners of the stencil (knot indices `idx`, per axis the
    factors of its lower and upper knot), in row-major order: each corner's weight is the
    product of its axes' factors in axis order, shared between corners with a common
    prefix; a factor None weighs its knot by exactly 1 and the other knot by 0 (skipped)."""
    base = sum(sorted((i * st for i, st in zip(idx, strides)), key=np.size))  # the small ones first: one add per point
    out = None

    def visit(axis, offset, w):
        nonlocal out
        if axis == len(idx):
            term = np.take(flat_table[offset:], base)  # flat_table[base + offset], no index array per corner
            if w is not None:  # base spans the block, so the weight fits into the term
                np.multiply(term, w, out=term)
            out = term if out is None else np.add(out, term, out=out)
            return
        for c, g in enumerate(factors[axis]):
            if g is not False:
                visit(axis + 1, offset + (strides[axis] if c else 0), w if g is None else g if w is None else w * g)
    visit(0, 0, None)
    return out


@dataclass(frozen=True)
class EffGrid:
    """log efficiency on knots (log2 of each coordinate), one axis per coordinate."""
    axes: tuple  # coordinate names
    knots: tuple  # per axis, increasing log2 values (at least two)
    log_eff: np.ndarray = field(repr=False)  # shape = tuple(len(k) for k in knots)

    def weights(self, coords: dict):
        """(flat knot indices, weights), each [..., 2**D]: the multilinear stencil of every
        point. Coordinates are clipped to the outer knots (constant beyond them)."""
        idx, frac = [], []
        for name, kn in zip(self.axes, self.knots):
            kn = np.asarray(kn, float)
            x = np.clip(np.log2(np.maximum(np.asarray(coords[name], float), 1e-30)), kn[0], kn[-1])
            i = np.clip(np.searchsorted(kn, x, side="right") - 1, 0, len(kn) - 2)
            idx.append(i)
            frac.append((x - kn[i]) / (kn[i + 1] - kn[i]))
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx))
        idx = [np.broadcast_to(i, shape) for i in idx]
        frac = [np.broadcast_to(f, shape) for f in frac]
        dims = tuple(len(k) for k in self.knots)
        flat, wts = [], []
        for corner in itertools.product((0, 1), repeat=len(dims)):
            flat.append(np.ravel_multi_index(tuple(i + c for i, c in zip(idx, corner)), dims))
            w = np.ones(shape)
            for f, c in zip(frac, corner):
                w = w * (f if c else 1.0 - f)
            wts.append(w)
        return np.stack(flat, -1), np.stack(wts, -1)

    def __call__(self, **coords):
        """Efficiency (fraction of the roofline rate) at the coordinates; broadcasts.
        Axes whose coordinate is one number (0-d) are contracted out of the table first (the
        head size and GQA group of a model, the n and k of a matmul), so a sweep pays
        only for the axes it varies: one axis is np.interp, more a gather per corner, over
        the points in cache-sized blocks (_array.blocks)."""
        if _is_xr(*coords.values()):
            import xarray as xr
            names = list(coords)
            return xr.apply_ufunc(lambda *v: self(**dict(zip(names, v))), *coords.values())
        if all(isinstance(v, _SCALARS) or (isinstance(v, np.ndarray) and v.ndim == 0) for v in coords.values()):
            return self._at_point([float(coords[name]) for name in self.axes])
        table = np.asarray(self.log_eff, float)
        free = []  # (knots, log2 coordinate) of the axes that vary
        for ax, (name, kn) in reversed(list(enumerate(zip(self.axes, self.knots)))):
            kn = np.asarray(kn, float)
            x = np.log2(np.maximum(np.asarray(coords[name], float), 1e-30))
            if x.ndim == 0:  # a true scalar (a size-1 axis of a block takes the general path, as dense does)
                x = float(np.clip(x.reshape(()), kn[0], kn[-1]))
                i = int(np.clip(np.searchsorted(kn, x, side="right") - 1, 0, len(kn) - 2))
                f = (x - kn[i]) / (kn[i + 1] - kn[i])
                table = np.take(table, i, axis=ax) * (1.0 - f) + np.take(table, i + 1, axis=ax) * f
            else:
                free.insert(0, (kn, x))
        if not free:
            return np.exp(table) + 0.0 * sum(np.asarray(v, float) for v in coords.values())
        if len(free) == 1:
            kn, x = free[0]
            return np.exp(np.interp(x, kn, table))
        idx, frac = [], []
        for kn, x in free:
            x = np.clip(x, kn[0], kn[-1])
            i = np.clip(np.searchsorted(kn, x, side="right") - 1, 0, len(kn) - 2)
            idx.append(i)
            frac.append((x - kn[i]) / (kn[i + 1] - kn[i]))
        dims = table.shape
        strides = [int(np.prod(dims[d + 1:])) for d in range(len(dims))]
        shape, flat_table = np.broadcast_shapes(*(np.shape(f) for f in frac)), table.ravel()
        # an axis on a knot at every point (a model's GQA group): its other knot weighs 0, not summed
        exact = bool(np.all(np.isfinite(flat_table)))
        out = np.empty(shape)
        for at in blocks(shape):  # a million points in cache-sized blocks: the same numbers, faster
            factors = [_factors(block(f, at, len(shape)), exact) for f in frac]
            log_eff = _corners(flat_table, strides, [block(i, at, len(shape)) for i in idx], factors)
            out[at] = np.exp(log_eff, out=log_eff)
        return out

    def _at_point(self, values: list) -> np.float64:
        """The same multilinear interpolation at one point in plain Python (a scalar call of
        the explorer or an API loop: 16 surfaces a prediction, each a few microseconds
        instead of tens through numpy's 0-d machinery)."""
        flat, strides, finite = self._flat
        base, corners = 0, [(0, 1.0)]
        for value, kn, stride in zip(values, self.knots, strides):
            x = min(max(math.log2(max(value, 1e-30)), kn[0]), kn[-1])
            i = min(max(bisect.bisect_right(kn, x) - 1, 0), len(kn) - 2)
            f = (x - kn[i]) / (kn[i + 1] - kn[i])
            base += i * stride
            if finite and f == 0.0:  # on a knot (a head size, a GQA group): the other corners weigh 0, not summed
                continue  # (w * 1.0 is w; the sum is the same but for the sign of a zero, which exp drops)
            if finite and f == 1.0:
                corners = [(o + stride, w) for o, w in corners]
                continue
            corners = [(o, w * (1.0 - f)) for o, w in corners] + [(o + stride, w * f) for o, w in corners]
        return np.float64(math.exp(sum(flat[base + o] * w for o, w in corners)))

    @functools.cached_property
    def _flat(self):
        """(the log efficiencies as a flat Python list, the row-major strides, whether they are
        all finite), built once."""
        dims = tuple(len(k) for k in self.knots)
        flat = np.asarray(self.log_eff, float).ravel()
        return flat.tolist(), [int(np.prod(dims[d + 1:])) for d in range(len(dims))], bool(np.isfinite(flat).all())

    def to_dict(self) -> dict:
        return {"axes": list(self.axes), "knots": [list(map(float, k)) for k in self.knots],
                "log_eff": np.round(np.asarray(self.log_eff), 4).ravel().tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "EffGrid":
        knots = tuple(tuple(float(x) for x in k) for k in d["knots"])
        values = np.asarray(d["log_eff"], float).reshape(tuple(len(k) for k in knots))
        return cls(axes=tuple(d["axes"]), knots=knots, log_eff=values)


def served_time(table_s, roof_s, saving_s):
    """A table kernel's time in a served iteration: the table's time less the framework's
    CUDA-graph saving (the tables time kernels launched one by one), never below the
    kernel's roofline, even where the table is (a served iteration reads its operands cold
    and each request's own cache, where a table may have timed them from L2 or shared
    pages: TensorRT-LLM's A100 decode attention at 1.7x the HBM bandwidth, MoE tables
    routing fewer experts than uniform routing touches)."""
    return np.maximum(table_s - saving_s, roof_s)


def attribute(time_s, compute_ideal_s, memory_ideal_s):
    """(compute_s, memory_s) of a kernel timed by a fitted surface: its whole time goes to
    the resource its roofline is bound by, the other keeps its ideal time, so the bound a
    workload names is the one its fitted kernels spend their time on."""
    compute_bound = compute_ideal_s >= memory_ideal_s
    return where(compute_bound, time_s, compute_ideal_s), where(compute_bound, memory_ideal_s, time_s)


# ---- the rooflines and coordinates of each kernel class ---------------------------------

def _bound(flops, nbytes, peak, bandwidth):
    return np.maximum(flops / peak, nbytes / bandwidth)


ATTENTION_TILE = 128.0  # query and key rows per flash-attention tile (FA2/FA3, TRT-LLM FMHA)


def attended_pairs(seq_len, context=0.0, window=0.0, causal=True):
    """Query-key pairs per (sequence, head) of `seq_len` new tokens after `context` cached
    ones. A sliding window w > 0 caps each query's keys at w, but the kernel computes whole
    tiles: a tile of ATTENTION_TILE queries reads the keys from w before its first query to
    its last, w + ATTENTION_TILE of them (the masked part of the band costs as much as the
    rest), so the work counted is that of the tiles executed."""
    full = seq_len * (seq_len + 1.0) / 2.0 if causal else seq_len * seq_len
    pairs = full + seq_len * context
    w = np.asarray(window, float)
    banded = seq_len * (w + ATTENTION_TILE)
    if not np.any(w > 0):
        return pairs
    return where((w > 0) & (seq_len + context > w), np.minimum(pairs, banded + 0 * pairs), pairs)


def sm_utilization(work_units, n_sms):
    """Share of the SM-time busy when `work_units` equal units run in waves over n_sms."""
    return work_units / np.maximum(np.ceil(work_units / n_sms) * n_sms, 1e-30)  # no work: 0, not 0/0


def context_attention_roofline(*, batch, seq_len, n_heads, n_kv_heads, head_dim, peak, bandwidth, act_bytes,
                               kv_bytes, n_sms, window=0.0, causal=True, v_head_dim=None, **_):
    """Flash-attention prefill: one thread block per (sequence, head, tile of ATTENTION_TILE
    queries); the blocks run in waves over the SMs, so the math bound is the FLOPs over the
    peak times the waves' utilization."""
    hv = head_dim if v_head_dim is None else v_head_dim
    flops = 2.0 * batch * n_heads * (head_dim + hv) * attended_pairs(seq_len, 0.0, window, causal)
    nbytes = batch * seq_len * (n_heads * (head_dim + hv) * act_bytes + n_kv_heads * (head_dim + hv) * kv_bytes)
    blocks = batch * n_heads * np.ceil(seq_len / ATTENTION_TILE)
    coords = {"work": batch * n_heads, "seq_len": seq_len, "group": n_heads / n_kv_heads, "head_dim": head_dim}
    return _bound(flops / np.maximum(sm_utilization(blocks, n_sms), 1e-30), nbytes, peak, bandwidth), coords


def decode_attention_roofline(*, batch, kv_len, n_heads, n_kv_heads, head_dim, peak, bandwidth, act_bytes,
                              kv_bytes, window=0.0, v_head_dim=None, kv_elements_per_token=None, **_):
    """One query per sequence over `kv_len` cached keys (a window caps the keys read). The
    coordinate is the whole cache, `kv_len`: a paged decode kernel plans its key blocks
    over the whole sequence (TensorRT-LLM's XQA at a 128-token window and batch 1 takes
    9 us at 256 cached tokens, 23 us at 65,536, reading the same keys), so a windowed
    kernel's efficiency is a function of the sequence it serves, not of the window."""
    hv = head_dim if v_head_dim is None else v_head_dim
    w = np.asarray(window, float)
    keys = where(w > 0, np.minimum(kv_len, np.where(w > 0, w, np.inf)), kv_len) if np.any(w > 0) else kv_len
    per_token = n_kv_heads * (head_dim + hv) if kv_elements_per_token is None else kv_elements_per_token
    flops = 2.0 * batch * n_heads * (head_dim + hv) * keys
    nbytes = batch * (keys * per_token * kv_bytes + 2.0 * n_heads * head_dim * act_bytes)
    return _bound(flops, nbytes, peak, bandwidth), decode_attention_coords(batch=batch, kv_len=kv_len, n_heads=n_heads,
                                                                           n_kv_heads=n_kv_heads, head_dim=head_dim)


def decode_attention_coords(*, batch, kv_len, n_heads, n_kv_heads, head_dim, **_) -> dict:
    """decode_attention_roofline's coordinates: (sequence, KV head) slices, the whole cache
    (`kv_len`), the GQA group and the head size."""
    return {"slices": batch * n_kv_heads, "keys": kv_len, "group": n_heads / n_kv_heads, "head_dim": head_dim}


MLA_ROPE_DIM = 64.0  # DeepSeek-V3's decoupled rope dimensions per token (qk_rope_head_dim)


def mla_decode_roofline(*, batch, kv_len, n_heads, latent, rope=MLA_ROPE_DIM, peak, bandwidth, act_bytes, kv_bytes,
                        **_):
    """MLA decode with absorbed weights: each of the GPU's heads scores its query against
    the latent plus rope of every cached token and sums the latents (2 (2 latent + rope)
    FLOPs per head and key); the cache is read once for all heads (latent + rope elements
    per token), the queries and outputs once."""
    flops = 2.0 * batch * n_heads * (2.0 * latent + rope) * kv_len
    nbytes = batch * (kv_len * (latent + rope) * kv_bytes + n_heads * (2.0 * latent + rope) * act_bytes)
    return _bound(flops, nbytes, peak, bandwidth), {"batch": batch, "keys": kv_len, "heads": n_heads}


# MoE weight formats: (weight bytes per element with their scales, activation bytes, math
# units). NVFP4: one FP8 scale per 16 elements; MXFP4: one E8M0 scale per 32; block FP8:
# one FP32 per 128x128 block. W4A16 formats (INT4 weight-only, MXFP4 on Hopper) run 16-bit math.
MOE_FORMATS = {"bf16": (2.0, 2.0, "bf16"), "fp8": (1.0, 1.0, "fp8"), "fp8_block": (1.0 + 4.0 / 128 ** 2, 1.0, "fp8"),
               "fp4": (DTYPE_BYTES["fp4"], DTYPE_BYTES["fp4"], "fp4"), "int4": (0.5 + 2.0 / 128, 2.0, "bf16"),
               "mxfp4_w4a16": (0.5 + 1.0 / 32, 2.0, "bf16"), "mxfp4_w4a8": (0.5 + 1.0 / 32, 1.0 + 1.0 / 32, "fp8")}


def expected_experts_touched(*, n_experts, top_k, tokens):
    """Expected distinct experts that `tokens` tokens route to, each picking top_k of
    n_experts uniformly: E·(1 - (1 - k/E)^T)."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


def moe_roofline(*, tokens, hidden, inter, top_k, n_experts, tp, ep, peak, bandwidth, w_bytes, a_bytes,
                 touched=None, **_):
    """The routed experts of one gated MoE layer on one of its tp x ep GPUs: the GPU holds
    n_experts / ep experts, each split tp-way (width inter / tp); tokens x top_k / ep of
    the (token, expert) pairs reach them (even routing), over the experts they touch. Three
    matrices per expert (gate, up, down); the weights of every touched expert are read once
    (at least one expert and one pair per GPU: the layer waits for its busiest GPU),
    each pair's activations in and out. Coordinates: tokens per touched expert (the GEMMs'
    m), expert width, hidden size, touched experts on the GPU."""
    if touched is None:  # the busiest GPU (the layer waits for it) holds at least one of them
        touched = np.maximum(expected_experts_touched(n_experts=n_experts, top_k=top_k, tokens=tokens) / ep, 1.0)
    pairs = np.maximum(tokens * top_k / ep, touched)
    width = inter / tp
    flops = 2.0 * 3.0 * pairs * hidden * width
    nbytes = touched * 3.0 * hidden * width * w_bytes + pairs * (2.0 * hidden + 2.0 * width) * a_bytes
    coords = {"tokens_per_expert": pairs / np.maximum(touched, 1e-30), "width": width, "hidden": hidden,
              "experts": touched}
    return _bound(flops, nbytes, peak, bandwidth), coords


def collective_roofline(*, size, devices, bandwidth, traffic, **_):
    """Bytes each device sends per direction over the link's rate (no latency term: the
    fitted efficiency absorbs it at small sizes)."""
    return traffic / bandwidth, {"size": size, "devices": devices}


LINEAR_CHUNK = 64.0  # tokens per chunk of the chunked gated delta rule (flash-linear-attention's chunk size)


# Key-width passes of the intra-chunk work per linear kind: the delta rule (Gated DeltaNet,
# Kimi Delta Attention) forms the chunk's key-key products for its WY transform besides the
# query-key scores (2 d_k); Mamba-2's SSD forms only the C-B scores (d_k = its state size N).
KEY_PASSES = {"gdn": 2.0, "kda": 2.0, "mamba2": 1.0}


def gdn_work(*, tokens, sequences, heads, key_dim, value_dim, qkv_width, conv_kernel, state_bytes_per_element=4.0,
             act_bytes=2.0, kind="gdn", **_):
    """(FLOPs, bytes, coordinates) of a linear layer's token mixing (short convolution +
    chunked recurrence: Gated DeltaNet, KDA or Mamba-2, `kind`) on one GPU: `tokens` new
    tokens of `sequences` sequences (decode: one each), `heads` value heads there. Per
    token and head the chunked rule (chunks of c = min(LINEAR_CHUNK, tokens per sequence))
    does 2 (c (p d_k + d_v) + 2 d_k d_v) FLOPs, p = KEY_PASSES[kind]: the intra-chunk scores
    (and the delta rule's WY transform), and reading and updating the state; decode (c = 1)
    reads and rewrites the d_k x d_v state once. Bytes: q, k, v, the gates and the output
    per token, the state read and written once per sequence, the convolution's taps.
    Coordinates: sequences and tokens per sequence (sizes), value heads (a class)."""
    per_seq = np.maximum(tokens / np.maximum(sequences, 1e-30), 1.0)
    c = np.minimum(LINEAR_CHUNK, per_seq)
    flops = 2.0 * tokens * heads * (c * (KEY_PASSES[kind] * key_dim + value_dim) + 2.0 * key_dim * value_dim)
    state = sequences * heads * key_dim * value_dim * state_bytes_per_element
    conv = sequences * qkv_width * np.maximum(conv_kernel - 1.0, 0.0) * act_bytes
    nbytes = tokens * (qkv_width + 2.0 * heads * value_dim + 2.0 * heads) * act_bytes + 2.0 * (state + conv)
    return flops, nbytes, {"sequences": sequences, "per_seq": per_seq, "heads": heads}


def gdn_roofline(*, peak, bandwidth, **shape):
    """The roofline of gdn_work's FLOPs and bytes, and its coordinates."""
    flops, nbytes, coords = gdn_work(**shape)
    return _bound(flops, nbytes, peak, bandwidth), coords


def ep_a2a_roofline(*, tokens, hidden, top_k, ep, elem_bytes, bandwidth, **_):
    """Expert-parallel dispatch (or combine) of `tokens` tokens per rank: each token's hidden
    state goes once to every other rank holding one of its top_k experts (and comes back),
    ep·(1 - (1 - 1/ep)^top_k) ranks expected with experts spread evenly, less its own: the
    least traffic that must cross the scale-up link (DeepEP's normal kernels send one copy
    per rank; a kernel that sends one per expert runs below this roofline). Coordinates:
    tokens per rank and hidden size (sizes), ranks (a class)."""
    ranks = ep * (1.0 - (1.0 - 1.0 / ep) ** top_k)
    nbytes = tokens * hidden * elem_bytes * ranks * (ep - 1.0) / ep
    return nbytes / bandwidth, {"tokens": tokens, "hidden": hidden, "ep": ep}


# DeepSeek Sparse Attention's indexer keys: FP8 with one FP32 scale per 128 elements
# (DeepSeek-V3.2-Exp inference/model.py, Indexer: k_cache float8_e4m3fn, k_scale_cache
# float32 per block_size = 128), whatever the latent cache's dtype.
DSA_INDEX_KEY_BYTES = 1.0 + 4.0 / 128


def causal_topk_pairs(n, k):
    """sum over j = 1..n of min(j, k): the keys the first n queries of a sequence attend
    to when each keeps at most its top k."""
    return where(n <= k, n * (n + 1.0) / 2.0, k * (k + 1.0) / 2.0 + (n - k) * k)


def dsa_module_work(*, batch, new, prefix, heads, hidden, q_rank, kv_rank, rope, nope, v_dim, index_heads,
                    index_dim, topk, w_bytes, kv_bytes, act_bytes=2.0, **_):
    """[(FLOPs, bytes)] of the three parts of a DSA layer's attention block on one GPU, and
    its coordinates: `batch` sequences, each adding `new` tokens after `prefix` cached ones
    (decode: new = 1), `heads` query heads on the GPU.

    - projections (weights read once, at w_bytes): replicated on every GPU the query and KV
      down-projections (hidden x (q_rank + kv_rank + rope)) and the indexer's query
      (q_rank x index_heads x index_dim), key (hidden x index_dim) and head weights
      (hidden x index_heads); per head the query up-projection (q_rank x (nope + rope)), the
      key/value up-projection or its absorbed pair (kv_rank x (nope + v_dim): the same
      FLOPs per token either way) and the output (v_dim x hidden); the hidden state in and
      out per token;
    - the lightning indexer: every (query, visible key) pair scored by index_heads x
      index_dim products; each sequence's index keys read once (FP8 + scale);
    - MLA attention, absorbed (latent + rope per key, the latent summed: 2 (2 kv_rank +
      rope) FLOPs per head and pair) over min(visible keys, topk) keys per query; the latent
      cache read once per sequence (at most the keys the queries select), the queries and
      outputs in the latent width.
    Coordinates: sequences (batch) and new tokens each (their product the tokens: both, as
    the frameworks' prefill costs grow with sequences x cached keys beyond this work, SGLang's
    3.8-fold at 4096 tokens over 65,536 cached keys from 2 to 128 sequences on H200; decode:
    new = 1), keys visible to the last token (new + prefix), heads on the GPU."""
    tokens = batch * new
    keys = new + prefix
    replicated = hidden * (q_rank + kv_rank + rope + index_dim + index_heads) + q_rank * index_heads * index_dim
    weights = replicated + heads * (q_rank * (nope + rope) + kv_rank * (nope + v_dim) + v_dim * hidden)
    proj = (2.0 * tokens * weights, weights * w_bytes + tokens * 2.0 * hidden * act_bytes)
    scored = batch * (new * prefix + new * (new + 1.0) / 2.0)
    indexer = (2.0 * index_heads * index_dim * scored,
               batch * keys * index_dim * DSA_INDEX_KEY_BYTES + tokens * index_heads * index_dim * act_bytes)
    attended = batch * (causal_topk_pairs(keys, topk) - causal_topk_pairs(prefix, topk))
    read = batch * np.minimum(keys, new * topk) * (kv_rank + rope) * kv_bytes
    attention = (2.0 * heads * (2.0 * kv_rank + rope) * attended,
                 read + tokens * heads * (2.0 * kv_rank + rope) * act_bytes)
    coords = {"sequences": batch, "new": new, "keys": keys, "heads": heads}
    return [proj, indexer, attention], {k: v + 0.0 * tokens for k, v in coords.items()}


def dsa_peaks(hw, units: str) -> dict:
    """The peaks a DSA block's parts run at on `hw` (a spec or its numbers): the projections
    at the GEMM format's math units, the indexer's scores in FP8 (16-bit where the chip has
    no FP8 units), the attention in 16-bit."""
    fp8 = hw.peak("fp8")
    return dict(peak=hw.peak(units), index_peak=np.where(np.isfinite(fp8), fp8, hw.peak("bf16")),
                attention_peak=hw.peak("bf16"))


def dsa_module_roofline(*, peak, index_peak, attention_peak, bandwidth, **shape):
    """The block's parts run one after another: the sum of their rooflines, the projections
    at the GEMM format's peak, the indexer's scores at FP8 (`index_peak`), the attention at
    its math's (`attention_peak`)."""
    parts, coords = dsa_module_work(**shape)
    return sum(_bound(f, b, p, bandwidth) for (f, b), p in zip(parts, (peak, index_peak, attention_peak))), coords


from .dsv4_work import dsv4_module_roofline, mhc_roofline  # noqa: E402  (DeepSeek-V4's block and mHC)
from .msa_work import msa_module_roofline  # noqa: E402  (MiniMax-M3's sparse attention block)


@dataclass(frozen=True)
class KernelClass:
    roofline: Callable
    axes: tuple  # coordinate names, in grid order
    knots: Callable  # coordinate -> knots (log2) used by the fit
    sizes: tuple  # the size coordinates (the rest are shape classes: head size, GQA group, GPUs)


def _span(lo, hi, step=1.0):
    return tuple(np.arange(lo, hi + 1e-9, step))


ROOFLINES = {
    "gemm": KernelClass(gemm_roofline, ("m", "n", "k"),
                        {"m": _span(0, 15), "n": _span(5, 16), "k": _span(5, 16)}.get, ("m", "n", "k")),
    "attention": KernelClass(context_attention_roofline, ("work", "seq_len", "group", "head_dim"),
                             {"work": _span(0, 14), "seq_len": _span(0, 17), "group": _span(0, 5),
                              "head_dim": (6.0, 7.0, 7.585, 8.0)}.get, ("work", "seq_len")),
    "decode_attention": KernelClass(decode_attention_roofline, ("slices", "keys", "group", "head_dim"),
                                    {"slices": _span(0, 16), "keys": _span(0, 17), "group": _span(0, 7),
                                     "head_dim": (6.0, 7.0, 7.585, 8.0)}.get, ("slices", "keys")),
    "mla_decode": KernelClass(mla_decode_roofline, ("batch", "keys", "heads"),
                              {"batch": _span(0, 11), "keys": _span(0, 17), "heads": _span(0, 7)}.get,
                              ("batch", "keys")),
    # a DSA layer's whole attention block (decode: one new token per sequence); the knots span
    # the tables' 1-1024 sequences, 1-32,768 new tokens, up to 2^20 keys and 1-128 heads
    "dsa_module": KernelClass(dsa_module_roofline, ("sequences", "new", "keys", "heads"),
                              {"sequences": _span(0, 10), "new": _span(0, 15), "keys": _span(0, 20),
                               "heads": _span(0, 7)}.get, ("sequences", "new", "keys")),
    # a DeepSeek-V4 layer's whole attention block (dsv4_work.py), one surface per phase and
    # compress ratio; the tables span 1-1024 sequences, 1-65,536 new tokens, up to 2^20 keys, 8-128 heads
    "dsv4_module": KernelClass(dsv4_module_roofline, ("sequences", "new", "keys", "heads"),
                               {"sequences": _span(0, 10), "new": _span(0, 16), "keys": _span(0, 21),
                                "heads": _span(0, 7)}.get, ("sequences", "new", "keys")),
    # a MiniMax-M3 layer's sparse attention block (msa_work.py); the tables span 1-1024 sequences,
    # 1-32,768 new tokens, up to 2^20 + 16,384 keys, 1-128 heads. Sequences and new tokens on
    # factor-4 knots: on H200 vLLM as accurate as factor 2 in prefill (held-out median 1.5-1.9%
    # both), 0.4 points worse in decode, and a third of the size (the PCIe cards' files < 1.2 MB)
    "msa_module": KernelClass(msa_module_roofline, ("sequences", "new", "keys", "heads"),
                              {"sequences": _span(0, 10, 2.0), "new": _span(0, 16, 2.0), "keys": _span(0, 21),
                               "heads": _span(0, 7)}.get, ("sequences", "new", "keys")),
    # one layer's hyper-connection pre or post (both sites); the tables span 1-524,288 tokens
    "mhc": KernelClass(mhc_roofline, ("tokens", "hidden"), {"tokens": _span(0, 19), "hidden": _span(11, 14)}.get,
                       ("tokens",)),
    "moe": KernelClass(moe_roofline, ("tokens_per_expert", "width", "hidden", "experts"),
                       {"tokens_per_expert": _span(-1, 14), "width": _span(5, 15), "hidden": _span(9, 14),
                        "experts": _span(0, 9)}.get, ("tokens_per_expert", "width", "hidden", "experts")),
    "ep_a2a": KernelClass(ep_a2a_roofline, ("tokens", "hidden", "ep"),
                          {"tokens": _span(0, 17), "hidden": _span(10, 14), "ep": _span(1, 6)}.get,
                          ("tokens", "hidden")),
    "gdn": KernelClass(gdn_roofline, ("sequences", "per_seq", "heads"),
                       {"sequences": _span(0, 11), "per_seq": _span(0, 16), "heads": _span(0, 7)}.get,
                       ("sequences", "per_seq")),
    "collective": KernelClass(collective_roofline, ("size", "devices"),
                              {"size": _span(8, 34), "devices": _span(1, 7)}.get, ("size",)),
}


@dataclass(frozen=True)
class KernelFits:
    """The fitted surfaces of one GPU under one serving framework: (class, variant) ->
    EffGrid, where the variant is a dtype ('bf16', 'fp8', 'fp8_block', 'fp4'; MoE layers also
    'int4', 'mxfp4_w4a16', 'mxfp4_w4a8': MOE_FORMATS), a KV dtype
    for attention ('bf16/fp8': math/KV), a phase and formats for a DSA block
    ('decode/fp8_block/fp8': phase/GEMM format/KV; an MSA block's alike), a phase, compress
    ratio and formats for a DeepSeek-V4 block ('decode/csa/fp8_block/fp8'), an mHC op ('pre',
    'post'), or a collective op ('nccl/all_reduce', 'trtllm/all_reduce')."""
    hardware: str
    framework: str
    grids: dict  # (class, variant) -> EffGrid
    source: str = ""
    scores: dict = field(default_factory=dict)  # (class, variant) -> held-out error summary

    def grid(self, kernel_class: str, variant: str):
        return self.grids.get((kernel_class, variant))
