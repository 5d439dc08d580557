"""RGMII to GMII: the DDR pins of an RGMII PHY as byte-wide GMII.

RGMII (v2.0) carries a GMII byte per 125 MHz clock on 4 data pins and one
control pin, both clock edges: the low nibble and ``dv`` (``en``) on the
rising edge, the high nibble and ``dv ^ er`` (``en ^ er``) on the falling
edge.

Two forms of the DDR registers: ``"generic"`` (a rising- and a
falling-edge register in Amaranth, for simulation) and ``"ecp5"``
(``IDDRX1F`` / ``ODDRX1F`` instances, the receive pins through ``DELAYG``
and the transmit clock through ``DELAYG`` when the PHY adds no delay).
"""

from __future__ import annotations

from amaranth.hdl import (
    C,
    Cat,
    ClockDomain,
    ClockSignal,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl.eth.layouts import GmiiRx, GmiiTx

FORMS = ("generic", "ecp5")
DELAY_TAP_S = 25e-12      # ECP5 DELAYG step


def _taps(delay_s: float) -> int:
    taps = round(delay_s / DELAY_TAP_S)
    if not 0 <= taps <= 127:
        raise ValueError(f"a delay of {delay_s * 1e9:.2f} ns does not fit in a DELAYG")
    return taps


class RgmiiRx(wiring.Component):
    """RGMII receive pins to GMII, in the domain ``domain``, which the
    parent defines, clocked by the PHY's RXC.

    Parameters
    ----------
    domain : str
        Name of the receive clock domain.
    form : "generic" or "ecp5"
    rx_delay : float
        ECP5: seconds of input delay on ``rxd`` and ``rx_ctl`` (0 when the
        PHY delays ``rxc`` itself).

    Ports
    -----
    rxd, rx_ctl : In
        The pins (RXC is the domain's clock).
    gmii : Out(GmiiRx)
        In ``domain``: the byte whose low nibble was on the pins at a rising
        edge of ``rxc`` and high nibble at the following falling edge, two
        rising edges later (one with the ECP5 form's IDDRX1F register), so a
        frame keeps its bytes, ``dv`` and ``er``, one per cycle.
    """

    def __init__(self, *, domain: str = "eth_rx", form: str = "generic",
                 rx_delay: float = 0.0):
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, not {form!r}")
        self._domain, self._form, self._taps = domain, form, _taps(rx_delay)
        super().__init__({"rxd": In(4), "rx_ctl": In(1), "gmii": Out(GmiiRx)})

    def elaborate(self, platform):
        m = Module()
        d = self._domain
        pins = Cat(self.rxd, self.rx_ctl)
        rise, fall = Signal(5), Signal(5)      # both aligned to a rising edge
        if self._form == "generic":
            neg = ClockDomain(d + "_neg", clk_edge="neg", reset_less=True)
            m.domains += neg
            m.d.comb += neg.clk.eq(ClockSignal(d))
            r, f = Signal(5), Signal(5)
            m.d[d] += r.eq(pins)
            m.d[d + "_neg"] += f.eq(pins)
            m.d[d] += [rise.eq(r), fall.eq(f)]
        else:
            for i in range(5):
                pin = pins[i]
                if self._taps:
                    delayed = Signal(name=f"rx_delayed{i}")
                    m.submodules[f"rx_delay{i}"] = Instance(
                        "DELAYG", p_DEL_MODE="USER_DEFINED", p_DEL_VALUE=self._taps,
                        i_A=pin, o_Z=delayed)
                    pin = delayed
                m.submodules[f"iddr{i}"] = Instance(
                    "IDDRX1F", i_D=pin, i_SCLK=ClockSignal(d), i_RST=C(0, 1),
                    o_Q0=rise[i], o_Q1=fall[i])
        # (without reset, like the IDDRs: the pins' byte, every cycle; the
        # domain's reset net need not reach the pins)
        data, dv, er = (Signal(8, reset_less=True, name="rx_data_q"),
                        Signal(reset_less=True, name="rx_dv_q"),
                        Signal(reset_less=True, name="rx_er_q"))
        m.d[d] += [data.eq(Cat(rise[:4], fall[:4])), dv.eq(rise[4]), er.eq(rise[4] ^ fall[4])]
        m.d.comb += [self.gmii.data.eq(data), self.gmii.dv.eq(dv), self.gmii.er.eq(er)]
        return m


class RgmiiTx(wiring.Component):
    """GMII to RGMII transmit pins, in the (125 MHz) domain ``domain``.

    Parameters
    ----------
    domain : str
    form : "generic" or "ecp5"
    tx_delay : float
        ECP5: seconds of delay on ``txc`` (2 ns centres the clock in the
        data eye when the PHY adds no delay; 0 when it does).

    Ports
    -----
    gmii : In(GmiiTx)
        In ``domain``.
    txc, txd, tx_ctl : Out
        ``txc`` follows the domain's clock; the byte on ``gmii`` at a
        rising edge is on the pins from the next rising edge (generic
        form; the ECP5 form registers both nibbles once more, beside the
        pins, and puts them out one cycle later, so that no logic and no
        long route lies between a flip-flop and the ``ODDRX1F``): low
        nibble and ``en`` while ``txc`` is high, high nibble and
        ``en ^ er`` while it is low.
    """

    def __init__(self, *, domain: str = "eth_tx", form: str = "generic",
                 tx_delay: float = 0.0):
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, not {form!r}")
        self._domain, self._form, self._taps = domain, form, _taps(tx_delay)
        super().__init__({"gmii": In(GmiiTx), "txc": Out(1), "txd": Out(4), "tx_ctl": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self._domain
        g = self.gmii
        d0 = Cat(g.data[:4], g.en)              # rising edge
        d1 = Cat(g.data[4:], g.en ^ g.er)       # falling edge
        out = Cat(self.txd, self.tx_ctl)
        if self._form == "generic":
            r0, r1 = Signal(5), Signal(5)
            m.d[d] += [r0.eq(d0), r1.eq(d1)]
            clk = ClockSignal(d)
            m.d.comb += [out.eq(Mux(clk, r0, r1)), self.txc.eq(clk)]
        else:
            q0, q1 = Signal(5, name="tx_rise"), Signal(5, name="tx_fall")
            m.d[d] += [q0.eq(d0), q1.eq(d1)]
            for i in range(5):
                m.submodules[f"oddr{i}"] = Instance(
                    "ODDRX1F", i_D0=q0[i], i_D1=q1[i], i_SCLK=ClockSignal(d),
                    i_RST=ResetSignal(d), o_Q=out[i])
            txc = Signal()
            m.submodules.oddr_clk = Instance(
                "ODDRX1F", i_D0=C(1, 1), i_D1=C(0, 1), i_SCLK=ClockSignal(d),
                i_RST=ResetSignal(d), o_Q=txc)
            if self._taps:
                m.submodules.tx_delay = Instance(
                    "DELAYG", p_DEL_MODE="USER_DEFINED", p_DEL_VALUE=self._taps,
                    i_A=txc, o_Z=self.txc)
            else:
                m.d.comb += self.txc.eq(txc)
        return m


class RgmiiRxPins(wiring.Component):
    """:class:`RgmiiRx` (generic form) with its clock as a port, for the
    pin-level benches: ``rxc``, ``rxd``, ``rx_ctl`` in, GMII out in the
    ``rxc`` domain."""

    def __init__(self):
        super().__init__({"rxc": In(1), "rxd": In(4), "rx_ctl": In(1), "gmii": Out(GmiiRx)})

    def elaborate(self, platform):
        m = Module()
        m.domains.rx = ClockDomain("rx", reset_less=True)
        m.d.comb += ClockSignal("rx").eq(self.rxc)
        m.submodules.rx = rx = RgmiiRx(domain="rx")
        m.d.comb += [rx.rxd.eq(self.rxd), rx.rx_ctl.eq(self.rx_ctl),
                     self.gmii.dv.eq(rx.gmii.dv), self.gmii.er.eq(rx.gmii.er),
                     self.gmii.data.eq(rx.gmii.data)]
        return m
