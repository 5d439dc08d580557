"""UART transmitter and receiver, 8 data bits, no parity, one stop bit
(8N1), least significant bit first; the line idles high.

``divisor`` is clock cycles per bit (clock frequency / baud rate, rounded).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from netagg.hdl.checked import CheckedComponent


def divisor_for(clk_hz: float, baud: int) -> int:
    """Cycles per bit for ``baud`` at ``clk_hz``; ValueError if the rate is
    off by more than 2 % (a receiver samples mid-bit; 2 % keeps the stop bit
    within a quarter bit)."""
    if baud <= 0 or clk_hz <= 0:
        raise ValueError("clock and baud rate must be positive")
    div = round(clk_hz / baud)
    if div < 4:
        raise ValueError(f"baud {baud} is too fast for a {clk_hz / 1e6:g} MHz clock "
                         "(needs at least 4 cycles per bit)")
    error = abs(clk_hz / div - baud) / baud
    if error > 0.02:
        raise ValueError(f"baud {baud} at {clk_hz / 1e6:g} MHz is off by {100 * error:.1f} %")
    return div


def check_divisor(divisor: int) -> None:
    """Raise ``ValueError`` unless ``divisor`` (clock cycles per bit) is usable."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 4:
        raise ValueError(f"divisor must be an integer >= 4 (cycles per bit), not {divisor!r}")


class UARTTx(CheckedComponent):
    """Sends each byte of ``i`` as one 8N1 character on ``tx``.

    Throughput: one byte per 10 bit times; ``i.ready`` is high when idle.
    ``busy`` is high while a character is on the line.
    """

    check = staticmethod(check_divisor)

    def __init__(self, divisor: int):
        self._divisor = divisor
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    @property
    def divisor(self) -> int:
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self._divisor))
        shreg = Signal(10, init=0x3FF)     # stop, data 7..0, start (sent LSB first)
        bits = Signal(range(11))
        m.d.comb += [self.tx.eq(shreg[0]), self.busy.eq(bits != 0),
                     self.i.ready.eq(bits == 0)]
        with m.If(bits == 0):
            with m.If(self.i.valid):
                m.d.sync += [shreg.eq((1 << 9) | (self.i.payload << 1)), bits.eq(10),
                             timer.eq(self._divisor - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [shreg.eq((1 << 9) | (shreg >> 1)), bits.eq(bits - 1),
                         timer.eq(self._divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


class UARTRx(CheckedComponent):
    """Receives 8N1 characters from ``rx`` (synchronised here) as bytes on ``o``.

    A byte is offered on ``o`` from the middle of its stop bit until taken;
    a character that ends while the previous byte is still offered is lost
    and pulses ``overrun``; a character whose stop bit is low is dropped and
    pulses ``frame_error``.
    """

    check = staticmethod(check_divisor)

    def __init__(self, divisor: int):
        self._divisor = divisor
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "frame_error": Out(1),
            "overrun": Out(1),
        })

    @property
    def divisor(self) -> int:
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        div = self._divisor
        rx = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(div))
        shreg = Signal(8)
        bits = Signal(range(9))

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += [self.frame_error.eq(0), self.overrun.eq(0)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(div // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(rx):                    # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [timer.eq(div - 1), bits.eq(8)]
                        m.next = "DATA"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shreg.eq((rx << 7) | (shreg >> 1)), bits.eq(bits - 1),
                                 timer.eq(div - 1)]
                    with m.If(bits == 1):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(~rx):
                        m.d.sync += self.frame_error.eq(1)
                        m.next = "BREAK"
                    with m.Else():
                        with m.If(self.o.valid & ~self.o.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                        m.next = "IDLE"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("BREAK"):                    # wait for the line to idle
                with m.If(rx):
                    m.next = "IDLE"
        return m
