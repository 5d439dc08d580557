"""The netagg aggregation core: validator, job table, slot table, multicast
back-end and counters (the ``netagg_core`` top level, see docs/core.md)."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg import regmap, wire
from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.fifo import BufferedFIFO
from netagg.hdl.job_table import JobTable
from netagg.hdl.lane_loop import LaneLoop
from netagg.hdl.multicast import Multicast
from netagg.hdl.netlist import and_or
from netagg.hdl.skid import SkidBuffer
from netagg.hdl.slot_table import SlotTable
from netagg.hdl.validator import Validator, descriptor
from netagg.params import Params


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class NetaggCore(CheckedComponent):
    """The in-network aggregation core of protocol.md.

    Ports (docs/core.md): ``i`` ingress message beats, ``o`` egress RESULT
    beats, ``v`` one verdict per message in arrival order, a control register
    port (``ctrl_*``: job table and counters) and ``idle``.

    Every message is validated in full (store and forward) before it can
    change state. Throughput: one payload beat (L elements) per cycle for
    multi-beat messages, stalling only on read-after-write hazards of the
    same slot copy (counted in ``stall``) and on egress backpressure.

    Build options: ``fp_stages``, the floating-point adders' depth
    (:class:`~netagg.hdl.lane.Lane`); ``acc_ram``, the accumulator loop's
    form (:class:`~netagg.hdl.lane_loop.LaneLoop`): ``"memory"`` (portable,
    default) and ``"ecp5"`` (``DP16KD`` blocks, Lattice ECP5 only) build the
    same cycle-level behaviour, with forwarding; ``"compact"`` (fewest
    cells, for small FPGAs: no RAM output register, no forwarding, a RESULT
    buffer of four RESULTs instead of eight) is slower on back-to-back
    contributions to one slot. Results are the same in all three.
    """

    @staticmethod
    def check(params: Params, *, fp_stages=None, acc_ram: str = "memory") -> None:
        LaneLoop.check(params, fp_stages=fp_stages, acc_ram=acc_ram)

    def __init__(self, params: Params, *, fp_stages=None, acc_ram: str = "memory"):
        self._params = params
        self._fp_stages = fp_stages
        self._acc_ram = acc_ram
        L = params.lanes
        super().__init__({
            "i": In(stream.Signature(layouts.ingress_beat(L))),
            "o": Out(stream.Signature(layouts.egress_beat(L))),
            # A stream without ready: verdicts cannot be held back.
            "v": Out(wiring.Signature({"valid": Out(1), "payload": Out(layouts.VerdictLayout)})),
            "ctrl_addr": In(16),
            "ctrl_wdata": In(32),
            "ctrl_we": In(1),
            "ctrl_rdata": Out(32),
            "idle": Out(1),
        })

    @property
    def params(self) -> Params:
        return self._params

    def elaborate(self, platform):
        m = Module()
        p = self._params
        B = p.beats
        fifo_depth = _pow2_at_least(2 * B + 3)
        # RESULT buffer: eight full RESULTs absorb the bursts of completions
        # of random traffic (docs/architecture.md); four in the compact form.
        result_depth = _pow2_at_least((4 if self._acc_ram == "compact" else 8) * B)

        compact = self._acc_ram == "compact"
        m.submodules.jobs = jobs = JobTable(p, parallel=not compact)
        m.submodules.validator = val = Validator(p, compact=compact)
        m.submodules.desc_q = desc_q = BufferedFIFO(width=descriptor(p).size,
                                                         depth=fifo_depth)
        m.submodules.slots = slots = SlotTable(p, result_beats=result_depth,
                                               data_beats=fifo_depth,
                                               fp_stages=self._fp_stages,
                                               acc_ram=self._acc_ram)
        m.submodules.mcast = mcast = Multicast(
            p, depth=result_depth, compact=compact,
            ram_form="ecp5" if self._acc_ram == "ecp5" else "memory")

        # Ingress: the validator sees beats only once the slot table is ready.
        m.d.comb += [
            val.i.payload.eq(self.i.payload),
            val.i.valid.eq(self.i.valid & slots.ready),
            self.i.ready.eq(val.i.ready & slots.ready),
            jobs.lookup_job.eq(val.job_id),
            val.job.eq(jobs.lookup),
            val.job_valid.eq(jobs.lookup_valid),
            jobs.lookup_slot.eq(val.slot),
            val.slot_ok.eq(jobs.lookup_slot_ok),
            jobs.lookup_worker.eq(val.worker),
            val.worker_ok.eq(jobs.lookup_worker_ok),
        ]
        wiring.connect(m, val.data, slots.data)
        if compact:
            wiring.connect(m, val.desc, desc_q.w_stream)
            m.d.comb += [
                slots.desc.payload.eq(data.View(descriptor(p), desc_q.r_data)),
                slots.desc.valid.eq(desc_q.r_rdy),
                desc_q.r_en.eq(slots.desc.ready),
            ]
            desc_held = Const(0)
        else:
            # A register slice before the queue (its write enable comes from
            # flip-flops); after it, the slot table's own input buffer takes
            # the queue's output register (its ``desc.ready`` is a
            # flip-flop).
            m.submodules.desc_slice = desc_slice = SkidBuffer(descriptor(p))
            wiring.connect(m, val.desc, desc_slice.i)
            m.d.comb += [desc_q.w_data.eq(desc_slice.o.payload),
                         desc_q.w_en.eq(desc_slice.o.valid),
                         desc_slice.o.ready.eq(desc_q.w_rdy),
                         slots.desc.payload.eq(data.View(descriptor(p), desc_q.r_data)),
                         slots.desc.valid.eq(desc_q.r_rdy),
                         desc_q.r_en.eq(slots.desc.ready)]
            desc_held = desc_slice.o.valid
        wiring.connect(m, slots.res_desc, mcast.res_desc)
        wiring.connect(m, slots.res_beat, mcast.res_beat)
        wiring.connect(m, mcast.free, slots.res_free)
        wiring.connect(m, mcast.o, wiring.flipped(self.o))
        m.d.comb += [self.v.valid.eq(slots.verdict.valid),
                     self.v.payload.eq(slots.verdict.payload)]

        # Counters.
        counters = {name: Signal(32, name=f"cnt_{name}") for name in regmap.CORE_COUNTERS}
        V = layouts.Verdict
        code = slots.verdict.payload.code
        with m.If(slots.verdict.valid):
            m.d.sync += counters["rx"].eq(counters["rx"] + 1)
            with m.Switch(code):
                for verdict in wire.Verdict:
                    name = verdict.counter
                    if verdict is wire.Verdict.RETRANSMIT:
                        name = "retransmit"
                    if name:
                        with m.Case(V(verdict.value)):
                            m.d.sync += counters[name].eq(counters[name] + 1)
        with m.If(slots.completed):
            m.d.sync += counters["results"].eq(counters["results"] + 1)
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            m.d.sync += counters["tx"].eq(counters["tx"] + 1)
        with m.If(slots.stall):
            m.d.sync += counters["stall"].eq(counters["stall"] + 1)

        # Control port: job table writes, registered reads.
        m.d.comb += [jobs.we.eq(self.ctrl_we), jobs.addr.eq(self.ctrl_addr),
                     jobs.wdata.eq(self.ctrl_wdata)]
        # (an AND-OR of every register with its address's exact match, from
        # kept selects and pairs: 0 at an address that is none of them)
        rdata = jobs.rdata | and_or(
            m, [(self.ctrl_addr == regmap.COUNTER_BASE + index, counters[name])
                for index, name in enumerate(regmap.CORE_COUNTERS)], width=32, name="cnt_read")
        m.d.sync += self.ctrl_rdata.eq(rdata)

        m.d.comb += self.idle.eq(~val.busy & ~desc_held & ~desc_q.r_rdy & (desc_q.level == 0)
                                 & ~slots.busy & ~mcast.busy & slots.ready)
        return m
