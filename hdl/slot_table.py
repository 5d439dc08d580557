"""The slot table: SwitchML's two copies per slot, in block RAM, and the
engine that applies protocol.md's slot algorithm to each validated message."""

from __future__ import annotations

import enum as py_enum

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.lane import Lane
from netagg.hdl.ram import NO_RW_CHECK, registered_read
from netagg.hdl.validator import descriptor, payload_beat
from netagg.params import Params


def copy_state(params: Params) -> data.StructLayout:
    """One copy of a slot: contributor bitmap, count, done flag, round metadata."""
    return data.StructLayout({
        "bits": unsigned(params.workers),
        "n": unsigned(layouts.bits_for(params.workers + 1)),
        "done": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "count": unsigned(layouts.bits_for(params.elements + 1)),
        "offset": unsigned(32),
    })


def slot_state(params: Params) -> data.ArrayLayout:
    """Both copies of a slot (index = ver), one block RAM word."""
    return data.ArrayLayout(copy_state(params), 2)


def acc_word(params: Params) -> data.StructLayout:
    """One beat of a copy's accumulators, with the round's sticky flags for
    the beat's valid lanes."""
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(32), params.lanes),
        "nan": unsigned(1),
        "ovf": unsigned(1),
    })


def result_desc(params: Params) -> data.StructLayout:
    """A RESULT to send: the round's header fields and its destinations."""
    return data.StructLayout({
        "meta": layouts.message_meta(params),  # the round; worker = unicast destination
        "tag": unsigned(layouts.TAG_BITS),
        "multicast": unsigned(1),     # to workers 0..workers-1, else to meta.worker
        "workers": unsigned(8),
        "n": unsigned(layouts.bits_for(params.workers + 1)),
        "beats": unsigned(layouts.bits_for(params.beats + 1)),
    })


def result_beat(params: Params) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(32), params.lanes),
        "mask": unsigned(params.lanes),   # lanes holding elements (< count)
        "bf16": unsigned(1),              # a bf16 round (data widened to binary32)
        "nan": unsigned(1),
        "ovf": unsigned(1),
        "last": unsigned(1),
    })


class _Mode(py_enum.IntEnum):
    LANES = 0        # combine the payload into the copy (first or later contribution)
    RETRANSMIT = 1   # discard the payload, resend the stored result
    DISCARD = 2      # discard the payload (a dropped message)


class SlotTable(wiring.Component):
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
    """

    def __init__(self, params: Params, *, result_beats: int, data_beats: int, fp_stages=None):
        if data_beats < params.beats or data_beats & (data_beats - 1):
            self._MustUse__silence = True   # refused: never elaborated
            raise ValueError(f"data_beats must be a power of two >= K/L ({params.beats}), "
                             f"not {data_beats}")
        self._data_beats = data_beats
        if result_beats < params.beats:
            self._MustUse__silence = True   # refused: never elaborated
            raise ValueError(f"result_beats ({result_beats}) must hold one full RESULT "
                             f"({params.beats} beats)")
        self._params = params
        self._result_beats = result_beats
        self._lane_args = dict(dtypes=params.dtypes, ops=params.ops,
                               bf16_accumulate=params.bf16_accumulate, stages=fp_stages)
        probe = Lane(**self._lane_args)
        probe._MustUse__silence = True     # only asked for its latency
        self._lane_latency = probe.latency
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

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, S = p.lanes, p.beats, p.slots
        D = self._lane_latency
        V = layouts.Verdict

        # ---------------- memories ----------------
        # A slot word is never used as read in the cycle it is written (decisions
        # re-read the state), nor a payload beat: no read-during-write logic.
        m.submodules.state_mem = state_mem = Memory(shape=slot_state(p), depth=S, init=[],
                                                    attrs=NO_RW_CHECK)
        st_wr = state_mem.write_port()
        m.submodules.acc_mem = acc_mem = Memory(shape=acc_word(p), depth=2 * S * B, init=[])
        acc_wr = acc_mem.write_port()
        acc_rd = acc_mem.read_port(transparent_for=(acc_wr,))

        lanes = []
        for i in range(L):
            lane = Lane(**self._lane_args)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += lane.o.ready.eq(1)
            lanes.append(lane)

        # ---------------- reset: clear the slot words ----------------
        clearing = Signal(init=1)
        clear_addr = Signal(range(S + 1))
        with m.If(clearing):
            m.d.comb += [st_wr.addr.eq(clear_addr), st_wr.data.eq(0), st_wr.en.eq(1)]
            m.d.sync += clear_addr.eq(clear_addr + 1)
            with m.If(clear_addr == S - 1):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.ready.eq(~clearing)

        # ---------------- result buffer credit ----------------
        credit = Signal(range(self._result_beats + 1), init=self._result_beats)
        credit_take = Signal(range(self._result_beats + 1))
        credit_back = Mux(self.res_free.valid, self.res_free.payload, 0)
        credit_next = Signal(range(self._result_beats + 1))
        credit_ok = Signal(init=1)   # room for a full RESULT (registered)
        m.d.comb += credit_next.eq(credit - credit_take + credit_back)
        m.d.sync += [credit.eq(credit_next), credit_ok.eq(credit_next >= B)]

        # ---------------- the message at the head: state lookup ----------------
        st_rd_data = registered_read(m, state_mem, self.desc.payload.slot_abs,
                                     name="st_rd_data")
        # The head's descriptor comes straight from the FIFO's RAM: the decision
        # logic uses a copy in registers (N's own from age 1 on).
        N = Signal(descriptor(p))
        m.d.sync += N.eq(self.desc.payload)
        hdr = N.meta
        # Cycles the head has been at the head, saturating at 3: its copy and
        # its state read are registered (1), the state is registered (2) and
        # so are its decision terms (3), which a decision needs. Decisions are
        # thus at least 4 cycles apart (a drop, which needs no state: 3), and
        # the write of one is seen by the read for the next.
        age = Signal(2)
        with m.If(~self.desc.valid | self.desc.ready | clearing):
            m.d.sync += age.eq(0)
        with m.Elif(age != 3):
            m.d.sync += age.eq(age + 1)

        # ---------------- payload buffer ----------------
        # Payload beats in arrival order, read by address: a message can
        # overtake one of another slot that waits on a hazard.
        DB = self._data_beats
        dbits = layouts.bits_for(DB)
        m.submodules.data_mem = data_mem = Memory(shape=payload_beat(p), depth=DB, init=[],
                                                  attrs=NO_RW_CHECK)
        d_wr = data_mem.write_port()
        wp = Signal(dbits + 1)       # beats written (mod 2 DB)
        fp = Signal(dbits + 1)       # beats freed
        dptr = Signal(dbits + 1)     # first beat of the message at the FIFO head
        occupancy = Signal(dbits + 1)
        data_room = Signal()         # registered: a beat written now still fits
        m.d.sync += data_room.eq(occupancy < DB - 1)
        m.d.comb += [
            occupancy.eq(wp - fp),
            self.data.ready.eq(data_room),
            d_wr.addr.eq(wp[:dbits]),
            d_wr.data.eq(self.data.payload),
            d_wr.en.eq(self.data.valid & self.data.ready),
        ]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += wp.eq(wp + 1)
        free_fin = Signal(dbits + 2)       # payload beats of finished combines, in order
        free_dec = Signal(dbits + 2)       # payload beats of a message decided not to combine

        # ---------------- the decided messages: a queue of two ----------------
        bbits = layouts.bits_for(B + 1)
        ctx_l = data.StructLayout({
            "valid": unsigned(1), "rtx": unsigned(1),
            "slot": unsigned(layouts.bits_for(S)), "first": unsigned(1), "result": unsigned(1),
            "dtype": layouts.DType, "op": layouts.Op, "beat": unsigned(bbits),
            "lastb": unsigned(bbits), "rem": unsigned(layouts.bits_for(p.elements + 1)),
            "aaddr": acc_rd.addr.shape(), "daddr": unsigned(dbits), "dbeats": unsigned(bbits),
            "done": unsigned(1),      # every beat issued; leaves the queue next cycle
            "blocked": unsigned(1),   # may not overtake the entry ahead of it
        })
        q = [Signal(ctx_l, name="q0"), Signal(ctx_l, name="q1")]
        deferred = Signal(dbits + 2)       # freed beats of messages that overtook q0

        # Pipeline registers: s0 (RAM addresses), s1 (RAMs being read), s2
        # (RAM outputs registered: the lanes' inputs), then D lane stages.
        def meta_layout():
            return data.StructLayout({
                "valid": unsigned(1), "rtx": unsigned(1), "addr": acc_rd.addr.shape(),
                "mask": unsigned(L), "last": unsigned(1), "first": unsigned(1),
                "result": unsigned(1), "nan": unsigned(1), "ovf": unsigned(1),
                "bf16": unsigned(1),
            })
        s0 = Signal(meta_layout())
        s0_dtype = Signal(layouts.DType)
        s0_op = Signal(layouts.Op)
        s0_daddr = Signal(dbits)
        s1 = Signal(meta_layout())
        s1_dtype = Signal(layouts.DType)
        s1_op = Signal(layouts.Op)
        s2 = Signal(meta_layout())
        s2_dtype = Signal(layouts.DType)
        s2_op = Signal(layouts.Op)
        dl = [Signal(meta_layout(), name=f"d{k}") for k in range(D)]
        # Entries whose write-back is still ahead (the last one writes this
        # cycle, and the read port is transparent to it).
        pending = [s0, s1, s2] + dl[:D - 1]
        # Registered: a retransmission waits in q0 with nothing issuing, so the
        # pipeline seen a cycle ago bounds the one now.
        lanes_busy = Signal()
        m.d.sync += lanes_busy.eq(Cat(e.valid & ~e.rtx for e in [s0, s1, s2] + dl).any())

        addrs, left, haz = [], [], []
        for k, e in enumerate(q):
            a = Signal(acc_rd.addr.shape(), name=f"q{k}_addr")
            h = Signal(name=f"q{k}_hazard")
            m.d.comb += [a.eq(e.aaddr), h.eq(0)]
            for pe in pending:
                with m.If(pe.valid & ~pe.rtx & (pe.addr == a)):
                    m.d.comb += h.eq(1)
            addrs.append(a)
            haz.append(h)
            left.append(e.valid & ~e.done)
        q0, q1 = q
        cand0 = left[0] & ~q0.rtx & ~haz[0]
        rtx0 = left[0] & q0.rtx & ~lanes_busy
        # q1 overtakes only a stalled combine of another slot, and two RESULTs never interleave.
        cand1 = left[1] & ~q1.rtx & ~haz[1] & (~q1.blocked | ~left[0])
        sel0 = Signal()
        sel1 = Signal()
        issue_lanes = Signal()
        issue_rtx = Signal()
        m.d.comb += [
            sel0.eq(cand0 | rtx0),
            sel1.eq(~(cand0 | rtx0) & cand1),
            issue_lanes.eq(cand0 | sel1),
            issue_rtx.eq(rtx0),
        ]
        m.d.sync += [
            self.stall.eq(~sel0 & ~sel1 & ((left[0] & ~q0.rtx) | (left[1] & ~q1.rtx))),
        ]
        e = Signal(ctx_l)
        e_addr = Signal(acc_rd.addr.shape())
        m.d.comb += [e.eq(Mux(sel1, q1, q0)), e_addr.eq(Mux(sel1, addrs[1], addrs[0]))]

        mask = Signal(L)
        for i in range(L):
            m.d.comb += mask[i].eq(e.rem > i)
        m.d.sync += [
            s0.valid.eq(issue_lanes | issue_rtx),
            s0.rtx.eq(issue_rtx),
            s0.addr.eq(e_addr),
            s0.mask.eq(mask),
            s0.last.eq(e.beat == e.lastb),
            s0.first.eq(e.first),
            s0.result.eq(e.result),
            s0.bf16.eq(e.dtype == layouts.DType.BF16),
            s0_dtype.eq(e.dtype),
            s0_op.eq(e.op),
            s0_daddr.eq(e.daddr),
        ]
        m.d.comb += [acc_rd.addr.eq(s0.addr), acc_rd.en.eq(1)]
        m.d.sync += [s1.eq(s0), s1_dtype.eq(s0_dtype), s1_op.eq(s0_op)]
        s1_b = registered_read(m, data_mem, s0_daddr, name="s1_b")

        # The queue after this cycle's issue.
        qu = [Signal(ctx_l, name="q0_next"), Signal(ctx_l, name="q1_next")]
        fin = []
        for k, (cur, nxt, sel) in enumerate(zip(q, qu, (sel0, sel1), strict=True)):
            m.d.comb += nxt.eq(cur)
            with m.If(sel):
                m.d.comb += [nxt.beat.eq(cur.beat + 1), nxt.aaddr.eq(cur.aaddr + 1),
                             nxt.daddr.eq(cur.daddr + 1),
                             nxt.rem.eq(Mux(cur.rem > L, cur.rem - L, 0))]
                with m.If(cur.beat == cur.lastb):
                    m.d.comb += nxt.done.eq(1)
            f = Signal(name=f"q{k}_leaving")
            m.d.comb += f.eq(cur.valid & cur.done)
            fin.append(f)
        # Entries leave the cycle after their last beat: only registers decide.
        keep0 = q0.valid & ~q0.done
        keep1 = q1.valid & ~q1.done

        # Payload buffer space comes back in arrival order.
        with m.If(fin[0]):
            m.d.comb += free_fin.eq(q0.dbeats + deferred + Mux(fin[1], q1.dbeats, 0))
            m.d.sync += deferred.eq(0)
        with m.Elif(fin[1]):
            m.d.sync += deferred.eq(deferred + q1.dbeats)

        # s2: the RAM outputs, registered; lane inputs. The meta delay line
        # follows the lanes.
        ar = acc_rd.data
        a_r = Signal(acc_word(p))
        b_r = Signal(payload_beat(p))
        s2_rtx = Signal()            # s2 holds a beat of a retransmission (not for the lanes)
        m.d.sync += [s2.eq(s1), s2_dtype.eq(s1_dtype), s2_op.eq(s1_op), a_r.eq(ar), b_r.eq(s1_b),
                     s2_rtx.eq(s1.valid & s1.rtx)]
        with m.If(s1.rtx):
            m.d.sync += s2.valid.eq(0)
        for i, lane in enumerate(lanes):
            m.d.comb += [
                lane.i.valid.eq(s2.valid),
                lane.i.payload.a.eq(a_r.data[i]),
                lane.i.payload.b.eq(b_r[i]),
                lane.i.payload.dtype.eq(s2_dtype),
                lane.i.payload.op.eq(s2_op),
                lane.i.payload.first.eq(s2.first),
            ]
        if D:
            m.d.sync += [dl[0].eq(s2), dl[0].nan.eq(a_r.nan), dl[0].ovf.eq(a_r.ovf)]
            for k in range(1, D):
                m.d.sync += dl[k].eq(dl[k - 1])
            out = dl[D - 1]
        else:  # pragma: no cover - lanes always have a latency
            raise ValueError("lanes with zero latency are not supported")

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
        with m.Elif(s2_rtx):
            m.d.sync += [rb.valid.eq(1), rb.payload.mask.eq(s2.mask),
                         rb.payload.nan.eq(a_r.nan), rb.payload.ovf.eq(a_r.ovf),
                         rb.payload.last.eq(s2.last), rb.payload.bf16.eq(s2.bf16),
                         rb.payload.data.eq(a_r.data)]

        # ---------------- the decision for N ----------------
        st = Signal(slot_state(p))
        m.d.sync += st.eq(st_rd_data)
        ver = hdr.ver
        c = st[ver]
        o = st[~ver]
        w_onehot = Signal(p.workers)
        for i in range(p.workers):
            m.d.comb += w_onehot[i].eq(hdr.worker == i)
        is_new = ~(c.bits & w_onehot).any()
        meta_diff = ((hdr.dtype != c.dtype) | (hdr.op != c.op) | (hdr.count != c.count)
                     | (hdr.offset != c.offset))
        open_copy = (c.n != 0) & ~c.done
        fresh_round = (c.n == 0) | c.done
        n_new = Mux(fresh_round, 1, c.n + 1)
        complete = n_new == N.workers
        pkt_beats = Signal(bbits)
        c_beats = Signal(bbits)
        if L > 1:
            m.d.comb += [pkt_beats.eq((hdr.count + (L - 1)) >> (L - 1).bit_length()
                                      if L & (L - 1) == 0 else (hdr.count + L - 1) // L),
                         c_beats.eq((c.count + (L - 1)) >> (L - 1).bit_length()
                                    if L & (L - 1) == 0 else (c.count + L - 1) // L)]
        else:
            m.d.comb += [pkt_beats.eq(hdr.count), c_beats.eq(c.count)]

        # The decision terms, registered (valid once age >= 2 for the state).
        verdict_c = Signal(V)
        mode_c = Signal(2)
        needs_result_c = Signal()
        res_beats_c = Signal(bbits)
        verdict = Signal(V)
        mode = Signal(2)
        needs_result = Signal()
        res_beats = Signal(bbits)
        m.d.sync += [verdict.eq(verdict_c), mode.eq(mode_c), needs_result.eq(needs_result_c),
                     res_beats.eq(res_beats_c)]
        with m.If(N.verdict != V.ACCEPT):
            m.d.comb += [verdict_c.eq(N.verdict), mode_c.eq(_Mode.DISCARD)]
        with m.Elif(is_new & open_copy & meta_diff):
            m.d.comb += [verdict_c.eq(V.MISMATCH), mode_c.eq(_Mode.DISCARD)]
        with m.Elif(is_new):
            m.d.comb += [verdict_c.eq(V.ACCEPT), mode_c.eq(_Mode.LANES),
                         needs_result_c.eq(complete), res_beats_c.eq(pkt_beats)]
        with m.Elif(c.done):
            m.d.comb += [verdict_c.eq(V.RETRANSMIT), mode_c.eq(_Mode.RETRANSMIT),
                         needs_result_c.eq(1), res_beats_c.eq(c_beats)]
        with m.Else():
            m.d.comb += [verdict_c.eq(V.DUPLICATE), mode_c.eq(_Mode.DISCARD)]

        needs_state = N.verdict == V.ACCEPT
        # Only registered terms: a combine needs a free queue entry, anything
        # else an empty queue.
        room = Mux(mode == _Mode.LANES, ~(keep0 & keep1), ~keep0 & ~keep1)
        decide = Signal()
        m.d.comb += decide.eq(
            self.desc.valid & ~clearing & room & Mux(needs_state, age == 3, age >= 2)
            & (~needs_result | credit_ok) & self.res_desc.ready)
        m.d.comb += self.desc.ready.eq(decide)

        new_state = Signal(slot_state(p))
        m.d.comb += new_state.eq(st)
        with m.If(o.done):
            m.d.comb += new_state[~ver].bits.eq(o.bits & ~w_onehot)
        with m.If(fresh_round):
            m.d.comb += [
                new_state[ver].bits.eq(w_onehot),
                new_state[ver].dtype.eq(hdr.dtype),
                new_state[ver].op.eq(hdr.op),
                new_state[ver].count.eq(hdr.count),
                new_state[ver].offset.eq(hdr.offset),
            ]
        with m.Else():
            m.d.comb += new_state[ver].bits.eq(c.bits | w_onehot)
        m.d.comb += [new_state[ver].n.eq(n_new), new_state[ver].done.eq(complete)]
        # Registered like the decision terms: N and its state are stable from
        # age 2 on, so at the decision (age 3) these are N's.
        new_state_r = Signal(slot_state(p))
        complete_r = Signal()
        res_n = Signal(layouts.bits_for(p.workers + 1))
        m.d.sync += [new_state_r.eq(new_state), complete_r.eq(complete),
                     res_n.eq(Mux(verdict_c == V.ACCEPT, n_new, c.n))]
        with m.If(decide & (verdict == V.ACCEPT)):
            m.d.comb += [st_wr.addr.eq(N.slot_abs), st_wr.data.eq(new_state_r), st_wr.en.eq(1)]

        new = Signal(ctx_l)
        m.d.comb += [
            new.valid.eq(mode != _Mode.DISCARD),
            new.rtx.eq(mode == _Mode.RETRANSMIT),
            new.slot.eq(N.slot_abs),
            new.first.eq(fresh_round),
            new.result.eq(needs_result),
            new.dtype.eq(Mux(mode == _Mode.RETRANSMIT, c.dtype, hdr.dtype)),  # of the stored round
            new.op.eq(hdr.op),
            new.beat.eq(0),
            new.lastb.eq(Mux(mode == _Mode.RETRANSMIT, c_beats, pkt_beats) - 1),
            new.rem.eq(Mux(mode == _Mode.RETRANSMIT, c.count, hdr.count)),
            new.aaddr.eq(Cat(ver, N.slot_abs) * B),
            new.daddr.eq(dptr[:dbits]),
            new.dbeats.eq(Mux(mode == _Mode.LANES, N.beats, 0)),
        ]
        # Behind a message of the same slot, a retransmission, or (for a
        # RESULT) another RESULT, a combine waits its turn.
        ahead = Signal(ctx_l)
        m.d.comb += ahead.eq(Mux(keep0, q0, q1))
        m.d.comb += new.blocked.eq((ahead.slot == N.slot_abs) | ahead.rtx
                                   | (ahead.result & needs_result))
        placed = Signal(ctx_l)
        with m.If(decide):
            m.d.comb += placed.eq(new)
            m.d.sync += dptr.eq(dptr + N.beats)
            with m.If(mode != _Mode.LANES):       # its payload is not needed
                m.d.comb += free_dec.eq(N.beats)
            with m.If(needs_result):
                m.d.comb += credit_take.eq(res_beats)
        with m.If(keep0):
            m.d.sync += [q0.eq(qu[0]), q1.eq(Mux(keep1, qu[1], placed))]
        with m.Elif(keep1):
            m.d.sync += [q0.eq(qu[1]), q1.eq(placed)]
        with m.Else():
            m.d.sync += [q0.eq(placed), q1.eq(0)]
        m.d.sync += fp.eq(fp + free_fin + free_dec)

        # Verdict and the RESULT descriptor.
        m.d.sync += [self.verdict.valid.eq(decide), self.verdict.payload.code.eq(verdict),
                     self.verdict.payload.tag.eq(N.tag),
                     self.completed.eq(decide & (verdict == V.ACCEPT) & complete_r)]
        rd = self.res_desc.payload
        m.d.comb += [
            self.res_desc.valid.eq(decide & needs_result),
            rd.meta.eq(hdr),
            rd.tag.eq(N.tag),
            rd.multicast.eq(verdict == V.ACCEPT),
            rd.workers.eq(N.workers),
            rd.n.eq(res_n),
            rd.beats.eq(res_beats),
        ]
        with m.If(verdict == V.RETRANSMIT):
            m.d.comb += [rd.meta.dtype.eq(c.dtype), rd.meta.op.eq(c.op),
                         rd.meta.count.eq(c.count), rd.meta.offset.eq(c.offset)]

        m.d.comb += self.busy.eq(q0.valid | q1.valid | (occupancy != 0) | s0.valid | s1.valid
                                 | s2.valid | s2_rtx
                                 | rb.valid
                                 | Cat(e.valid for e in dl).any() | clearing)
        return m
