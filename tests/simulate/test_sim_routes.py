"""Route tables as a WSE router holds them (one rx and one tx port set per color), colors given
greedily, and delivery read from the tables, never from the program's intent."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.simulate import DoesNotFit, SimulationError, sim_numbers, simulate
from workbench.simulate.machine import Program, Recv, Send, Wait
from workbench.simulate.routes import EAST, NORTH, RAMP, SOUTH, WEST, Routes


def test_disjoint_groups_share_a_color_and_crossing_ones_do_not():
    r = Routes(8, 1, 24)
    a = r.add("a", x=0, y=0, direction="E", hops=2)  # routers 0..2
    b = r.add("b", x=4, y=0, direction="E", hops=2)  # routers 4..6: disjoint, same color
    c = r.add("c", x=1, y=0, direction="E", hops=2)  # router 1 forwards a's words: conflict
    assert a == b == 0 and c == 1 and r.colors_used == 2
    assert r.rx[0, 0] == 1 << RAMP and r.tx[0, 0] == 1 << EAST
    assert r.rx[0, 1] == 1 << WEST and r.tx[0, 1] == 1 << EAST
    assert r.rx[0, 2] == 1 << WEST and r.tx[0, 2] == 1 << RAMP


def test_a_multicast_delivers_at_every_router_and_one_source_may_send_both_ways():
    r = Routes(1, 5, 24)
    c = r.add("b", x=[0, 0], y=[2, 2], direction=["N", "S"], hops=[2, 2], deliver_all=True)
    assert r.tx[c, 2] == (1 << NORTH) | (1 << SOUTH)
    t = r.trees(c)
    src = 2
    edges = slice(t["start"][src], t["start"][src] + t["count"][src])
    assert sorted(t["dest"][edges][t["dest"][edges] >= 0]) == [0, 1, 3, 4]


def test_two_transfers_setting_a_router_two_ways_in_one_group_are_a_program_error():
    r = Routes(4, 1, 24)
    with pytest.raises(SimulationError, match="split the group"):
        r.add("g", x=[0, 1], y=[0, 0], direction="E", hops=[1, 1])  # router 1 receives and sends


def test_merging_inputs_onto_one_path_is_allowed_when_asked():
    r = Routes(4, 1, 24)
    c = r.add("m", x=[0, 1], y=[0, 0], direction="E", hops=[3, 2], merge=True)
    assert r.rx[c, 1] == (1 << WEST) | (1 << RAMP) and r.tx[c, 1] == 1 << EAST


def test_more_groups_than_colors_do_not_fit():
    r = Routes(4, 1, 2)
    r.add("a", x=0, y=0, direction="E", hops=2)
    r.add("b", x=1, y=0, direction="E", hops=2)
    with pytest.raises(DoesNotFit, match="routing_colors=2"):
        r.add("c", x=1, y=0, direction="E", hops=1)


def test_few_colors_make_a_mapping_not_fit():
    # The K-tree needs a color per stage and one for the broadcast: ceil(log2 64) + 1 = 7 on 64
    # rows; with 6 colors it does not fit, with 7 it does (and 24 leave room).
    from workbench.simulate import run
    assert run("gemv", "mesh", P=64, k=64, n=64, hardware_overrides={"routing_colors": 7}).colors == 7
    with pytest.raises(DoesNotFit, match="routing colors"):
        run("gemv", "mesh", P=64, k=64, n=64, hardware_overrides={"routing_colors": 6})


def _one_hop(route: dict, sender=0, receiver=1, width=3):
    """PE 0 holds [1, 2, 3, 4]; `sender` sends what it holds on `route`; `receiver` should end
    up with PE 0's values."""
    mem = {"x": np.zeros((width, 4), np.float32)}
    mem["x"][0] = [1, 2, 3, 4]

    def into(idx, v):
        mem["x"][idx] = v
    return Program(name="hop", width=width, height=1, routes={"r": route},
                   ops=[Send([sender], "r", 4, payload=lambda idx: mem["x"][idx].copy(), setup="none"),
                        Recv([receiver], "r", 4, into=into, tag="t"), Wait([receiver], ("t",))],
                   sram_bytes=np.full(width, 16.0), result=lambda: mem["x"][receiver],
                   expected=np.array([1, 2, 3, 4], np.float32), elem_bytes=4.0)


def test_delivery_follows_the_tables_so_a_wrong_route_gives_wrong_data():
    nums = sim_numbers("wse2")
    assert simulate(_one_hop(dict(x=0, y=0, direction="E", hops=1)), nums).correct
    # the route delivers two hops away: PE 1 never gets the data (its receive waits forever)
    with pytest.raises(SimulationError, match="deadlock"):
        simulate(_one_hop(dict(x=0, y=0, direction="E", hops=2)), nums)
    # a route from the wrong neighbour: PE 1 takes what arrives on the color, PE 2's zeros
    r = simulate(_one_hop(dict(x=2, y=0, direction="W", hops=1), sender=2), nums)
    assert not r.correct and r.max_error == 4.0


def test_a_route_that_drops_words_is_an_error():
    r = Routes(3, 1, 24)
    c = r.add("a", x=0, y=0, direction="E", hops=2)
    r.rx[c, 2] = 1 << NORTH  # the last router no longer takes words from the west
    r._trees.clear()
    with pytest.raises(SimulationError, match="does not take it"):
        r.trees(c)
