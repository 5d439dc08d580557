"""An amaranth.sim bench for NetaggCore: drives messages (random gaps),
accepts RESULTs (random backpressure), and checks verdicts, RESULTs and
counters against the golden model."""

from __future__ import annotations

import random
from collections import defaultdict

from amaranth.sim import Simulator

from netagg import regmap
from netagg.hdl.core import NetaggCore
from netagg.sim.beats import (
    ResultAssembler,
    message_to_beats,
    pack_ingress,
    unpack_egress,
    unpack_verdict,
)
from netagg.sim.message_model import Switch
from netagg.wire import Header


def result_key(payload: bytes):
    h = Header.unpack(payload)
    return (h.job, h.slot, h.ver, h.worker)


def run_core(params, jobs, messages, *, seed=0, gap=0.0, backpressure=0.0, fp_stages=None,
             max_cycles=200_000):
    """Run ``messages`` (UDP payloads) through the core; returns
    (verdicts [(code, tag)], results [(payload, tag)], counters, cycles)."""
    rng = random.Random(seed)
    dut = NetaggCore(params, fp_stages=fp_stages)
    L = params.lanes
    verdicts, results, counters = [], [], {}
    state = {"done": False}

    async def driver(ctx):
        for addr, value in regmap.job_writes(jobs):
            ctx.set(dut.ctrl_addr, addr)
            ctx.set(dut.ctrl_wdata, value)
            ctx.set(dut.ctrl_we, 1)
            await ctx.tick()
        ctx.set(dut.ctrl_we, 0)
        while not ctx.get(dut.i.ready):
            await ctx.tick()
        for seq, payload in enumerate(messages):
            beats = (message_to_beats(payload, L, tag=seq) if isinstance(payload, bytes)
                     else payload)      # a list of Beats: a front end's own framing
            for beat in beats:
                while rng.random() < gap:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.payload.as_value(), pack_ingress(beat, L))
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        cycles = 0
        while len(verdicts) < len(messages) or not ctx.get(dut.idle):
            await ctx.tick()
            cycles += 1
            assert cycles < max_cycles, "core did not finish"
        for _ in range(4):
            await ctx.tick()
            assert ctx.get(dut.idle)
        for name in regmap.CORE_COUNTERS:
            ctx.set(dut.ctrl_addr, regmap.counter_addr(name))
            await ctx.tick()
            counters[name] = ctx.get(dut.ctrl_rdata)
        state["done"] = True

    async def egress(ctx):
        asm = ResultAssembler(L)
        o_payload, v_payload = dut.o.payload.as_value(), dut.v.payload.as_value()
        while True:
            ctx.set(dut.o.ready, rng.random() >= backpressure)
            _, _, o_valid, o_ready, o_data, v_valid, v_data = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, o_payload, dut.v.valid, v_payload)
            if o_valid and o_ready:
                done = asm.push(unpack_egress(o_data, L))
                if done:
                    results.append(done)
            if v_valid:
                verdicts.append(unpack_verdict(v_data))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(egress, background=True)
    sim.run()
    return verdicts, results, counters


def expected(params, jobs, messages):
    sw = Switch(params, jobs)
    verdicts, results = [], []
    for seq, payload in enumerate(messages):
        out = sw.receive(payload)
        verdicts.append((int(out.verdict), seq & 0xFFFF))
        results.extend((r.pack(), seq & 0xFFFF) for r in out.results)
    return verdicts, results, sw.counters


def per_key(results):
    d = defaultdict(list)
    for payload, tag in results:
        d[result_key(payload)].append((payload, tag))
    return dict(d)
