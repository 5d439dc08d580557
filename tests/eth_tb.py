"""amaranth.sim helpers for the Ethernet front end's tests: GMII drivers and
monitors at the byte level (not tests themselves)."""

from __future__ import annotations

from netagg import frames as fr

PREAMBLE = b"\x55" * 7 + b"\xd5"


async def gmii_send(ctx, gmii, wire: bytes, *, gap: int = 12, er_at: int | None = None,
                    preamble: bytes = PREAMBLE, domain: str = "sync"):
    """Drive one frame (``wire``: bytes after the SFD, FCS included) onto a
    GMII receive port in clock domain ``domain``, then ``gap`` idle cycles."""
    for i, byte in enumerate(preamble + wire):
        ctx.set(gmii.dv, 1)
        ctx.set(gmii.data, byte)
        ctx.set(gmii.er, int(er_at is not None and i - len(preamble) == er_at))
        await ctx.tick(domain)
    ctx.set(gmii.dv, 0)
    ctx.set(gmii.er, 0)
    ctx.set(gmii.data, 0)
    for _ in range(gap):
        await ctx.tick(domain)


class GmiiMonitor:
    """Collects the frames a GMII transmit port sends: ``frames`` holds
    (bytes after the SFD with FCS, gap before in cycles, any er)."""

    def __init__(self, gmii, domain: str = "sync"):
        self.gmii = gmii
        self.domain = domain
        self.frames: list[tuple[bytes, int | None, bool]] = []
        self.errors: list[str] = []

    async def run(self, ctx):
        cur, er, idle = None, False, None
        async for _, _, en, er_bit, data in ctx.tick(self.domain).sample(self.gmii.en, self.gmii.er,
                                                                self.gmii.data):
            if en:
                if cur is None:
                    cur, er, gap, idle = bytearray(), False, idle, 0
                    self._gap = gap
                cur.append(data)
                er |= bool(er_bit)
            else:
                if cur is not None:
                    self._finish(bytes(cur), er)
                    cur = None
                idle = 0 if idle is None and not self.frames else (idle or 0) + 1

    def _finish(self, raw: bytes, er: bool):
        if raw[:8] != PREAMBLE:
            self.errors.append(f"bad preamble {raw[:8].hex()}")
        self.frames.append((raw[8:], self._gap, er))

    def payloads(self) -> list[bytes]:
        """The frames without FCS, each checked: its FCS right, no er."""
        out = []
        for wire, _gap, er in self.frames:
            assert not er, "frame sent with GMII er"
            assert fr.fcs_ok(wire), f"bad FCS on {wire.hex()}"
            out.append(wire[:-4])
        return out


def run_switch(params, jobs, wires_by_port, *, max_cycles=400_000, clocks=None, quiet=3000,
               **switch_kwargs):
    """Run a two-port EthernetSwitch (``switch_kwargs``: its options) in
    amaranth.sim: ``jobs`` written through the control port, then each
    port's ``wires`` sent, until ``quiet`` cycles pass with nothing sent and
    the switch idle. ``clocks`` ({domain: period}) puts the receive MACs in
    ``rx0``, ``rx1`` and the transmit MACs in ``tx``. Returns the frames
    each port sent (payloads), every core and front-end counter, the
    monitors."""
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    from netagg import regmap
    from netagg.hdl.eth.switch import EthernetSwitch
    from netagg.sim.drive import load_jobs
    if clocks:
        dut = EthernetSwitch(params, ports=2, rx_domains=["rx0", "rx1"], tx_domain="tx",
                             **switch_kwargs)
        top = Module()
        top.submodules.dut = dut
        for name in ("rx0", "rx1", "tx"):
            top.domains += ClockDomain(name)
        rxd, txd = ["rx0", "rx1"], "tx"
    else:
        dut = top = EthernetSwitch(params, ports=2, **switch_kwargs)
        rxd, txd = ["sync", "sync"], "sync"
    mons = [GmiiMonitor(dut.tx[p], txd) for p in range(2)]
    counters = {}
    state = {"sent": 0}

    def sender(port):
        async def bench(ctx):
            for _ in range(params.slots + 40):
                await ctx.tick()
            for w in wires_by_port[port]:
                await gmii_send(ctx, dut.rx[port], w, domain=rxd[port])
            state["sent"] += 1
        return bench

    async def control(ctx):
        await load_jobs(ctx, dut, jobs)
        cycles, idle_for = 0, 0
        while state["sent"] < 2 or idle_for < quiet:
            await ctx.tick()
            cycles += 1
            assert cycles < max_cycles, "the switch did not finish"
            busy = ctx.get(dut.tx[0].en) or ctx.get(dut.tx[1].en) or not ctx.get(dut.idle)
            idle_for = 0 if busy else idle_for + 1
        names = [(n, regmap.counter_addr(n)) for n in regmap.CORE_COUNTERS]
        names += [(regmap.eth_counter_name(p, n), regmap.eth_counter_addr(p, n))
                  for p in range(2) for n in regmap.ETH_COUNTERS]
        for name, addr in names:
            ctx.set(dut.ctrl_addr, addr)
            await ctx.tick()
            counters[name] = ctx.get(dut.ctrl_rdata)

    sim = Simulator(top)
    sim.add_clock((clocks or {}).get("sync", 8e-9))
    for name, period in (clocks or {}).items():
        if name != "sync":
            sim.add_clock(period, domain=name)
    sim.add_testbench(control)
    for p in range(2):
        sim.add_testbench(sender(p))
        sim.add_process(mons[p].run)
    sim.run()
    for mon in mons:
        assert not mon.errors
    return {p: mons[p].payloads() for p in range(2)}, counters, mons
