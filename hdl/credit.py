"""Result buffer credit: how many RESULT beats the multicast back-end can
still take."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
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
    take : In(1)
        ``beats`` are claimed this cycle (a RESULT decided). The caller
        decides only with ``ok`` high and claims at most ``need``.
    beats : In(range(capacity + 1))
        The beats claimed when ``take`` is high (ignored otherwise).
    free : In(stream, always_ready)
        Beats the back-end returns this cycle (``payload`` when ``valid``).
    ok : Out(1)
        Registered: the credit after the previous cycle's ``take`` and the
        ``free`` of the cycle before it is at least ``need``. High after
        reset.

    The beats returned are registered as they arrive (no logic between the
    back-end's registers and the sums) and counted a cycle later: ``ok``
    is conservative by that cycle, never optimistic. The credit register
    is updated every cycle with ``- beats`` (when ``take``) ``+`` the
    registered return; ``ok`` follows it with the same register stage. The
    register holds the credit less ``need``, so that ``ok`` is the sign of
    its next value (no compare after the sums). Both outcomes are computed
    from ``beats`` and the registered return alone, and ``take``
    selects between them: ``take`` is one multiplexer away from the
    registers.
    """

    @staticmethod
    def check(capacity: int, *, need: int) -> None:
        if not isinstance(capacity, int) or not isinstance(need, int) or not 0 < need <= capacity:
            raise ValueError(f"capacity ({capacity}) must be an int >= need ({need}) >= 1")

    def __init__(self, capacity: int, *, need: int):
        self._capacity = capacity
        self._need = need
        super().__init__({
            "take": In(1),
            "beats": In(range(capacity + 1)),
            "free": In(stream.Signature(unsigned(16), always_ready=True)),
            "ok": Out(1, init=1),
        })

    @property
    def capacity(self) -> int:
        return self._capacity

    def elaborate(self, platform):
        m = Module()
        cap, need = self._capacity, self._need
        # The credit is kept less ``need`` (``surplus``, signed): ``ok`` is
        # its next value's sign, with no compare after the sums.
        width = (cap + 1).bit_length() + 1
        surplus = Signal(signed(width), init=cap - need)
        returned = Signal(unsigned(width - 1))      # the beats returned a cycle ago
        m.d.sync += returned.eq(Mux(self.free.valid, self.free.payload, 0))
        kept = Signal(signed(width))         # no claim this cycle
        claimed = Signal(signed(width))      # ``beats`` claimed
        m.d.comb += [kept.eq(surplus + returned), claimed.eq(surplus + returned - self.beats)]
        m.d.sync += [surplus.eq(Mux(self.take, claimed, kept)),
                     self.ok.eq(~Mux(self.take, claimed[-1], kept[-1]))]
        return m
