"""The cocotb regression of ``netagg_core`` (launched by
``tests/test_cocotb_core.py`` through :func:`netagg.sim.harness.run_cocotb`).

The build parameters come from ``$NETAGG_TB_PARAMS`` (the same dict the
Verilog was generated from); ``$NETAGG_TB_SEED`` (default 1) seeds the
traffic. Every test resets the core, writes the job table of
:func:`netagg.sim.traffic.regression_jobs`, runs its traffic against the
golden-model scoreboard (verdicts in order, RESULTs bit-exact per (job,
slot, ver, worker), counters) and checks that nothing expected is left.
"""

from __future__ import annotations

import json
import os
import random
import zlib

import cocotb

from netagg.params import Params
from netagg.sim.cocotb.tb import TB, BenchError, Scoreboard
from netagg.sim.harness import ENV_PARAMS
from netagg.sim.traffic import Traffic, regression_jobs
from netagg.wire import DType, Op, Verdict


def _setup(dut, name: str):
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    rng = random.Random(zlib.crc32(f"{seed}:{name}".encode()))
    jobs = regression_jobs(params)
    tb = TB(dut, params, rng)
    tb.scoreboard = Scoreboard(params, jobs)
    return params, jobs, tb, Traffic(params, jobs, rng)


async def _run(tb: TB, jobs, messages, **kw):
    await tb.start()
    await tb.configure(jobs)
    run = await tb.run(messages, **kw)
    counters = await tb.read_counters()
    tb.scoreboard.final(counters)
    dut_log = tb.dut._log
    dut_log.info("%d messages, %d RESULTs checked, verdicts %s, %d stall cycles, %d cycles",
                 len(messages), tb.scoreboard.results_checked,
                 dict(sorted((v.name, n) for v, n in tb.scoreboard.coverage.items())),
                 counters["stall"], run.cycles)
    return run, counters


@cocotb.test()
async def random_traffic(dut):
    """Interleaved rounds over every job, dtype and op; random ingress gaps
    and egress backpressure."""
    _, jobs, tb, tm = _setup(dut, "random_traffic")
    msgs = tm.random_mix(waves=3, per_wave=4)
    await _run(tb, jobs, msgs, gap=0.2, beat_gap=0.1, backpressure=0.3)
    if tb.scoreboard.reference.counters["results"] == 0:
        raise BenchError("the traffic completed no round")


@cocotb.test()
async def lockstep(dut):
    """Workers streaming their window of slots in near lockstep: back-to-back
    messages to the same slot, full-size payloads, then one-beat payloads
    (read-after-write hazards: the stall counter must count some)."""
    params, jobs, tb, tm = _setup(dut, "lockstep")
    big = tm.enabled[0]
    small = tm.enabled[1] if len(tm.enabled) > 1 else big
    msgs = tm.lockstep(big, passes=2, window=max(1, 24 // big.workers))
    msgs += tm.lockstep(small, passes=3, window=max(1, 12 // small.workers),
                        count=params.lanes)
    _, counters = await _run(tb, jobs, msgs)
    if tb.scoreboard.reference.counters["results"] == 0:
        raise BenchError("the traffic completed no round")
    if counters["stall"] == 0:
        raise BenchError("back-to-back one-beat messages to one slot caused no stall")


@cocotb.test()
async def egress_backpressure(dut):
    """o__ready mostly low while ingress keeps coming: no loss, no deadlock."""
    _, jobs, tb, tm = _setup(dut, "egress_backpressure")
    msgs = tm.random_mix(waves=3, per_wave=5)
    await _run(tb, jobs, msgs, backpressure=0.85)


@cocotb.test()
async def lost_results(dut):
    """Lost RESULTs: retransmissions (also after others moved on to the next
    round), duplicates, late resends; slots reused with alternating ver."""
    _, jobs, tb, tm = _setup(dut, "lost_results")
    msgs = tm.lossy(rounds=12)
    await _run(tb, jobs, msgs, gap=0.1, backpressure=0.2)
    cov = tb.scoreboard.coverage
    for v in (Verdict.ACCEPT, Verdict.RETRANSMIT, Verdict.DUPLICATE):
        if not cov[v]:
            raise BenchError(f"the traffic produced no {v.name}")


@cocotb.test()
async def malformed(dut):
    """Every kind of malformed message, and mismatches and duplicates,
    among valid traffic: each dropped with its own counter, nothing else
    disturbed."""
    _, jobs, tb, tm = _setup(dut, "malformed")
    cases = tm.malformed()
    job = next((j for j in tm.enabled if j.workers >= 2), None)
    if job is not None:
        cases += tm.mismatches(job, job.slots - 1)
    # The generator's intent must be the model's verdict (else coverage is a lie).
    probe = Scoreboard(tb.params, jobs)
    for i, (want, m) in enumerate(cases):
        probe.expect(i, m)
        if probe.verdicts[i] != want:
            raise BenchError(f"traffic generator: case {i} gets {probe.verdicts[i].name} "
                             f"from the model, meant {want.name}")
    bad = [m for _, m in cases]
    valid = tm.random_mix(waves=1, per_wave=4)
    # mismatch cases keep their order; the rest go anywhere
    msgs = tm.merge([valid, bad])
    await _run(tb, jobs, msgs, gap=0.15, beat_gap=0.1, backpressure=0.2)
    cov = tb.scoreboard.coverage
    missing = [v.name for v in Verdict if v != Verdict.RETRANSMIT and not cov[v]
               and not (v == Verdict.MISMATCH and job is None)]
    if missing:
        raise BenchError(f"verdicts never produced: {missing}")


@cocotb.test()
async def special_values(dut):
    """Special values (zeros, subnormals, extremes, infinities, NaNs with
    payloads, int32 limits) in every dtype and op the core has."""
    params, jobs, tb, tm = _setup(dut, "special_values")
    rounds = []
    slots = [(j, s) for j in tm.enabled for s in range(j.slots)]
    tm.rng.shuffle(slots)
    for dtype in tm.dtypes:
        for op in tm.ops:
            for _ in range(2 if len(tm.dtypes) * len(tm.ops) < 6 else 1):
                j, s = slots.pop() if slots else (tm.enabled[0], 0)
                rounds.append(tm.round(j, s, dtype=dtype, op=op, specials=0.9,
                                       count=tm.rng.choice((params.elements,
                                                            params.lanes + 1, 1))))
    msgs = tm.merge(rounds)
    await _run(tb, jobs, msgs, gap=0.1, backpressure=0.2)
    if not any(DType(d) in (DType.FP32, DType.BF16) for d in tm.dtypes) or Op.SUM not in tm.ops:
        return
    if tb.scoreboard.reference.counters["results"] == 0:
        raise BenchError("no round completed")
