"""The issue queue of the default build forms (``acc_ram`` "memory" and
"ecp5"), with its choice made per message, a cycle ahead: an entry that
starts issues its beats back to back; starts are at least two cycles apart
(docs/architecture.md, "Slot table")."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from netagg.hdl import layouts
from netagg.hdl.issue_queue import (
    IssueQueue,
    _entries_next,
    _issue_beat,
    _one_hot_mux,
    _pow2_beats,
    _request_head,
)
from netagg.hdl.lane_loop import LaneLoop, acc_addr_bits
from netagg.hdl.netlist import KEEP
from netagg.hdl.slot_layouts import beat_count_bits, data_addr_bits

__all__ = ["IssueQueuePM"]


def _entry(params, data_beats):
    bbits = beat_count_bits(params)
    acc = {} if _pow2_beats(params) else {
        "acc_addr": unsigned(acc_addr_bits(params)),
        "acc_next": unsigned(acc_addr_bits(params)),
    }
    return data.StructLayout({
        "valid": unsigned(1),
        "rtx": unsigned(1),
        "slot": unsigned(layouts.bits_for(params.slots)),
        "copy": unsigned(layouts.bits_for(params.slots) + 1),
        "first": unsigned(1),
        "result": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "beat": unsigned(bbits),
        "beat_nx": unsigned(bbits + 1),
        "mask": unsigned(params.lanes),
        "last_mask": unsigned(params.lanes),  # the lanes of the message's last beat
        "on_last": unsigned(1),             # beat == last beat
        "penult": unsigned(1),              # beat + 1 == last beat
        "ante": unsigned(1),                # beat + 2 == last beat
        "last_m2": unsigned(bbits + 1),     # beats - 2
        "last_m3": unsigned(bbits + 2),     # beats - 3
        **acc,
        "data_addr": unsigned(data_addr_bits(data_beats)),
        "data_start": unsigned(data_addr_bits(data_beats) + 1),
        "done": unsigned(1),
    })


def _at_least(bits, k):
    """At least ``k`` of ``bits`` are high (an OR of ANDs)."""
    from itertools import combinations
    if k <= 0:
        return Const(1)
    if k > len(bits):
        return Const(0)
    return Cat(*(Cat(*c).all() for c in combinations(bits, k))).any()


class IssueQueuePM(IssueQueue):
    """:class:`~netagg.hdl.issue_queue.IssueQueue`'s ports and rules, with
    the choice per message: the oldest entry that may start starts, and
    issues its beats one per cycle to its last; the next start is chosen
    in the cycle of the current message's last beat (or while none issues)
    and starts the cycle after, and no start follows another in the next
    cycle (a 1-beat message leaves a cycle without an issue). Two combines
    of one copy start at least ``spacing`` cycles apart (and a message of
    a slot starts after the older one's last beat). "May start" is a
    register formed a cycle ahead assuming no start in between, so no
    register's next value but the issuing entry's and a few flags depends
    on the choice."""

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, N = p.lanes, p.beats, self._depth
        D = LaneLoop.spacing_of(self._fp_stages, self._acc_ram)
        entry_l = _entry(p, self._data_beats)
        pow2 = _pow2_beats(p)

        def acc_addr(e):
            if pow2:
                return Cat(e.beat[:(B - 1).bit_length()], e.copy)
            return e.acc_addr

        m.submodules.loop = loop = LaneLoop(p, fp_stages=self._fp_stages,
                                            acc_ram=self._acc_ram, data_latency=4)
        m.d.comb += loop.data.eq(self.data)
        wiring.connect(m, loop.res_beat, wiring.flipped(self.res_beat))

        q = [Signal(entry_l, name=f"entry{i}") for i in range(N)]
        older_lo = {(j, k): Signal(name=f"entry{j}_older{k}") for k in range(N) for j in range(k)}

        def older(j, k):
            return older_lo[j, k] if j < k else ~older_lo[k, j]

        # registered: the entry issuing now (one-hot), and whether its beat
        # is its message's first
        act = [Signal(name=f"entry{i}_act", attrs=KEEP) for i in range(N)]
        act_d = [Signal(name=f"entry{i}_act_d", attrs=KEEP) for i in range(N)]
        # registered: may start next cycle (formed a cycle ahead, with the
        # "a choice may be made now" flag), and per pair "may start and
        # arrived before"
        may = [Signal(name=f"entry{i}_may", attrs=KEEP) for i in range(N)]
        ahead = {(j, i): Signal(name=f"entry{j}_ahead{i}", attrs=KEEP)
                 for i in range(N) for j in range(N) if j != i}
        idle = [Signal(name=f"entry{i}_idle") for i in range(N)]     # held, not started
        fin = [Signal(name=f"entry{i}_fin") for i in range(N)]       # last beat now or next
        HW = max(D, 3)
        # bit k: no start k cycles on
        hold = [Signal(HW, name=f"entry{i}_hold_n") for i in range(N)]
        hold_r = [Signal(HW, name=f"entry{i}_hold_r") for i in range(N)]
        pend = {(k, j): Signal(name=f"entry{k}_pend{j}")
                for k in range(N) for j in range(N) if j != k}

        sel = [Signal(name=f"start{i}", attrs=KEEP) for i in range(N)]
        for i in range(N):
            m.d.comb += sel[i].eq(may[i] & ~Cat(*(ahead[j, i] for j in range(N) if j != i)).any())
        # registered: entry j, not a retransmission, starts now (its first
        # beat issues)
        st0 = [Signal(name=f"entry{j}_started0") for j in range(N)]
        # and one that started now or in the cycle before (starts are at
        # least two cycles apart: of one entry at a time)
        st01 = [Signal(name=f"entry{j}_started01") for j in range(N)]
        for j in range(N):
            m.d.sync += [st0[j].eq(sel[j] & ~q[j].rtx), st01[j].eq((sel[j] & ~q[j].rtx) | st0[j])]
        any_act = Cat(*act).any()
        unissued = [e.valid & ~e.done for e in q]
        m.d.sync += self.stall.eq(~any_act & Cat(*(u & ~e.rtx for u, e in zip(unissued, q,
                                                                               strict=True))).any())

        issuing = Signal(entry_l)
        m.d.comb += issuing.eq(_one_hot_mux(act, q, entry_l))
        m.d.comb += _issue_beat(loop.issue, any_act, issuing.rtx, acc_addr(issuing), issuing)

        bumped = [Signal(entry_l, name=f"entry{i}_bumped") for i in range(N)]
        for i in range(N):
            cur, nxt = q[i], bumped[i]
            m.d.comb += [nxt.eq(cur),
                         nxt.beat.eq(cur.beat_nx), nxt.beat_nx.eq(cur.beat_nx + 1),
                         nxt.data_addr.eq(cur.data_addr + 1),
                         nxt.mask.eq(Mux(cur.penult, cur.last_mask, Const(-1, L))),
                         nxt.on_last.eq(cur.penult),
                         nxt.penult.eq(cur.ante),
                         nxt.ante.eq(cur.beat_nx == cur.last_m3),
                         nxt.done.eq(cur.on_last)]
            if not pow2:
                m.d.comb += [nxt.acc_addr.eq(cur.acc_next), nxt.acc_next.eq(cur.acc_next + 1)]

        incoming = Signal(entry_l, name="incoming")
        has_room = Signal(name="has_room")
        will_be_empty = Signal(name="will_be_empty")
        m.d.comb += [self.has_room.eq(has_room), self.will_be_empty.eq(will_be_empty)]


        # The push registered first (``pre``): every compare with a request
        # is of registers; it is placed two cycles after its push.
        req = Signal.like(self.push.payload, name="pre")
        pre_valid = Signal(name="pre_valid")
        m.d.sync += [req.eq(self.push.payload), pre_valid.eq(self.push.valid)]
        requested = Signal(entry_l)
        # the last beat's lanes: lane k holds an element when more than k
        # elements are left for it
        last_mask = Signal(L, name="pre_last_mask")
        if L == 1:
            m.d.comb += last_mask.eq(1)
        elif L & (L - 1) == 0:
            # (count mod L: 0 for a full last beat; no compare with L - 1,
            # which no remainder exceeds)
            rem = req.count[:(L - 1).bit_length()]
            m.d.comb += last_mask.eq(Cat(*[(rem == 0) | (rem > k) for k in range(L - 1)],
                                         rem == 0))
        else:
            rem = Signal(len(req.count) + 1)
            m.d.comb += [rem.eq(req.count - (req.beats - 1) * L),
                         last_mask.eq(Cat(*(rem > k for k in range(L))))]
        m.d.comb += _request_head(requested, req, pre_valid)
        m.d.comb += [
            requested.last_mask.eq(last_mask),
            requested.mask.eq(Mux(req.beats == 1, last_mask, Const(-1, L))),
            requested.on_last.eq(req.beats == 1),
            requested.penult.eq(req.beats == 2),
            requested.ante.eq(req.beats == 3),
            requested.last_m2.eq(req.beats - 2),
            requested.last_m3.eq(req.beats - 3),
            requested.data_addr.eq(req.data_addr[:len(requested.data_addr)]),
            requested.data_start.eq(req.data_addr),
        ]
        if not pow2:
            m.d.comb += [requested.acc_addr.eq(Cat(req.ver, req.slot) * B),
                         requested.acc_next.eq(Cat(req.ver, req.slot) * B + 1)]
        m.d.sync += incoming.eq(requested)
        # The first payload beat still needed: the oldest entry held and not
        # done (``kept``: registered), else the request behind them, else
        # the buffer's head (the fallback formed a cycle ahead, with the
        # head as of the previous cycle: a pointer that moves only forward,
        # a cycle late it frees less, never more).
        kept = [Signal(name=f"entry{i}_kept") for i in range(N)]
        oldest_kept = [kept[i] & ~Cat(*(kept[j] & older(j, i)
                                        for j in range(N) if j != i)).any()
                       for i in range(N)]
        df_else = Signal(len(self.data_free), name="data_free_else")
        push_start = self.push.payload.data_addr
        m.d.sync += [
            df_else.eq(Mux(pre_valid, requested.data_start,
                           Mux(self.push.valid, push_start, self.data_head))),
            self.data_free.eq(_one_hot_mux(
                oldest_kept + [~Cat(*kept).any()],
                [e.data_start for e in q] + [df_else], len(self.data_free))),
        ]
        inc_copy = [Signal(name=f"incoming_copy{x}") for x in range(N)]
        inc_slot = [Signal(name=f"incoming_slot{x}") for x in range(N)]
        req_after = [inc_slot[j] | e.rtx | (e.result & incoming.result)
                     for j, e in enumerate(q)]
        same = {}
        for k in range(N):
            for j in range(k):
                same[k, j] = same[j, k] = Signal(name=f"entry{k}_same{j}")
            same[k, k] = Const(1)

        # The record of starts: r_copy[a], r_valid[a]: a combine of that
        # copy started a + 1 cycles ago; a request's copy compared with it
        # as it is pushed (registered, against the record as it is next
        # cycle).
        # r_copy[a], r_valid[a]: a combine of that copy started a + 1 cycles
        # ago; inc_hit[a] (registered): record entry a, as of the cycle
        # before, is of the request's copy (a start a + 2 cycles before the
        # request is placed); the starts of the two cycles before the
        # placement are those of entries still held (``st01``).
        R = max(D - 3, 1)
        r_copy = [Signal(len(q[0].copy), name=f"rec{a}_copy") for a in range(R)]
        r_valid = [Signal(name=f"rec{a}_valid") for a in range(R)]
        inc_hit = [Signal(name=f"incoming_hit{a}") for a in range(R)]
        m.d.sync += [r_copy[0].eq(issuing.copy),
                     r_valid[0].eq(Cat(*st0).any())]
        for a in range(1, R):
            m.d.sync += [r_copy[a].eq(r_copy[a - 1]), r_valid[a].eq(r_valid[a - 1])]
        for a in range(R):
            m.d.sync += inc_hit[a].eq(r_valid[a] & (r_copy[a] == requested.copy))

        place = [Signal(name=f"entry{x}_place", init=int(x == 0)) for x in range(N)]
        placed = [Signal(name=f"entry{x}_placed") for x in range(N)]
        place_cs = []
        for x in range(N):
            m.d.comb += placed[x].eq(incoming.valid & place[x])
        # the same from copies of its two registers (kept), for the control
        # (compares, holds, order, dependencies): ``placed`` loads the
        # entry's wide register
        placed_c = [Signal(name=f"entry{x}_placed_c") for x in range(N)]
        for x in range(N):
            inc_valid_c = Signal(name=f"entry{x}_inc_valid_c", attrs=KEEP)
            place_c = Signal(name=f"entry{x}_place_c", init=int(x == 0), attrs=KEEP)
            m.d.sync += inc_valid_c.eq(requested.valid)
            m.d.comb += placed_c[x].eq(inc_valid_c & place_c)
            place_cs.append(place_c)
        nxt_q, nxt_valid, place_next = _entries_next(m, q, incoming, placed, act_d, bumped,
                                                     entry_l)
        for x in range(N):
            m.d.sync += [place[x].eq(place_next[x]), place_cs[x].eq(place_next[x])]

        same_next = {}
        for x in range(N):
            same_next[x, x] = Const(1)
            for j in range(x):
                same_next[x, j] = same_next[j, x] = Mux(
                    placed_c[x], inc_copy[j], Mux(placed_c[j], inc_copy[x], same[x, j]))
        older_next = {(j, x): Mux(placed_c[x], 1, Mux(placed_c[j], 0, older_lo[j, x]))
                      for x in range(N) for j in range(x)}

        def older_n(j, k):
            return older_next[j, k] if j < k else ~older_next[k, j]

        # "A choice may be made next cycle": none is made now (no entry may
        # start now) and next cycle nothing issues or the issuing entry's
        # beat is its last (it continues: it is on its penultimate now).
        act_long = Cat(*(act[x] & ~q[x].on_last & ~q[x].penult for x in range(N))).any()
        allow_next = ~Cat(*may).any() & ~act_long

        for x in range(N):
            for regs, field in ((inc_copy, "copy"), (inc_slot, "slot")):
                req_f = getattr(requested, field)
                m.d.sync += regs[x].eq(Mux(placed_c[x], getattr(incoming, field) == req_f,
                                           getattr(q[x], field) == req_f))
            for j in range(x):
                m.d.sync += [same[x, j].eq(same_next[x, j]),
                             older_lo[j, x].eq(older_next[j, x])]
            # the holds, three registers (``hold_r``: the record of starts
            # before the last two; ``hold_n``: the starts now and in the
            # cycle before, as the request is placed, then those while it
            # is held): a start of the copy blocks starts of it for D
            # cycles from its own
            def mask(n):
                return Const((1 << n) - 1 if n > 0 else 0, HW)
            rec = Const(0, HW)
            for a in range(R):
                # a start a + 2 cycles before now: blocked D - a - 3 cycles
                # from next cycle on
                rec = rec | (inc_hit[a].replicate(HW) & mask(D - a - 3))
            rec_n = Const(0, HW)
            started = Const(0, HW)
            for j in range(N):
                if j != x:
                    # starts of entries of this copy now (D - 1 cycles from
                    # next cycle on) and in the cycle before (D - 2)
                    rec_n = rec_n | ((st01[j] & inc_copy[j]).replicate(HW) & mask(D - 2))
                    rec_n = rec_n | ((st0[j] & inc_copy[j]).replicate(HW)
                                     & (mask(D - 1) ^ mask(D - 2)))
                    started = started | ((st0[j] & same[x, j])
                                         .replicate(HW) & mask(D - 1))
            m.d.sync += [hold_r[x].eq(Mux(placed_c[x], rec, hold_r[x] >> 1)),
                         hold[x].eq(Mux(placed_c[x], rec_n, (hold[x] >> 1) | started))]
            # held and not started (a request placed now: from next cycle)
            m.d.sync += idle[x].eq(Mux(placed_c[x], 1, idle[x] & ~sel[x] & nxt_valid[x]))
            # its last beat issues next cycle or the one after
            m.d.sync += fin[x].eq((sel[x] & (q[x].on_last | q[x].penult))
                                  | (act[x] & ~q[x].on_last & (q[x].penult | q[x].ante)))
            m.d.sync += [act[x].eq(sel[x] | (act[x] & ~q[x].on_last)),
                         act_d[x].eq(sel[x] | (act[x] & ~q[x].on_last))]
            m.d.sync += q[x].eq(nxt_q[x])
            for j in range(N):
                if j != x:
                    m.d.sync += pend[x, j].eq(
                        Mux(placed_c[x], req_after[j] & unissued[j], pend[x, j] & ~q[j].done)
                        & ~(act[j] & q[j].on_last))
            # may start two cycles from now (no start next cycle): held, not
            # started, not placed now, every entry it follows without beats
            # left by then, not held by a start of its copy; a
            # retransmission once the lanes are empty
            free = Cat(*(~pend[x, j] | fin[j] for j in range(N) if j != x)).all()
            rtx_ok = ~q[x].rtx | ~loop.lanes_busy
            may_pred = Signal(name=f"entry{x}_may_pred", attrs=KEEP)
            # (a start now of an entry of its copy is in its hold from next
            # cycle: D >= 3 cycles, so it blocks a start two cycles on)
            now_same = Cat(*(st0[j] & same[x, j]
                             for j in range(N) if j != x)).any()
            m.d.comb += may_pred.eq(idle[x] & free & ~hold[x][2] & ~hold_r[x][2]
                                    & ~now_same & rtx_ok)
            m.d.sync += may[x].eq(may_pred & allow_next)
            for j in range(N):
                if j != x:
                    # (``allow_next`` is in ``may`` of the entry it is
                    # ahead of: not needed here)
                    m.d.sync += ahead[x, j].eq(may_pred & older_n(x, j))

        keep_next = [placed[x] | (q[x].valid & ~q[x].done & ~(act[x] & q[x].on_last))
                     for x in range(N)]
        for x in range(N):
            m.d.sync += kept[x].eq(keep_next[x])
        # (the request registered in ``pre`` and the one pushed now counted)
        # (room: an entry on its last beat now counts as held, its room seen
        # a cycle later; the push of this cycle is ``pre_valid`` next cycle,
        # chosen there: no register's next value depends on the push)
        room_if_push = Signal(name="room_if_push", init=1, attrs=KEEP)
        room_if_none = Signal(name="room_if_none", init=1, attrs=KEEP)
        empty_unless_push = Signal(name="empty_unless_push", init=1, attrs=KEEP)
        held_now = kept + [incoming.valid, pre_valid]
        m.d.sync += [room_if_push.eq(~_at_least(held_now, N - 1)),
                     room_if_none.eq(~_at_least(held_now, N)),
                     empty_unless_push.eq(~Cat(*held_now).any())]
        m.d.comb += [has_room.eq(Mux(pre_valid, room_if_push, room_if_none)),
                     will_be_empty.eq(empty_unless_push & ~pre_valid)]

        d1 = Signal(len(self.data_addr), name="data_addr_d1")
        m.d.sync += [d1.eq(_one_hot_mux(act_d, [e.data_addr for e in q], len(d1))),
                     self.data_addr.eq(d1)]
        m.d.comb += self.busy.eq(Cat(*(e.valid for e in q)).any() | incoming.valid | pre_valid
                                 | loop.busy)
        return m
