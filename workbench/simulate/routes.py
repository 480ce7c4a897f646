"""Static routes of a PE mesh, as a WSE router holds them: for every color (virtual channel)
each router has one set of input ports it accepts words from (rx) and one set of ports it
sends every such word to (tx); the ports are the four neighbours and the ramp to its own PE.

A program names groups of straight-line transfers ("level 2 of the tree", "A tiles two hops
east"); `Routes.add` turns a group into per-router (rx, tx) settings and gives it the lowest
color on which every router it touches is either unused or set exactly the same way (so a
word on that color still goes where each transfer meant it to). A group that needs a color
beyond the router's `n_colors` does not fit (`DoesNotFit`).

Where a word goes is then read from the tables, never from the program's intent: `trees`
walks each source's words hop by hop through the rx/tx settings, so a route set wrong
delivers data to the wrong PE (and the functional check fails) or drops it (an error).
"""
from __future__ import annotations

import numpy as np

NORTH, EAST, SOUTH, WEST, RAMP = 0, 1, 2, 3, 4
DIRS = {"N": NORTH, "E": EAST, "S": SOUTH, "W": WEST}
DX = np.array([0, 1, 0, -1])
DY = np.array([-1, 0, 1, 0])
OPPOSITE = np.array([SOUTH, WEST, NORTH, EAST])
RAMP_BIT = 1 << RAMP


class SimulationError(RuntimeError):
    """A program the mesh cannot execute as written (a route that drops words, a deadlock)."""


class DoesNotFit(RuntimeError):
    """A program that needs more than the PE has: SRAM bytes or routing colors."""


class Routes:
    """Route tables of a width x height mesh with `n_colors` colors."""

    def __init__(self, width: int, height: int, n_colors: int):
        self.width, self.height, self.n_colors = int(width), int(height), int(n_colors)
        self.n = self.width * self.height
        self.rx = np.zeros((self.n_colors, self.n), np.uint8)
        self.tx = np.zeros((self.n_colors, self.n), np.uint8)
        self.color = {}  # group name -> color
        self._trees = {}

    def add(self, name: str, *, x, y, direction, hops, deliver_all=False, merge=False) -> int:
        """Transfers from PE (x, y) `hops` routers along `direction` ("N", "E", "S", "W"; per
        transfer), delivered to the last PE, or to every PE past the source (`deliver_all`,
        a multicast along the line). `merge`: transfers may join one path (a router taking
        words from several ports and sending them the same way); their words then share the
        color's channel from there on, one stream at a time. Returns the group's color."""
        x, y, hops = (np.atleast_1d(np.asarray(v, int)) for v in (x, y, hops))
        d = np.atleast_1d(np.asarray([DIRS[s] if isinstance(s, str) else s for s in np.atleast_1d(direction)]))
        x, y, hops, d = np.broadcast_arrays(x, y, hops, d)
        every = np.broadcast_to(np.asarray(deliver_all, bool), x.shape)
        if np.any(hops < 1):
            raise SimulationError(f"route group {name!r}: a transfer of {hops.min()} hops; allowed: 1 or more")
        ex, ey = x + DX[d] * hops, y + DY[d] * hops
        if np.any((ex < 0) | (ex >= self.width) | (ey < 0) | (ey >= self.height) | (x < 0) | (x >= self.width)
                  | (y < 0) | (y >= self.height)):
            raise SimulationError(f"route group {name!r} leaves the {self.width} x {self.height} mesh")
        step = np.repeat(np.arange(len(x)), hops + 1)
        i = np.arange(len(step)) - np.repeat(np.cumsum(hops + 1) - (hops + 1), hops + 1)
        dd = d[step]
        router = (y[step] + DY[dd] * i) * self.width + x[step] + DX[dd] * i
        first, last = i == 0, i == hops[step]
        rx = np.where(first, RAMP_BIT, 1 << OPPOSITE[dd]).astype(np.uint8)
        tx = np.where(last, RAMP_BIT, (1 << dd) | np.where(every[step] & ~first, RAMP_BIT, 0)).astype(np.uint8)
        order = np.argsort(router, kind="stable")
        router, rx, tx = router[order], rx[order], tx[order]
        starts = np.flatnonzero(np.r_[True, router[1:] != router[:-1]])
        rx_or, rx_and = np.bitwise_or.reduceat(rx, starts), np.bitwise_and.reduceat(rx, starts)
        tx_or, tx_and = np.bitwise_or.reduceat(tx, starts), np.bitwise_and.reduceat(tx, starts)
        # one router, two transfers: the same setting, or one source sending several ways
        joined = bool(merge) & (tx_or == tx_and)  # several inputs, one way out
        bad = ((rx_or != rx_and) & ~joined) | ((tx_or != tx_and) & (rx_or != RAMP_BIT))
        if np.any(bad):
            r = router[starts][np.argmax(bad)]
            raise SimulationError(f"route group {name!r}: two transfers set router ({r % self.width}, "
                                  f"{r // self.width}) differently on one color; split the group")
        routers = router[starts]
        for c in range(self.n_colors):
            used = self.rx[c, routers] != 0
            if np.all(~used | ((self.rx[c, routers] == rx_or) & (self.tx[c, routers] == tx_or))):
                self.rx[c, routers], self.tx[c, routers] = rx_or, tx_or
                self.color[name] = c
                self._trees.pop(c, None)
                return c
        raise DoesNotFit(f"routing colors: group {name!r} needs color {self.n_colors + 1} of the router's "
                         f"{self.n_colors} (routing_colors={self.n_colors})")

    @property
    def colors_used(self) -> int:
        return int(np.sum(np.any(self.rx != 0, axis=1)))

    def trees(self, color: int) -> dict:
        """Every source's delivery tree on `color` (a source: a router whose rx has the ramp),
        as edges in CSR order by source PE: `res` (the link a word crosses, `4 * router + port`,
        or the destination's ramp `4 n + pe`), `parent` (index of the edge that brings the word
        to this router, within the source's own edges; -1 at the source), `dest` (the PE a
        delivery edge hands the word to; -1 for links), and `start`/`count` per PE."""
        if color not in self._trees:
            self._trees[color] = self._walk(color)
        return self._trees[color]

    def _walk(self, c: int) -> dict:
        n, w = self.n, self.width
        srcs = np.flatnonzero(self.rx[c] & RAMP_BIT)
        f_src, f_r = np.arange(len(srcs)), srcs.copy()
        f_in, f_parent = np.full(len(srcs), RAMP), np.full(len(srcs), -1)
        e_src, e_res, e_parent, e_dest = [], [], [], []
        count = 0
        for _ in range(n + 1):
            if not len(f_r):
                break
            tx = self.tx[c, f_r]
            nxt = ([], [], [], [])
            for port in range(5):
                has = ((tx >> port) & 1).astype(bool) & (f_in != port)
                if not has.any():
                    continue
                s, r, par = f_src[has], f_r[has], f_parent[has]
                ids = count + np.arange(len(s))
                count += len(s)
                e_src.append(s)
                e_parent.append(par)
                if port == RAMP:
                    e_res.append(4 * n + r)
                    e_dest.append(r)
                    continue
                e_res.append(4 * r + port)
                e_dest.append(np.full(len(s), -1))
                xx, yy = r % w + DX[port], r // w + DY[port]
                if np.any((xx < 0) | (xx >= w) | (yy < 0) | (yy >= self.height)):
                    k = np.argmax((xx < 0) | (xx >= w) | (yy < 0) | (yy >= self.height))
                    raise SimulationError(f"color {c}: router ({r[k] % w}, {r[k] // w}) sends off the mesh")
                nr, nin = yy * w + xx, OPPOSITE[port]
                ok = ((self.rx[c, nr] >> nin) & 1).astype(bool) & (self.tx[c, nr] != 0)
                if not ok.all():
                    k = np.argmin(ok)
                    raise SimulationError(f"color {c}: a word from router ({r[k] % w}, {r[k] // w}) reaches "
                                          f"({xx[k]}, {yy[k]}), whose route on that color does not take it")
                for lst, v in zip(nxt, (s, nr, np.full(len(s), nin), ids)):
                    lst.append(v)
            f_src, f_r, f_in, f_parent = (np.concatenate(v) if v else np.empty(0, int) for v in nxt)
        else:
            raise SimulationError(f"color {c}: a route loops")
        if not e_src:
            return {"res": np.empty(0, int), "parent": np.empty(0, int), "dest": np.empty(0, int),
                    "start": np.zeros(n, int), "count": np.zeros(n, int)}
        src, res, parent, dest = (np.concatenate(v) for v in (e_src, e_res, e_parent, e_dest))
        order = np.argsort(src, kind="stable")  # by source, each source's edges in hop order
        local = np.empty(len(order), int)
        counts = np.bincount(src, minlength=len(srcs))
        starts = np.cumsum(counts) - counts
        local[order] = np.arange(len(order)) - np.repeat(starts, counts)
        par = parent[order]
        par = np.where(par >= 0, local[np.maximum(par, 0)], -1)
        start, cnt = np.zeros(n, int), np.zeros(n, int)
        start[srcs], cnt[srcs] = starts, counts
        return {"res": res[order], "parent": par, "dest": dest[order], "start": start, "count": cnt}
