"""Job (tenant) table: per-job enable, worker count and slot range."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from netagg.params import Params

JOB_REGS = 4
"""Control registers per job: 0 = {enable (bit 0), workers (bits 15..8)},
1 = slot base, 2 = number of slots."""


def job_entry(params: Params) -> data.StructLayout:
    return data.StructLayout({
        "enable": unsigned(1),
        "workers": unsigned(8),
        "base": unsigned(16),
        "nslots": unsigned(17),
    })


class JobTable(wiring.Component):
    """J job entries in registers, written through a register port, looked up
    combinationally by job id.

    Ports:
      ``we``, ``addr`` (job * 4 + register), ``wdata``: register writes,
      effective the next cycle; ``rdata``: the register at ``addr``,
      combinational. ``lookup_job`` -> ``lookup``: the entry (all zero, so
      disabled, for ids >= J) and ``lookup_valid`` (id < J).

    Reset disables every job. Values are stored as written; the control
    software keeps ranges inside S and apart (``netagg.sim.jobs`` checks).
    """

    def __init__(self, params: Params):
        self._params = params
        self._entry = job_entry(params)
        super().__init__({
            "we": In(1),
            "addr": In(16),
            "wdata": In(32),
            "rdata": Out(32),
            "lookup_job": In(8),
            "lookup": Out(self._entry),
            "lookup_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        J = self._params.jobs
        entries = [Signal(self._entry, name=f"job{j}") for j in range(J)]
        job_sel = self.addr[2:10]
        reg_sel = self.addr[0:2]
        in_range = (self.addr[10:] == 0) & (job_sel < J)
        for j, e in enumerate(entries):
            with m.If(self.we & in_range & (job_sel == j)):
                with m.Switch(reg_sel):
                    with m.Case(0):
                        m.d.sync += [e.enable.eq(self.wdata[0]), e.workers.eq(self.wdata[8:16])]
                    with m.Case(1):
                        m.d.sync += e.base.eq(self.wdata[0:16])
                    with m.Case(2):
                        m.d.sync += e.nslots.eq(self.wdata[0:17])
        with m.Switch(job_sel):
            for j, e in enumerate(entries):
                with m.Case(j):
                    with m.Switch(reg_sel):
                        with m.Case(0):
                            m.d.comb += self.rdata.eq(e.enable | (e.workers << 8))
                        with m.Case(1):
                            m.d.comb += self.rdata.eq(e.base)
                        with m.Case(2):
                            m.d.comb += self.rdata.eq(e.nslots)
        m.d.comb += self.lookup_valid.eq(self.lookup_job < J)
        with m.Switch(self.lookup_job):
            for j, e in enumerate(entries):
                with m.Case(j):
                    m.d.comb += self.lookup.eq(e)
        return m
