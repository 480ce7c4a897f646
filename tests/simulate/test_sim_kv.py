"""The KV-cache update (workbench/simulate/kv.py): shift-based (spread) keeps the sequence in
order and balanced over all P² PEs at one hop per token whatever P; concat-based appends to one
line; the capacity each fits is the closed form's `kv_capacity_tokens` exactly."""
from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.primitives.mesh import MAPPINGS
from workbench.simulate import DoesNotFit, kv_capacity, run, sim_numbers
from workbench.simulate.compare import largest_generate
from workbench.simulate.kv import kv_program, kv_tokens_per_pe
from workbench.simulate.machine import Machine


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("P, tokens, generate", [(1, 0, 5), (2, 1, 9), (4, 3, 8), (4, 10, 7), (8, 20, 12)])
def test_the_cache_holds_the_sequence_in_order(mapping, P, tokens, generate):
    r = run("kv", mapping, P=P, kv_elems=8 * P, tokens=tokens, generate=generate, hardware="wse2")
    assert r.correct and r.max_error == 0.0


@pytest.mark.parametrize("P", [4, 8, 16])
def test_shift_based_update_is_one_hop_a_token_whatever_P(P):
    """Token T + 1 goes to row r = T mod P: the bottom row stores it (a 16-value slice: max(16/4,
    16*2/16, 16*2/8) = 4 cycles), then, unless r is the bottom row, every row below r passes its
    oldest token one row up, all at once: ceil(beta) + 8 words (16 fp16) + one hop, and the
    stores. P tokens from T = 2P: P - 1 shifts and one store alone; the cost of a shift does not
    grow with P (a token may start a cycle before the last one's stores end: up to P cycles)."""
    nums = sim_numbers("wse2")
    r = run("kv", "mesh", P=P, kv_elems=16 * P, tokens=2 * P, generate=P, hardware="wse2")
    store = math.ceil(float(nums.vector_op_cycles(16, reads=1, writes=1)))
    shift = store + math.ceil(nums.stage_cycles) + 8 + 1 + store
    assert r.correct
    assert (P - 1) * shift + store - P <= r.cycles <= (P - 1) * shift + store


def test_concat_update_is_a_local_store():
    nums = sim_numbers("wse2")
    r = run("kv", "gpu_style", P=8, kv_elems=128, tokens=8, generate=10, hardware="wse2")
    assert r.correct and r.colors == 0 and r.link_words.sum() == 0
    assert r.cycles == 10 * math.ceil(float(nums.vector_op_cycles(16, reads=1, writes=1)))


@pytest.mark.parametrize("P", [1, 2, 4, 8, 64, 360])
def test_capacity_is_the_closed_forms_exactly(P):
    ds = kv_capacity(mappings=list(MAPPINGS), P=[P], kv_elems_per_pe=16, hardware="wse2")
    np.testing.assert_array_equal(ds.sim_tokens.values, ds.model_tokens.values)
    spread, concat = ds.sim_tokens.sel(mapping="mesh").item(), ds.sim_tokens.sel(mapping="gpu_style").item()
    assert spread >= P * concat  # P times the tokens (floors aside)


def test_the_machine_refuses_one_token_more_than_the_capacity():
    nums = sim_numbers("wse2")
    P, E = 4, 64
    g = largest_generate(nums, mapping="mesh", P=P, kv_elems=E)
    Machine(kv_program(nums, P=P, kv_elems=E, tokens=P - 1, generate=g), nums)  # fits
    with pytest.raises(DoesNotFit, match="SRAM"):
        Machine(kv_program(nums, P=P, kv_elems=E, tokens=P - 1, generate=g + 1), nums)
    assert kv_tokens_per_pe(P=P, tokens=P - 1, generate=g, mapping="mesh") == math.ceil((P - 1 + g) / P)


def test_a_prompt_shorter_than_the_rows_is_refused():
    with pytest.raises(InputError, match="tokens=2"):
        run("kv", "mesh", P=8, kv_elems=64, tokens=2, generate=3)
