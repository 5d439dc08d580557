"""NetaggCore in amaranth.sim (netagg.sim.drive) against the golden model
(netagg.sim.reference): verdicts in order, RESULT messages bit-exact per
(job, slot, ver, worker) in order, counters."""

import dataclasses

import numpy as np
import pytest

from netagg import regmap
from netagg.hdl import issue_queue
from netagg.hdl.core import NetaggCore
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.beats import message_to_beats
from netagg.sim.drive import load_jobs, run_core, simulate
from netagg.sim.message_model import make_contrib
from netagg.sim.reference import expected, per_key
from netagg.sim.traffic import random_traffic
from netagg.wire import DType, Op, Verdict

CONFIGS = {
    "l4k16": (dict(lanes=4, elements=16, workers=3, slots=8, jobs=2),
              [dict(id=0, workers=3, slot_base=0, slots=4),
               dict(id=1, workers=2, slot_base=4, slots=4)]),
    "l1k4-bf16acc": (dict(lanes=1, elements=4, workers=2, slots=4, jobs=2, bf16_accumulate="bf16"),
                     [dict(id=1, workers=2, slot_base=1, slots=3)]),
    "l3k12-fp": (dict(lanes=3, elements=12, workers=4, slots=6, jobs=3, dtypes=("fp32", "bf16")),
                 [dict(id=0, workers=4, slot_base=0, slots=2),
                  dict(id=2, workers=1, slot_base=2, slots=4)]),
    # K/L = 3, not a power of two: the issue queue keeps accumulator addresses
    "l2k6-b3": (dict(lanes=2, elements=6, workers=3, slots=5, jobs=1),
                [dict(id=0, workers=3, slot_base=0, slots=5)]),
    "l8k16-int": (dict(lanes=8, elements=16, workers=5, slots=4, jobs=1, dtypes=("int32",),
                       ops=("sum", "max")),
                  [dict(id=0, workers=5, slot_base=0, slots=4)]),
}


def build(name):
    pd, jd = CONFIGS[name]
    params = Params(**pd)
    return params, JobTable([Job(enabled=True, **j) for j in jd], params)


def check(params, jobs, messages, **kw):
    exp = expected(params, jobs, messages)
    got = run_core(params, jobs, messages, **kw)
    assert got.verdicts == exp.verdicts
    assert per_key(got.results) == per_key(exp.results)
    assert sorted(got.results) == sorted(exp.results)
    counters = dict(got.counters)
    stall = counters.pop("stall")
    assert counters == exp.counters
    return stall


def test_control_read_of_every_address_kind():
    """The core's control port (docs/core.md): a job register and a counter
    read as written / counted, one cycle after the address; any other
    address (a job register's unused fourth word, past J, past the job
    space, past the counters) reads 0."""
    params, jobs = build("l1k4-bf16acc")
    base = regmap.job_addr(1, regmap.JOB_BASE_SLOT)
    unmapped = [regmap.job_addr(1, regmap.JOB_REGS - 1), regmap.job_addr(params.jobs, 0),
                regmap.JOB_REGS * 256 + base, regmap.COUNTER_BASE - 1,
                regmap.COUNTER_BASE + len(regmap.CORE_COUNTERS), 0xFFFF]
    dut = NetaggCore(params)

    async def tb(ctx):
        await load_jobs(ctx, dut, jobs)
        for addr, want in [(base, 1), *((a, 0) for a in unmapped),
                           (regmap.counter_addr("rx"), 0), (base, 1)]:
            ctx.set(dut.ctrl_addr, addr)
            await ctx.tick()
            assert ctx.get(dut.ctrl_rdata) == want, hex(addr)

    simulate(dut, tb)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_random_traffic(name, seed):
    params, jobs = build(name)
    msgs = random_traffic(params, jobs, 200, seed=seed)
    check(params, jobs, msgs, seed=seed, gap=0.2, backpressure=0.4)


@pytest.mark.parametrize("name", ["l4k16", "l1k4-bf16acc"])
def test_random_traffic_compact_loop(name, seed):
    """The smallest build form (``acc_ram="compact"``: transparent read, no
    forwarding), with the shortest and a longer lane pipeline."""
    params, jobs = build(name)
    msgs = random_traffic(params, jobs, 150, seed=seed)
    for fp_stages in (0, None):
        check(params, jobs, msgs, seed=seed, gap=0.2, backpressure=0.4, fp_stages=fp_stages,
              acc_ram="compact")


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
@pytest.mark.parametrize("name", ["l4k16", "l3k12-fp"])
def test_issue_queue_depths(name, depth, seed, monkeypatch):
    """Other issue queue depths than the default (four) in the forwarding
    form: messages of 1 to 4 beats overtake each other in other ways, and
    every result stays bit-exact in arrival order."""
    monkeypatch.setitem(issue_queue.ISSUE_DEPTH, "memory", depth)
    params, jobs = build(name)
    msgs = random_traffic(params, jobs, 150, seed=seed)
    check(params, jobs, msgs, seed=seed, gap=0.1, backpressure=0.3)


@pytest.mark.parametrize("acc_ram", ["memory", "compact"])
@pytest.mark.parametrize("fp_stages", [0, 2, None])
def test_back_to_back_same_slot_hazard(acc_ram, fp_stages):
    """Messages of one to four beats to one slot back to back, so that
    contributions to one accumulator address come at every spacing from the
    decision interval up: every sum must see the previous one
    (read-after-write across the adder pipeline, forwarding)."""
    params, jobs = build("l4k16")
    msgs = []
    for rnd in range(8):
        n = [2, 5, 9, 16][rnd % 4]
        for w in range(3):
            msgs.append(make_contrib(0, 0, rnd % 2, w,
                                     [0x3F800000 + w + rnd + 7 * i for i in range(n)],
                                     dtype=DType.FP32, op=Op.SUM))
    stall = check(params, jobs, msgs, fp_stages=fp_stages, acc_ram=acc_ram)
    assert stall > 0


@pytest.mark.parametrize("fillers", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("fp_stages", [0, None])
def test_hold_after_the_previous_message_left(fillers, fp_stages):
    """One- and two-beat contributions to one slot copy, ``fillers``
    one-beat messages to other slots between them, so that a message's
    predecessor of its copy has issued its last beat 1 to about 8 cycles
    before it joins the issue queue (from the queue's entries or its
    record of the last beats issued): every sum must see the previous
    one."""
    params, jobs = build("l4k16")
    msgs = []
    for rnd in range(6):
        n = 4 if rnd % 3 else 7          # one beat, or two
        for w in range(3):
            msgs.append(make_contrib(0, 1, rnd % 2, w,
                                     [0x3F800000 + 3 * w + rnd + 11 * i for i in range(n)],
                                     dtype=DType.FP32, op=Op.SUM))
            for f in range(fillers):
                # job 0's other slots, then job 1's (two workers: a third
                # contribution is a retransmission)
                job, slot, worker = (0, (0, 2, 3)[f], w) if f < 3 else (1, f - 3, w % 2)
                msgs.append(make_contrib(job, slot, rnd % 2, worker,
                                         [w + f + 5 * i for i in range(3)],
                                         dtype=DType.INT32, op=Op.SUM))
    check(params, jobs, msgs, fp_stages=fp_stages)


def test_full_slot_lockstep_no_loss_under_backpressure():
    params, jobs = build("l4k16")
    rng = np.random.default_rng(5)
    msgs = []
    for rnd in range(4):
        for w in range(3):
            for slot in range(4):
                msgs.append(make_contrib(0, slot, rnd % 2, w,
                                         rng.integers(0, 2**32, 16, dtype=np.uint64),
                                         dtype=DType.INT32, op=Op.SUM))
    check(params, jobs, msgs, gap=0.1, backpressure=0.7)


def test_beat_count_mismatch_never_touches_state():
    """A stream whose beat count disagrees with its (consistent) header and
    length is bad_length, and its beats never reach the accumulators."""
    params, jobs = build("l4k16")
    good = [make_contrib(0, 2, 0, w, list(range(1, 13)), dtype=DType.INT32, op=Op.SUM)
            for w in range(3)]
    beats = message_to_beats(good[0], params.lanes, tag=0)      # 3 beats
    truncated = [dataclasses.replace(b, tag=0) for b in beats[:2]]
    truncated[-1] = dataclasses.replace(truncated[-1], last=True)
    extra = dataclasses.replace(beats[-1], last=False, data=(99,) * params.lanes)
    overlong = [dataclasses.replace(b, tag=1, last=False) for b in beats] + \
        [dataclasses.replace(extra, tag=1, last=True)]
    messages = [truncated, overlong] + good
    got = run_core(params, jobs, messages, gap=0.1, backpressure=0.3)
    assert [v for v, _ in got.verdicts[:2]] == [Verdict.BAD_LENGTH, Verdict.BAD_LENGTH]
    # The good round is unaffected: the model never saw the bad streams.
    exp = expected(params, jobs, good)
    assert [v for v, _ in got.verdicts[2:]] == [v for v, _ in exp.verdicts]
    assert sorted(p for p, _ in got.results) == sorted(p for p, _ in exp.results)
    assert got.counters["drop_bad_length"] == 2 and got.counters["rx"] == 5


def test_a_core_that_stops_taking_beats_fails_the_run_instead_of_hanging(monkeypatch):
    """A core that stops taking beats (here: egress never ready, so the
    first RESULT blocks C's head and then the ingress) fails the run after
    ``STALL_LIMIT`` cycles instead of hanging it."""
    from netagg.sim import drive
    monkeypatch.setattr(drive, "STALL_LIMIT", 400)
    params, jobs = build("l4k16")
    msgs = [make_contrib(0, slot, rnd % 2, w, list(range(16)), dtype=DType.INT32, op=Op.SUM)
            for rnd in range(4) for w in range(3) for slot in range(4)]
    with pytest.raises(AssertionError, match="not accepted in 400 cycles"):
        run_core(params, jobs, msgs, backpressure=1.0)
