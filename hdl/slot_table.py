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


def _pick(values, sel):
    """``values[sel]`` as a tree of multiplexers on the bits of ``sel``
    (``len(values)`` a power of two)."""
    level = list(values)
    for bit in range(len(sel)):
        level = [Mux(sel[bit], level[k + 1], level[k]) for k in range(0, len(level), 2)]
    return level[0]


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
    up to six decided messages (:class:`~netagg.hdl.issue_pm.IssueQueuePM`,
    which starts a message at most every other cycle and issues its beats
    back to back, from five cycles after the decision; two with
    ``acc_ram="compact"``: :class:`~netagg.hdl.issue_queue.IssueQueue`,
    from three cycles after) are issued to the lanes, one beat per cycle: a combine
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

    The decision pipeline, in arrival order, one stage per cycle with no
    stage waiting (every enable of its wide registers a flip-flop): Q, two
    entries taking ``desc`` (``desc.ready``: an entry free, a flip-flop);
    P, the message taken, its slot word being read; A, the word read
    registered (the block RAM's output register); B1, the word forwarded
    and registered in the fabric (no RAM output meets the compares) and
    compared with the message; B2, the decision (:class:`Decision` with
    ``latency=1``: its stage register is B1's move into B2); C, two
    entries holding decided messages' terms, the older one deciding, and D,
    :attr:`D_ENTRIES` entries before them (a FIFO), for the messages out of
    B2 that find C's next entry taken (or D not empty). A message is taken
    from Q while fewer than :attr:`D_ENTRIES` + 2 messages are in P..D and
    C, and not in the cycle after the message before it if both passed the validator and
    are of one slot (two such messages are taken
    at least two cycles apart; messages of other slots, and messages the
    validator dropped, follow each other every cycle). The
    oldest message in C is decided as soon as the issue queue has room (a
    combine: an entry free; anything else: the queue empty), the back-end
    has credit for its RESULT and ``res_desc`` is ready: six cycles after
    ``desc`` hands it over at the earliest, one decision per cycle (at
    most :attr:`D_ENTRIES` + 2 in seven cycles). At the decision the verdict is
    registered, the RESULT descriptor is offered and the message is pushed
    to the issue queue (a combine or a retransmission) or its payload
    released (anything else). A decision's outputs are final once computed
    in B2; only the decision waits. Slot words: every message that passed
    the validator carries the word after it (ACCEPT: the new word; any
    other verdict: the word it saw) out of B2 into W1, W2 and W3 (one
    cycle each); W1 writes it (ACCEPT), whether or not the message is
    decided yet: every message that reads the word later is younger. A
    message's read misses the writes of the messages taken two to five
    cycles before it; it takes, in B1, the word of the youngest of them
    of its slot (compared in P and registered: in A, W1..W3's words or the
    word read are chosen into B1's register; the message two cycles ahead
    leaves its word in W1 as this one enters B1, chosen by the decision
    from a registered select), else the word read. A message dropped by
    the validator passes through the same stages (its slot word unused).
    With ``acc_ram="compact"`` (fewest
    cells, for slow clocks) there is one stage: B, decided from the slot
    RAM's read register through the combinational decision, one cycle
    after the message is taken at the earliest; a
    message is not taken while one of its slot is in B.
    """

    D_ENTRIES = 4
    """Entries of stage D (not compact): at most ``D_ENTRIES`` + 2 messages
    are in P..D and C at once."""

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
                                                    sources=1 if compact else 2)
        from netagg.hdl.issue_pm import IssueQueuePM
        m.submodules.issue = issue = (IssueQueue if self._acc_ram == "compact" else IssueQueuePM)(
            p, data_beats=self._data_beats,
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
            # (compact: the word written by the decision)
            **({"new_state": state_l} if compact else {}),
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
            *([("new_state", decision.new_state)] if compact else []),
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
            # Free-running stages (no stage waits): Q, the input buffer (two
            # entries: ``desc.ready`` and every enable of its entries are
            # flip-flops); P, the message taken, its slot word being read;
            # A, the word read registered (the block's output register); B1,
            # the word forwarded and registered in the fabric, compared with
            # the message; B2, the decision; then C and D (below), holding
            # decided messages' terms until their decision. Every
            # message moves P -> A -> B1 -> B2 one stage per cycle:
            # P, A, B1 and B2 load every cycle (no enables) and C's entry
            # enables are flip-flops. Admission: a message is taken while
            # fewer than ``D_ENTRIES`` + 2 messages are in P..D and C
            # (``c_room``, a flip-flop), so that D never overflows, and not in the cycle
            # after the message before it if both passed the validator and
            # are of one slot (``q*_same``, compared as the entry is
            # written): two such messages are taken at least two cycles
            # apart.
            q_desc = [Signal(desc_l, name=f"q{k}_desc") for k in range(2)]
            q_same = [Signal(name=f"q{k}_same") for k in range(2)]
            q_wr, q_rd = Signal(name="q_wr"), Signal(name="q_rd")
            q_some, q_full = Signal(name="q_some"), Signal(name="q_full")
            q_push = self.desc.valid & ~q_full & ~clearing
            m.d.comb += self.desc.ready.eq(~q_full & ~clearing)
            # the free entry follows the input; its flag compares it with
            # the entry written before it (the other one, whether or not
            # still held; a stale flag only costs a cycle): both passed the
            # validator, of one slot
            for k in range(2):
                with m.If(~q_full & (q_wr == k)):
                    m.d.sync += [q_desc[k].eq(incoming),
                                 q_same[k].eq((incoming.verdict == V.ACCEPT)
                                              & (q_desc[1 - k].verdict == V.ACCEPT)
                                              & (incoming.slot_abs == q_desc[1 - k].slot_abs))]
            q_head = Signal(desc_l, name="q_head_desc")
            q_head_same = Signal(name="q_head_same")
            m.d.comb += [q_head.eq(Mux(q_rd, q_desc[1], q_desc[0])),
                         q_head_same.eq(Mux(q_rd, q_same[1], q_same[0]))]
            c_room = Signal(name="c_room")
            p_valid, p_desc = Signal(name="p_valid"), Signal(desc_l, name="p_desc")
            b1_valid, b1_desc = Signal(name="b1_valid"), Signal(desc_l, name="b1_desc")
            m.d.comb += take.eq(q_some & c_room & ~(p_valid & q_head_same))
            grow, shrink = q_push & ~take, take & ~q_push
            m.d.sync += [q_some.eq(Mux(grow, 1, Mux(shrink, q_full, q_some))),
                         q_full.eq(Mux(grow, q_some, Mux(shrink, 0, q_full)))]
            with m.If(q_push):
                m.d.sync += q_wr.eq(~q_wr)
            with m.If(take):
                m.d.sync += q_rd.eq(~q_rd)

            # P, A, B1, B2: one stage per cycle
            m.d.sync += [p_valid.eq(take), p_desc.eq(q_head),
                         a_valid.eq(p_valid), a_desc.eq(p_desc),
                         b1_valid.eq(a_valid), b1_desc.eq(a_desc),
                         b_valid.eq(b1_valid), b_desc.eq(b1_desc)]
            m.d.comb += [decision.desc.eq(b1_desc), decision.en.eq(1)]
            b1_pre = Signal(desc_terms(p), name="b1_desc_terms")
            m.d.comb += decision.pre.eq(b1_pre)
            m.d.sync += [getattr(b1_pre, k).eq(v)
                         for k, v in Decision.desc_terms_of(p, a_desc).items()]

            # Slot words. Every message that passed the validator ("live")
            # carries the word after it (``state_after``) out of B2 into
            # W1, which writes it (ACCEPT) at the next edge, and on through
            # W2 and W3. A message's read (as it is taken) misses the
            # writes of the live messages taken up to five cycles before it
            # (distance d = 2..5; d = 1 is not of its slot): in B1 it takes
            # the word of the youngest of its slot among them, else the
            # word read. The compares are made in P (against B1, B2, W1,
            # W2: d = 2..5) and registered; in A the words of d = 3..5
            # (then in W1..W3) or the word read are chosen into B1's word
            # (``b1_word``); d = 2's is W1's while the message is in B1,
            # chosen by the decision (``take``, a register).
            def live(valid, d):
                return valid & (d.verdict == V.ACCEPT)
            w1_valid, w2_valid = Signal(name="w1_valid"), Signal(name="w2_valid")
            w1_acc = Signal(name="w1_accept")
            w1_slot = Signal(b_desc.slot_abs.shape(), name="w1_slot")
            w2_slot = Signal(b_desc.slot_abs.shape(), name="w2_slot")
            w_word = [Signal(state_l, name=f"w{k}_state") for k in (1, 2, 3)]
            m.d.sync += [w1_valid.eq(live(b_valid, b_desc)), w1_slot.eq(b_desc.slot_abs),
                         w1_acc.eq(decision.accepted), w_word[0].eq(decision.state_after),
                         w2_valid.eq(w1_valid), w2_slot.eq(w1_slot), w_word[1].eq(w_word[0]),
                         w_word[2].eq(w_word[1])]
            p_slot = p_desc.slot_abs
            hit = [Signal(name=f"a_hit{d}") for d in (2, 3, 4, 5)]
            m.d.sync += [
                hit[0].eq(live(b1_valid, b1_desc) & (b1_desc.slot_abs == p_slot)),
                hit[1].eq(live(b_valid, b_desc) & (b_desc.slot_abs == p_slot)),
                hit[2].eq(w1_valid & (w1_slot == p_slot)),
                hit[3].eq(w2_valid & (w2_slot == p_slot)),
            ]
            # the word read: read as the message is taken into P (the
            # block's read), registered as it moves into A (its output
            # register)
            if vendor:
                m.d.comb += [state_ram.r_addr.eq(q_head.slot_abs), state_ram.r_en.eq(1),
                             state_ram.o_en.eq(1)]
                a_ram = state_l(state_ram.r_data)
            else:
                state_read = registered_read(m, state_mem, q_head.slot_abs, name="state_read")
                a_ram = Signal(state_l, name="a_ram")
                m.d.sync += a_ram.eq(state_read)
            b1_word = Signal(state_l, name="b1_word")
            m.d.sync += b1_word.eq(Mux(hit[1], w_word[0],
                                       Mux(hit[2], w_word[1], Mux(hit[3], w_word[2], a_ram))))
            m.d.comb += [decision.states[0].eq(w_word[0]), decision.states[1].eq(b1_word)]
            for v in range(2):
                from_w1 = Signal(name=f"b1_from_w1_{v}", attrs=KEEP)
                m.d.sync += from_w1.eq(hit[0])
                m.d.comb += decision.take[v].eq(from_w1)
            # the message's copy is the word's of B1 (registered with the takes)
            b1_last = Signal(2, name="b1_last")
            m.d.sync += b1_last.eq(Cat(*((a_desc.meta.ver == v) & ~hit[0] for v in range(2))))
            m.d.comb += decision.last.eq(b1_last)

            # C: two entries in arrival order (``rptr`` the older), emptied
            # by the decision; D: ``D_ENTRIES`` entries before them (a FIFO)
            # for the messages out of B2 that find C's next entry taken (or
            # D not empty). Each C entry follows its input while free (its
            # enable: its valid bit's inverse), each D entry while it is
            # D's next and D is not full (its enable: from the write
            # pointer's decode and a flip-flop); C's input
            # is D's oldest entry if D holds one, else B2's message.
            M = self.D_ENTRIES
            e_valid = [Signal(name=f"c{k}_valid") for k in range(2)]
            e_desc = [Signal(desc_l, name=f"c{k}_desc") for k in range(2)]
            e_terms = [Signal(terms_l, name=f"c{k}_terms") for k in range(2)]
            rptr, wptr = Signal(name="c_rptr"), Signal(name="c_wptr")
            d_desc = [Signal(desc_l, name=f"d{k}_desc") for k in range(M)]
            d_terms = [Signal(terms_l, name=f"d{k}_terms") for k in range(M)]
            d_rd = Signal(range(M), name="d_rptr")
            d_wr = Signal(range(M), name="d_wptr")
            d_some = Signal(name="d_some")      # D holds a message
            d_full = Signal(name="d_full")      # D holds M messages
            d_n = Signal(range(M + 1), name="d_held")
            b2_terms = Signal(terms_l, name="b2_terms")
            m.d.comb += [getattr(b2_terms, name).eq(value) for name, value in decided]
            for k in range(M):
                with m.If(~d_full & (d_wr == k)):
                    m.d.sync += [d_desc[k].eq(b_desc), d_terms[k].eq(b2_terms)]
            c_in_desc = Mux(d_some, _pick(d_desc, d_rd), b_desc)
            c_in_terms = Mux(d_some, _pick(d_terms, d_rd), b2_terms)
            for k in range(2):
                with m.If(~e_valid[k]):
                    m.d.sync += [e_desc[k].eq(c_in_desc), e_terms[k].eq(c_in_terms)]
            next_free = ~Mux(wptr, e_valid[1], e_valid[0])
            fill = next_free & (d_some | b_valid)           # C's next entry filled
            d_pop = next_free & d_some
            d_push = b_valid & (d_some | ~next_free)
            for k in range(2):
                with m.If(fill & (wptr == k)):
                    m.d.sync += e_valid[k].eq(1)
                with m.Elif(decide & (rptr == k)):
                    m.d.sync += e_valid[k].eq(0)
            with m.If(fill):
                m.d.sync += wptr.eq(~wptr)
            with m.If(decide):
                m.d.sync += rptr.eq(~rptr)
            with m.If(d_push):
                m.d.sync += d_wr.eq((d_wr + 1)[:len(d_wr)] if M & (M - 1) == 0
                                    else Mux(d_wr == M - 1, 0, d_wr + 1))
            with m.If(d_pop):
                m.d.sync += d_rd.eq((d_rd + 1)[:len(d_rd)] if M & (M - 1) == 0
                                    else Mux(d_rd == M - 1, 0, d_rd + 1))
            d_n_next = Mux(d_push & ~d_pop, d_n + 1, Mux(d_pop & ~d_push, d_n - 1, d_n))
            m.d.sync += [d_n.eq(d_n_next), d_some.eq(d_n_next != 0), d_full.eq(d_n_next == M)]
            head = Signal(desc_l, name="c_head_desc")
            m.d.comb += [head.eq(Mux(rptr, e_desc[1], e_desc[0])),
                         terms.eq(Mux(rptr, e_terms[1], e_terms[0]))]
            head_valid = Mux(rptr, e_valid[1], e_valid[0])
            # messages in P..D (thermometer: ``held[i]``, more than i)
            N = 2 + M
            held = Signal(N, name="c_held")
            inc, dec = take & ~decide, decide & ~take
            m.d.sync += held.eq(Mux(inc, Cat(1, held[:-1]), Mux(dec, held[1:], held)))
            m.d.comb += c_room.eq(~held[N - 1])
            pipeline_busy = (q_some | p_valid | a_valid | b1_valid | b_valid | w1_valid
                             | e_valid[0] | e_valid[1] | d_some)

        # ---------------- the decision ----------------
        # The slot word: compact, written by the decision of an ACCEPT;
        # else from W1 (above), the cycle after the message leaves B2,
        # whether or not it is decided then: every message that reads the
        # word later is younger, and one that read it before forwards it.
        # Only registers decide: a combine needs a free queue entry, anything
        # else an empty queue.
        def may_decide(valid, t):
            room = Mux(t.mode == Mode.LANES, issue.has_room, issue.will_be_empty)
            return valid & room & (~t.needs_result | credit.ok) & self.res_desc.ready
        if compact:
            m.d.comb += decide.eq(may_decide(head_valid, terms))
            wr_addr, wr_data = head.slot_abs, terms.new_state
            wr_en = decide & (terms.verdict == V.ACCEPT)
        else:
            # each entry's "may be decided" from registers (a net of its
            # own, ``keep``), the oldest one's chosen last: ``rptr`` is one
            # multiplexer before ``decide``'s loads
            e_may = [Signal(name=f"c{k}_may_decide", attrs=KEEP) for k in range(2)]
            m.d.comb += [e_may[k].eq(may_decide(e_valid[k], e_terms[k])) for k in range(2)]
            m.d.comb += decide.eq(Mux(rptr, e_may[1], e_may[0]))
            wr_addr, wr_data, wr_en = w1_slot, w_word[0], w1_valid & w1_acc
        with m.If(~clearing):
            m.d.comb += [state_wr.addr.eq(wr_addr), state_wr.data.eq(wr_data),
                         state_wr.en.eq(wr_en)]

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
