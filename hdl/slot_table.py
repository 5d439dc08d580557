"""The slot table: SwitchML's two copies per slot, in block RAM, and the
engine that applies protocol.md's slot algorithm to each validated message.

Parts (docs/architecture.md, Slot table): :class:`~netagg.hdl.payload_buffer.PayloadBuffer`
(payload beats), :class:`~netagg.hdl.decision.Decision` (the algorithm, a
function of a message and its slot word), :class:`~netagg.hdl.issue_queue.IssueQueue`
(decided messages through the lanes' read-add-write loop) and
:class:`~netagg.hdl.credit.ResultCredit` (room in the multicast back-end).
:class:`SlotTable` holds the slot words and sequences the decisions.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.credit import ResultCredit
from netagg.hdl.decision import Decision
from netagg.hdl.issue_queue import IssueQueue
from netagg.hdl.lane import Lane
from netagg.hdl.payload_buffer import PayloadBuffer
from netagg.hdl.ram import NO_RW_CHECK, registered_read
from netagg.hdl.slot_layouts import (
    Mode,
    beat_count_bits,
    copy_state,
    result_beat,
    result_desc,
    slot_state,
)
from netagg.hdl.validator import descriptor, payload_beat
from netagg.params import Params

__all__ = ["SlotTable", "copy_state", "slot_state", "result_desc", "result_beat"]


class SlotTable(CheckedComponent):
    """Applies the slot algorithm of protocol.md to validated messages.

    State: S slot words (both copies' bitmaps, counts, done flags and round
    metadata) and 2 x S x K accumulators with per-beat sticky flags, in
    block RAM (``amaranth.lib.memory.Memory``). After reset the slot words
    are cleared (S cycles, ``ready`` low).

    ``desc``: the validator's descriptors; ``data``: the payload beats of
    accepted messages, stored in a buffer of ``data_beats`` beats.
    ``verdict``: one per message, in message order. ``res_desc`` /
    ``res_beat``: RESULTs to send (the multicast back-end); a RESULT's
    descriptor precedes its beats by at least two cycles. ``res_free``: the
    back-end returns buffer space (beats) as it finishes RESULTs; a round that
    completes, or a retransmission, waits until the back-end has room for its
    beats (credit ``result_beats``).

    Decisions (the slot algorithm) are taken in arrival order. The beats of
    up to two decided messages are issued to the lanes, one beat per cycle:
    a read-after-write hazard (a beat of the same copy and index still in
    the read-add-write loop of ``loop_latency`` cycles) holds the older one,
    and the younger one issues meanwhile if it is of another slot (and not
    both of them complete a round); messages of one slot keep their order.
    Cycles in which a combine waits and nothing issues pulse ``stall`` (one
    cycle late). Decisions are at least four cycles apart (state read, decision
    terms and decision are registered): messages of four beats or more keep
    the lanes busy. Loop latency: ``loop_latency`` = lane latency + 3.

    The decision pipeline of the message at the head of ``desc`` (``age``
    counts its cycles there, saturating at 3): age 0, its slot word is read
    and its descriptor registered; age 1, the word is registered; age 2, the
    decision terms (:class:`Decision`'s outputs) are registered; from age 3
    it is decided as soon as the issue queue has room (a combine: an entry
    free; anything else: the queue empty), the back-end has credit for its
    RESULT and ``res_desc`` is ready. A message dropped by the validator
    needs no slot word and is decided from age 2. At the decision the verdict
    is registered, the slot word is written (ACCEPT), the RESULT descriptor
    is offered and the message is pushed to the issue queue (a combine or a
    retransmission) or its payload released (anything else).
    """

    @staticmethod
    def check(params: Params, *, result_beats: int, data_beats: int, fp_stages=None) -> None:
        PayloadBuffer.check(params, depth=data_beats)
        if result_beats < params.beats:
            raise ValueError(f"result_beats ({result_beats}) must hold one full RESULT "
                             f"({params.beats} beats)")
        IssueQueue.check(params, data_beats=data_beats, fp_stages=fp_stages)

    def __init__(self, params: Params, *, result_beats: int, data_beats: int, fp_stages=None):
        self._params = params
        self._data_beats = data_beats
        self._result_beats = result_beats
        self._fp_stages = fp_stages
        self._lane_latency = Lane.latency_of(fp_stages)
        super().__init__({
            "desc": In(stream.Signature(descriptor(params))),
            "data": In(stream.Signature(payload_beat(params))),
            "verdict": Out(stream.Signature(layouts.VerdictLayout, always_ready=True)),
            "res_desc": Out(stream.Signature(result_desc(params))),
            "res_beat": Out(stream.Signature(result_beat(params), always_ready=True)),
            "res_free": In(stream.Signature(unsigned(16), always_ready=True)),
            "ready": Out(1),
            "busy": Out(1),
            "stall": Out(1),
            "completed": Out(1),
        })

    @property
    def lane_latency(self) -> int:
        return self._lane_latency

    @property
    def loop_latency(self) -> int:
        """Cycles from reading a beat's accumulators to writing them back."""
        return self._lane_latency + 3

    @staticmethod
    def loop_latency_of(fp_stages=None) -> int:
        """:attr:`loop_latency` of a slot table built with ``fp_stages``."""
        return Lane.latency_of(fp_stages) + 3

    def elaborate(self, platform):
        m = Module()
        p = self._params
        S = p.slots
        V = layouts.Verdict

        m.submodules.payload = payload = PayloadBuffer(p, depth=self._data_beats)
        m.submodules.decision = decision = Decision(p)
        m.submodules.issue = issue = IssueQueue(p, data_beats=self._data_beats,
                                                fp_stages=self._fp_stages)
        m.submodules.credit = credit = ResultCredit(self._result_beats, need=p.beats)

        wiring.connect(m, wiring.flipped(self.data), payload.w)
        wiring.connect(m, wiring.flipped(self.res_free), credit.free)
        wiring.connect(m, issue.res_beat, wiring.flipped(self.res_beat))
        m.d.comb += [payload.rd_addr.eq(issue.data_addr), issue.data.eq(payload.rd_data),
                     self.stall.eq(issue.stall)]

        # ---------------- slot words; after reset, cleared ----------------
        # A slot word is never used as read in the cycle it is written (decisions
        # re-read the state): no read-during-write logic.
        m.submodules.state_mem = state_mem = Memory(shape=slot_state(p), depth=S, init=[],
                                                    attrs=NO_RW_CHECK)
        state_wr = state_mem.write_port()
        clearing = Signal(init=1)
        clear_addr = Signal(range(S + 1))
        with m.If(clearing):
            m.d.comb += [state_wr.addr.eq(clear_addr), state_wr.data.eq(0), state_wr.en.eq(1)]
            m.d.sync += clear_addr.eq(clear_addr + 1)
            with m.If(clear_addr == S - 1):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.ready.eq(~clearing)

        # ---------------- the message at the head ----------------
        state_read = registered_read(m, state_mem, self.desc.payload.slot_abs,
                                     name="state_read")
        # The head's descriptor comes straight from the FIFO's RAM: the decision
        # uses a copy in registers (the head's own from age 1 on).
        head = Signal(descriptor(p))
        m.d.sync += head.eq(self.desc.payload)
        state = Signal(slot_state(p))
        m.d.sync += state.eq(state_read)
        age = Signal(2)
        with m.If(~self.desc.valid | self.desc.ready | clearing):
            m.d.sync += age.eq(0)
        with m.Elif(age != 3):
            m.d.sync += age.eq(age + 1)
        m.d.comb += [decision.desc.eq(head), decision.state.eq(state)]

        # ---------------- the decision terms, registered ----------------
        terms = Signal(data.StructLayout({
            "verdict": layouts.Verdict,
            "mode": Mode,
            "needs_result": unsigned(1),
            "result_beats": unsigned(beat_count_bits(p)),
            "result_n": decision.result_n.shape(),
            "completes": unsigned(1),
            "new_state": slot_state(p),
        }))
        m.d.sync += [
            terms.verdict.eq(decision.verdict),
            terms.mode.eq(decision.mode),
            terms.needs_result.eq(decision.needs_result),
            terms.result_beats.eq(Mux(decision.needs_result, decision.beats, 0)),
            terms.result_n.eq(decision.result_n),
            terms.completes.eq(decision.completes),
            terms.new_state.eq(decision.new_state),
        ]

        # ---------------- the decision ----------------
        needs_state = head.verdict == V.ACCEPT
        # Only registered terms: a combine needs a free queue entry, anything
        # else an empty queue.
        room = Mux(terms.mode == Mode.LANES, issue.has_room, issue.will_be_empty)
        decide = Signal()
        m.d.comb += decide.eq(
            self.desc.valid & ~clearing & room & Mux(needs_state, age == 3, age >= 2)
            & (~terms.needs_result | credit.ok) & self.res_desc.ready)
        m.d.comb += self.desc.ready.eq(decide)

        with m.If(decide & (terms.verdict == V.ACCEPT)):
            m.d.comb += [state_wr.addr.eq(head.slot_abs), state_wr.data.eq(terms.new_state),
                         state_wr.en.eq(1)]

        # The combinational outputs used here depend on the head and its
        # state only, which are stable from age 2: at the decision they are
        # the head's, as are the registered terms.
        req = issue.push.payload
        m.d.comb += [
            issue.push.valid.eq(decide & (terms.mode != Mode.DISCARD)),
            req.rtx.eq(terms.mode == Mode.RETRANSMIT),
            req.slot.eq(head.slot_abs),
            req.ver.eq(head.meta.ver),
            req.first.eq(decision.first),
            req.result.eq(terms.needs_result),
            req.dtype.eq(decision.round.dtype),
            req.op.eq(decision.round.op),
            req.beats.eq(decision.beats),
            req.count.eq(decision.round.count),
            req.data_addr.eq(payload.head),
            req.data_beats.eq(Mux(terms.mode == Mode.LANES, head.beats, 0)),
        ]
        with m.If(decide):
            m.d.comb += payload.claim.eq(head.beats)
            with m.If(terms.mode != Mode.LANES):       # its payload is not needed
                m.d.comb += payload.release.eq(issue.released + head.beats)
            with m.Else():
                m.d.comb += payload.release.eq(issue.released)
            with m.If(terms.needs_result):
                m.d.comb += credit.take.eq(terms.result_beats)
        with m.Else():
            m.d.comb += payload.release.eq(issue.released)

        # Verdict and the RESULT descriptor.
        m.d.sync += [self.verdict.valid.eq(decide), self.verdict.payload.code.eq(terms.verdict),
                     self.verdict.payload.tag.eq(head.tag),
                     self.completed.eq(decide & (terms.verdict == V.ACCEPT) & terms.completes)]
        rd = self.res_desc.payload
        m.d.comb += [
            self.res_desc.valid.eq(decide & terms.needs_result),
            rd.meta.eq(head.meta),
            rd.meta.dtype.eq(decision.round.dtype),
            rd.meta.op.eq(decision.round.op),
            rd.meta.count.eq(decision.round.count),
            rd.meta.offset.eq(decision.round.offset),
            rd.tag.eq(head.tag),
            rd.multicast.eq(terms.verdict == V.ACCEPT),
            rd.workers.eq(head.workers),
            rd.n.eq(terms.result_n),
            rd.beats.eq(terms.result_beats),
        ]

        m.d.comb += self.busy.eq(issue.busy | ~payload.empty | clearing)
        return m
