"""Collectives with an alpha-beta model over the scale-up domain and the scale-out network.

time = steps · alpha + traffic / (link bandwidth · busbw_eff(size)), where traffic is the
bytes each device sends per direction. A ring-type collective (all-reduce, all-gather,
reduce-scatter) larger than the scale-up domain runs as NCCL's rail rings (rail_ring): of
what each device sends, 1/domain leaves on its NIC and the rest stays on the scale-up
links, both at once, so the slower share sets the time. All-to-all: inside the domain,
then the share that leaves it over the NICs.
Bus bandwidth follows the nccl-tests convention (PERFORMANCE.md): algbw = size / time,
busbw = algbw · factor with factor 2(p-1)/p (all-reduce), (p-1)/p (all-gather,
reduce-scatter, all-to-all), 1 (send/recv).

A new algorithm registers itself in COLLECTIVES with its traffic, step count and busbw
factor; nothing else changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .hardware_numbers import GpuNumbers, LinkNumbers
from ._array import where

# The collective libraries whose measured tables stand beside the frameworks' own kernels:
# NCCL on NVIDIA GPUs, oneCCL on Intel's (aiconfigurator-core comm/nccl, comm/oneccl).
COLLECTIVE_LIBRARIES = ("nccl", "oneccl")


@dataclass(frozen=True)
class Collective:
    traffic: Callable  # (size, p, in_network) -> bytes sent per device per direction
    steps: Callable  # (p, in_network) -> latency steps
    busbw_factor: Callable  # p -> nccl-tests bus bandwidth factor
    hierarchical: Callable  # (hw, size, p) -> time_s for p beyond the scale-up domain


COLLECTIVES: dict[str, Collective] = {}


def register(name: str, collective: Collective) -> None:
    COLLECTIVES[name] = collective


def _ring_steps(p):
    return p - 1.0


def link_time(*, link: LinkNumbers, op: str, size, p):
    """Seconds for `op` on `size` bytes among `p` devices over one link class."""
    c = COLLECTIVES[op]
    traffic = c.traffic(size, p, link.in_network_reduction)
    bw = link.unidir_bytes_per_s * link.busbw_eff(size)
    return c.steps(p, link.in_network_reduction) * link.latency_s + traffic / bw


def fitted_link_time(*, hw: GpuNumbers, op: str, size, p):
    """Seconds for `op` inside the scale-up domain from the measured tables (NCCL's, and
    the framework's own all-reduce where it has one: the frameworks pick the faster per
    size), or None without tables for `op`. A hypothetical link keeps the tables'
    efficiency at each size while its roofline moves: the bandwidth divides the traffic, and
    a latency other than the spec's (the scale_up_latency_s knob) adds its change per
    latency step (a ring's, never below none)."""
    up = hw.link("scale_up")
    c = COLLECTIVES[op]
    spec_latency = up.latency_s if up.table_latency_s is None else up.table_latency_s
    moved_s = c.steps(p, False) * (up.latency_s - spec_latency) * (p > 1)
    best = None
    for owner in (*COLLECTIVE_LIBRARIES, getattr(hw.kernels, "framework", "")):
        grid, fixed_s = hw.fitted("collective", f"{owner}/{op}")
        if grid is None:
            continue

        def time_s(s):  # seconds of a message of s bytes on this surface
            return np.maximum(fixed_s + moved_s, 0.0) + c.traffic(s, p, False) / up.unidir_bytes_per_s / grid(
                size=s, devices=p)
        # below the smallest size the surface knows, a message takes what that one takes (latency-bound:
        # 1 B and 64 B all-reduces on 8 H100 took 0.03 and 1.95 us, linear in the bytes)
        smallest_bytes = 2.0 ** grid.knots[grid.axes.index("size")][0]
        t = time_s(np.maximum(size, smallest_bytes))
        best = t if best is None else np.minimum(best, t)
    return best


def ep_all_to_all(*, hw: GpuNumbers, tokens, hidden, top_k, ep, elem_bytes=2.0):
    """Seconds of an MoE layer's expert-parallel dispatch plus combine of `tokens` tokens per
    rank from the framework's measured EP kernels (DeepEP and TensorRT-LLM's all-to-all;
    kernel_fits.ep_a2a_roofline, a CUDA-graph replay saving as every table kernel), within
    the scale-up domain; None where the numbers carry no such tables (the caller falls back
    to two all-to-all collectives). Dispatch in FP8 where the tables time it and the
    activations are 8-bit, else 16-bit; the combine 16-bit."""
    from .kernel_fits import ep_a2a_roofline, served_time
    fp8 = elem_bytes <= 1.0 and hw.fitted("ep_a2a", "dispatch/fp8")[0] is not None
    total = 0.0
    for variant in ("dispatch/fp8" if fp8 else "dispatch/bf16", "combine/bf16"):
        grid, fixed_s = hw.fitted("ep_a2a", variant)
        if grid is None:
            return None
        roof, coords = ep_a2a_roofline(tokens=tokens, hidden=hidden, top_k=top_k, ep=ep,
                                       elem_bytes=EP_ELEMENT_BYTES[variant.split("/")[1]],
                                       bandwidth=hw.link("scale_up").unidir_bytes_per_s)
        total = total + served_time(fixed_s + roof / grid(**coords), roof, hw.graph_saving_s)
    return where(ep <= 1, 0.0, total)


EP_ELEMENT_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4.0 / 128}  # FP8 dispatch carries one FP32 scale per 128 values


def collective(*, hw: GpuNumbers, op: str, size, devices) -> dict:
    """Cost of collective `op` of `size` bytes (the per-device buffer nccl-tests calls
    size) among `devices` devices. Returns time_s, the bus bandwidth, and the algbw.
    Inside the scale-up domain the measured tables set the time where the numbers carry
    them (fitted_link_time; beyond their largest GPU count, at that count's efficiency)."""
    from ..errors import check_choice
    check_choice("op", op, COLLECTIVES)
    c = COLLECTIVES[op]
    up = hw.link("scale_up")
    p = devices * 1.0
    if np.ndim(p) == 0 and np.ndim(size) == 0 and float(p) <= 1.0:  # one device of a scalar call: nothing moves
        zero = 0.0 * np.asarray(size, float)
        return {"time_s": zero, "bus_bandwidth_bytes_per_s": zero, "algorithm_bandwidth_bytes_per_s": zero}
    flat = fitted_link_time(hw=hw, op=op, size=size, p=p)
    if flat is None:
        flat = link_time(link=up, op=op, size=size, p=p)
    domain = up.domain_size * 1.0
    hier = c.hierarchical(hw, size, np.maximum(p, domain))
    if np.any(p > domain):  # beyond the domain: at least the op over one whole domain (its phase on the same buffer)
        whole = fitted_link_time(hw=hw, op=op, size=size, p=domain + 0.0 * p)
        whole = link_time(link=up, op=op, size=size, p=domain + 0.0 * p) if whole is None else whole
        hier = np.maximum(hier, whole)
    t = where(p <= 1, 0.0, where(p <= domain, flat, hier))
    algbw = size / where(p <= 1, np.inf, t)  # one device: no transfer, bandwidth undefined (0)
    return {"time_s": t, "bus_bandwidth_bytes_per_s": algbw * c.busbw_factor(p),
            "algorithm_bandwidth_bytes_per_s": algbw}


def rail_ring(hw: GpuNumbers, op: str, size, p, local):
    """A ring-type `op` (all-reduce, all-gather, reduce-scatter) over p devices, `local` of
    them in each scale-up domain, each device with its own NIC (rail-optimized). NCCL runs
    one ring per rail: each device is the domain's exit on one of `local` rings, so 1/local
    of the traffic it sends leaves on its NIC and the rest on the scale-up links; both
    flow at once (chunks are pipelined), so the slower share sets the bandwidth term.
    Latency: the intra-domain steps on the scale-up links plus the steps across domains
    on the NICs (the hierarchical step count)."""
    up, out = hw.link("scale_up"), hw.link("scale_out")
    c = COLLECTIVES[op]
    across = p / local
    traffic = c.traffic(size, p, False)
    t_up = traffic * (local - 1.0) / local / (up.unidir_bytes_per_s * up.busbw_eff(size))
    t_out = traffic / local / (out.unidir_bytes_per_s * out.busbw_eff(size))
    latency = c.steps(local, False) * up.latency_s * (local > 1) + c.steps(across, False) * out.latency_s
    return latency + np.maximum(t_up, t_out)


def _hier_ring(op):
    def f(hw, size, p):
        return rail_ring(hw, op, size, p, hw.link("scale_up").domain_size * 1.0)
    return f


def _hier_all_to_all(hw, size, p):
    up, out = hw.link("scale_up"), hw.link("scale_out")
    d = up.domain_size * 1.0
    # The fraction (p-d)/p of the data leaves the domain through the NICs.
    inside = link_time(link=up, op="all_to_all", size=size * d / p, p=d)
    across = (p - d) / p * size / (out.unidir_bytes_per_s * out.busbw_eff(size)) + (p / d - 1) * out.latency_s
    return inside + across


def _hier_send_recv(hw, size, p):
    return link_time(link=hw.link("scale_out"), op="send_recv", size=size, p=2.0)


register("all_reduce", Collective(
    # Ring: reduce-scatter then all-gather, 2(p-1)/p·S per direction. In-network (NVLS,
    # SHARP): each device sends S into the switch and receives S back; the latency term
    # counts a tree's 2·log2(p) steps.
    traffic=lambda s, p, inn: s * 1.0 if inn else 2.0 * (p - 1.0) / p * s,
    steps=lambda p, inn: 2.0 * np.log2(np.maximum(p, 2.0)) if inn else 2.0 * (p - 1.0),
    busbw_factor=lambda p: 2.0 * (p - 1.0) / p,
    hierarchical=_hier_ring("all_reduce")))
register("all_gather", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_ring("all_gather")))
register("reduce_scatter", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_ring("reduce_scatter")))
register("all_to_all", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_all_to_all))
register("send_recv", Collective(
    traffic=lambda s, p, inn: s * 1.0, steps=lambda p, inn: 1.0 + 0.0 * p,
    busbw_factor=lambda p: 1.0 + 0.0 * p, hierarchical=_hier_send_recv))


def strided_collective(*, hw: GpuNumbers, op: str, size, group, stride) -> dict:
    """`op` among `group` devices placed `stride` apart (a DP group across TP x PP ranks):
    only domain/stride of them share a scale-up domain. All in one domain: NVLink; one per
    domain: a flat ring over the NICs (rail-optimized, each GPU its own NIC); in between:
    rail rings with `local` members per domain (rail_ring)."""
    up, out = hw.link("scale_up"), hw.link("scale_out")
    local = np.clip(np.floor(up.domain_size / np.maximum(stride, 1.0)), 1.0, np.maximum(group, 1.0))
    across = np.maximum(group / local, 1.0)
    inside = link_time(link=up, op=op, size=size, p=local)
    flat_out = link_time(link=out, op=op, size=size, p=group)
    hier = rail_ring(hw, op, size, group, local) if op in ("all_reduce", "all_gather", "reduce_scatter") \
        else link_time(link=out, op=op, size=size, p=across)
    t = where(group <= 1, 0.0, where(local >= group, inside, where(local <= 1, flat_out, hier)))
    return {"time_s": t}
