"""boards/uart.py: UARTTx -> UARTRx loopback in amaranth.sim at several
divisors, random bytes and gaps; the tx line format (start, 8 data bits
LSB first, stop); a framing error is flagged and the byte dropped."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module

from netagg.boards.uart import UARTRx, UARTTx, divisor_for
from netagg.sim.drive import send, simulate


def test_divisor_for():
    assert divisor_for(25e6, 115200) == 217
    assert divisor_for(12e6, 115200) == 104
    with pytest.raises(ValueError):
        divisor_for(12e6, 4_000_000)
    with pytest.raises(ValueError):
        UARTTx(3)


@pytest.mark.parametrize("div", [4, 7, 16])
def test_loopback(div):
    rng = random.Random(div)
    data = [rng.randrange(256) for _ in range(40)] + [0x00, 0xFF, 0xC0]
    m = Module()
    m.submodules.tx = tx = UARTTx(div)
    m.submodules.rx = rx = UARTRx(div)
    m.d.comb += rx.rx.eq(tx.tx)
    got = []

    async def feed(ctx):
        await send(ctx, tx.i, data, idle=lambda: rng.randrange(3))

    async def recv(ctx):
        ctx.set(rx.o.ready, 1)
        while len(got) < len(data):
            _, _, valid, b, fe, ov = await ctx.tick().sample(rx.o.valid, rx.o.payload,
                                                             rx.frame_error, rx.overrun)
            assert not fe and not ov
            if valid:
                got.append(b)

    simulate(m, recv, background=[feed])
    assert got == data


def test_tx_line_format():
    div = 5
    dut = UARTTx(div)
    line = []

    async def tb(ctx):
        ctx.set(dut.i.payload, 0xA5)
        ctx.set(dut.i.valid, 1)
        await ctx.tick()
        ctx.set(dut.i.valid, 0)
        for _ in range(10 * div + 4):
            line.append(ctx.get(dut.tx))
            await ctx.tick()

    simulate(dut, tb)
    bits = [line[div // 2 + k * div] for k in range(10)]
    assert bits == [0] + [(0xA5 >> i) & 1 for i in range(8)] + [1]
    assert line[-1] == 1


def test_frame_error_drops_byte():
    div = 4
    dut = UARTRx(div)
    flags = {"fe": 0, "valid": 0}

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        for bit in [0] + [1] * 8 + [0] + [0] * 6 + [1] * 4:       # stop bit low
            ctx.set(dut.rx, bit)
            for _ in range(div):
                await ctx.tick()
                flags["fe"] |= ctx.get(dut.frame_error)
                flags["valid"] |= ctx.get(dut.o.valid)

    simulate(dut, tb)
    assert flags == {"fe": 1, "valid": 0}
