"""Hardware specs: chips as frozen dataclasses with SI fields.

Memory tiers and links are lists of small dataclasses so that HBM + NVLink + InfiniBand
and on-wafer SRAM + MemoryX share one shape. Size-dependent efficiency is data
(`EfficiencyTable`, interpolated in log-size), fitted from kernel measurements.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..units import DTYPES, MATH_UNITS
from ._base import SpecError, bool_fields, require

LINK_SCOPES = ("scale_up", "scale_out")
KERNELS_DIR = Path(__file__).parent / "kernels"  # <gpu>-<framework>.json, the fitted kernel tables


def kernel_table_names() -> dict:
    """GPU name -> the frameworks with a kernel-table file for it (specs/kernels)."""
    from . import folder_stems
    out: dict = {}
    for stem in folder_stems(KERNELS_DIR, "*-*.json"):
        gpu, _, framework = stem.rpartition("-")
        out.setdefault(gpu, []).append(framework)
    return out


@dataclass(frozen=True, kw_only=True)
class EfficiencyTable:
    """Achieved fraction of a peak against a size (FLOPs or bytes), interpolated
    linearly in log(eff) against log(size) and held constant beyond the ends."""
    size: tuple[float, ...]
    eff: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        try:
            s, e = np.asarray(self.size, float), np.asarray(self.eff, float)
        except (TypeError, ValueError):
            raise SpecError("efficiency table", "size/eff", (self.size, self.eff), "two lists of numbers") from None
        if s.shape != e.shape or s.size == 0:
            raise SpecError("efficiency table", "size/eff", (len(self.size), len(self.eff)),
                            "two non-empty lists of equal length")
        if np.any(np.diff(s) <= 0) or np.any(s <= 0) or not np.all(np.isfinite(s)):
            raise SpecError("efficiency table", "size", list(self.size), "positive and ascending")
        if np.any((e <= 0) | (e > 1)):
            raise SpecError("efficiency table", "eff", list(self.eff), "values in (0, 1]")

    def __call__(self, size):
        """The table at `size` (numbers or ndarrays; the primitives use their own copy,
        primitives.hardware_numbers.EffCurve, which also keeps DataArray dimensions)."""
        xp = np.log10(np.asarray(self.size, float))
        fp = np.log(np.asarray(self.eff, float))
        return np.exp(np.interp(np.log10(np.maximum(np.asarray(size, float), 1.0)), xp, fp))


@dataclass(frozen=True, kw_only=True)
class MemoryTier:
    name: str
    capacity_bytes: float
    bandwidth_bytes_per_s: float
    source: str = ""

    def __post_init__(self) -> None:
        require(self, ("name",), "text")
        require(self, ("capacity_bytes", "bandwidth_bytes_per_s"), "positive")


@dataclass(frozen=True, kw_only=True)
class Link:
    """A link class of a device: NVLink to the scale-up domain, a NIC to the scale-out
    network. Bandwidth is per device, per direction. `domain_size`: the devices one
    scale-up domain holds (>= 1: 8 on an HGX board, 72 in an NVL72 rack); a scale-out link
    reaches the whole cluster, written 0 (its size is the prediction's `devices`: a
    scale-out network of bounded size is not modelled, so no other value is accepted)."""
    name: str
    scope: str  # "scale_up" or "scale_out"
    unidir_bytes_per_s: float
    latency_s: float  # per message step (alpha)
    domain_size: int  # scale_up: devices per domain (>= 1); scale_out: 0 (the whole cluster)
    busbw_eff: EfficiencyTable  # message size -> achieved fraction of the line rate
    in_network_reduction: bool = False  # NVLS / SHARP: the switch reduces all-reduce data
    source: str = ""

    def __post_init__(self) -> None:
        require(self, ("name",), "text")
        if self.scope not in LINK_SCOPES:
            raise SpecError(self.name, "scope", self.scope, f"one of {LINK_SCOPES}")
        require(self, ("unidir_bytes_per_s",), "positive")
        require(self, ("latency_s",), "nonnegative")
        if self.scope == "scale_up" and (type(self.domain_size) is not int or self.domain_size < 1):
            raise SpecError(self.name, "domain_size", self.domain_size, "a positive integer on a scale_up link (the "
                            "devices one domain holds; 0, the whole cluster, is a scale_out link's)")
        if self.scope == "scale_out" and (type(self.domain_size) is not int or self.domain_size != 0):
            raise SpecError(self.name, "domain_size", self.domain_size,
                            "0 on a scale_out link (it reaches the whole cluster, `devices` of the prediction; a "
                            "scale-out network of bounded size is not modelled)")
        require(self, bool_fields(self), "bool")


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    name: str
    vendor: str
    source: str
    peak_flops_per_s: dict  # dtype -> dense tensor-core FLOP/s
    memory: tuple  # MemoryTier, main memory first
    links: tuple  # Link, scale-up first
    l2_bytes: float
    n_sms: int  # streaming multiprocessors / compute units, for wave quantization
    collective_sms: int  # SMs a running NCCL/RCCL collective holds (its CTAs), taken from overlapped compute
    gemm_tile_m: int  # output tile of the library GEMM kernels (rows)
    gemm_tile_n: int  # output tile (columns)
    gemm_peak_eff: dict  # dtype -> best achievable fraction of peak for large GEMMs (MAMF)
    gemm_eff: EfficiencyTable  # GEMM FLOPs -> fraction of that best, after wave quantization
    attention_peak_eff: dict  # dtype -> flash-attention kernel's best fraction of peak (long sequences)
    memory_eff: EfficiencyTable  # bytes moved -> fraction of peak memory bandwidth
    memory_latency_s: float  # loaded DRAM latency a memory stream pays before it flows
    kernel_launch_s: float  # fixed cost per kernel (launch + tail), CUDA-graph replay
    tdp_w: float
    price_usd_per_hour: float = 0.0  # on-demand USD per device-hour (market data; 0: not known)
    # dtype -> 2:4 structured-sparse over dense tensor-core peak (the datasheet's 'with
    # sparsity' figure over the dense one); a dtype not listed has no sparse tensor cores
    sparse_2_4_speedup: dict = field(default_factory=dict)
    # Measured kernel tables (specs/kernels/<kernel_tables>-<framework>.json): the GPU whose
    # fitted efficiencies this one uses (itself, or for a chip with no tables the nearest
    # measured chip of its family: same SM generation), and the serving framework used when
    # a prediction names none. "": no tables, the analytical efficiencies above.
    kernel_tables: str = ""
    default_framework: str = ""
    # CUDA compute capability (major.minor, NVIDIA's table at developer.nvidia.com/cuda-gpus);
    # 0 for a GPU that is not a CUDA device. Frameworks pick kernels and defaults by it.
    compute_capability: float = 0.0
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        require(self, ("name", "vendor"), "text")
        for name in ("peak_flops_per_s", "gemm_peak_eff", "attention_peak_eff"):
            if not isinstance(getattr(self, name), dict):
                raise SpecError(self.name, name, getattr(self, name), "a mapping of dtype -> number")
        require(self, ("n_sms", "gemm_tile_m", "gemm_tile_n"), "positive_int")
        require(self, ("collective_sms",), "nonnegative_int")
        require(self, ("price_usd_per_hour", "compute_capability"), "nonnegative")
        require(self, bool_fields(self), "bool")
        for dt, v in self.peak_flops_per_s.items():
            if dt not in DTYPES:
                raise SpecError(self.name, f"peak_flops_per_s.{dt}", v, f"a dtype in {DTYPES}")
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < np.inf):
                raise SpecError(self.name, f"peak_flops_per_s.{dt}", v, "a finite positive FLOP/s")
        if "bf16" not in self.peak_flops_per_s:  # the math a 16-bit model runs in (gemm/attention_peak_eff's fallback)
            raise SpecError(self.name, "peak_flops_per_s.bf16", None, "a value (the bf16 peak is required)")
        require(self, ("l2_bytes", "kernel_launch_s", "memory_latency_s", "tdp_w"), "positive")
        for dt, v in dict(self.sparse_2_4_speedup).items():
            if dt not in self.peak_flops_per_s or isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 < v <= 2:
                raise SpecError(self.name, f"sparse_2_4_speedup.{dt}", v,
                                "a dtype of peak_flops_per_s with a ratio in (1, 2]")
        if "bf16" not in self.attention_peak_eff or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1
                for v in self.attention_peak_eff.values()):
            raise SpecError(self.name, "attention_peak_eff", self.attention_peak_eff,
                            "a bf16 entry and values in (0, 1]")
        if "bf16" not in self.gemm_peak_eff:
            raise SpecError(self.name, "gemm_peak_eff.bf16", None, "a bf16 entry (the fallback)")
        for dt, v in self.gemm_peak_eff.items():
            if dt not in DTYPES or isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise SpecError(self.name, f"gemm_peak_eff.{dt}", v, "a dtype with a value in (0, 1]")
        if not 0 <= self.collective_sms < self.n_sms:
            raise SpecError(self.name, "collective_sms", self.collective_sms, f"an integer in [0, n_sms={self.n_sms})")
        self._check_memory_and_links()
        self._check_kernel_tables()

    def _check_memory_and_links(self) -> None:
        """One memory tier (`hbm`: the only one any model reads) and one link per scope
        (`link(scope)` reads one): a tier or link beyond those would be silently unused."""
        if len(self.memory) != 1:
            raise SpecError(self.name, "memory", [m.name for m in self.memory],
                            "exactly one tier, the device memory (a second tier is read by no model)")
        for scope in LINK_SCOPES:
            named = [ln.name for ln in self.links if ln.scope == scope]
            if len(named) != 1:
                raise SpecError(self.name, f"links (scope {scope})", named,
                                f"exactly one link with scope {scope!r} (a second one is read by no model)")

    def _check_kernel_tables(self) -> None:
        """kernel_tables names a GPU with table files, default_framework one of its frameworks."""
        if self.default_framework and not self.kernel_tables:
            raise SpecError(self.name, "default_framework", self.default_framework,
                            "empty unless kernel_tables names the GPU whose tables it selects")
        if not self.kernel_tables:
            return
        tables = kernel_table_names()
        if self.kernel_tables not in tables:
            raise SpecError(self.name, "kernel_tables", self.kernel_tables,
                            f"'' (no tables) or a GPU with tables in specs/kernels: {', '.join(sorted(tables))}")
        if self.default_framework and self.default_framework not in tables[self.kernel_tables]:
            raise SpecError(self.name, "default_framework", self.default_framework,
                            f"'' or a framework with tables for {self.kernel_tables}: "
                            f"{', '.join(sorted(tables[self.kernel_tables]))}")

    @property
    def hbm(self) -> MemoryTier:
        return self.memory[0]

    def link(self, scope: str) -> Link:
        for ln in self.links:
            if ln.scope == scope:
                return ln
        raise SpecError(self.name, "links", scope, f"a link with scope {scope!r}")

    def attention_peak_eff_for(self, dtype: str) -> float:
        """Flash-attention efficiency for `dtype`; dtypes without a figure use bf16's."""
        return float(self.attention_peak_eff.get(dtype, self.attention_peak_eff["bf16"]))

    def gemm_peak_eff_for(self, dtype: str) -> float:
        """Large-GEMM efficiency for `dtype`; dtypes without a measurement use bf16's."""
        return float(self.gemm_peak_eff.get(dtype, self.gemm_peak_eff["bf16"]))

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for math in `dtype` (a format runs on its units.MATH_UNITS); NaN
        when the chip has no such unit."""
        return float(self.peak_flops_per_s.get(MATH_UNITS.get(dtype, dtype), np.nan))


def hardware_from_dict(data: dict, origin: str) -> HardwareSpec:
    from ._base import build
    data = dict(data)
    for key in ("memory", "links"):
        if not isinstance(data.get(key, []), list):
            raise SpecError(origin, key, data[key], "a list of mappings")
    for key in ("gemm_eff", "memory_eff"):
        if key in data:
            data[key] = build(EfficiencyTable, data[key], origin=f"{origin}.{key}")
    data["memory"] = tuple(build(MemoryTier, m, origin=f"{origin}.memory") for m in data.get("memory", []))
    links = []
    for ln in data.get("links", []):
        if not isinstance(ln, dict):
            raise SpecError(origin, "links", ln, "a list of mappings")
        ln = dict(ln)
        ln["busbw_eff"] = build(EfficiencyTable, ln.get("busbw_eff", {}), origin=f"{origin}.links.busbw_eff")
        links.append(build(Link, ln, origin=f"{origin}.links"))
    data["links"] = tuple(links)
    return build(HardwareSpec, data, origin=origin)
