"""The amaranth.sim driver of :class:`netagg.hdl.core.NetaggCore`, for the
tests and the benches alike, and the amaranth.sim helpers every bench of a
component uses (:func:`simulate`, :func:`send`).

Contract of :func:`run_core`: the core is built for ``params``; its job table
is written through the control port (:func:`netagg.regmap.job_writes`), then,
once ``i.ready`` is high, the messages are presented in order, message ``i``
tagged ``i mod 2**16``; a message is UDP payload bytes
(:func:`netagg.sim.beats.message_to_beats`) or a list of
:class:`~netagg.sim.beats.Beat` (a front end's own framing, tags as given).
With probability ``gap`` a cycle before a beat is idle; ``o.ready`` is low
with probability ``backpressure`` each cycle (both from ``seed``). The run
ends when every message has its verdict and ``idle`` is high, which must
then stay high for 4 cycles; every counter of
:data:`netagg.regmap.CORE_COUNTERS` is read back. Every timestamp is the
cycle (counted from the first cycle after reset) at whose end the handshake
completed.
"""

from __future__ import annotations

import dataclasses
import random

from amaranth.sim import Simulator

from netagg import regmap
from netagg.hdl.core import NetaggCore
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.beats import (
    ResultAssembler,
    beat_fields,
    message_to_beats,
    pack_ingress,
    unpack_egress,
    unpack_verdict,
)
from netagg.sim.reference import TAG_MOD


def simulate(dut, *testbenches, background=(), clock: float | None = 1e-8) -> None:
    """Run amaranth.sim on ``dut`` until every testbench of ``testbenches``
    has returned; ``background`` ones run alongside and are abandoned then.
    ``clock``: the period of the ``sync`` domain's clock in seconds (None:
    no clock, a combinational design)."""
    sim = Simulator(dut)
    if clock is not None:
        sim.add_clock(clock)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)
    sim.run()


async def send(ctx, stream, payloads, *, idle=None) -> None:
    """Present every payload on ``stream`` (``valid``, ``ready``,
    ``payload``) in order, each held until accepted; ``idle()``, if given,
    is the number of idle cycles before each payload. ``valid`` is low
    when it returns."""
    for payload in payloads:
        for _ in range(idle() if idle else 0):
            await ctx.tick()
        ctx.set(stream.payload, payload)
        ctx.set(stream.valid, 1)
        await ctx.tick().until(stream.ready)
        ctx.set(stream.valid, 0)


async def load_jobs(ctx, dut, jobs: JobTable) -> None:
    """Write a job table through a core's control port (``ctrl_addr``,
    ``ctrl_wdata``, ``ctrl_we``), one register per cycle
    (:func:`netagg.regmap.job_writes`); ``ctrl_we`` is low when it returns."""
    for addr, value in regmap.job_writes(jobs):
        ctx.set(dut.ctrl_addr, addr)
        ctx.set(dut.ctrl_wdata, value)
        ctx.set(dut.ctrl_we, 1)
        await ctx.tick()
    ctx.set(dut.ctrl_we, 0)


STALL_LIMIT = 50_000
"""Cycles :func:`send_beats` holds a beat before it fails the run (a core
that stopped taking beats fails its test instead of hanging it)."""


async def send_beats(ctx, stream, beats, lanes: int, rng: random.Random, gap: float) -> None:
    """Present ingress :class:`~netagg.sim.beats.Beat` s on ``stream`` (the
    core's or the validator's ``i``), each held until accepted, with an idle
    cycle before a beat while ``rng.random() < gap``. ``valid`` stays high
    between beats and is not lowered at the end. A beat not accepted within
    :data:`STALL_LIMIT` cycles raises ``AssertionError``."""
    for beat in beats:
        while rng.random() < gap:
            ctx.set(stream.valid, 0)
            await ctx.tick()
        ctx.set(stream.payload.as_value(), pack_ingress(beat, lanes))
        ctx.set(stream.valid, 1)
        for _ in range(STALL_LIMIT + 1):
            *_, ready = await ctx.tick().sample(stream.ready)
            if ready:
                break
        else:
            raise AssertionError(f"a beat not accepted in {STALL_LIMIT} cycles")


@dataclasses.dataclass
class CoreRun:
    """What the core did (see the module docstring)."""

    verdicts: list[tuple[int, int]]           # (code, tag), in order
    results: list[tuple[bytes, int]]          # (RESULT payload, tag), in send order
    counters: dict[str, int]                  # every core counter, ``stall`` included
    beats_in: list[int]                       # cycle of every ingress beat accepted
    message_done: list[int]                   # cycle of each message's last beat accepted
    result_start: list[int]                   # cycle of each RESULT's first beat sent


def _beats(message, seq: int, lanes: int):
    if isinstance(message, bytes | bytearray):
        return message_to_beats(bytes(message), lanes, tag=seq % TAG_MOD)
    return list(message)


def run_core(params: Params, jobs: JobTable, messages, *, seed: int = 0, gap: float = 0.0,
             backpressure: float = 0.0, fp_stages: int | None = None,
             acc_ram: str = "memory", max_cycles: int = 200_000) -> CoreRun:
    """Run ``messages`` through a core (see the module docstring) built with
    ``fp_stages`` and ``acc_ram`` (:class:`~netagg.hdl.core.NetaggCore`)."""
    rng = random.Random(seed)
    dut = NetaggCore(params, fp_stages=fp_stages, acc_ram=acc_ram)
    L = params.lanes
    run = CoreRun([], [], {}, [], [], [])
    n = len(messages)

    async def driver(ctx):
        await load_jobs(ctx, dut, jobs)
        while not ctx.get(dut.i.ready):
            await ctx.tick()
        for seq, message in enumerate(messages):
            await send_beats(ctx, dut.i, _beats(message, seq, L), L, rng, gap)
        ctx.set(dut.i.valid, 0)
        cycles = 0
        while len(run.verdicts) < n or not ctx.get(dut.idle):
            await ctx.tick()
            cycles += 1
            assert cycles < max_cycles, "core did not finish"
        for _ in range(4):
            await ctx.tick()
            assert ctx.get(dut.idle)
        for name in regmap.CORE_COUNTERS:
            ctx.set(dut.ctrl_addr, regmap.counter_addr(name))
            await ctx.tick()
            run.counters[name] = ctx.get(dut.ctrl_rdata)

    async def monitor(ctx):
        asm = ResultAssembler(L)
        i_payload = dut.i.payload.as_value()
        o_payload, v_payload = dut.o.payload.as_value(), dut.v.payload.as_value()
        last_bit = beat_fields("ingress", L)["last"][0]
        cycle, first = 0, True
        while True:
            ctx.set(dut.o.ready, rng.random() >= backpressure)
            (_, _, i_valid, i_ready, i_data, o_valid, o_ready, o_data, v_valid,
             v_data) = await ctx.tick().sample(dut.i.valid, dut.i.ready, i_payload, dut.o.valid,
                                               dut.o.ready, o_payload, dut.v.valid, v_payload)
            if i_valid and i_ready:
                run.beats_in.append(cycle)
                if (i_data >> last_bit) & 1:
                    run.message_done.append(cycle)
            if o_valid and o_ready:
                if first:
                    run.result_start.append(cycle)
                done = asm.push(unpack_egress(o_data, L))
                first = done is not None
                if done:
                    run.results.append(done)
            if v_valid:
                run.verdicts.append(unpack_verdict(v_data))
            cycle += 1

    simulate(dut, driver, background=[monitor])
    return run
