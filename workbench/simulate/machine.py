"""PEs running a program on the mesh, cycle by cycle, as arrays over PEs.

A program is SPMD: one list of operations; each names the PEs that execute it (a mask) and
its per-PE arguments, and every PE walks the list in order, skipping the operations it is
not in. A PE's compute engine (CE) does one thing at a time:

- `Compute`: busy `cycles` (rounded up to whole cycles), its effect on the PE's SRAM applied;
- `Send`: a transfer of `elems` values on a route; after its setup (`stage`: the software
  routing stage beta = stage_cycles; `map_call`: one @map call; `none`) the words leave at
  `rate` (the link's, or a software relay's). Blocking without a tag (the CE produces every
  word); with a tag the CE only starts it and goes on (an asynchronous microthread; the
  setup is then a latency, not CE time), and `Wait` waits for its last word to leave;
- `Recv`: posts a receive on a route (no CE time); the words arrive into SRAM as they come;
  `Wait` on its tag waits for the last one; the data are written then;
- `Forward`: the CE streams a message through: it waits for the first word of the next
  message on `route_in`, pays its setup, then sends on `route_out` word by word as words
  arrive, each combined with local data on the way (the add of a chain allreduce, a copy);
- `Wait`: until the tagged transfers are complete.

The k-th message to arrive at a PE on a color is the one its k-th receive (or forward) on
that color takes, as a PE's input queue on a color is a FIFO. Values are fp32 whatever the
timed dtype (`Program.elem_bytes` sets the bytes each value takes on links and in SRAM), so a
result can be compared exactly with numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .fabric import Fabric
from .hardware import WORD_BYTES, SimNumbers
from .routes import DoesNotFit, Routes, SimulationError

RING = 8  # messages that may wait at a PE on one color before their receive is posted


@dataclass
class Compute:
    pes: np.ndarray
    cycles: object
    effect: object = None
    kind: str = "compute"  # compute | add (for the busy breakdown)


@dataclass
class Send:
    pes: np.ndarray
    route: object
    elems: int
    payload: object
    tag: str | None = None
    setup: str = "stage"
    rate: object = "link"


@dataclass
class Recv:
    pes: np.ndarray
    route: object
    elems: int
    into: object
    tag: str = "recv"


@dataclass
class Forward:
    pes: np.ndarray
    route_in: object
    route_out: object
    elems: int
    combine: object
    into: object = None
    setup: str = "stage"
    rate: object = "link"


@dataclass
class Wait:
    pes: np.ndarray
    tags: tuple


@dataclass
class Barrier:
    """Until every PE in `pes` has reached it. Free (ASSUMED): the bulk-synchronous steps of
    the T10 and Ladder baselines, whose closed forms charge no synchronization either (on
    the IPU T10 targets the sync is hardware; on a wafer it would be a reduction)."""
    pes: np.ndarray


@dataclass
class Program:
    """A mapping as the mesh runs it: routes (name -> Routes.add arguments), operations, the
    bytes each PE's buffers take, and `result()` / `expected` for the functional check."""
    name: str
    width: int
    height: int
    routes: dict
    ops: list
    sram_bytes: np.ndarray
    result: object
    expected: np.ndarray
    dtype: str = "fp16"
    elem_bytes: float = 2.0
    info: dict = field(default_factory=dict)


@dataclass
class SimResult:
    program: str
    cycles: int
    width: int
    height: int
    finish: np.ndarray  # per PE: the cycle it finished its program
    busy: dict  # per PE: cycles of compute, add, software (setup stages) and stream (CE sending)
    link_words: np.ndarray  # (height, width, 4): words each router sent N, E, S, W
    ramp_words: np.ndarray  # (height, width, 2): words into and out of each PE
    colors: int
    sram_bytes: np.ndarray
    correct: bool
    max_error: float
    info: dict

    @property
    def busy_cycles(self) -> np.ndarray:
        return sum(self.busy.values()).reshape(self.height, self.width)

    @property
    def utilization(self) -> float:
        """Mean share of the cycles the PEs' compute engines were busy."""
        return float(self.busy_cycles.mean() / max(self.cycles, 1))


def _mask(pes, n):
    """A boolean mask over the n PEs from a mask or a list of PE indices."""
    pes = np.asarray(pes)
    if pes.dtype == bool:
        return np.broadcast_to(pes.ravel(), (n,)).copy()
    m = np.zeros(n, bool)
    m[pes.astype(np.int64)] = True
    return m


class Machine:
    def __init__(self, program: Program, nums: SimNumbers):
        self.p, self.nums = program, nums
        self.n = program.width * program.height
        need = float(np.max(program.sram_bytes))
        if need > nums.sram_bytes:
            raise DoesNotFit(f"SRAM: a PE needs {need:,.0f} B of buffers, {nums.sram_bytes:,.0f} B are free per PE "
                             f"(sram_per_pe_bytes - sram_reserved_per_pe_bytes on {nums.label})")
        self.routes = Routes(program.width, program.height, nums.n_colors)
        for name, kw in program.routes.items():
            self.routes.add(name, **kw)
        self.fab = Fabric(self.routes, nums)
        n, C = self.n, nums.n_colors
        self.ops = program.ops
        for op in self.ops:
            op.pes = _mask(op.pes, n)
            for attr in ("route", "route_in", "route_out"):
                if hasattr(op, attr):
                    setattr(op, attr, self._colors(getattr(op, attr), op.pes))
        self.pc = np.zeros(n, np.int64)
        self.ce_free = np.zeros(n, np.int64)
        self.block = np.full(n, -1, np.int64)
        self.block_since = np.zeros(n, np.int64)
        self.finished = np.zeros(n, bool)
        self.finish = np.zeros(n, np.int64)
        self.busy = {k: np.zeros(n, np.int64) for k in ("compute", "add", "software", "stream")}
        self.started = np.zeros((n, C), np.int64)
        self.completed = np.zeros((n, C), np.int64)
        self.claimed = np.zeros((n, C), np.int64)
        self.consumed = np.zeros((n, C), np.int64)
        self.mail_stream = np.zeros((n, C, RING), np.int64)
        self.mail_base = np.zeros((n, C, RING), np.int64)
        self.ticket_op = np.zeros((n, C, RING), np.int64)
        self.tag_done: dict = {}
        self.tag_stream: dict = {}
        self.wake = True
        self.dirty = np.ones(n, bool)
        self._extra = []

    def _colors(self, route, pes):
        """A route group's color, or per PE (for the PEs in `pes`) from an array of names."""
        if isinstance(route, str):
            return self.routes.color[route] if pes.any() else -1
        names = np.asarray(route, dtype=object)
        out = np.full(names.shape, -1, np.int64)
        for name in set(names[pes].tolist()):
            out[names == name] = self.routes.color[name]
        return out

    def _words(self, elems) -> int:
        return int(np.ceil(elems * self.p.elem_bytes / WORD_BYTES))

    def _setup(self, kind: str) -> int:
        return {"stage": int(np.ceil(self.nums.stage_cycles)), "map_call": int(np.ceil(self.nums.map_call_cycles)),
                "none": 0}[kind]

    def _rate(self, rate) -> float:
        if rate == "link":
            return self.nums.link_words_per_cycle
        if rate == "relay":
            return min(self.nums.relay_bytes_per_cycle / WORD_BYTES, self.nums.link_words_per_cycle)
        return float(rate)

    def _tag(self, tag):
        if tag not in self.tag_done:
            self.tag_done[tag] = np.ones(self.n, bool)
            self.tag_stream[tag] = np.full(self.n, -1, np.int64)
        return self.tag_done[tag], self.tag_stream[tag]

    @staticmethod
    def _pick(v, idx):
        return v[idx] if np.ndim(v) else np.full(len(idx), v)

    # ---- operations -----------------------------------------------------------------------------
    def _start(self, i: int, op, idx: np.ndarray, t: int) -> np.ndarray:
        """Start `op` on PEs `idx` at cycle t; the mask of those that could."""
        if isinstance(op, Compute):
            d = np.ceil(np.asarray(self._pick(op.cycles, idx), float) - 1e-9).astype(np.int64)
            self.ce_free[idx] = t + d
            self.busy[op.kind][idx] += d
            if op.effect is not None:
                op.effect(idx)
            return np.ones(len(idx), bool)
        if isinstance(op, Barrier):
            if np.all(self.pc[op.pes] >= i):
                waiting = np.flatnonzero(op.pes & (self.pc == i))
                self.dirty[waiting] = True
                self._extra.append(waiting)
                return np.ones(len(idx), bool)
            return np.zeros(len(idx), bool)
        if isinstance(op, Wait):
            ok = np.ones(len(idx), bool)
            s = self.fab.s
            for tag in op.tags:
                done, st = self._tag(tag)
                ts = st[idx]
                ok &= done[idx] | ((ts >= 0) & (s.produced[np.maximum(ts, 0)] >= s.len[np.maximum(ts, 0)]))
            return ok
        if isinstance(op, Recv):
            c = self._pick(op.route, idx)
            k = self.claimed[idx, c]
            self._check_ring(idx, c, k)
            self.ticket_op[idx, c, k % RING] = i
            self.claimed[idx, c] += 1
            self.fab.posted[idx, c] += self._words(op.elems)
            done, st = self._tag(op.tag)
            done[idx], st[idx] = False, -1
            now = self.completed[idx, c] > k
            if now.any():
                self._complete(idx[now], c[now], k[now])
            return np.ones(len(idx), bool)
        if isinstance(op, Send):
            setup = self._setup(op.setup)
            c = self._pick(op.route, idx)
            vals = np.asarray(op.payload(idx), np.float32).reshape(len(idx), -1)
            sid = self.fab.start(src=idx, color=c, length=self._words(op.elems), start=t + setup,
                                 rate=self._rate(op.rate), payload=vals)
            if op.tag is None:
                self._block(idx, sid, t, setup)
            else:
                done, st = self._tag(op.tag)
                done[idx], st[idx] = False, sid
                self.ce_free[idx] = t
            return np.ones(len(idx), bool)
        if isinstance(op, Forward):
            c = self._pick(op.route_in, idx)
            ok = self.started[idx, c] > self.claimed[idx, c]
            idx, c = idx[ok], c[ok]
            if not len(idx):
                return ok
            k = self.claimed[idx, c]
            slot = k % RING
            sin, base = self.mail_stream[idx, c, slot], self.mail_base[idx, c, slot]
            self.ticket_op[idx, c, slot] = -1
            self.claimed[idx, c] += 1
            self.consumed[idx, c] += 1
            words = self._words(op.elems)
            self.fab.posted[idx, c] += words
            vals = np.asarray(op.combine(idx, self.fab.payload(sin)), np.float32).reshape(len(idx), -1)
            self.fab.consumed(sin)
            if op.into is not None:
                op.into(idx, vals)
            setup = self._setup(op.setup)
            sid = self.fab.start(src=idx, color=self._pick(op.route_out, idx), length=words, start=t + setup,
                                 rate=self._rate(op.rate), payload=vals, in_pe=idx, in_color=c, in_base=base)
            self._block(idx, sid, t, setup)
            return ok
        raise TypeError(f"unknown operation {op!r}")

    def _block(self, idx, sid, t, setup) -> None:
        self.block[idx] = sid
        self.block_since[idx] = t + setup
        self.ce_free[idx] = t + setup
        self.busy["software"][idx] += setup

    def _check_ring(self, idx, c, k) -> None:
        if np.any(k - self.consumed[idx, c] >= RING) or np.any(self.started[idx, c] - self.consumed[idx, c] > RING):
            raise SimulationError(f"{self.p.name}: more than {RING} messages wait at a PE on one color")

    def _complete(self, pe, c, k) -> None:
        """Receives (pe, c, k) whose message has fully arrived: write the data, mark the tag."""
        slot = k % RING
        ops, streams = self.ticket_op[pe, c, slot], self.mail_stream[pe, c, slot]
        keep = ops >= 0  # -1: a Forward took the message when it started
        for i in np.unique(ops[keep]):
            sel = keep & (ops == i)
            op = self.ops[int(i)]
            op.into(pe[sel], self.fab.payload(streams[sel]))
            self.fab.consumed(streams[sel])
            self.tag_done[op.tag][pe[sel]] = True
            self.consumed[pe[sel], c[sel]] += 1

    def _events(self, ev) -> bool:
        woke = False
        if ev["first"] is not None:
            d, c, st, base = ev["first"]
            self.dirty[d] = True
            k = self.started[d, c]
            if np.any(k - self.consumed[d, c] >= RING):
                raise SimulationError(f"{self.p.name}: more than {RING} messages wait at a PE on one color")
            self.mail_stream[d, c, k % RING], self.mail_base[d, c, k % RING] = st, base
            self.started[d, c] += 1
            woke = True
        if ev["done"] is not None:
            d, c, st = ev["done"]
            self.dirty[d] = True
            k = self.completed[d, c]
            self.completed[d, c] += 1
            ready = self.claimed[d, c] > k
            if ready.any():
                self._complete(d[ready], c[ready], k[ready])
            woke = True
        if len(ev["produced"]):
            self.dirty[self.fab.s.src[ev["produced"]]] = True
            woke = True
        return woke

    # ---- the run --------------------------------------------------------------------------------
    def _pe_step(self, t: int) -> bool:
        """Start what the PEs that may move at cycle t can start (the dirty ones: an event at
        them, or their CE free), until none can."""
        progressed_any = False
        s = self.fab.s
        look = np.flatnonzero(self.dirty)
        self.dirty[look] = False
        while len(look):
            blocked = look[self.block[look] >= 0]
            if len(blocked):
                b = self.block[blocked]
                rel = blocked[s.produced[b] >= s.len[b]]
                rel = rel[self.ce_free[rel] <= t]
                self.busy["stream"][rel] += t - self.block_since[rel]
                self.block[rel] = -1
            ready = look[~self.finished[look] & (self.ce_free[look] <= t) & (self.block[look] < 0)]
            if not len(ready):
                return progressed_any
            progressed = False
            moved = []
            pcs = self.pc[ready]
            for pc in np.unique(pcs):
                sel = ready[pcs == pc]
                if pc >= len(self.ops):
                    self.finished[sel] = True
                    self.finish[sel] = t
                    progressed = True
                    continue
                op = self.ops[pc]
                part = op.pes[sel]
                if (~part).any():
                    self.pc[sel[~part]] += 1
                    progressed = True
                    moved.append(sel[~part])
                run = sel[part]
                if len(run):
                    ok = self._start(int(pc), op, run, t)
                    if ok.any():
                        self.pc[run[ok]] += 1
                        progressed = True
                        moved.append(run[ok])
            progressed_any |= progressed
            moved += self._extra
            self._extra = []
            look = np.unique(np.concatenate(moved)) if moved else np.empty(0, np.int64)
        return progressed_any

    def run(self, max_cycles: int = 10**9) -> SimResult:
        t = 0
        fab = self.fab
        while True:
            free = (self.ce_free == t) & ~self.finished
            if free.any():
                self.dirty |= free
                self.wake = True
            if self.wake:
                self._pe_step(t)
            if self.finished.all() and not fab.busy:
                break
            moved = False
            self.wake = False
            if fab.busy:
                ev = fab.step(t)
                moved = ev["moved"]
                self.wake = self._events(ev)
            if moved or self.wake or t - fab.last_move < fab.alpha:
                t1 = t + 1  # something moved or may (words in flight)
            else:  # skip to the next thing that can happen: a CE frees, a sender starts or earns a word
                cand = self.ce_free[~self.finished]
                nxt = np.concatenate([cand[cand > t], fab.next_credit(t)])
                if not len(nxt):
                    self._deadlock(t)
                t1 = int(nxt.min())
            fab.skip(t, t1)
            t = t1
            if t > max_cycles:
                raise SimulationError(f"{self.p.name}: still running after {max_cycles:,} cycles")
        return self._result()

    def _deadlock(self, t):
        stuck = np.flatnonzero(~self.finished)
        pe = stuck[0]
        op = self.ops[self.pc[pe]] if self.pc[pe] < len(self.ops) else None
        raise SimulationError(f"{self.p.name}: deadlock at cycle {t}: {len(stuck)} PEs wait, e.g. PE "
                              f"({pe % self.p.width}, {pe // self.p.width}) at operation {self.pc[pe]} "
                              f"({type(op).__name__})")

    def _result(self) -> SimResult:
        got = np.asarray(self.p.result(), np.float32)
        exp = np.asarray(self.p.expected, np.float32)
        same = got.shape == exp.shape
        err = float(np.max(np.abs(got - exp))) if same and got.size else float("inf")
        H, W, n = self.p.height, self.p.width, self.n
        words = self.fab.words
        return SimResult(program=self.p.name, cycles=int(self.finish.max()), width=W, height=H,
                         finish=self.finish.reshape(H, W), busy={k: v.copy() for k, v in self.busy.items()},
                         link_words=words[:4 * n].reshape(H, W, 4),
                         ramp_words=np.stack([words[4 * n:5 * n], words[5 * n:6 * n]], -1).reshape(H, W, 2),
                         colors=self.routes.colors_used, sram_bytes=np.broadcast_to(self.p.sram_bytes, (n,)).copy(),
                         correct=bool(same and np.array_equal(got, exp)), max_error=err, info=dict(self.p.info))


def simulate(program: Program, nums: SimNumbers, *, max_cycles: int = 10**9) -> SimResult:
    """Run `program` on the mesh `nums` describes. Raises DoesNotFit when its buffers or routes
    need more SRAM or colors than a PE has, SimulationError when it cannot run as written."""
    return Machine(program, nums).run(max_cycles=max_cycles)
