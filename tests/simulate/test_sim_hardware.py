"""The simulator's numbers (workbench/simulate/hardware.py) come from the wafer specs and their
knob overrides: every rate, latency and capacity is the spec's (wse2.yaml / wse3.yaml, cited in
shared/reference/wse_facts.md); bad input is one InputError naming the argument."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.backends import numbers
from workbench.errors import InputError
from workbench.simulate import run, sim_numbers
from workbench.simulate.hardware import ROUTER_BUFFER_WORDS, WORD_BYTES
from workbench.specs import load_hardware


@pytest.mark.parametrize("name", ["wse2", "wse3", "cs3"])
def test_numbers_are_the_specs(name):
    s, w = sim_numbers(name), numbers(name)
    spec = load_hardware("wse3" if name == "cs3" else name)
    assert s.hop_cycles == w.hop_cycles == 1  # "PE-to-PE communication latency is also one cycle"
    assert s.link_words_per_cycle == w.link_bytes_per_cycle / WORD_BYTES == 1.0  # 32 bits per cycle
    assert s.n_colors == spec.routing_colors == 24  # colors 0-23
    assert s.stage_cycles == w.stage_cycles and s.map_call_cycles == w.map_call_cycles
    assert s.sram_bytes == w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes == 49152 - 6144
    assert s.fmas_per_cycle["fp16"] == w.fmas_per_cycle("fp16")
    assert (s.mem_read_bytes_per_cycle, s.mem_write_bytes_per_cycle) == (16.0, 8.0)
    assert s.router_buffer_words == s.hop_cycles + ROUTER_BUFFER_WORDS


def test_overrides_reach_the_simulator():
    s = sim_numbers("wse3", {"hop_cycles": 3, "link_bytes_per_cycle": 8.0, "routing_colors": 6,
                             "sram_per_pe_bytes": 98304, "stage_cycles": 10.0})
    assert (s.hop_cycles, s.link_words_per_cycle, s.n_colors, s.stage_cycles) == (3, 2.0, 6, 10.0)
    assert s.sram_bytes == 98304 - 6144
    # and a run sees them: one hop of a 10-word message takes 10 + 3 cycles at 1 word/cycle
    r = run("gemv", "mesh", P=2, k=2, n=20, hardware="wse3", hardware_overrides={"hop_cycles": 3})
    r1 = run("gemv", "mesh", P=2, k=2, n=20, hardware="wse3")
    assert r.correct and r1.correct and r.cycles > r1.cycles


def test_vector_op_is_bound_by_simd_or_ports():
    s2, s3 = sim_numbers("wse2"), sim_numbers("wse3")
    # fp16 FMA over 1000: WSE-2 SIMD 4 -> 250; ports 2 x 2 B / 16 and 2 B / 8 -> 250 as well
    assert float(s2.vector_op_cycles(1000)) == 250.0
    # WSE-3's 8-wide SIMD is held to the same ports
    assert float(s3.vector_op_cycles(1000)) == 250.0
    # a stream-through add reads one operand per element: 2 per word, within the link's word a cycle
    assert s2.stream_words_per_cycle(reads=1.0) == 1.0


@pytest.mark.parametrize("overrides, match", [
    ({"hop_cycles": 1.5}, "hop_cycles=1.5"),
    ({"hop_cycles": [1, 2]}, "hop_cycles"),
    ({"routing_colors": 2.5}, "routing_colors=2.5"),
    ({"routing_colors": 0}, "routing_colors"),
    ({"colours": 4}, "colours"),
])
def test_bad_overrides_are_one_clear_error(overrides, match):
    with pytest.raises(InputError, match=match):
        sim_numbers("wse3", overrides)


def test_a_gpu_is_refused_by_name():
    with pytest.raises(InputError, match="h100_sxm"):
        sim_numbers("h100_sxm")


def test_dtype_without_math_units_is_refused():
    with pytest.raises(InputError, match="dtype='fp8'"):
        sim_numbers("wse3").simd("fp8")
    assert np.isfinite(sim_numbers("wse3").simd("bf16"))  # bf16 runs on the fp16 datapath
