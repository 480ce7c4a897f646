"""Collectives with an alpha-beta model over the scale-up domain and the scale-out network.

time = steps · alpha + traffic / (link bandwidth · busbw_eff(size)), where traffic is the
bytes each device sends per direction. A group larger than the scale-up domain is
hierarchical: reduce-scatter inside each domain, the operation across domains on the
NICs (each device carries 1/domain of the data), all-gather inside the domain.
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

from ..specs import HardwareSpec, Link
from ._array import where


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


def link_time(*, link: Link, op: str, size, p):
    """Seconds for `op` on `size` bytes among `p` devices over one link class."""
    c = COLLECTIVES[op]
    traffic = c.traffic(size, p, link.in_network_reduction)
    bw = link.unidir_bytes_per_s * link.busbw_eff(size)
    return c.steps(p, link.in_network_reduction) * link.latency_s + traffic / bw


def collective(*, hw: HardwareSpec, op: str, size, devices) -> dict:
    """Cost of collective `op` of `size` bytes (the per-device buffer nccl-tests calls
    size) among `devices` devices. Returns time_s, the bus bandwidth, and the algbw."""
    from ..errors import check_choice
    check_choice("op", op, COLLECTIVES)
    c = COLLECTIVES[op]
    up = hw.link("scale_up")
    p = devices * 1.0
    flat = link_time(link=up, op=op, size=size, p=p)
    domain = float(up.domain_size)
    hier = c.hierarchical(hw, size, np.maximum(p, domain))
    t = where(p <= 1, 0.0, where(p <= domain, flat, hier))
    algbw = size / where(p <= 1, np.inf, t)  # one device: no transfer, bandwidth undefined (0)
    return {"time_s": t, "bus_bandwidth_bytes_per_s": algbw * c.busbw_factor(p),
            "algorithm_bandwidth_bytes_per_s": algbw}


def _hier_all_reduce(hw, size, p):
    up, out = hw.link("scale_up"), hw.link("scale_out")
    d = float(up.domain_size)
    rs = link_time(link=up, op="reduce_scatter", size=size, p=d)
    ar = link_time(link=out, op="all_reduce", size=size / d, p=p / d)
    ag = link_time(link=up, op="all_gather", size=size, p=d)
    return rs + ar + ag


def _hier_gather_like(op):
    def f(hw, size, p):
        up, out = hw.link("scale_up"), hw.link("scale_out")
        d = float(up.domain_size)
        # Across domains first among same-rank devices, each on its NIC with 1/d of the buffer
        # (every byte enters a domain once, as NCCL's rings route it), then inside the domain.
        return link_time(link=out, op=op, size=size / d, p=p / d) + link_time(link=up, op=op, size=size, p=d)
    return f


def _hier_all_to_all(hw, size, p):
    up, out = hw.link("scale_up"), hw.link("scale_out")
    d = float(up.domain_size)
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
    hierarchical=_hier_all_reduce))
register("all_gather", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_gather_like("all_gather")))
register("reduce_scatter", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_gather_like("reduce_scatter")))
register("all_to_all", Collective(
    traffic=lambda s, p, inn: (p - 1.0) / p * s, steps=lambda p, inn: _ring_steps(p),
    busbw_factor=lambda p: (p - 1.0) / p, hierarchical=_hier_all_to_all))
register("send_recv", Collective(
    traffic=lambda s, p, inn: s * 1.0, steps=lambda p, inn: 1.0 + 0.0 * p,
    busbw_factor=lambda p: 1.0 + 0.0 * p, hierarchical=_hier_send_recv))


def strided_collective(*, hw: HardwareSpec, op: str, size, group, stride) -> dict:
    """`op` among `group` devices placed `stride` apart (a DP group across TP x PP ranks):
    only domain/stride of them share a scale-up domain. All in one domain: NVLink; one per
    domain: a flat ring over the NICs (rail-optimized, each GPU its own NIC); in between:
    reduce-scatter inside the domain, the op across domains on 1/local of the data, then
    all-gather (for all-reduce; gather-like ops move size/local per device across, then
    gather inside the domain)."""
    up, out = hw.link("scale_up"), hw.link("scale_out")
    local = np.clip(np.floor(up.domain_size / np.maximum(stride, 1.0)), 1.0, np.maximum(group, 1.0))
    across = np.maximum(group / local, 1.0)
    inside = link_time(link=up, op=op, size=size, p=local)
    flat_out = link_time(link=out, op=op, size=size, p=group)
    if op == "all_reduce":
        hier = (link_time(link=up, op="reduce_scatter", size=size, p=local)
                + link_time(link=out, op="all_reduce", size=size / local, p=across)
                + link_time(link=up, op="all_gather", size=size, p=local))
    else:
        hier = link_time(link=out, op=op, size=size / local, p=across) + link_time(link=up, op=op, size=size, p=local)
    t = where(group <= 1, 0.0, where(local >= group, inside, where(local <= 1, flat_out, hier)))
    return {"time_s": t}
