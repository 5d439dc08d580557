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
