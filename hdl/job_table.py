"""Job (tenant) table: per-job enable, worker count and slot range."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from netagg import regmap
from netagg.hdl.netlist import KEEP, and_or
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
      combinational (0 at an address that is none of the job registers).
      ``lookup_job`` -> ``lookup``: the entry (all zero, so disabled, for
      ids >= J) and ``lookup_valid`` (id < J);
      ``lookup_slot`` -> ``lookup_slot_ok``: the slot is below both
      ``nslots`` and ``S - base`` (0 when ``base >= S``; registered at the
      write of ``base``: two compares, no sum); low for ids >= J;
      ``lookup_worker`` -> ``lookup_worker_ok``: the worker id is below the
      job's W and below the build's W_max (low for ids >= J). With
      ``parallel`` (the default) every job's compares are made at once
      from its own registers and the job id selects the outcomes (no
      multiplexer before the compares' carry chains); else the entry is
      selected first (the fewest cells). Every lookup output shows a write
      the cycle after it, like ``rdata``; it is read from a kept copy of
      the entries written at the same edges (``keep``: the lookup's user is
      not wired to the register port's registers, and can be placed apart
      from them).

    Reset disables every job. Values are stored as written; the control
    software keeps ranges inside S and apart (``netagg.jobs`` checks).
    """

    def __init__(self, params: Params, *, parallel: bool = True):
        self._params = params
        self._parallel = parallel
        self._entry = job_entry
        super().__init__({
            "we": In(1),
            "addr": In(16),
            "wdata": In(32),
            "rdata": Out(32),
            "lookup_job": In(8),
            "lookup": Out(self._entry),
            "lookup_valid": Out(1),
            "lookup_slot": In(16),
            "lookup_slot_ok": Out(1),
            "lookup_worker": In(16),
            "lookup_worker_ok": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        J = self._params.jobs
        S = self._params.slots
        entries = [Signal(self._entry, name=f"job{j}") for j in range(J)]
        # the lookup's copies, written with the entries
        copies = [Signal(self._entry, name=f"job{j}_lookup", attrs=KEEP) for j in range(J)]
        rooms = [Signal(range(S + 1), name=f"job{j}_room", init=S) for j in range(J)]
        reg_bits = (regmap.JOB_REGS - 1).bit_length()
        job_sel = self.addr[reg_bits:reg_bits + 8]
        reg_sel = self.addr[0:reg_bits]
        in_range = (self.addr[reg_bits + 8:] == 0) & (job_sel < J)
        base_w = self.wdata[:regmap.JOB_BASE_BITS]
        nslots_w = self.wdata[:regmap.JOB_NSLOTS_BITS]
        for j, (e, c, room) in enumerate(zip(entries, copies, rooms, strict=True)):
            with m.If(self.we & in_range & (job_sel == j)):
                with m.Switch(reg_sel):
                    with m.Case(regmap.JOB_CTRL):
                        m.d.sync += [x.enable.eq(self.wdata[regmap.JOB_ENABLE_BIT])
                                     for x in (e, c)]
                        m.d.sync += [x.workers.eq(self.wdata[_WORKERS]) for x in (e, c)]
                    with m.Case(regmap.JOB_BASE_SLOT):
                        m.d.sync += [e.base.eq(base_w), c.base.eq(base_w),
                                     room.eq(Mux(base_w >= S, 0, S - base_w))]
                    with m.Case(regmap.JOB_NSLOTS):
                        m.d.sync += [e.nslots.eq(nslots_w), c.nslots.eq(nslots_w)]
        # The read: an AND-OR of every register with its address's exact
        # match (0 at any other address), from kept selects and pairs.
        read_terms = []
        for j, e in enumerate(entries):
            words = {regmap.JOB_CTRL: (e.enable << regmap.JOB_ENABLE_BIT)
                     | (e.workers << regmap.JOB_WORKERS_SHIFT),
                     regmap.JOB_BASE_SLOT: e.base,
                     regmap.JOB_NSLOTS: e.nslots}
            read_terms += [(self.addr == regmap.job_addr(j, reg), word)
                           for reg, word in words.items()]
        m.d.comb += self.rdata.eq(and_or(m, read_terms, width=32, name="read"))
        m.d.comb += self.lookup_valid.eq(self.lookup_job < J)
        slot = self.lookup_slot

        worker = self.lookup_worker
        w_max = self._params.workers

        def fits(entry, room):
            return (slot < entry.nslots) & (slot < room)

        def worker_fits(entry):
            return (worker < entry.workers) & (worker < w_max)
        if not self._parallel:
            room_sel = Signal(range(S + 1), name="lookup_room")
            m.d.comb += [self.lookup_slot_ok.eq(fits(self.lookup, room_sel)),
                         self.lookup_worker_ok.eq(worker_fits(self.lookup))]
        with m.Switch(self.lookup_job):
            for j, (c, room) in enumerate(zip(copies, rooms, strict=True)):
                with m.Case(j):
                    m.d.comb += self.lookup.eq(c)
                    if self._parallel:
                        m.d.comb += [self.lookup_slot_ok.eq(fits(c, room)),
                                     self.lookup_worker_ok.eq(worker_fits(c))]
                    else:
                        m.d.comb += room_sel.eq(room)
        return m
