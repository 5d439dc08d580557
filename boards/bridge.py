"""The UART bridge: host frames (SLIP, ``netagg.host.uart``) in and out
of a netagg core (docs/boards.md).

:class:`CoreBridge` holds the core and speaks the frame protocol on byte
streams; :class:`UARTBridge` adds the UART pins. Contract:

- MSG frames are presented to the core as docs/core.md says (the message's
  true ``length``, max(1, ceil(E / L)) beats, lanes past E zero), one at a
  time, in arrival order, with the host's tag; every verdict is sent back
  as a VERDICT frame, every RESULT as a RESULT frame (header and its
  ``count`` elements).
- CTRL frames access the core's control port (or the bridge's counters at
  0xC000 + i, read only) and are answered with the register's value after
  the access.
- SYNC is answered once every frame before it has been handled, the core is
  idle and every VERDICT and RESULT before it has been sent; frames after a
  SYNC wait until it is answered (a barrier).
- Malformed frames (unknown type, wrong size) are counted (``bad_frame``)
  and otherwise ignored.
- An optional job table is written into the core after reset, before any
  frame is handled.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg import regmap
from netagg import uartlink as hu
from netagg.boards.uart import UARTRx, UARTTx, check_divisor
from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.core import NetaggCore
from netagg.hdl.fifo import BufferedFIFO
from netagg.params import Params

FrameByte = data.StructLayout({"data": 8, "end": 1})
"""A decoded SLIP byte; ``end`` beats carry no data and close a frame."""
TxByte = data.StructLayout({"data": 8, "last": 1})
"""A byte of a frame to send; ``last`` marks the frame's final byte."""

_SHORT_BYTES = 7       # the longest short frame: CTRLREP type + addr + data
_RESULT_HEAD = 19      # a RESULT frame's fixed part: type + tag + header


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class SlipDecoder(wiring.Component):
    """SLIP bytes in, frame bytes out (an ``end`` beat after each non-empty
    frame). Combinational, one byte per cycle."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)),
                          "o": Out(stream.Signature(FrameByte))})

    def elaborate(self, platform):
        m = Module()
        esc = Signal()
        inside = Signal()
        b = self.i.payload
        m.d.comb += self.i.ready.eq(1)
        with m.If(b == hu.END):
            with m.If(inside):
                m.d.comb += [self.o.valid.eq(self.i.valid), self.o.payload.end.eq(1),
                             self.i.ready.eq(self.o.ready)]
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [inside.eq(0), esc.eq(0)]
        with m.Elif(b == hu.ESC):
            with m.If(self.i.valid):
                m.d.sync += esc.eq(1)
        with m.Else():
            out = Mux(esc & (b == hu.ESC_END), hu.END, Mux(esc & (b == hu.ESC_ESC), hu.ESC, b))
            m.d.comb += [self.o.valid.eq(self.i.valid), self.o.payload.data.eq(out),
                         self.i.ready.eq(self.o.ready)]
            with m.If(self.i.valid & self.o.ready):
                m.d.sync += [inside.eq(1), esc.eq(0)]
        return m


class SlipEncoder(wiring.Component):
    """Frame bytes in, SLIP bytes out: END, the escaped bytes, END."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(TxByte)),
                          "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        d = self.i.payload.data
        special = (d == hu.END) | (d == hu.ESC)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.o.valid.eq(self.i.valid), self.o.payload.eq(hu.END)]
                with m.If(self.i.valid & self.o.ready):
                    m.next = "BODY"
            with m.State("BODY"):
                m.d.comb += self.o.valid.eq(self.i.valid)
                with m.If(special):
                    m.d.comb += self.o.payload.eq(hu.ESC)
                    with m.If(self.i.valid & self.o.ready):
                        m.next = "ESCAPED"
                with m.Else():
                    m.d.comb += [self.o.payload.eq(d), self.i.ready.eq(self.o.ready)]
                    with m.If(self.i.valid & self.o.ready & self.i.payload.last):
                        m.next = "TAIL"
            with m.State("ESCAPED"):
                m.d.comb += [self.o.valid.eq(1),
                             self.o.payload.eq(Mux(d == hu.END, hu.ESC_END, hu.ESC_ESC)),
                             self.i.ready.eq(self.o.ready)]
                with m.If(self.o.ready):
                    m.next = "BODY"
                    with m.If(self.i.payload.last):
                        m.next = "TAIL"
            with m.State("TAIL"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(hu.END)]
                with m.If(self.o.ready):
                    m.next = "IDLE"
        return m


class CoreBridge(CheckedComponent):
    """A netagg core behind the bridge's frame protocol (module docstring).

    ``rx``: SLIP bytes from the host; ``tx``: SLIP bytes to the host.
    ``rx_overrun`` / ``rx_frame_error``: pulses from the UART receiver,
    counted. ``busy``: the core is not idle; ``error``: sticky, a bridge
    counter has counted. ``ready``: the job table is loaded.
    """

    @staticmethod
    def check(params: Params, **kwargs) -> None:
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {type(params).__name__}")

    def __init__(self, params: Params, *, fp_stages=None, jobs=None):
        if jobs is not None and jobs.params != params:
            from netagg.jobs import JobTable
            jobs = JobTable(list(jobs), params)
        self._params = params
        self._fp_stages = fp_stages
        self._jobs = jobs
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "rx_overrun": In(1),
            "rx_frame_error": In(1),
            "busy": Out(1),
            "error": Out(1),
            "ready": Out(1),
        })

    @property
    def params(self) -> Params:
        return self._params

    @property
    def max_frame(self) -> int:
        """Bytes of the longest MSG frame the core can accept (unescaped)."""
        return 3 + 16 + 4 * self._params.elements

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, K, B = p.lanes, p.elements, p.beats

        m.submodules.core = core = NetaggCore(p, fp_stages=self._fp_stages)
        m.submodules.dec = dec = SlipDecoder()
        m.submodules.enc = enc = SlipEncoder()
        wiring.connect(m, wiring.flipped(self.rx), dec.i)
        wiring.connect(m, enc.o, wiring.flipped(self.tx))

        # Bridge counters.
        counters = [Signal(16, name=f"bc_{n}") for n in regmap.BRIDGE_COUNTERS]
        bad_frame, verdict_overflow = Signal(), Signal()
        for sig, pulse in zip(counters, (bad_frame, self.rx_overrun, self.rx_frame_error,
                                         verdict_overflow), strict=True):
            with m.If(pulse & (sig != 0xFFFF)):
                m.d.sync += sig.eq(sig + 1)
            with m.If(pulse):
                m.d.sync += self.error.eq(1)

        # ---- receive: frames to the core --------------------------------
        mem = Memory(shape=32 * L, depth=B, init=[])
        m.submodules.buf = mem
        wp = mem.write_port(granularity=32)
        rp = mem.read_port()

        idx = Signal(17)                  # bytes of the current frame so far (saturating)
        ftype = Signal(8)
        tag = Signal(16)
        hdr = Signal(128)
        hview = data.View(layouts.Header, hdr)
        bf16 = Signal()
        m.d.comb += bf16.eq(hview.dtype == layouts.DType.BF16)
        elem = Signal(32)
        ebyte = Signal(2)
        lane = Signal(range(L))
        beat = Signal(16)                 # full beats so far
        nelem = Signal(17)                # whole elements so far
        cbuf = Signal(56)                 # CTRL body: flags, addr, data
        mlen = Signal(16)
        pb = Signal(16)                   # beat being presented
        nbeats_m1 = Signal(16)            # beats to present - 1

        ctrl_pending = Signal()
        ctrl_addr = Signal(16)
        ctrl_reply = Signal(32)
        sync_pending = Signal()

        # The control port is driven from registers (one cycle later than
        # requested here): defined from the first cycle, also in 4-state
        # simulators.
        c_addr, c_wdata, c_we = Signal(16), Signal(32), Signal()
        m.d.sync += [core.ctrl_addr.eq(c_addr), core.ctrl_wdata.eq(c_wdata),
                     core.ctrl_we.eq(c_we)]

        b = dec.o.payload.data
        byte_ok = dec.o.valid & dec.o.ready & ~dec.o.payload.end

        # Job table load after reset.
        writes = regmap.job_writes(self._jobs) if self._jobs is not None else []
        init_i = Signal(range(len(writes) + 1))
        init_done = Signal()
        m.d.comb += self.ready.eq(init_done)
        with m.If(~init_done):
            with m.Switch(init_i):
                for n, (addr, value) in enumerate(writes):
                    with m.Case(n):
                        m.d.comb += [c_addr.eq(addr), c_wdata.eq(value), c_we.eq(1)]
                with m.Default():
                    m.d.sync += init_done.eq(1)
            m.d.sync += init_i.eq(init_i + 1)

        def clamp(v):
            return Mux(v >= B - 1, B - 1, v)

        with m.FSM(name="rx_fsm") as rx_fsm:
            with m.State("INIT"):
                with m.If(init_done):
                    m.next = "RECV"
            with m.State("RECV"):
                # A SYNC is a barrier: nothing after it is handled before its reply.
                m.d.comb += dec.o.ready.eq(~sync_pending)
                with m.If(byte_ok):
                    with m.If(idx != 0x1FFFF):
                        m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == 0):
                        m.d.sync += [ftype.eq(b), hdr.eq(0), ebyte.eq(0), lane.eq(0),
                                     beat.eq(0), nelem.eq(0)]
                    m.d.sync += cbuf.eq(Cat(b, cbuf[:48]))
                    with m.If((idx >= 1) & (idx < 3)):
                        m.d.sync += tag.eq(Cat(b, tag[:8]))
                    with m.If((idx >= 3) & (idx < 19)):     # big-endian: shifted in
                        m.d.sync += hdr.eq(Cat(b, hdr[:120]))
                    with m.If(idx >= 19):
                        new = Mux(ebyte == 0, b, Cat(b, elem[:24]))
                        m.d.sync += elem.eq(new)
                        done = Mux(bf16, ebyte == 1, ebyte == 3)
                        with m.If(done):
                            m.d.sync += ebyte.eq(0)
                            with m.If(nelem != 0x1FFFF):
                                m.d.sync += nelem.eq(nelem + 1)
                            with m.If(nelem < K):
                                m.d.comb += [wp.addr.eq(beat),
                                             wp.data.eq(Mux(lane == 0, new, Cat(*[new] * L))),
                                             wp.en.eq(Mux(lane == 0, (1 << L) - 1,
                                                          Const(1, L) << lane))]
                            with m.If(lane == L - 1):
                                m.d.sync += [lane.eq(0), beat.eq(beat + 1)]
                            with m.Else():
                                m.d.sync += lane.eq(lane + 1)
                        with m.Else():
                            m.d.sync += ebyte.eq(ebyte + 1)
                with m.If(dec.o.valid & dec.o.payload.end & ~sync_pending):
                    is_msg = (ftype == hu.MSG) & (idx >= 3)
                    is_ctrl = (ftype == hu.CTRL) & (idx == 8)
                    is_sync = (ftype == hu.SYNC) & (idx == 1)
                    with m.If(is_msg):
                        whole = beat + (lane != 0)
                        m.d.sync += [mlen.eq(Mux(idx - 3 > 0xFFFF, 0xFFFF, idx - 3)),
                                     nbeats_m1.eq(Mux(whole == 0, 0, whole - 1)), pb.eq(0),
                                     idx.eq(0)]
                        m.next = "PRESENT"
                    with m.Elif(is_ctrl):
                        m.d.comb += dec.o.ready.eq(~ctrl_pending)
                        with m.If(~ctrl_pending):
                            m.d.sync += idx.eq(0)
                            m.next = "CEXEC"
                    with m.Elif(is_sync):
                        with m.If(~sync_pending):
                            m.d.sync += [idx.eq(0), sync_pending.eq(1)]
                    with m.Else():
                        m.d.comb += bad_frame.eq(1)
                        m.d.sync += idx.eq(0)
            with m.State("PRESENT"):
                ip = core.i.payload
                accept = core.i.valid & core.i.ready
                last = pb == nbeats_m1
                m.d.comb += [
                    core.i.valid.eq(1),
                    ip.header.eq(hdr), ip.length.eq(mlen), ip.tag.eq(tag), ip.last.eq(last),
                    ip.data.eq(Mux(nelem == 0, 0, rp.data)),
                    rp.addr.eq(clamp(Mux(accept, pb + 1, pb))),
                ]
                with m.If(accept):
                    m.d.sync += pb.eq(pb + 1)
                    with m.If(last):
                        m.next = "RECV"
            with m.State("CEXEC"):
                addr = cbuf[32:48]
                m.d.comb += [c_addr.eq(addr), c_wdata.eq(cbuf[:32]),
                             c_we.eq(cbuf[48] & (addr < regmap.BRIDGE_BASE))]
                m.d.sync += ctrl_addr.eq(addr)
                m.next = "CWAIT"
            with m.State("CWAIT"):              # the access reaches the core
                m.d.comb += c_addr.eq(ctrl_addr)
                m.next = "CWAIT2"
            with m.State("CWAIT2"):             # the core registers the read
                m.d.comb += c_addr.eq(ctrl_addr)
                m.next = "CCAP"
            with m.State("CCAP"):
                reply = Signal(32)
                m.d.comb += reply.eq(core.ctrl_rdata)
                with m.If(ctrl_addr >= regmap.BRIDGE_BASE):
                    m.d.comb += reply.eq(0)
                    for n, sig in enumerate(counters):
                        with m.If(ctrl_addr == regmap.BRIDGE_BASE + n):
                            m.d.comb += reply.eq(sig)
                m.d.sync += [ctrl_reply.eq(reply), ctrl_pending.eq(1)]
                m.next = "RECV"

        # ---- verdicts ---------------------------------------------------
        m.submodules.vq = vq = BufferedFIFO(width=20, depth=16)
        m.d.comb += [vq.w_data.eq(core.v.payload.as_value()), vq.w_en.eq(core.v.valid),
                     verdict_overflow.eq(core.v.valid & ~vq.w_rdy)]
        vcode = vq.r_data[:4]
        vtag = vq.r_data[4:20]

        # ---- transmit: frames to the host -------------------------------
        shreg = Signal(8 * _SHORT_BYTES)
        nleft = Signal(range(_SHORT_BYTES + 1))
        hb = Signal(range(_RESULT_HEAD))      # byte of a RESULT frame's fixed part
        remaining = Signal(16)
        rbf16 = Signal()
        lanes = Signal(32 * L)
        lane_n = Signal(range(L))
        rb = Signal(2)
        beat_last = Signal()
        quiet = Signal(3)

        idle_now = (core.idle & ~vq.r_rdy & ~core.o.valid & ~ctrl_pending
                    & ~rx_fsm.ongoing("PRESENT"))
        with m.If(idle_now):
            with m.If(quiet != 7):
                m.d.sync += quiet.eq(quiet + 1)
        with m.Else():
            m.d.sync += quiet.eq(0)
        m.d.comb += self.busy.eq(~core.idle)

        def load(*fields):
            """Load the fixed part of a frame: (value, bytes) pairs, first sent first."""
            value, nbytes = None, 0
            for v, n in fields:
                v = Value.cast(v)
                v = Cat(v, Const(0, 8 * n - len(v))) if len(v) < 8 * n else v[:8 * n]
                value = v if value is None else Cat(v, value)
                nbytes += n
            # ``value`` now holds the first field in its most significant bytes.
            return [shreg.eq(value << (8 * (_SHORT_BYTES - nbytes))), nleft.eq(nbytes)]

        fb = enc.i
        # Egress ready from a register: defined from the first cycle, also in
        # 4-state simulators.
        want = Signal()
        m.d.comb += core.o.ready.eq(want)
        with m.FSM(name="tx_fsm"):
            with m.State("IDLE"):
                with m.If(vq.r_rdy):
                    m.d.comb += vq.r_en.eq(1)
                    m.d.sync += load((Const(hu.VERDICT, 8), 1), (vtag, 2), (vcode, 1))
                    m.next = "SHORT"
                with m.Elif(ctrl_pending):
                    m.d.sync += [*load((Const(hu.CTRLREP, 8), 1), (ctrl_addr, 2),
                                       (ctrl_reply, 4)),
                                 ctrl_pending.eq(0)]
                    m.next = "SHORT"
                with m.Elif(core.o.valid):
                    op = core.o.payload
                    m.d.sync += [hb.eq(0), remaining.eq(op.header.count),
                                 rbf16.eq(op.header.dtype == layouts.DType.BF16)]
                    m.next = "HEAD"
                with m.Elif(sync_pending & (quiet == 7)):
                    m.d.sync += [*load((Const(hu.SYNCREP, 8), 1)), sync_pending.eq(0)]
                    m.next = "SHORT"
            with m.State("SHORT"):
                m.d.comb += [fb.valid.eq(1), fb.payload.data.eq(shreg[-8:]),
                             fb.payload.last.eq(nleft == 1)]
                with m.If(fb.ready):
                    m.d.sync += [shreg.eq(shreg << 8), nleft.eq(nleft - 1)]
                    with m.If(nleft == 1):
                        m.next = "IDLE"
            with m.State("HEAD"):
                # The egress beat is held (not ready) while its header is sent.
                op = core.o.payload
                hv = op.header.as_value()
                head = Cat(Const(hu.RESULT, 8), op.tag[8:], op.tag[:8],  # first byte first
                           *[hv[8 * (15 - k):8 * (16 - k)] for k in range(16)])
                m.d.comb += [fb.valid.eq(1), fb.payload.data.eq(head.word_select(hb, 8))]
                with m.If(fb.ready):
                    m.d.sync += hb.eq(hb + 1)
                    with m.If(hb == _RESULT_HEAD - 1):
                        m.d.sync += want.eq(1)
                        m.next = "LOAD"
            with m.State("LOAD"):
                with m.If(core.o.valid & want):
                    m.d.sync += [lanes.eq(core.o.payload.data.as_value()), lane_n.eq(0),
                                 rb.eq(0), beat_last.eq(core.o.payload.last), want.eq(0)]
                    m.next = "BODY"
            with m.State("BODY"):
                cur = lanes[:32]
                size_m1 = Mux(rbf16, 1, 3)
                final = (remaining == 1) & (rb == size_m1)
                m.d.comb += [fb.valid.eq(1),
                             fb.payload.data.eq(Mux(rbf16, cur.word_select(~rb[0], 8),
                                                    cur.word_select(~rb, 8))),
                             fb.payload.last.eq(final)]
                with m.If(fb.ready):
                    with m.If(rb == size_m1):
                        m.d.sync += [rb.eq(0), remaining.eq(remaining - 1),
                                     lanes.eq(lanes >> 32), lane_n.eq(lane_n + 1)]
                        with m.If(final):
                            m.next = "IDLE"
                            with m.If(~beat_last):
                                m.d.sync += want.eq(1)
                                m.next = "DRAIN"
                        with m.Elif(lane_n == L - 1):
                            m.d.sync += want.eq(1)
                            m.next = "LOAD"
                    with m.Else():
                        m.d.sync += rb.eq(rb + 1)
            with m.State("DRAIN"):
                with m.If(core.o.valid & want & core.o.payload.last):
                    m.d.sync += want.eq(0)
                    m.next = "IDLE"
        return m


class UARTBridge(CheckedComponent):
    """:class:`CoreBridge` on UART pins: ``rx`` from the host, ``tx`` to it,
    ``divisor`` clock cycles per bit. The receive FIFO holds ``rx_fifo``
    bytes (default: two of the longest MSG frames, at least 64)."""

    @staticmethod
    def check(params: Params, divisor: int, **kwargs) -> None:
        CoreBridge.check(params)
        check_divisor(divisor)

    def __init__(self, params: Params, divisor: int, *, fp_stages=None, jobs=None,
                 rx_fifo: int | None = None):
        self._bridge = CoreBridge(params, fp_stages=fp_stages, jobs=jobs)
        self._divisor = divisor
        depth = rx_fifo or max(64, _pow2_at_least(2 * self._bridge.max_frame))
        self._rx_fifo = depth
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "busy": Out(1),
            "error": Out(1),
            "ready": Out(1),
        })

    @property
    def rx_fifo(self) -> int:
        return self._rx_fifo

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = br = self._bridge
        m.submodules.urx = urx = UARTRx(self._divisor)
        m.submodules.utx = utx = UARTTx(self._divisor)
        m.submodules.fifo = fifo = BufferedFIFO(width=8, depth=self._rx_fifo)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     fifo.w_data.eq(urx.o.payload), fifo.w_en.eq(urx.o.valid),
                     urx.o.ready.eq(fifo.w_rdy),
                     br.rx.payload.eq(fifo.r_data), br.rx.valid.eq(fifo.r_rdy),
                     fifo.r_en.eq(br.rx.ready),
                     br.rx_overrun.eq(urx.overrun), br.rx_frame_error.eq(urx.frame_error),
                     self.busy.eq(br.busy), self.error.eq(br.error), self.ready.eq(br.ready)]
        wiring.connect(m, br.tx, utx.i)
        return m
