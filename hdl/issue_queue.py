"""The slot table's issue queue: decided messages, their beats issued to the
lane loop (:mod:`netagg.hdl.lane_loop`) one per cycle, with the
read-after-write holds and the overtaking rules."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.lane import Lane
from netagg.hdl.lane_loop import LaneLoop, acc_addr_bits
from netagg.hdl.netlist import KEEP
from netagg.hdl.slot_layouts import beat_count_bits, data_addr_bits, issue_request, result_beat
from netagg.hdl.validator import payload_beat
from netagg.params import Params

__all__ = ["ISSUE_DEPTH", "IssueQueue"]


ISSUE_DEPTH = {"memory": 6, "ecp5": 6, "compact": 2}
"""Default entries of the issue queue for each build form of the loop
(``acc_ram``): six in the per-message queue
(:class:`~netagg.hdl.issue_pm.IssueQueuePM`, the default forms), where short
messages must overtake each other; two in the compact form (fewest cells)."""


def _pow2_beats(params: Params) -> bool:
    """K/L is a power of two: an accumulator address is the copy's index
    with the beat index below it (no ``acc_addr`` fields in the entries)."""
    return params.beats & (params.beats - 1) == 0


def _entry(params: Params, data_beats: int, gap_bits: int) -> data.StructLayout:
    """A queued message: its request, and how far its beats have been issued."""
    bbits = beat_count_bits(params)
    acc = {} if _pow2_beats(params) else {
        "acc_addr": unsigned(acc_addr_bits(params)),
        "acc_next": unsigned(acc_addr_bits(params)),   # acc_addr + 1
    }
    return data.StructLayout({
        "valid": unsigned(1),
        "rtx": unsigned(1),
        "slot": unsigned(layouts.bits_for(params.slots)),
        "copy": unsigned(layouts.bits_for(params.slots) + 1),   # Cat(ver, slot)
        "first": unsigned(1),
        "result": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "beat": unsigned(bbits),            # next beat to issue
        "beat_nx": unsigned(bbits + 1),     # beat + 1 (registered: no adder before a compare)
        "last_beat": unsigned(bbits),       # beats - 1
        "left": unsigned(layouts.bits_for(params.elements + 1)),  # elements from `beat` on
        "mask": unsigned(params.lanes),     # lanes of `beat` (lane i: left > i)
        "on_last": unsigned(1),             # beat == last_beat
        "penult": unsigned(1),              # beat + 1 == last_beat
        "last_m2": unsigned(bbits + 1),     # beats - 2 (all ones for one beat)
        **acc,
        "data_addr": unsigned(data_addr_bits(data_beats)),
        "data_prev": unsigned(data_addr_bits(data_beats)),   # of the beat issued last
        # its first payload beat (mod 2 x data_beats): the buffer frees up
        # to the oldest held entry's
        "data_start": unsigned(data_addr_bits(data_beats) + 1),
        "done": unsigned(1),      # every beat issued; leaves the queue next cycle
        # a combine's hold on the next message of its copy, from its last
        # beat on: bit i set if that message may not issue i + 1 cycles
        # after it (a thermometer of spacing - beats; 0 for a
        # retransmission)
        "gap": unsigned(gap_bits),
    })


def _one_hot_mux(sel, values, shape):
    """The value whose ``sel`` bit is high (at most one is): an AND-OR."""
    width = Shape.cast(shape).width
    acc = Const(0, width)
    for bit, value in zip(sel, values, strict=True):
        acc = acc | (Value.cast(value) & bit.replicate(width))
    return acc


def _issue_beat(issue, valid, rtx, addr, issuing):
    """The lane loop's issue stream driven from the entry issuing (both
    queues): ``valid``, the retransmission flag ``rtx`` and the
    accumulator address ``addr``, the rest from the entry's fields."""
    beat = issue.payload
    return [issue.valid.eq(valid),
            beat.rtx.eq(rtx),
            beat.addr.eq(addr),
            beat.mask.eq(issuing.mask),
            beat.last.eq(issuing.on_last),
            beat.first.eq(issuing.first),
            beat.result.eq(issuing.result),
            beat.bf16.eq(issuing.dtype == layouts.DType.BF16),
            beat.dtype.eq(issuing.dtype),
            beat.op.eq(issuing.op)]


def _request_head(requested, req, valid):
    """A pushed request's first fields as an entry (both queues): its
    message, at beat 0."""
    return [requested.valid.eq(valid),
            requested.rtx.eq(req.rtx),
            requested.slot.eq(req.slot),
            requested.copy.eq(Cat(req.ver, req.slot)),
            requested.first.eq(req.first),
            requested.result.eq(req.result),
            requested.dtype.eq(req.dtype),
            requested.op.eq(req.op),
            requested.beat.eq(0),
            requested.beat_nx.eq(1)]


def _entries_next(m, q, incoming, placed, advances, bumped, layout):
    """Each entry's next value (both queues): the request placed there,
    else advanced by a beat where it issues (``advances``), else as it is;
    its place empties as it leaves. Returns the next entries, their valid
    bits and the lowest place empty next (one-hot)."""
    N = len(q)
    nxt_q = [Signal(layout, name=f"entry{x}_new") for x in range(N)]
    nxt_valid = [Signal(name=f"entry{x}_valid_new") for x in range(N)]
    for x in range(N):
        m.d.comb += [
            nxt_q[x].eq(Mux(placed[x], incoming, Mux(advances[x], bumped[x], q[x]))),
            nxt_q[x].valid.eq(nxt_valid[x]),
            nxt_valid[x].eq(placed[x] | (q[x].valid & ~q[x].done)),
        ]
    place_next = [Signal(name=f"entry{x}_place_new") for x in range(N)]
    for x in range(N):
        m.d.comb += place_next[x].eq(~nxt_valid[x] & Cat(*nxt_valid[:x]).all())
    return nxt_q, nxt_valid, place_next


def _loop_terms(m, x, stay, held, follows):
    """The terms of entry ``x``'s next "may issue" where it does not issue,
    as nets of at most four inputs each (``keep``), so that the mapping
    neither chains them nor shares them with other cones: the next "may
    issue" is their AND. ``stay``: a register; ``held``: two-input terms
    of registers (``can_last & held``), each holding the entry;
    ``follows``: (register, choice term) pairs, each holding it when the
    register is high and the choice term (one LUT from registers) low.
    Two LUT levels from the registers, the choice terms' nets included."""
    def net(name, value):
        sig = Signal(name=f"entry{x}_{name}", attrs=KEEP)
        m.d.comb += sig.eq(value)
        return sig
    level1 = stay if len(held) % 2 == 0 else net("stay1", stay & ~held[-1])
    pairs = [net(f"held_pair{k}", held[2 * k] | held[2 * k + 1]) for k in range(len(held) // 2)]
    ok = []
    for k in range(len(follows) // 2):
        (p0, g0), (p1, g1) = follows[2 * k], follows[2 * k + 1]
        ok.append(net(f"free{k}", ~(p0 & ~g0) & ~(p1 & ~g1)))
    if len(follows) % 2:
        p, g = follows[-1]
        extra = pairs[:1]
        pairs = pairs[1:]
        ok.append(net("free_last", level1 & ~(p & ~g) & ~Cat(*extra).any()))
    else:
        ok.append(level1)
    return ok + [~pair for pair in pairs]


class IssueQueue(CheckedComponent):
    """Up to ``depth`` decided messages, their beats issued one per cycle to
    a :class:`~netagg.hdl.lane_loop.LaneLoop` (the accumulators'
    read-add-write loop through L lanes), which it holds.

    Parameters
    ----------
    depth : int
        Entries (messages held at once; default :data:`ISSUE_DEPTH` of the
        build form). More entries let more short messages overtake one that
        waits on a hold.

    Ports
    -----
    push : In(stream of issue_request, always_ready)
        A decided message (a combine or a retransmission). Pushed only when
        ``has_room`` (a combine) or ``will_be_empty`` (a retransmission);
        registered, it takes its place in the next cycle and can issue its
        first beat in the cycle after (three cycles after the push;
        :class:`~netagg.hdl.issue_pm.IssueQueuePM`: five).
    has_room : Out(1)
        Registered: fewer than ``depth`` entries are held after this cycle,
        the request pushed in the previous cycle counted.
    will_be_empty : Out(1)
        Registered: no entry is held after this cycle and none was pushed
        in the previous one.
    data_addr : Out(address)
        The payload buffer beat to read: that of the beat issued two cycles
        before, registered (from the registered "it issued" and the
        entries); ``"compact"``: of the beat issued in the previous cycle,
        a one-hot multiplexer after those registers. ``data`` must hold it
        ``PayloadBuffer.read_latency`` cycles later (``rd_data``): the next
        cycle (``"compact"``), else two cycles later (the buffer registers
        the address again, one copy per lane's RAM, loaded from this one
        flip-flop).
    data : In(payload_beat)
    data_head : In(address + 1)
        The payload buffer's ``head`` (the first beat of the oldest message
        not yet pushed, mod 2 x ``data_beats``).
    data_free : Out(address + 1)
        Registered: the first payload beat still needed (mod 2 x
        ``data_beats``), as of the previous cycle: the ``data_start`` of the
        oldest entry held and not done, else of the request pushed before
        it (``incoming``), else ``data_head``. The buffer frees every beat
        before it: payload space comes back in arrival order, as the oldest
        entry leaves (an entry that leaves before an older one frees nothing
        until that one does). A pointer, not a count: no adder lies in an
        entry's next value.
    res_beat : Out(stream of result_beat, always_ready)
        Registered RESULT beats: a completing combine's beats as they leave
        the lanes (new accumulators and sticky flags), a retransmission's as
        read from the accumulators. A RESULT's beats are consecutive in
        issue order and never interleave with another RESULT's.
    stall : Out(1)
        Registered, a cycle late: a combine waited (a hold, or its first cycle) and none issued.
    busy : Out(1)
        An entry is held, or a beat is in the loop or on ``res_beat``.

    Issue rules, in each cycle: the oldest entry that may issue issues one
    beat. An entry may issue unless it is a combine held by an older
    combine of its accumulator copy (below), it is a retransmission while
    the lanes hold combine beats (seen one cycle late; a retransmission is
    only pushed to an empty queue), or an older entry it must follow has
    beats left: one of the same slot, a retransmission, or (for a RESULT)
    another RESULT. So messages of one slot keep their order and RESULT
    beats never interleave.

    Read-after-write: two combine beats to one accumulator address issue
    at least ``spacing`` = D (lane latency + 1; the loop forwards the
    results of earlier ones) cycles apart. The queue keeps this per
    message, not per beat: a combine whose predecessor of its copy (a
    message of its slot, which it follows) had n beats may issue its
    first beat from D - n + 1 cycles after that one's last beat (at once
    when n >= D), and then never waits on an address: its beat b issues
    at least D cycles after the predecessor's beat b, however that one's
    beats were spaced (its last beat bounds them all): the earliest start
    from which its beats issue back to back (a per-beat check may start it
    earlier, to wait within it). Loop: ``loop_latency`` = lane latency + 5 cycles from the
    issue to the write-back (:class:`~netagg.hdl.lane_loop.LaneLoop`).

    Timing: entries stay in fixed places from arrival to departure (the
    request takes the lowest empty place), their arrival order a registered
    matrix, so that no entry field passes a shifting multiplexer. The
    choice is one LUT4 per entry (four entries) over registered bits ("may
    issue", and per pair "may issue and arrived before"), computed a cycle
    ahead from the entries' next values, as are the order constraints
    between entries and the room; the entry registers take the issuing
    entry's advanced copy through one multiplexer after the choice and one
    after the placement. The next "may issue" is formed for the two cases
    of each entry (it issues now, or not; an entry placed now may not
    issue next cycle), each from registers (``stay``: held, a combine, not
    done, not held next cycle; ``pend``: an entry it follows has beats
    left) but for the choice terms ("an entry it follows issues its last
    beat now", one LUT from a registered "may issue its last beat"), as
    nets of at most four inputs (``keep``): three LUT levels from the
    registers to the next "may issue". The holds are
    thermometer codes (``blocked``: bit i, the entry may not issue i
    cycles from now), shifted each cycle and ORed with the hold of an
    entry of the copy that may issue its last beat (a register; if it
    does not, the entry still follows it, and the hold it sets later ends
    later): no beat index or address is compared. Which entries are of
    one copy is registered per place, and a request's copy is compared
    with the entries' and with the record of the last beats issued (the
    holds of the combines that left) as it is pushed. Payload space is
    returned as a pointer (``data_free``), formed beside the entries from
    their registered order: no count is added in an entry's next value.
    """

    @staticmethod
    def check(params: Params, *, data_beats: int, fp_stages=None, acc_ram: str = "memory",
              depth: int | None = None) -> None:
        LaneLoop.check(params, fp_stages=fp_stages, acc_ram=acc_ram)
        if depth is not None and (not isinstance(depth, int) or not 1 <= depth <= 8):
            raise ValueError(f"depth must be an int in 1..8, not {depth!r}")

    def __init__(self, params: Params, *, data_beats: int, fp_stages=None,
                 acc_ram: str = "memory", depth: int | None = None):
        self._params = params
        self._data_beats = data_beats
        self._fp_stages = fp_stages
        self._acc_ram = acc_ram
        self._depth = ISSUE_DEPTH[acc_ram] if depth is None else depth
        self._lane_latency = Lane.latency_of(fp_stages)
        super().__init__({
            "push": In(stream.Signature(issue_request(params, data_beats), always_ready=True)),
            "has_room": Out(1),
            "will_be_empty": Out(1),
            "data_addr": Out(data_addr_bits(data_beats)),
            "data": In(payload_beat(params)),
            "data_head": In(data_addr_bits(data_beats) + 1),
            "data_free": Out(data_addr_bits(data_beats) + 1),
            "res_beat": Out(stream.Signature(result_beat(params), always_ready=True)),
            "stall": Out(1),
            "busy": Out(1),
        })

    @property
    def depth(self) -> int:
        return self._depth

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
        L, B, N = p.lanes, p.beats, self._depth
        # Read-after-write: two combine beats to one accumulator address
        # must issue at least D = spacing cycles apart (the loop forwards
        # the results of earlier ones). Messages of one copy are of one
        # slot, so the younger issues no beat before the older's last: if
        # it issues its first beat at least D - n + 1 cycles after the
        # older's last (n: the older's beats), every beat b of it is at
        # least D cycles after the older's beat b, however the older's
        # beats were spaced, and it needs no check after its first beat.
        # A message's hold is a thermometer of D - n cycles (``gap``).
        D = LaneLoop.spacing_of(self._fp_stages, self._acc_ram)
        T = D - 1
        entry_l = _entry(p, self._data_beats, T)
        pow2 = _pow2_beats(p)

        def acc_addr(e):
            """The accumulator address of entry ``e``'s beat: (copy) x K/L + beat."""
            if pow2:
                return Cat(e.beat[:(B - 1).bit_length()], e.copy)
            return e.acc_addr
        # (the holds above replace address compares; not compact: the
        # address registered here and again in the payload buffer, so the
        # payload beat reaches the loop four cycles after its issue)
        compact = self._acc_ram == "compact"
        m.submodules.loop = loop = LaneLoop(
            p, fp_stages=self._fp_stages, acc_ram=self._acc_ram,
            data_latency=2 if compact else 4)
        m.d.comb += loop.data.eq(self.data)
        wiring.connect(m, loop.res_beat, wiring.flipped(self.res_beat))

        # ---------------- the queue: entries in fixed places ----------------
        # An entry stays in its place from its arrival to the cycle after its
        # last beat, when it leaves; a request takes the lowest empty place.
        # Arrival order is a registered matrix (``older``), so no field of
        # an entry passes a shifting multiplexer.
        q = [Signal(entry_l, name=f"entry{i}") for i in range(N)]
        # Registered per entry, computed in the cycle before (see below):
        # (place 0) "a retransmission waits", "it issued" (``issued_last``);
        # pend[k, j]: entry k must follow the older entry j, and j has beats
        # left (held, not done);
        # older[j, k] (j < k): entry j arrived before entry k.
        issued_last = [Signal(name=f"entry{i}_issued") for i in range(N)]
        rtx_waits = Signal(name="entry0_rtx_waits")
        pend = {(k, j): Signal(name=f"entry{k}_pend{j}")
                 for k in range(N) for j in range(N) if j != k}
        older_lo = {(j, k): Signal(name=f"entry{j}_older{k}") for k in range(N) for j in range(k)}

        def older(j, k):
            """Entry j arrived before entry k (both held)."""
            return older_lo[j, k] if j < k else ~older_lo[k, j]

        unissued = [e.valid & ~e.done for e in q]
        # "May issue": an entry waiting, not done, not held and not
        # following an older one with beats left (an entry that must follow
        # an older one issues from the cycle after that one's last beat:
        # done, it leaves then). Registered: computed in the cycle before
        # from the entries' next values (below), so the choice is a
        # priority LUT from flip-flops, and the loop from one choice to the
        # next crosses this register.
        #
        # "May issue" is kept in three copies of one value (``keep``: not
        # merged), each with its own choice: ``can`` for the queue's control
        # (the next "may issue", the holds, "it issued"), ``can_d`` for
        # the entries' fields (the multiplexer of the issuing entry's
        # advanced copy), ``can_i`` for the beat issued to the loop, so
        # that no choice fans out to all three.
        can = [Signal(name=f"entry{i}_can", attrs=KEEP) for i in range(N)]
        can_d = [Signal(name=f"entry{i}_can_d", attrs=KEEP) for i in range(N)]
        can_i = [Signal(name=f"entry{i}_can_i", attrs=KEEP) for i in range(N)]
        # ... and, for each copy, "may issue and is older than entry i"
        # (``ahead[c][j, i]``), registered beside it, so that each choice
        # is one LUT from flip-flops.
        ahead = [{(j, i): Signal(name=f"entry{j}_ahead{i}_{c}", attrs=KEEP)
                  for i in range(N) for j in range(N) if j != i}
                 for c in ("c", "d", "i")]

        # A retransmission waits alone in place 0 (it is pushed to an empty
        # queue; entries pushed after it follow it), with nothing issuing,
        # so the loop seen a cycle ago (registered) bounds the one now.
        rtx_go = Signal()
        m.d.comb += rtx_go.eq(rtx_waits & ~q[0].done & ~loop.lanes_busy)

        def choice(may, ahead_, name):
            """The combine entry that issues: the oldest that may."""
            sel_ = [Signal(name=f"{name}{i}", attrs=KEEP) for i in range(N)]
            for i in range(N):
                m.d.comb += sel_[i].eq(may[i] & ~Cat(*(ahead_[j, i]
                                                        for j in range(N) if j != i)).any())
            return sel_
        sel = choice(can, ahead[0], "issue")
        sel_d = choice(can_d, ahead[1], "issue_d")
        sel_i = choice(can_i, ahead[2], "issue_i")
        # the entry that issues, a retransmission's beat included
        go = [sel[0] | rtx_go] + sel[1:]
        go_d = [sel_d[0] | rtx_go] + sel_d[1:]
        go_i = [sel_i[0] | rtx_go] + sel_i[1:]
        any_issue = Cat(*can_i, rtx_go).any()
        m.d.sync += self.stall.eq(~any_issue & Cat(*(u & ~e.rtx for u, e in zip(unissued, q,
                                                                                 strict=True))).any())

        issuing = Signal(entry_l)
        m.d.comb += issuing.eq(_one_hot_mux(go_i, q, entry_l))
        m.d.comb += _issue_beat(loop.issue, any_issue, rtx_go, acc_addr(issuing), issuing)

        # Each entry one beat on (used where it issues: the choice is the
        # last multiplexer before the entry registers but the placement,
        # below).
        bumped = [Signal(entry_l, name=f"entry{i}_bumped") for i in range(N)]
        for i in range(N):
            cur, nxt = q[i], bumped[i]
            m.d.comb += [nxt.eq(cur),
                         nxt.beat.eq(cur.beat_nx), nxt.beat_nx.eq(cur.beat_nx + 1),
                         nxt.data_addr.eq(cur.data_addr + 1),
                         nxt.data_prev.eq(cur.data_addr),
                         # (below L only after the last beat, never read then)
                         nxt.left.eq(cur.left - L),
                         nxt.mask.eq(Cat(*(cur.left > L + k for k in range(L)))),
                         nxt.on_last.eq(cur.penult),
                         nxt.penult.eq(cur.beat_nx == cur.last_m2),
                         nxt.done.eq(cur.on_last)]
            if not pow2:
                m.d.comb += [nxt.acc_addr.eq(cur.acc_next), nxt.acc_next.eq(cur.acc_next + 1)]
        # (Entries leave the cycle after their last beat, ``done``: at most
        # one a cycle, as one beat issues a cycle.)
        # A request pushed in the previous cycle (``incoming``) counts as held.
        incoming = Signal(entry_l, name="incoming")
        # The entries held after this cycle (valid, not done), counted in
        # the cycle before (registered, from the next values, below): fewer
        # than N - 1, fewer than N, none; with ``incoming`` one LUT each.
        # (registered with the request pushed in the cycle before counted:
        # ``has_room`` and ``will_be_empty`` are flip-flops)
        has_room = Signal(name="has_room", init=1)
        will_be_empty = Signal(name="will_be_empty", init=1)
        m.d.comb += [self.has_room.eq(has_room), self.will_be_empty.eq(will_be_empty)]

        # Payload buffer space comes back in arrival order: the buffer frees
        # up to the first beat of the oldest entry held and not done (else
        # of the request pushed in the previous cycle, else the buffer's
        # head), registered; its own logic, beside no entry's next value.
        kept_now = [e.valid & ~e.done for e in q]
        oldest_kept = [kept_now[i] & ~Cat(*(kept_now[j] & older(j, i)
                                            for j in range(N) if j != i)).any()
                       for i in range(N)]
        m.d.sync += self.data_free.eq(Mux(
            Cat(*kept_now).any(),
            _one_hot_mux(oldest_kept, [e.data_start for e in q], len(self.data_free)),
            Mux(incoming.valid, incoming.data_start, self.data_head)))

        # A pushed request is registered (``incoming``, no enable: the push
        # drives one flip-flop), and takes the lowest empty place in the next
        # cycle.
        req = self.push.payload
        requested = Signal(entry_l)
        m.d.comb += _request_head(requested, req, self.push.valid)
        m.d.comb += [
            requested.last_beat.eq(req.beats - 1),
            requested.left.eq(req.count),
            requested.mask.eq(Cat(*(req.count > k for k in range(L)))),
            requested.on_last.eq(req.beats == 1),
            requested.penult.eq(req.beats == 2),
            requested.last_m2.eq(req.beats - 2),
            requested.data_addr.eq(req.data_addr[:len(requested.data_addr)]),
            requested.data_start.eq(req.data_addr),
            # bit i: i + 1 < D - beats + 1, i.e. beats < D - i (a combine)
            requested.gap.eq(Cat(*(~req.rtx & (req.beats < D - i) for i in range(T)))),
        ]
        if not pow2:
            m.d.comb += [requested.acc_addr.eq(Cat(req.ver, req.slot) * B),
                         requested.acc_next.eq(Cat(req.ver, req.slot) * B + 1)]
        m.d.sync += incoming.eq(requested)
        # The request's copy and slot against the entries', compared as it
        # is pushed and registered (``inc_copy[x]``, ``inc_slot[x]``: the
        # entry at x next cycle is of the incoming request's copy, slot), so
        # that no compare lies on the paths into ``can``.
        inc_copy = [Signal(name=f"incoming_copy{x}") for x in range(N)]
        inc_slot = [Signal(name=f"incoming_slot{x}") for x in range(N)]
        # Must the incoming request follow entry j? (same slot, a
        # retransmission, or a RESULT behind a RESULT)
        req_after = [inc_slot[j] | e.rtx | (e.result & incoming.result)
                     for j, e in enumerate(q)]

        # Which entries are of one copy (``same``, registered per place).
        same = {}
        for k in range(N):
            for j in range(k):
                same[k, j] = same[j, k] = Signal(name=f"entry{k}_same{j}")
            same[k, k] = Const(1)
        # Each entry's hold (``blocked``, registered): bit i set if it may
        # not issue i cycles from now (a thermometer: a prefix of ones),
        # set as an entry of its copy that it follows issues its last beat
        # (that one's ``gap``), shifted each cycle.
        blocked = [Signal(T, name=f"entry{x}_blocked") for x in range(N)]
        # The holds of the last combines that left: the record of the last
        # beats issued (age a + 1: the copy, and the hold as of now), so
        # that a request of the copy takes it as it joins. The request's
        # copy is compared with the record as it is pushed (``inc_hit``,
        # registered, against the record as it is next cycle); the last
        # beat issued in the cycle it is pushed is that of an entry still
        # held when it joins (``inc_copy``).
        r_copy = [Signal(len(q[0].copy), name=f"rec{a}_copy") for a in range(T)]
        r_gap = [Signal(T, name=f"rec{a}_gap") for a in range(T)]
        inc_hit = {a: Signal(name=f"incoming_hit{a}") for a in range(1, T)}
        m.d.sync += [r_copy[0].eq(issuing.copy),
                     r_gap[0].eq(Mux(any_issue & ~rtx_go & issuing.on_last, issuing.gap, 0))]
        for a in range(1, T):
            m.d.sync += [r_copy[a].eq(r_copy[a - 1]), r_gap[a].eq(r_gap[a - 1] >> 1)]
        for a in range(1, T):
            m.d.sync += inc_hit[a].eq(r_copy[a - 1] == requested.copy)

        # The queue after this cycle: a leaving entry's place freed, the
        # request placed in the lowest place empty in this cycle
        # (``place``, registered: computed in the cycle before from the next
        # valid bits; there is one: the request was pushed with room after
        # that cycle, or to a queue empty after it), so that "placed" is
        # one AND of flip-flops.
        place = [Signal(name=f"entry{x}_place", init=int(x == 0)) for x in range(N)]
        placed = [Signal(name=f"entry{x}_placed") for x in range(N)]
        for x in range(N):
            m.d.comb += placed[x].eq(incoming.valid & place[x])
        # Each entry's next value: the request where it is placed, else the
        # entry advanced by a beat where it issues (the choice alone
        # selects), else as it is; its place empties as it leaves.
        nxt_q, nxt_valid, place_next = _entries_next(m, q, incoming, placed, go_d, bumped,
                                                     entry_l)
        for x in range(N):
            m.d.sync += place[x].eq(place_next[x])
        # Registered beside "may issue": it may issue, and its beat is its
        # last (so that "it issues its last beat now" is one LUT of the
        # choice's inputs).
        can_last = [Signal(name=f"entry{x}_can_last") for x in range(N)]
        last_go = [Signal(name=f"entry{x}_last_go", attrs=KEEP) for x in range(N)]
        for x in range(N):
            m.d.comb += last_go[x].eq(
                can_last[x] & ~Cat(*(ahead[0][j, x] for j in range(N) if j != x)).any())
        same_next = {}
        for x in range(N):
            same_next[x, x] = Const(1)
            for j in range(x):
                same_next[x, j] = same_next[j, x] = Mux(
                    placed[x], inc_copy[j], Mux(placed[j], inc_copy[x], same[x, j]))
        older_next = {(j, x): Mux(placed[x], 1, Mux(placed[j], 0, older_lo[j, x]))
                      for x in range(N) for j in range(x)}
        # pend next cycle: placed at x, the entries with beats left that the
        # request must follow; else as now, until j issues its last beat
        # (``last_go``) or is done (a retransmission's last beat: its
        # followers issue a cycle later). Placed at j: the entry at x is
        # older, and j's place was free or j leaving (pend already low).
        nxt_pend = {}
        for x in range(N):
            for j in range(N):
                if j == x:
                    continue
                a = Signal(name=f"entry{x}_pend{j}_new")
                m.d.comb += a.eq(Mux(placed[x], req_after[j] & unissued[j],
                                     pend[x, j] & ~q[j].done) & ~last_go[j])
                nxt_pend[x, j] = a
        # held[x, j] (registered): entry x (held) must wait for entry j
        # after that one's last beat (of one copy, and j's hold is a cycle
        # or more).
        held = {(x, j): Signal(name=f"entry{x}_held{j}")
                for x in range(N) for j in range(N) if j != x}
        stay = [Signal(name=f"entry{x}_stay") for x in range(N)]
        may_next = [Signal(name=f"entry{x}_can_new") for x in range(N)]
        for x in range(N):
            # the copy and slot of the entry at x next cycle, against the
            # request pushed now (a free place's stale fields are never
            # read: every use is gated by the entry's valid bit)
            for regs, field in ((inc_copy, "copy"), (inc_slot, "slot")):
                req_f = getattr(requested, field)
                m.d.sync += regs[x].eq(Mux(placed[x], getattr(incoming, field) == req_f,
                                           getattr(q[x], field) == req_f))
            for j in range(x):
                m.d.sync += [
                    same[x, j].eq(same_next[x, j]),
                    # the one placed is the younger
                    older_lo[j, x].eq(older_next[j, x]),
                ]
            # This entry's hold next cycle: where it is placed, those of the
            # record's entries of its copy and of a held entry of its copy
            # that issued its last beat in the cycle before (it leaves now);
            # else its own, shifted; and that of an entry of its copy that
            # may issue its last beat now (``can_last``, a register: if it
            # does not, this entry still follows it, and the hold it sets
            # when it does ends later).
            kept = Const(0, T)
            rec_hold = Const(0, T)
            for a in range(1, T):
                rec_hold = rec_hold | (inc_hit[a].replicate(T) & (r_gap[a] >> 1))
            for j in range(N):
                if j != x:
                    kept = kept | ((q[j].valid & q[j].done & inc_copy[j]).replicate(T)
                                   & (q[j].gap >> 1))
            base = Mux(placed[x], rec_hold | kept, blocked[x] >> 1)
            now = Const(0, T)
            for j in range(N):
                if j != x:
                    now = now | ((can_last[j] & Mux(placed[x], inc_copy[j], same[x, j]))
                                 .replicate(T) & q[j].gap)
            m.d.sync += blocked[x].eq(base | now)
            # held, not done, a combine and not held next cycle (before the
            # choice terms below), registered: one flip-flop in the choice's
            # loop
            m.d.sync += stay[x].eq(nxt_valid[x] & ~nxt_q[x].rtx & ~nxt_q[x].done
                                   & ~((base | now) >> 1)[0])
            m.d.sync += issued_last[x].eq(go[x])
            # The next "may issue" in two cases, each from registers but
            # for the choice terms it needs. A request placed now may not
            # issue next cycle (its place is free or leaving now, so
            # neither case holds; its first "may issue" is formed next
            # cycle, from its registered hold, ``pend`` and ``held``). The entry
            # issues now: it followed no entry with beats left (else it
            # could not issue), follows none next cycle and is held by none
            # (it issued its first beat); it may issue again unless this
            # beat is its last. It does not issue: as it is, except that an
            # entry it follows that issues its last beat now (``last_go``,
            # from the control copy of the choice) no longer has beats left
            # next cycle, and holds it still if it is of its copy and may
            # issue its last beat now (``held``: if it does not issue it,
            # this entry follows it still).
            # A retransmission's "may issue" is low in both cases, so the
            # combine choice ``sel`` selects.
            ok = _loop_terms(m, x, stay[x],
                             [can_last[j] & held[x, j] for j in range(N) if j != x],
                             [(pend[x, j], last_go[j]) for j in range(N) if j != x])
            may_self = Signal(name=f"entry{x}_may_self", attrs=KEEP)
            self_last = Signal(name=f"entry{x}_self_last", attrs=KEEP)
            may_stay = Signal(name=f"entry{x}_may_stay", attrs=KEEP)
            m.d.comb += [may_self.eq(~q[x].rtx & ~q[x].on_last),
                         self_last.eq(may_self & q[x].penult),
                         may_stay.eq(Cat(*ok).all()),
                         may_next[x].eq(Mux(sel[x], may_self, may_stay))]
            m.d.sync += [can[x].eq(may_next[x]), can_d[x].eq(may_next[x]),
                         can_i[x].eq(may_next[x]),
                         can_last[x].eq(Mux(sel[x], self_last, may_stay & q[x].on_last))]
            m.d.sync += q[x].eq(nxt_q[x])
            for j in range(N):
                if j != x:
                    m.d.sync += pend[x, j].eq(nxt_pend[x, j])
                    # (j's gap is fixed while it is held; placed at j: the
                    # entry at x is older and never waits for it; an empty
                    # place waits for none)
                    m.d.sync += held[x, j].eq(nxt_valid[x] & ~placed[j] & same_next[x, j]
                                              & q[j].gap[0])
        m.d.sync += rtx_waits.eq(nxt_valid[0] & nxt_q[0].rtx)
        # held after next cycle: placed now, or held and not issuing its last
        # beat now
        keep_next = [placed[x] | (q[x].valid & ~q[x].done & ~(go[x] & q[x].on_last))
                     for x in range(N)]
        n_kept = sum(keep_next[1:], Value.cast(keep_next[0]).as_unsigned())
        m.d.sync += [has_room.eq((n_kept < N - 1) | ((n_kept < N) & ~self.push.valid)),
                     will_be_empty.eq(~Cat(*keep_next).any() & ~self.push.valid)]
        # (read only where i may issue: i was not placed now, nor was an
        # entry j that may issue next cycle, so the order is as now)
        for (j, i) in ahead[0]:
            for copy in ahead:
                m.d.sync += copy[j, i].eq(may_next[j] & older(j, i))

        # The payload beat of the beat issued in the previous cycle: its
        # entry's, chosen by the registered "it issued" (the choice reaches
        # no register here); unless compact, registered again (one flip-flop
        # that the payload buffer's copies per lane's RAM load from).
        prev_addr = _one_hot_mux(issued_last, [e.data_prev for e in q], len(self.data_addr))
        if compact:
            m.d.comb += self.data_addr.eq(prev_addr)
        else:
            m.d.sync += self.data_addr.eq(prev_addr)
        m.d.comb += self.busy.eq(Cat(*(e.valid for e in q)).any() | incoming.valid | loop.busy)
        return m
