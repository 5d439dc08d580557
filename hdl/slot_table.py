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

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.credit import ResultCredit
from netagg.hdl.decision import Decision, desc_terms
from netagg.hdl.issue_queue import IssueQueue
from netagg.hdl.lane import Lane
from netagg.hdl.lane_loop import LaneLoop
from netagg.hdl.netlist import KEEP
from netagg.hdl.payload_buffer import PayloadBuffer
from netagg.hdl.ram import NO_RW_CHECK, WideRAM, registered_read
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
    block RAM (``amaranth.lib.memory.Memory``; with ``acc_ram="ecp5"``,
    ``DP16KD`` blocks for both, A's register of the slot word read the
    blocks' output register: :class:`~netagg.hdl.ram.WideRAM`). After
    reset the slot words are cleared (S cycles, ``ready`` low).

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
    one beat per cycle, from three cycles after the decision: a combine
    of n beats following one of its copy waits until ``spacing`` - n + 1
    cycles after that one's last beat (``spacing`` = lane latency + 1:
    read after write, the loop forwards the results of earlier beats;
    :class:`~netagg.hdl.issue_queue.IssueQueue`), and a younger one
    issues meanwhile if it is of another slot (and, for a RESULT, no
    older RESULT has beats left); messages of one slot keep their order.
    Cycles in which a combine waits and nothing issues pulse ``stall`` (one
    cycle late). Decisions: up to one per cycle (below), so messages of one beat
    or more can keep the lanes busy. Loop latency (issue to write-back): ``loop_latency`` =
    lane latency + 5 (+ 3 with ``acc_ram="compact"``, where the spacing is
    lane latency + 2). ``acc_ram``: the accumulator loop's build form
    (:class:`~netagg.hdl.lane_loop.LaneLoop`).

    The decision pipeline, in arrival order: P, the descriptor taken from
    ``desc`` (its slot word being read); A, the word read registered (the
    block RAM's output register); B1, the word registered again in the
    fabric (no RAM output meets the compares) and compared with the
    message; B2, the decision (:class:`Decision` with ``latency=1``: its
    stage register is B1's move into B2); C, two entries holding decided
    messages' terms (a FIFO). A message moves from B2 into C when C has an
    entry free at the start of the cycle (a register), from B1 into B2
    when B2 is empty or moves, from A into B1 when B1 is empty or moves
    and B1 holds no message of its slot (so two messages of one slot are
    decided at least two cycles apart; messages of other slots follow each
    other every cycle), from P into A when A is empty or moves;
    ``desc.ready`` is high while P is empty or moves (a function of
    flip-flops only). The oldest message in C is decided as soon as the
    issue queue has room (a combine: an entry free; anything else: the
    queue empty), the back-end has credit for its RESULT and ``res_desc``
    is ready: five cycles after it is taken at the earliest, one decision
    per cycle. At the decision the verdict is
    registered, the slot word is written (ACCEPT), the RESULT descriptor is
    offered and the message is pushed to the issue queue (a combine or a
    retransmission) or its payload released (anything else). A decision's
    outputs are final once computed in B2; only the decision waits. Slot
    words are forwarded, so that every message sees the word left by every
    earlier message of its slot, decided or not: every message that passed
    the validator carries the word after it (ACCEPT: the new word; any
    other verdict: the word it saw), and a message moving into B1 takes
    the word of the youngest such message of its slot ahead of it: B2's
    (sampled as it moves into B1), else C's entries' (those not yet
    written when it was taken, and any pushed since; P and A each keep the
    word of the youngest such entry seen, since C may decide one and take
    a younger message into its place while the message waits), else the
    word it read; the choice is registered as it moves, so B1 forwards
    through one multiplexer (C's entries hold the new word and the word
    seen apart, with the registered verdict, chosen as they are
    forwarded). A message
    dropped by the validator passes through the same stages (its slot word
    unused). With ``acc_ram="compact"`` (fewest
    cells, for slow clocks) there is one stage: B, decided from the slot
    RAM's read register through the combinational decision, one cycle
    after the message is taken at the earliest; a
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
        compact = self._acc_ram == "compact"
        m.submodules.decision = decision = Decision(p, latency=0 if compact else 1,
                                                    sources=1 if compact else 3)
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
        # ("ecp5", not compact: DP16KD blocks, B1's register of the word
        # read their output register)
        vendor = self._acc_ram == "ecp5" and not compact
        if vendor:
            m.submodules.state_mem = state_ram = WideRAM(slot_state(p).size, S, form="ecp5",
                                                         out_reg=True, out_en=True)
            state_wr = state_ram.write
        else:
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
            "result_n": decision.result_n.shape(),
            "completes": unsigned(1),
            "new_state": state_l,
            "first": unsigned(1),
            "round": decision.round.shape(),
            "beats": unsigned(beat_count_bits(p)),
        })
        incoming = self.desc.payload
        take = Signal()
        decided = [
            ("verdict", decision.verdict),
            ("mode", decision.mode),
            ("needs_result", decision.needs_result),
            ("result_n", decision.result_n),
            ("completes", decision.completes),
            # the word after the message (written only for ACCEPT, where it
            # is the new word)
            ("new_state", decision.new_state),
            ("first", decision.first),
            ("round", decision.round),
            ("beats", decision.beats),
        ]
        terms = Signal(terms_l)         # the deciding message's terms
        decide = Signal()
        a_valid, b_valid = Signal(name="a_valid"), Signal(name="b_valid")
        a_desc, b_desc = (Signal(desc_l, name=f"{n}_desc") for n in "ab")
        if compact:
            m.d.comb += decision.desc.eq(b_desc)
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
            # by B2 and popped by the decision. B2 moves when C has an entry
            # free at the start of the cycle (``c_room``, a register), B1
            # when B2 is empty or moves, A when B1 is empty or moves and B1
            # holds no message of its slot: every enable of A, B1, B2 and
            # C, and ``desc.ready``, is a function of flip-flops; the
            # decision drives only C's pointers and valid bits (and what it
            # acts on).
            e_valid = [Signal(name=f"c{k}_valid") for k in range(2)]
            e_live = [Signal(name=f"c{k}_live") for k in range(2)]
            e_desc = [Signal(desc_l, name=f"c{k}_desc") for k in range(2)]
            e_terms = [Signal(terms_l, name=f"c{k}_terms") for k in range(2)]
            # each entry's message: ACCEPT (its word after it is its new
            # word, else the one it saw: ``e_old``)
            e_acc = [Signal(name=f"c{k}_accept") for k in range(2)]
            e_old = [Signal(state_l, name=f"c{k}_old_state") for k in range(2)]
            rptr, wptr = Signal(name="c_rptr"), Signal(name="c_wptr")
            c_room = Signal(init=1)
            b1_valid, b1_desc = Signal(), Signal(desc_l, name="b1_desc")
            a_same_b1, a_same_b2 = Signal(name="a_same_b1"), Signal(name="a_same_b2")
            b_moves = b_valid & c_room                       # B2 into C
            b1_moves = b1_valid & (~b_valid | c_room)        # B1 into B2
            b1_free = ~b1_valid | ~b_valid | c_room
            a_moves = a_valid & b1_free & ~a_same_b1
            # P: the message taken, its slot word being read (the block's
            # read, then its output register as it moves into A); A moves
            # the word into a fabric register (``b1_ram``) as it moves into
            # B1, so that no RAM output meets the decision's compares.
            p_valid, p_desc = Signal(name="p_valid"), Signal(desc_l, name="p_desc")
            a_free = ~a_valid | (b1_free & ~a_same_b1)
            p_moves = p_valid & a_free
            ready = Signal()
            m.d.comb += [ready.eq(~clearing & (~p_valid | a_free)),
                         self.desc.ready.eq(ready),
                         take.eq(self.desc.valid & ready)]
            head_valid = Mux(rptr, e_valid[1], e_valid[0])
            head = Signal(desc_l, name="c_head_desc")
            m.d.comb += [head.eq(Mux(rptr, e_desc[1], e_desc[0])),
                         terms.eq(Mux(rptr, e_terms[1], e_terms[0]))]
            for k in range(2):
                push_k = b_moves & (wptr == k)
                with m.If(push_k):
                    m.d.sync += [e_valid[k].eq(1), e_live[k].eq(b_desc.verdict == V.ACCEPT),
                                 e_desc[k].eq(b_desc)]
                    # (the word after the message is chosen where it is
                    # forwarded, from the registered verdict: ``e_acc``)
                    m.d.sync += [getattr(e_terms[k], name).eq(value) for name, value in decided]
                    m.d.sync += [e_old[k].eq(decision.state_before),
                                 e_acc[k].eq(decision.accepted)]
                with m.Elif(decide & (rptr == k)):
                    m.d.sync += e_valid[k].eq(0)
            with m.If(b_moves):
                m.d.sync += wptr.eq(~wptr)
            with m.If(decide):
                m.d.sync += rptr.eq(~rptr)
            pend_next = [Mux(b_moves & (wptr == k), 1, e_valid[k] & ~(decide & (rptr == k)))
                         for k in range(2)]
            m.d.sync += c_room.eq(~(pend_next[0] & pend_next[1]))

            # B1 and B2: the decision's two stages (``Decision(latency=1)``:
            # B1 compares the slot word with the message, B2 decides).
            m.d.comb += [decision.desc.eq(b1_desc), decision.en.eq(b1_moves)]
            b1_pre = Signal(desc_terms(p), name="b1_desc_terms")
            m.d.comb += decision.pre.eq(b1_pre)
            with m.If(a_moves):
                m.d.sync += [b1_valid.eq(1), b1_desc.eq(a_desc)]
                m.d.sync += [getattr(b1_pre, k).eq(v)
                             for k, v in Decision.desc_terms_of(p, a_desc).items()]
            with m.Elif(b1_moves):
                m.d.sync += b1_valid.eq(0)
            with m.If(b1_moves):
                m.d.sync += [b_valid.eq(1), b_desc.eq(b1_desc)]
            with m.Elif(b_moves):
                m.d.sync += b_valid.eq(0)

            # Slot words. Every message that passed the validator ("live")
            # carries the word after it (``state_after``, its verdict's), so
            # a message needs only the word of the youngest live message of
            # its slot ahead of it. It waits in A while B1 holds one
            # (``a_same_b1``: one cycle between two decisions of a slot, the
            # word of the first being computed in B2) and, moving into B1,
            # takes the word of B2's message if it is of its slot
            # (``a_same_b2``: ``c_last``, sampled from B2 as a message moves
            # into B1 and as B2 moves, so it holds while B1 waits), else
            # the youngest of C's entries of its slot that it tracks, else
            # the word it read. It tracks (``a_track``) the entries not yet
            # written when it was taken and every entry pushed since: an
            # entry is overwritten while it waits in A only by a push at an
            # edge where B1's message of its slot moves on (younger than
            # every entry). B1 holds the RAM's word and C's registered apart,
            # the choice registered: B1's forwarding is one multiplexer.
            a_live = a_desc.verdict == V.ACCEPT
            b1_live = b1_desc.verdict == V.ACCEPT
            b2_live = b_desc.verdict == V.ACCEPT
            # P's message against A's, B1's and B2's (registers), as it
            # moves into A
            same_a = a_valid & a_live & (a_desc.slot_abs == p_desc.slot_abs)
            same_b1 = b1_valid & b1_live & (b1_desc.slot_abs == p_desc.slot_abs)
            same_b2 = b_valid & b2_live & (b_desc.slot_abs == p_desc.slot_abs)
            # Tracking starts as the word is read (the message taken into
            # P) and moves with the message into A.
            p_track = [Signal(name=f"p_track{k}") for k in range(2)]
            a_track = [Signal(name=f"a_track{k}") for k in range(2)]
            # p_hit_c[k], a_hit_c[k]: C's entry k is live and of P's, A's
            # slot, registered (compared as the message is taken, and as an
            # entry is pushed while it waits), so that no compare lies
            # before B1's choice.
            p_hit_c = [Signal(name=f"p_hit_c{k}") for k in range(2)]
            a_hit_c = [Signal(name=f"a_hit_c{k}") for k in range(2)]
            for k in range(2):
                pushed = b_moves & (wptr == k)
                pushed_hit = b2_live & (b_desc.slot_abs
                                        == Mux(take, incoming.slot_abs, p_desc.slot_abs))
                with m.If(pushed):
                    m.d.sync += p_hit_c[k].eq(pushed_hit)
                with m.Elif(take):
                    m.d.sync += p_hit_c[k].eq(e_live[k]
                                              & (e_desc[k].slot_abs == incoming.slot_abs))
                with m.If(pushed):
                    m.d.sync += a_hit_c[k].eq(b2_live & (b_desc.slot_abs == Mux(
                        p_moves, p_desc.slot_abs, a_desc.slot_abs)))
                with m.Elif(p_moves):
                    m.d.sync += a_hit_c[k].eq(p_hit_c[k])
            if not vendor:
                state_read = registered_read(m, state_mem, incoming.slot_abs, en=take,
                                             name="state_read")
            with m.If(take):
                m.d.sync += [p_valid.eq(1), p_desc.eq(incoming)]
                m.d.sync += [p_track[k].eq(e_valid[k] | (b_moves & (wptr == k)))
                             for k in range(2)]
            with m.Else():
                with m.If(p_moves):
                    m.d.sync += p_valid.eq(0)
                m.d.sync += [p_track[k].eq(p_track[k] | (b_moves & (wptr == k)))
                             for k in range(2)]
            with m.If(p_moves):
                m.d.sync += [a_valid.eq(1), a_desc.eq(p_desc)]
                m.d.sync += [a_track[k].eq(p_track[k] | (b_moves & (wptr == k)))
                             for k in range(2)]
                m.d.sync += [a_same_b1.eq(Mux(a_moves, same_a, ~b1_moves & same_b1)),
                             a_same_b2.eq(Mux(b1_moves, same_b1, ~b_moves & same_b2))]
            with m.Else():
                with m.If(a_moves):
                    m.d.sync += a_valid.eq(0)
                m.d.sync += [a_track[k].eq(a_track[k] | (b_moves & (wptr == k)))
                             for k in range(2)]
                m.d.sync += [a_same_b1.eq(~b1_moves & a_same_b1),
                             a_same_b2.eq(Mux(b1_moves, a_same_b1, ~b_moves & a_same_b2))]
            last = ~wptr                    # the entry pushed last
            after = [Mux(e_acc[k], e_terms[k].new_state, e_old[k]) for k in range(2)]

            def youngest_hit(track, hit_c):
                """Whether a tracked entry of the slot is in C, and the word of
                the youngest (the choice from registers)."""
                hit = [track[k] & hit_c[k] for k in range(2)]
                hit_last = Mux(last, hit[1], hit[0])
                return (hit[0] | hit[1],
                        Mux(hit_last, Mux(last, after[1], after[0]), Mux(last, after[0], after[1])))
            p_hit, p_hit_word = youngest_hit(p_track, p_hit_c)
            a_hit, a_hit_word = youngest_hit(a_track, a_hit_c)
            # Between the read and the move into B1 C may decide a tracked
            # entry and take a younger message into its place (three
            # messages ahead can pass into C while one waits in P and A):
            # each stage keeps the word of the youngest tracked entry of its
            # slot seen so far (``p_fwd``, ``a_fwd``; ``*_fwd_valid``),
            # taken from the registered hits in the cycle after they are
            # set, before the entry can be taken again.
            p_fwd = Signal(state_l, name="p_fwd")
            a_fwd = Signal(state_l, name="a_fwd")
            p_fwd_valid, a_fwd_valid = Signal(name="p_fwd_valid"), Signal(name="a_fwd_valid")
            with m.If(take):
                m.d.sync += p_fwd_valid.eq(0)
            with m.Elif(p_hit):
                m.d.sync += [p_fwd_valid.eq(1), p_fwd.eq(p_hit_word)]
            with m.If(p_moves):
                m.d.sync += [a_fwd_valid.eq(p_hit | p_fwd_valid),
                             a_fwd.eq(Mux(p_hit, p_hit_word, p_fwd))]
            with m.Elif(a_hit):
                m.d.sync += [a_fwd_valid.eq(1), a_fwd.eq(a_hit_word)]
            a_from_c = a_hit | a_fwd_valid
            # the word read: read as the message is taken into P, registered
            # as it moves into A (the block's output register) and again as
            # it moves into B1 (``b1_ram``)
            if vendor:
                m.d.comb += [state_ram.r_addr.eq(incoming.slot_abs), state_ram.r_en.eq(take),
                             state_ram.o_en.eq(p_moves)]
                a_ram = state_l(state_ram.r_data)
            else:
                a_ram = Signal(state_l, name="a_ram")
                with m.If(p_moves):
                    m.d.sync += a_ram.eq(state_read)
            b1_ram = Signal(state_l, name="b1_ram")
            with m.If(a_moves):
                m.d.sync += b1_ram.eq(a_ram)
            b1_fwd = Signal(state_l, name="b1_fwd")         # C's youngest of the slot
            with m.If(a_moves):
                m.d.sync += b1_fwd.eq(Mux(a_hit, a_hit_word, a_fwd))
            # B2's word after its message, held while B1 waits.
            c_last = Signal(state_l, name="c_last_state")
            with m.If(a_moves | b_moves):
                m.d.sync += c_last.eq(decision.state_after)
            # (the decision computes each copy's terms from all three words
            # and chooses after: ``take``, registers)
            m.d.comb += [decision.states[0].eq(c_last), decision.states[1].eq(b1_fwd),
                         decision.states[2].eq(b1_ram)]
            for v in range(2):
                from_b2 = Signal(name=f"b1_from_b2_{v}", attrs=KEEP)
                from_c = Signal(name=f"b1_from_c_{v}", attrs=KEEP)
                with m.If(a_moves):
                    m.d.sync += [from_b2.eq(a_same_b2), from_c.eq(a_from_c)]
                m.d.comb += decision.take[v].eq(Cat(from_b2, from_c))
            # the message's copy is the RAM's word's (registered with the takes)
            b1_last = Signal(2, name="b1_last")
            with m.If(a_moves):
                m.d.sync += b1_last.eq(Cat(*(
                    (a_desc.meta.ver == v) & ~a_same_b2 & ~a_from_c
                    for v in range(2))))
            m.d.comb += decision.last.eq(b1_last)
            pipeline_busy = p_valid | a_valid | b1_valid | b_valid | e_valid[0] | e_valid[1]

        # ---------------- the decision ----------------
        # The word written by the decision of an ACCEPT. Pipelined form:
        # written from the cycle the ACCEPT is at C's head, whether or not
        # it is decided then (the same word each cycle it waits): every
        # message that reads the word later is younger, and one that reads
        # it while the ACCEPT is in C forwards from C, so the write enable
        # comes from flip-flops, not from the decision's conditions.
        if compact:
            writing = decide & (terms.verdict == V.ACCEPT)
        else:
            writing = Mux(rptr, e_valid[1] & e_acc[1], e_valid[0] & e_acc[0])
        written_slot = head.slot_abs
        # Only registers decide: a combine needs a free queue entry, anything
        # else an empty queue.
        def may_decide(valid, t):
            room = Mux(t.mode == Mode.LANES, issue.has_room, issue.will_be_empty)
            return valid & room & (~t.needs_result | credit.ok) & self.res_desc.ready
        if compact:
            m.d.comb += decide.eq(may_decide(head_valid, terms))
        else:
            # each entry's "may be decided" from registers (a net of its
            # own, ``keep``), the older one's chosen last: ``rptr`` is one
            # LUT before ``decide``'s loads
            e_may = [Signal(name=f"c{k}_may_decide", attrs=KEEP) for k in range(2)]
            m.d.comb += [e_may[k].eq(may_decide(e_valid[k], e_terms[k])) for k in range(2)]
            m.d.comb += decide.eq(Mux(rptr, e_may[1], e_may[0]))

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
        ]
        # The RESULT's beats (0 for a message that causes no RESULT), formed
        # from C's registered terms (not on the path from B2 into C).
        result_beats = Mux(terms.needs_result, terms.beats, 0)
        m.d.comb += [credit.take.eq(decide), credit.beats.eq(result_beats)]
        # the head's payload is claimed by the decision (the buffer's head
        # moves past it); the buffer frees up to the issue queue's pointer:
        # its oldest entry's first beat, else the head, so a payload not
        # needed (a retransmission's once it leaves the queue) is freed as
        # the head passes it
        m.d.comb += [payload.claim.eq(head.beats), payload.take.eq(decide),
                     payload.free.eq(issue.data_free), issue.data_head.eq(payload.head)]

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
            rd.beats.eq(result_beats),
        ]

        m.d.comb += self.busy.eq(issue.busy | ~payload.empty | clearing | pipeline_busy)
        return m
