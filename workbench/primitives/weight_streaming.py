"""Weight streaming (Cerebras MemoryX + SwarmX): the wafer holds activations, and each
layer's weights stream in from the external store as the layer runs; in training the
gradients stream back the same way. Pure array functions of bytes and rates.

A layer's time is bound below by both its compute on the whole wafer and the transfer of
its weights (and gradients) over the system I/O; streaming the next layer while the
current one computes overlaps the two, so the estimate is the max and the upper bound
the sum. The optimizer runs in MemoryX as the gradients arrive (memoryx_update).
"""
from __future__ import annotations

import numpy as np


def stream_time(*, nbytes, io_bytes_per_s, latency_s=0.0):
    """Seconds to move `nbytes` over the system I/O."""
    return latency_s + nbytes / io_bytes_per_s


def streamed_layer(*, compute_s, weight_bytes, io_bytes_per_s, gradient_bytes=0.0, latency_s=0.0) -> dict:
    """One layer with its weights streamed in (and gradients out, when training): the
    I/O carries weights in and gradients out in opposite directions (full duplex), so
    the transfer is the larger of the two."""
    w_in = stream_time(nbytes=weight_bytes, io_bytes_per_s=io_bytes_per_s, latency_s=latency_s)
    g_out = stream_time(nbytes=gradient_bytes, io_bytes_per_s=io_bytes_per_s, latency_s=latency_s) \
        * (np.asarray(gradient_bytes) > 0)
    io_s = np.maximum(w_in, g_out)
    return {"time_s": np.maximum(compute_s, io_s), "time_upper_s": compute_s + io_s,
            "io_s": io_s, "compute_s": compute_s + 0.0 * io_s, "io_bound": io_s > compute_s}


def memoryx_update(*, params, bytes_per_param, bytes_per_s, overlap_s) -> dict:
    """The optimizer step in MemoryX: every parameter's update (read the weight, its gradient
    and optimizer state, write them back: `bytes_per_param`) at MemoryX's rate. It starts on
    each layer's gradients as they arrive, so it runs under the rest of the backward pass
    (`overlap_s`); only what outlasts it is exposed."""
    update = params * bytes_per_param / bytes_per_s
    return {"update_s": update, "exposed_s": np.maximum(update - overlap_s, 0.0)}
