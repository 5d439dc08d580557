# amaranth: UnusedElaboratable=no
"""hdl/fifo.BufferedFIFO and hdl/ram.registered_read: the FIFO behaves
cycle for cycle like Amaranth's SyncFIFOBuffered (the reference) under
random writes and reads, and a read register needs a no_rw_check memory."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory

from netagg.hdl.fifo import BufferedFIFO
from netagg.hdl.ram import registered_read
from netagg.sim.drive import simulate


@pytest.mark.parametrize("depth", [2, 3, 5, 8, 16])
def test_same_cycles_as_syncfifobuffered(depth):
    m = Module()
    m.submodules.dut = dut = BufferedFIFO(width=12, depth=depth)
    m.submodules.ref = ref = SyncFIFOBuffered(width=12, depth=depth)
    rng = random.Random(depth)
    seen = []

    async def tb(ctx):
        for cycle in range(600):
            busy = (cycle // 100) % 2          # phases of mostly writes, mostly reads
            w_en = rng.random() < (0.8 if busy else 0.4)
            r_en = rng.random() < (0.4 if busy else 0.8)
            data = rng.randrange(1 << 12)
            for f in (dut, ref):
                ctx.set(f.w_en, w_en)
                ctx.set(f.w_data, data)
                ctx.set(f.r_en, r_en)
            got = [ctx.get(f.w_rdy) for f in (dut, ref)]
            assert got[0] == got[1], cycle
            got = [ctx.get(f.r_rdy) for f in (dut, ref)]
            assert got[0] == got[1], cycle
            assert ctx.get(dut.level) == ctx.get(ref.level), cycle
            if got[1]:
                assert ctx.get(dut.r_data) == ctx.get(ref.r_data), cycle
                if r_en:
                    seen.append(ctx.get(ref.r_data))
            await ctx.tick()

    simulate(m, tb)
    assert len(seen) > 100                      # entries did flow


def test_registered_read_needs_a_no_rw_check_memory():
    mem = Memory(shape=8, depth=4, init=[])
    with pytest.raises(ValueError, match="NO_RW_CHECK"):
        registered_read(None, mem, 0, name="x")   # refused before it builds anything


@pytest.mark.parametrize("periods", [(8e-9, 30e-9), (30e-9, 8e-9), (8e-9, 8.3e-9)])
@pytest.mark.parametrize("depth", [4, 16])
def test_registered_async_fifo_delivers_everything_in_order(periods, depth):
    """RegisteredAsyncFIFO between two clocks (write faster, slower, almost
    equal), random enables on both sides: every entry written comes out
    once, in order; a writer that never reads ``w_rdy`` low never writes
    into a full FIFO, and the FIFO holds ``depth`` entries (``depth - 1``
    stored, one in the output register) when the reader stops."""
    from amaranth.hdl import ClockDomain
    from amaranth.sim import Simulator

    from netagg.hdl.fifo import RegisteredAsyncFIFO

    seed = depth * 7 + int(periods[0] * 1e9)
    print(f"seed={seed}")
    rng = random.Random(seed)
    m = Module()
    m.domains.write = ClockDomain("write")
    m.domains.read = ClockDomain("read")
    m.submodules.dut = dut = RegisteredAsyncFIFO(width=10, depth=depth)
    sent, got = [], []
    n = 300
    state = {"stop_reads": False, "max_level": 0}

    async def writer(ctx):
        for i in range(n):
            if i == n // 2:
                state["stop_reads"] = True
            ctx.set(dut.w_data, (i * 37 + 5) & 0x3FF)
            ctx.set(dut.w_en, 1)
            blocked = 0
            while True:
                _, _, rdy = await ctx.tick("write").sample(dut.w_rdy)
                if rdy:
                    break
                blocked += 1
                if state["stop_reads"] and blocked == 40:
                    state["max_level"] = len(sent) - len(got)
                    state["stop_reads"] = False
            sent.append((i * 37 + 5) & 0x3FF)
            ctx.set(dut.w_en, 0)
            while rng.random() < 0.3:
                await ctx.tick("write")
        ctx.set(dut.w_en, 0)

    async def reader(ctx):
        idle = 0
        while len(got) < n and idle < 500:
            en = not state["stop_reads"] and rng.random() < 0.7
            ctx.set(dut.r_en, en)
            _, _, rdy, data = await ctx.tick("read").sample(dut.r_rdy, dut.r_data)
            if en and rdy:
                got.append(data)
                idle = 0
            else:
                idle += 1

    sim = Simulator(m)
    sim.add_clock(periods[0], domain="write")
    sim.add_clock(periods[1], domain="read")
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    assert got == sent and len(got) == n
    assert state["max_level"] == depth
