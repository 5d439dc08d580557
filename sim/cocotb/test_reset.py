"""Reset under traffic (launched by ``tests/test_verification.py``).

The core is reset at random points while random traffic flows in and the
egress is held back at random; after each reset it must come up cleared
(job table disabled, counters zero, nothing on the egress or the verdict
port: no half-sent RESULT, no stale verdict) and then process a fresh
workload bit-exactly against the golden model.
"""

from __future__ import annotations

import json
import os
import random
import zlib

import cocotb
from cocotb.triggers import ReadOnly

from netagg import regmap
from netagg.params import Params
from netagg.sim.cocotb.tb import TB, BenchError, Scoreboard
from netagg.sim.harness import ENV_PARAMS
from netagg.sim.traffic import Traffic, regression_jobs

RESETS = int(os.environ.get("NETAGG_TB_RESETS", "6"))


def _setup(dut, name):
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    dut._log.info("seed %d (NETAGG_TB_SEED)", seed)
    rng = random.Random(zlib.crc32(f"{seed}:{name}".encode()))
    jobs = regression_jobs(params)
    return params, jobs, TB(dut, params, rng), rng


async def _check_cleared(tb: TB, jobs, cycles: int = 40):
    """Right after reset: nothing leaves the core, the state reads as reset."""
    d = tb.dut
    d.o__ready.value = 1
    for _ in range(cycles):
        await ReadOnly()
        if int(d.o__valid.value):
            raise BenchError(f"cycle {tb.cycle}: a RESULT beat left the core after reset")
        if int(d.v__valid.value):
            raise BenchError(f"cycle {tb.cycle}: a verdict left the core after reset")
        await tb.tick()
    for j in range(tb.params.jobs):
        got = await tb.read_reg(regmap.job_addr(j, regmap.JOB_CTRL))
        if got:
            raise BenchError(f"job {j} still enabled after reset (0x{got:x})")
    for name, value in (await tb.read_counters()).items():
        if value:
            raise BenchError(f"counter {name} = {value} after reset")
    await ReadOnly()
    if not int(d.idle.value):
        raise BenchError("the core is not idle after reset")
    await tb.tick()


@cocotb.test()
async def reset_under_traffic(dut):
    params, jobs, tb, rng = _setup(dut, "reset_under_traffic")
    await tb.start()
    for k in range(RESETS):
        await tb.configure(jobs)
        tm = Traffic(params, jobs, rng)
        msgs = tm.random_mix(waves=2, per_wave=4)
        tb.scoreboard = None          # this run is cut short: nothing to compare
        task = cocotb.start_soon(tb.run(msgs, gap=0.1, beat_gap=0.1, backpressure=0.6))
        await tb.tick(rng.randrange(5, 400))
        if task.done():
            task.result()             # a bench error before the reset
        task.cancel()
        # Reset at this point: mid-message, mid-RESULT, with a full egress.
        await tb.reset(cycles=rng.randrange(1, 4))
        await _check_cleared(tb, jobs)
        # A fresh workload, checked bit-exactly.
        await tb.configure(jobs)
        tb.scoreboard = Scoreboard(params, jobs)
        fresh = Traffic(params, jobs, rng).random_mix(waves=1, per_wave=4)
        await tb.run(fresh, gap=0.1, backpressure=0.3)
        tb.scoreboard.final(await tb.read_counters())
        dut._log.info("reset %d: fresh workload of %d messages matched the model", k,
                      len(fresh))
        await tb.reset()
