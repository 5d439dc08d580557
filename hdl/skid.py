"""Stream register slices: every path through them starts or ends at a flip-flop."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class _Slice(wiring.Component):
    """A stream in, the same stream out (the slices' common signature)."""

    def __init__(self, shape):
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })


class SkidBuffer(_Slice):
    """Two-entry register slice of an ``amaranth.lib.stream``.

    ``o.valid``, ``o.payload`` and ``i.ready`` are flip-flops, so no
    combinational path crosses the slice in either direction (the 125 MHz
    streams of the Ethernet front end; the core's descriptor queue input).

    Parameters
    ----------
    shape : shape-like
        The payload.

    Ports
    -----
    i : In(stream shape)
        ``ready`` is high while the slice holds at most one entry
        (registered: it reflects the previous cycle's state).
    o : Out(stream shape)
        Each payload taken on ``i`` in order, the earliest the cycle after;
        one entry per cycle while ``ready``: throughput one per cycle, no
        gap in a stream that arrives without one.
    """

    def elaborate(self, platform):
        m = Module()
        spare = Signal(self._shape, name="spare")             # the second entry
        spare_valid = Signal()
        m.d.comb += self.i.ready.eq(~spare_valid)
        take = self.i.valid & self.i.ready
        give = self.o.ready | ~self.o.valid                   # the output register frees
        # The wide registers' enables come from flip-flops or from ``o.ready``
        # alone, never from ``i.valid``: the spare follows the input while
        # it is empty, and counts only once taken while the output waits.
        with m.If(~spare_valid):
            m.d.sync += spare.eq(self.i.payload)
        with m.If(give):
            with m.If(spare_valid):
                m.d.sync += [self.o.payload.eq(spare), self.o.valid.eq(1), spare_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(take)]
        with m.Elif(take):
            m.d.sync += spare_valid.eq(1)
        return m


class PingPongBuffer(_Slice):
    """Two-entry register slice of an ``amaranth.lib.stream`` whose output
    handshake drives only a read pointer and two level flip-flops.

    ``i.ready`` and ``o.valid`` are flip-flops; ``o.payload`` is one
    multiplexer (the read pointer's) after the two entry registers, which
    load from ``i.payload`` with enables from flip-flops alone. Unlike
    :class:`SkidBuffer`, whose wide registers load on ``o.ready``, a late,
    widely routed ``o.ready`` reaches three flip-flops here (the core's
    descriptor queue output, where the slot table's ``ready`` comes late).

    Parameters and ports as :class:`SkidBuffer`'s, with the same timing
    (an entry out the cycle after it is taken at the earliest, one per
    cycle, ``i.ready`` low while two are held).
    """

    def elaborate(self, platform):
        m = Module()
        entries = [Signal(self._shape, name=f"entry{k}") for k in range(2)]
        wr, rd = Signal(name="wr_ptr"), Signal(name="rd_ptr")
        some, full = Signal(name="held_some"), Signal(name="held_full")
        push = self.i.valid & ~full
        pop = self.o.ready & some
        m.d.comb += [self.i.ready.eq(~full), self.o.valid.eq(some),
                     self.o.payload.eq(Mux(rd, entries[1], entries[0]))]
        # the free entry (at ``wr`` while not full) follows the input
        for k in range(2):
            with m.If(~full & (wr == k)):
                m.d.sync += entries[k].eq(self.i.payload)
        grow, shrink = push & ~pop, pop & ~push
        m.d.sync += [some.eq(Mux(grow, 1, Mux(shrink, full, some))),
                     full.eq(Mux(grow, some, Mux(shrink, 0, full)))]
        with m.If(push):
            m.d.sync += wr.eq(~wr)
        with m.If(pop):
            m.d.sync += rd.eq(~rd)
        return m
