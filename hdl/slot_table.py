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
from netagg.hdl.validator import descriptor, payload_beat
from netagg.params import Params


def copy_state(params: Params) -> data.StructLayout:
    """One copy of a slot: contributor bitmap, count, done flag, round metadata."""
    return data.StructLayout({
        "bits": unsigned(params.workers),
        "n": unsigned(8),
        "done": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "count": unsigned(16),
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
        "header": layouts.Header,     # round metadata; worker = unicast destination
        "tag": unsigned(layouts.TAG_BITS),
        "multicast": unsigned(1),     # to workers 0..workers-1, else to header.worker
        "workers": unsigned(8),
        "n": unsigned(8),
        "beats": unsigned(16),
    })


def result_beat(params: Params) -> data.StructLayout:
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(32), params.lanes),
        "mask": unsigned(params.lanes),   # lanes holding elements (< count)
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

    ``desc`` / ``data``: the validator's output. ``verdict``: one per message,
    in message order. ``res_desc`` / ``res_beat``: RESULTs to send (the
    multicast back-end); a RESULT's descriptor precedes its beats by at least
    two cycles. ``res_free``: the back-end returns buffer space (beats) as it
    finishes RESULTs; a round that completes, or a retransmission, waits
    until the back-end has room for its beats (credit ``result_beats``).

    Throughput: one payload beat per cycle for messages of two or more beats
    when no hazard stalls; a one-beat message, a dropped message and a
    retransmission each take one cycle more. Read-after-write hazards: a beat
    waits while an earlier beat of the same copy and index is in the
    read-add-write loop (``loop_latency`` cycles); such cycles pulse
    ``stall``. Messages are processed in arrival order.
    """

    def __init__(self, params: Params, *, result_beats: int, fp_stages=None):
        if result_beats < params.beats:
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
        return self._lane_latency + 1

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, S = p.lanes, p.beats, p.slots
        D = self._lane_latency
        V = layouts.Verdict

        # ---------------- memories ----------------
        m.submodules.state_mem = state_mem = Memory(shape=slot_state(p), depth=S, init=[])
        st_rd = state_mem.read_port()
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
        m.d.sync += credit.eq(credit - credit_take + credit_back)

        # ---------------- the message at the head: state lookup ----------------
        N = self.desc.payload
        hdr = N.header
        m.d.comb += [st_rd.addr.eq(N.slot_abs), st_rd.en.eq(1)]
        fresh = Signal()   # st_rd.data is the state of N's slot (N was at the head last cycle)
        m.d.sync += fresh.eq(self.desc.valid & ~self.desc.ready & ~clearing)

        # ---------------- the current message C ----------------
        c_active = Signal()
        c_mode = Signal(2)
        c_copy = Signal(range(2 * S))
        c_first = Signal()
        c_result = Signal()          # its beats go to the RESULT path
        c_dtype = Signal(layouts.DType)
        c_op = Signal(layouts.Op)
        c_beat = Signal(16)          # next beat to issue
        c_nbeats = Signal(16)        # beats to issue (LANES, RETRANSMIT)
        c_rem = Signal(17)           # elements from the next beat on
        c_disc = Signal(16)          # payload beats still to discard

        # Pipeline registers: s1 (accumulators being read), then D lane stages.
        def meta_layout():
            return data.StructLayout({
                "valid": unsigned(1), "rtx": unsigned(1), "addr": acc_rd.addr.shape(),
                "mask": unsigned(L), "last": unsigned(1), "first": unsigned(1),
                "result": unsigned(1), "nan": unsigned(1), "ovf": unsigned(1),
            })
        s1 = Signal(meta_layout())
        s1_b = Signal(payload_beat(p))
        s1_dtype = Signal(layouts.DType)
        s1_op = Signal(layouts.Op)
        dl = [Signal(meta_layout(), name=f"d{k}") for k in range(D)]

        issue_addr = Signal(acc_rd.addr.shape())
        m.d.comb += issue_addr.eq(c_copy * B + c_beat)
        pending = [s1] + dl[:D - 1]
        hazard = Signal()
        m.d.comb += hazard.eq(0)
        for e in pending:
            with m.If(e.valid & ~e.rtx & (e.addr == issue_addr)):
                m.d.comb += hazard.eq(1)
        lanes_busy = Signal()
        m.d.comb += lanes_busy.eq(0)
        for e in [s1] + dl:
            with m.If(e.valid & ~e.rtx):
                m.d.comb += lanes_busy.eq(1)

        lane_mode = c_active & (c_mode == _Mode.LANES) & (c_beat < c_nbeats)
        rtx_mode = c_active & (c_mode == _Mode.RETRANSMIT) & (c_beat < c_nbeats)
        issue_lanes = Signal()
        issue_rtx = Signal()
        m.d.comb += [
            issue_lanes.eq(lane_mode & self.data.valid & ~hazard),
            issue_rtx.eq(rtx_mode & ~lanes_busy),
            self.stall.eq(lane_mode & self.data.valid & hazard),
        ]
        discard = c_active & (c_mode != _Mode.LANES) & (c_disc != 0)
        m.d.comb += self.data.ready.eq(issue_lanes | discard)

        mask = Signal(L)
        for i in range(L):
            m.d.comb += mask[i].eq(c_rem > i)
        m.d.comb += [acc_rd.addr.eq(issue_addr), acc_rd.en.eq(1)]
        m.d.sync += [
            s1.valid.eq(issue_lanes | issue_rtx),
            s1.rtx.eq(issue_rtx),
            s1.addr.eq(issue_addr),
            s1.mask.eq(mask),
            s1.last.eq(c_beat == c_nbeats - 1),
            s1.first.eq(c_first),
            s1.result.eq(c_result),
            s1_b.eq(self.data.payload),
            s1_dtype.eq(c_dtype),
            s1_op.eq(c_op),
        ]
        with m.If(issue_lanes | issue_rtx):
            m.d.sync += [c_beat.eq(c_beat + 1), c_rem.eq(Mux(c_rem > L, c_rem - L, 0))]
        with m.If(discard & self.data.valid):
            m.d.sync += c_disc.eq(c_disc - 1)
        last_issue = (issue_lanes | issue_rtx) & (c_beat == c_nbeats - 1)
        issue_left = (c_beat < c_nbeats) & ~last_issue
        disc_left = (c_disc != 0) & ~((c_disc == 1) & discard & self.data.valid)
        c_finishing = c_active & ~issue_left & ~disc_left
        with m.If(c_finishing):
            m.d.sync += c_active.eq(0)
        # A LANES message hands over to the next one in the cycle of its last beat.
        c_free = ~c_active | (c_finishing & (c_mode == _Mode.LANES))

        # Lane inputs at s1; the meta delay line follows the lanes.
        ar = acc_rd.data
        for i, lane in enumerate(lanes):
            m.d.comb += [
                lane.i.valid.eq(s1.valid & ~s1.rtx),
                lane.i.payload.a.eq(ar.data[i]),
                lane.i.payload.b.eq(s1_b[i]),
                lane.i.payload.dtype.eq(s1_dtype),
                lane.i.payload.op.eq(s1_op),
                lane.i.payload.first.eq(s1.first),
            ]
        if D:
            m.d.sync += [dl[0].eq(s1), dl[0].nan.eq(ar.nan), dl[0].ovf.eq(ar.ovf)]
            with m.If(s1.rtx):
                m.d.sync += dl[0].valid.eq(0)
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

        # RESULT beats: from the lanes (a completing round) or the RAM (retransmit).
        rb = self.res_beat
        m.d.sync += rb.valid.eq(0)
        with m.If(out.valid & out.result):
            m.d.sync += [rb.valid.eq(1), rb.payload.mask.eq(out.mask),
                         rb.payload.nan.eq(new_nan), rb.payload.ovf.eq(new_ovf),
                         rb.payload.last.eq(out.last)]
            for i, lane in enumerate(lanes):
                m.d.sync += rb.payload.data[i].eq(lane.o.payload.r)
        with m.Elif(s1.valid & s1.rtx):
            m.d.sync += [rb.valid.eq(1), rb.payload.mask.eq(s1.mask),
                         rb.payload.nan.eq(ar.nan), rb.payload.ovf.eq(ar.ovf),
                         rb.payload.last.eq(s1.last), rb.payload.data.eq(ar.data)]

        # ---------------- the decision for N ----------------
        st = st_rd.data
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
        pkt_beats = Signal(16)
        c_beats = Signal(16)
        if L > 1:
            m.d.comb += [pkt_beats.eq((hdr.count + (L - 1)) >> (L - 1).bit_length()
                                      if L & (L - 1) == 0 else (hdr.count + L - 1) // L),
                         c_beats.eq((c.count + (L - 1)) >> (L - 1).bit_length()
                                    if L & (L - 1) == 0 else (c.count + L - 1) // L)]
        else:
            m.d.comb += [pkt_beats.eq(hdr.count), c_beats.eq(c.count)]

        verdict = Signal(V)
        mode = Signal(2)
        needs_result = Signal()
        res_beats = Signal(16)
        with m.If(N.verdict != V.ACCEPT):
            m.d.comb += [verdict.eq(N.verdict), mode.eq(_Mode.DISCARD)]
        with m.Elif(is_new & open_copy & meta_diff):
            m.d.comb += [verdict.eq(V.MISMATCH), mode.eq(_Mode.DISCARD)]
        with m.Elif(is_new):
            m.d.comb += [verdict.eq(V.ACCEPT), mode.eq(_Mode.LANES),
                         needs_result.eq(complete), res_beats.eq(pkt_beats)]
        with m.Elif(c.done):
            m.d.comb += [verdict.eq(V.RETRANSMIT), mode.eq(_Mode.RETRANSMIT),
                         needs_result.eq(1), res_beats.eq(c_beats)]
        with m.Else():
            m.d.comb += [verdict.eq(V.DUPLICATE), mode.eq(_Mode.DISCARD)]

        needs_state = N.verdict == V.ACCEPT
        decide = Signal()
        m.d.comb += decide.eq(
            self.desc.valid & ~clearing & c_free & (fresh | ~needs_state)
            & (~needs_result | (credit >= res_beats)) & self.res_desc.ready)
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
        with m.If(decide & (verdict == V.ACCEPT)):
            m.d.comb += [st_wr.addr.eq(N.slot_abs), st_wr.data.eq(new_state), st_wr.en.eq(1)]

        with m.If(decide):
            m.d.sync += [
                c_active.eq((mode != _Mode.DISCARD) | (N.beats != 0)),
                c_mode.eq(mode),
                c_copy.eq(Cat(ver, N.slot_abs)),
                c_first.eq(fresh_round),
                c_result.eq(needs_result),
                c_dtype.eq(hdr.dtype),
                c_op.eq(hdr.op),
                c_beat.eq(0),
                c_nbeats.eq(Mux(mode == _Mode.DISCARD, 0,
                                Mux(mode == _Mode.RETRANSMIT, c_beats, pkt_beats))),
                c_rem.eq(Mux(mode == _Mode.RETRANSMIT, c.count, hdr.count)),
                c_disc.eq(Mux(mode == _Mode.LANES, 0, N.beats)),
            ]
            with m.If(needs_result):
                m.d.comb += credit_take.eq(res_beats)

        # Verdict and the RESULT descriptor.
        m.d.sync += [self.verdict.valid.eq(decide), self.verdict.payload.code.eq(verdict),
                     self.verdict.payload.tag.eq(N.tag),
                     self.completed.eq(decide & (verdict == V.ACCEPT) & complete)]
        rd = self.res_desc.payload
        m.d.comb += [
            self.res_desc.valid.eq(decide & needs_result),
            rd.header.eq(hdr),
            rd.tag.eq(N.tag),
            rd.multicast.eq(verdict == V.ACCEPT),
            rd.workers.eq(N.workers),
            rd.n.eq(Mux(verdict == V.ACCEPT, n_new, c.n)),
            rd.beats.eq(res_beats),
        ]
        with m.If(verdict == V.RETRANSMIT):
            m.d.comb += [rd.header.dtype.eq(c.dtype), rd.header.op.eq(c.op),
                         rd.header.count.eq(c.count), rd.header.offset.eq(c.offset)]

        m.d.comb += self.busy.eq(c_active | s1.valid | rb.valid
                                 | Cat(e.valid for e in dl).any() | clearing)
        return m
