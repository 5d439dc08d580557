"""Board tops (docs/boards.md): the whole design runs in the board's clock
domain (ULX3S 25 MHz, Colorlight 25 MHz, iCEBreaker 12 MHz).

- :class:`BridgeTop` (ULX3S, iCEBreaker): the UART bridge on the FTDI
  serial port; LEDs: ready (job table loaded), busy (core not idle),
  error (a bridge counter counted).
- :class:`SelfTestTop` (Colorlight 5A-75B): the on-chip self-test; its one
  LED blinks slowly while every pass succeeds, fast once a check failed,
  and stays dark until the first pass completes.

Which board gets which top, with which LEDs, is :mod:`netagg.boards.registry`.
"""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import io

from netagg.boards.bridge import UARTBridge
from netagg.boards.selftest import SelfTest
from netagg.boards.uart import divisor_for
from netagg.params import Params


class BridgeTop(Elaboratable):
    """A UART bridge on the platform's ``uart`` 0 and LEDs."""

    def __init__(self, params: Params, *, fp_stages=None, jobs=None, baud: int = 115200,
                 leds=(("led", 0), ("led", 1), ("led", 2)), acc_ram: str = "memory"):
        """``leds``: platform resources ``(name, number)`` for ready, busy
        and error (``None`` for one the board lacks); ``acc_ram``: the
        core's accumulator form (:class:`~netagg.hdl.core.NetaggCore`)."""
        self.params = params
        self.fp_stages = fp_stages
        self.acc_ram = acc_ram
        self.jobs = jobs
        self.baud = baud
        self.leds = leds

    def elaborate(self, platform):
        m = Module()
        clk_hz = platform.default_clk_frequency
        bridge = UARTBridge(self.params, divisor_for(clk_hz, self.baud),
                            fp_stages=self.fp_stages, jobs=self.jobs, acc_ram=self.acc_ram)
        m.submodules.bridge = bridge
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [bridge.rx.eq(rx.i), tx.o.eq(bridge.tx)]
        for i, (led, sig) in enumerate(zip(self.leds, (bridge.ready, bridge.busy, bridge.error),
                                           strict=True)):
            if led is not None:
                m.submodules[f"led{i}"] = buf = io.Buffer("o", platform.request(*led, dir="-"))
                m.d.comb += buf.o.eq(sig)
        return m


class SelfTestTop(Elaboratable):
    """The self-test on one LED (``led``: a platform resource ``(name, number)``)."""

    def __init__(self, params: Params, *, fp_stages=None, led=("led", 0)):
        self.params = params
        self.led = led
        self.selftest = SelfTest(params, fp_stages=fp_stages)

    def elaborate(self, platform):
        m = Module()
        m.submodules.selftest = st = self.selftest
        blink = Signal(24)
        m.d.sync += blink.eq(blink + 1)
        m.submodules.led = led = io.Buffer("o", platform.request(*self.led, dir="-"))
        with m.If(st.failed):
            m.d.comb += led.o.eq(blink[-3])          # ~6 Hz at 25 MHz
        with m.Elif(st.passes != 0):
            m.d.comb += led.o.eq(blink[-1])          # ~1.5 Hz
        return m


def write_bridge_verilog(params: Params, path, *, divisor: int, fp_stages=None, jobs=None):
    """Verilog of the bridge logic of a board top (module ``uart_bridge``:
    ``clk``, ``rst``, ``rx``, ``tx``, ``ready``, ``busy``, ``error``), for
    simulation."""
    bridge = UARTBridge(params, divisor, fp_stages=fp_stages, jobs=jobs)
    with open(path, "w") as f:
        f.write(verilog.convert(bridge, name="uart_bridge", emit_src=False))

