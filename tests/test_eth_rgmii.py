# amaranth: UnusedElaboratable=no
"""The RGMII layer (netagg.hdl.eth.rgmii) in amaranth.sim, generic form:
receive pins driven by an RGMII source written here (data centred between
the clock edges, as with a PHY's 2 ns clock delay), transmit pins sampled
at the quarter points; GMII bytes, dv/en and er as the RGMII v2.0 encoding
says. The ECP5 form is checked to instantiate IDDRX1F, ODDRX1F and DELAYG.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random

import pytest
from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, ClockSignal, Module, Signal
from amaranth.sim import Simulator

from netagg import frames as fr
from netagg.hdl.eth.rgmii import RgmiiRx, RgmiiTx

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
T = 8e-9


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def symbols(rng, n=300):
    """GMII (data, dv, er) per cycle: frames, idle, some errors."""
    out = []
    while len(out) < n:
        wire = b"\x55" * 7 + b"\xd5" + fr.with_fcs(rng.randbytes(rng.randrange(1, 80)))
        err = rng.randrange(len(wire)) if rng.random() < 0.3 else -1
        out += [(b, 1, int(i == err)) for i, b in enumerate(wire)]
        out += [(rng.getrandbits(8) if rng.random() < 0.2 else 0, 0, 0)] * 12
    return out


def test_rx_decodes_rgmii():
    rng = random.Random(SEED)
    syms = symbols(rng)
    m = Module()
    m.domains.rx = ClockDomain("rx", reset_less=True)
    m.submodules.dut = dut = RgmiiRx(domain="rx")
    rxc = Signal()
    m.d.comb += ClockSignal("rx").eq(rxc)
    got = []

    async def phy(ctx):
        for data, dv, er in syms + [(0, 0, 0)] * 4:
            ctx.set(dut.rxd, data & 0xF)
            ctx.set(dut.rx_ctl, dv)
            await ctx.delay(T / 4)
            ctx.set(rxc, 1)
            await ctx.delay(T / 4)
            ctx.set(dut.rxd, data >> 4)
            ctx.set(dut.rx_ctl, dv ^ er)
            await ctx.delay(T / 4)
            ctx.set(rxc, 0)
            await ctx.delay(T / 4)

    async def mac(ctx):
        async for _, _, data, dv, er in ctx.tick("rx").sample(
                dut.gmii.data, dut.gmii.dv, dut.gmii.er):
            got.append((data, dv, er))

    sim = Simulator(m)
    sim.add_testbench(phy)
    sim.add_process(mac)
    sim.run()
    # The stream arrives whole after a fixed latency.
    start = next(i for i, s in enumerate(got) if s[1])
    assert got[start:start + len(syms) - 1] == syms[:len(syms) - 1]


def test_tx_encodes_rgmii():
    rng = random.Random(SEED + 1)
    syms = symbols(rng)
    m = Module()
    m.domains.tx = ClockDomain("tx")
    m.submodules.dut = dut = RgmiiTx(domain="tx")
    seen = []

    async def mac(ctx):
        for data, en, er in syms:
            ctx.set(dut.gmii.data, data)
            ctx.set(dut.gmii.en, en)
            ctx.set(dut.gmii.er, er)
            await ctx.tick("tx")
        ctx.set(dut.gmii.en, 0)
        for _ in range(4):
            await ctx.tick("tx")

    async def phy(ctx):
        await ctx.delay(3 * T / 4)      # 2 ns after each edge (the first rising at T/2)
        while True:
            lo, ctl0, c0 = ctx.get(dut.txd), ctx.get(dut.tx_ctl), ctx.get(dut.txc)
            await ctx.delay(T / 2)
            hi, ctl1, c1 = ctx.get(dut.txd), ctx.get(dut.tx_ctl), ctx.get(dut.txc)
            await ctx.delay(T / 2)
            assert (c0, c1) == (1, 0)
            seen.append((lo | hi << 4, ctl0, ctl0 ^ ctl1))

    sim = Simulator(m)
    sim.add_clock(T, domain="tx")
    sim.add_testbench(mac)
    sim.add_testbench(phy, background=True)
    sim.run()
    start = next(i for i, s in enumerate(seen) if s[1])
    assert seen[start:start + len(syms)] == syms[next(i for i, s in enumerate(syms) if s[1]):]


def test_ecp5_form_uses_the_primitives():
    m = Module()
    m.domains.tx = ClockDomain("tx")
    m.domains.rx = ClockDomain("rx")
    m.submodules.rx = RgmiiRx(domain="rx", form="ecp5", rx_delay=2e-9)
    m.submodules.tx = RgmiiTx(domain="tx", form="ecp5", tx_delay=2e-9)
    text = rtlil.convert(m, ports=[])
    assert text.count("IDDRX1F") >= 5 and text.count("ODDRX1F") >= 6
    assert "DELAYG" in text and "80" in text
    with pytest.raises(ValueError):
        RgmiiRx(form="xilinx")
    with pytest.raises(ValueError):
        RgmiiTx(form="ecp5", tx_delay=5e-9)
