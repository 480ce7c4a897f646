"""Cycle counts the simulator must produce, derived by hand from its stated rules and the spec's
numbers (wse2.yaml: alpha = hop_cycles = 1, 32-bit links, beta = stage_cycles = 62.5, 16 B read
and 8 B write ports, 4-wide fp16 SIMD):

- a word the sender produces at cycle t is in the PE d hops away at the end of cycle t + d alpha,
  and that PE acts on it from the next cycle; a link moves one 32-bit word per cycle. So L words
  sent at cycle 0 with no software stage are received, and the receiver goes on, at cycle
  L + d alpha: the closed form's `msg + hops * alpha`;
- a software stage (beta) before a transfer takes ceil(beta) whole cycles; a vector op ceil()
  of its fractional cycles.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.simulate import sim_numbers, simulate
from workbench.simulate.collectives import allreduce
from workbench.simulate.machine import Compute, Program, Recv, Send, Wait

WSE2 = sim_numbers("wse2")
S = math.ceil(WSE2.stage_cycles)  # 63


def _line(width, routes, ops, mem, expected, elem_bytes=4.0):
    return Program(name="line", width=width, height=1, routes=routes, ops=ops, sram_bytes=np.full(width, 64.0),
                   result=lambda: mem["x"], expected=expected, elem_bytes=elem_bytes)


def _send(L, d, *, setup="none", nums=WSE2, deliver_all=False):
    """L fp32 words from PE 0 to PE d (or to every PE up to d) along a row."""
    width = d + 1
    mem = {"x": np.zeros((width, L), np.float32)}
    mem["x"][0] = np.arange(1, L + 1)
    dest = np.arange(1, width) if deliver_all else np.array([d])

    def into(idx, v):
        mem["x"][idx] = v
    expected = mem["x"].copy()
    expected[dest] = np.arange(1, L + 1)
    prog = _line(width, {"r": dict(x=0, y=0, direction="E", hops=d, deliver_all=deliver_all)},
                 [Send([0], "r", L, payload=lambda idx: mem["x"][idx].copy(), setup=setup),
                  Recv(dest, "r", L, into=into, tag="t"), Wait(dest, ("t",))], mem, expected)
    return simulate(prog, nums)


@pytest.mark.parametrize("L", [1, 2, 10, 100])
def test_single_hop_is_L_plus_alpha(L):
    r = _send(L, 1)
    assert r.correct and r.cycles == L + 1


@pytest.mark.parametrize("L, d", [(1, 5), (16, 3), (40, 7)])
def test_d_hops_pipeline_the_words(L, d):
    r = _send(L, d)
    assert r.correct and r.cycles == L + d  # the words stream: latency once, not per hop
    assert r.link_words[0, :d, 1].tolist() == [L] * d  # every link eastward carried the L words


def test_hop_latency_and_link_width_come_from_the_spec_knobs():
    slow = sim_numbers("wse2", {"hop_cycles": 3})
    assert _send(10, 1, nums=slow).cycles == 10 + 3
    assert _send(10, 4, nums=slow).cycles == 10 + 4 * 3
    wide = sim_numbers("wse2", {"link_bytes_per_cycle": 8.0})  # two words a cycle
    assert _send(10, 1, nums=wide).cycles == 10 // 2 + 1


@pytest.mark.parametrize("P, L", [(2, 1), (8, 10), (32, 20)])
def test_row_broadcast_is_one_stage_the_message_and_the_line(P, L):
    # the root's software stage, then the words stream to every PE of the row at once (the
    # router delivers and forwards each word): ceil(beta) + L + (P - 1) alpha
    r = _send(L, P - 1, setup="stage", deliver_all=True)
    assert r.correct and r.cycles == S + L + (P - 1)
    assert r.busy["software"][0] == S and r.busy["stream"][0] == L


def _allreduce_program(P, L, *, broadcast=True):
    """Every PE of a P x P region holds 2L fp16 partial sums (L words); the K-tree allreduces them
    along the columns (the broadcast back dropped when not asked for)."""
    elems = 2 * L
    rng = np.random.default_rng(0)
    mem = {"y": rng.integers(-9, 10, size=(P * P, elems)).astype(np.float32)}
    col_sum = mem["y"].reshape(P, P, elems).sum(0)  # [x] -> the column's sum
    routes, ops = allreduce("ktree", P=P, mem=mem, buf="y", elems=elems, nums=WSE2)
    if not broadcast:
        ops = ops[:-3]
        routes.pop("bcast")
    root = (np.arange(P * P) // P) == P // 2
    exp = col_sum[np.arange(P * P) % P]
    return Program(name="ktree", width=P, height=P, routes=routes, ops=ops, sram_bytes=np.full(P * P, 4 * elems),
                   result=(lambda: mem["y"]) if broadcast else (lambda: mem["y"][root]),
                   expected=exp if broadcast else exp[root], elem_bytes=2.0)


@pytest.mark.parametrize("P", [2, 8, 16, 64])
@pytest.mark.parametrize("L", [1, 5, 32])
def test_tree_reduction_is_its_stages_one_after_the_other(P, L):
    """Each half of the column reduces toward the middle: level l, a partner 2^l rows away: a
    stage of ceil(beta) + L + 2^l alpha, then the add of 2L fp16 values (max(2L/4, 2L*4/16,
    2L*2/8) = L/2 cycles, rounded up); then the top half's sum joins the root, one row on."""
    A = math.ceil(2 * L / 4)
    levels = int(math.log2(P // 2)) if P > 2 else 0
    reduce_ = sum(S + L + 2 ** lev + A for lev in range(levels)) + (S + L + 1 + A)
    r = simulate(_allreduce_program(P, L, broadcast=False), WSE2)
    assert r.correct and r.cycles == reduce_
    # and the allreduce adds the root's broadcast, P/2 rows up to row 0
    r = simulate(_allreduce_program(P, L), WSE2)
    assert r.correct and r.cycles == reduce_ + S + L + P // 2
    assert r.colors == levels + 2  # a color per level, the root's stage, the broadcast


def test_a_late_receive_back_pressures_the_sender():
    """The receiver computes 200 cycles before it posts its receive: the sender's words fill its
    input queue, the router's buffer and its own output queue (`held` words), then stall. At
    cycle 200 the receive is posted and the queue drains; the slot that frees reaches the link
    at 201 and the sender's output queue at 202 (a stage sees its downstream one cycle late),
    from where the other L - held words leave one a cycle: the sender's last word at 201 + L -
    held, and the sender goes on a cycle later."""
    L, width = 40, 2
    mem = {"x": np.zeros((width, L), np.float32)}
    mem["x"][0] = np.arange(L)

    def into(idx, v):
        mem["x"][idx] = v
    prog = _line(width, {"r": dict(x=0, y=0, direction="E", hops=1)},
                 [Send([0], "r", L, payload=lambda idx: mem["x"][idx].copy(), setup="none"),
                  Compute([1], 200.0), Recv([1], "r", L, into=into, tag="t"), Wait([1], ("t",))],
                 mem, np.tile(np.arange(L, dtype=np.float32), (2, 1)))
    r = simulate(prog, WSE2)
    held = WSE2.input_queue_words + WSE2.router_buffer_words + WSE2.output_queue_words
    assert r.correct
    assert r.finish[0, 0] > 200  # the sender waited for the receiver
    assert r.finish[0, 0] == 202 + (L - held)  # then the rest streamed a word a cycle
    # the receiver had input_queue_words before it posted; the rest arrive one a cycle from 200
    assert r.cycles == 200 + (L - WSE2.input_queue_words)


def test_a_busy_color_holds_back_a_stream_merging_onto_it():
    """Two streams merge onto one color's path to PE 3 (a router taking words from two ports,
    sending them the same way): the one that took the color first holds it on every link from
    its head to its tail. Its receiver posts late, so it stalls, and the other stream waits
    behind it although the links are idle; on a color of its own it would have gone by."""
    L, width = 30, 4
    mem = {"x": np.zeros((width, 2, L), np.float32)}
    mem["x"][0, 0], mem["x"][1, 0] = np.arange(L), -np.arange(L)

    def into(slot):
        def f(idx, v):
            mem["x"][idx, slot] = v
        return f

    def prog(merged: bool):
        mem["x"][3] = 0
        routes = ({"m": dict(x=[0, 1], y=[0, 0], direction="E", hops=[3, 2], merge=True)} if merged else
                  {"a": dict(x=0, y=0, direction="E", hops=3), "b": dict(x=1, y=0, direction="E", hops=2)})
        # PE 1's stream (b) starts first: PE 0 computes 5 cycles before it sends (a). PE 3 takes
        # b only after 300 cycles; on separate colors it takes a at once
        send = [Compute([0], 5.0), Send([0], "m" if merged else "a", L, payload=lambda idx: mem["x"][idx, 0].copy(),
                                        setup="none"),
                Send([1], "m" if merged else "b", L, payload=lambda idx: mem["x"][idx, 0].copy(), setup="none")]
        if merged:  # one color: PE 3's first message on it is b's, its second a's
            recv = [Compute([3], 300.0), Recv([3], "m", L, into=into(1), tag="b"),
                    Recv([3], "m", L, into=into(0), tag="a")]
        else:
            recv = [Recv([3], "a", L, into=into(0), tag="a"), Compute([3], 300.0),
                    Recv([3], "b", L, into=into(1), tag="b")]
        exp = mem["x"].copy()
        exp[3, 0], exp[3, 1] = np.arange(L), -np.arange(L)
        return Program(name="merge", width=width, height=1, routes=routes, ops=send + recv + [Wait([3], ("a", "b"))],
                       sram_bytes=np.full(width, 8.0 * L), result=lambda: mem["x"], expected=exp, elem_bytes=4.0)
    nums = WSE2
    separate = simulate(prog(False), nums)
    merged = simulate(prog(True), nums)
    assert separate.correct and merged.correct
    # separate colors: PE 0's stream is done long before the late receive of the other
    assert separate.finish[0, 0] < 100
    # one color: PE 0's stream waits for PE 1's, which waits for the receive posted at 300
    assert merged.finish[0, 0] > 300
