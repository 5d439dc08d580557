"""Corner cases the regression does not reach (launched by
``tests/test_verification.py``; they close line coverage gaps, see
docs/verification.md): every job table register of every entry written and
read back, and float sums that round to infinity in every lane.
"""

from __future__ import annotations

import json
import os
import random
import zlib

import cocotb

from netagg import regmap
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.cocotb.tb import TB, BenchError, Scoreboard
from netagg.sim.harness import ENV_PARAMS
from netagg.sim.message_model import make_contrib
from netagg.wire import DType, Op


def _setup(dut, name):
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    dut._log.info("seed %d (NETAGG_TB_SEED)", seed)
    rng = random.Random(zlib.crc32(f"{seed}:{name}".encode()))
    return params, TB(dut, params, rng), rng


@cocotb.test()
async def job_table_registers(dut):
    """Every register of every entry (and the unused fourth one) reads back
    what was written; entries beyond J read 0 and take no writes."""
    params, tb, rng = _setup(dut, "job_table_registers")
    await tb.start()
    fields = {regmap.JOB_CTRL: lambda: regmap.job_ctrl_word(rng.random() < 0.5,
                                                            rng.randrange(256)),
              regmap.JOB_BASE_SLOT: lambda: rng.getrandbits(regmap.JOB_BASE_BITS),
              regmap.JOB_NSLOTS: lambda: rng.getrandbits(regmap.JOB_NSLOTS_BITS)}
    want = {}
    for j in range(params.jobs + 1):
        for reg, make in fields.items():
            value = make()
            await tb.write_reg(regmap.job_addr(j, reg), value)
            want[regmap.job_addr(j, reg)] = value if j < params.jobs else 0
        await tb.write_reg(regmap.job_addr(j, regmap.JOB_REGS - 1), rng.getrandbits(32))
        want[regmap.job_addr(j, regmap.JOB_REGS - 1)] = 0
    for addr, value in want.items():
        got = await tb.read_reg(addr)
        if got != value:
            raise BenchError(f"register 0x{addr:04x} reads 0x{got:x}, expected 0x{value:x}")


@cocotb.test()
async def overflow_every_lane(dut):
    """Finite float sums that round to +-infinity in every lane (status
    overflow bit), for each float dtype of the build."""
    params, tb, rng = _setup(dut, "overflow_every_lane")
    W = min(2, params.workers)
    jobs = JobTable([Job(0, workers=W, slot_base=0, slots=1)], params)
    await tb.start()
    await tb.configure(jobs)
    tb.scoreboard = Scoreboard(params, jobs)
    msgs = []
    big = {DType.FP32: 0x7F7FFFFF, DType.BF16: 0x7F7F}
    ver = 0
    for name in params.dtypes:
        dt = DType.from_name(name)
        if dt not in big or "sum" not in params.ops:
            continue
        for sign in (0, 1):
            top = big[dt] | (sign << (31 if dt == DType.FP32 else 15))
            for w in range(W):
                msgs.append(make_contrib(0, 0, ver, w, [top] * params.elements, dtype=dt,
                                         op=Op.SUM))
            ver ^= 1
    if not msgs:
        return
    await tb.run(msgs)
    tb.scoreboard.final(await tb.read_counters())
