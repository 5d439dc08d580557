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


class FrameParser(wiring.Component):
    """Parses the bytes of one host frame at a time: the type, a MSG's tag,
    header and elements, a CTRL frame's body.

    Ports
    -----
    byte, take : In
        A data byte of the frame (``take`` high: it is consumed this cycle).
        One byte per cycle.
    restart : In(1)
        The frame has been handled: the next byte taken starts a new one.
    is_msg, is_ctrl, is_sync : Out(1)
        Combinational, from registers: the bytes so far are a MSG frame (type
        and tag at least), a CTRL frame (exactly 8 bytes) or a SYNC frame
        (its type byte alone).
    tag, header : Out
        Registered: a MSG frame's tag and header (big-endian, shifted in: a
        frame shorter than the header has its bytes in the low bytes; the
        core drops it as bad_length).
    length : Out(16)
        The MSG frame's message bytes (header and body; saturating).
    beats_m1 : Out(16)
        The beats to present, minus 1: max(1, ceil(elements / L)) - 1.
    no_elements : Out(1)
        The frame held no whole element (its beats present zeros).
    ctrl_write, ctrl_addr, ctrl_data : Out
        A CTRL frame's body (flags bit 0, address, value).
    rd_addr, rd_data : In, Out
        The buffer of the frame's first K elements (L per beat, lanes past
        the last element as they were): a read port, data one cycle after
        the address.

    Bytes past the first 2**17 - 1 of a frame are not counted (``length``
    saturates); elements past K are not stored.
    """

    def __init__(self, params: Params):
        self._params = params
        super().__init__({
            "byte": In(8),
            "take": In(1),
            "restart": In(1),
            "is_msg": Out(1),
            "is_ctrl": Out(1),
            "is_sync": Out(1),
            "tag": Out(16),
            "header": Out(layouts.Header),
            "length": Out(16),
            "beats_m1": Out(16),
            "no_elements": Out(1),
            "ctrl_write": Out(1),
            "ctrl_addr": Out(16),
            "ctrl_data": Out(32),
            "rd_addr": In(range(params.beats)),
            "rd_data": Out(32 * params.lanes),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, K, B = p.lanes, p.elements, p.beats
        m.submodules.buf = mem = Memory(shape=32 * L, depth=B, init=[])
        wp = mem.write_port(granularity=32)
        rp = mem.read_port()
        m.d.comb += [rp.addr.eq(self.rd_addr), self.rd_data.eq(rp.data)]

        count = Signal(17)                 # bytes of the frame so far (saturating)
        ftype = Signal(8)
        header = Signal(128)
        elem = Signal(32)                  # the element being shifted in
        elem_byte = Signal(2)              # its bytes so far
        lane = Signal(range(L))
        beat = Signal(16)                  # full beats so far
        elements = Signal(17)              # whole elements so far (saturating)
        body = Signal(56)                  # the last 7 bytes: a CTRL body (flags, addr, data)
        bf16 = Signal()
        m.d.comb += [
            bf16.eq(data.View(layouts.Header, header).dtype == layouts.DType.BF16),
            self.header.eq(header),
            self.is_msg.eq((ftype == hu.MSG) & (count >= 3)),
            self.is_ctrl.eq((ftype == hu.CTRL) & (count == 8)),
            self.is_sync.eq((ftype == hu.SYNC) & (count == 1)),
            self.length.eq(Mux(count - 3 > 0xFFFF, 0xFFFF, count - 3)),
            self.no_elements.eq(elements == 0),
            self.ctrl_write.eq(body[48]),
            self.ctrl_addr.eq(body[32:48]),
            self.ctrl_data.eq(body[:32]),
        ]
        whole = beat + (lane != 0)
        m.d.comb += self.beats_m1.eq(Mux(whole == 0, 0, whole - 1))

        b = self.byte
        with m.If(self.take):
            with m.If(count != 0x1FFFF):
                m.d.sync += count.eq(count + 1)
            with m.If(count == 0):
                m.d.sync += [ftype.eq(b), header.eq(0), elem_byte.eq(0), lane.eq(0),
                             beat.eq(0), elements.eq(0)]
            m.d.sync += body.eq(Cat(b, body[:48]))
            with m.If((count >= 1) & (count < 3)):
                m.d.sync += self.tag.eq(Cat(b, self.tag[:8]))
            with m.If((count >= 3) & (count < 19)):     # big-endian: shifted in
                m.d.sync += header.eq(Cat(b, header[:120]))
            with m.If(count >= 19):
                new = Mux(elem_byte == 0, b, Cat(b, elem[:24]))
                m.d.sync += elem.eq(new)
                complete = Mux(bf16, elem_byte == 1, elem_byte == 3)
                with m.If(complete):
                    m.d.sync += elem_byte.eq(0)
                    with m.If(elements != 0x1FFFF):
                        m.d.sync += elements.eq(elements + 1)
                    with m.If(elements < K):
                        m.d.comb += [wp.addr.eq(beat),
                                     wp.data.eq(Mux(lane == 0, new, Cat(*[new] * L))),
                                     wp.en.eq(Mux(lane == 0, (1 << L) - 1,
                                                  Const(1, L) << lane))]
                    with m.If(lane == L - 1):
                        m.d.sync += [lane.eq(0), beat.eq(beat + 1)]
                    with m.Else():
                        m.d.sync += lane.eq(lane + 1)
                with m.Else():
                    m.d.sync += elem_byte.eq(elem_byte + 1)
        with m.If(self.restart):
            m.d.sync += count.eq(0)
        return m


class MessagePresenter(wiring.Component):
    """Presents a parsed MSG frame to the core as docs/core.md says.

    Ports
    -----
    load : In(1)
        Registers ``length`` and ``beats_m1`` (the frame has ended) and
        restarts at beat 0.
    length, beats_m1 : In(16)
    header, tag, no_elements : In
        Held by the parser while ``en`` is high.
    en : In(1)
        Present: ``o.valid`` high, one beat per cycle as ``o`` accepts.
    done : Out(1)
        Combinational: the last beat is accepted this cycle.
    rd_addr, rd_data : Out, In
        The parser's element buffer (data one cycle after the address): the
        address is that of the beat ``o`` shows on the next cycle.
    o : Out(stream of ingress_beat)
        The message's true ``length``, its beats (lanes past the elements as
        stored, all zero for a frame without an element), the host's tag.
    """

    def __init__(self, params: Params):
        self._params = params
        super().__init__({
            "load": In(1),
            "length": In(16),
            "beats_m1": In(16),
            "header": In(layouts.Header),
            "tag": In(16),
            "no_elements": In(1),
            "en": In(1),
            "done": Out(1),
            "rd_addr": Out(range(params.beats)),
            "rd_data": In(32 * params.lanes),
            "o": Out(stream.Signature(layouts.ingress_beat(params.lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        B = self._params.beats
        length = Signal(16)
        last_beat = Signal(16)
        beat = Signal(16)                  # the beat being presented
        with m.If(self.load):
            m.d.sync += [length.eq(self.length), last_beat.eq(self.beats_m1), beat.eq(0)]

        def clamp(v):
            return Mux(v >= B - 1, B - 1, v)

        with m.If(self.en):
            o = self.o.payload
            accept = self.o.valid & self.o.ready
            last = beat == last_beat
            m.d.comb += [
                self.o.valid.eq(1),
                o.header.eq(self.header), o.length.eq(length), o.tag.eq(self.tag),
                o.last.eq(last),
                o.data.eq(Mux(self.no_elements, 0, self.rd_data)),
                self.rd_addr.eq(clamp(Mux(accept, beat + 1, beat))),
                self.done.eq(accept & last),
            ]
            with m.If(accept):
                m.d.sync += beat.eq(beat + 1)
        return m


class ControlAccess(wiring.Component):
    """The core's control port, driven from registers: the build-time job
    table after reset, then one host CTRL access at a time.

    Ports
    -----
    ready : Out(1)
        Registered: the job table writes (``regmap.job_writes(jobs)``, one a
        cycle from reset) are done.
    start : In(1)
        With ``write``, ``addr``, ``wdata``: a CTRL access (only when
        ``ready`` and not ``pending``). Writes below ``regmap.BRIDGE_BASE``
        reach the core; the value read back is taken 4 cycles after ``start``
        (the core registers its read), the bridge counters (``counters``)
        for addresses from ``BRIDGE_BASE`` on (0 past the last).
    done : Out(1)
        Combinational: the access completes (the value is captured) this cycle.
    pending, reply_addr, reply_data : Out
        Registered: a CTRLREP to send, from the cycle after ``done`` until
        ``reply_taken``.
    reply_taken : In(1)
    core_addr, core_wdata, core_we, core_rdata
        To the core's control port (outputs registered).
    counters : In(array of 16-bit)
        The bridge counters, in ``regmap.BRIDGE_COUNTERS`` order.
    """

    def __init__(self, params: Params, *, jobs=None):
        self._writes = regmap.job_writes(jobs) if jobs is not None else []
        super().__init__({
            "ready": Out(1),
            "start": In(1),
            "write": In(1),
            "addr": In(16),
            "wdata": In(32),
            "done": Out(1),
            "pending": Out(1),
            "reply_addr": Out(16),
            "reply_data": Out(32),
            "reply_taken": In(1),
            "core_addr": Out(16),
            "core_wdata": Out(32),
            "core_we": Out(1),
            "core_rdata": In(32),
            "counters": In(data.ArrayLayout(16, len(regmap.BRIDGE_COUNTERS))),
        })

    def elaborate(self, platform):
        m = Module()
        # Registered towards the core: defined from the first cycle, also in
        # 4-state simulators.
        addr, wdata, we = Signal(16), Signal(32), Signal()
        m.d.sync += [self.core_addr.eq(addr), self.core_wdata.eq(wdata),
                     self.core_we.eq(we)]

        # The job table load after reset.
        writes = self._writes
        init_index = Signal(range(len(writes) + 1))
        init_done = Signal()
        m.d.comb += self.ready.eq(init_done)
        with m.If(~init_done):
            with m.Switch(init_index):
                for n, (reg, value) in enumerate(writes):
                    with m.Case(n):
                        m.d.comb += [addr.eq(reg), wdata.eq(value), we.eq(1)]
                with m.Default():
                    m.d.sync += init_done.eq(1)
            m.d.sync += init_index.eq(init_index + 1)

        with m.If(self.reply_taken):
            m.d.sync += self.pending.eq(0)
        with m.FSM(name="ctrl_fsm"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.next = "ACCESS"
            with m.State("ACCESS"):         # the access, registered towards the core
                m.d.comb += [addr.eq(self.addr), wdata.eq(self.wdata),
                             we.eq(self.write & (self.addr < regmap.BRIDGE_BASE))]
                m.d.sync += self.reply_addr.eq(self.addr)
                m.next = "REACH"
            with m.State("REACH"):          # the access reaches the core
                m.d.comb += addr.eq(self.reply_addr)
                m.next = "READ"
            with m.State("READ"):           # the core registers the read
                m.d.comb += addr.eq(self.reply_addr)
                m.next = "CAPTURE"
            with m.State("CAPTURE"):
                reply = Signal(32)
                m.d.comb += [reply.eq(self.core_rdata), self.done.eq(1)]
                with m.If(self.reply_addr >= regmap.BRIDGE_BASE):
                    m.d.comb += reply.eq(0)
                    for n, counter in enumerate(self.counters):
                        with m.If(self.reply_addr == regmap.BRIDGE_BASE + n):
                            m.d.comb += reply.eq(counter)
                m.d.sync += [self.reply_data.eq(reply), self.pending.eq(1)]
                m.next = "IDLE"
        return m


class ReplySerializer(wiring.Component):
    """Sends the board's frames to the host, one at a time, in this order of
    priority when idle: a VERDICT, a CTRLREP, a RESULT, a SYNCREP.

    Ports
    -----
    verdict : In(stream of VerdictLayout)
        Taken when a VERDICT frame starts (type, tag, code).
    ctrl_pending, ctrl_addr, ctrl_data : In
        A CTRLREP to send (type, address, value); ``ctrl_taken`` pulses
        (combinational) when it starts.
    result : In(stream of egress_beat)
        The core's RESULT beats: a RESULT frame is the type, the tag and the
        header of its first beat, then its ``count`` elements (2 bytes each
        for bf16, else 4, big-endian); the lanes of the last beat past
        ``count`` are dropped. ``result.ready`` is registered: a beat is held
        while the frame's fixed part is sent, then taken as its elements
        are (one lane per 2 or 4 bytes).
    sync : In(1)
        A SYNCREP is due; ``sync_taken`` pulses when it starts.
    o : Out(stream of TxByte)
        The frames' bytes, ``last`` on each frame's final byte (to the SLIP
        encoder). One byte per cycle.
    """

    def __init__(self, params: Params):
        self._params = params
        super().__init__({
            "verdict": In(stream.Signature(layouts.VerdictLayout)),
            "ctrl_pending": In(1),
            "ctrl_addr": In(16),
            "ctrl_data": In(32),
            "ctrl_taken": Out(1),
            "result": In(stream.Signature(layouts.egress_beat(params.lanes))),
            "sync": In(1),
            "sync_taken": Out(1),
            "o": Out(stream.Signature(TxByte)),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._params.lanes
        short = Signal(8 * _SHORT_BYTES)      # a short frame, first byte in the top byte
        short_left = Signal(range(_SHORT_BYTES + 1))
        head_byte = Signal(range(_RESULT_HEAD))   # byte of a RESULT frame's fixed part
        remaining = Signal(16)                # elements of the RESULT still to send
        bf16 = Signal()
        lanes = Signal(32 * L)                # the beat being sent, lane 0 in the low bits
        lane = Signal(range(L))
        elem_byte = Signal(2)
        beat_last = Signal()

        def load(*fields):
            """Load a short frame: (value, bytes) pairs, first sent first."""
            value, nbytes = None, 0
            for v, n in fields:
                v = Value.cast(v)
                v = Cat(v, Const(0, 8 * n - len(v))) if len(v) < 8 * n else v[:8 * n]
                value = v if value is None else Cat(v, value)
                nbytes += n
            # ``value`` now holds the first field in its most significant bytes.
            return [short.eq(value << (8 * (_SHORT_BYTES - nbytes))), short_left.eq(nbytes)]

        fb = self.o
        res = self.result
        # Egress ready from a register: defined from the first cycle, also in
        # 4-state simulators.
        want = Signal()
        m.d.comb += res.ready.eq(want)
        with m.FSM(name="tx_fsm"):
            with m.State("IDLE"):
                with m.If(self.verdict.valid):
                    v = self.verdict.payload
                    m.d.comb += self.verdict.ready.eq(1)
                    m.d.sync += load((Const(hu.VERDICT, 8), 1), (v.tag, 2), (v.code, 1))
                    m.next = "SHORT"
                with m.Elif(self.ctrl_pending):
                    m.d.comb += self.ctrl_taken.eq(1)
                    m.d.sync += load((Const(hu.CTRLREP, 8), 1), (self.ctrl_addr, 2),
                                     (self.ctrl_data, 4))
                    m.next = "SHORT"
                with m.Elif(res.valid):
                    m.d.sync += [head_byte.eq(0), remaining.eq(res.payload.header.count),
                                 bf16.eq(res.payload.header.dtype == layouts.DType.BF16)]
                    m.next = "HEAD"
                with m.Elif(self.sync):
                    m.d.comb += self.sync_taken.eq(1)
                    m.d.sync += load((Const(hu.SYNCREP, 8), 1))
                    m.next = "SHORT"
            with m.State("SHORT"):
                m.d.comb += [fb.valid.eq(1), fb.payload.data.eq(short[-8:]),
                             fb.payload.last.eq(short_left == 1)]
                with m.If(fb.ready):
                    m.d.sync += [short.eq(short << 8), short_left.eq(short_left - 1)]
                    with m.If(short_left == 1):
                        m.next = "IDLE"
            with m.State("HEAD"):
                # The egress beat is held (not ready) while its header is sent.
                op = res.payload
                hv = op.header.as_value()
                head = Cat(Const(hu.RESULT, 8), op.tag[8:], op.tag[:8],  # first byte first
                           *[hv[8 * (15 - k):8 * (16 - k)] for k in range(16)])
                m.d.comb += [fb.valid.eq(1), fb.payload.data.eq(head.word_select(head_byte, 8))]
                with m.If(fb.ready):
                    m.d.sync += head_byte.eq(head_byte + 1)
                    with m.If(head_byte == _RESULT_HEAD - 1):
                        m.d.sync += want.eq(1)
                        m.next = "LOAD"
            with m.State("LOAD"):
                with m.If(res.valid & want):
                    m.d.sync += [lanes.eq(res.payload.data.as_value()), lane.eq(0),
                                 elem_byte.eq(0), beat_last.eq(res.payload.last), want.eq(0)]
                    m.next = "BODY"
            with m.State("BODY"):
                cur = lanes[:32]
                size_m1 = Mux(bf16, 1, 3)
                final = (remaining == 1) & (elem_byte == size_m1)
                m.d.comb += [fb.valid.eq(1),
                             fb.payload.data.eq(Mux(bf16, cur.word_select(~elem_byte[0], 8),
                                                    cur.word_select(~elem_byte, 8))),
                             fb.payload.last.eq(final)]
                with m.If(fb.ready):
                    with m.If(elem_byte == size_m1):
                        m.d.sync += [elem_byte.eq(0), remaining.eq(remaining - 1),
                                     lanes.eq(lanes >> 32), lane.eq(lane + 1)]
                        with m.If(final):
                            m.next = "IDLE"
                            with m.If(~beat_last):
                                m.d.sync += want.eq(1)
                                m.next = "DRAIN"
                        with m.Elif(lane == L - 1):
                            m.d.sync += want.eq(1)
                            m.next = "LOAD"
                    with m.Else():
                        m.d.sync += elem_byte.eq(elem_byte + 1)
            with m.State("DRAIN"):          # the RESULT's beats past its count
                with m.If(res.valid & want & res.payload.last):
                    m.d.sync += want.eq(0)
                    m.next = "IDLE"
        return m


class CoreBridge(CheckedComponent):
    """A netagg core behind the bridge's frame protocol (module docstring).

    ``rx``: SLIP bytes from the host; ``tx``: SLIP bytes to the host.
    ``rx_overrun`` / ``rx_frame_error``: pulses from the UART receiver,
    counted. ``busy``: the core is not idle; ``error``: sticky, a bridge
    counter has counted. ``ready``: the job table is loaded.

    Parts: :class:`SlipDecoder` -> :class:`FrameParser` -> (a MSG)
    :class:`MessagePresenter` -> the core; (a CTRL) :class:`ControlAccess`;
    the verdicts in a 16-entry FIFO; :class:`ReplySerializer` ->
    :class:`SlipEncoder`. The receive sequencer handles one frame at a time:
    ``INIT`` (the job table load), ``RECEIVE`` (bytes into the parser; at a
    frame's end: a MSG goes to ``PRESENT``, a CTRL to ``CONTROL`` once the
    previous CTRLREP has started, a SYNC sets the barrier, anything else is
    counted as ``bad_frame``), ``PRESENT`` (until the message's last beat is
    accepted), ``CONTROL`` (until the access completes). While a SYNC is
    pending no byte is taken; its SYNCREP is sent once the core is idle and
    nothing is left to send for 7 consecutive cycles.
    """

    @staticmethod
    def check(params: Params, **kwargs) -> None:
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {type(params).__name__}")

    def __init__(self, params: Params, *, fp_stages=None, jobs=None, acc_ram: str = "memory"):
        if jobs is not None and jobs.params != params:
            from netagg.jobs import JobTable
            jobs = JobTable(list(jobs), params)
        self._params = params
        self._fp_stages = fp_stages
        self._acc_ram = acc_ram
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

        m.submodules.core = core = NetaggCore(p, fp_stages=self._fp_stages,
                                              acc_ram=self._acc_ram)
        m.submodules.dec = dec = SlipDecoder()
        m.submodules.enc = enc = SlipEncoder()
        m.submodules.parser = parser = FrameParser(p)
        m.submodules.presenter = presenter = MessagePresenter(p)
        m.submodules.control = control = ControlAccess(p, jobs=self._jobs)
        m.submodules.replies = replies = ReplySerializer(p)
        m.submodules.vq = vq = BufferedFIFO(width=layouts.VerdictLayout.size, depth=16)
        wiring.connect(m, wiring.flipped(self.rx), dec.i)
        wiring.connect(m, enc.o, wiring.flipped(self.tx))
        wiring.connect(m, replies.o, enc.i)

        # Bridge counters.
        counters = [Signal(16, name=f"bc_{n}") for n in regmap.BRIDGE_COUNTERS]
        bad_frame, verdict_overflow = Signal(), Signal()
        for sig, pulse in zip(counters, (bad_frame, self.rx_overrun, self.rx_frame_error,
                                         verdict_overflow), strict=True):
            with m.If(pulse & (sig != 0xFFFF)):
                m.d.sync += sig.eq(sig + 1)
            with m.If(pulse):
                m.d.sync += self.error.eq(1)

        # Parser -> presenter -> core; control port.
        m.d.comb += [
            parser.byte.eq(dec.o.payload.data),
            parser.take.eq(dec.o.valid & dec.o.ready & ~dec.o.payload.end),
            presenter.length.eq(parser.length),
            presenter.beats_m1.eq(parser.beats_m1),
            presenter.header.eq(parser.header),
            presenter.tag.eq(parser.tag),
            presenter.no_elements.eq(parser.no_elements),
            parser.rd_addr.eq(presenter.rd_addr),
            presenter.rd_data.eq(parser.rd_data),
            control.write.eq(parser.ctrl_write),
            control.addr.eq(parser.ctrl_addr),
            control.wdata.eq(parser.ctrl_data),
            core.ctrl_addr.eq(control.core_addr),
            core.ctrl_wdata.eq(control.core_wdata),
            core.ctrl_we.eq(control.core_we),
            control.core_rdata.eq(core.ctrl_rdata),
            control.counters.eq(Cat(*counters)),
            self.ready.eq(control.ready),
        ]
        wiring.connect(m, presenter.o, core.i)

        # The receive sequencer.
        sync_pending = Signal()
        frame_end = dec.o.valid & dec.o.payload.end & ~sync_pending
        with m.FSM(name="rx_fsm") as rx_fsm:
            with m.State("INIT"):
                with m.If(control.ready):
                    m.next = "RECEIVE"
            with m.State("RECEIVE"):
                # A SYNC is a barrier: nothing after it is handled before its reply.
                m.d.comb += dec.o.ready.eq(~sync_pending)
                with m.If(frame_end):
                    with m.If(parser.is_msg):
                        m.d.comb += [presenter.load.eq(1), parser.restart.eq(1)]
                        m.next = "PRESENT"
                    with m.Elif(parser.is_ctrl):
                        m.d.comb += dec.o.ready.eq(~control.pending)
                        with m.If(~control.pending):
                            m.d.comb += [control.start.eq(1), parser.restart.eq(1)]
                            m.next = "CONTROL"
                    with m.Elif(parser.is_sync):
                        m.d.comb += parser.restart.eq(1)
                        m.d.sync += sync_pending.eq(1)
                    with m.Else():
                        m.d.comb += [bad_frame.eq(1), parser.restart.eq(1)]
            with m.State("PRESENT"):
                m.d.comb += presenter.en.eq(1)
                with m.If(presenter.done):
                    m.next = "RECEIVE"
            with m.State("CONTROL"):
                with m.If(control.done):
                    m.next = "RECEIVE"

        # Verdicts, queued for the serializer.
        m.d.comb += [vq.w_data.eq(core.v.payload.as_value()), vq.w_en.eq(core.v.valid),
                     verdict_overflow.eq(core.v.valid & ~vq.w_rdy),
                     replies.verdict.payload.eq(vq.r_data),
                     replies.verdict.valid.eq(vq.r_rdy),
                     vq.r_en.eq(replies.verdict.ready)]

        # Replies; the SYNC barrier's quiet time.
        quiet = Signal(3)
        idle_now = (core.idle & ~vq.r_rdy & ~core.o.valid & ~control.pending
                    & ~rx_fsm.ongoing("PRESENT"))
        with m.If(idle_now):
            with m.If(quiet != 7):
                m.d.sync += quiet.eq(quiet + 1)
        with m.Else():
            m.d.sync += quiet.eq(0)
        m.d.comb += [
            replies.ctrl_pending.eq(control.pending),
            replies.ctrl_addr.eq(control.reply_addr),
            replies.ctrl_data.eq(control.reply_data),
            control.reply_taken.eq(replies.ctrl_taken),
            replies.sync.eq(sync_pending & (quiet == 7)),
            self.busy.eq(~core.idle),
        ]
        with m.If(replies.sync_taken):
            m.d.sync += sync_pending.eq(0)
        wiring.connect(m, core.o, replies.result)
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
                 rx_fifo: int | None = None, acc_ram: str = "memory"):
        self._bridge = CoreBridge(params, fp_stages=fp_stages, jobs=jobs, acc_ram=acc_ram)
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
