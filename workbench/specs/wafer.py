"""Wafer-scale engine specs: the chip as a 2D mesh of processing elements (PEs), and the
CS system that houses one wafer. SI units, except per-PE rates, which are per clock
cycle (the clock is a parameter: sources disagree, 0.85 to 1.1 GHz).

PLMR (WaferLLM, OSDI'25): Parallelism (the PE mesh), non-uniform Latency (one cycle per
hop, a software cost per routing stage), small local Memory (48 kB per PE), limited
Routing (24 colors). The fields below are those terms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..units import DTYPES
from ._base import SpecError, build, require


@dataclass(frozen=True, kw_only=True)
class WaferSpec:
    name: str
    vendor: str
    source: str
    kind: str = "wafer"
    system: str = ""  # the CS system that houses it (a bare wafer given as hardware runs in that system)
    n_pes: int  # marketed core count
    fabric_cols: int  # fabric as the SDK addresses it
    fabric_rows: int
    program_cols: int  # rectangle a program may use on real hardware
    program_rows: int
    sram_per_pe_bytes: float
    sram_banks: int
    sram_reserved_per_pe_bytes: float  # code, runtime and kernel buffers (not weights/KV)
    simd_fmas_per_cycle: dict  # dtype -> FMAs per cycle per PE (vector width)
    mem_read_bytes_per_cycle: float  # per PE
    mem_write_bytes_per_cycle: float  # per PE
    link_bytes_per_cycle: float  # per link, per direction
    hop_cycles: float  # router-to-router latency per hop (alpha)
    stage_cycles: float  # software cost per routing stage: receive, add, re-send (beta)
    map_call_cycles: float  # per-element cost of a @map-driven vector op (MeshGEMM inner loop)
    routing_colors: int
    clock_hz: float  # default clock
    clock_min_hz: float
    clock_max_hz: float
    pe_power_w: float
    vendor_peak_flops_per_s: float  # as marketed; precision/sparsity unclear, NOT a dense peak
    price_usd_per_hour: float = 0.0  # on-demand USD per hour (market data; 0: not known)
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        require(self, ("name", "vendor"), "text")
        require(self, ("n_pes", "fabric_cols", "fabric_rows", "program_cols", "program_rows", "sram_banks",
                       "routing_colors"), "positive_int")
        require(self, ("sram_per_pe_bytes", "mem_read_bytes_per_cycle", "mem_write_bytes_per_cycle",
                       "link_bytes_per_cycle", "hop_cycles", "clock_hz", "pe_power_w"), "positive")
        require(self, ("stage_cycles", "map_call_cycles", "sram_reserved_per_pe_bytes"), "nonnegative")
        require(self, ("clock_min_hz", "clock_max_hz", "vendor_peak_flops_per_s"), "positive")
        require(self, ("price_usd_per_hour",), "nonnegative")
        if not isinstance(self.simd_fmas_per_cycle, dict):
            raise SpecError(self.name, "simd_fmas_per_cycle", self.simd_fmas_per_cycle, "a mapping of dtype -> FMAs")
        if not self.clock_min_hz <= self.clock_hz <= self.clock_max_hz:
            raise SpecError(self.name, "clock_hz", self.clock_hz,
                            f"within [clock_min_hz, clock_max_hz] = [{self.clock_min_hz}, {self.clock_max_hz}]")
        for side in ("cols", "rows"):  # the program rectangle lies on the fabric
            if getattr(self, f"program_{side}") > getattr(self, f"fabric_{side}"):
                raise SpecError(self.name, f"program_{side}", getattr(self, f"program_{side}"),
                                f"<= fabric_{side} = {getattr(self, f'fabric_{side}')}")
        if self.sram_reserved_per_pe_bytes >= self.sram_per_pe_bytes:
            raise SpecError(self.name, "sram_reserved_per_pe_bytes", self.sram_reserved_per_pe_bytes,
                            f"< sram_per_pe_bytes = {self.sram_per_pe_bytes}")
        for dt, v in self.simd_fmas_per_cycle.items():
            if dt not in DTYPES or isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise SpecError(self.name, f"simd_fmas_per_cycle.{dt}", v, f"a dtype in {DTYPES} with a rate > 0")

    @property
    def program_pes(self) -> int:
        return self.program_cols * self.program_rows

    @property
    def max_square_grid(self) -> int:
        return min(self.program_cols, self.program_rows)

    def fmas_per_cycle(self, dtype: str) -> float:
        """FMAs per cycle per PE for math in `dtype`; NaN where the PE has no such unit.
        bf16 runs on the fp16 datapath (Cerebras' cbfloat16 training format)."""
        key = "fp16" if dtype == "bf16" else dtype
        return float(self.simd_fmas_per_cycle.get(key, float("nan")))

    def peak(self, dtype: str, clock_hz: float | None = None) -> float:
        """Dense peak FLOP/s of the program rectangle, derived from the per-PE SIMD rate."""
        return 2.0 * self.fmas_per_cycle(dtype) * self.program_pes * (clock_hz or self.clock_hz)


@dataclass(frozen=True, kw_only=True)
class SystemSpec:
    """A Cerebras system: one wafer, its I/O, power and external weight store."""
    name: str
    vendor: str
    source: str
    kind: str = "system"
    wafer: str  # WaferSpec name
    io_bytes_per_s: float  # wafer <-> outside (MemoryX, SwarmX, other systems, host)
    io_latency_s: float  # one crossing of the system boundary
    power_w: float
    memoryx_capacity_bytes: tuple  # capacity options of the external weight store
    weight_store_bandwidth_bytes_per_s: float  # MemoryX -> wafer while weights stream; also MemoryX's update rate
    # Weight-streaming training: the time per step that does not scale with the batch (the
    # weight update at the step boundary, which MemoryX cannot overlap, and the appliance's
    # step synchronization); 0: not known.
    step_fixed_s: float = 0.0
    # Weight-streaming training: the latency each time a layer's weights stream in (forward,
    # and again for the backward, per micro-batch) that the streaming of the layer before
    # does not hide; 0: not known.
    layer_stream_latency_s: float = 0.0
    # A vendor inference service on these systems: the time a client's request spends beyond
    # the wafers' work (network, API, tokenization, scheduling), added to TTFT as the
    # client sees it (`ttft_client_s`); 0: no service measured.
    service_request_latency_s: float = 0.0
    price_usd_per_hour: float = 0.0  # on-demand USD per system-hour (market data; 0: not known)
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        require(self, ("name", "vendor", "wafer"), "text")
        require(self, ("io_bytes_per_s", "io_latency_s", "power_w", "weight_store_bandwidth_bytes_per_s"), "positive")
        require(self, ("price_usd_per_hour", "step_fixed_s", "layer_stream_latency_s", "service_request_latency_s"),
                "nonnegative")


def wafer_from_dict(data: dict, origin: str):
    data = dict(data)
    if data.get("kind") == "system":
        data["memoryx_capacity_bytes"] = tuple(data.get("memoryx_capacity_bytes", ()))
        return build(SystemSpec, data, origin=origin)
    return build(WaferSpec, data, origin=origin)
