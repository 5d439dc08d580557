"""The control plane over UDP on the Ethernet switch (docs/ethernet.md,
format: :mod:`netagg.ctrlproto`): register reads and writes in datagrams to
the switch's control port, answered with one reply frame."""

from __future__ import annotations

import struct

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg import ctrlproto as cp
from netagg.hdl.eth.layouts import LENGTH_BITS, CtrlRequest, FrameByte, Sender, Tee
from netagg.hdl.eth.udp_head import HEAD_BYTES, udp_frame_head
from netagg.hdl.ram import NO_RW_CHECK, registered_read
from netagg.params import Params

HEAD = HEAD_BYTES
DATA_DEPTH = 2048
"""Bytes of each port's datagram memory (a datagram has at most 1472)."""


def _fields(st: struct.Struct, names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """(byte offset, byte count) of each field of a big-endian ``struct`` format."""
    out, at = {}, 0
    for code, name in zip(st.format.lstrip(">!"), names, strict=True):
        size = struct.calcsize(">" + code)
        out[name] = (at, size)
        at += size
    assert at == st.size
    return out


HEADER_FIELDS = _fields(cp.HEADER, ("ver", "type", "seq", "key", "n", "rsvd"))
"""The request header's fields, from :data:`netagg.ctrlproto.HEADER`."""
ACCESS_FIELDS = _fields(cp.ACCESS, ("op", "rsvd", "addr", "value"))
"""An access's fields, from :data:`netagg.ctrlproto.ACCESS`."""


def _be_field(reg, fields, name):
    """Field ``name`` of a register holding bytes (byte k at bits 8k..8k+7)
    as the big-endian integer of its bytes."""
    at, size = fields[name]
    return Cat(*[reg.word_select(at + size - 1 - i, 8) for i in range(size)])


def check_ctrl(params: Params, key, ctrl_port) -> None:
    """ValueError unless ``key`` is a 64-bit integer and ``ctrl_port`` a UDP
    port other than the netagg messages' (``params.port``)."""
    if not isinstance(key, int) or not 0 <= key < 1 << 64:
        raise ValueError(f"key must be a 64-bit integer, not {key!r}")
    if not isinstance(ctrl_port, int) or not 0 < ctrl_port < 1 << 16 \
            or ctrl_port == params.port:
        raise ValueError(f"ctrl_port must be a UDP port other than the netagg port "
                         f"{params.port}, not {ctrl_port!r}")


class ControlPlane(wiring.Component):
    """Answers the control datagrams the ports' parsers
    (:class:`netagg.hdl.eth.ip_rx.IpRx`) hand over, one at a time, checked
    and carried out exactly as :mod:`netagg.ctrlproto` says.

    A datagram is first read back from its port's memory (one byte per
    cycle) and checked whole: length 16 + 8n, ver, type, 1 <= n <=
    MAX_ACCESSES, reserved fields, every op; then the key. A malformed one
    counts ``ctrl_malformed``, one with the wrong key ``ctrl_bad_key``;
    either is dropped with no register access and no reply. A valid one
    waits until ``quiet`` has been high for ``quiet_cycles`` consecutive
    cycles (every earlier message through the core, its RESULTs and every
    reply framed; or after ``patience`` cycles at most), then owns the
    register bus and makes its accesses in order, each in 17 cycles: 10 to
    read it from the memory, a write cycle (``bus_we`` for a write), a read
    cycle, the capture of ``bus_rdata`` (the register after the access),
    and 4 cycles storing the value back into the memory (the check before
    takes the datagram's length + 2 cycles); ``ctrl_ok`` counts
    it and the reply frame goes out on the request's port: Ethernet II /
    IPv4 / UDP from the switch (``switch_mac``, ``switch_ip``, UDP source
    port ``ctrl_port``) to the request's sender, IPv4 as
    :func:`netagg.frames.build_frame` (id 0, DF, TTL 64, header checksum),
    UDP checksum 0, payload the request with type REPLY and each access's
    value replaced: 42 + 16 + 8n bytes, one per cycle while ``ready``.

    Parameters
    ----------
    params : Params
        ``switch_mac``, ``switch_ip``, and the INFO registers' values.
    key : int
        The 64-bit key.
    ctrl_port : int
        The UDP port of the reply's source (the parser matches requests).
    ports : int
    quiet_cycles : int
    patience : int
        Most cycles a valid request waits for ``quiet``.

    Ports
    -----
    req : In(stream CtrlRequest) x ports
        A control datagram, its payload already written through ``tee``;
        taken when the control plane is idle (the lowest port first).
    tee : In(Tee) x ports
        Writes into port p's memory (the frame bytes from offset 42), except
        while ``busy[p]``.
    busy : Out(ports)
        Port p's request is pending or being served: its parser starts no
        frame (and writes no byte through ``tee``).
    quiet : In(1)
        Nothing is in flight in the core, the queues, the framers and the
        responders.
    bus_own, bus_addr, bus_wdata, bus_we : Out; bus_rdata : In(32)
        The switch's register bus while ``bus_own`` (from the first access
        to the last); ``bus_rdata`` shows the register at the previous
        cycle's ``bus_addr``.
    local_addr : In(16); local_rdata, local_hit : Out
        The control plane's own read-only registers (ctrlproto's INFO, CTRL
        and SERVE, the last reading 0): ``local_hit`` and ``local_rdata``
        the cycle after ``local_addr`` names one; writes are ignored.
    o : Out(stream FrameByte) x ports
        The reply frames, unpadded (the MAC pads), on the request's port.
    idle : Out(1)
        No request pending or being served.
    """

    def __init__(self, params: Params, *, key: int, ctrl_port: int = cp.DEFAULT_CTRL_PORT,
                 ports: int = 2, quiet_cycles: int = 16, patience: int = 1 << 16):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        check_ctrl(params, key, ctrl_port)
        if ports not in (1, 2):
            raise ValueError(f"ports must be 1 or 2, not {ports!r}")
        if not isinstance(quiet_cycles, int) or quiet_cycles < 1:
            raise ValueError(f"quiet_cycles must be a positive integer, not {quiet_cycles!r}")
        if not isinstance(patience, int) or patience < quiet_cycles:
            raise ValueError(f"patience must be an integer of at least quiet_cycles, "
                             f"not {patience!r}")
        self._params, self._key, self._ctrl_port, self._ports = params, key, ctrl_port, ports
        self._quiet_cycles, self._patience = quiet_cycles, patience
        super().__init__({
            "req": In(stream.Signature(CtrlRequest)).array(ports),
            "tee": In(Tee).array(ports),
            "busy": Out(ports),
            "quiet": In(1),
            "bus_own": Out(1),
            "bus_addr": Out(16),
            "bus_wdata": Out(32),
            "bus_we": Out(1),
            "bus_rdata": In(32),
            "local_addr": In(16),
            "local_rdata": Out(32),
            "local_hit": Out(1),
            "o": Out(stream.Signature(FrameByte)).array(ports),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        P = self._ports
        mac = int.from_bytes(p.switch_mac_bytes, "big")
        ip = int.from_bytes(p.switch_ip_bytes, "big")

        # -- counters and the local registers ---------------------------------
        counters = {name: Signal(32, name=name) for name in cp.CTRL_COUNTERS}
        info = cp.info_values(p, cp.FRONTEND_ETHERNET)
        with m.Switch(self.local_addr):
            for i, value in enumerate(info):
                with m.Case(cp.INFO_BASE + i):
                    m.d.sync += [self.local_rdata.eq(value), self.local_hit.eq(1)]
            for i, name in enumerate(cp.CTRL_COUNTERS):
                with m.Case(cp.CTRL_BASE + i):
                    m.d.sync += [self.local_rdata.eq(counters[name]), self.local_hit.eq(1)]
            for i in range(len(cp.SERVE_COUNTERS)):
                with m.Case(cp.SERVE_BASE + i):
                    m.d.sync += [self.local_rdata.eq(0), self.local_hit.eq(1)]
            with m.Default():
                m.d.sync += self.local_hit.eq(0)

        # -- the datagram memories ---------------------------------------------
        cur = Signal(range(P))
        serving = Signal()
        raddr = Signal(LENGTH_BITS)
        ren = Signal()
        w_en, w_addr, w_data = Signal(), Signal(LENGTH_BITS), Signal(8)
        rdatas = []
        for port in range(P):
            mem = Memory(shape=8, depth=DATA_DEPTH, init=[], attrs=NO_RW_CHECK)
            m.submodules[f"mem{port}"] = mem
            wp = mem.write_port()
            mine = serving & (cur == port)
            tee = self.tee[port]
            m.d.comb += [wp.addr.eq(Mux(mine, w_addr, tee.addr)),
                         wp.data.eq(Mux(mine, w_data, tee.data)),
                         wp.en.eq(Mux(mine, w_en, tee.en)),
                         self.busy[port].eq(self.req[port].valid | mine)]
            rdatas.append(registered_read(m, mem, raddr, en=ren, name=f"ctrl{port}_rdata"))
        rdata = Array(rdatas)[cur]
        m.d.comb += self.idle.eq(~serving & ~Cat(*(r.valid for r in self.req)).any())

        # -- the request ---------------------------------------------------------
        length = Signal(LENGTH_BITS)
        sender = Signal(Sender)
        hdr = Signal(8 * cp.HEADER_BYTES)
        acc = Signal(8 * cp.ACCESS_BYTES)
        ver, typ = _be_field(hdr, HEADER_FIELDS, "ver"), _be_field(hdr, HEADER_FIELDS, "type")
        key, n = _be_field(hdr, HEADER_FIELDS, "key"), _be_field(hdr, HEADER_FIELDS, "n")
        rsvd = _be_field(hdr, HEADER_FIELDS, "rsvd")
        op = _be_field(acc, ACCESS_FIELDS, "op")
        addr = _be_field(acc, ACCESS_FIELDS, "addr")
        value_in = _be_field(acc, ACCESS_FIELDS, "value")
        op_at, _ = ACCESS_FIELDS["op"]
        rsvd_at, _ = ACCESS_FIELDS["rsvd"]
        value_at, _ = ACCESS_FIELDS["value"]

        idx = Signal(LENGTH_BITS + 1)       # next byte to read
        pv = Signal()                       # rdata holds byte ``prev``
        prev = Signal(LENGTH_BITS + 1)
        apos = Signal(range(cp.ACCESS_BYTES))
        bad = Signal()
        base = Signal(LENGTH_BITS + 1)      # the current access's first byte
        left = Signal(range(cp.MAX_ACCESSES + 1))
        b = Signal(range(cp.ACCESS_BYTES + 1))
        value = Signal(32)
        k = Signal(2)
        qcount = Signal(range(self._quiet_cycles + 1))
        waited = Signal(range(self._patience + 1))

        # -- the reply -----------------------------------------------------------
        ridx = Signal(LENGTH_BITS + 1)
        out_valid, out_data, out_last = Signal(), Signal(8), Signal()
        o_ready = Array(o.ready for o in self.o)[cur]
        for port, o in enumerate(self.o):
            m.d.comb += [o.valid.eq(out_valid & (cur == port)), o.payload.data.eq(out_data),
                         o.payload.last.eq(out_last)]
        head = udp_frame_head(m, src_mac=mac, src_ip=ip, src_port=self._ctrl_port,
                              dst_mac=sender.mac, dst_ip=sender.ip, dst_port=sender.port,
                              payload_len=length)
        head_byte = Signal(8)
        with m.Switch(ridx):
            for i in range(HEAD):
                with m.Case(i):
                    m.d.comb += head_byte.eq(head[i])
        type_at = HEAD + HEADER_FIELDS["type"][0]

        # -- the sequence ----------------------------------------------------------
        wellformed = ((ver == cp.VERSION) & (typ == cp.REQUEST) & (rsvd == 0) & (n >= 1)
                      & (n <= cp.MAX_ACCESSES)
                      & (length == cp.HEADER_BYTES + cp.ACCESS_BYTES * n) & ~bad)
        sel = Signal(range(P))
        any_req = Signal()
        for port in reversed(range(P)):
            with m.If(self.req[port].valid):
                m.d.comb += [sel.eq(port), any_req.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                for port in range(P):
                    m.d.comb += self.req[port].ready.eq(sel == port)
                for port in range(P):
                    with m.If(any_req & (sel == port)):
                        m.d.sync += [length.eq(self.req[port].payload.length),
                                     sender.eq(self.req[port].payload.sender)]
                with m.If(any_req):
                    m.d.sync += [cur.eq(sel), serving.eq(1), idx.eq(0), pv.eq(0), apos.eq(0),
                                 bad.eq(0)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                # Every byte once: the header kept, each access's op and
                # reserved byte checked.
                m.d.comb += [raddr.eq(idx), ren.eq(1)]
                m.d.sync += [pv.eq(idx < length), prev.eq(idx)]
                with m.If(idx < length):
                    m.d.sync += idx.eq(idx + 1)
                with m.If(pv):
                    with m.If(prev < cp.HEADER_BYTES):
                        m.d.sync += hdr.word_select(prev[:4], 8).eq(rdata)
                    with m.Else():
                        m.d.sync += apos.eq(apos + 1)
                        with m.If(((apos == op_at) & (rdata > cp.OP_WRITE))
                                  | ((apos == rsvd_at) & (rdata != 0))):
                            m.d.sync += bad.eq(1)
                with m.If(~pv & (idx == length)):
                    m.next = "DECIDE"
            with m.State("DECIDE"):
                with m.If(~wellformed):
                    m.d.sync += [counters["ctrl_malformed"].eq(counters["ctrl_malformed"] + 1),
                                 serving.eq(0)]
                    m.next = "IDLE"
                with m.Elif(key != self._key):
                    m.d.sync += [counters["ctrl_bad_key"].eq(counters["ctrl_bad_key"] + 1),
                                 serving.eq(0)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [qcount.eq(0), waited.eq(0), base.eq(cp.HEADER_BYTES),
                                 left.eq(n)]
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.sync += [qcount.eq(Mux(self.quiet, qcount + 1, 0)), waited.eq(waited + 1)]
                with m.If((qcount == self._quiet_cycles) | (waited == self._patience)):
                    m.d.sync += [idx.eq(base), b.eq(0), pv.eq(0)]
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += [self.bus_own.eq(1), raddr.eq(idx), ren.eq(1)]
                m.d.sync += [pv.eq(b < cp.ACCESS_BYTES), prev.eq(b)]
                with m.If(b < cp.ACCESS_BYTES):
                    m.d.sync += [idx.eq(idx + 1), b.eq(b + 1)]
                with m.If(pv):
                    m.d.sync += acc.word_select(prev[:3], 8).eq(rdata)
                with m.If(~pv & (b == cp.ACCESS_BYTES)):
                    m.next = "ACCESS"
            with m.State("ACCESS"):
                m.d.comb += [self.bus_own.eq(1), self.bus_addr.eq(addr),
                             self.bus_wdata.eq(value_in), self.bus_we.eq(op == cp.OP_WRITE)]
                m.next = "READBACK"
            with m.State("READBACK"):
                m.d.comb += [self.bus_own.eq(1), self.bus_addr.eq(addr)]
                m.next = "CAPTURE"
            with m.State("CAPTURE"):
                m.d.comb += [self.bus_own.eq(1), self.bus_addr.eq(addr)]
                m.d.sync += [value.eq(self.bus_rdata), k.eq(0)]
                m.next = "STORE"
            with m.State("STORE"):
                m.d.comb += [self.bus_own.eq(1), w_en.eq(1),
                             w_addr.eq(base + value_at + k),
                             w_data.eq(value.word_select(~k, 8))]
                m.d.sync += k.eq(k + 1)
                with m.If(k == 3):
                    with m.If(left == 1):
                        m.d.sync += [counters["ctrl_ok"].eq(counters["ctrl_ok"] + 1),
                                     ridx.eq(0)]
                        m.next = "REPLY"
                    with m.Else():
                        m.d.sync += [left.eq(left - 1), base.eq(base + cp.ACCESS_BYTES),
                                     idx.eq(base + cp.ACCESS_BYTES), b.eq(0), pv.eq(0)]
                        m.next = "READ"
            with m.State("REPLY"):
                advance = ~out_valid | o_ready
                end = HEAD + length
                # The memory is read one byte ahead: payload byte ridx - 42 + 1.
                m.d.comb += [raddr.eq((ridx + 1 - HEAD)[:LENGTH_BITS]), ren.eq(advance)]
                with m.If(advance):
                    m.d.sync += [out_valid.eq(1), out_last.eq(ridx == end - 1),
                                 out_data.eq(Mux(ridx < HEAD, head_byte,
                                                 Mux(ridx == type_at, cp.REPLY, rdata))),
                                 ridx.eq(ridx + 1)]
                    with m.If(ridx == end - 1):
                        m.next = "LAST"
            with m.State("LAST"):
                with m.If(o_ready):
                    m.d.sync += [out_valid.eq(0), serving.eq(0)]
                    m.next = "IDLE"
        return m
