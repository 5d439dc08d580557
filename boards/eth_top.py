"""The Colorlight 5A-75B as a two-port netagg Ethernet switch (docs/ethernet.md,
docs/boards.md): ``netagg build --board colorlight-5a75b``.

Clocks: the 25 MHz oscillator feeds an ECP5 ``EHXPLLL``: 125 MHz ``eth_tx``
(both ports' RGMII transmit clock, as two domains ``eth0_tx``, ``eth1_tx``
with a reset each) and the core clock ``sync`` (33.33 MHz by
default); each PHY's 125 MHz receive clock is its own domain ``eth0_rx``,
``eth1_rx``. The core domain is held in reset until the PLL locks; the PHYs
(one shared reset pin) are held in reset for 20 ms after configuration, then
released, and the switch starts 20 ms later (what their start-up needs;
MDIO is left idle: the PHYs run with their strapped defaults,
autonegotiating 1000BASE-T).

With ``ctrl_key`` (``netagg build --ctrl-key HEX``) the switch carries the
UDP control plane (:class:`netagg.hdl.eth.control.ControlPlane`) at
``ctrl_port``; ``jobs`` (``--jobs-config``) is then the table at start-up,
which the control plane can rewrite.

LED (the board's one, ``led`` 0): on while running; off for ~80 ms after any
frame is received or sent (activity); blinking at ~6 Hz for a second after
any frame was dropped by a MAC (bad FCS, runt, too long, overflow).
"""

from __future__ import annotations

from amaranth.build import Attrs, Pins, Resource, Subsignal
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from netagg.ctrlproto import DEFAULT_CTRL_PORT
from netagg.hdl.eth.rgmii import RgmiiRx, RgmiiTx
from netagg.hdl.eth.switch import EthernetSwitch
from netagg.params import Params

CORE_DIV = 15
"""The core clock is the PLL's VCO (500 MHz) divided by this: 33.33 MHz
(docs/ethernet.md, "Board build")."""
ETH_MHZ = 125

# Port 1's data and clock pins (amaranth-boards' "eth_rgmii" 1 shares its
# reset, MDC and MDIO pins with port 0, so both cannot be requested).
PORT1 = Resource("eth_rgmii_data", 1,
                 Subsignal("tx_clk", Pins("M12", dir="o")),
                 Subsignal("tx_ctl", Pins("R15", dir="o")),
                 Subsignal("tx_data", Pins("T14 R12 R13 R14", dir="o")),
                 Subsignal("rx_clk", Pins("M16", dir="i")),
                 Subsignal("rx_ctl", Pins("L15", dir="i")),
                 Subsignal("rx_data", Pins("P13 N13 P14 M15", dir="i")),
                 Attrs(IO_TYPE="LVCMOS33"))

# EHXPLLL: 25 MHz in, VCO 500 MHz, CLKOP 125 MHz (feedback), CLKOS 500 / DIV.
PLL_VCO_MHZ = 500
CORE_MHZ = PLL_VCO_MHZ / CORE_DIV


def switch_options(params: Params) -> dict:
    """The :class:`EthernetSwitch` options the board top adds: no message
    and RESULT queues. Each takes ~80 distributed-RAM cells a port at
    L = 2 (1300 LUTs for the four), which the 25F cannot spare beside the
    core for a routable design; at this core clock the byte-serial front
    end, not the queues, limits the ports (docs/ethernet.md, "Board
    build")."""
    return {"message_fifo": 0, "result_fifo": 0}


def domains_report(core_mhz: float = CORE_MHZ) -> list[dict]:
    """The clock domains the board top creates and their constraints."""
    return [{"domain": "sync", "what": "core, parsers, framers, counters",
             "constraint_mhz": round(core_mhz, 3)},
            {"domain": "eth_tx", "what": "RGMII transmit, both ports (eth0_tx, eth1_tx)",
             "constraint_mhz": ETH_MHZ},
            {"domain": "eth0_rx", "what": "RGMII receive, port 0", "constraint_mhz": ETH_MHZ},
            {"domain": "eth1_rx", "what": "RGMII receive, port 1", "constraint_mhz": ETH_MHZ}]


# The clock net nextpnr reports for each domain (the last dotted part of
# its name, without nextpnr's "$glbnet$"): the PLL outputs are named
# here, the receive clocks after their domains.
_CLOCK_NETS = {"clk": "sync", "clk_core": "sync", "eth_tx_clk": "eth_tx",
               "clk_eth_tx": "eth_tx", "eth0_tx_clk": "eth_tx", "eth1_tx_clk": "eth_tx",
               "eth0_rx_clk": "eth0_rx", "eth1_rx_clk": "eth1_rx",
               # the receive MACs' local domains (EthernetSwitch), same clocks
               "eth0_rx_mac_clk": "eth0_rx", "eth1_rx_mac_clk": "eth1_rx"}


def domains_timing(clocks: dict, core_mhz: float = CORE_MHZ) -> list[dict]:
    """:func:`domains_report` with each domain's ``clock`` (the nextpnr
    clock net), ``fmax_mhz`` and ``met`` from a build report's ``clocks``
    (``None`` where nextpnr reported no clock for the domain)."""
    found = {}
    for net, c in clocks.items():
        domain = _CLOCK_NETS.get(net.removeprefix("$glbnet$").rsplit(".", 1)[-1])
        if domain is not None:
            found[domain] = (net, c)
    out = []
    for d in domains_report(core_mhz):
        net, c = found.get(d["domain"], (None, None))
        out.append({**d, "clock": net, "fmax_mhz": c["fmax_mhz"] if c else None,
                    "met": bool(c and c["met"]
                                and c["constraint_mhz"] >= d["constraint_mhz"] - 0.01)})
    return out


class EthernetTop(Elaboratable):
    """The two-port switch on the Colorlight 5A-75B (see the module docstring)."""

    def __init__(self, params: Params, *, fp_stages=None, jobs=None,
                 core_mhz: float = CORE_MHZ,
                 rx_delay: float = 2e-9, tx_delay: float = 0.0, ctrl_key: int | None = None,
                 ctrl_port: int | None = None):
        div = round(PLL_VCO_MHZ / core_mhz) if core_mhz > 0 else 0
        if not 1 <= div <= 128 or abs(PLL_VCO_MHZ / div - core_mhz) > 1e-6:
            raise ValueError(f"the core clock must be {PLL_VCO_MHZ} MHz divided by an integer "
                             f"1..128, not {core_mhz} MHz")
        self.core_div = div
        self.params, self.fp_stages, self.jobs = params, fp_stages, jobs
        self.core_mhz, self.rx_delay, self.tx_delay = core_mhz, rx_delay, tx_delay
        self.ctrl_key = ctrl_key
        self.ctrl_port = DEFAULT_CTRL_PORT if ctrl_port is None else ctrl_port
        self.switch = EthernetSwitch(params, ports=2, rx_domains=["eth0_rx", "eth1_rx"],
                                     tx_domain=["eth0_tx", "eth1_tx"],
                                     fp_stages=fp_stages,
                                     ctrl_key=ctrl_key, ctrl_port=self.ctrl_port,
                                     # the frame buffers in DP16KD with OUTREG (125 MHz)
                                     ram="ecp5", **switch_options(params))

    def elaborate(self, platform):
        m = Module()
        platform.add_resources([PORT1])
        clk25 = platform.request("clk25", 0, dir="-")
        m.submodules.clk25 = clk_buf = io.Buffer("i", clk25)

        # PLL and clock domains.
        clkop, clkos = Signal(name="clk_eth_tx"), Signal(name="clk_core")
        locked = Signal(name="pll_locked")
        div = self.core_div
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI="25", a_FREQUENCY_PIN_CLKOP=str(ETH_MHZ),
            a_FREQUENCY_PIN_CLKOS=f"{self.core_mhz:.4f}", a_ICP_CURRENT="12",
            a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_CLKOP_ENABLE="ENABLED", p_CLKOS_ENABLE="ENABLED",
            p_CLKOP_DIV=PLL_VCO_MHZ // ETH_MHZ, p_CLKOP_CPHASE=PLL_VCO_MHZ // ETH_MHZ - 1,
            p_CLKOP_FPHASE=0, p_CLKOS_DIV=div, p_CLKOS_CPHASE=div - 1, p_CLKOS_FPHASE=0,
            p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=ETH_MHZ // 25, p_CLKI_DIV=1,
            i_CLKI=clk_buf.i, i_CLKFB=clkop, i_RST=0, i_STDBY=0, i_PHASESEL0=0,
            i_PHASESEL1=0, i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0, i_PLLWAKESYNC=0,
            i_ENCLKOP=0, o_CLKOP=clkop, o_CLKOS=clkos, o_LOCK=locked)
        m.domains.sync = ClockDomain("sync")
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += [ClockSignal("sync").eq(clkos), ClockSignal("por").eq(clk_buf.i)]
        # One transmit domain per port, both on the 125 MHz PLL output, each
        # with its own reset, placed by its port (one reset for both spanned
        # the die: 4.7 ns of routing at 125 MHz).
        for p in range(2):
            m.domains += ClockDomain(f"eth{p}_tx")
            m.d.comb += ClockSignal(f"eth{p}_tx").eq(clkop)
        # nextpnr derives the PLL outputs' constraints from the 25 MHz input.

        # Start-up: PHY reset for 20 ms, then 20 ms before the switch starts.
        ms20 = 25_000 * 20
        por = Signal(range(2 * ms20 + 1))
        phy_released, running = Signal(), Signal()
        with m.If(por != 2 * ms20):
            m.d.por += por.eq(por + 1)
        m.d.comb += [phy_released.eq(por >= ms20), running.eq((por == 2 * ms20) & locked)]
        m.submodules.rst_sync = ResetSynchronizer(~running, domain="sync")
        # Port 1's transmit reset is released one 25 MHz cycle after port
        # 0's: with the same input, synthesis merges the two synchronizers
        # back into one reset for both ports.
        running_late = Signal()
        m.d.por += running_late.eq(running)
        for p in range(2):
            m.submodules[f"rst_tx{p}"] = ResetSynchronizer(
                ~(running if p == 0 else running_late), domain=f"eth{p}_tx")
            cd = ClockDomain(f"eth{p}_rx")
            m.domains += cd
            m.submodules[f"rst_rx{p}"] = ResetSynchronizer(~running, domain=f"eth{p}_rx")

        eth0 = platform.request("eth_rgmii", 0, dir="-")
        eth1 = platform.request("eth_rgmii_data", 1, dir="-")
        for pins in (eth0, eth1):
            # On the RXC pad (FREQUENCY PORT): nextpnr carries it through the
            # input buffer to the clock net, whatever synthesis names that
            # net (a FREQUENCY NET on the domain's signal did not match it
            # and left the receive clocks at nextpnr's 12 MHz default).
            platform.add_clock_constraint(pins.rx_clk.io, ETH_MHZ * 1e6)
        m.submodules.phy_rst = phy_rst = io.Buffer("o", eth0.rst)
        m.submodules.mdc = mdc = io.Buffer("o", eth0.mdc)
        m.d.comb += [phy_rst.o.eq(~phy_released), mdc.o.eq(0)]
        sw = self.switch
        m.submodules.switch = sw
        for p, pins in enumerate((eth0, eth1)):
            bufs = {}
            for name, direction in (("rx_clk", "i"), ("rx_ctl", "i"), ("rx_data", "i"),
                                    ("tx_clk", "o"), ("tx_ctl", "o"), ("tx_data", "o")):
                bufs[name] = io.Buffer(direction, getattr(pins, name))
                m.submodules[f"eth{p}_{name}"] = bufs[name]
            rx = RgmiiRx(domain=f"eth{p}_rx", form="ecp5", rx_delay=self.rx_delay)
            tx = RgmiiTx(domain=f"eth{p}_tx", form="ecp5", tx_delay=self.tx_delay)
            m.submodules[f"rgmii_rx{p}"] = rx
            m.submodules[f"rgmii_tx{p}"] = tx
            m.d.comb += [ClockSignal(f"eth{p}_rx").eq(bufs["rx_clk"].i),
                         rx.rxd.eq(bufs["rx_data"].i),
                         rx.rx_ctl.eq(bufs["rx_ctl"].i),
                         sw.rx[p].dv.eq(rx.gmii.dv), sw.rx[p].er.eq(rx.gmii.er),
                         sw.rx[p].data.eq(rx.gmii.data),
                         tx.gmii.en.eq(sw.tx[p].en), tx.gmii.er.eq(sw.tx[p].er),
                         tx.gmii.data.eq(sw.tx[p].data),
                         bufs["tx_clk"].o.eq(tx.txc), bufs["tx_ctl"].o.eq(tx.tx_ctl),
                         bufs["tx_data"].o.eq(tx.txd)]

        # Jobs from --jobs-config, written through the control port after reset.
        if self.jobs is not None:
            from netagg import regmap
            writes = regmap.job_writes(self.jobs)
            step = Signal(range(len(writes) + 1))
            with m.Switch(step):
                for i, (addr, value) in enumerate(writes):
                    with m.Case(i):
                        m.d.comb += [sw.ctrl_addr.eq(addr), sw.ctrl_wdata.eq(value),
                                     sw.ctrl_we.eq(1)]
            with m.If(step != len(writes)):
                m.d.sync += step.eq(step + 1)

        # LED: activity and errors, from the switch's counters' events.
        led = platform.request("led", 0, dir="-")
        m.submodules.led = led_buf = io.Buffer("o", led)
        ms80, s1 = round(self.core_mhz * 80_000), round(self.core_mhz * 1_000_000)
        activity = Signal(range(ms80 + 1))
        errors = Signal(range(s1 + 1))
        blink = Signal(23)
        m.d.sync += blink.eq(blink + 1)
        with m.If(sw.activity):
            m.d.sync += activity.eq(ms80)
        with m.Elif(activity != 0):
            m.d.sync += activity.eq(activity - 1)
        with m.If(sw.error):
            m.d.sync += errors.eq(s1)
        with m.Elif(errors != 0):
            m.d.sync += errors.eq(errors - 1)
        with m.If(errors != 0):
            m.d.comb += led_buf.o.eq(blink[-1])
        with m.Else():
            m.d.comb += led_buf.o.eq(running & (activity == 0))
        return m

    def summary(self, clocks: dict | None = None) -> dict:
        """The build report's ``ethernet`` entry; with the report's
        ``clocks``, each clock domain's Fmax against its constraint."""
        domains = domains_report(self.core_mhz) if clocks is None else \
            domains_timing(clocks, self.core_mhz)
        return {"ports": 2, "core_mhz": round(self.core_mhz, 3),
            "clock_domains": domains,
            "jobs_config": self.jobs.to_dict() if self.jobs else None,
            "control_plane": None if self.ctrl_key is None else {"udp_port": self.ctrl_port}}
