"""Ingress validator: checks each message in full before it can touch state."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg import wire
from netagg.hdl import layouts
from netagg.hdl.job_table import job_entry
from netagg.hdl.netlist import KEEP
from netagg.params import Params


def descriptor(params: Params) -> data.StructLayout:
    """What the validator tells the slot engine about one message."""
    return data.StructLayout({
        "verdict": layouts.Verdict,   # ACCEPT (passed every check) or the drop reason
        "meta": layouts.message_meta(params),
        "tag": unsigned(layouts.TAG_BITS),
        "slot_abs": unsigned(layouts.bits_for(params.slots)),   # job base + slot
        "workers": unsigned(8),       # the job's W
        "beats": unsigned(layouts.bits_for(params.beats + 1)),  # payload beats written
    })


def payload_beat(params: Params) -> data.StructLayout:
    return data.ArrayLayout(unsigned(32), params.lanes)


class Validator(wiring.Component):
    """Checks every ingress message against wire.md, in the spec's order
    (a message shorter than the header counts as bad_length).

    ``i``: ingress beats (``layouts.ingress_beat``). ``desc``: one descriptor
    per message, pushed when its last beat has arrived. ``data``: the payload
    beats of messages that passed the header, length, job, slot and worker
    checks, at most ceil(count / L) of them; a message whose beat count then
    turns out wrong is reported as bad_length with the number of beats it
    wrote (``desc.beats``), which the consumer discards.

    The job table is sampled as a message's first beat enters (the checks
    are registered with the beat). Throughput: one beat
    per cycle while ``data`` accepts (also for beats that write no payload)
    and, on a last beat, ``desc`` accepts. A beat accepted on ``i`` is
    registered with the flags of the header, length, job, slot and worker
    checks (the entry register: the job table's compares end there), then
    with its verdict, formed from the flags in the spec's order, in one of
    two registered beats, and is acted on two cycles after it was accepted
    at the earliest; up to three wait for ``desc`` and ``data``
    (``i.ready`` is a flip-flop: low while the entry register and both
    registered beats are full; the wide registers' enables are flip-flops).
    ``compact=True`` (the fewest cells, for slow clocks): one registered
    beat, its verdict formed before it, which takes the next one while
    empty or moving on (``i.ready`` combinational).
    """

    def __init__(self, params: Params, *, compact: bool = False):
        self._params = params
        self._compact = compact
        super().__init__({
            "i": In(stream.Signature(layouts.ingress_beat(params.lanes))),
            "desc": Out(stream.Signature(descriptor(params))),
            "data": Out(stream.Signature(payload_beat(params))),
            "job_id": Out(8),
            "job": In(job_entry),
            "job_valid": In(1),
            "slot": Out(16),
            "slot_ok": In(1),
            "worker": Out(16),           # the header's, all 16 bits (BAD_WORKER from 256 on)
            "worker_ok": In(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, K = p.lanes, p.elements
        ibeat = self.i.payload
        hdr = ibeat.header

        # ---- checks on the first beat (header, length and the job table) ----
        dtype_ok = Signal()
        m.d.comb += dtype_ok.eq(0)
        for name in p.dtypes:
            with m.If(hdr.dtype == layouts.DType[name.upper()]):
                m.d.comb += dtype_ok.eq(1)
        op_ok = Signal()
        for name in p.ops:
            with m.If(hdr.op == layouts.Op[name.upper()]):
                m.d.comb += op_ok.eq(1)
        expect_len = Signal(20)
        with m.If(hdr.dtype == layouts.DType.BF16):
            m.d.comb += expect_len.eq(wire.HEADER_BYTES + (hdr.count << 1))
        with m.Else():
            m.d.comb += expect_len.eq(wire.HEADER_BYTES + (hdr.count << 2))

        m.d.comb += [self.job_id.eq(hdr.job), self.slot.eq(hdr.slot),
                     self.worker.eq(hdr.worker)]
        job = self.job
        # The header and length checks, then the job table's: each a flag,
        # combined in the spec's order by ``_verdict`` (in the pipelined form
        # a register stage after the flags).
        hdr_verdict = Signal(layouts.Verdict)
        with m.If(ibeat.length < wire.HEADER_BYTES):
            m.d.comb += hdr_verdict.eq(layouts.Verdict.BAD_LENGTH)
        with m.Elif((hdr.version != wire.VERSION) | (hdr.type != layouts.MsgType.CONTRIB)
                    | (hdr.reserved != 0) | (hdr.status != 0) | ~dtype_ok | ~op_ok):
            m.d.comb += hdr_verdict.eq(layouts.Verdict.BAD_HEADER)
        with m.Elif((hdr.count == 0) | (hdr.count > K) | (ibeat.length != expect_len)):
            m.d.comb += hdr_verdict.eq(layouts.Verdict.BAD_LENGTH)
        with m.Else():
            m.d.comb += hdr_verdict.eq(layouts.Verdict.ACCEPT)
        job_bad = ~self.job_valid | ~job.enable
        # The S and W_max bounds only matter for a job table written with
        # values beyond the build's limits: such a job cannot reach outside
        # the slot RAM or the bitmap.
        slot_bad = ~self.slot_ok         # slot < nslots and below the slot RAM's end
        worker_bad = ~self.worker_ok     # worker < the job's W and < W_max

        def _verdict(first_checks, job_bad, slot_bad, worker_bad):
            v = Signal(layouts.Verdict)
            with m.If(first_checks != layouts.Verdict.ACCEPT):
                m.d.comb += v.eq(first_checks)
            with m.Elif(job_bad):
                m.d.comb += v.eq(layouts.Verdict.BAD_JOB)
            with m.Elif(slot_bad):
                m.d.comb += v.eq(layouts.Verdict.BAD_SLOT)
            with m.Elif(worker_bad):
                m.d.comb += v.eq(layouts.Verdict.BAD_WORKER)
            with m.Else():
                m.d.comb += v.eq(layouts.Verdict.ACCEPT)
            return v

        # The checks travel with the beat through a register stage, so the
        # job table lookup and the comparisons end in a register. Only what
        # an accepted message needs past the checks is kept.
        beat_bits = layouts.bits_for(p.beats + 1)
        checked_l = data.StructLayout({
            "meta": layouts.message_meta(p),
            "tag": unsigned(layouts.TAG_BITS),
            "last": unsigned(1),
            "data": data.ArrayLayout(unsigned(32), L),
            "verdict": layouts.Verdict,
            "expect": unsigned(beat_bits),
            "slot_abs": unsigned(layouts.bits_for(p.slots)),
            "workers": unsigned(8),
            # flags of the fields above, formed as the beat is registered so
            # that the per-message logic starts from flip-flops
            "acc": unsigned(1),       # verdict == ACCEPT
            "exp_nz": unsigned(1),    # expect != 0
            "exp_ne1": unsigned(1),   # expect != 1
        })
        cin = Signal(checked_l)
        cout = Signal(checked_l)
        beat_valid = Signal()
        can = Signal()               # the registered beat moves on this cycle
        # Two registered beats, written in turn while not full and read in
        # turn: the wide registers' enables come from registers (``full``,
        # the write pointer), not from the moves below.
        held_beats = [Signal(checked_l, name=f"checked{k}") for k in range(2)]
        wr_ptr, rd_ptr, full = Signal(), Signal(), Signal()
        # The beat as it enters: its fields and the checks' flags.
        entry_l = data.StructLayout({**checked_l.members, "job_bad": unsigned(1),
                                     "slot_bad": unsigned(1), "worker_bad": unsigned(1)})
        ein = Signal(entry_l)
        m.d.comb += layouts.meta_from_header(ein.meta, hdr)
        m.d.comb += [
            ein.tag.eq(ibeat.tag),
            ein.last.eq(ibeat.last),
            ein.data.eq(ibeat.data),
            ein.verdict.eq(hdr_verdict),
            ein.expect.eq((hdr.count + (L - 1)) // L if L > 1 else hdr.count),
            ein.slot_abs.eq(job.base + hdr.slot),
            ein.workers.eq(job.workers),
            ein.job_bad.eq(job_bad), ein.slot_bad.eq(slot_bad), ein.worker_bad.eq(worker_bad),
        ]
        if self._compact:
            src = ein
        else:
            # An entry register first (``entry``): the job table's compares
            # and the header checks end in it, and the two registered beats
            # below take it with the verdict formed from its flags. It loads
            # whenever it is empty or moves on (its enable and ``i.ready``
            # are functions of two flip-flops).
            src = Signal(entry_l, name="entry")
            src_valid = Signal(name="entry_valid")
            # ``i.ready`` (~entry_valid | ~full) is a flip-flop of its own,
            # registered from the next values: the entry's enable comes
            # straight from it
            ready = Signal(name="ready", init=1, attrs=KEEP)
            m.d.comb += self.i.ready.eq(ready)
            with m.If(ready):
                m.d.sync += [src.eq(ein), src_valid.eq(self.i.valid)]
        m.d.comb += [
            cin.meta.eq(src.meta), cin.tag.eq(src.tag), cin.last.eq(src.last),
            cin.data.eq(src.data), cin.expect.eq(src.expect), cin.slot_abs.eq(src.slot_abs),
            cin.workers.eq(src.workers),
            cin.verdict.eq(_verdict(src.verdict, src.job_bad, src.slot_bad, src.worker_bad)),
            cin.acc.eq(cin.verdict == layouts.Verdict.ACCEPT),
            cin.exp_nz.eq(src.expect != 0), cin.exp_ne1.eq(src.expect != 1),
        ]
        if self._compact:
            m.d.comb += self.i.ready.eq(~beat_valid | can)
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [held_beats[0].eq(cin), full.eq(1)]
            with m.Elif(can):
                m.d.sync += full.eq(0)
            m.d.comb += [cout.eq(held_beats[0]), beat_valid.eq(full)]
        push = (self.i.valid if self._compact else src_valid) & ~full
        # The free register (the one at ``wr_ptr`` while not full) loads the
        # input whether or not it is valid: the enable comes from flip-flops
        # only, not from ``i.valid``; only the level flip-flops count what was
        # pushed.
        if not self._compact:
            # the level as two flip-flops (one held beat or more, two):
            # the moves select their next values, no count and compare
            some = Signal(name="held_some")
            grow, shrink = push & ~can, can & ~push
            # full next cycle only if no beat moves on now (a push needs
            # ~full): the move is the last AND, after a function of
            # flip-flops only, on the paths into the enables below
            full_next = ~can & Mux(push, some, full)
            wr_ptr_next = wr_ptr ^ push
            src_valid_next = Mux(ready, self.i.valid, src_valid)
            m.d.sync += [some.eq(Mux(grow, 1, Mux(shrink, full, some))),
                         full.eq(full_next),
                         ready.eq(~src_valid_next | ~full_next)]
            # each registered beat's enable (~full & wr_ptr == k) a
            # flip-flop of its own, registered from the next values
            for k, reg in enumerate(held_beats):
                load = Signal(name=f"load{k}", init=int(k == 0), attrs=KEEP)
                m.d.sync += load.eq(~full_next & (wr_ptr_next == k))
                with m.If(load):
                    m.d.sync += reg.eq(cin)
            # the payload data read at a kept copy of the read pointer, so the
            # one that selects the checks drives only their few bits
            rd_ptr_data = Signal(name="rd_ptr_data", attrs=KEEP)
            with m.If(can):
                m.d.sync += rd_ptr_data.eq(~rd_ptr_data)
            m.d.comb += [cout.eq(Mux(rd_ptr, held_beats[1], held_beats[0])),
                         cout.data.eq(Mux(rd_ptr_data, held_beats[1].data, held_beats[0].data)),
                         beat_valid.eq(some)]
            with m.If(push):
                m.d.sync += wr_ptr.eq(~wr_ptr)
            with m.If(can):
                m.d.sync += rd_ptr.eq(~rd_ptr)
        beat = cout

        # ---- per-message state, held from the first beat ----
        in_msg = Signal()            # a beat of this message has been seen
        held = Signal(descriptor(self._params))
        remaining = Signal(beat_bits)  # beats still expected after those seen (floor 0)
        held_acc = Signal()            # held.verdict == ACCEPT
        rem_nz, rem_ne1 = Signal(), Signal()   # remaining != 0, != 1

        first = ~in_msg
        cur_verdict = Signal(layouts.Verdict)
        cur_left = Signal(beat_bits)   # beats expected from this one on
        cur_written = Signal(beat_bits)
        with m.If(first):
            m.d.comb += [
                cur_verdict.eq(cout.verdict),
                cur_left.eq(cout.expect),
                cur_written.eq(0),
            ]
        with m.Else():
            m.d.comb += [
                cur_verdict.eq(held.verdict),
                cur_left.eq(remaining),
                cur_written.eq(held.beats),
            ]
        cur_acc = Mux(first, cout.acc, held_acc)
        cur_nz = Mux(first, cout.exp_nz, rem_nz)        # cur_left != 0
        cur_ne1 = Mux(first, cout.exp_ne1, rem_ne1)     # cur_left != 1
        write_beat = cur_acc & cur_nz
        final_verdict = Signal(layouts.Verdict)
        with m.If(cur_acc & cur_ne1):
            m.d.comb += final_verdict.eq(layouts.Verdict.BAD_LENGTH)
        with m.Else():
            m.d.comb += final_verdict.eq(cur_verdict)

        # A beat moves when ``data`` accepts and, for a last beat, ``desc``
        # does: whether it writes a payload beat does not matter, so the
        # move (the enable of the wide registers) comes from flip-flops and
        # one multiplexer (both readies are registered).
        need_data = write_beat
        need_desc = beat.last
        m.d.comb += can.eq(beat_valid & self.data.ready & (~need_desc | self.desc.ready))
        m.d.comb += [
            self.data.payload.eq(beat.data),
            self.data.valid.eq(beat_valid & need_data & (~need_desc | self.desc.ready)),
            self.desc.valid.eq(beat_valid & need_desc & self.data.ready),
            self.desc.payload.verdict.eq(final_verdict),
            self.desc.payload.meta.eq(Mux(first, cout.meta, held.meta)),
            self.desc.payload.tag.eq(Mux(first, beat.tag, held.tag)),
            self.desc.payload.slot_abs.eq(Mux(first, cout.slot_abs, held.slot_abs)),
            self.desc.payload.workers.eq(Mux(first, cout.workers, held.workers)),
            self.desc.payload.beats.eq(cur_written + write_beat),
        ]
        with m.If(beat_valid & can):
            with m.If(beat.last):
                m.d.sync += in_msg.eq(0)
            with m.Else():
                m.d.sync += [
                    in_msg.eq(1),
                    held.verdict.eq(cur_verdict),
                    held_acc.eq(cur_acc),
                    held.beats.eq(cur_written + write_beat),
                    # remaining after this beat: cur_left - 1, floor 0
                    rem_nz.eq(cur_nz & cur_ne1),
                    rem_ne1.eq(cur_left != 2),
                ]
                with m.If(cur_left != 0):
                    m.d.sync += remaining.eq(cur_left - 1)
                with m.Else():
                    m.d.sync += remaining.eq(0)
                with m.If(first):
                    m.d.sync += [
                        held.meta.eq(cout.meta),
                        held.tag.eq(beat.tag),
                        held.slot_abs.eq(cout.slot_abs),
                        held.workers.eq(cout.workers),
                    ]
        m.d.comb += self.busy.eq(in_msg | beat_valid | (src_valid if not self._compact else 0))
        return m

