"""A store-and-forward frame buffer: frames go out whole, or not at all."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl.eth.layouts import LENGTH_BITS, BufferedByte, WriteByte
from netagg.hdl.fifo import BufferedFIFO
from netagg.hdl.ram import RAM_FORMS, WideRAM

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
        ``w.ready`` is low while the buffer is full and for the one cycle
        after every last byte; frames must not be longer than
        ``max_length``. "Full" is registered (for 125 MHz): fewer than two
        bytes free in the previous cycle, so a byte arriving after the
        buffer stood one byte short of full for a cycle is refused
        (``drop``: the frame overflows) although the RAM has room for it.
    ram : "memory" or "ecp5"
        The storage's build form (:class:`netagg.hdl.ram.WideRAM`, with its
        output register either way: the block RAM's 5.8 ns clock-to-out
        ends at a register). ``"memory"``: portable; ``"ecp5"``: DP16KD
        blocks with ``OUTREG``, for the board.

    Timing: every path of the write side starts at a flip-flop and passes
    at most one carry chain (for 125 MHz). A frame's end is decided with
    its last byte and carried out the next cycle, in which no byte is
    written: in ``stall`` mode ``w.ready`` is low then, in ``drop`` mode
    a byte arriving then (no gap after a last byte; a MAC always leaves
    one) starts a frame that overflows.

    Ports
    -----
    w : In(stream WriteByte)
        Frames byte by byte; ``drop`` on the last byte discards the frame
        (then counted elsewhere), as does a frame of ``strip`` bytes or fewer.
        ``w.ready`` depends on flip-flops only.
    r : Out(stream BufferedByte)
        Committed frames, each exactly as written minus ``strip`` bytes,
        ``length`` its byte count on every byte. The first byte is valid
        six cycles after the last byte was written (into an empty
        buffer); then one byte per cycle while ``ready``, one idle cycle
        between frames. ``data`` comes straight from the RAM's output
        register.
    overflow : Out(1)
        One-cycle pulse, with the last byte of a frame that was not
        ``drop``\\ ped but discarded for lack of space (mode ``drop``).
    committed : Out(1)
        One-cycle pulse with the last byte of every committed frame.
    """

    def __init__(self, *, depth: int = 4096, max_length: int = 1514, frames: int = 32,
                 strip: int = 0, mode: str = "drop", ram: str = "memory"):
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
        if ram not in RAM_FORMS:
            raise ValueError(f"ram must be one of {RAM_FORMS}, not {ram!r}")
        self._ram = ram
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
        m.submodules.mem = mem = WideRAM(8, D, form=self._ram, out_reg=True)
        m.submodules.lengths = lengths = BufferedFIFO(width=LENGTH_BITS, depth=self._frames)

        W = abits + 1
        wptr = Signal(W)               # next byte written
        start = Signal(W)              # first byte of the frame being written
        rptr = Signal(W)               # next byte read (committed data only)
        # wptr - strip and start - strip, kept as registers beside them, so
        # that a commit or a discard only moves registers (for 125 MHz).
        cend = Signal(W, init=-self._strip % (1 << W))
        start_m = Signal(W, init=-self._strip % (1 << W))
        nbytes = Signal(range(self._max + self._strip + 2))
        full = Signal()
        lost = Signal()                # this frame is being discarded for lack of space
        # Registered and conservative, for 125 MHz: the fill of the
        # previous cycle was at least D - 1. The fill grows by at most one a
        # cycle (a commit or a discard only moves ``wptr`` back), so a write
        # is refused only when fewer than two bytes were free a cycle ago: a
        # frame may find one byte less room than the RAM has.
        m.d.sync += full.eq((wptr - rptr)[:W] >= D - 1)
        short = Signal(init=1)         # registered: nbytes < max + strip
        # registered: fewer than strip bytes taken (written or not) before
        # this one, so that a frame lost from its first byte still counts
        seen = Signal(range(self._strip + 1))
        tiny = Signal(init=self._strip > 0)
        # The frame end is decided with its last byte and carried out the
        # next cycle (``pend_ok``: commit, ``pend_drop``: discard), when no
        # byte is written.
        pend_ok, pend_drop = Signal(), Signal()
        pend = pend_ok | pend_drop

        # Write side.
        w = self.w
        take = Signal()
        if self._mode == "drop":
            m.d.comb += [w.ready.eq(1), take.eq(w.valid)]
        else:
            m.d.comb += [w.ready.eq(~full & ~pend), take.eq(w.valid & ~full & ~pend)]
        room = ~full & ~lost & short & ~pend
        m.d.comb += [mem.w_addr.eq(wptr[:abits]), mem.w_data.eq(w.payload.data),
                     mem.w_en.eq(take & room)]
        # nbytes + 1 - strip, kept as a register beside nbytes (modulo its
        # width; used only for a frame longer than strip) for 125 MHz
        lw = len(Signal(range(self._max + self._strip + 2))) + 1
        length = Signal(lw, init=(1 - self._strip) % (1 << lw))
        pend_len = Signal(lw)
        m.d.sync += [pend_ok.eq(0), pend_drop.eq(0)]
        m.d.comb += [lengths.w_en.eq(pend_ok), lengths.w_data.eq(pend_len)]
        with m.If(pend_ok):
            m.d.sync += [start.eq(cend), wptr.eq(cend), start_m.eq(cend - self._strip),
                         cend.eq(cend - self._strip)]
        with m.If(pend_drop):
            m.d.sync += [wptr.eq(start), cend.eq(start_m)]
        with m.If(take):
            with m.If(room):
                m.d.sync += [wptr.eq(wptr + 1), cend.eq(cend + 1), nbytes.eq(nbytes + 1),
                             length.eq(length + 1),
                             short.eq(nbytes < self._max + self._strip - 1)]
            with m.Else():
                m.d.sync += lost.eq(1)
            with m.If(seen != self._strip):
                m.d.sync += [seen.eq(seen + 1), tiny.eq(seen + 1 < self._strip)]
            with m.If(w.payload.last):
                too_long = ~room | lost | tiny
                # The length queue only frees entries until the commit.
                ok = ~w.payload.drop & ~too_long & lengths.w_rdy
                m.d.sync += [nbytes.eq(0), lost.eq(0), short.eq(1), seen.eq(0),
                             tiny.eq(self._strip > 0),
                             length.eq((1 - self._strip) % (1 << lw)),
                             pend_ok.eq(ok), pend_drop.eq(~ok), pend_len.eq(length)]
                m.d.comb += [self.committed.eq(ok),
                             self.overflow.eq(~ok & ~w.payload.drop & ~tiny)]

        # Read side: the RAM's two read registers are the output pipeline,
        # which advances while the output register frees.
        remaining = Signal(LENGTH_BITS)
        # of the frame being fetched; it changes only at an advance with the
        # previous frame's last byte leaving the read register, so the
        # output's length is taken from it one stage late
        cur_len = Signal(LENGTH_BITS)
        v1, v2 = Signal(), Signal()             # valid in the read register, at the output
        last1, last2 = Signal(), Signal()
        len2 = Signal(LENGTH_BITS)
        advance = ~v2 | self.r.ready
        fetch = Signal()
        rem_zero = Signal(init=1)               # registered: remaining == 0
        m.d.comb += [fetch.eq(advance & ~rem_zero),
                     mem.r_addr.eq(rptr[:abits]), mem.r_en.eq(advance),
                     self.r.valid.eq(v2), self.r.payload.data.eq(mem.r_data),
                     self.r.payload.last.eq(last2), self.r.payload.length.eq(len2)]
        with m.If(advance):
            m.d.sync += [v1.eq(fetch), last1.eq(remaining == 1),
                         v2.eq(v1), last2.eq(last1), len2.eq(cur_len)]
        with m.If(fetch):
            m.d.sync += [rptr.eq(rptr + 1), remaining.eq(remaining - 1),
                         rem_zero.eq(remaining == 1)]
        # (a committed frame has at least one byte)
        with m.If(rem_zero & lengths.r_rdy & advance):
            m.d.comb += lengths.r_en.eq(1)
            m.d.sync += [remaining.eq(lengths.r_data), cur_len.eq(lengths.r_data),
                         rem_zero.eq(0)]
        return m
