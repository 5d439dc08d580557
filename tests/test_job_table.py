"""hdl/job_table.JobTable on its own (amaranth.sim): random register writes
in netagg.regmap's encoding (job_addr, the JOB_CTRL fields, base and slot
count widths) read back as a register model of regmap says, and the lookup
port gives each job's fields (all zero, invalid, past J)."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from seeds import seed_of

from netagg import regmap
from netagg.hdl.job_table import JobTable
from netagg.jobs import Job
from netagg.jobs import JobTable as Jobs
from netagg.params import Params

WORKERS_MASK = (1 << regmap.JOB_WORKERS_BITS) - 1


class Model:
    """The job table as regmap defines it: per job, enable, workers, base, nslots."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.entries = [dict(enable=0, workers=0, base=0, nslots=0) for _ in range(jobs)]

    def decode(self, addr):
        job, reg = divmod(addr - regmap.JOB_BASE, regmap.JOB_REGS)
        return (job, reg) if 0 <= job < self.jobs else (None, reg)

    def write(self, addr, value):
        job, reg = self.decode(addr)
        if job is None:
            return
        e = self.entries[job]
        if reg == regmap.JOB_CTRL:
            e["enable"] = (value >> regmap.JOB_ENABLE_BIT) & 1
            e["workers"] = (value >> regmap.JOB_WORKERS_SHIFT) & WORKERS_MASK
        elif reg == regmap.JOB_BASE_SLOT:
            e["base"] = value & ((1 << regmap.JOB_BASE_BITS) - 1)
        elif reg == regmap.JOB_NSLOTS:
            e["nslots"] = value & ((1 << regmap.JOB_NSLOTS_BITS) - 1)

    def read(self, addr):
        job, reg = self.decode(addr)
        if job is None:
            return 0
        e = self.entries[job]
        if reg == regmap.JOB_CTRL:
            return regmap.job_ctrl_word(e["enable"], e["workers"])
        return {regmap.JOB_BASE_SLOT: e["base"], regmap.JOB_NSLOTS: e["nslots"]}.get(reg, 0)

    def lookup(self, job):
        return self.entries[job] if job < self.jobs else dict(enable=0, workers=0, base=0,
                                                              nslots=0)


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("njobs", [1, 3, 8])
def test_registers_and_lookup_match_regmap(njobs, parallel, request):
    seed = seed_of(request)
    rng = random.Random(seed)
    params = Params(lanes=2, elements=4, workers=4, slots=16, jobs=njobs)
    dut = JobTable(params, parallel=parallel)
    model = Model(njobs)
    # The job space (regmap.JOB_BASE + JOB_REGS * 256 addresses), of which
    # entries past J are ignored on write and read 0.
    space = regmap.JOB_REGS * 256

    async def tb(ctx):
        # A real table first, as the control software writes it.
        jobs = Jobs([Job(id=njobs - 1, enabled=True, workers=3, slot_base=2, slots=5)], params)
        writes = regmap.job_writes(jobs)
        writes += [(rng.randrange(regmap.JOB_REGS * (njobs + 2)), rng.getrandbits(32))
                   for _ in range(300)]
        for addr, value in writes:
            ctx.set(dut.addr, addr)
            ctx.set(dut.wdata, value)
            ctx.set(dut.we, 1)
            await ctx.tick()
            model.write(addr, value)
            ctx.set(dut.we, 0)
            # (and anywhere in the 16-bit address space: 0 outside the job
            # registers, high address bits included)
            for probe in (addr, rng.randrange(regmap.JOB_REGS * (njobs + 2)),
                          rng.randrange(space), rng.randrange(1 << 16),
                          regmap.JOB_REGS * (njobs - 1) + space * rng.randrange(1, 64)):
                ctx.set(dut.addr, probe)
                assert ctx.get(dut.rdata) == model.read(probe), (seed, hex(probe))
            job = rng.randrange(njobs + 3) if rng.random() < 0.8 else rng.randrange(256)
            ctx.set(dut.lookup_job, job)
            got = ctx.get(dut.lookup)
            assert {k: int(getattr(got, k)) for k in ("enable", "workers", "base", "nslots")} \
                == model.lookup(job), (seed, job)
            assert ctx.get(dut.lookup_valid) == (job < njobs)
            want = model.lookup(job)
            # below nslots and the slot RAM's end (never for ids >= J)
            room = max(0, params.slots - want["base"]) if job < njobs else 0
            for slot in (0, want["nslots"] - 1, want["nslots"], room - 1, room,
                         rng.randrange(1 << 16)):
                slot %= 1 << 16
                ctx.set(dut.lookup_slot, slot)
                ok = job < njobs and slot < want["nslots"] and slot < room
                assert ctx.get(dut.lookup_slot_ok) == ok, (seed, job, slot)
            # below the job's W and the build's W_max (never for ids >= J),
            # all 16 bits of the header's worker id: 0x0100 is not worker 0
            for worker in (0, want["workers"] - 1, want["workers"], params.workers - 1,
                           params.workers, rng.randrange(256), 1 << 8,
                           (rng.randrange(1, 256) << 8) | rng.randrange(4),
                           rng.randrange(1 << 16)):
                worker %= 1 << 16
                ctx.set(dut.lookup_worker, worker)
                ok = job < njobs and worker < want["workers"] and worker < params.workers
                assert ctx.get(dut.lookup_worker_ok) == ok, (seed, job, worker)
        # A write with ``we`` low changes nothing.
        ctx.set(dut.addr, regmap.job_addr(0, regmap.JOB_BASE_SLOT))
        ctx.set(dut.wdata, model.read(regmap.job_addr(0, regmap.JOB_BASE_SLOT)) ^ 1)
        await ctx.tick()
        assert ctx.get(dut.rdata) == model.read(regmap.job_addr(0, regmap.JOB_BASE_SLOT))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_reset_disables_every_job():
    params = Params(lanes=2, elements=4, workers=4, slots=16, jobs=4)
    dut = JobTable(params)

    async def tb(ctx):
        for j in range(4):
            ctx.set(dut.lookup_job, j)
            assert ctx.get(dut.lookup.enable) == 0
            ctx.set(dut.addr, regmap.job_addr(j, regmap.JOB_CTRL))
            assert ctx.get(dut.rdata) == regmap.job_ctrl_word(False, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
