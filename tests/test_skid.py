# amaranth: UnusedElaboratable=no
"""The stream register slices (netagg.hdl.skid) in amaranth.sim: under
random stalls on both sides every entry comes out once, in order; without
stalls it passes one entry per cycle; its ready and valid are flip-flops
(no combinational path from ``o.ready`` to ``i.ready``).

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random

import pytest
from amaranth.sim import Simulator

from netagg.hdl.eth.layouts import FrameByte
from netagg.hdl.skid import PingPongBuffer, SkidBuffer

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def run(n, p_in, p_out, seed, cls=SkidBuffer):
    dut = cls(FrameByte)
    rng = random.Random(seed)
    sent = [(rng.randrange(256), rng.randrange(2)) for _ in range(n)]
    got, cycles = [], [0]

    async def source(ctx):
        for d, last in sent:
            while rng.random() < p_in:
                await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, FrameByte.const({"data": d, "last": last}))
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        while len(got) < n:
            ready = rng.random() >= p_out
            ctx.set(dut.o.ready, ready)
            # o.ready must not reach i.ready in the same cycle
            before = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, not ready)
            assert ctx.get(dut.i.ready) == before
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles[0] += 1
            if valid and ready:
                got.append((payload.data, payload.last))
            assert cycles[0] < 20 * n + 100

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return sent, got, cycles[0]


CLASSES = [SkidBuffer, PingPongBuffer]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("p_in,p_out", [(0.3, 0.3), (0.0, 0.6), (0.6, 0.0)])
def test_in_order_under_stalls(p_in, p_out, cls):
    sent, got, _ = run(400, p_in, p_out, SEED, cls)
    assert got == sent


@pytest.mark.parametrize("cls", CLASSES)
def test_one_per_cycle(cls):
    sent, got, cycles = run(200, 0.0, 0.0, SEED, cls)
    assert got == sent
    assert cycles <= len(sent) + 2
