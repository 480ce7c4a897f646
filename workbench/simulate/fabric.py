"""The mesh's network, word by word and cycle by cycle, as arrays (no object per PE or word).

A transfer is a stream: `length` 32-bit words a PE produces (at most one word per cycle per
PE ramp, and at its own rate: the link's, or a software forward's) on a color, delivered
along that color's route tree (routes.Routes.trees). The tree's edges are the resources a
word crosses: a link `4 * router + port` (one per direction) or a destination's ramp
`4 n + pe`. Every cycle, vectorized over the edges of all streams in flight:

- a word may cross an edge once its parent edge carried it `hop_cycles` earlier (at the
  source: once produced, in the same cycle), so a word produced at cycle t reaches a PE d
  hops away at t + d * hop_cycles;
- back-pressure: a router buffers `router_buffer_words` per color and input (the words on
  the wire included), a PE's input queue `input_queue_words` beyond its posted receives,
  and a sender runs `output_queue_words` ahead of its first hop;
- a color is a virtual channel: on each link (and ramp) it carries one stream at a time,
  from that stream's head to its tail (wormhole), so streams on one color queue behind
  each other while streams on different colors share the link;
- a link (and a ramp) moves `link_words_per_cycle` words per cycle (credits when not 1);
  among colors wanting a link, the one after the last served wins (round robin), among
  streams wanting a free color, the oldest.

The machine (machine.py) starts streams and reads the events of each cycle: first words
and completed deliveries per (PE, color), and streams whose sender has produced all words.
"""
from __future__ import annotations

import numpy as np

from .hardware import SimNumbers
from .routes import Routes

BIG = np.iinfo(np.int64).max


class _Pool:
    """Growable parallel arrays."""

    def __init__(self, spec: dict):
        self.spec, self.n = spec, 0
        self.cap = 1024
        for k, (dt, fill) in spec.items():
            setattr(self, k, np.full(self.cap, fill, dt))

    def extend(self, m: int) -> np.ndarray:
        if self.n + m > self.cap:
            cap = max(2 * self.cap, self.n + m)
            for k, (dt, fill) in self.spec.items():
                new = np.full(cap, fill, dt)
                new[:self.n] = getattr(self, k)[:self.n]
                setattr(self, k, new)
            self.cap = cap
        ids = np.arange(self.n, self.n + m)
        self.n += m
        return ids


class Fabric:
    def __init__(self, routes: Routes, nums: SimNumbers):
        self.routes, self.nums = routes, nums
        n, C = routes.n, routes.n_colors
        self.n, self.C = n, C
        self.n_res = 5 * n
        self.alpha = nums.hop_cycles
        self.rate = nums.link_words_per_cycle
        self.vc_owner = np.full((self.n_res, C), -1, np.int64)
        self.delivered = np.zeros((n, C), np.int64)
        self.posted = np.zeros((n, C), np.int64)
        self.words = np.zeros(self.n_res + n, np.int64)  # per link and ramp in, then ramp out
        self.res_credit = np.ones(self.n_res)
        self.out_credit = np.ones(n)
        self.e = _Pool({"res": (np.int64, 0), "color": (np.int64, 0), "stream": (np.int64, 0),
                        "parent": (np.int64, -1), "dest": (np.int64, -1), "passed": (np.int64, 0),
                        "len": (np.int64, 0)})
        self.s = _Pool({"len": (np.int64, 0), "produced": (np.int64, 0), "start": (np.int64, 0),
                        "rate": (float, 1.0), "credit": (float, 0.0), "src": (np.int64, 0), "color": (np.int64, 0),
                        "in_pe": (np.int64, -1), "in_color": (np.int64, 0), "in_base": (np.int64, 0),
                        "leaves": (np.int64, 0), "done": (bool, False), "batch": (np.int64, 0),
                        "row": (np.int64, 0)})
        self.hist = np.zeros((self.alpha, self.e.cap), np.int64) if self.alpha > 1 else None
        self.act = np.empty(0, np.int64)  # edges of streams in flight
        self.open = np.empty(0, np.int64)  # streams still producing
        self.payloads: dict = {}
        self._batches = 0
        self.scratch_vc = np.full(self.n_res * C, BIG, np.int64)
        self.scratch_res = np.full(self.n_res + n, BIG, np.int64)
        self.scratch_s = np.full(1024, BIG, np.int64)
        self.last_move = -10**9

    # ---- starting streams -------------------------------------------------------------------
    def start(self, *, src, color, length, start, rate, payload, in_pe=None, in_color=None, in_base=None):
        """Streams from PEs `src` (array) on `color` (array), `length` words each, produced from
        cycle `start` (array) at `rate` words/cycle; `payload` (len(src), elements) float32.
        Returns the stream ids."""
        src = np.asarray(src, np.int64)
        m = len(src)
        color = np.broadcast_to(np.asarray(color, np.int64), (m,))
        ids = self.s.extend(m)
        s = self.s
        s.len[ids], s.produced[ids], s.start[ids] = length, 0, start
        s.rate[ids], s.credit[ids], s.src[ids], s.color[ids] = rate, 0.0, src, color
        s.done[ids] = False
        s.in_pe[ids] = -1 if in_pe is None else in_pe
        s.in_color[ids] = 0 if in_color is None else in_color
        s.in_base[ids] = 0 if in_base is None else in_base
        batch = self._batches
        self._batches += 1
        self.payloads[batch] = [np.asarray(payload, np.float32), 0]  # [values, deliveries not yet read]
        s.batch[ids], s.row[ids] = batch, np.arange(m)
        leaves = np.zeros(m, np.int64)
        for c in np.unique(color):
            sel = np.flatnonzero(color == c)
            t = self.routes.trees(int(c))
            cnt = t["count"][src[sel]]
            if np.any(cnt == 0):
                bad = src[sel][np.argmax(cnt == 0)]
                from .routes import SimulationError
                raise SimulationError(f"PE ({bad % self.routes.width}, {bad // self.routes.width}) sends on color "
                                      f"{c}, which has no route from it")
            first = np.repeat(t["start"][src[sel]], cnt)
            local = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            idx = first + local
            eids = self.e.extend(len(idx))
            if self.hist is not None and self.hist.shape[1] < self.e.cap:
                self.hist = np.pad(self.hist, ((0, 0), (0, self.e.cap - self.hist.shape[1])))
            base = np.repeat(eids[np.r_[0, np.cumsum(cnt)[:-1]]] if len(cnt) else [], cnt)
            e = self.e
            e.res[eids], e.color[eids] = t["res"][idx], c
            e.stream[eids] = np.repeat(ids[sel], cnt)
            e.parent[eids] = np.where(t["parent"][idx] >= 0, base + t["parent"][idx], -1)
            e.dest[eids], e.passed[eids], e.len[eids] = t["dest"][idx], 0, length
            if self.hist is not None:
                self.hist[:, eids] = 0
            leaves[sel] = np.bincount(np.repeat(np.arange(len(sel)), cnt), weights=t["dest"][idx] >= 0,
                                      minlength=len(sel)).astype(np.int64)
            self.act = np.concatenate([self.act, eids])
        s.leaves[ids] = leaves
        self.payloads[batch][1] = int(leaves.sum())
        self.open = np.concatenate([self.open, ids])
        if self.scratch_s.size < s.cap:
            self.scratch_s = np.full(s.cap, BIG, np.int64)
        return ids

    def payload(self, streams) -> np.ndarray:
        """The values of `streams` (rows, in order)."""
        streams = np.asarray(streams, np.int64)
        b, r = self.s.batch[streams], self.s.row[streams]
        if len(streams) and np.all(b == b[0]):
            return self.payloads[int(b[0])][0][r]
        out = [None] * len(streams)
        for bb in np.unique(b):
            sel = np.flatnonzero(b == bb)
            vals = self.payloads[int(bb)][0][r[sel]]
            for i, v in zip(sel, vals):
                out[i] = v
        return np.stack(out) if out else np.empty((0, 0), np.float32)

    def consumed(self, streams) -> None:
        """The receivers have read these streams' values: free batches nobody needs."""
        b = self.s.batch[np.asarray(streams, np.int64)]
        for bb, k in zip(*np.unique(b, return_counts=True)):
            entry = self.payloads[int(bb)]
            entry[1] -= k * 1
            if entry[1] <= 0:
                del self.payloads[int(bb)]

    @property
    def busy(self) -> bool:
        return bool(len(self.act) or len(self.open))

    # ---- one cycle ----------------------------------------------------------------------------
    def step(self, t: int) -> dict:
        """Advance the network by cycle t. Returns the events: `first` and `done` deliveries as
        (dest, color, stream, base) / (dest, color, stream) arrays, `produced` (streams whose
        last word was produced) and `moved` (any word moved or produced)."""
        e, s, n, C = self.e, self.s, self.n, self.C
        a = self.act
        ev = {"first": [], "done": [], "produced": [], "moved": False}
        if self.rate != 1.0:
            cap = max(self.rate, 1.0)
            self.res_credit = np.minimum(self.res_credit + self.rate, cap)
            self.out_credit = np.minimum(self.out_credit + self.rate, cap)
        p = e.parent[a]
        nonroot = p >= 0
        if self.alpha == 1:
            avail_up = np.where(nonroot, e.passed[np.maximum(p, 0)], 0)
        else:
            avail_up = np.where(nonroot, self.hist[t % self.alpha, np.maximum(p, 0)], 0)
        st, res, col, dest = e.stream[a], e.res[a], e.color[a], e.dest[a]
        is_del = dest >= 0
        roots = np.flatnonzero(~nonroot)
        for _ in range(int(np.ceil(self.rate))):
            self._produce(t, a, roots, ev)
            avail = np.where(nonroot, avail_up, s.produced[st])
            passed = e.passed[a]
            ok = avail > passed
            if not ok.any():
                continue
            # back-pressure: the buffer behind a link edge, the input queue behind a ramp
            mc = np.full(len(a), BIG, np.int64)
            if nonroot.any():
                loc = self._local(a, p[nonroot])
                np.minimum.at(mc, loc, passed[nonroot])
            room = np.where(is_del, self.delivered[np.maximum(dest, 0), col]
                            < self.posted[np.maximum(dest, 0), col] + self.nums.input_queue_words,
                            passed - np.where(mc == BIG, passed, mc) < self.nums.router_buffer_words)
            ok &= room
            owner = self.vc_owner[res, col]
            ok &= (owner < 0) | (owner == st)
            if self.rate != 1.0:
                ok &= self.res_credit[res] >= 1.0
            cand = np.flatnonzero(ok)
            if not len(cand):
                continue
            free = owner[cand] < 0
            if free.any():  # streams wanting a free color on one link: the oldest takes it
                fc = cand[free]
                win = self._winners(self.scratch_vc, res[fc] * C + col[fc], st[fc])
                cand = np.concatenate([cand[~free], fc[win]])
            prio = (col[cand] - t) % C  # round robin over the colors wanting a link
            cand = cand[self._winners(self.scratch_res, res[cand], prio)]
            g = a[cand]
            e.passed[g] += 1
            self.words[res[cand]] += 1
            if self.rate != 1.0:
                self.res_credit[res[cand]] -= 1.0
            ev["moved"] = True
            head = e.passed[g] == 1
            self.vc_owner[res[cand[head]], col[cand[head]]] = st[cand[head]]
            d = cand[is_del[cand]]
            if len(d):
                dd, dc = dest[d], col[d]
                first = e.passed[a[d]] == 1
                if first.any():
                    ev["first"].append((dd[first], dc[first], st[d][first], self.delivered[dd[first], dc[first]]))
                self.delivered[dd, dc] += 1
            tail = e.passed[g] == e.len[g]
            if tail.any():
                tc = cand[tail]
                self.vc_owner[res[tc], col[tc]] = -1
                dt = tc[is_del[tc]]
                if len(dt):
                    ev["done"].append((dest[dt], col[dt], st[dt]))
                    np.subtract.at(s.leaves, st[dt], 1)
        if self.alpha > 1:
            self.hist[t % self.alpha, a] = e.passed[a]
        if ev["moved"]:
            self.last_move = t
        for k in ("first", "done"):
            ev[k] = tuple(np.concatenate(v) for v in zip(*ev[k])) if ev[k] else None
        ev["produced"] = np.concatenate(ev["produced"]) if ev["produced"] else np.empty(0, np.int64)
        if ev["done"] is not None:
            fin = np.unique(ev["done"][2])
            fin = fin[s.leaves[fin] <= 0]
            if len(fin):
                s.done[fin] = True
                self.act = self.act[~s.done[e.stream[self.act]]]
                if e.n > 4 * len(self.act) + 65536:
                    self._compact()
        return ev

    @staticmethod
    def _local(a, parents):
        """Positions in `a` (edges in flight, kept sorted: new edges are appended with higher
        ids, retiring and compacting keep the order) of the edge ids `parents`."""
        return np.searchsorted(a, parents)

    def _produce(self, t, a, roots, ev) -> None:
        s = self.s
        o = self.open
        if not len(o):
            return
        go = s.start[o] <= t
        if not go.any():
            return
        o = o[go]
        s.credit[o] = np.minimum(s.credit[o] + s.rate[o], np.maximum(s.rate[o], 1.0))
        cap = s.len[o].copy()
        fwd = s.in_pe[o] >= 0
        if fwd.any():
            f = o[fwd]
            cap[fwd] = np.minimum(cap[fwd], self.delivered[s.in_pe[f], s.in_color[f]] - s.in_base[f])
        want = (s.produced[o] < cap) & (s.credit[o] >= 1.0 - 1e-9)
        if len(roots):  # the output queue: at most output_queue_words ahead of the first hop
            ra = a[roots]
            rs = self.e.stream[ra]
            self.scratch_s[rs] = BIG
            np.minimum.at(self.scratch_s, rs, self.e.passed[ra])
            lead = s.produced[o] - np.where(self.scratch_s[o] == BIG, s.produced[o], self.scratch_s[o])
            self.scratch_s[rs] = BIG
            want &= lead < self.nums.output_queue_words
        if self.rate != 1.0:
            want &= self.out_credit[s.src[o]] >= 1.0
        c = np.flatnonzero(want)
        if not len(c):
            return
        c = c[self._winners(self.scratch_res, self.n_res + s.src[o[c]], o[c])]  # one ramp word per PE
        w = o[c]
        s.produced[w] += 1
        s.credit[w] -= 1.0
        self.words[self.n_res + s.src[w]] += 1
        if self.rate != 1.0:
            self.out_credit[s.src[w]] -= 1.0
        ev["moved"] = True
        fin = w[s.produced[w] >= s.len[w]]
        if len(fin):
            ev["produced"].append(fin)
            self.open = self.open[s.produced[self.open] < s.len[self.open]]

    @staticmethod
    def _winners(scratch, keys, prio) -> np.ndarray:
        """Mask of the entries with the lowest `prio` per key (prio unique within a key)."""
        scratch[keys] = BIG
        np.minimum.at(scratch, keys, prio)
        win = prio == scratch[keys]
        scratch[keys] = BIG
        return win

    def _compact(self) -> None:
        e = self.e
        keep = np.sort(self.act)
        new = np.full(e.n, -1, np.int64)
        new[keep] = np.arange(len(keep))
        for k in e.spec:
            arr = getattr(e, k)
            arr[:len(keep)] = arr[keep]
        e.parent[:len(keep)] = np.where(e.parent[:len(keep)] >= 0, new[np.maximum(e.parent[:len(keep)], 0)], -1)
        if self.hist is not None:
            self.hist[:, :len(keep)] = self.hist[:, keep]
        e.n = len(keep)
        self.act = np.arange(len(keep))

    def next_credit(self, t: int) -> np.ndarray:
        """Cycles after t at which a sender may produce a word without anything else moving: its
        start, or when a slow sender (a software relay) has earned its next word."""
        o = self.open
        if not len(o):
            return np.empty(0, np.int64)
        s = self.s
        start = s.start[o]
        later = start[start > t]
        run = o[start <= t]
        need = np.maximum(1.0 - s.credit[run], 0.0)
        wait = np.ceil(need / s.rate[run] - 1e-9).astype(np.int64)
        return np.concatenate([later, t + np.maximum(wait, 1)])

    def skip(self, t0: int, t1: int) -> None:
        """Cycles t0 < c < t1 pass with nothing moving: history is the present, and the
        senders and links earn their credit for those cycles."""
        gap = t1 - t0 - 1
        if gap <= 0:
            return
        o = self.open
        if len(o):
            s = self.s
            run = o[s.start[o] <= t0]
            s.credit[run] = np.minimum(s.credit[run] + gap * s.rate[run], np.maximum(s.rate[run], 1.0))
        if self.rate != 1.0:
            cap = max(self.rate, 1.0)
            self.res_credit = np.minimum(self.res_credit + gap * self.rate, cap)
            self.out_credit = np.minimum(self.out_credit + gap * self.rate, cap)
        if self.hist is not None and len(self.act):
            for c in range(t0 + 1, min(t1, t0 + 1 + self.alpha)):
                self.hist[c % self.alpha, self.act] = self.e.passed[self.act]
