"""The numbers a PE-mesh simulation runs on: one wafer's WaferNumbers (backends.numbers, so
every knob override applies) made into integer cycles and words, plus the few things a
cycle-level simulator needs that no spec gives, each named here and marked ASSUMED.

From the spec (wse2.yaml / wse3.yaml, sources in shared/reference/wse_facts.md):
- hop_cycles (alpha): cycles for a word from one router to the next, "PE-to-PE communication
  latency is also one cycle" (SDK white paper); must be a whole number here;
- link_bytes_per_cycle: per link and direction (32 bits, Jacquelin et al. Sec IV.A); the PE's
  ramp to its router moves the same ("bi-directional link able to move 32 bits per cycle");
- routing_colors: virtual channels per router (24, SDK task-ids doc);
- fmas_per_cycle(dtype) and the memory ports (16 B read, 8 B write per cycle): a vector op's
  rate (the PE datapath, `vector_op_cycles`);
- stage_cycles (beta) and map_call_cycles: the two software costs fitted on WaferLLM rows
  (calibrate/wafer_fit.py); the simulator charges beta per transfer a PE starts in software
  and map_call_cycles per @map-driven element, as the closed forms do;
- sram_per_pe_bytes less sram_reserved_per_pe_bytes: what a program's buffers may use.

From primitives/mesh.py: RELAY_BYTES_PER_CYCLE, the rate of a message a PE forwards in
software (the baselines T10 and Ladder), fitted there on one WaferLLM row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, brief

WORD_BYTES = 4  # a wavelet: 32 bits (wse_facts.md section 2)
# ASSUMED: words a router buffers per color and input port beyond the hop's own latency
# (words in flight on the wire count against it). With hop_cycles + 2 a stream crosses a hop
# at the full link rate; the SDK documents no depth.
ROUTER_BUFFER_WORDS = 2
# ASSUMED: words a PE's input queue accepts on one color before a receive is posted. A
# receive posted in time never sees it; a late one back-pressures the sender.
INPUT_QUEUE_WORDS = 8
# ASSUMED: words a sender may have produced ahead of its first hop (the output queue).
OUTPUT_QUEUE_WORDS = 2


@dataclass(frozen=True)
class SimNumbers:
    """Integer-cycle view of one wafer for the simulator."""
    label: str
    hop_cycles: int
    link_words_per_cycle: float
    n_colors: int
    stage_cycles: float
    map_call_cycles: float
    fmas_per_cycle: dict
    mem_read_bytes_per_cycle: float
    mem_write_bytes_per_cycle: float
    sram_bytes: float  # per PE, for a program's buffers (sram_per_pe_bytes - reserved)
    relay_bytes_per_cycle: float
    router_buffer_words: int
    input_queue_words: int = INPUT_QUEUE_WORDS
    output_queue_words: int = OUTPUT_QUEUE_WORDS

    def simd(self, dtype: str) -> float:
        key = "fp16" if dtype == "bf16" else dtype
        if key not in self.fmas_per_cycle or not np.isfinite(self.fmas_per_cycle[key]):
            raise InputError(f"dtype={dtype!r} is not allowed on {self.label!r}; allowed: "
                             f"{', '.join(sorted(self.fmas_per_cycle))}")
        return float(self.fmas_per_cycle[key])

    def vector_op_cycles(self, n, *, dtype: str = "fp16", reads: float = 2.0, writes: float = 1.0,
                         elem_bytes: float = 2.0):
        """One vector instruction over n elements on the PE datapath: bound by the SIMD width or
        by the memory ports (`reads` and `writes` SRAM operands per element). Fractional: an
        op's total is rounded up to whole cycles where the simulator charges it."""
        n = np.asarray(n, float)
        return np.maximum(np.maximum(n / self.simd(dtype), n * reads * elem_bytes / self.mem_read_bytes_per_cycle),
                          n * writes * elem_bytes / self.mem_write_bytes_per_cycle)

    def stream_words_per_cycle(self, *, dtype: str = "fp16", elem_bytes: float = 2.0, reads: float = 0.0,
                               writes: float = 0.0) -> float:
        """Words per cycle a PE streams from its input queue to its output queue while it applies
        a vector op to each word (the add of a chain allreduce, the copy of a forward): the link
        rate or the datapath's rate for the elements of a word, whichever is lower."""
        per_word = float(self.vector_op_cycles(WORD_BYTES / elem_bytes, dtype=dtype, reads=reads, writes=writes,
                                               elem_bytes=elem_bytes))
        return min(self.link_words_per_cycle, 1.0 / per_word) if per_word > 0 else self.link_words_per_cycle


def _scalar(name: str, value) -> float:
    arr = np.asarray(getattr(value, "values", value), dtype=float)
    if arr.ndim or not np.isfinite(arr) or arr <= 0:
        raise InputError(f"{name}={brief(value)} is not allowed in a simulation; allowed: one positive number "
                         "(a simulation runs one configuration; sweep by calling it per value)")
    return float(arr)


def sim_numbers(hardware="wse3", hardware_overrides: dict | None = None) -> SimNumbers:
    """The simulator's numbers for a wafer (catalog name, YAML path, spec) with knob overrides;
    `routing_colors` may be overridden too (it is the router's, not a closed-form knob)."""
    from ..backends import numbers
    from ..primitives.mesh import RELAY_BYTES_PER_CYCLE
    from ..specs import kind_of, load_hardware, system_of
    overrides = dict(hardware_overrides or {})
    spec = load_hardware(hardware)
    if kind_of(spec) not in ("wafer", "system"):
        raise InputError(f"hardware={getattr(spec, 'name', hardware)!r} is not allowed in a mesh simulation; "
                         "allowed: a wafer or CS system (wse2, wse3, cs2, cs3)")
    colors = overrides.pop("routing_colors", system_of(spec)[1].routing_colors)
    colors = _scalar("routing_colors", colors)
    if colors != int(colors):
        raise InputError(f"routing_colors={colors:g} is not allowed; allowed: a positive integer")
    w = numbers(spec, overrides)
    hop = _scalar("hop_cycles", w.hop_cycles)
    if hop != int(hop):
        raise InputError(f"hop_cycles={hop:g} is not allowed in a simulation; allowed: a whole number of cycles")
    return SimNumbers(label=w.label, hop_cycles=int(hop),
                      link_words_per_cycle=_scalar("link_bytes_per_cycle", w.link_bytes_per_cycle) / WORD_BYTES,
                      n_colors=int(colors), stage_cycles=float(w.stage_cycles), map_call_cycles=float(w.map_call_cycles),
                      fmas_per_cycle={k: float(np.asarray(v)) for k, v in w.fmas_per_cycle_by_dtype.items()},
                      mem_read_bytes_per_cycle=_scalar("mem_read_bytes_per_cycle", w.mem_read_bytes_per_cycle),
                      mem_write_bytes_per_cycle=_scalar("mem_write_bytes_per_cycle", w.mem_write_bytes_per_cycle),
                      sram_bytes=float(w.usable_sram_per_pe_bytes),
                      relay_bytes_per_cycle=RELAY_BYTES_PER_CYCLE,
                      router_buffer_words=int(hop) + ROUTER_BUFFER_WORDS)
