"""Result buffer credit: how many RESULT beats the multicast back-end can
still take."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out

from netagg.hdl.checked import CheckedComponent

__all__ = ["ResultCredit"]


class ResultCredit(CheckedComponent):
    """A credit counter for the back-end's RESULT buffer of ``capacity`` beats.

    Parameters
    ----------
    capacity : int
        Beats of the back-end's buffer (the credit after reset).
    need : int
        Beats of the longest RESULT (K/L): ``ok`` means that many fit.

    Ports
    -----
    take : In(range(capacity + 1))
        Beats claimed this cycle (a RESULT decided); 0 when none. Must not
        exceed the credit (the caller decides only with ``ok`` high and
        claims at most ``need``).
    free : In(stream, always_ready)
        Beats the back-end returns this cycle (``payload`` when ``valid``).
    ok : Out(1)
        Registered: the credit after the previous cycle's ``take`` and
        ``free`` is at least ``need``. High after reset.

    The credit register is updated every cycle with ``- take + free``;
    ``ok`` follows it with the same register stage (no extra cycle).
    """

    @staticmethod
    def check(capacity: int, *, need: int) -> None:
        if not isinstance(capacity, int) or not isinstance(need, int) or not 0 < need <= capacity:
            raise ValueError(f"capacity ({capacity}) must be an int >= need ({need}) >= 1")

    def __init__(self, capacity: int, *, need: int):
        self._capacity = capacity
        self._need = need
        super().__init__({
            "take": In(range(capacity + 1)),
            "free": In(stream.Signature(unsigned(16), always_ready=True)),
            "ok": Out(1, init=1),
        })

    @property
    def capacity(self) -> int:
        return self._capacity

    def elaborate(self, platform):
        m = Module()
        credit = Signal(range(self._capacity + 1), init=self._capacity)
        returned = Mux(self.free.valid, self.free.payload, 0)
        credit_next = Signal(range(self._capacity + 1))
        m.d.comb += credit_next.eq(credit - self.take + returned)
        m.d.sync += [credit.eq(credit_next), self.ok.eq(credit_next >= self._need)]
        return m
