"""The Ethernet switch: P GMII ports around the netagg core."""

from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, ResetSignal, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from netagg import ctrlproto, regmap
from netagg.hdl.core import NetaggCore
from netagg.hdl.eth.address_table import AddressTable
from netagg.hdl.eth.arbiter import IngressArbiter, TxArbiter
from netagg.hdl.eth.control import ControlPlane, check_ctrl
from netagg.hdl.eth.frame_buffer import FrameBuffer
from netagg.hdl.eth.ip_rx import IpRx
from netagg.hdl.eth.layouts import (
    MAX_FRAME,
    BufferedByte,
    FrameByte,
    GmiiRx,
    GmiiTx,
    MacByte,
    ReplyKind,
    RxStatus,
    message_beat,
    result_beat,
)
from netagg.hdl.eth.mac_rx import MacRx
from netagg.hdl.eth.mac_tx import MacTx
from netagg.hdl.eth.responder import Responder
from netagg.hdl.eth.result_tx import ResultFramer, ResultRouter
from netagg.hdl.fifo import RegisteredAsyncFIFO
from netagg.hdl.ram import RAM_FORMS
from netagg.hdl.skid import SkidBuffer
from netagg.params import Params


class EthernetSwitch(wiring.Component):
    """netagg on Ethernet (docs/ethernet.md): ``ports`` GMII ports, each a
    receive MAC, a receive frame buffer (whole-frame drop when full), a
    parser, an ARP/ICMP responder, a RESULT framer with its transmit buffer
    and a transmit MAC; one :class:`netagg.hdl.core.NetaggCore` behind a
    message-by-message round-robin arbiter, the address table learnt from
    its verdicts.

    Clock domains: the core, parsers, responders, framers and counters run
    in ``sync``. By default the MACs do too (the GMII byte clock is the core
    clock, as in simulation). With ``rx_domains`` each port's receive MAC
    and receive buffer run in that domain (the PHY's receive clock) and
    whole frames and the frame-end events cross into ``sync`` through
    asynchronous FIFOs (:class:`netagg.hdl.fifo.RegisteredAsyncFIFO`);
    with ``tx_domain`` the transmit buffers (store and forward, so that a
    MAC never waits for a byte) and MACs run in that domain (the 125 MHz
    transmit clock), fed through asynchronous FIFOs.

    Parameters
    ----------
    params : Params
    ports : int (1 or 2)
    rx_depth : int
        Bytes of each receive buffer (a power of two, at least 2048).
    fp_stages : int or None
        The core's floating-point adder pipeline depth.
    rx_domains : list of str, or None
        Per port, the receive clock domain. The receive MAC runs in a local
        domain of the same clock whose reset is a flip-flop of that domain
        following its reset (one cycle later, asserted at power-up): the MAC
        sits by its pins, the receive buffer and the crossing by the core,
        and no single reset net has to reach both (on the 25F board it cost
        8.4 ns of routing at 125 MHz).
    tx_domain : str, list of str, or None
        The transmit clock domain of every port, or one per port (domains
        of one clock with a reset each, so that no reset net spans both
        ports' logic).
    result_fifo : int or None
        RESULT beats buffered per port between the router and the port's
        framer (default 2 B + 2, B = K / L: two whole RESULTs), so that one
        port's framer, one byte per cycle, does not hold up RESULTs for the
        other port.
    message_fifo : int or None
        Message beats buffered per port between the parser and the ingress
        arbiter (default 2 B + 2); a port is offered to the arbiter only
        once a whole message is queued, so that a message goes into the core
        at one beat per cycle instead of at its port's byte rate, and the
        other port is not held up behind it. 0: no queue.
    ctrl_key : int or None
        The 64-bit key of the control plane over UDP
        (:class:`netagg.hdl.eth.control.ControlPlane`); None: no control
        plane (datagrams to its port are ``ignored`` frames).
    ctrl_port : int
        Its UDP port (default ``netagg.ctrlproto.DEFAULT_CTRL_PORT``).
    ram : "memory" or "ecp5"
        The frame buffers' RAM form (:class:`netagg.hdl.eth.frame_buffer.FrameBuffer`):
        portable (default) or ECP5 block RAM with its output register (the board).

    Ports
    -----
    rx : In(GmiiRx) x ports, tx : Out(GmiiTx) x ports
        The PHYs' GMII. A frame received on port p is answered (ARP, ICMP)
        on port p; a RESULT leaves on the port its destination worker's
        most recent accepted CONTRIB came in on.
    ctrl_addr, ctrl_wdata, ctrl_we, ctrl_rdata : the register port
        docs/core.md's (the core's job table and counters), the ports'
        counters at ``netagg.regmap.eth_counter_addr`` and, with a control
        plane, ctrlproto's INFO, CTRL and SERVE registers; other addresses
        read 0. ``ctrl_rdata`` shows the register at the ``ctrl_addr`` of
        the previous cycle. While the control plane makes a datagram's
        accesses it owns the register bus: ``ctrl_addr``, ``ctrl_wdata``
        and ``ctrl_we`` are ignored and ``ctrl_rdata`` shows its reads.
    idle : Out(1)
        The core is idle (docs/core.md), and so is the control plane (no
        control datagram pending or being answered).
    activity, error : Out(1)
        One-cycle pulses: a frame was received or sent on some port; a
        frame was dropped by a MAC or a receive buffer (for LEDs).
    """

    def __init__(self, params: Params, *, ports: int = 2, rx_depth: int = 4096,
                 fp_stages=None, rx_domains=None, tx_domain=None, result_fifo=None,
                 message_fifo=None, ctrl_key=None,
                 ctrl_port: int = ctrlproto.DEFAULT_CTRL_PORT, ram: str = "memory"):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        if ports not in (1, 2):
            raise ValueError(f"ports must be 1 or 2, not {ports!r}")
        if not isinstance(rx_depth, int) or rx_depth < 2048 or rx_depth & (rx_depth - 1):
            raise ValueError(f"rx_depth must be a power of two of at least 2048, "
                             f"not {rx_depth!r}")
        self._params, self._ports, self._rx_depth = params, ports, rx_depth
        self._fp_stages = fp_stages
        if rx_domains is not None and (len(rx_domains) != ports
                                       or not all(isinstance(d, str) for d in rx_domains)):
            raise ValueError(f"rx_domains must name one domain per port, not {rx_domains!r}")
        if isinstance(tx_domain, str):
            tx_domain = [tx_domain] * ports
        if tx_domain is not None and (not isinstance(tx_domain, (list, tuple))
                                      or len(tx_domain) != ports
                                      or not all(isinstance(d, str) for d in tx_domain)):
            raise ValueError(f"tx_domain must be a domain name or one per port, "
                             f"not {tx_domain!r}")
        self._rx_domains = list(rx_domains) if rx_domains else ["sync"] * ports
        self._tx_domains = list(tx_domain) if tx_domain else ["sync"] * ports
        if result_fifo is None:
            result_fifo = 2 * params.beats + 2
        if not isinstance(result_fifo, int) or result_fifo < 0:
            raise ValueError(f"result_fifo must be a non-negative integer, not {result_fifo!r}")
        self._result_fifo = result_fifo
        if message_fifo is None:
            message_fifo = 2 * params.beats + 2
        if not isinstance(message_fifo, int) or message_fifo < 0 or \
                0 < message_fifo < params.beats + 1:
            raise ValueError(f"message_fifo must be 0 or at least K / L + 1, "
                             f"not {message_fifo!r}")
        self._message_fifo = message_fifo
        if ctrl_key is not None:
            check_ctrl(params, ctrl_key, ctrl_port)
        self._ctrl_key, self._ctrl_port = ctrl_key, ctrl_port
        if ram not in RAM_FORMS:
            raise ValueError(f"ram must be one of {RAM_FORMS}, not {ram!r}")
        self._ram = ram
        super().__init__({
            "rx": In(GmiiRx).array(ports),
            "tx": Out(GmiiTx).array(ports),
            "ctrl_addr": In(16),
            "ctrl_wdata": In(32),
            "ctrl_we": In(1),
            "ctrl_rdata": Out(32),
            "idle": Out(1),
            "activity": Out(1),
            "error": Out(1),
        })

    @property
    def params(self) -> Params:
        return self._params

    def elaborate(self, platform):
        m = Module()
        p = self._params
        P = self._ports
        m.submodules.core = core = NetaggCore(p, fp_stages=self._fp_stages)
        m.submodules.ingress = ingress = IngressArbiter(p, ports=P)
        m.submodules.router = router = ResultRouter(p, ports=P)
        m.submodules.table = table = AddressTable(p)
        wiring.connect(m, ingress.o, core.i)
        m.d.comb += [ingress.v.valid.eq(core.v.valid), ingress.v.payload.eq(core.v.payload),
                     table.learn_valid.eq(ingress.learn_valid),
                     table.learn_tag.eq(ingress.learn_tag),
                     table.learn_en.eq(ingress.learn_en),
                     table.learn_addr.eq(ingress.learn_addr),
                     table.learn_data.eq(ingress.learn_data),
                     table.lookup_valid.eq(router.lookup_valid),
                     table.lookup_addr.eq(router.lookup_addr),
                     table.lookup_tag.eq(router.lookup_tag),
                     router.lookup_ready.eq(table.lookup_ready),
                     router.lookup_data.eq(table.lookup_data),
                     table.drain.eq(core.idle)]
        wiring.connect(m, core.o, router.i)

        ctrl = None
        if self._ctrl_key is not None:
            ctrl = ControlPlane(p, key=self._ctrl_key, ctrl_port=self._ctrl_port, ports=P)
            m.submodules.control = ctrl
        busy = [core.i.valid, core.o.valid]       # for the control plane's ``quiet``

        counters = {}
        activity, errors = [], []
        event = data.StructLayout({"status": RxStatus, "overflow": 1})
        for port in range(P):
            rxd, txd = self._rx_domains[port], self._tx_domains[port]
            mac_rx = MacRx(max_frame=MAX_FRAME)
            rxbuf = FrameBuffer(depth=self._rx_depth, max_length=MAX_FRAME - 4,
                                frames=32, strip=4, mode="drop", ram=self._ram)
            parser = IpRx(p, ctrl_port=self._ctrl_port if ctrl is not None else None)
            resp = Responder(p)
            framer = ResultFramer(p)
            txarb = TxArbiter()
            txbuf = FrameBuffer(depth=2048, max_length=MAX_FRAME - 4, frames=16, mode="stall",
                                ram=self._ram)
            mac_tx = MacTx()
            if rxd != "sync":
                # the MAC's own reset, a register of rxd's reset (see above)
                mac_d = f"{rxd}_mac"
                m.domains += ClockDomain(mac_d, local=True)
                mac_rst = Signal(init=1, reset_less=True, name=f"{rxd}_mac_rst")
                m.d[rxd] += mac_rst.eq(ResetSignal(rxd))
                m.d.comb += [ClockSignal(mac_d).eq(ClockSignal(rxd)),
                             ResetSignal(mac_d).eq(mac_rst)]
                mac_rx = DomainRenamer({"sync": mac_d})(mac_rx)
                rxbuf = DomainRenamer({"sync": rxd})(rxbuf)
            if txd != "sync":
                txbuf = DomainRenamer({"sync": txd})(txbuf)
                mac_tx = DomainRenamer({"sync": txd})(mac_tx)
            for name, sub in (("mac_rx", mac_rx), ("rxbuf", rxbuf), ("parser", parser),
                              ("responder", resp), ("framer", framer), ("txbuf", txbuf),
                              ("txarb", txarb), ("mac_tx", mac_tx)):
                m.submodules[f"{name}{port}"] = sub
            m.d.comb += [mac_rx.gmii.dv.eq(self.rx[port].dv), mac_rx.gmii.er.eq(self.rx[port].er),
                         mac_rx.gmii.data.eq(self.rx[port].data),
                         self.tx[port].en.eq(mac_tx.gmii.en), self.tx[port].er.eq(mac_tx.gmii.er),
                         self.tx[port].data.eq(mac_tx.gmii.data)]
            # One register stage between the MAC and its buffer: the frame's
            # status (the CRC residue and length compares) is a flip-flop by
            # the time the buffer commits or drops the frame.
            rxw = Signal(MacByte, name=f"rxw{port}")
            rxw_valid = Signal(name=f"rxw{port}_valid")
            m.d[rxd] += [rxw_valid.eq(mac_rx.o.valid), rxw.eq(mac_rx.o.payload)]
            status = rxw.status
            m.d.comb += [rxbuf.w.valid.eq(rxw_valid),
                         rxbuf.w.payload.data.eq(rxw.data),
                         rxbuf.w.payload.last.eq(rxw.last),
                         rxbuf.w.payload.drop.eq(status != RxStatus.OK)]
            # Receive frames, and the frame-end events, into the core domain.
            ev_valid = Signal(name=f"ev{port}_valid")
            ev = Signal(event, name=f"ev{port}")
            end = rxw_valid & rxw.last
            if rxd == "sync":
                wiring.connect(m, rxbuf.r, parser.i)
                m.d.comb += [ev_valid.eq(end), ev.status.eq(status),
                             ev.overflow.eq(rxbuf.overflow)]
            else:
                cdc = RegisteredAsyncFIFO(width=BufferedByte.size, depth=16, w_domain=rxd,
                                          r_domain="sync")
                evq = RegisteredAsyncFIFO(width=event.size, depth=8, w_domain=rxd,
                                          r_domain="sync")
                m.submodules[f"rx_cdc{port}"] = cdc
                m.submodules[f"ev_cdc{port}"] = evq
                ev_w = Signal(event, name=f"ev{port}_w")
                m.d.comb += [ev_w.status.eq(status), ev_w.overflow.eq(rxbuf.overflow)]
                # A register slice on the 125 MHz side of the crossing.
                rxs = DomainRenamer({"sync": rxd})(SkidBuffer(BufferedByte))
                m.submodules[f"rx_skid{port}"] = rxs
                wiring.connect(m, rxbuf.r, rxs.i)
                m.d.comb += [cdc.w_data.eq(rxs.o.payload), cdc.w_en.eq(rxs.o.valid),
                             rxs.o.ready.eq(cdc.w_rdy),
                             parser.i.payload.eq(cdc.r_data), parser.i.valid.eq(cdc.r_rdy),
                             cdc.r_en.eq(parser.i.ready),
                             evq.w_data.eq(ev_w), evq.w_en.eq(end),
                             ev_valid.eq(evq.r_rdy), ev.eq(evq.r_data), evq.r_en.eq(1)]
            if self._message_fifo:
                mq = SyncFIFOBuffered(width=message_beat(p.lanes).size, depth=self._message_fifo)
                m.submodules[f"message_q{port}"] = mq
                whole = Signal(range(self._message_fifo + 1), name=f"whole{port}")
                w_last = parser.o.valid & parser.o.ready & parser.o.payload.beat.last
                out = ingress.i[port]
                r_last = out.valid & out.ready & out.payload.beat.last
                with m.If(w_last & ~r_last):
                    m.d.sync += whole.eq(whole + 1)
                with m.Elif(r_last & ~w_last):
                    m.d.sync += whole.eq(whole - 1)
                # A message longer than the queue (a malformed one can carry
                # up to 1472 bytes) is passed through as it comes.
                through = Signal(name=f"through{port}")
                with m.If(~mq.w_rdy & (whole == 0)):
                    m.d.sync += through.eq(1)
                with m.If(r_last):
                    m.d.sync += through.eq(0)
                go = (whole != 0) | through
                busy.append(mq.r_rdy)
                m.d.comb += [mq.w_data.eq(parser.o.payload), mq.w_en.eq(parser.o.valid),
                             parser.o.ready.eq(mq.w_rdy),
                             out.payload.eq(mq.r_data), out.valid.eq(mq.r_rdy & go),
                             mq.r_en.eq(out.ready & go)]
            else:
                wiring.connect(m, parser.o, ingress.i[port])
            busy += [parser.o.valid, parser.reply.valid, resp.busy, resp.o.valid,
                     framer.o.valid]
            if ctrl is not None:
                wiring.connect(m, parser.ctrl, ctrl.req[port])
                m.d.comb += [parser.ctrl_busy.eq(ctrl.busy[port]),
                             ctrl.tee[port].en.eq(parser.tee_en),
                             ctrl.tee[port].addr.eq(parser.tee_addr),
                             ctrl.tee[port].data.eq(parser.tee_data)]
            wiring.connect(m, parser.reply, resp.req)
            m.d.comb += [parser.responder_busy.eq(resp.busy), resp.tee_en.eq(parser.tee_en),
                         resp.tee_addr.eq(parser.tee_addr), resp.tee_data.eq(parser.tee_data)]
            # Transmit: RESULTs and replies take turns, then the buffer and the MAC.
            if self._result_fifo:
                rq = SyncFIFOBuffered(width=result_beat(p.lanes).size, depth=self._result_fifo)
                m.submodules[f"result_q{port}"] = rq
                busy.append(rq.r_rdy)
                m.d.comb += [rq.w_data.eq(router.o[port].payload), rq.w_en.eq(router.o[port].valid),
                             router.o[port].ready.eq(rq.w_rdy),
                             framer.i.payload.eq(rq.r_data), framer.i.valid.eq(rq.r_rdy),
                             rq.r_en.eq(framer.i.ready)]
            else:
                wiring.connect(m, router.o[port], framer.i)
            wiring.connect(m, framer.o, txarb.i[0])
            if ctrl is not None:
                # Replies: the responder's and the control plane's take turns.
                reparb = TxArbiter()
                m.submodules[f"reparb{port}"] = reparb
                wiring.connect(m, resp.o, reparb.i[0])
                wiring.connect(m, ctrl.o[port], reparb.i[1])
                wiring.connect(m, reparb.o, txarb.i[1])
            else:
                wiring.connect(m, resp.o, txarb.i[1])
            if txd == "sync":
                m.d.comb += [txbuf.w.valid.eq(txarb.o.valid),
                             txbuf.w.payload.data.eq(txarb.o.payload.data),
                             txbuf.w.payload.last.eq(txarb.o.payload.last),
                             txarb.o.ready.eq(txbuf.w.ready)]
            else:
                tcdc = RegisteredAsyncFIFO(width=FrameByte.size, depth=16, w_domain="sync",
                                           r_domain=txd)
                m.submodules[f"tx_cdc{port}"] = tcdc
                # A register slice on the 125 MHz side of the crossing.
                txs = DomainRenamer({"sync": txd})(SkidBuffer(FrameByte))
                m.submodules[f"tx_skid{port}"] = txs
                m.d.comb += [tcdc.w_data.eq(txarb.o.payload), tcdc.w_en.eq(txarb.o.valid),
                             txarb.o.ready.eq(tcdc.w_rdy),
                             txs.i.valid.eq(tcdc.r_rdy), txs.i.payload.eq(tcdc.r_data),
                             tcdc.r_en.eq(txs.i.ready),
                             txbuf.w.valid.eq(txs.o.valid),
                             txbuf.w.payload.data.eq(txs.o.payload.data),
                             txbuf.w.payload.last.eq(txs.o.payload.last),
                             txs.o.ready.eq(txbuf.w.ready)]
            tx_out = txbuf.r
            if txd != "sync":
                # A register slice between the buffer's block RAM (its
                # clock-to-out) and the MAC's CRC; full throughput, so a
                # frame still reaches the MAC without a gap.
                txo = DomainRenamer({"sync": txd})(SkidBuffer(BufferedByte))
                m.submodules[f"tx_out_skid{port}"] = txo
                wiring.connect(m, txbuf.r, txo.i)
                tx_out = txo.o
            m.d.comb += [mac_tx.i.valid.eq(tx_out.valid),
                         mac_tx.i.payload.data.eq(tx_out.payload.data),
                         mac_tx.i.payload.last.eq(tx_out.payload.last),
                         tx_out.ready.eq(mac_tx.i.ready)]

            events = {
                "rx": ev_valid,
                "tx": txarb.sent,
                "drop_fcs": ev_valid & (ev.status == RxStatus.FCS),
                "drop_runt": ev_valid & (ev.status == RxStatus.RUNT),
                "drop_too_long": ev_valid & (ev.status == RxStatus.TOO_LONG),
                "drop_overflow": ev_valid & ev.overflow,
                "arp_replies": resp.req.valid & resp.req.ready
                & (resp.req.payload.kind == ReplyKind.ARP),
                "icmp_replies": resp.req.valid & resp.req.ready
                & (resp.req.payload.kind == ReplyKind.ICMP),
                "ignored": parser.ignored,
            }
            assert set(events) == set(regmap.ETH_COUNTERS)
            activity.append(events["rx"] | events["tx"])
            errors.append(events["drop_fcs"] | events["drop_runt"] | events["drop_too_long"]
                          | events["drop_overflow"])
            for name in regmap.ETH_COUNTERS:
                c = Signal(32, name=f"eth{port}_{name}")
                with m.If(events[name]):
                    m.d.sync += c.eq(c + 1)
                counters[regmap.eth_counter_addr(port, name)] = c

        m.d.sync += [self.activity.eq(0), self.error.eq(0)]
        for a in activity:
            with m.If(a):
                m.d.sync += self.activity.eq(1)
        for e in errors:
            with m.If(e):
                m.d.sync += self.error.eq(1)

        # The register bus: the control port's, or the control plane's.
        bus_addr, bus_wdata, bus_we = Signal(16), Signal(32), Signal()
        if ctrl is not None:
            quiet = Signal()
            m.d.comb += quiet.eq(core.idle & ~Cat(*busy).any())
            m.d.comb += [ctrl.quiet.eq(quiet), ctrl.local_addr.eq(bus_addr)]
            with m.If(ctrl.bus_own):
                m.d.comb += [bus_addr.eq(ctrl.bus_addr), bus_wdata.eq(ctrl.bus_wdata),
                             bus_we.eq(ctrl.bus_we)]
            with m.Else():
                m.d.comb += [bus_addr.eq(self.ctrl_addr), bus_wdata.eq(self.ctrl_wdata),
                             bus_we.eq(self.ctrl_we)]
        else:
            m.d.comb += [bus_addr.eq(self.ctrl_addr), bus_wdata.eq(self.ctrl_wdata),
                         bus_we.eq(self.ctrl_we)]
        # Registers: the core's (job table, counters), the front end's
        # counters, the control plane's; other addresses read 0.
        eth_rdata = Signal(32)
        is_eth, is_core = Signal(), Signal()
        with m.Switch(bus_addr):
            for addr, c in counters.items():
                with m.Case(addr):
                    m.d.sync += [eth_rdata.eq(c), is_eth.eq(1)]
            with m.Default():
                m.d.sync += is_eth.eq(0)
        job_end = regmap.JOB_BASE + regmap.JOB_REGS * p.jobs
        n_counters = len(regmap.CORE_COUNTERS)
        m.d.sync += is_core.eq(
            ((bus_addr >= regmap.JOB_BASE) & (bus_addr < job_end))
            | ((bus_addr >= regmap.COUNTER_BASE)
               & (bus_addr < regmap.COUNTER_BASE + n_counters)))
        m.d.comb += [core.ctrl_addr.eq(bus_addr), core.ctrl_wdata.eq(bus_wdata),
                     core.ctrl_we.eq(bus_we)]
        if ctrl is not None:
            m.d.comb += self.idle.eq(core.idle & ctrl.idle)
        else:
            m.d.comb += self.idle.eq(core.idle)
        rdata = Signal(32)
        with m.If(is_eth):
            m.d.comb += rdata.eq(eth_rdata)
        with m.Elif(is_core):
            m.d.comb += rdata.eq(core.ctrl_rdata)
        if ctrl is not None:
            with m.Elif(ctrl.local_hit):
                m.d.comb += rdata.eq(ctrl.local_rdata)
            m.d.comb += ctrl.bus_rdata.eq(rdata)
        m.d.comb += self.ctrl_rdata.eq(rdata)
        return m
