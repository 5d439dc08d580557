"""boards/bridge.py: the bridge's frame protocol around a real core, against
the golden model (netagg.sim.reference) through the host codec (netagg.uartlink).

amaranth.sim drives CoreBridge's byte streams (fast); a cocotb test drives
the UART pins of the generated Verilog of UARTBridge (the board top's logic)
with the host tool's client."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from netagg import regmap
from netagg import uartlink as hu
from netagg.boards.bridge import CoreBridge, SlipDecoder, SlipEncoder
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.drive import send, simulate
from netagg.sim.message_model import make_contrib
from netagg.sim.reference import expected, per_key
from netagg.sim.traffic import random_traffic
from netagg.wire import COUNTERS, DType, Op

PARAMS = Params(lanes=2, elements=6, workers=3, slots=4, jobs=2)
JOBS = JobTable([Job(0, 3, 0, 2), Job(1, 2, 2, 2)], PARAMS)


def run_bridge(params, host_bytes, *, jobs=None, n_replies, seed=0, gap=0.3, stall=0.3,
               max_cycles=400_000):
    """Feed host_bytes into a CoreBridge (random gaps, random tx stalls);
    return decoded board->host frames once ``n_replies`` have arrived."""
    dut = CoreBridge(params, jobs=jobs)
    rng = random.Random(seed)
    frames = []

    def idle():
        n = 0
        while rng.random() < gap:
            n += 1
        return n

    async def feed(ctx):
        await send(ctx, dut.rx, host_bytes, idle=idle)

    async def drain(ctx):
        dec = hu.SlipDecoder()
        for _ in range(max_cycles):
            ready = rng.random() >= stall
            ctx.set(dut.tx.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.tx.valid, dut.tx.payload)
            if valid and ready:
                frames.extend(dec.feed(bytes([payload])))
                if len(frames) >= n_replies:
                    return
        raise AssertionError(f"only {len(frames)} of {n_replies} replies")

    simulate(dut, drain, background=[feed])
    return [hu.parse_reply(f) for f in frames]


def host_stream(messages, jobs=None, extra=b"", after=b""):
    data = bytearray()
    if jobs is not None:
        for addr, value in regmap.job_writes(jobs):
            data += hu.slip_encode(hu.ctrl_frame(addr, value, write=True))
    for tag, msg in enumerate(messages):
        data += hu.slip_encode(hu.msg_frame(msg, tag))
    data += extra
    data += hu.slip_encode(hu.sync_frame())
    return bytes(data + after)


def split(replies):
    verdicts = [(r.tag, r.code) for r in replies if r.type == hu.VERDICT]
    results = [(r.message, r.tag) for r in replies if r.type == hu.RESULT]
    ctrl = [(r.addr, r.data) for r in replies if r.type == hu.CTRLREP]
    return verdicts, results, ctrl


def n_expected_replies(params, jobs, messages, n_ctrl):
    exp = expected(params, jobs, messages)
    return exp.verdicts, exp.results, len(exp.verdicts) + len(exp.results) + n_ctrl + 1


def test_slip_codec_roundtrip():
    rng = random.Random(1)
    frames = [bytes(rng.choice([0xC0, 0xDB, 0xDC, 0xDD, rng.randrange(256)])
                    for _ in range(rng.randrange(1, 40))) for _ in range(50)]
    stream = b"".join(hu.slip_encode(f) for f in frames)
    dec = hu.SlipDecoder()
    got = []
    for i in range(0, len(stream), 7):
        got += dec.feed(stream[i:i + 7])
    assert got == frames


def test_slip_hardware_roundtrip():
    """SlipEncoder -> SlipDecoder in amaranth.sim: frames come back whole."""
    rng = random.Random(2)
    frames = [bytes(rng.choice([0xC0, 0xDB, rng.randrange(256)])
                    for _ in range(rng.randrange(1, 12))) for _ in range(20)]
    enc, dec = SlipEncoder(), SlipDecoder()
    from amaranth.hdl import Module
    m = Module()
    m.submodules.enc, m.submodules.dec = enc, dec
    m.d.comb += [dec.i.payload.eq(enc.o.payload), dec.i.valid.eq(enc.o.valid),
                 enc.o.ready.eq(dec.i.ready)]
    got, cur = [], bytearray()

    async def feed(ctx):
        await send(ctx, enc.i, [{"data": b, "last": i == len(f) - 1}
                                for f in frames for i, b in enumerate(f)])

    async def recv(ctx):
        ctx.set(dec.o.ready, 1)
        while len(got) < len(frames):
            _, _, valid, end, b = await ctx.tick().sample(dec.o.valid, dec.o.payload.end,
                                                         dec.o.payload.data)
            if valid:
                if end:
                    got.append(bytes(cur))
                    cur.clear()
                else:
                    cur.append(b)

    simulate(m, recv, background=[feed])
    assert got == frames


def test_bridge_random_traffic_vs_golden():
    msgs = random_traffic(PARAMS, JOBS, 60, seed=11)
    ev, er, n = n_expected_replies(PARAMS, JOBS, msgs, len(regmap.job_writes(JOBS)))
    replies = run_bridge(PARAMS, host_stream(msgs, JOBS), n_replies=n)
    assert replies[-1].type == hu.SYNCREP
    verdicts, results, ctrl = split(replies)
    assert [(code, tag) for tag, code in verdicts] == ev
    assert per_key(results) == per_key(er)
    assert sorted(results) == sorted(er)
    # CTRL write replies read the register back.
    assert [d for _, d in ctrl] == [v for _, v in regmap.job_writes(JOBS)]


def test_bridge_build_time_jobs_bf16_counters_and_bad_frames():
    """Job table loaded at reset; bf16 payloads (2-byte elements, odd
    counts); a bad frame and a message with a stray byte; counters read."""
    msgs = []
    for w in range(3):
        msgs.append(make_contrib(0, 1, 0, w, [0x3F80 + w, 0xC0DB, 0x7F80], dtype=DType.BF16,
                                 op=Op.MAX))
    for w in range(2):
        msgs.append(make_contrib(1, 0, 1, w, [0xC0C0C0C0 + w] * 6, dtype=DType.INT32, op=Op.SUM))
    msgs.append(make_contrib(1, 0, 1, 0, [1] * 6, dtype=DType.INT32) + b"\x01")   # bad length
    msgs.append(b"\x10\x00")                                                       # runt
    counter_reads = [regmap.COUNTER_BASE + i for i in range(len(COUNTERS))] + [regmap.BRIDGE_BASE]
    extra = hu.slip_encode(bytes([0x55, 1, 2]))                                    # bad frame
    after = b"".join(hu.slip_encode(hu.ctrl_frame(a)) for a in counter_reads)
    exp = expected(PARAMS, JOBS, msgs)
    ev, er, ec = exp.verdicts, exp.results, exp.counters
    n = len(ev) + len(er) + len(counter_reads) + 1
    replies = run_bridge(PARAMS, host_stream(msgs, extra=extra, after=after), jobs=JOBS,
                         n_replies=n, seed=4)
    verdicts, results, ctrl = split(replies)
    assert replies[len(ev) + len(er)].type == hu.SYNCREP
    assert [(code, tag) for tag, code in verdicts] == ev
    assert per_key(results) == per_key(er)
    got = {a: d for a, d in ctrl}
    assert [got[regmap.COUNTER_BASE + i] for i in range(len(COUNTERS))] == [ec[c] for c in COUNTERS]
    assert got[regmap.BRIDGE_BASE] == 1            # the one bad frame


# ---------------------------------------------------------------- cocotb


@pytest.mark.cocotb
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
def test_uart_bridge_cocotb(tmp_path):
    """The UART pins of the board top's bridge logic (Verilog, Icarus)."""
    from cocotb_test.simulator import run

    from netagg.boards.tops import write_bridge_verilog

    verilog = tmp_path / "uart_bridge.v"
    write_bridge_verilog(PARAMS, verilog, divisor=4)
    here = Path(__file__).parent
    env = {"NETAGG_BRIDGE_PARAMS": json.dumps(PARAMS.to_dict()),
           "NETAGG_BRIDGE_JOBS": JOBS.to_json(), "NETAGG_BRIDGE_DIVISOR": "4",
           "COCOTB_ANSI_OUTPUT": "0"}
    saved = {k: os.environ.pop(k) for k in env if k in os.environ}
    try:
        run(verilog_sources=[str(verilog)], toplevel="uart_bridge", module="bridge_cocotb",
            python_search=[str(here)], sim_build=str(tmp_path / "sim_build"),
            timescale="1ns/1ps", simulator="icarus", extra_env=env,
            compile_args=["-g2005"])   # Verilog-2005: see ICARUS_ARGS in sim/harness.py
    finally:
        os.environ.update(saved)
