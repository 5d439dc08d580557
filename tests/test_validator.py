"""hdl/validator.Validator on its own (amaranth.sim, a model of the job
table on its lookup port, random backpressure): one descriptor per message
with the golden model's verdict (netagg.sim.message_model.Switch.validate:
the checks of protocol.md in order) on random and malformed messages, the
accepted message's fields, and exactly ``desc.beats`` payload beats, which
for an accepted message are its elements."""

from __future__ import annotations

import dataclasses
import random

import pytest
from amaranth.sim import Simulator
from seeds import seed_of

from netagg import regmap
from netagg.hdl.validator import Validator
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.beats import message_to_beats
from netagg.sim.drive import send_beats
from netagg.sim.message_model import Switch
from netagg.sim.traffic import malformed, random_traffic
from netagg.wire import HEADER_BYTES, Header, Verdict

CONFIGS = {
    "l4k16": (dict(lanes=4, elements=16, workers=3, slots=8, jobs=3, dtypes=("fp32", "bf16")),
              [dict(id=0, workers=3, slot_base=0, slots=4), dict(id=2, workers=2, slot_base=4,
                                                                 slots=4)],
              [dict(id=1, workers=2, slot_base=0, slots=2)]),         # disabled
    "l1k4": (dict(lanes=1, elements=4, workers=2, slots=4, jobs=2, ops=("sum",)),
             [dict(id=1, workers=2, slot_base=1, slots=3)], []),
    "l3k12": (dict(lanes=3, elements=12, workers=5, slots=6, jobs=1),
              [dict(id=0, workers=4, slot_base=2, slots=4)], []),
}


def _setup(name):
    pd, enabled, disabled = CONFIGS[name]
    params = Params(**pd)
    jobs = JobTable([Job(enabled=True, **j) for j in enabled]
                    + [Job(enabled=False, **j) for j in disabled], params)
    return params, jobs


def _entry(jobs: JobTable, job_id: int):
    """The job table's lookup for ``job_id`` as the hardware holds it (the
    words regmap.job_writes writes, decoded field by field)."""
    words = {addr: value for addr, value in regmap.job_writes(jobs)}
    ctrl = words.get(regmap.job_addr(job_id, regmap.JOB_CTRL), 0)
    return {"enable": (ctrl >> regmap.JOB_ENABLE_BIT) & 1,
            "workers": (ctrl >> regmap.JOB_WORKERS_SHIFT) & ((1 << regmap.JOB_WORKERS_BITS) - 1),
            "base": words.get(regmap.job_addr(job_id, regmap.JOB_BASE_SLOT), 0),
            "nslots": words.get(regmap.job_addr(job_id, regmap.JOB_NSLOTS), 0)}


def _stream(rng, params, jobs, n):
    """(beats, expected verdict, header or None) per message: random traffic
    and malformed messages, and accepted ones with a beat too many or too few
    (bad_length, which the golden model, seeing whole messages, cannot show)."""
    sw = Switch(params, jobs)
    msgs = random_traffic(params, jobs, n, seed=rng.getrandbits(32), p_bad=0.0)
    msgs += [malformed(rng, params, jobs) for _ in range(n // 2)]
    for k in rng.sample(range(len(msgs)), n // 3):    # good messages, one field out of range
        if sw.validate(msgs[k])[0] is None:
            h = Header.unpack(msgs[k])
            field = rng.choice(("job", "slot", "worker"))
            value = {"job": rng.randrange(256), "slot": rng.randrange(h.slot, 256),
                     "worker": rng.randrange(h.worker, 256)}[field]
            msgs[k] = dataclasses.replace(h, **{field: value}).pack() + msgs[k][HEADER_BYTES:]
    rng.shuffle(msgs)
    out = []
    for seq, msg in enumerate(msgs):
        verdict, h = sw.validate(msg)
        beats = message_to_beats(msg, params.lanes, tag=seq)
        if verdict is None and rng.random() < 0.1:
            if len(beats) > 1 and rng.random() < 0.5:
                beats = beats[:-2] + [dataclasses.replace(beats[-2], last=True)]
            else:
                beats = [dataclasses.replace(b, last=False) for b in beats] + [beats[-1]]
            verdict = Verdict.BAD_LENGTH
        out.append((beats, Verdict.ACCEPT if verdict is None else verdict, h, msg))
    return out


def _job_table(dut, params, jobs):
    """A process answering the validator's lookups as the job table does."""
    entries = {j: _entry(jobs, j) for j in range(256)}

    async def process(ctx):
        async for job_id, slot, worker in ctx.changed(dut.job_id, dut.slot, dut.worker):
            e = entries[job_id]
            ctx.set(dut.job, e)
            ctx.set(dut.job_valid, job_id < params.jobs)
            ctx.set(dut.slot_ok, job_id < params.jobs and slot < e["nslots"]
                    and slot < params.slots - e["base"])
            ctx.set(dut.worker_ok, job_id < params.jobs and worker < e["workers"]
                    and worker < params.workers)
    return process


def _simulate(dut, params, jobs, drive, sink, *, cycles=None):
    """Run ``drive`` to its end (or for at most ``cycles`` clock cycles)."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.add_process(_job_table(dut, params, jobs))
    sim.add_testbench(sink, background=True)
    if cycles is None:
        sim.run()
    else:
        sim.run_until(cycles * 1e-8)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_verdicts_and_beats_match_golden_model(name, request):
    seed = seed_of(request)
    rng = random.Random(seed)
    params, jobs = _setup(name)
    L = params.lanes
    dut = Validator(params)
    stream = _stream(rng, params, jobs, 150)
    got_desc, got_data = [], []

    async def drive(ctx):
        for beats, *_ in stream:
            await send_beats(ctx, dut.i, beats, L, rng, 0.2)
        ctx.set(dut.i.valid, 0)
        for _ in range(2000):
            if len(got_desc) == len(stream):
                break
            await ctx.tick()

    async def sink(ctx):
        while True:
            ctx.set(dut.desc.ready, rng.random() < 0.7)
            ctx.set(dut.data.ready, rng.random() < 0.7)
            _, _, dv, dr, dp, bv, br, bp = await ctx.tick().sample(
                dut.desc.valid, dut.desc.ready, dut.desc.payload,
                dut.data.valid, dut.data.ready, dut.data.payload)
            if bv and br:
                got_data.append([int(x) for x in bp])
            if dv and dr:
                got_desc.append((dp, len(got_data)))

    _simulate(dut, params, jobs, drive, sink)

    assert len(got_desc) == len(stream)
    seen, used = set(), 0
    for k, ((desc, ndata), (beats, verdict, h, msg)) in enumerate(zip(got_desc, stream,
                                                                      strict=True)):
        where = (seed, k, msg.hex())
        assert Verdict(desc.verdict.value) is verdict, where
        seen.add(verdict)
        # The beats written for this message, and the descriptor counts them.
        mine = got_data[used:ndata]
        used = ndata
        assert len(mine) == desc.beats, where
        assert desc.tag == k & 0xFFFF
        if verdict is Verdict.ACCEPT:
            job = jobs[h.job]
            meta = desc.meta
            assert (meta.ver, meta.job, meta.slot, meta.worker, int(meta.dtype.value),
                    int(meta.op.value), meta.count, meta.offset) == \
                (h.ver, h.job, h.slot, h.worker, h.dtype, h.op, h.count, h.offset), where
            assert desc.slot_abs == job.slot_base + h.slot
            assert desc.workers == job.workers
            assert mine == [list(b.data) for b in beats], where
    assert used == len(got_data)
    assert seen == {Verdict.ACCEPT, Verdict.BAD_HEADER, Verdict.BAD_LENGTH, Verdict.BAD_JOB,
                    Verdict.BAD_SLOT, Verdict.BAD_WORKER}, seen


@pytest.mark.parametrize("compact", [False, True], ids=["pipelined", "compact"])
def test_one_beat_per_cycle_while_downstream_accepts(compact, request):
    """With ``desc`` and ``data`` always ready and no gaps on ``i``, every
    cycle from the first accepted beat to the last accepts one (``i.ready``
    never drops), and every beat comes out."""
    seed = seed_of(request)
    rng = random.Random(seed)
    params, jobs = _setup("l4k16")
    dut = Validator(params, compact=compact)
    stream = [s for s in _stream(rng, params, jobs, 60) if s[1] is Verdict.ACCEPT]
    beats = [b for s in stream for b in s[0]]
    accepted, ndesc, ndata = [], [0], [0]

    async def drive(ctx):
        await send_beats(ctx, dut.i, beats, params.lanes, rng, 0.0)
        ctx.set(dut.i.valid, 0)
        for _ in range(20):
            await ctx.tick()

    async def watch(ctx):
        ctx.set(dut.desc.ready, 1)
        ctx.set(dut.data.ready, 1)
        cycle = 0
        async for _, _, iv, ir, dv, bv in ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.desc.valid, dut.data.valid):
            if iv and ir:
                accepted.append(cycle)
            ndesc[0] += dv
            ndata[0] += bv
            cycle += 1

    # bounded: a validator that stalls fails here instead of hanging
    _simulate(dut, params, jobs, drive, watch, cycles=len(beats) + 100)
    assert len(accepted) == len(beats), seed
    assert accepted[-1] - accepted[0] == len(beats) - 1, (seed, accepted[:20])
    assert ndesc[0] == len(stream), seed
    assert ndata[0] == sum(len(s[0]) for s in stream), seed
