"""The cocotb test of the Ethernet switch at its GMII pins (run by
:func:`netagg.sim.eth_harness.run_frames`), with cocotbext-eth's GMII source
and sink models on every port.

Input (JSON file named by ``$NETAGG_TB_IO``): ``{"jobs": JobTable dict,
"ports": [[frame hex, ...] per port], "quiet": cycles}``: each port's frames
(the bytes after the SFD, FCS included, exactly as they go on the wire) are
sent back to back with the minimum gap (12 bytes), all ports at once; build
parameters from ``$NETAGG_TB_PARAMS``. The switch is reset, its job table
written and read back; when every frame is sent and nothing has been
transmitted for ``quiet`` cycles (default 4000: more than a buffered
maximum-size frame takes to be parsed and answered) with the core idle,
every core and front-end counter (and with ``"ctrl": true`` the control
plane's) is read through the control port.

Output (JSON file named by ``$NETAGG_TB_OUT``): ``{"frames": [[port, frame
hex (after the SFD, FCS included), start cycle, error], ...] in the order
transmission started, "counters": {name: value}, "cycles": first frame
start to last frame end}``, or ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from netagg import ctrlproto, regmap
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.cocotb.tb import ControlPort

ENV_PARAMS, ENV_IO, ENV_OUT = "NETAGG_TB_PARAMS", "NETAGG_TB_IO", "NETAGG_TB_OUT"
PERIOD_NS = 8


def _write(obj) -> None:
    with open(os.environ[ENV_OUT], "w", encoding="utf-8") as f:
        json.dump(obj, f)


class Bench(ControlPort):
    def __init__(self, dut, params: Params, ports: int):
        from cocotbext.eth import GmiiSink, GmiiSource
        self.dut, self.params, self.ports = dut, params, ports
        self.cycle = 0
        self.sources = [GmiiSource(getattr(dut, f"rx__{p}__data"), getattr(dut, f"rx__{p}__er"),
                                   getattr(dut, f"rx__{p}__dv"), dut.clk, dut.rst)
                        for p in range(ports)]
        self.sinks = [GmiiSink(getattr(dut, f"tx__{p}__data"), getattr(dut, f"tx__{p}__er"),
                               getattr(dut, f"tx__{p}__en"), dut.clk, dut.rst)
                      for p in range(ports)]
        for s in self.sources:
            s.ifg = 12

    async def tick(self, n=1):
        for _ in range(n):
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def reset(self):
        d = self.dut
        Clock(d.clk, PERIOD_NS, unit="ns").start()
        d.ctrl_we.value = 0
        d.ctrl_addr.value = 0
        d.ctrl_wdata.value = 0
        d.rst.value = 1
        await self.tick(4)
        d.rst.value = 0
        await self.tick(self.params.slots + 16)

    async def counters(self, ctrl: bool = False):
        names = [(n, regmap.counter_addr(n)) for n in regmap.CORE_COUNTERS]
        names += [(regmap.eth_counter_name(p, n), regmap.eth_counter_addr(p, n))
                  for p in range(self.ports) for n in regmap.ETH_COUNTERS]
        if ctrl:
            names += [(n, ctrlproto.CTRL_BASE + i) for i, n in enumerate(ctrlproto.CTRL_COUNTERS)]
        return {name: await self.read_reg(addr) for name, addr in names}


@cocotb.test()
async def eth_run(dut):
    from cocotbext.eth import GmiiFrame
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    with open(os.environ[ENV_IO], encoding="utf-8") as f:
        spec = json.load(f)
    jobs = JobTable.from_dict(spec["jobs"], params)
    ports = [[bytes.fromhex(x) for x in frames] for frames in spec["ports"]]
    quiet_limit = int(spec.get("quiet", 4000))
    max_cycles = int(spec.get("max_cycles", 2_000_000))
    tb = Bench(dut, params, len(ports))
    out = []
    try:
        await tb.reset()
        await tb.configure(jobs)
        start = tb.cycle
        for src, frames in zip(tb.sources, ports, strict=True):
            for w in frames:
                await src.send(GmiiFrame.from_raw_payload(w))
        quiet, first, last = 0, None, start
        while True:
            await tb.tick()
            busy = any(not s.empty() or s.active for s in tb.sources)
            tx = any(int(getattr(dut, f"tx__{p}__en").value) for p in range(len(ports)))
            if tx:
                last = tb.cycle
                first = tb.cycle if first is None else first
            for p, sink in enumerate(tb.sinks):
                while not sink.empty():
                    fr = sink.recv_nowait()
                    out.append([p, bytes(fr.get_payload(strip_fcs=False)).hex(),
                                int(fr.sim_time_start // (PERIOD_NS * 1000)),
                                bool(fr.error and any(fr.error))])
            quiet = 0 if (busy or tx or not int(dut.idle.value)) else quiet + 1
            if quiet >= quiet_limit:
                break
            if tb.cycle - start > max_cycles:
                raise AssertionError(f"the switch did not go quiet within {max_cycles} cycles")
        counters = await tb.counters(bool(spec.get("ctrl")))
    except Exception as e:
        _write({"error": (str(e).strip() or type(e).__name__).splitlines()[0]})
        raise
    out.sort(key=lambda f: f[2])
    _write({"frames": out, "counters": counters, "cycles": last - start})
