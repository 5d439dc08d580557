"""The slot table's lane loop: the accumulators' read-add-write loop
through L lanes, and the RESULT beats it produces."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.lane import Lane
from netagg.hdl.slot_layouts import acc_word, result_beat
from netagg.hdl.validator import payload_beat
from netagg.params import Params

__all__ = ["LaneLoop", "loop_beat"]


def acc_addr_bits(params: Params) -> int:
    """Bits of an accumulator address, (slot x 2 + ver) x K/L + beat."""
    return layouts.bits_for(2 * params.slots * params.beats)


def loop_beat(params: Params) -> data.StructLayout:
    """A beat issued to the loop: which accumulators, and what to do."""
    return data.StructLayout({
        "rtx": unsigned(1),       # a retransmitted beat: read out as a RESULT beat, no lanes
        "addr": unsigned(acc_addr_bits(params)),
        "mask": unsigned(params.lanes),   # lanes holding elements
        "last": unsigned(1),      # the message's last beat
        "first": unsigned(1),     # first contribution of a round: r = to_acc(b)
        "result": unsigned(1),    # the new accumulators go out as a RESULT beat
        "bf16": unsigned(1),      # a bf16 round (flag on the RESULT beat)
        "dtype": layouts.DType,
        "op": layouts.Op,
    })


def _stage(params: Params) -> data.StructLayout:
    """A beat in the loop: where it writes back, and what it carries along."""
    return data.StructLayout({
        "valid": unsigned(1), "rtx": unsigned(1),
        "addr": unsigned(acc_addr_bits(params)),
        "mask": unsigned(params.lanes), "last": unsigned(1), "first": unsigned(1),
        "result": unsigned(1), "nan": unsigned(1), "ovf": unsigned(1),
        "bf16": unsigned(1),
    })


class LaneLoop(CheckedComponent):
    """2 x S x K/L accumulator beats (with sticky NaN and overflow flags) in
    block RAM, and L lanes (``hdl/lane.py``) between its read and write ports.

    Ports
    -----
    issue : In(stream of loop_beat, always_ready)
        One beat per cycle. A combine beat (``rtx`` low) reads its
        accumulators, combines them with ``data`` in the lanes and writes
        them back ``latency`` cycles later (address register, RAM read, RAM
        output register, the lanes, the write); the read port is transparent
        to the write-back, so a beat issued in the cycle of a write-back to
        its address sees the new value. A retransmitted beat (``rtx``) is
        read out as a RESULT beat, nothing written.
    data : In(payload_beat)
        The payload beat of the beat issued in the previous cycle.
    hazard_addr : In(array of 2 addresses)
    hazard : Out(2)
        Combinational: a combine beat to that address is in the loop and
        its write-back is not in this cycle (issuing one now would read a
        stale value).
    lanes_busy : Out(1)
        Registered: a combine beat was in the loop in the previous cycle (a
        retransmission waits for ``~lanes_busy``: then the loop holds no
        combine beat that its read could miss).
    res_beat : Out(stream of result_beat, always_ready)
        Registered: a combine beat with ``result`` as it is written back
        (new accumulators and sticky flags), ``latency`` + 1 cycles after
        its issue; a retransmitted beat as read, 4 cycles after its issue.
    busy : Out(1)
        A beat is in the loop or on ``res_beat``.
    """

    @staticmethod
    def check(params: Params, *, fp_stages=None) -> None:
        Lane.check(dtypes=params.dtypes, ops=params.ops,
                   bf16_accumulate=params.bf16_accumulate, stages=fp_stages)

    def __init__(self, params: Params, *, fp_stages=None):
        self._params = params
        self._lane_args = dict(dtypes=params.dtypes, ops=params.ops,
                               bf16_accumulate=params.bf16_accumulate, stages=fp_stages)
        self._lane_latency = Lane.latency_of(fp_stages)
        super().__init__({
            "issue": In(stream.Signature(loop_beat(params), always_ready=True)),
            "data": In(payload_beat(params)),
            "hazard_addr": In(data.ArrayLayout(acc_addr_bits(params), 2)),
            "hazard": Out(2),
            "lanes_busy": Out(1),
            "res_beat": Out(stream.Signature(result_beat(params), always_ready=True)),
            "busy": Out(1),
        })

    @property
    def latency(self) -> int:
        """Cycles from a beat's issue to its write-back."""
        return self._lane_latency + 3

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, S = p.lanes, p.beats, p.slots
        D = self._lane_latency
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
        m.d.sync += self.lanes_busy.eq(Cat(s.valid & ~s.rtx
                                           for s in [at_addr, at_read, at_operands]
                                           + in_lanes).any())
        for k in range(2):
            for s in in_loop:
                with m.If(s.valid & ~s.rtx & (s.addr == self.hazard_addr[k])):
                    m.d.comb += self.hazard[k].eq(1)

        beat = self.issue.payload
        m.d.sync += [
            at_addr.valid.eq(self.issue.valid),
            at_addr.rtx.eq(beat.rtx),
            at_addr.addr.eq(beat.addr),
            at_addr.mask.eq(beat.mask),
            at_addr.last.eq(beat.last),
            at_addr.first.eq(beat.first),
            at_addr.result.eq(beat.result),
            at_addr.bf16.eq(beat.bf16),
            at_addr_dtype.eq(beat.dtype),
            at_addr_op.eq(beat.op),
        ]
        m.d.comb += [acc_rd.addr.eq(at_addr.addr), acc_rd.en.eq(1)]
        m.d.sync += [at_read.eq(at_addr), at_read_dtype.eq(at_addr_dtype),
                     at_read_op.eq(at_addr_op)]

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

        m.d.comb += self.busy.eq(at_addr.valid | at_read.valid | at_operands.valid | rtx_out
                                 | rb.valid | Cat(s.valid for s in in_lanes).any())
        return m
