"""A store-and-forward frame buffer: frames go out whole, or not at all."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl.eth.layouts import LENGTH_BITS, BufferedByte, WriteByte
from netagg.hdl.fifo import BufferedFIFO
from netagg.hdl.ram import NO_RW_CHECK, registered_read

MODES = ("drop", "stall")


class FrameBuffer(wiring.Component):
    """Frame FIFO in block RAM with whole-frame commit.

    Parameters
    ----------
    depth : int
        Bytes of storage, a power of two at least ``max_length``.
    max_length : int
        Longest frame kept (bytes after ``strip``), below 2**11.
    frames : int
        Frames that can be stored at once.
    strip : int
        Bytes removed from the end of every frame (4: the FCS).
    mode : "drop" or "stall"
        ``drop`` (receive): ``w.ready`` is always high; a frame that does
        not fit (bytes or frame count), or longer than ``max_length``, is
        discarded and signalled on ``overflow``. ``stall`` (transmit):
        ``w.ready`` is low while the buffer is full; frames must not be
        longer than ``max_length``. "Full" is registered (for 125 MHz):
        fewer than two bytes free in the previous cycle, so a byte arriving
        after the buffer stood one byte short of full for a cycle is
        refused (``drop``: the frame overflows) although the RAM has room
        for it; ``w.ready`` is a flip-flop.

    Ports
    -----
    w : In(stream WriteByte)
        Frames byte by byte; ``drop`` on the last byte discards the frame
        (then counted elsewhere), as does a frame of ``strip`` bytes or fewer.
    r : Out(stream BufferedByte)
        Committed frames, each exactly as written minus ``strip`` bytes,
        ``length`` its byte count on every byte. The first byte is valid
        four cycles after the last byte was written (into an empty
        buffer); then one byte per cycle while ``ready``, one idle cycle
        between frames.
    overflow : Out(1)
        One-cycle pulse, with the last byte of a frame that was not
        ``drop``\\ ped but discarded for lack of space (mode ``drop``).
    committed : Out(1)
        One-cycle pulse with the last byte of every committed frame.
    """

    def __init__(self, *, depth: int = 4096, max_length: int = 1514, frames: int = 32,
                 strip: int = 0, mode: str = "drop"):
        for name, v in (("depth", depth), ("max_length", max_length), ("frames", frames)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        if depth & (depth - 1) or depth < max_length:
            raise ValueError(f"depth must be a power of two of at least {max_length}")
        if max_length >= 1 << LENGTH_BITS:
            raise ValueError(f"max_length must be below {1 << LENGTH_BITS}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if not isinstance(strip, int) or not 0 <= strip < 8:
            raise ValueError(f"strip must be an integer 0..7, not {strip!r}")
        self._depth, self._max, self._frames = depth, max_length, frames
        self._strip, self._mode = strip, mode
        super().__init__({
            "w": In(stream.Signature(WriteByte)),
            "r": Out(stream.Signature(BufferedByte)),
            "overflow": Out(1),
            "committed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        D = self._depth
        abits = D.bit_length() - 1
        m.submodules.mem = mem = Memory(shape=8, depth=D, init=[], attrs=NO_RW_CHECK)
        m.submodules.lengths = lengths = BufferedFIFO(width=LENGTH_BITS, depth=self._frames)
        wp = mem.write_port()

        wptr = Signal(abits + 1)       # next byte written
        start = Signal(abits + 1)      # first byte of the frame being written
        rptr = Signal(abits + 1)       # next byte read (committed data only)
        nbytes = Signal(range(self._max + self._strip + 2))
        full = Signal()
        lost = Signal()                # this frame is being discarded for lack of space
        # Registered and conservative, for 125 MHz: the fill of the
        # previous cycle was at least D - 1. The fill grows by at most one a
        # cycle (a commit or a drop never moves ``wptr`` past ``wptr + 1``),
        # so a write is refused only when fewer than two bytes were free a
        # cycle ago: a frame may find one byte less room than the RAM has.
        m.d.sync += full.eq((wptr - rptr)[:abits + 1] >= D - 1)
        short = Signal(init=1)         # registered: nbytes < max + strip

        # Write side.
        w = self.w
        take = Signal()
        if self._mode == "drop":
            m.d.comb += [w.ready.eq(1), take.eq(w.valid)]
        else:
            m.d.comb += [w.ready.eq(~full), take.eq(w.valid & ~full)]
        room = ~full & ~lost & short
        m.d.comb += [wp.addr.eq(wptr[:abits]), wp.data.eq(w.payload.data),
                     wp.en.eq(take & room)]
        # nbytes + 1 - strip, kept as a register beside nbytes (modulo its
        # width; used only for a frame longer than strip) for 125 MHz
        lw = len(Signal(range(self._max + self._strip + 2))) + 1
        length = Signal(lw, init=(1 - self._strip) % (1 << lw))
        with m.If(take):
            with m.If(room):
                m.d.sync += [wptr.eq(wptr + 1), nbytes.eq(nbytes + 1),
                             length.eq(length + 1),
                             short.eq(nbytes < self._max + self._strip - 1)]
            with m.Else():
                m.d.sync += lost.eq(1)
            with m.If(w.payload.last):
                too_long = ~room | lost | (nbytes + 1 <= self._strip)
                ok = ~w.payload.drop & ~too_long & lengths.w_rdy
                m.d.sync += [nbytes.eq(0), lost.eq(0), short.eq(1),
                             length.eq((1 - self._strip) % (1 << lw))]
                with m.If(ok):
                    m.d.comb += [lengths.w_en.eq(1), lengths.w_data.eq(length),
                                 self.committed.eq(1)]
                    m.d.sync += [start.eq(start + length), wptr.eq(start + length)]
                with m.Else():
                    m.d.sync += wptr.eq(start)
                    m.d.comb += self.overflow.eq(~w.payload.drop & (nbytes + 1 > self._strip))

        # Read side: a registered RAM read feeds the output register.
        remaining = Signal(LENGTH_BITS)
        cur_len = Signal(LENGTH_BITS)
        out_valid = Signal()
        out_last = Signal()
        advance = ~out_valid | self.r.ready
        fetch = Signal()
        m.d.comb += fetch.eq(advance & (remaining != 0))
        rdata = registered_read(m, mem, rptr[:abits], en=fetch, name="frame_rdata")
        m.d.comb += [self.r.valid.eq(out_valid), self.r.payload.data.eq(rdata),
                     self.r.payload.last.eq(out_last), self.r.payload.length.eq(cur_len)]
        with m.If(advance):
            m.d.sync += out_valid.eq(fetch)
        with m.If(fetch):
            m.d.sync += [rptr.eq(rptr + 1), remaining.eq(remaining - 1),
                         out_last.eq(remaining == 1)]
        with m.If((remaining == 0) & lengths.r_rdy & advance):
            m.d.comb += lengths.r_en.eq(1)
            m.d.sync += [remaining.eq(lengths.r_data), cur_len.eq(lengths.r_data)]
        return m
