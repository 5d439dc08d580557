# amaranth: UnusedElaboratable=no
"""The frame buffer (netagg.hdl.eth.frame_buffer) in amaranth.sim: behind a
MacRx (drop mode) every frame the model delivers comes out whole, FCS
stripped, and under backpressure a frame is either whole or counted as an
overflow, never partial; in stall mode nothing is lost.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from eth_tb import gmii_send

from netagg import frames as fr
from netagg.hdl.eth.frame_buffer import FrameBuffer
from netagg.hdl.eth.layouts import RxStatus
from netagg.hdl.eth.mac_rx import MacRx

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def rx_chain(depth, frames_n):
    m = Module()
    m.submodules.mac = mac = MacRx()
    m.submodules.buf = buf = FrameBuffer(depth=depth, frames=frames_n, strip=4, mode="drop")
    m.d.comb += [buf.w.valid.eq(mac.o.valid), buf.w.payload.data.eq(mac.o.payload.data),
                 buf.w.payload.last.eq(mac.o.payload.last),
                 buf.w.payload.drop.eq(mac.o.payload.status != RxStatus.OK)]
    return m, mac, buf


def run_rx(wires, *, depth=4096, frames_n=32, backpressure=0.0, seed=SEED):
    m, mac, buf = rx_chain(depth, frames_n)
    rng = random.Random(seed)
    out, events = [], []
    done = {"tx": False}

    async def driver(ctx):
        for w in wires:
            await gmii_send(ctx, mac.gmii, w)
        done["tx"] = True

    async def writes(ctx):
        async for _, _, valid, last, ovf, com in ctx.tick().sample(
                buf.w.valid, buf.w.payload.last, buf.overflow, buf.committed):
            if valid and last:
                events.append("overflow" if ovf else "committed" if com else "dropped")

    run_buffer(m, buf, driver, out, stop=lambda idle: done["tx"] and idle >= 200,
               ready=lambda: rng.random() >= backpressure, processes=[writes])
    return out, events


def mixed_frames(rng, n):
    wires = []
    for _ in range(n):
        r = rng.random()
        f = rng.randbytes(rng.randrange(60, 1515) if r < 0.3 else rng.randrange(60, 200))
        w = fr.with_fcs(f)
        if r < 0.1:
            w = w[:-1] + bytes([w[-1] ^ 4])
        elif r < 0.15:
            w = w[:rng.randrange(1, 64)]
        wires.append(w)
    return wires


def run_buffer(top, buf, writer, out, *, stop, ready=lambda: True, processes=()):
    """Simulate ``top`` (8 ns clock) with ``writer`` feeding the
    FrameBuffer ``buf`` and a reader appending every frame read to ``out``
    (``r.ready`` = ``ready()`` each cycle; every byte's ``length`` checked)
    until ``stop(idle cycles)``; no partial frame may be left."""
    cur = bytearray()

    async def reader(ctx):
        idle = 0
        while not stop(idle):
            ctx.set(buf.r.ready, ready())
            _, _, valid, rdy, data, last, length = await ctx.tick().sample(
                buf.r.valid, buf.r.ready, buf.r.payload.data, buf.r.payload.last,
                buf.r.payload.length)
            idle = 0 if valid else idle + 1
            if valid and rdy:
                cur.append(data)
                if last:
                    assert length == len(cur)
                    out.append(bytes(cur))
                    cur.clear()

    sim = Simulator(top)
    sim.add_clock(8e-9)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    for p in processes:
        sim.add_process(p)
    sim.run()
    assert not cur, "a partial frame came out"


def test_delivers_model_frames():
    rng = random.Random(SEED)
    wires = mixed_frames(rng, 30)
    out, events = run_rx(wires)
    good = [w[:-4] for w in wires if 64 <= len(w) <= 1518 and fr.fcs_ok(w)]
    assert out == good
    assert events.count("overflow") == 0 and events.count("committed") == len(good)


@pytest.mark.parametrize("backpressure", [0.6, 0.9])
def test_overflow_whole_frames(backpressure):
    rng = random.Random(SEED + int(backpressure * 10))
    wires = [fr.with_fcs(rng.randbytes(rng.randrange(60, 600))) for _ in range(30)]
    wires[5] = wires[5][:-1] + bytes([wires[5][-1] ^ 1])
    out, events = run_rx(wires, depth=2048, frames_n=4, backpressure=backpressure)
    assert len(events) == len(wires)
    kept = [w[:-4] for w, e in zip(wires, events, strict=True) if e == "committed"]
    assert out == kept
    assert events[5] == "dropped"
    assert events.count("overflow") > 0
    # every good frame is either kept or counted
    assert all(e != "dropped" for i, e in enumerate(events) if i != 5)


def test_stall_mode_loses_nothing():
    rng = random.Random(SEED)
    frames = [rng.randbytes(rng.randrange(1, 1515)) for _ in range(12)]
    dut = FrameBuffer(depth=2048, frames=4, mode="stall")
    out = []

    async def writer(ctx):
        for f in frames:
            for i, b in enumerate(f):
                while rng.random() < 0.2:
                    ctx.set(dut.w.valid, 0)
                    await ctx.tick()
                ctx.set(dut.w.valid, 1)
                ctx.set(dut.w.payload.data, b)
                ctx.set(dut.w.payload.last, i == len(f) - 1)
                await ctx.tick().until(dut.w.ready)
        ctx.set(dut.w.valid, 0)

    run_buffer(dut, dut, writer, out, stop=lambda idle: len(out) == len(frames) or idle >= 5000,
               ready=lambda: rng.random() < 0.5)
    assert out == frames


def test_parameters_checked():
    for kw in ({"depth": 1000}, {"depth": 1024}, {"mode": "x"}, {"strip": 9}, {"frames": 0}):
        with pytest.raises(ValueError):
            FrameBuffer(**kw)


def test_drop_mode_byte_right_after_a_last_byte():
    """A frame's end is carried out the cycle after its last byte: a frame
    starting in that cycle (no gap; a MAC always leaves one) overflows
    whole, and the frames around it are unharmed."""
    rng = random.Random(SEED)
    frames = [rng.randbytes(rng.randrange(70, 300)) for _ in range(4)]
    gaps = [3, 0, 5, 1]          # idle cycles before each frame
    dut = FrameBuffer(depth=2048, frames=4, strip=4, mode="drop")
    out, events = [], []

    async def writer(ctx):
        for f, gap in zip(frames, gaps, strict=True):
            ctx.set(dut.w.valid, 0)
            for _ in range(gap):
                await ctx.tick()
            for i, b in enumerate(f):
                ctx.set(dut.w.valid, 1)
                ctx.set(dut.w.payload.data, b)
                ctx.set(dut.w.payload.last, i == len(f) - 1)
                _, _, ovf, com = await ctx.tick().sample(dut.overflow, dut.committed)
                if i == len(f) - 1:
                    events.append("overflow" if ovf else "committed" if com else "dropped")
        ctx.set(dut.w.valid, 0)

    run_buffer(dut, dut, writer, out, stop=lambda idle: idle >= 500)
    assert events == ["committed", "overflow", "committed", "committed"]
    assert out == [frames[0][:-4], frames[2][:-4], frames[3][:-4]]
