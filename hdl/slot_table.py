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
from netagg.hdl.lane_loop import LaneLoop
from netagg.hdl.netlist import KEEP
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
    up to four decided messages (two with ``acc_ram="compact"``; the
    :class:`~netagg.hdl.issue_queue.IssueQueue`) are issued to the lanes,
    one beat per cycle, from two cycles after the decision: a
    read-after-write hazard (a combine beat of the same copy and index
    issued less than ``spacing`` = lane latency + 1 cycles ago; the loop
    forwards the results of earlier ones) holds a message, and a younger
    one issues meanwhile if it is of another slot (and, for a RESULT, no
    older RESULT has beats left); messages of one slot keep their order.
    Cycles in which a combine waits and nothing issues pulse ``stall`` (one
    cycle late). Decisions: up to one per cycle (below), so messages of one beat
    or more can keep the lanes busy. Loop latency (issue to write-back): ``loop_latency`` =
    lane latency + 4 (+ 3 with ``acc_ram="compact"``, where the spacing is
    lane latency + 2). ``acc_ram``: the accumulator loop's build form
    (:class:`~netagg.hdl.lane_loop.LaneLoop`).

    The decision pipeline, in arrival order: A, the descriptor taken from
    ``desc`` (its slot word being read); B, the slot word registered and the
    decision (:class:`Decision`) computed from it; C, two entries holding
    decided messages' terms (a FIFO). A message moves from B into C when C
    has an entry free at the start of the cycle (a register), from A into B
    when B is empty or moves; ``desc.ready`` is high while A, B or an entry
    of C is free (a function of flip-flops only: no ready or stall signal
    crosses more than one stage). The oldest message in C is decided as soon as the
    issue queue has room (a combine: an entry free; anything else: the
    queue empty), the back-end has credit for its RESULT and ``res_desc``
    is ready: three cycles after it is taken at the earliest, one decision
    per cycle. At the decision the verdict is registered, the slot word is
    written (ACCEPT), the RESULT descriptor is offered and the message is
    pushed to the issue queue (a combine or a retransmission) or its
    payload released (anything else). A decision's outputs are final once
    computed in B; only the decision waits. Slot words are forwarded, so
    that every message sees the word left by every earlier message of its
    slot, decided or still in C: a message taken tracks C's entries not yet
    written and the one B pushes as it is taken (none is overwritten while
    it is in A), and moving into B takes the youngest tracked ACCEPT of its
    slot instead of the word it read; the word B pushes as it moves into B
    is forwarded in B (the select registered). A message dropped by the
    validator passes through the same stages (its slot word unused). With
    ``acc_ram="compact"`` (fewest cells, for slow clocks) there is one stage:
    B, decided from the slot RAM's read register through the combinational
    decision, one cycle after the message is taken at the earliest; a
    message is not taken while one of its slot is in B.
    """

    @staticmethod
    def check(params: Params, *, result_beats: int, data_beats: int, fp_stages=None,
              acc_ram: str = "memory") -> None:
        PayloadBuffer.check(params, depth=data_beats)
        if result_beats < params.beats:
            raise ValueError(f"result_beats ({result_beats}) must hold one full RESULT "
                             f"({params.beats} beats)")
        IssueQueue.check(params, data_beats=data_beats, fp_stages=fp_stages, acc_ram=acc_ram)

    def __init__(self, params: Params, *, result_beats: int, data_beats: int, fp_stages=None,
                 acc_ram: str = "memory"):
        self._params = params
        self._acc_ram = acc_ram
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
        """Cycles from a beat's issue to its accumulators' write-back."""
        return LaneLoop.latency_of(self._fp_stages, self._acc_ram)

    @staticmethod
    def loop_latency_of(fp_stages=None, acc_ram: str = "memory") -> int:
        """:attr:`loop_latency` of a slot table built with ``fp_stages`` and
        ``acc_ram``."""
        return LaneLoop.latency_of(fp_stages, acc_ram)

    def elaborate(self, platform):
        m = Module()
        p = self._params
        S = p.slots
        V = layouts.Verdict

        m.submodules.payload = payload = PayloadBuffer(p, depth=self._data_beats,
                                                       compact=self._acc_ram == "compact")
        m.submodules.decision = decision = Decision(p)
        m.submodules.issue = issue = IssueQueue(p, data_beats=self._data_beats,
                                                fp_stages=self._fp_stages, acc_ram=self._acc_ram)
        m.submodules.credit = credit = ResultCredit(self._result_beats, need=p.beats)

        wiring.connect(m, wiring.flipped(self.data), payload.w)
        wiring.connect(m, wiring.flipped(self.res_free), credit.free)
        wiring.connect(m, issue.res_beat, wiring.flipped(self.res_beat))
        m.d.comb += [payload.rd_addr.eq(issue.data_addr), issue.data.eq(payload.rd_data),
                     self.stall.eq(issue.stall)]

        # ---------------- slot words; after reset, cleared ----------------
        # A word read at the edge where it is written is replaced by the
        # forwarded one (below): no read-during-write logic.
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

        # ---------------- the decision pipeline: A, B, C ----------------
        desc_l = descriptor(p)
        state_l = slot_state(p)
        terms_l = data.StructLayout({
            "verdict": layouts.Verdict,
            "mode": Mode,
            "needs_result": unsigned(1),
            "result_beats": unsigned(beat_count_bits(p)),
            "result_n": decision.result_n.shape(),
            "completes": unsigned(1),
            "new_state": state_l,
            "first": unsigned(1),
            "round": decision.round.shape(),
            "beats": unsigned(beat_count_bits(p)),
        })
        compact = self._acc_ram == "compact"
        incoming = self.desc.payload
        take = Signal()
        decided = [
            ("verdict", decision.verdict),
            ("mode", decision.mode),
            ("needs_result", decision.needs_result),
            ("result_beats", Mux(decision.needs_result, decision.beats, 0)),
            ("result_n", decision.result_n),
            ("completes", decision.completes),
            ("new_state", decision.new_state),
            ("first", decision.first),
            ("round", decision.round),
            ("beats", decision.beats),
        ]
        terms = Signal(terms_l)         # the deciding message's terms
        decide = Signal()
        a_valid, b_valid = Signal(), Signal()
        a_desc, b_desc = (Signal(desc_l, name=f"{n}_desc") for n in "ab")
        m.d.comb += decision.desc.eq(b_desc)
        if compact:
            c_valid, c_desc = Signal(), Signal(desc_l, name="c_desc")
            c_free = ~c_valid | decide
            b_moves = b_valid & c_free
            b_free = ~b_valid | decide
            m.d.comb += self.desc.ready.eq(take)
            # Fewest cells: no stage A, and C is B: decided from the RAM's
            # read register, no forwarding; a message is not taken while one
            # of its slot is in B.
            same_b = b_valid & (b_desc.slot_abs == incoming.slot_abs)
            m.d.comb += take.eq(self.desc.valid & ~clearing & b_free & ~same_b)
            state_read = registered_read(m, state_mem, incoming.slot_abs, en=take,
                                         name="state_read")
            with m.If(take):
                m.d.sync += [b_valid.eq(1), b_desc.eq(incoming)]
            with m.Elif(b_moves):
                m.d.sync += b_valid.eq(0)
            m.d.comb += decision.state.eq(state_read)
            # C is B itself: decided from B's terms as they are computed.
            m.d.comb += [c_valid.eq(b_valid), c_desc.eq(b_desc)]
            m.d.comb += [getattr(terms, name).eq(value) for name, value in decided]
            head = c_desc
            head_valid = c_valid
            pipeline_busy = b_valid
        else:
            # C: two entries in arrival order (``rptr`` the older), pushed
            # by B and popped by the decision. B moves when C has an entry
            # free at the start of the cycle (``c_room``, a register), A
            # when B is empty or moves: every enable of A, B and C, and
            # ``desc.ready``, is a function of flip-flops; the decision
            # drives only C's pointers and valid bits (and what it acts on).
            e_valid = [Signal(name=f"c{k}_valid") for k in range(2)]
            e_acc = [Signal(name=f"c{k}_accept") for k in range(2)]
            e_desc = [Signal(desc_l, name=f"c{k}_desc") for k in range(2)]
            e_terms = [Signal(terms_l, name=f"c{k}_terms") for k in range(2)]
            rptr, wptr = Signal(name="c_rptr"), Signal(name="c_wptr")
            c_room = Signal(init=1)
            b_moves = b_valid & c_room
            a_moves = a_valid & (~b_valid | c_room)
            ready = Signal()
            m.d.comb += [ready.eq(~clearing & (~a_valid | ~b_valid | c_room)),
                         self.desc.ready.eq(ready),
                         take.eq(self.desc.valid & ready)]
            head_valid = Mux(rptr, e_valid[1], e_valid[0])
            head = Signal(desc_l, name="c_head_desc")
            m.d.comb += [head.eq(Mux(rptr, e_desc[1], e_desc[0])),
                         terms.eq(Mux(rptr, e_terms[1], e_terms[0]))]
            accept_b = decision.verdict == V.ACCEPT
            for k in range(2):
                push_k = b_moves & (wptr == k)
                with m.If(push_k):
                    m.d.sync += [e_valid[k].eq(1), e_acc[k].eq(accept_b),
                                 e_desc[k].eq(b_desc)]
                    m.d.sync += [getattr(e_terms[k], name).eq(value)
                                 for name, value in decided]
                with m.Elif(decide & (rptr == k)):
                    m.d.sync += e_valid[k].eq(0)
            with m.If(b_moves):
                m.d.sync += wptr.eq(~wptr)
            with m.If(decide):
                m.d.sync += rptr.eq(~rptr)
            pend_next = [Mux(b_moves & (wptr == k), 1, e_valid[k] & ~(decide & (rptr == k)))
                         for k in range(2)]
            m.d.sync += c_room.eq(~(pend_next[0] & pend_next[1]))

            # Slot words. A message taken while C's entries hold words not
            # yet written, or while B pushes one, tracks those entries
            # (``a_track``): until it moves into B no entry is overwritten
            # (A waits only while B waits, and B alone pushes), so the
            # youngest tracked ACCEPT of its slot (the last pushed first)
            # replaces the word it read. The entry B pushes as the message
            # moves into B is forwarded in B (``c_writes_b``, registered):
            # it keeps its word while B waits.
            a_track = [Signal(name=f"a_track{k}") for k in range(2)]
            state_read = registered_read(m, state_mem, incoming.slot_abs, en=take,
                                         name="state_read")
            with m.If(take):
                m.d.sync += [a_valid.eq(1), a_desc.eq(incoming)]
                m.d.sync += [a_track[k].eq(e_valid[k] | (b_moves & (wptr == k)))
                             for k in range(2)]
            with m.Elif(a_moves):
                m.d.sync += a_valid.eq(0)
            hit = [a_track[k] & e_acc[k] & (e_desc[k].slot_abs == a_desc.slot_abs)
                   for k in range(2)]
            last = ~wptr                    # the entry pushed last
            hit_last = Mux(last, hit[1], hit[0])
            hit_older = Mux(last, hit[0], hit[1])
            b_state = Signal(state_l)
            with m.If(a_moves):
                m.d.sync += [b_valid.eq(1), b_desc.eq(a_desc),
                             b_state.eq(Mux(hit_last,
                                            Mux(last, e_terms[1].new_state,
                                                e_terms[0].new_state),
                                            Mux(hit_older,
                                                Mux(last, e_terms[0].new_state,
                                                    e_terms[1].new_state),
                                                state_read)))]
            with m.Elif(b_moves):
                m.d.sync += b_valid.eq(0)
            # The word B pushes, kept while B waits, for the message behind it.
            c_last = Signal(state_l, name="c_last_state")
            with m.If(b_moves):
                m.d.sync += c_last.eq(decision.new_state)
            # (B moves or is empty: it next holds A's message, if any.)
            c_writes_b_next = b_valid & a_valid & accept_b & (b_desc.slot_abs == a_desc.slot_abs)
            forwarded = Signal(state_l)
            for v in range(2):
                c_writes_b = Signal(name=f"c_writes_b{v}", attrs=KEEP)
                with m.If(~b_valid | c_room):
                    m.d.sync += c_writes_b.eq(c_writes_b_next)
                m.d.comb += forwarded[v].eq(Mux(c_writes_b, c_last[v], b_state[v]))
            m.d.comb += decision.state.eq(forwarded)
            pipeline_busy = a_valid | b_valid | e_valid[0] | e_valid[1]

        # ---------------- the decision ----------------
        # The word written by this cycle's decision (an ACCEPT).
        writing = decide & (terms.verdict == V.ACCEPT)
        written_slot = head.slot_abs
        # Only registers decide: a combine needs a free queue entry, anything
        # else an empty queue.
        room = Mux(terms.mode == Mode.LANES, issue.has_room, issue.will_be_empty)
        m.d.comb += decide.eq(head_valid & room & (~terms.needs_result | credit.ok)
                              & self.res_desc.ready)

        # Address and data are the head's whether or not it is decided: the
        # decision drives the write enable alone.
        with m.If(~clearing):
            m.d.comb += [state_wr.addr.eq(written_slot), state_wr.data.eq(terms.new_state),
                         state_wr.en.eq(writing)]

        req = issue.push.payload
        m.d.comb += [
            issue.push.valid.eq(decide & (terms.mode != Mode.DISCARD)),
            req.rtx.eq(terms.mode == Mode.RETRANSMIT),
            req.slot.eq(head.slot_abs),
            req.ver.eq(head.meta.ver),
            req.first.eq(terms.first),
            req.result.eq(terms.needs_result),
            req.dtype.eq(terms.round.dtype),
            req.op.eq(terms.round.op),
            req.beats.eq(terms.beats),
            req.count.eq(terms.round.count),
            req.data_addr.eq(payload.head),
            req.data_beats.eq(Mux(terms.mode == Mode.LANES, head.beats, 0)),
        ]
        # result_beats is 0 for a message that causes no RESULT
        m.d.comb += [credit.take.eq(decide), credit.beats.eq(terms.result_beats)]
        # the head's payload is claimed by the decision, and freed with it
        # when not needed
        m.d.comb += [payload.claim.eq(head.beats), payload.take.eq(decide),
                     payload.drop.eq(terms.mode != Mode.LANES),
                     payload.release.eq(issue.released)]

        # Verdict and the RESULT descriptor.
        m.d.sync += [self.verdict.valid.eq(decide), self.verdict.payload.code.eq(terms.verdict),
                     self.verdict.payload.tag.eq(head.tag),
                     self.completed.eq(decide & (terms.verdict == V.ACCEPT) & terms.completes)]
        rd = self.res_desc.payload
        m.d.comb += [
            self.res_desc.valid.eq(decide & terms.needs_result),
            rd.meta.eq(head.meta),
            rd.meta.dtype.eq(terms.round.dtype),
            rd.meta.op.eq(terms.round.op),
            rd.meta.count.eq(terms.round.count),
            rd.meta.offset.eq(terms.round.offset),
            rd.tag.eq(head.tag),
            rd.multicast.eq(terms.verdict == V.ACCEPT),
            rd.workers.eq(head.workers),
            rd.n.eq(terms.result_n),
            rd.beats.eq(terms.result_beats),
        ]

        m.d.comb += self.busy.eq(issue.busy | ~payload.empty | clearing | pipeline_busy)
        return m
