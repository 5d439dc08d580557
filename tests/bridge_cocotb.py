"""cocotb bench for the UART bridge (``uart_bridge``, divisor from
$NETAGG_BRIDGE_DIVISOR): the host codec (netagg.uartlink) drives the rx pin
bit by bit and decodes the tx pin; verdicts and RESULTs are compared with
the golden model (netagg.sim.reference). Run by tests/test_bridge.py."""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from netagg import regmap
from netagg import uartlink as hu
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.reference import expected, per_key
from netagg.sim.traffic import random_traffic


async def send_bytes(dut, data, div):
    for b in data:
        for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]:
            dut.rx.value = bit
            await ClockCycles(dut.clk, div)


async def recv_frames(dut, div, sink):
    dec = hu.SlipDecoder()
    while True:
        await FallingEdge(dut.tx)
        await ClockCycles(dut.clk, div // 2)
        assert dut.tx.value == 0, "tx: glitch instead of a start bit"
        b = 0
        for i in range(8):
            await ClockCycles(dut.clk, div)
            b |= int(dut.tx.value) << i
        await ClockCycles(dut.clk, div)
        assert dut.tx.value == 1, "tx: stop bit low"
        for frame in dec.feed(bytes([b])):
            sink.append(hu.parse_reply(frame))


@cocotb.test()
async def bridge_vs_golden(dut):
    params = Params.from_dict(json.loads(os.environ["NETAGG_BRIDGE_PARAMS"]))
    jobs = JobTable.from_json(os.environ["NETAGG_BRIDGE_JOBS"], params)
    div = int(os.environ["NETAGG_BRIDGE_DIVISOR"])
    msgs = random_traffic(params, jobs, int(os.environ.get("NETAGG_BRIDGE_N", "24")), seed=7)
    exp = expected(params, jobs, msgs)
    ev, er, ec = exp.verdicts, exp.results, exp.counters

    Clock(dut.clk, 10, unit="ns").start()
    dut.rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    replies = []
    cocotb.start_soon(recv_frames(dut, div, replies))


    host = bytearray()
    for addr, value in regmap.job_writes(jobs):
        host += hu.slip_encode(hu.ctrl_frame(addr, value, write=True))
    for tag, m in enumerate(msgs):
        host += hu.slip_encode(hu.msg_frame(m, tag))
    host += hu.slip_encode(hu.sync_frame())
    host += hu.slip_encode(hu.ctrl_frame(regmap.COUNTER_BASE + 1))       # tx counter
    await send_bytes(dut, host, div)
    n = len(regmap.job_writes(jobs)) + len(ev) + len(er) + 2
    for _ in range(int(os.environ.get("NETAGG_BRIDGE_CYCLES", "400000"))):
        if len(replies) >= n:
            break
        await RisingEdge(dut.clk)
    assert len(replies) == n, f"{len(replies)} of {n} replies"
    verdicts = [(r.code, r.tag) for r in replies if r.type == hu.VERDICT]
    results = [(r.message, r.tag) for r in replies if r.type == hu.RESULT]
    ctrl = [r.data for r in replies if r.type == hu.CTRLREP]
    assert verdicts == ev
    assert per_key(results) == per_key(er)
    assert sorted(results) == sorted(er)
    assert replies[-2].type == hu.SYNCREP
    assert ctrl[-1] == ec["tx"]
    assert dut.error.value == 0
