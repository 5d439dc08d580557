"""On-chip self-test of the core (for boards without a host link, the
Colorlight 5A-75B): a traffic generator and a checker around a netagg core.

The traffic (well-behaved rounds mixed with duplicates, retransmission
requests, mismatches and malformed messages, from
:func:`netagg.sim.traffic.selftest_messages` on
:func:`netagg.sim.traffic.selftest_jobs`) and the expected verdicts and
RESULT beats (from the golden model, :func:`netagg.sim.reference.expected`)
are computed at build time and held in ROMs, packed as the ports' layouts.

Contract: after reset the self-test loads the job table, presents every
message back to back and checks, in order, every verdict (code and tag)
and every RESULT beat (header, tag, last, and the lanes below ``count``)
against the golden model, under pseudo-random egress backpressure. When a
pass completes with nothing extra sent, ``passes`` counts it, the core is
reset and the traffic runs again. Any difference, or no progress for
2**22 cycles, latches ``failed``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, ResetInserter, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from netagg import regmap
from netagg.hdl import layouts
from netagg.hdl.core import NetaggCore
from netagg.params import Params
from netagg.sim import beats
from netagg.sim.reference import expected
from netagg.sim.traffic import selftest_jobs, selftest_messages
from netagg.wire import Header

WATCHDOG_BITS = 22


def expected_row(lanes: int) -> data.StructLayout:
    """A row of the expected-RESULT ROM: an egress beat and the lanes to
    compare (lane ``i`` holds element ``i`` of the beat if it is below
    ``count``)."""
    return data.StructLayout({"beat": layouts.egress_beat(lanes), "mask": lanes})


def _egress_rows(payload: bytes, tag: int, lanes: int) -> list[int]:
    """Expected egress beats of one RESULT, as :func:`expected_row` values."""
    row = expected_row(lanes)
    at_beat, at_mask = row["beat"].offset, row["mask"].offset
    count = Header.unpack(payload).count
    out = []
    for k, b in enumerate(beats.message_to_beats(payload, lanes, tag)):
        valid = max(0, min(lanes, count - k * lanes))
        out.append((beats.pack_egress(b, lanes) << at_beat) | (((1 << valid) - 1) << at_mask))
    return out


class SelfTest(wiring.Component):
    """Traffic generator and checker around a core (module docstring).

    ``passes``: completed passes (saturating); ``failed``: sticky;
    ``running``: a pass is in progress.
    """

    def __init__(self, params: Params, *, fp_stages=None, n_messages: int = 32, seed: int = 1):
        self._params = params
        self._fp_stages = fp_stages
        self._jobs = selftest_jobs(params)
        self._msgs = selftest_messages(params, self._jobs, n_messages, seed)
        exp = expected(params, self._jobs, self._msgs)
        self._verdicts, self._results = exp.verdicts, exp.results
        super().__init__({
            "passes": Out(16),
            "failed": Out(1),
            "running": Out(1),
        })

    def summary(self) -> dict:
        return {"messages": len(self._msgs), "results": len(self._results),
                "dropped": sum(1 for c, _ in self._verdicts if c > 1),
                "jobs": self._jobs.to_dict()["jobs"]}

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L = p.lanes
        core_rst = Signal()
        core = NetaggCore(p, fp_stages=self._fp_stages)
        m.submodules.core = ResetInserter(core_rst)(core)

        in_rows = []
        for tag, msg in enumerate(self._msgs):
            in_rows += [beats.pack_ingress(b, L) for b in beats.message_to_beats(msg, L, tag)]
        out_rows = []
        for payload, tag in self._results:
            out_rows += _egress_rows(payload, tag, L)
        v_rows = [beats.pack_verdict(code, tag) for code, tag in self._verdicts]
        row = expected_row(L)

        m.submodules.in_rom = in_rom = Memory(shape=layouts.ingress_beat(L).size,
                                              depth=len(in_rows), init=in_rows)
        m.submodules.out_rom = out_rom = Memory(shape=row.size, depth=max(1, len(out_rows)),
                                                init=out_rows or [0])
        m.submodules.v_rom = v_rom = Memory(shape=layouts.VerdictLayout.size,
                                            depth=len(v_rows), init=v_rows)
        irp = in_rom.read_port()
        orp = out_rom.read_port()
        vrp = v_rom.read_port(domain="comb")

        n_in, n_out, n_v = len(in_rows), len(out_rows), len(v_rows)
        gi = Signal(range(n_in + 1))
        ei = Signal(range(n_out + 1))
        vi = Signal(range(n_v + 1))
        writes = regmap.job_writes(self._jobs)
        wi = Signal(range(len(writes) + 1))
        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))
        watchdog = Signal(WATCHDOG_BITS + 1)
        quiet = Signal(5)
        progress = Signal()
        fail = Signal()
        m.d.comb += [self.failed.eq(fail)]

        with m.If(progress | fail):
            m.d.sync += watchdog.eq(0)
        with m.Elif(self.running):
            m.d.sync += watchdog.eq(watchdog + 1)
        with m.If(watchdog[-1]):
            m.d.sync += fail.eq(1)

        # Checker: RESULT beats in order.
        ready = Signal()
        m.d.comb += ready.eq(lfsr[0] | lfsr[1])              # ~75 % ready
        exp = data.View(row, orp.data)
        take = core.o.valid & core.o.ready
        m.d.comb += orp.addr.eq(ei + take)
        with m.FSM():
            with m.State("INIT"):
                m.d.comb += [core_rst.eq(wi == 0), self.running.eq(1)]
                with m.Switch(wi):
                    for n, (addr, value) in enumerate(writes):
                        with m.Case(n + 1):
                            m.d.comb += [core.ctrl_addr.eq(addr), core.ctrl_wdata.eq(value),
                                         core.ctrl_we.eq(1)]
                m.d.sync += wi.eq(wi + 1)
                with m.If(wi == len(writes)):
                    m.d.sync += [gi.eq(0), ei.eq(0), vi.eq(0), quiet.eq(0)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.running.eq(1)
                # Generator.
                send = core.i.valid & core.i.ready
                m.d.comb += [core.i.valid.eq(gi < n_in), core.i.payload.eq(irp.data),
                             irp.addr.eq(gi + send)]
                with m.If(send):
                    m.d.sync += gi.eq(gi + 1)
                # Checker.
                m.d.comb += core.o.ready.eq(ready)
                with m.If(take):
                    got = core.o.payload
                    same = ((got.header.as_value() == exp.beat.header.as_value())
                            & (got.tag == exp.beat.tag) & (got.last == exp.beat.last))
                    for i in range(L):
                        same &= ~exp.mask[i] | (got.data[i] == exp.beat.data[i])
                    with m.If((ei >= n_out) | ~same):
                        m.d.sync += fail.eq(1)
                    m.d.sync += ei.eq(ei + 1)
                with m.If(core.v.valid):
                    m.d.comb += vrp.addr.eq(vi)
                    with m.If((vi >= n_v) | (core.v.payload.as_value() != vrp.data)):
                        m.d.sync += fail.eq(1)
                    m.d.sync += vi.eq(vi + 1)
                m.d.comb += progress.eq(send | take | core.v.valid)
                finished = (gi == n_in) & (ei == n_out) & (vi == n_v) & core.idle
                with m.If(finished):
                    m.d.sync += quiet.eq(quiet + 1)
                    with m.If(quiet == 31):
                        with m.If(~self.passes.all()):
                            m.d.sync += self.passes.eq(self.passes + 1)
                        m.d.sync += wi.eq(0)
                        m.next = "INIT"
                with m.Else():
                    m.d.sync += quiet.eq(0)
                with m.If(fail):
                    m.next = "FAILED"
            with m.State("FAILED"):
                m.d.comb += core.o.ready.eq(1)
        return m
