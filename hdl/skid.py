"""A stream register slice: every path through it starts or ends at a flip-flop."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class SkidBuffer(wiring.Component):
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

    def __init__(self, shape):
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

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
