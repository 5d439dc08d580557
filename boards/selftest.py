"""On-chip self-test of the core (for boards without a host link, the
Colorlight 5A-75B): a traffic generator and a checker around a netagg core.

The traffic (well-behaved rounds mixed with duplicates, retransmission
requests, mismatches and malformed messages, from
:func:`netagg.sim.traffic.random_traffic`) and the expected verdicts and
RESULT beats (from the golden model, :class:`netagg.sim.message_model.Switch`) are
computed at build time and held in ROMs.

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
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim import beats as sb
from netagg.sim.message_model import Switch
from netagg.sim.traffic import random_traffic

WATCHDOG_BITS = 22


def selftest_jobs(params: Params) -> JobTable:
    """Job 0: min(W_max, 3) workers on the first half of the slots; job 1
    (if J >= 2 and S >= 2): min(W_max, 2) workers on the rest."""
    S = params.slots
    if params.jobs >= 2 and S >= 2:
        half = S // 2
        jobs = [Job(0, min(params.workers, 3), 0, half),
                Job(1, min(params.workers, 2), half, S - half)]
    else:
        jobs = [Job(0, min(params.workers, 3), 0, S)]
    return JobTable(jobs, params)


def selftest_traffic(params: Params, jobs: JobTable, n: int = 32, seed: int = 1):
    """(messages, verdicts [(code, tag)], RESULTs [(payload, tag)]) in model order.
    Counts are kept to at most 2 L elements so that the ROMs stay small."""
    small = params.replace(elements=min(params.elements, 2 * params.lanes))
    msgs = random_traffic(small, JobTable(list(jobs), small), n, seed=seed, p_dup=0.08,
                          p_retx=0.08, p_bad=0.08, p_mismatch=0.04, window=2)
    sw = Switch(params, jobs)
    verdicts, results = [], []
    for tag, m in enumerate(msgs):
        out = sw.receive(m)
        verdicts.append((int(out.verdict), tag))
        results.extend((r.pack(), tag) for r in out.results)
    return msgs, verdicts, results


def _egress_rows(payload: bytes, tag: int, lanes: int):
    """Expected egress beats of one RESULT: (packed beat, lane mask)."""
    rows = []
    for b in sb.message_to_beats(payload, lanes, tag):
        h = sb.Header.from_int(b.header)
        value = b.header | (b.tag << 128) | (int(b.last) << 144)
        for i, d in enumerate(b.data):
            value |= d << (145 + 32 * i)
        rows.append((value, h))
    out = []
    count = rows[0][1].count
    for k, (value, _) in enumerate(rows):
        valid = max(0, min(lanes, count - k * lanes))
        out.append(value | (((1 << valid) - 1) << (145 + 32 * lanes)))
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
        self._msgs, self._verdicts, self._results = selftest_traffic(
            params, self._jobs, n_messages, seed)
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
            in_rows += [sb.pack_ingress(b, L) for b in sb.message_to_beats(msg, L, tag)]
        out_rows = []
        for payload, tag in self._results:
            out_rows += _egress_rows(payload, tag, L)
        v_rows = [code | (tag << 4) for code, tag in self._verdicts]
        in_w = layouts.ingress_beat(L).size
        eg_w = layouts.egress_beat(L).size
        assert eg_w == 145 + 32 * L

        m.submodules.in_rom = in_rom = Memory(shape=in_w, depth=len(in_rows), init=in_rows)
        m.submodules.out_rom = out_rom = Memory(shape=eg_w + L, depth=max(1, len(out_rows)),
                                                init=out_rows or [0])
        m.submodules.v_rom = v_rom = Memory(shape=20, depth=len(v_rows), init=v_rows)
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
        exp = data.View(data.StructLayout({"beat": layouts.egress_beat(L), "mask": L}),
                        orp.data)
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
