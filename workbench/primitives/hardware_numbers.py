"""The numbers of a piece of hardware as the primitives read them: flat records of SI
values (or arrays of them, one value per sweep point), built by a backend from a spec and
the user's knob overrides (backends/). Nothing here knows about spec files: a record holds
numbers and the efficiency curves that are data, never a source, a name lookup or a file.

Every field whose name is a knob (backends list them: `workbench list knobs HARDWARE`)
may be a scalar or an array; the primitives broadcast it like any other size argument.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..units import MATH_UNITS
from ._array import elementwise


@dataclass(frozen=True)
class EffCurve:
    """Achieved fraction of a peak against a size (FLOPs or bytes): linear in log(eff)
    against log10(size) between the measured knots, held constant beyond the ends.
    Every segment's slope stays below 1 when the table rises less steeply than size, so
    time = size / (peak · eff) never falls as size grows."""
    size: tuple
    eff: tuple

    def __call__(self, size):
        xp, fp = self._logs
        return elementwise(lambda s: np.exp(np.interp(np.log10(np.maximum(s, 1.0)), xp, fp)), size)

    @functools.cached_property
    def _logs(self):
        """(log10 sizes, log efficiencies) of the knots, computed once."""
        return np.log10(np.asarray(self.size, float)), np.log(np.asarray(self.eff, float))


@dataclass(frozen=True)
class LinkNumbers:
    """One link class of a device, per device and per direction."""
    unidir_bytes_per_s: object
    latency_s: object  # per message step (alpha)
    domain_size: object  # devices reachable over this link class
    busbw_eff: EffCurve  # message size -> achieved fraction of the line rate
    in_network_reduction: bool = False  # NVLS / SHARP: the switch reduces all-reduce data
    # the spec's latency, under which its measured collective tables were timed: a knob's
    # change from it adds per step to a fitted collective (collectives.fitted_link_time)
    table_latency_s: object = None


@dataclass(frozen=True)
class GpuNumbers:
    """A GPU: tensor-core peaks per dtype, main memory, the SM grid the GEMM tiles are
    scheduled on, the two link classes, and the efficiency data of its kernels."""
    label: str  # for messages only
    peak_flops_per_s: dict  # dtype -> dense FLOP/s (scalar or array)
    gemm_peak_eff: dict  # dtype -> best fraction of peak for large GEMMs
    attention_peak_eff: dict  # dtype -> flash-attention kernel's best fraction of peak
    gemm_eff: EffCurve  # executed GEMM FLOPs -> fraction of that best
    memory_eff: EffCurve  # bytes moved -> fraction of peak memory bandwidth
    hbm_bandwidth_bytes_per_s: object
    hbm_capacity_bytes: object
    memory_latency_s: object
    kernel_launch_s: object
    n_sms: object
    collective_sms: object
    gemm_tile_m: object
    gemm_tile_n: object
    scale_up: LinkNumbers
    scale_out: LinkNumbers
    tdp_w: object
    kernels: object = None  # KernelFits of the serving framework's measured tables, or None
    # The serving framework whose engine the numbers run ("none": none), with its tables in
    # `kernels` where the chip has them, else over the analytical efficiencies above
    framework: str = "none"
    # Seconds of each table kernel's time that its framework's CUDA-graph replay removes (the
    # tables time kernels launched one by one from PyTorch): a fitted kernel runs in
    # max(table time - this, its roofline time). Set for a serving engine's iterations
    # (predict.serving at a fixed concurrency); 0 for a kernel asked for alone.
    graph_saving_s: object = 0.0
    # MoE layers and expert-parallel dispatch from the framework's measured MoE-layer and EP
    # kernels (primitives/moe.py) instead of grouped GEMMs on the GEMM tables:
    # predict.serving(moe_mla_kernels="measured"); MLA decode reads its measured tables either way
    measured_moe_mla: bool = False
    # The same for the MoE layers of an iteration that prefills only (inference.eager): the
    # framework's rule (specs/serving/frameworks.yaml prefill_moe_kernels), unless
    # predict.serving's moe_mla_kernels names one path for every iteration
    measured_moe_prefill: bool = False
    # A served model quantizes a scaled-format GEMM's input in the kernel that produces it
    # (RMSNorm + quantize, SwiGLU + quantize), where the kernel tables time the Linear on a
    # 16-bit input, quantization kernel included: a served FP8 / block-FP8 / NVFP4 GEMM then
    # takes its surface with the fixed latency of the framework's BF16 GEMM table
    # (primitives/gemm.fitted_gemm; specs/serving/frameworks.yaml fused_activation_quant)
    fused_input_quant: bool = False
    # A serving engine's host time per iteration (scheduling, sampling, Python between graph
    # replays), when given as a knob; None: the serving framework's fitted constant
    # (specs/serving/frameworks.yaml iteration_overhead_s)
    framework_overhead_s: object = None
    # dtype -> the datasheet's 2:4-sparse over dense tensor-core peak (HardwareSpec
    # sparse_2_4_speedup); a dtype without one has no sparse tensor cores
    sparse_speedup: dict = field(default_factory=dict)
    # the weights of this deployment are 2:4 sparse (units.SPARSE_2_4): the layers' weight
    # GEMMs run on the sparse tensor cores (primitives/gemm.py)
    sparse_weights: bool = False
    compute_capability: float = 0.0  # CUDA compute capability (HardwareSpec); 0: not a CUDA device

    def sparse_speedup_for(self, dtype: str):
        """The datasheet's sparse over dense peak for `dtype`'s math; NaN without sparse units."""
        return self.sparse_speedup.get(MATH_UNITS.get(dtype, dtype), np.nan)

    def peak(self, dtype: str):
        """Dense peak FLOP/s for math in `dtype` (a format runs on its units.MATH_UNITS);
        NaN where the chip has no such unit."""
        return self.peak_flops_per_s.get(MATH_UNITS.get(dtype, dtype), np.nan)

    def gemm_peak_eff_for(self, dtype: str):
        """Large-GEMM efficiency for `dtype`; dtypes without a measurement use bf16's."""
        return self.gemm_peak_eff.get(MATH_UNITS.get(dtype, dtype), self.gemm_peak_eff["bf16"])

    def attention_peak_eff_for(self, dtype: str):
        """Flash-attention efficiency for `dtype`; dtypes without a figure use bf16's."""
        return self.attention_peak_eff.get(MATH_UNITS.get(dtype, dtype), self.attention_peak_eff["bf16"])

    def fitted(self, kernel_class: str, variant: str):
        """The fitted efficiency surface (EffGrid) and fixed latency of a kernel class, or
        (None, 0) where the numbers carry no tables or the tables lack the variant."""
        if self.kernels is None:
            return None, 0.0
        grid = self.kernels.grid(kernel_class, variant)
        return (grid, self.kernels.scores[(kernel_class, variant)].get("fixed_s", 0.0)) if grid else (None, 0.0)

    def fitted_param(self, kernel_class: str, variant: str, name: str, default: float = 0.0) -> float:
        """A fitted kernel property stored with a surface (a GEMM's row tile, 'tile_m'), or
        `default` where the numbers carry no such surface or property."""
        if self.kernels is None or self.kernels.grid(kernel_class, variant) is None:
            return default
        return float(self.kernels.scores[(kernel_class, variant)].get(name, default))

    def link(self, scope: str) -> LinkNumbers:
        if scope == "scale_up":
            return self.scale_up
        if scope == "scale_out":
            return self.scale_out
        raise ValueError(f"scope={scope!r} is not known; allowed: scale_up, scale_out")


@dataclass(frozen=True)
class WaferNumbers:
    """A wafer-scale engine in the system that houses it (PLMR terms, per-PE rates per
    clock cycle), with the system's I/O and external weight store."""
    label: str
    fmas_per_cycle_by_dtype: dict  # dtype -> FMAs per cycle per PE (SIMD width)
    mem_read_bytes_per_cycle: object  # per PE
    mem_write_bytes_per_cycle: object
    link_bytes_per_cycle: object  # per link, per direction
    hop_cycles: object  # router-to-router latency per hop (alpha)
    stage_cycles: object  # software cost per routing stage (beta)
    map_call_cycles: object  # per-element cost of a @map-driven vector op
    sram_per_pe_bytes: object
    sram_reserved_per_pe_bytes: object
    mesh_width: object  # PEs a program may use, columns
    mesh_height: object  # rows
    clock_hz: object
    io_bytes_per_s: object  # wafer <-> outside (other systems, host, SwarmX)
    io_latency_s: object
    weight_store_bandwidth_bytes_per_s: object  # MemoryX -> wafer, weight streaming
    step_fixed_s: object = 0.0  # weight-streaming training: per-step time independent of the batch
    layer_stream_latency_s: object = 0.0  # weight-streaming training: per layer streamed in, per micro-batch
    service_request_latency_s: object = 0.0  # a vendor service's client-side time beyond the wafers' work

    @property
    def program_pes(self):
        return self.mesh_width * self.mesh_height

    @property
    def usable_sram_per_pe_bytes(self):
        """A PE's SRAM less what it reserves (the runtime's buffers): what a layout may use."""
        return self.sram_per_pe_bytes - self.sram_reserved_per_pe_bytes

    @property
    def max_square_grid(self):
        return np.minimum(self.mesh_width, self.mesh_height)

    def fmas_per_cycle(self, dtype: str):
        """FMAs per cycle per PE for math in `dtype`; NaN where the PE has no such unit.
        bf16 runs on the fp16 datapath (Cerebras' cbfloat16 training format)."""
        key = "fp16" if dtype == "bf16" else MATH_UNITS.get(dtype, dtype)
        return self.fmas_per_cycle_by_dtype.get(key, np.nan)

    def peak(self, dtype: str):
        """Dense peak FLOP/s of the program rectangle, from the per-PE SIMD rate."""
        return 2.0 * self.fmas_per_cycle(dtype) * self.program_pes * self.clock_hz

    def with_trailing_axis(self) -> "WaferNumbers":
        """The same numbers with a trailing axis of length 1 on every array, so they
        broadcast against candidates laid along a trailing axis (the grid searches)."""
        import dataclasses

        def ex(v):
            return np.expand_dims(v, -1) if np.ndim(v) else v
        changes = {f.name: ex(getattr(self, f.name)) for f in dataclasses.fields(self)
                   if f.name not in ("label", "fmas_per_cycle_by_dtype")}
        return dataclasses.replace(self, fmas_per_cycle_by_dtype={k: ex(v) for k, v in
                                                                  self.fmas_per_cycle_by_dtype.items()}, **changes)

    @property
    def shape(self) -> tuple:
        """Broadcast shape of the numbers (knob sweeps make some of them arrays)."""
        fields = (self.sram_per_pe_bytes, self.mesh_width, self.mesh_height, self.clock_hz, self.io_bytes_per_s,
                  self.weight_store_bandwidth_bytes_per_s, self.hop_cycles, self.stage_cycles,
                  self.link_bytes_per_cycle, self.sram_reserved_per_pe_bytes, self.map_call_cycles,
                  self.mem_read_bytes_per_cycle, self.mem_write_bytes_per_cycle, self.io_latency_s, self.step_fixed_s,
                  self.layer_stream_latency_s, self.service_request_latency_s,
                  *self.fmas_per_cycle_by_dtype.values())
        return np.broadcast_shapes(*(np.shape(f) for f in fields))
