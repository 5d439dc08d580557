"""IssueQueuePM (hdl/issue_pm.py) on its own in amaranth.sim, against a model
of the rules its docstring and IssueQueue's (hdl/issue_queue.py) state.

The push stream is driven as the slot table drives it: decided messages in
arrival order (combines, retransmissions, discards that only claim payload
space), random slots and copies with many messages to one copy, 1..K/L beats,
RESULTs, random gaps; a combine pushed only when ``has_room``, anything else
only when ``will_be_empty``; ``data_addr`` the payload buffer's head, which
claims each message's beats and takes a message only while its beats fit
before the queue's ``data_free``.

The beats issued are observed at the lane loop's ``issue`` port (the queue
as built: :func:`observed` only keeps its ``loop``) and checked, cycle by
cycle and exactly, against the model:

* every beat of every pushed message is issued exactly once, as the model's
  beat (retransmission flag, accumulator address (copy x K/L + beat), lane
  mask, last, first, result, bf16, dtype, op), and ``data_addr`` two cycles
  later is its payload beat;
* a message's beats issue back to back once it starts; starts are at least
  two cycles apart; the first beat at least five cycles after the push;
* a message never starts before an older one it must follow (one of its
  slot, a retransmission, or for a RESULT another RESULT) has issued its
  last beat; two combines of one copy start at least ``spacing`` cycles
  apart and every two combine beats to one accumulator address issue at
  least ``spacing`` apart; a retransmission issues only with no combine
  beat in the lanes (``lanes_busy`` low);
* the schedule: in a cycle free to start (nothing issuing, no start in the
  cycle before) the oldest message that may start starts, and one starts if
  any may ("may start": the rules above as the queue forms them, a cycle
  ahead: pushed five cycles before, holds of max(spacing, 3) cycles, a
  retransmission once ``lanes_busy`` was low two cycles before);
* ``has_room`` / ``will_be_empty``: fewer than ``depth`` / no messages
  pushed before this cycle that had beats left in the previous one; the
  entries the pushes need never exceed ``depth`` (from two cycles after
  the push to the cycle after the last beat);
* ``data_free`` never passes the first beat of a message pushed before it
  with beats left in the previous cycle, nor the head of that cycle, and
  lags them by at most one more cycle of the head (bounds that only move
  forward);
* ``busy``: a message pushed and not left, or a beat in the loop or on
  ``res_beat``; ``stall``: a cycle late, no beat issued while a held combine
  waited; ``res_beat``: each RESULT beat's mask and last flag, ``latency`` + 1
  cycles after a combine's issue, ``read_stages`` + 1 after a
  retransmission's;
* at the end, everything issued: not busy, empty, ``data_free`` at the head.

Seeds: the ``seed`` fixture (tests/conftest.py), printed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from amaranth.sim import Simulator

from netagg.hdl import layouts
from netagg.hdl.core import _pow2_at_least
from netagg.hdl.issue_pm import IssueQueuePM
from netagg.hdl.issue_queue import ISSUE_DEPTH
from netagg.hdl.lane_loop import LaneLoop, loop_beat
from netagg.hdl.slot_layouts import issue_request, result_beat
from netagg.params import Params

# name: (params, queue keyword arguments, messages)
CASES = {
    # the defaults: L = 8, K = 64 (K/L = 8), S = 256, six entries, spacing 8
    "default": (Params(), {}, 1500),
    # K/L = 3 (accumulator addresses kept in the entries), spacing 2 (holds
    # of three cycles: starts are two apart), three entries
    "l2k6-fp0-d3": (Params(lanes=2, elements=6, workers=2, slots=4, jobs=1),
                    {"fp_stages": 0, "depth": 3}, 500),
    # one lane, spacing 4, two entries
    "l1k4-fp2-d2": (Params(lanes=1, elements=4, workers=2, slots=2, jobs=1,
                           dtypes=("int32", "bf16")),
                    {"fp_stages": 2, "depth": 2}, 500),
    # three lanes (the last beat's mask from the remainder), K/L = 5,
    # spacing 5, five entries
    "l3k15-fp4-d5": (Params(lanes=3, elements=15, workers=2, slots=3, jobs=1),
                     {"fp_stages": 4, "depth": 5}, 600),
}


def _data_beats(params: Params) -> int:
    """The core's payload buffer (hdl/core.py): 2 K/L + 3 beats, rounded up
    to a power of two."""
    return _pow2_at_least(2 * params.beats + 3)


def _fields(layout):
    return [(name, f.offset, f.width) for name, f in layout]


def _unpack(fields, raw: int) -> dict:
    return {name: (raw >> off) & ((1 << width) - 1) for name, off, width in fields}


def _pack(fields, values: dict) -> int:
    raw = 0
    for name, off, width in fields:
        value = int(values[name])
        assert 0 <= value < 1 << width, (name, value)
        raw |= value << off
    return raw


def observed(queue_cls):
    """``queue_cls`` as built, its lane loop kept (``loop``) to observe the
    beats it issues."""
    class Observed(queue_cls):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            self.loop = m.submodules.loop
            return m
    return Observed


@dataclass(eq=False)
class Msg:
    n: int                  # arrival index
    kind: str               # "combine", "rtx" or "discard"
    slot: int
    ver: int
    first: int
    result: int
    dtype: int
    op: int
    beats: int
    count: int
    start: int = 0          # its first payload beat (absolute)
    push: int | None = None
    issued: list = field(default_factory=list)   # the cycle of each beat issued

    @property
    def rtx(self) -> int:
        return int(self.kind == "rtx")

    @property
    def copy(self) -> int:
        return self.slot * 2 + self.ver       # Cat(ver, slot)

    @property
    def last(self):
        """The cycle of its last beat (None while beats are left)."""
        return self.issued[-1] if len(self.issued) == self.beats else None

    def left_by(self, c) -> bool:
        """Some beat was left to issue after cycle ``c``."""
        return self.last is None or self.last > c

    def __repr__(self):
        return (f"<msg {self.n} {self.kind} slot {self.slot} ver {self.ver} "
                f"{self.beats} beats{' RESULT' if self.result else ''} pushed {self.push} "
                f"issued {self.issued}>")


def _messages(rng: random.Random, params: Params, n: int) -> list[Msg]:
    """Decided messages in arrival order, crowding one copy (``hot``)."""
    L, B, S = params.lanes, params.beats, params.slots
    dtypes = [layouts.DType[d.upper()].value for d in params.dtypes]
    ops = [layouts.Op[o.upper()].value for o in params.ops]
    hot = (rng.randrange(S), rng.randrange(2))
    pool = sorted({0, S - 1, hot[0], rng.randrange(S)})
    out = []
    for k in range(n):
        r = rng.random()
        kind = "rtx" if r < 0.06 else "discard" if r < 0.13 else "combine"
        r = rng.random()
        if r < 0.4:
            slot, ver = hot
        elif r < 0.5:
            slot, ver = hot[0], 1 - hot[1]
        else:
            slot, ver = rng.choice(pool), rng.randrange(2)
        r = rng.random()
        beats = (1 if r < 0.35 else min(2, B) if r < 0.55 else B if r < 0.75
                 else rng.randint(1, B))
        out.append(Msg(n=k, kind=kind, slot=slot, ver=ver, first=rng.randrange(2),
                       result=int(kind == "rtx" or rng.random() < 0.3),
                       dtype=rng.choice(dtypes), op=rng.choice(ops), beats=beats,
                       count=rng.randint((beats - 1) * L + 1, beats * L)))
    return out


def _beat(params: Params, m: Msg, b: int) -> dict:
    """Beat ``b`` of ``m`` as the lane loop's issue port must carry it."""
    L = params.lanes
    return {"rtx": m.rtx, "addr": m.copy * params.beats + b,
            "mask": (1 << min(L, m.count - b * L)) - 1, "last": int(b == m.beats - 1),
            "first": m.first, "result": m.result,
            "bf16": int(m.dtype == layouts.DType.BF16.value), "dtype": m.dtype, "op": m.op}


def _follows(m: Msg, j: Msg) -> bool:
    """``m`` must follow the older ``j``: of its slot, a retransmission, or
    both RESULTs."""
    return j.slot == m.slot or bool(j.rtx) or bool(j.result and m.result)


def run(case: str, seed: int, queue_cls=IssueQueuePM) -> dict:
    params, kw, n_msgs = CASES[case]
    rng = random.Random(seed)
    P = params
    B = P.beats
    db = _data_beats(P)
    M = 2 * db                                  # data_addr / data_free: mod 2 x data_beats
    fp_stages = kw.get("fp_stages")
    D = LaneLoop.spacing_of(fp_stages)          # spacing (read after write)
    latency = LaneLoop.latency_of(fp_stages)    # issue to write-back
    read_stages = LaneLoop.read_stages_of()
    dut = observed(queue_cls)(P, data_beats=db, **kw)
    N = dut.depth
    msgs = _messages(rng, P, n_msgs)
    req_f = _fields(issue_request(P, db))
    beat_f = _fields(loop_beat(P))
    res_f = _fields(result_beat(P))
    stats = dict(cycles=0, full=0, starts=0, overtakes=0, held=0, rtx=0, results=0,
                 stalls=0, max_held=0)

    sim = Simulator(dut)
    sim.add_clock(1e-6)

    def fail(c, what):
        raise AssertionError(f"[{case} seed {seed}] cycle {c}: {what}")

    async def tb(ctx):
        loop = dut.loop
        heads = {}              # cycle -> data_head (absolute) during that cycle
        head = 0                # first payload beat of the next message (absolute)
        freed = 0               # data_free (absolute) as seen this cycle
        nxt = 0                 # next message to decide
        recent = []             # pushed and not long gone, in arrival order
        waiting = []            # pushed, with beats left, in arrival order
        active = None           # the message issuing
        last_start = -100
        last_combine_beat = -1000
        start_of_copy = {}      # copy -> its last combine start
        addr_beat = {}          # accumulator address -> its last combine beat
        beat_log = {}           # cycle -> (message, beat) issued
        loop_until = -1         # the loop (stages, res_beat) holds a beat until then
        stall_next = 0
        p_try = 1.0
        idle_since = last_claim = 0
        c = 0

        def may_start(m, c):
            """The queue's "may start" at ``c`` (a start free at ``c``)."""
            if m.push + 5 > c:
                return False
            if any(_follows(m, j) for j in waiting if j.n < m.n):
                return False
            if m.rtx:
                # lanes_busy (a combine beat in the loop in the cycle
                # before) low in c - 2
                return c >= last_combine_beat + latency + 4
            return c >= start_of_copy.get(m.copy, -1000) + max(D, 3)

        def contract(m, c):
            """The rules a start of ``m`` at ``c`` breaks."""
            bad = []
            if m.push + 5 > c:
                bad.append(f"first beat {c - m.push} cycles after its push (five at least)")
            if c < last_start + 2:
                bad.append(f"start {c - last_start} cycle(s) after the one before")
            for j in waiting:
                if j.n < m.n and _follows(m, j):
                    bad.append(f"starts before the older {j} it must follow has issued "
                               "its last beat")
            if m.rtx and c < last_combine_beat + latency + 2:
                bad.append(f"a retransmission with a combine beat (issued {last_combine_beat})"
                           " in the lanes")
            if not m.rtx and c < start_of_copy.get(m.copy, -1000) + D:
                bad.append(f"starts {c - start_of_copy[m.copy]} cycles after a combine of its "
                           f"copy (spacing {D})")
            return bad

        def issued(m, b, c):
            nonlocal active, last_start, last_combine_beat, loop_until
            m.issued.append(c)
            beat_log[c] = (m, b)
            if m.rtx:
                loop_until = max(loop_until, c + read_stages + 1)
            else:
                addr = m.copy * B + b
                if c < addr_beat.get(addr, -1000) + D:
                    fail(c, f"beat {b} of {m}: a combine beat to accumulator {addr} "
                            f"{c - addr_beat[addr]} cycles after the one before (spacing {D})")
                addr_beat[addr] = c
                last_combine_beat = c
                loop_until = max(loop_until, c + latency + m.result)
            if b == 0:
                stats["starts"] += 1
                last_start = c
                if not m.rtx:
                    start_of_copy[m.copy] = c
            if b == m.beats - 1:
                waiting.remove(m)
                active = None
            else:
                active = m

        while True:
            heads[c] = head
            has_room = ctx.get(dut.has_room)
            empty = ctx.get(dut.will_be_empty)
            busy = ctx.get(dut.busy)
            stall = ctx.get(dut.stall)
            data_free = ctx.get(dut.data_free)
            data_addr = ctx.get(dut.data_addr)
            valid = ctx.get(loop.issue.valid)
            got = _unpack(beat_f, ctx.get(loop.issue.payload.as_value())) if valid else None
            res_valid = ctx.get(dut.res_beat.valid)
            res = _unpack(res_f, ctx.get(dut.res_beat.payload.as_value()))
            lanes_busy = ctx.get(loop.lanes_busy)

            # ---- the beat issued now
            free_now = active is None and c >= last_start + 2
            if active is not None:
                b = len(active.issued)
                if not valid:
                    fail(c, f"{active} issued beat {b - 1} in the cycle before and not beat "
                            f"{b} now: its beats are not back to back")
                if got != _beat(P, active, b):
                    fail(c, f"issued {got}, not beat {b} of {active}: {_beat(P, active, b)}")
                issued(active, b, c)
            elif valid:
                copy, b = divmod(got["addr"], B)
                cands = [m for m in waiting if m.copy == copy and not m.issued]
                if b != 0 or not cands:
                    fail(c, f"issued {got}: beat {b} of copy {copy}, no pending message's")
                m = cands[0]
                bad = contract(m, c)
                if bad:
                    fail(c, f"{m} starts: " + "; ".join(bad))
                if got != _beat(P, m, 0):
                    fail(c, f"issued {got}, not the first beat of {m}: {_beat(P, m, 0)}")
                if m.rtx and lanes_busy:
                    fail(c, f"{m} starts while lanes_busy")
                may = [x for x in waiting if not x.issued and may_start(x, c)]
                if not may or may[0] is not m:
                    fail(c, f"schedule: {m} starts; the oldest that may start is "
                            f"{may[0] if may else None}")
                if any(x.n < m.n and not x.issued for x in waiting):
                    stats["overtakes"] += 1
                stats["rtx"] += m.rtx
                issued(m, 0, c)
            elif free_now:
                may = [x for x in waiting if not x.issued and may_start(x, c)]
                if may:
                    fail(c, f"schedule: nothing starts, but {may[0]} may")
                if any(not x.issued and x.push + 5 <= c and not x.rtx
                       and not any(_follows(x, j) for j in waiting if j.n < x.n)
                       for x in waiting):
                    stats["held"] += 1          # a combine held by its copy's hold only

            # ---- the other outputs, against the model
            if c - 2 in beat_log:
                m, b = beat_log[c - 2]
                want = (m.start + b) % db
                if data_addr != want:
                    fail(c, f"data_addr {data_addr}, not {want}: payload beat {b} of {m} "
                            f"(issued at {c - 2})")
            want_res = None
            for t in (c - latency - 1, c - read_stages - 1):
                if t in beat_log:
                    m, b = beat_log[t]
                    if m.result and (m.rtx == (t == c - read_stages - 1)):
                        want_res = (m, b)
            if res_valid != (want_res is not None):
                fail(c, f"res_beat.valid {res_valid}, expected a RESULT beat: {want_res}")
            if want_res is not None:
                m, b = want_res
                exp = _beat(P, m, b)
                if (res["mask"], res["last"], res["bf16"]) != (exp["mask"], exp["last"],
                                                              exp["bf16"]):
                    fail(c, f"res_beat {res} is not beat {b} of {m}")
                stats["results"] += 1
            # held: pushed before this cycle, beats left in the previous one
            held = [m for m in recent if m.left_by(c - 2)]
            if has_room != (len(held) < N) or empty != (not held):
                fail(c, f"has_room {has_room}, will_be_empty {empty} with {len(held)} of {N} "
                        f"held: {held}")
            stats["full"] += not has_room
            # entries: from two cycles after the push to the cycle after the last beat
            placed = [m for m in recent if m.push + 2 <= c and m.left_by(c - 2)]
            stats["max_held"] = max(stats["max_held"], len(placed))
            if len(placed) > N:
                fail(c, f"{len(placed)} messages need entries, {N} held: {placed}")
            want_busy = bool([m for m in recent if m.left_by(c - 2)]) or c <= loop_until
            if busy != want_busy:
                fail(c, f"busy {busy}, not {int(want_busy)}")
            if stall != stall_next:
                fail(c, f"stall {stall}, not {stall_next}")
            stats["stalls"] += stall
            # data_free: the first payload beat still needed in the previous
            # cycle (by the messages pushed before it with beats left, and the
            # head), lagging by at most a cycle of the head's moves
            need = [m.start for m in recent if m.push <= c - 2 and m.left_by(c - 2)]
            hi = min([heads.get(c - 1, 0)] + need)
            lo = min([heads.get(c - 2, 0)] + need)
            if (data_free - lo) % M > hi - lo:
                fail(c, f"data_free {data_free} (mod {M}) outside {lo}..{hi}: frees "
                        f"{'a beat still needed' if (data_free - hi) % M < M // 2 else 'late'}")
            freed = lo + (data_free - lo) % M
            stall_next = int(not valid and any(not x.rtx and not x.issued and x.push <= c - 3
                                               for x in waiting))

            # ---- this cycle's decision (the slot table's)
            if c % 64 == 0:
                p_try = rng.choice((0.1, 0.5, 1.0, 1.0))
            push = None
            if nxt < len(msgs) and rng.random() < p_try:
                m = msgs[nxt]
                room = has_room if m.kind == "combine" else empty
                if room and head + m.beats <= freed + db:
                    last_claim = c
                    m.start = head
                    head += m.beats
                    nxt += 1
                    if m.kind != "discard":
                        push = m
            if push is not None:
                ctx.set(dut.push.valid, 1)
                ctx.set(dut.push.payload.as_value(), _pack(req_f, {
                    "rtx": push.rtx, "slot": push.slot, "ver": push.ver, "first": push.first,
                    "result": push.result, "dtype": push.dtype, "op": push.op,
                    "beats": push.beats, "count": push.count, "data_addr": push.start % M}))
                push.push = c
                recent.append(push)
                waiting.append(push)
            else:
                ctx.set(dut.push.valid, 0)
                ctx.set(dut.push.payload.as_value(), rng.getrandbits(sum(w for *_, w in req_f)))
            ctx.set(dut.data_head, head % M)
            recent[:] = [m for m in recent if m.left_by(c - 4)]

            if valid or push is not None:
                idle_since = c
            if c - idle_since > 300:
                fail(c, f"no beat and no push for 300 cycles: {waiting}")
            if nxt == len(msgs) and not waiting and c > max(loop_until, last_claim + 2) + 2:
                break
            await ctx.tick()
            c += 1

        # drained: every pushed message issued (checked beat by beat above)
        assert all(m.last is not None for m in msgs if m.kind != "discard")
        await ctx.tick()
        assert ctx.get(dut.busy) == 0
        assert ctx.get(dut.will_be_empty) == 1 and ctx.get(dut.has_room) == 1
        assert ctx.get(dut.data_free) == head % M
        stats["cycles"] = c

    sim.add_testbench(tb)
    sim.run()
    return stats


@pytest.mark.parametrize("case", sorted(CASES))
def test_issue_pm_model(case, seed):
    stats = run(case, seed)
    print(case, stats)
    # the run reached the cases the rules are about: every entry taken,
    # has_room low, combines held by their copy's hold, retransmissions,
    # RESULT beats, stalls, and (where a hold outlasts the two cycles
    # between starts and three entries can hold the message held, the one
    # that started and a younger one) messages overtaking older ones
    params, kw, _ = CASES[case]
    depth = kw.get("depth", ISSUE_DEPTH["memory"])
    assert stats["max_held"] == depth and stats["full"] > 0 and stats["held"] > 0
    assert stats["rtx"] > 0 and stats["results"] > 0 and stats["stalls"] > 0
    if LaneLoop.spacing_of(kw.get("fp_stages")) > 3 and depth >= 3:
        assert stats["overtakes"] > 0
