"""hdl/decision.Decision against the golden model's slot algorithm
(netagg.sim.message_model.Switch): from random slot states reached by random
traffic (new rounds, repeats, mismatches, retransmissions, both copies),
the decision for the next message (verdict, new slot word, RESULT
destinations, count and round) is the one the golden model takes."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from seeds import seed_of

from netagg.hdl.decision import Decision, beats_of
from netagg.hdl.slot_layouts import Mode
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.message_model import Switch, make_contrib
from netagg.sim.traffic import random_values
from netagg.wire import DType, Op, Verdict

CONFIGS = {
    "l3k9w4": (dict(lanes=3, elements=9, workers=4, slots=5, jobs=2),
               [dict(id=0, workers=4, slot_base=0, slots=2),
                dict(id=1, workers=2, slot_base=2, slots=3)]),
    "l1k4w3": (dict(lanes=1, elements=4, workers=3, slots=2, jobs=1, dtypes=("int32", "bf16")),
               [dict(id=0, workers=3, slot_base=0, slots=2)]),
    "l4k16w1": (dict(lanes=4, elements=16, workers=2, slots=4, jobs=3),
                [dict(id=2, workers=1, slot_base=1, slots=2),
                 dict(id=0, workers=2, slot_base=3, slots=1)]),
}

DROPS = [v for v in Verdict if v.counter and v not in (Verdict.MISMATCH, Verdict.DUPLICATE)]


def _copy_value(state) -> dict:
    """A golden CopyState as a copy_state layout value."""
    dtype, op, count, offset = state.meta or (0, 0, 0, 0)
    return {"bits": sum(1 << w for w in state.bits), "n": state.n, "done": int(state.done),
            "open": int(state.n != 0 and not state.done),
            "dtype": dtype, "op": op, "count": count, "offset": offset}


def _copy_of(const) -> dict:
    return {name: int(getattr(const, name).value) if name in ("dtype", "op")
            else int(getattr(const, name)) for name in
            ("bits", "n", "done", "open", "dtype", "op", "count", "offset")}


def _messages(rng: random.Random, params: Params, jobs: JobTable, sw: Switch, n: int):
    """Messages crowding few slots, SwitchML-style (a slot's rounds alternate
    ``ver``), chosen from the golden model's state ``sw`` (which the caller
    advances): mostly a new contributor to the slot's current round,
    sometimes any worker (a duplicate or retransmission) or the other copy,
    sometimes one field of the round's metadata changed (a mismatch while
    the round is open)."""
    dtypes = [DType.from_name(d) for d in params.dtypes]
    ops = [Op.from_name(o) for o in params.ops]
    current = {}        # (job, slot) -> ver of its current round
    planned = {}        # (job, slot, ver) -> metadata of a round not yet opened

    def fresh():
        return (rng.choice(dtypes), rng.choice(ops), rng.randint(1, params.elements),
                rng.choice((0, rng.getrandbits(32))))

    for _ in range(n):
        job = rng.choice(list(jobs))
        slot = rng.randrange(job.slots)
        ver = current.setdefault((job.id, slot), rng.randrange(2))
        state = sw.copy_state(job.id, slot, ver)
        if state.done:                  # the round is complete: the next one
            ver = current[(job.id, slot)] = 1 - ver
            state = sw.copy_state(job.id, slot, ver)
        if state.n and not state.done:
            meta = state.meta
            todo = [w for w in range(job.workers) if w not in state.bits]
        else:
            meta = planned.setdefault((job.id, slot, ver), fresh())
            todo = [w for w in range(job.workers) if w not in state.bits] or [0]
        r = rng.random()
        worker = rng.choice(todo) if r < 0.6 else rng.randrange(job.workers)
        if 0.6 <= r < 0.7:              # one field of the metadata changed
            field, other = rng.randrange(4), fresh()
            meta = tuple(other[i] if i == field else v for i, v in enumerate(meta))
        elif 0.7 <= r < 0.85:           # the other copy
            ver = 1 - ver
            other = sw.copy_state(job.id, slot, ver)
            meta = other.meta or meta
        dtype, op, count, offset = meta
        yield job, make_contrib(job.id, slot, ver, worker, random_values(rng, dtype, count),
                                dtype=dtype, op=op, offset=offset)
        if sw.copy_state(job.id, slot, ver).n:
            planned.pop((job.id, slot, ver), None)


def _set_state(ctx, dut, rng, words, ver):
    """The slot word on the decision's input: ``state``, or with several
    sources, each copy in a random source (``take`` pointing at it, ``last``
    with the message's copy ``ver``) and random words in the others."""
    if not hasattr(dut, "states"):
        ctx.set(dut.state, words)
        return
    n = len(dut.states)
    width = len(dut.states[0].as_value())
    last = [0, 0]
    for k in range(n):
        ctx.set(dut.states[k].as_value(), rng.getrandbits(width))
    for v in range(2):
        k = rng.randrange(n)
        ctx.set(dut.states[k][v], words[v])
        # take: the first set bit chooses; none set, the last source
        bits = (1 << k) | (rng.getrandbits(n - 1) & ~((1 << (k + 1)) - 1)) if k < n - 1 \
            else 0
        ctx.set(dut.take[v], bits & ((1 << (n - 1)) - 1))
        # last[v]: the message's copy (ver) is v and the last source's
        last[v] = int(v == ver and k == n - 1)
    ctx.set(dut.last, last[0] | last[1] << 1)


def _set_pre(ctx, dut, worker, workers):
    """With several sources: the descriptor's terms the caller registers."""
    if hasattr(dut, "pre"):
        ctx.set(dut.pre, {"worker_bit": 1 << worker,
                          "workers_m1": min(workers - 1, len(dut.pre.worker_bit)),
                          "workers_is1": int(workers == 1)})


@pytest.mark.parametrize("latency,sources", [(0, 1), (1, 1), (1, 3)])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_decision_matches_golden_model(name, latency, sources, request):
    seed = seed_of(request)
    pd, jd = CONFIGS[name]
    params = Params(**pd)
    jobs = JobTable([Job(enabled=True, **j) for j in jd], params)
    rng = random.Random(seed)
    sw = Switch(params, jobs)
    dut = Decision(params, latency=latency, sources=sources)
    L = params.lanes
    seen = {"verdicts": set(), "checked": 0}

    async def tb(ctx):
        for job, msg in _messages(rng, params, jobs, sw, 600):
            # another slot's word, the inputs while a stage register holds
            other_job = rng.choice(list(jobs))
            other_slot = (other_job.id, rng.randrange(other_job.slots))
            verdict, h = sw.validate(msg)
            assert verdict is None
            slot_abs = job.slot_base + h.slot
            before = [sw.copy_state(job.id, h.slot, v) for v in (0, 1)]
            # Now and then the validator has dropped the message already.
            dropped = rng.choice(DROPS) if rng.random() < 0.1 else None
            _set_state(ctx, dut, rng, [_copy_value(s) for s in before], h.ver)
            ctx.set(dut.desc, {
                "verdict": Verdict.ACCEPT if dropped is None else dropped,
                "meta": {"ver": h.ver, "job": h.job, "slot": h.slot, "worker": h.worker,
                         "dtype": h.dtype, "op": h.op, "count": h.count, "offset": h.offset},
                "tag": rng.getrandbits(16), "slot_abs": slot_abs, "workers": job.workers,
                "beats": -(-h.count // L)})
            _set_pre(ctx, dut, h.worker, job.workers)
            if latency:
                # sampled at an edge with en high, then held while en is low
                # and the inputs change
                ctx.set(dut.en, 1)
                await ctx.tick()
                ctx.set(dut.en, 0)
                other_ver = rng.randrange(2)
                _set_state(ctx, dut, rng,
                           [_copy_value(sw.copy_state(*other_slot, v)) for v in (0, 1)],
                           other_ver)
                ctx.set(dut.desc.meta.worker, rng.randrange(params.workers))
                _set_pre(ctx, dut, rng.randrange(params.workers), rng.randrange(1, 9))
                ctx.set(dut.desc.meta.ver, other_ver)
                ctx.set(dut.desc.verdict, rng.choice(list(Verdict)))
                await ctx.tick()
            got_verdict = Verdict(ctx.get(dut.verdict).value)
            mode = ctx.get(dut.mode)
            if dropped is not None:
                assert got_verdict is dropped and mode is Mode.DISCARD
                assert not ctx.get(dut.needs_result) and not ctx.get(dut.completes)
                assert not ctx.get(dut.accepted)
                assert [_copy_of(ctx.get(dut.state_after)[v]) for v in (0, 1)] == \
                    [_copy_value(s) for s in before]
                continue
            out = sw.receive(msg)
            ctx_info = (seed, seen["checked"], before, h)
            assert got_verdict is out.verdict, ctx_info
            assert ctx.get(dut.accepted) == (out.verdict is Verdict.ACCEPT), ctx_info
            seen["verdicts"].add(out.verdict)
            seen["checked"] += 1
            expect_mode = {Verdict.ACCEPT: Mode.LANES,
                           Verdict.RETRANSMIT: Mode.RETRANSMIT}.get(out.verdict, Mode.DISCARD)
            assert mode is expect_mode, ctx_info
            after = [sw.copy_state(job.id, h.slot, v) for v in (0, 1)]
            assert [_copy_of(ctx.get(dut.state_after)[v]) for v in (0, 1)] == \
                [_copy_value(s) for s in after], ctx_info
            if out.verdict is Verdict.ACCEPT:
                new_state = ctx.get(dut.new_state)
                assert [_copy_of(new_state[v]) for v in (0, 1)] == \
                    [_copy_value(s) for s in after], ctx_info
                assert ctx.get(dut.first) == (before[h.ver].n == 0 or before[h.ver].done)
            else:
                assert after == before      # the golden model leaves the slot alone
            # The RESULTs: destinations, contributor count, round and length.
            dests = [r.header.worker for r in out.results]
            assert ctx.get(dut.needs_result) == bool(out.results), ctx_info
            assert ctx.get(dut.completes) == (out.verdict is Verdict.ACCEPT and bool(dests))
            if out.verdict is Verdict.ACCEPT and dests:
                assert dests == list(range(job.workers))
            if out.verdict is Verdict.RETRANSMIT:
                assert dests == [h.worker]
            if out.results:
                r = out.results[0].header
                rnd = ctx.get(dut.round)
                assert ctx.get(dut.result_n) == r.status & 0xFF, ctx_info
                assert (int(rnd.dtype.value), int(rnd.op.value), rnd.count, rnd.offset) == \
                    (r.dtype, r.op, r.count, r.offset), ctx_info
                assert ctx.get(dut.beats) == -(-r.count // L)

    sim = Simulator(dut)
    if latency:
        sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    # The traffic reached every outcome of the slot algorithm.
    assert seen["verdicts"] == {Verdict.ACCEPT, Verdict.RETRANSMIT, Verdict.MISMATCH,
                                Verdict.DUPLICATE}, seen


@pytest.mark.parametrize("workers", [3, 5, 6, 9, 255])
def test_round_of_more_workers_than_the_core_has_never_completes(workers):
    """A job register written with W above the core's W_max (the host
    refuses that; the register holds 8 bits): each contribution of a new
    worker is counted and the round stays open (the count reaches at most
    W_max). The decision compares the count in its own width, so W - 1 is
    clamped first (``desc_terms``), not truncated: W = 5, 6, 9 alias 0, 1,
    0 there."""
    params = Params(lanes=2, elements=4, workers=2, slots=2, jobs=1)
    dut = Decision(params)

    async def tb(ctx):
        closed = {"bits": 0, "n": 0, "done": 0, "open": 0, "dtype": 0, "op": 0,
                  "count": 4, "offset": 0}
        words = [dict(closed), dict(closed)]
        for worker in range(params.workers):
            ctx.set(dut.state, words)
            ctx.set(dut.desc, {
                "verdict": Verdict.ACCEPT,
                "meta": {"ver": 0, "job": 0, "slot": 0, "worker": worker,
                         "dtype": 0, "op": 0, "count": 4, "offset": 0},
                "tag": 0, "slot_abs": 0, "workers": workers, "beats": 2})
            await ctx.delay(1e-9)
            assert Verdict(ctx.get(dut.verdict).value) is Verdict.ACCEPT
            assert not ctx.get(dut.completes) and not ctx.get(dut.needs_result)
            words[0] = _copy_of(ctx.get(dut.new_state)[0])
            assert words[0]["n"] == worker + 1 and words[0]["open"] and not words[0]["done"]

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("lanes,width", [(1, 5), (3, 7), (5, 4), (8, 9), (12, 8), (40, 9)])
def test_beats_of_is_the_ceiling_for_every_count(lanes, width):
    # every count of the field: the shift (powers of two) and the
    # thermometer of compares (other lane counts) against ceil(count / L)
    count, beats = Signal(width), Signal(16)
    m = Module()
    m.d.comb += beats.eq(beats_of(count, lanes))

    async def tb(ctx):
        for v in range(1 << width):
            ctx.set(count, v)
            assert ctx.get(beats) == -(-v // lanes), (lanes, v)

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
