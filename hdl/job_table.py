"""Job (tenant) table: per-job enable, worker count and slot range."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from netagg import regmap
from netagg.hdl.layouts import bits_for
from netagg.params import Params

job_entry = data.StructLayout({
    "enable": unsigned(1),
    "workers": unsigned(regmap.JOB_WORKERS_BITS),
    "base": unsigned(regmap.JOB_BASE_BITS),
    "nslots": unsigned(regmap.JOB_NSLOTS_BITS),
})
"""One job table entry (the fields of :mod:`netagg.regmap`'s job registers)."""

_WORKERS = slice(regmap.JOB_WORKERS_SHIFT, regmap.JOB_WORKERS_SHIFT + regmap.JOB_WORKERS_BITS)


class JobTable(wiring.Component):
    """J job entries in registers, written through a register port, looked up
    combinationally by job id.

    Ports:
      ``we``, ``addr`` (job * 4 + register), ``wdata``: register writes,
      effective the next cycle; ``rdata``: the register at ``addr``,
      combinational. ``lookup_job`` -> ``lookup``: the entry (all zero, so
      disabled, for ids >= J) and ``lookup_valid`` (id < J);
      ``lookup_limit``: the slots the job's messages may address, ``0 ..
      limit - 1`` with ``limit = min(nslots, S - base)`` (0 when ``base >=
      S``), kept in a register of its own (so a lookup compares one value,
      no sum): 0 in the cycle after a write of ``base`` or ``nslots`` (no
      slot in range), the new limit from the cycle after that (``S -
      base`` is registered at the write of ``base``, the minimum a cycle
      later, so no carry chain runs from a register through both).

    Reset disables every job. Values are stored as written; the control
    software keeps ranges inside S and apart (``netagg.jobs`` checks).
    """

    def __init__(self, params: Params):
        self._params = params
        self._entry = job_entry
        super().__init__({
            "we": In(1),
            "addr": In(16),
            "wdata": In(32),
            "rdata": Out(32),
            "lookup_job": In(8),
            "lookup": Out(self._entry),
            "lookup_valid": Out(1),
            "lookup_limit": Out(bits_for(params.slots + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        J = self._params.jobs
        S = self._params.slots
        entries = [Signal(self._entry, name=f"job{j}") for j in range(J)]
        limits = [Signal(range(S + 1), name=f"job{j}_limit") for j in range(J)]
        rooms = [Signal(range(S + 1), name=f"job{j}_room", init=S) for j in range(J)]   # S - base
        reg_bits = (regmap.JOB_REGS - 1).bit_length()
        job_sel = self.addr[reg_bits:reg_bits + 8]
        reg_sel = self.addr[0:reg_bits]
        in_range = (self.addr[reg_bits + 8:] == 0) & (job_sel < J)
        base_w = self.wdata[:regmap.JOB_BASE_BITS]
        nslots_w = self.wdata[:regmap.JOB_NSLOTS_BITS]
        for j, (e, lim, room) in enumerate(zip(entries, limits, rooms, strict=True)):
            # the limit from registers, except in the cycle after a write
            # of base or nslots (0 then)
            m.d.sync += lim.eq(Mux(e.nslots < room, e.nslots, room))
            with m.If(self.we & in_range & (job_sel == j)):
                with m.Switch(reg_sel):
                    with m.Case(regmap.JOB_CTRL):
                        m.d.sync += [e.enable.eq(self.wdata[regmap.JOB_ENABLE_BIT]),
                                     e.workers.eq(self.wdata[_WORKERS])]
                    with m.Case(regmap.JOB_BASE_SLOT):
                        m.d.sync += [e.base.eq(base_w), lim.eq(0),
                                     room.eq(Mux(base_w >= S, 0, S - base_w))]
                    with m.Case(regmap.JOB_NSLOTS):
                        m.d.sync += [e.nslots.eq(nslots_w), lim.eq(0)]
        with m.Switch(job_sel):
            for j, e in enumerate(entries):
                with m.Case(j):
                    with m.Switch(reg_sel):
                        with m.Case(regmap.JOB_CTRL):
                            m.d.comb += self.rdata.eq(
                                (e.enable << regmap.JOB_ENABLE_BIT)
                                | (e.workers << regmap.JOB_WORKERS_SHIFT))
                        with m.Case(regmap.JOB_BASE_SLOT):
                            m.d.comb += self.rdata.eq(e.base)
                        with m.Case(regmap.JOB_NSLOTS):
                            m.d.comb += self.rdata.eq(e.nslots)
        m.d.comb += self.lookup_valid.eq(self.lookup_job < J)
        with m.Switch(self.lookup_job):
            for j, e in enumerate(entries):
                with m.Case(j):
                    m.d.comb += [self.lookup.eq(e), self.lookup_limit.eq(limits[j])]
        return m
