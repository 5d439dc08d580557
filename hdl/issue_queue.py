"""The slot table's issue queue: decided messages, their beats issued to the
lane loop (:mod:`netagg.hdl.lane_loop`) one per cycle, with hazard checks
and the overtaking rules."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.lane import Lane
from netagg.hdl.lane_loop import LaneLoop, acc_addr_bits
from netagg.hdl.slot_layouts import beat_count_bits, data_addr_bits, issue_request, result_beat
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
        "acc_addr": unsigned(acc_addr_bits(params)),
        "data_addr": unsigned(data_addr_bits(data_beats)),
        "data_beats": unsigned(bbits),
        "done": unsigned(1),      # every beat issued; leaves the queue next cycle
        "blocked": unsigned(1),   # may not overtake the entry ahead of it
    })


class IssueQueue(CheckedComponent):
    """Two decided messages, their beats issued one per cycle to a
    :class:`~netagg.hdl.lane_loop.LaneLoop` (the accumulators' read-add-write
    loop through L lanes), which it holds.

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
    accumulator address was issued less than ``spacing`` (lane latency + 1)
    cycles ago (read-after-write hazard; the loop forwards results issued
    earlier) or a retransmission while the lanes hold combine beats (seen
    one cycle late). The younger one, always a combine, issues in a cycle
    the older one does not, unless it has a hazard or the older one has
    beats left and it was ``blocked`` when pushed: behind an entry of the
    same slot, behind a retransmission, or a RESULT behind a RESULT. So
    messages of one slot keep their order and RESULT beats never
    interleave. Loop: ``loop_latency`` = lane latency + 4 cycles from the
    issue to the write-back (:class:`~netagg.hdl.lane_loop.LaneLoop`).
    """

    @staticmethod
    def check(params: Params, *, data_beats: int, fp_stages=None, acc_ram: str = "memory") -> None:
        LaneLoop.check(params, fp_stages=fp_stages, acc_ram=acc_ram)

    def __init__(self, params: Params, *, data_beats: int, fp_stages=None,
                 acc_ram: str = "memory"):
        self._params = params
        self._data_beats = data_beats
        self._fp_stages = fp_stages
        self._acc_ram = acc_ram
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
        """Cycles from a beat's issue to its write-back."""
        return LaneLoop.latency_of(self._fp_stages, self._acc_ram)

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B = p.lanes, p.beats
        entry_l = _entry(p, self._data_beats)
        m.submodules.loop = loop = LaneLoop(p, fp_stages=self._fp_stages, acc_ram=self._acc_ram)
        m.d.comb += loop.data.eq(self.data)
        wiring.connect(m, loop.res_beat, wiring.flipped(self.res_beat))

        # ---------------- the queue: older, younger ----------------
        older = Signal(entry_l)
        younger = Signal(entry_l)
        queue = [older, younger]
        overtaken_beats = Signal.like(self.released)   # freed beats of entries that overtook

        unissued = [ent.valid & ~ent.done for ent in queue]
        # Read-after-write hazards of the entries, registered: computed in
        # the cycle before from the loop's stages and this cycle's issue,
        # for each address an entry can hold next (see below). What else
        # each entry needs to issue is registered with the entries (from
        # their next values), so the issue choice is two LUTs deep.
        hazard = [Signal(name="older_hazard"), Signal(name="younger_hazard")]
        waits = [Signal(name="older_waits"), Signal(name="younger_waits")]
        rtx_waits = Signal(name="older_rtx_waits")
        older_can = waits[0] & ~hazard[0]
        # A retransmission waits as the older entry with nothing issuing, so
        # the loop seen a cycle ago (registered) bounds the one now.
        older_rtx = rtx_waits & ~loop.lanes_busy
        younger_can = waits[1] & ~hazard[1]
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
        beat = loop.issue.payload
        m.d.comb += [
            loop.issue.valid.eq(issue_older | issue_younger),
            beat.rtx.eq(older_rtx),
            beat.addr.eq(issuing.acc_addr),
            beat.mask.eq(lane_mask),
            beat.last.eq(issuing.beat == issuing.last_beat),
            beat.first.eq(issuing.first),
            beat.result.eq(issuing.result),
            beat.bf16.eq(issuing.dtype == layouts.DType.BF16),
            beat.dtype.eq(issuing.dtype),
            beat.op.eq(issuing.op),
        ]
        m.d.sync += self.data_addr.eq(issuing.data_addr)

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

        # Next cycle's hazards. Each entry then holds one of five addresses:
        # an entry's as it is (not issued now) or one beat on (issued now),
        # or the request's. A candidate has a hazard next cycle if a combine
        # beat to it is in the loop's first spacing - 2 stages now (`loop.hazard`),
        # or issues now: never the issuing entry's own next address; the
        # other entry's or the request's address when equal to the issuing one.
        cands = [older.acc_addr, older.acc_addr + 1, younger.acc_addr, younger.acc_addr + 1,
                 requested.acc_addr]
        for k, c in enumerate(cands):
            m.d.comb += loop.hazard_addr[k].eq(c)
        combine_older = issue_older & ~older_rtx
        same = older.acc_addr == younger.acc_addr
        h_older = loop.hazard[0] | (issue_younger & same)
        h_older1 = loop.hazard[1]
        h_younger = loop.hazard[2] | (combine_older & same)
        h_younger1 = loop.hazard[3]
        h_req = (loop.hazard[4] | (combine_older & (older.acc_addr == requested.acc_addr))
                 | (issue_younger & (younger.acc_addr == requested.acc_addr)))
        h_adv = [Mux(issue_older, h_older1, h_older), Mux(issue_younger, h_younger1, h_younger)]
        nxt_q = [Signal(entry_l, name="older_new"), Signal(entry_l, name="younger_new")]
        nxt_h = [Signal(name="older_hazard_new"), Signal(name="younger_hazard_new")]
        with m.If(keep_older):
            m.d.comb += [nxt_h[0].eq(h_adv[0]), nxt_h[1].eq(Mux(keep_younger, h_adv[1], h_req)),
                         nxt_q[0].eq(advanced[0]),
                         nxt_q[1].eq(Mux(keep_younger, advanced[1], placed))]
        with m.Elif(keep_younger):
            m.d.comb += [nxt_h[0].eq(h_adv[1]), nxt_h[1].eq(h_req),
                         nxt_q[0].eq(advanced[1]), nxt_q[1].eq(placed)]
        with m.Else():
            m.d.comb += [nxt_h[0].eq(h_req), nxt_h[1].eq(0), nxt_q[0].eq(placed)]
        waiting = [e.valid & ~e.done for e in nxt_q]
        m.d.sync += [older.eq(nxt_q[0]), younger.eq(nxt_q[1]),
                     hazard[0].eq(nxt_h[0]), hazard[1].eq(nxt_h[1]),
                     waits[0].eq(waiting[0] & ~nxt_q[0].rtx),
                     waits[1].eq(waiting[1] & ~nxt_q[1].rtx & (~nxt_q[1].blocked | ~waiting[0])),
                     rtx_waits.eq(waiting[0] & nxt_q[0].rtx)]

        m.d.comb += self.busy.eq(older.valid | younger.valid | loop.busy)
        return m
