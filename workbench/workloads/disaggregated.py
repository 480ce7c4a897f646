"""Prefill/decode disaggregation: prefill instances and decode instances in separate pools
(same or different hardware), the KV cache sent from one to the other.

- A prefill instance serves prompts one at a time (an M/M/1 server of service c); it can
  take rate lam_p = rho_max / c, where rho_max keeps the TTFT quantile, KV transfer
  included, within the target: c·ln(1/(1-p))/(1-rho) + kv <= ttft_slo.
- A decode instance runs the largest batch B whose step d(B) meets the TPOT target and
  fits in memory; it retires lam_d = B / (G · d(B)) requests per second.
- The pools balance when n_p·lam_p = n_d·lam_d; goodput per device is
  G·min(n_p·lam_p, n_d·lam_d) / (n_p·dev_p + n_d·dev_d).
"""
from __future__ import annotations

import numpy as np


def prefill_capacity(*, prefill_s, kv_transfer_s, ttft_slo_s, quantile=0.9):
    """Requests/s one prefill instance sustains within the TTFT target (0 if none)."""
    budget = ttft_slo_s - kv_transfer_s
    rho_max = 1.0 - prefill_s * np.log(1.0 / (1.0 - quantile)) / np.maximum(budget, 1e-12)
    return np.where(budget > 0, np.clip(rho_max, 0.0, 1.0) / prefill_s, 0.0)


def decode_capacity(*, batches, step_s, max_batch, tpot_slo_s, output_len):
    """Requests/s one decode instance retires: the largest batch (from `batches`, with
    step times `step_s`) meeting the TPOT target and fitting in memory."""
    ok = (step_s <= tpot_slo_s) & (batches <= max_batch)
    rate = np.where(ok, batches / (output_len * step_s), 0.0)
    return rate.max(axis=-1), np.where(ok, batches, 0.0).max(axis=-1)


def balance(*, prefill_rate, decode_rate, prefill_devices, decode_devices, output_len):
    """Prefill instances per decode instance that balance the pools, and the goodput per
    device (output tokens/s) at that ratio, with fractional instance counts."""
    ratio = decode_rate / np.maximum(prefill_rate, 1e-30)
    goodput = output_len * decode_rate / (ratio * prefill_devices + decode_devices)
    return ratio, np.where(prefill_rate > 0, goodput, 0.0)


def best_split(*, total_devices, prefill_rate, decode_rate, prefill_devices, decode_devices, output_len):
    """Integer instance counts within a device budget that maximize goodput per device
    (brute force over every split; vectorized)."""
    n_p = np.arange(1, total_devices // prefill_devices + 1)[:, None]
    n_d = np.arange(1, total_devices // decode_devices + 1)[None, :]
    used = n_p * prefill_devices + n_d * decode_devices
    good = output_len * np.minimum(n_p * prefill_rate, n_d * decode_rate) / used
    good = np.where(used <= total_devices, good, -1.0)
    i, j = np.unravel_index(np.argmax(good), good.shape)
    return int(n_p[i, 0]), int(n_d[0, j]), float(good[i, j])
