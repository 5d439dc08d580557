# amaranth: UnusedElaboratable=no
"""The GMII MACs (netagg.hdl.eth.mac_rx, mac_tx) in amaranth.sim against the
framing model (netagg.frames): transmit framing, padding, FCS and gap; every
receive status in the model's order; transmit looped into receive.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from eth_tb import GmiiMonitor, gmii_send

from netagg import frames as fr
from netagg.hdl.eth.layouts import RxStatus
from netagg.hdl.eth.mac_rx import MacRx
from netagg.hdl.eth.mac_tx import MacTx
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.eth_model import FrontEnd

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
STATUS_OF_REASON = {None: RxStatus.OK, "drop_runt": RxStatus.RUNT,
                    "drop_too_long": RxStatus.TOO_LONG, "drop_fcs": RxStatus.FCS}


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def model_status(wire: bytes, rx_error: bool = False) -> RxStatus:
    fe = FrontEnd(Params(), JobTable.from_dict({"jobs": []}, Params()))
    return STATUS_OF_REASON[fe._drop_reason(wire, False, rx_error)]


def send_frames(dut, frames, *, stall=0.0, seed=SEED, max_cycles=200_000):
    """Push ``frames`` through a MacTx (random source gaps between frames);
    returns the monitor."""
    rng = random.Random(seed)
    mon = GmiiMonitor(dut.gmii)

    async def source(ctx):
        for f in frames:
            while rng.random() < stall:
                await ctx.tick()
            for i, byte in enumerate(f):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.data, byte)
                ctx.set(dut.i.payload.last, i == len(f) - 1)
                await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
        for _ in range(64):
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(source)
    sim.add_process(mon.run)
    sim.run()
    assert not mon.errors
    return mon


def test_tx_framing():
    rng = random.Random(SEED)
    sizes = [1, 14, 59, 60, 61, 200, 1514] + [rng.randrange(1, 1515) for _ in range(5)]
    frames = [rng.randbytes(n) for n in sizes]
    mon = send_frames(MacTx(), frames)
    assert [w for w, _, _ in mon.frames] == [fr.with_fcs(f) for f in frames]
    assert not any(er for _, _, er in mon.frames)
    # Offered back to back: exactly the minimum gap between frames.
    assert [g for _, g, _ in mon.frames[1:]] == [12] * (len(frames) - 1)


def test_tx_gap_parameter():
    mon = send_frames(MacTx(gap=20), [bytes(60)] * 3)
    assert [g for _, g, _ in mon.frames[1:]] == [20, 20]
    with pytest.raises(ValueError):
        MacTx(gap=11)


def receive(dut, cases, *, gap=12):
    """Drive (wire, er_at, preamble) cases into a MacRx; returns the frames
    it output as (bytes, status)."""
    got, cur = [], bytearray()

    async def driver(ctx):
        for wire, er_at, preamble in cases:
            await gmii_send(ctx, dut.gmii, wire, gap=gap, er_at=er_at, preamble=preamble)
        for _ in range(4):
            await ctx.tick()

    async def monitor(ctx):
        async for _, _, valid, data, last, status in ctx.tick().sample(
                dut.o.valid, dut.o.payload.data, dut.o.payload.last, dut.o.payload.status):
            if valid:
                cur.append(data)
                if last:
                    got.append((bytes(cur), RxStatus(status)))
                    cur.clear()

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(driver)
    sim.add_process(monitor)
    sim.run()
    return got


def test_rx_status():
    rng = random.Random(SEED)
    good = [fr.with_fcs(rng.randbytes(n)) for n in (60, 61, 100, 1514)]
    runt = rng.randbytes(59)
    cases = [(w, None, b"\x55" * 7 + b"\xd5") for w in good]
    cases += [
        (runt + fr.fcs(runt), None, b"\x55" * 7 + b"\xd5"),                 # 63 bytes
        (fr.with_fcs(rng.randbytes(1515)), None, b"\x55" * 7 + b"\xd5"),    # 1519
        (good[1][:-1] + bytes([good[1][-1] ^ 0x80]), None, b"\x55" * 7 + b"\xd5"),
        (good[2], 17, b"\x55" * 7 + b"\xd5"),                               # GMII er
        (good[0], None, b"\xd5"),                                          # short preamble
        (good[3][:-5] + bytes([good[3][-5] ^ 1]) + good[3][-4:], None, b"\x55\xd5"),
    ]
    got = receive(MacRx(), cases)
    assert len(got) == len(cases)
    for (wire, er_at, _), (data, status) in zip(cases, got, strict=True):
        assert data == wire
        assert status == model_status(wire, er_at is not None)
    assert {s for _, s in got} == set(RxStatus)


def test_rx_skips_frame_without_sfd():
    wire = fr.with_fcs(bytes(range(60)))
    got = receive(MacRx(), [(wire, None, b"\x55\x55\x12"), (wire, None, b"\x55\xd5")])
    # The first frame's bytes after a non-SFD byte are not a frame.
    assert got == [(wire, RxStatus.OK)]


def test_tx_into_rx():
    rng = random.Random(SEED + 1)
    frames = [rng.randbytes(rng.randrange(1, 1515)) for _ in range(6)]
    m = Module()
    m.submodules.tx = tx = MacTx()
    m.submodules.rx = rx = MacRx()
    m.d.comb += [rx.gmii.dv.eq(tx.gmii.en), rx.gmii.er.eq(tx.gmii.er),
                 rx.gmii.data.eq(tx.gmii.data)]
    got, cur = [], bytearray()

    async def source(ctx):
        for f in frames:
            for i, byte in enumerate(f):
                ctx.set(tx.i.valid, 1)
                ctx.set(tx.i.payload.data, byte)
                ctx.set(tx.i.payload.last, i == len(f) - 1)
                await ctx.tick().until(tx.i.ready)
            ctx.set(tx.i.valid, 0)
        for _ in range(40):
            await ctx.tick()

    async def monitor(ctx):
        async for _, _, valid, data, last, status in ctx.tick().sample(
                rx.o.valid, rx.o.payload.data, rx.o.payload.last, rx.o.payload.status):
            if valid:
                cur.append(data)
                if last:
                    got.append((bytes(cur), RxStatus(status)))
                    cur.clear()

    sim = Simulator(m)
    sim.add_clock(8e-9)
    sim.add_testbench(source)
    sim.add_process(monitor)
    sim.run()
    assert got == [(fr.with_fcs(f), RxStatus.OK) for f in frames]
