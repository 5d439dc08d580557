"""int32 arithmetic: two's complement wrapping add with overflow flag, signed
min and max (``../shared/spec/protocol.md``, Arithmetic; golden model
:mod:`netagg.sim.arith`)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib.wiring import In, Out

from .checked import CheckedComponent

__all__ = ["IntAdd", "IntMinMax"]


def _check_width(width: int = 32) -> None:
    if not isinstance(width, int) or width < 2:
        raise ValueError(f"width must be an int >= 2, not {width!r}")


class IntAdd(CheckedComponent):
    """``r = a + b`` modulo 2**width (two's complement wrapping); ``ovf`` is
    high when the signed sum wrapped. Combinational (latency 0)."""

    check = staticmethod(_check_width)

    def __init__(self, width: int = 32):
        self._width = width
        super().__init__({"a": In(width), "b": In(width), "r": Out(width), "ovf": Out(1)})

    @property
    def latency(self) -> int:
        return 0

    def elaborate(self, platform):
        m = Module()
        w = self._width
        r = (self.a + self.b)[:w]
        m.d.comb += [
            self.r.eq(r),
            self.ovf.eq(((self.a ^ r) & (self.b ^ r))[w - 1]),
        ]
        return m


class IntMinMax(CheckedComponent):
    """Signed min (``max`` low) or max (``max`` high) of ``a`` and ``b``;
    ``take_b``: ``r`` is ``b`` (else ``a``). Combinational (latency 0)."""

    check = staticmethod(_check_width)

    def __init__(self, width: int = 32):
        self._width = width
        super().__init__({"a": In(width), "b": In(width), "max": In(1), "r": Out(width),
                          "take_b": Out(1)})

    @property
    def latency(self) -> int:
        return 0

    def elaborate(self, platform):
        m = Module()
        a_lt_b = self.a.as_signed() < self.b.as_signed()
        take_b = ~(a_lt_b ^ self.max)
        m.d.comb += [self.take_b.eq(take_b), self.r.eq(Mux(take_b, self.b, self.a))]
        return m
