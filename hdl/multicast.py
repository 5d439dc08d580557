"""Multicast back-end: buffers each RESULT once and replicates it to every
worker of the job (one egress stream and a replicator)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.fifo import BufferedFIFO
from netagg.hdl.fp import FP32ToBF16
from netagg.hdl.netlist import KEEP
from netagg.hdl.ram import DP16KD_DEPTH, NO_RW_CHECK, RAM_FORMS, WideRAM, registered_read
from netagg.hdl.skid import SkidBuffer
from netagg.hdl.slot_layouts import result_beat, result_desc
from netagg.params import Params


def _pending_entry(params: Params) -> data.StructLayout:
    """A RESULT waiting to be (or being) sent, as the slot table described it,
    with its loop bounds precomputed."""
    return data.StructLayout({
        "meta": layouts.message_meta(params),
        "tag": unsigned(layouts.TAG_BITS),
        "multicast": unsigned(1),
        "n": unsigned(layouts.bits_for(params.workers + 1)),
        "lastb": unsigned(layouts.bits_for(params.beats)),   # beats - 1
        "lastw": unsigned(8),        # the last destination: workers - 1 (multicast) or 0
    })


def _stored_entry(buf_bits: int) -> data.StructLayout:
    """A RESULT whose beats are in the buffer: where, and their flags."""
    return data.StructLayout({
        "start": unsigned(buf_bits),
        "nan": unsigned(1),
        "ovf": unsigned(1),
    })


def _out_head(params: Params) -> data.StructLayout:
    """What an egress beat carries besides its data: the RESULT header is
    rebuilt from it at the output (``layouts.result_header``)."""
    return data.StructLayout({
        "meta": layouts.message_meta(params),   # worker = the destination
        "status": unsigned(16),
        "tag": unsigned(layouts.TAG_BITS),
        "last": unsigned(1),
    })


def _out_entry(params: Params) -> data.StructLayout:
    """An egress beat as queued."""
    return data.StructLayout({
        "head": _out_head(params),
        "data": data.ArrayLayout(unsigned(32), params.lanes),
    })


class Multicast(CheckedComponent):
    """Turns completed rounds and retransmissions into RESULT messages.

    ``res_desc`` / ``res_beat`` (from the slot table): a RESULT's descriptor,
    then its beats. The beats are stored once in a buffer of ``depth`` beats
    (block RAM; in mode bf16-accumulate=fp32 they are rounded to bf16 on the
    way in, between two register stages: a beat is in the buffer three cycles
    after it arrives on ``res_beat``, two in any other mode, one in the
    ``compact`` form) and sent from there to each destination in
    turn: workers 0..W-1 for a completed round, the requesting worker for a
    retransmission. The status field is the round's contributor count with the
    NaN and overflow flags of every beat (and of the final rounding).

    ``o``: the egress stream (``layouts.egress_beat``), with full
    backpressure: nothing is lost while ``o.ready`` is low, the slot table
    waits for buffer space instead (``free`` returns each RESULT's beats once
    its last copy has left). Throughput: one beat per cycle.

    Unless ``compact``: ``res_desc`` passes a register slice
    (:class:`~netagg.hdl.skid.SkidBuffer`: ``ready`` is a flip-flop), and
    the buffer's read has a register after the RAM's own: a block RAM read
    without its output register is slow (ECP5 DP16KD: 5.83 ns clock to
    output), so it ends in the flip-flops beside it, and the egress queue
    is written a cycle later. The buffer is a
    :class:`~netagg.hdl.ram.WideRAM` in ``ram_form``: ``"memory"``
    (default, portable: that register in the fabric) or ``"ecp5"``
    (``DP16KD`` blocks, that register their own output register).
    ``compact``: neither, and no register stage on the way in (the fewest
    cells). In every form the replicator's pop of its two queues (the
    head's last beat to its last destination issues) is a flip-flop,
    registered from the next values of the flip-flops it is the AND of.
    """

    @staticmethod
    def check(params: Params, depth: int, *, compact: bool = False,
              ram_form: str = "memory") -> None:
        if not isinstance(depth, int) or depth < params.beats or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two >= K/L ({params.beats}), not {depth}")
        if ram_form not in RAM_FORMS or (compact and ram_form != "memory"):
            raise ValueError(f"ram_form must be one of {RAM_FORMS} ('memory' when compact), "
                             f"not {ram_form!r}")
        if ram_form == "ecp5" and depth > DP16KD_DEPTH:
            raise ValueError(f"ram_form 'ecp5' holds at most {DP16KD_DEPTH} beats, not {depth}")

    def __init__(self, params: Params, depth: int, *, compact: bool = False,
                 ram_form: str = "memory"):
        self._params = params
        self._depth = depth
        self._compact = compact
        self._ram_form = ram_form
        super().__init__({
            "res_desc": In(stream.Signature(result_desc(params))),
            "res_beat": In(stream.Signature(result_beat(params), always_ready=True)),
            "free": Out(stream.Signature(unsigned(16), always_ready=True)),
            "o": Out(stream.Signature(layouts.egress_beat(params.lanes))),
            "busy": Out(1),
        })

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, depth = p.lanes, self._depth
        abits = layouts.bits_for(depth)
        pend_l = _pending_entry(p)
        stored_l = _stored_entry(abits)
        beat_l = data.ArrayLayout(unsigned(32), L)
        out_l = _out_entry(p)

        # RESULTs in order: described (``pending``, from the descriptor until
        # the last copy has left) and stored (``stored``, once the last beat
        # is in the buffer).
        # (LUT RAM unless compact: the replicator compares its head as it
        # leaves the queue, which a block RAM's output is too slow for)
        m.submodules.pending = pending = BufferedFIFO(width=pend_l.size, depth=depth,
                                                      distributed=not self._compact)
        m.submodules.stored = stored_q = BufferedFIFO(width=stored_l.size, depth=depth)
        # (16 entries cost the distributed RAM of 8: it is 16 deep)
        m.submodules.out_q = out_q = BufferedFIFO(width=out_l.size, depth=16)
        # Never read where it is written in the same cycle (credit): no bypass
        # logic. Unless compact, the read's second register is the RAM's own
        # (``out_reg``).
        slow = not self._compact
        if slow:
            m.submodules.buf = buf = WideRAM(beat_l.size, depth, form=self._ram_form,
                                             out_reg=True)
            buf_wr = buf.write
            m.d.comb += buf.r_en.eq(1)
        else:
            m.submodules.buf = buf = Memory(shape=beat_l, depth=depth, init=[],
                                            attrs=NO_RW_CHECK)
            buf_wr = buf.write_port()

        # (not compact) a register slice first: the slot table's decision
        # drives two flip-flops here, not the queue's write
        if self._compact:
            desc_in, desc_held = self.res_desc, 0
        else:
            m.submodules.desc_slice = desc_slice = SkidBuffer(result_desc(p))
            wiring.connect(m, wiring.flipped(self.res_desc), desc_slice.i)
            desc_in, desc_held = desc_slice.o, desc_slice.o.valid | ~desc_slice.i.ready
        rd = desc_in.payload
        pin = data.View(pend_l, pending.w_data)
        m.d.comb += [
            pin.meta.eq(rd.meta), pin.tag.eq(rd.tag), pin.multicast.eq(rd.multicast),
            pin.n.eq(rd.n), pin.lastb.eq(rd.beats - 1),
            pin.lastw.eq(Mux(rd.multicast, rd.workers - 1, 0)),
            pending.w_en.eq(desc_in.valid),
            desc_in.ready.eq(pending.w_rdy),
        ]

        # ---- beats into the buffer ----
        # A register stage first: the beat as stored (rounded to bf16 in
        # convert mode) with its flags, so that the rounding's carry chain
        # ends in a register; the buffer and the stored queue are written
        # from it a cycle later.
        convert = (p.bf16_accumulate == "fp32" and "bf16" in p.dtypes)
        # In convert mode (not compact) the beat is registered once as it
        # comes (``rb0``, the bf16 flag one kept copy per lane), so the
        # rounding starts from flip-flops beside it, not from the lane
        # loop's output register that fans out to every lane's rounding.
        if convert and not self._compact:
            rb_in = Signal.like(self.res_beat.payload, name="rb0")
            rb0_valid = Signal(name="rb0_valid")
            rb0_bf16 = [Signal(name=f"rb0_bf16_{i}", attrs=KEEP) for i in range(L)]
            m.d.sync += [rb_in.eq(self.res_beat.payload), rb0_valid.eq(self.res_beat.valid)]
            m.d.sync += [b.eq(self.res_beat.payload.bf16) for b in rb0_bf16]
        else:
            rb_in = self.res_beat.payload
            rb0_valid = self.res_beat.valid
            rb0_bf16 = [rb_in.bf16] * L
        conv = Signal(beat_l)
        conv_ovfs = Signal(L)
        m.d.comb += conv.eq(rb_in.data)
        if convert:
            for i in range(L):
                cv = FP32ToBF16()
                m.submodules[f"narrow{i}"] = cv
                m.d.comb += cv.i.eq(rb_in.data[i])
                with m.If(rb0_bf16[i]):
                    m.d.comb += [conv[i].eq(cv.o), conv_ovfs[i].eq(cv.ovf & rb_in.mask[i])]
        rb_valid = Signal()
        rb = Signal(data.StructLayout({"last": unsigned(1), "nan": unsigned(1),
                                       "ovf": unsigned(1)}), name="rb")
        beat_in = Signal(beat_l)
        beat_ovfs = Signal(L)
        # compact=True (the fewest cells): no register stage
        dom = m.d.comb if self._compact else m.d.sync
        dom += [rb_valid.eq(rb0_valid), rb.last.eq(rb_in.last),
                rb.nan.eq(rb_in.nan), rb.ovf.eq(rb_in.ovf),
                beat_in.eq(conv), beat_ovfs.eq(conv_ovfs)]
        conv_ovf = beat_ovfs.any()

        wp = Signal(abits)
        start = Signal(abits)
        in_msg = Signal()
        acc_nan = Signal()
        acc_ovf = Signal()
        cur_start = Signal(abits)
        m.d.comb += cur_start.eq(start)
        with m.If(~in_msg):
            m.d.comb += cur_start.eq(wp)
        nan_now = acc_nan & in_msg | rb.nan
        ovf_now = acc_ovf & in_msg | rb.ovf | conv_ovf
        sin = data.View(stored_l, stored_q.w_data)
        m.d.comb += [buf_wr.addr.eq(wp), buf_wr.data.eq(beat_in),
                     buf_wr.en.eq(rb_valid),
                     sin.start.eq(cur_start), sin.nan.eq(nan_now), sin.ovf.eq(ovf_now)]
        with m.If(rb_valid):
            m.d.sync += [wp.eq(wp + 1), start.eq(cur_start), acc_nan.eq(nan_now),
                         acc_ovf.eq(ovf_now), in_msg.eq(~rb.last)]
            with m.If(rb.last):
                m.d.comb += stored_q.w_en.eq(1)

        # ---- replicate from the buffer ----
        # The heads come straight from the queues' RAMs: the replicator works
        # from copies in registers, which hold the heads when ``heads_ok``
        # (they were there a cycle ago and nothing was popped since; a
        # RESULT's descriptor precedes its beats, so pending has its head).
        cur = Signal(pend_l)
        cur_st = Signal(stored_l)
        heads_ok = Signal()
        # The pop (the head's last beat to its last destination issues) is
        # a flip-flop of its own, registered from the next values of the
        # four flip-flops it is the AND of (below), so that the queues'
        # read enables, and their level and room logic after them, start
        # at one flip-flop.
        pop = Signal(name="pop", attrs=KEEP)
        m.d.comb += [pending.r_en.eq(pop), stored_q.r_en.eq(pop)]
        heads_ok_next = stored_q.r_rdy & ~pop
        m.d.sync += [cur.eq(pending.r_data), cur_st.eq(stored_q.r_data),
                     heads_ok.eq(heads_ok_next)]
        dest = Signal(8)
        beat = Signal(layouts.bits_for(p.beats))
        inflight = Signal()
        # Registered, from the level a cycle ago: room for the beats in
        # flight (one or two, the read stages) and one more.
        space = Signal()
        space_next = out_q.level < out_q.depth - (4 if slow else 3)
        m.d.sync += space.eq(space_next)
        issue = heads_ok & space
        # "the last beat" and "the last destination" are registered: the
        # compares of the next beat and destination with the head as it
        # comes from the queue's RAM (``cur`` a cycle later; while the
        # head changes, ``heads_ok`` is low and they are not used)
        last_beat, last_dest = Signal(name="last_beat"), Signal(name="last_dest")
        beat_next, dest_next = Signal.like(beat), Signal.like(dest)
        head_next = data.View(pend_l, pending.r_data)
        last_beat_next = beat_next == head_next.lastb
        last_dest_next = dest_next == head_next.lastw
        m.d.comb += [beat_next.eq(beat), dest_next.eq(dest)]
        m.d.sync += [last_beat.eq(last_beat_next), last_dest.eq(last_dest_next),
                     pop.eq(heads_ok_next & space_next & last_beat_next & last_dest_next)]
        if slow:
            # the read address registered from the next head and beat (it
            # equals ``cur_st.start + beat``): the blocks' address inputs
            # come from flip-flops, not through the adder
            r_addr = Signal(abits, name="buf_r_addr")
            m.d.sync += r_addr.eq(data.View(stored_l, stored_q.r_data).start + beat_next)
            m.d.comb += buf.r_addr.eq(r_addr)
        else:
            buf_data = registered_read(m, buf, cur_st.start + beat, name="buf_data")
        m.d.sync += [inflight.eq(issue), self.free.valid.eq(0)]   # free: registered
        with m.If(issue):
            with m.If(last_beat):
                m.d.comb += beat_next.eq(0)
                with m.If(last_dest):
                    m.d.comb += dest_next.eq(0)
                    m.d.sync += [self.free.valid.eq(1), self.free.payload.eq(cur.lastb + 1)]
                with m.Else():
                    m.d.comb += dest_next.eq(dest + 1)
            with m.Else():
                m.d.comb += beat_next.eq(beat + 1)
        m.d.sync += [beat.eq(beat_next), dest.eq(dest_next)]

        # The RESULT of the beat being read (registered alongside the RAM read).
        ent = Signal(_out_head(p))
        src = cur.meta
        m.d.sync += [
            ent.meta.eq(src),
            ent.meta.worker.eq(Mux(cur.multicast, dest, src.worker)),
            ent.status.eq(cur.n | (cur_st.nan << 8) | (cur_st.ovf << 9)),
            ent.tag.eq(cur.tag),
            ent.last.eq(last_beat),
        ]
        if slow:
            # the read's second register (the RAM's); the head with it
            buf_q = buf.r_data
            ent_q = Signal(_out_head(p), name="ent_q")
            inflight_q = Signal(name="inflight_q")
            m.d.sync += [ent_q.eq(ent), inflight_q.eq(inflight)]
        else:
            buf_q, ent_q, inflight_q = buf_data, ent, inflight
        eg = data.View(out_l, out_q.w_data)
        m.d.comb += [
            eg.head.eq(ent_q), eg.data.eq(buf_q),
            out_q.w_en.eq(inflight_q),
        ]
        qout = data.View(out_l, out_q.r_data)
        head_out = qout.head
        m.d.comb += layouts.result_header(self.o.payload.header, head_out.meta,
                                          worker=head_out.meta.worker, status=head_out.status)
        m.d.comb += [
            self.o.payload.tag.eq(head_out.tag),
            self.o.payload.last.eq(head_out.last),
            self.o.payload.data.eq(qout.data),
            self.o.valid.eq(out_q.r_rdy),
            out_q.r_en.eq(self.o.ready),
        ]
        staged = rb0_valid if convert and not self._compact else 0
        m.d.comb += self.busy.eq(rb_valid | staged | pending.r_rdy | stored_q.r_rdy
                                 | out_q.r_rdy | inflight
                                 | inflight_q | desc_held
                                 | self.free.valid
                                 | (pending.level != 0) | (stored_q.level != 0)
                                 | (out_q.level != 0) | in_msg)
        return m
