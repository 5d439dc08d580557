"""The slot table's issue queue: decided messages, their beats issued to the
lanes through the accumulators' read-add-write loop, with hazard checks."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.lane import Lane
from netagg.hdl.slot_layouts import (
    acc_word,
    beat_count_bits,
    data_addr_bits,
    issue_request,
    result_beat,
)
from netagg.hdl.validator import payload_beat
from netagg.params import Params

__all__ = ["IssueQueue"]


def _entry(params: Params, data_beats: int) -> data.StructLayout:
    """A queued message: its request, and how far its beats have been issued."""
    bbits = beat_count_bits(params)
    return data.StructLayout({
        "valid": unsigned(1),
        "rtx": unsigned(1),
        "slot": unsigned(layouts.bits_for(params.slots)),
        "first": unsigned(1),
        "result": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "beat": unsigned(bbits),            # next beat to issue
        "last_beat": unsigned(bbits),       # beats - 1
        "left": unsigned(layouts.bits_for(params.elements + 1)),  # elements from `beat` on
        "acc_addr": unsigned(layouts.bits_for(2 * params.slots * params.beats)),
        "data_addr": unsigned(data_addr_bits(data_beats)),
        "data_beats": unsigned(bbits),
        "done": unsigned(1),      # every beat issued; leaves the queue next cycle
        "blocked": unsigned(1),   # may not overtake the entry ahead of it
    })


def _stage(params: Params) -> data.StructLayout:
    """A beat in the loop: where it writes back, and what it carries along."""
    return data.StructLayout({
        "valid": unsigned(1), "rtx": unsigned(1),
        "addr": unsigned(layouts.bits_for(2 * params.slots * params.beats)),
        "mask": unsigned(params.lanes), "last": unsigned(1), "first": unsigned(1),
        "result": unsigned(1), "nan": unsigned(1), "ovf": unsigned(1),
        "bf16": unsigned(1),
    })


class IssueQueue(CheckedComponent):
    """Two decided messages, their beats issued one per cycle through the
    accumulators' read-add-write loop (2 x S x K/L accumulator beats in block
    RAM, L lanes).

    Ports
    -----
    push : In(stream of issue_request, always_ready)
        A decided message (a combine or a retransmission). Pushed only when
        ``has_room`` (a combine) or ``will_be_empty`` (a retransmission);
        it can issue its first beat on the next cycle.
    has_room : Out(1)
        At most one entry is held after this cycle (only registers decide).
    will_be_empty : Out(1)
        No entry is held after this cycle (only registers decide).
    data_addr : Out(address)
        Registered: the payload buffer beat to read; ``data`` must hold it
        the next cycle (``PayloadBuffer.rd_data``).
    data : In(payload_beat)
    released : Out(count)
        Payload buffer beats of entries leaving this cycle, oldest message
        first: an entry that overtook the one ahead of it returns its beats
        with that one (the buffer frees in arrival order).
    res_beat : Out(stream of result_beat, always_ready)
        Registered RESULT beats: a completing combine's beats as they leave
        the lanes (new accumulators and sticky flags), a retransmission's as
        read from the accumulators. A RESULT's beats are consecutive in
        issue order and never interleave with another RESULT's.
    stall : Out(1)
        Registered, one cycle late: a combine was waiting and nothing issued.
    busy : Out(1)
        An entry is held, or a beat is in the loop or on ``res_beat``.

    Issue rules: the older entry issues unless it is a combine whose beat's
    accumulator address is still in the loop (read-after-write hazard) or a
    retransmission while the lanes hold combine beats (seen one cycle late).
    The younger one, always a combine, issues in a cycle the older one does
    not, unless it has a hazard or the older one has beats left and it was
    ``blocked`` when pushed: behind an entry of the same slot, behind a
    retransmission, or a RESULT behind a RESULT. So messages of one slot
    keep their order and RESULT beats never interleave. Loop:
    ``loop_latency`` = lane latency + 3 cycles from the accumulator read
    address to the write-back (address register, RAM read,
    RAM output register, the lanes); the read port is transparent to the
    write-back.
    """

    @staticmethod
    def check(params: Params, *, data_beats: int, fp_stages=None) -> None:
        Lane.check(dtypes=params.dtypes, ops=params.ops,
                   bf16_accumulate=params.bf16_accumulate, stages=fp_stages)

    def __init__(self, params: Params, *, data_beats: int, fp_stages=None):
        self._params = params
        self._data_beats = data_beats
        self._lane_args = dict(dtypes=params.dtypes, ops=params.ops,
                               bf16_accumulate=params.bf16_accumulate, stages=fp_stages)
        self._lane_latency = Lane.latency_of(fp_stages)
        super().__init__({
            "push": In(stream.Signature(issue_request(params, data_beats), always_ready=True)),
            "has_room": Out(1),
            "will_be_empty": Out(1),
            "data_addr": Out(data_addr_bits(data_beats)),
            "data": In(payload_beat(params)),
            "released": Out(data_addr_bits(data_beats) + 2),
            "res_beat": Out(stream.Signature(result_beat(params), always_ready=True)),
            "stall": Out(1),
            "busy": Out(1),
        })

    @property
    def lane_latency(self) -> int:
        return self._lane_latency

    @property
    def loop_latency(self) -> int:
        """Cycles from reading a beat's accumulators to writing them back."""
        return self._lane_latency + 3

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, S = p.lanes, p.beats, p.slots
        D = self._lane_latency
        entry_l = _entry(p, self._data_beats)
        stage_l = _stage(p)

        m.submodules.acc_mem = acc_mem = Memory(shape=acc_word(p), depth=2 * S * B, init=[])
        acc_wr = acc_mem.write_port()
        acc_rd = acc_mem.read_port(transparent_for=(acc_wr,))
        lanes = []
        for i in range(L):
            lane = Lane(**self._lane_args)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += lane.o.ready.eq(1)
            lanes.append(lane)

        # ---------------- the queue: older, younger ----------------
        older = Signal(entry_l)
        younger = Signal(entry_l)
        queue = [older, younger]
        overtaken_beats = Signal.like(self.released)   # freed beats of entries that overtook

        # Loop stages: address (RAM addresses), read (RAMs being read),
        # operands (RAM outputs registered: the lanes' inputs), then D lane stages.
        at_addr = Signal(stage_l)
        at_addr_dtype = Signal(layouts.DType)
        at_addr_op = Signal(layouts.Op)
        at_read = Signal(stage_l)
        at_read_dtype = Signal(layouts.DType)
        at_read_op = Signal(layouts.Op)
        at_operands = Signal(stage_l)
        at_operands_dtype = Signal(layouts.DType)
        at_operands_op = Signal(layouts.Op)
        in_lanes = [Signal(stage_l, name=f"in_lane{k}") for k in range(D)]
        # Beats whose write-back is still ahead (the last one writes this
        # cycle, and the read port is transparent to it).
        in_loop = [at_addr, at_read, at_operands] + in_lanes[:D - 1]
        # Registered: a retransmission waits as the older entry with nothing
        # issuing, so the loop seen a cycle ago bounds the one now.
        lanes_busy = Signal()
        m.d.sync += lanes_busy.eq(Cat(s.valid & ~s.rtx
                                      for s in [at_addr, at_read, at_operands] + in_lanes).any())

        unissued, hazard = [], []
        for name, ent in zip(("older", "younger"), queue, strict=True):
            h = Signal(name=f"{name}_hazard")
            for s in in_loop:
                with m.If(s.valid & ~s.rtx & (s.addr == ent.acc_addr)):
                    m.d.comb += h.eq(1)
            hazard.append(h)
            unissued.append(ent.valid & ~ent.done)
        older_can = unissued[0] & ~older.rtx & ~hazard[0]
        older_rtx = unissued[0] & older.rtx & ~lanes_busy
        younger_can = unissued[1] & ~younger.rtx & ~hazard[1] & (~younger.blocked | ~unissued[0])
        issue_older = Signal()
        issue_younger = Signal()
        m.d.comb += [
            issue_older.eq(older_can | older_rtx),
            issue_younger.eq(~(older_can | older_rtx) & younger_can),
        ]
        m.d.sync += self.stall.eq(~issue_older & ~issue_younger
                                  & ((unissued[0] & ~older.rtx) | (unissued[1] & ~younger.rtx)))

        issuing = Signal(entry_l)
        m.d.comb += issuing.eq(Mux(issue_younger, younger, older))
        lane_mask = Signal(L)
        for i in range(L):
            m.d.comb += lane_mask[i].eq(issuing.left > i)
        m.d.sync += [
            at_addr.valid.eq(issue_older | issue_younger),
            at_addr.rtx.eq(older_rtx),
            at_addr.addr.eq(issuing.acc_addr),
            at_addr.mask.eq(lane_mask),
            at_addr.last.eq(issuing.beat == issuing.last_beat),
            at_addr.first.eq(issuing.first),
            at_addr.result.eq(issuing.result),
            at_addr.bf16.eq(issuing.dtype == layouts.DType.BF16),
            at_addr_dtype.eq(issuing.dtype),
            at_addr_op.eq(issuing.op),
            self.data_addr.eq(issuing.data_addr),
        ]
        m.d.comb += [acc_rd.addr.eq(at_addr.addr), acc_rd.en.eq(1)]
        m.d.sync += [at_read.eq(at_addr), at_read_dtype.eq(at_addr_dtype),
                     at_read_op.eq(at_addr_op)]

        # The queue after this cycle's issue.
        advanced = [Signal(entry_l, name="older_next"), Signal(entry_l, name="younger_next")]
        leaving = []
        for name, cur, nxt, sel in zip(("older", "younger"), queue, advanced,
                                       (issue_older, issue_younger), strict=True):
            m.d.comb += nxt.eq(cur)
            with m.If(sel):
                m.d.comb += [nxt.beat.eq(cur.beat + 1), nxt.acc_addr.eq(cur.acc_addr + 1),
                             nxt.data_addr.eq(cur.data_addr + 1),
                             nxt.left.eq(Mux(cur.left > L, cur.left - L, 0))]
                with m.If(cur.beat == cur.last_beat):
                    m.d.comb += nxt.done.eq(1)
            f = Signal(name=f"{name}_leaving")
            m.d.comb += f.eq(cur.valid & cur.done)
            leaving.append(f)
        # Entries leave the cycle after their last beat: only registers decide.
        keep_older = older.valid & ~older.done
        keep_younger = younger.valid & ~younger.done
        m.d.comb += [self.has_room.eq(~(keep_older & keep_younger)),
                     self.will_be_empty.eq(~keep_older & ~keep_younger)]

        # Payload buffer space comes back in arrival order.
        with m.If(leaving[0]):
            m.d.comb += self.released.eq(older.data_beats + overtaken_beats
                                         + Mux(leaving[1], younger.data_beats, 0))
            m.d.sync += overtaken_beats.eq(0)
        with m.Elif(leaving[1]):
            m.d.sync += overtaken_beats.eq(overtaken_beats + younger.data_beats)

        # A pushed request becomes an entry. Behind a message of the same
        # slot, a retransmission, or (for a RESULT) another RESULT, a
        # combine waits its turn.
        req = self.push.payload
        requested = Signal(entry_l)
        ahead = Signal(entry_l)
        m.d.comb += ahead.eq(Mux(keep_older, older, younger))
        m.d.comb += [
            requested.valid.eq(1),
            requested.rtx.eq(req.rtx),
            requested.slot.eq(req.slot),
            requested.first.eq(req.first),
            requested.result.eq(req.result),
            requested.dtype.eq(req.dtype),
            requested.op.eq(req.op),
            requested.beat.eq(0),
            requested.last_beat.eq(req.beats - 1),
            requested.left.eq(req.count),
            requested.acc_addr.eq(Cat(req.ver, req.slot) * B),
            requested.data_addr.eq(req.data_addr),
            requested.data_beats.eq(req.data_beats),
            requested.blocked.eq((ahead.slot == req.slot) | ahead.rtx
                                 | (ahead.result & req.result)),
        ]
        placed = Signal(entry_l)
        with m.If(self.push.valid):
            m.d.comb += placed.eq(requested)
        with m.If(keep_older):
            m.d.sync += [older.eq(advanced[0]),
                         younger.eq(Mux(keep_younger, advanced[1], placed))]
        with m.Elif(keep_younger):
            m.d.sync += [older.eq(advanced[1]), younger.eq(placed)]
        with m.Else():
            m.d.sync += [older.eq(placed), younger.eq(0)]

        # Operands: the RAM outputs, registered; lane inputs. The stage
        # delay line follows the lanes.
        acc_in = Signal(acc_word(p))
        payload_in = Signal(payload_beat(p))
        rtx_out = Signal()       # the operands stage holds a retransmitted beat (not for lanes)
        m.d.sync += [at_operands.eq(at_read), at_operands_dtype.eq(at_read_dtype),
                     at_operands_op.eq(at_read_op), acc_in.eq(acc_rd.data),
                     payload_in.eq(self.data), rtx_out.eq(at_read.valid & at_read.rtx)]
        with m.If(at_read.rtx):
            m.d.sync += at_operands.valid.eq(0)
        for i, lane in enumerate(lanes):
            m.d.comb += [
                lane.i.valid.eq(at_operands.valid),
                lane.i.payload.a.eq(acc_in.data[i]),
                lane.i.payload.b.eq(payload_in[i]),
                lane.i.payload.dtype.eq(at_operands_dtype),
                lane.i.payload.op.eq(at_operands_op),
                lane.i.payload.first.eq(at_operands.first),
            ]
        m.d.sync += [in_lanes[0].eq(at_operands), in_lanes[0].nan.eq(acc_in.nan),
                     in_lanes[0].ovf.eq(acc_in.ovf)]
        for k in range(1, D):
            m.d.sync += in_lanes[k].eq(in_lanes[k - 1])
        out = in_lanes[D - 1]

        # Write-back with the new sticky flags of the beat.
        lane_nan = Cat(lane.o.payload.nan for lane in lanes) & out.mask
        lane_ovf = Cat(lane.o.payload.ovf for lane in lanes) & out.mask
        new_nan = (out.nan & ~out.first) | lane_nan.any()
        new_ovf = (out.ovf & ~out.first) | lane_ovf.any()
        with m.If(out.valid):
            m.d.comb += [
                acc_wr.addr.eq(out.addr),
                acc_wr.en.eq(1),
                acc_wr.data.nan.eq(new_nan),
                acc_wr.data.ovf.eq(new_ovf),
            ]
            for i, lane in enumerate(lanes):
                m.d.comb += acc_wr.data.data[i].eq(lane.o.payload.r)

        # RESULT beats: from the lanes (a completing round) or the registered
        # RAM output (a retransmission, issued only once the lanes are empty).
        rb = self.res_beat
        m.d.sync += rb.valid.eq(0)
        with m.If(out.valid & out.result):
            m.d.sync += [rb.valid.eq(1), rb.payload.mask.eq(out.mask),
                         rb.payload.nan.eq(new_nan), rb.payload.ovf.eq(new_ovf),
                         rb.payload.last.eq(out.last), rb.payload.bf16.eq(out.bf16)]
            for i, lane in enumerate(lanes):
                m.d.sync += rb.payload.data[i].eq(lane.o.payload.r)
        with m.Elif(rtx_out):
            m.d.sync += [rb.valid.eq(1), rb.payload.mask.eq(at_operands.mask),
                         rb.payload.nan.eq(acc_in.nan), rb.payload.ovf.eq(acc_in.ovf),
                         rb.payload.last.eq(at_operands.last),
                         rb.payload.bf16.eq(at_operands.bf16),
                         rb.payload.data.eq(acc_in.data)]

        m.d.comb += self.busy.eq(older.valid | younger.valid | at_addr.valid | at_read.valid
                                 | at_operands.valid | rtx_out | rb.valid
                                 | Cat(s.valid for s in in_lanes).any())
        return m
