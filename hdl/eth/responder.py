"""The responder: ARP replies and ICMP echo replies from the switch."""

from __future__ import annotations

from amaranth.hdl import C, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg import frames
from netagg.hdl.eth.checksum import be_bytes, oc_sum
from netagg.hdl.eth.layouts import LENGTH_BITS, FrameByte, ReplyKind, ReplyRequest
from netagg.hdl.ram import NO_RW_CHECK, registered_read
from netagg.params import Params

HEAD = 42
DATA_DEPTH = 2048


class Responder(wiring.Component):
    """Builds the replies :class:`netagg.hdl.eth.ip_rx.IpRx` asks for.

    Parameters
    ----------
    params : Params
        ``switch_mac``, ``switch_ip``: the replies' source.

    Ports
    -----
    req : In(stream ReplyRequest)
        Taken when the responder is idle.
    tee_addr, tee_data, tee_en : In
        Writes into the data memory (the request frame's bytes from offset
        42); not while ``busy``.
    o : Out(stream FrameByte)
        The reply frame, unpadded (the MAC pads): an ARP reply
        (:func:`netagg.frames.build_arp_reply`, 42 bytes) or an echo reply
        (:func:`netagg.frames.build_echo_reply`: 14 + the request's total
        length bytes, data read back from the memory). The first byte is
        valid the cycle after ``req`` was taken, then one byte per cycle
        while ``ready``.
    busy : Out(1)
        From the cycle after ``req`` is taken until the reply's last byte is
        in the output register (its data memory is read no more).
    """

    def __init__(self, params: Params):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        self._params = params
        super().__init__({
            "req": In(stream.Signature(ReplyRequest)),
            "tee_addr": In(LENGTH_BITS),
            "tee_data": In(8),
            "tee_en": In(1),
            "o": Out(stream.Signature(FrameByte)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        mac = int.from_bytes(p.switch_mac_bytes, "big")
        ip = int.from_bytes(p.switch_ip_bytes, "big")

        m.submodules.mem = mem = Memory(shape=8, depth=DATA_DEPTH, init=[], attrs=NO_RW_CHECK)
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(self.tee_addr), wp.data.eq(self.tee_data),
                     wp.en.eq(self.tee_en)]

        rq = Signal(ReplyRequest)
        busy = Signal()
        idx = Signal(LENGTH_BITS)
        out_valid = Signal()
        out_data = Signal(8)
        out_last = Signal()
        m.d.comb += [self.busy.eq(busy), self.req.ready.eq(~busy & ~out_valid),
                     self.o.valid.eq(out_valid), self.o.payload.data.eq(out_data),
                     self.o.payload.last.eq(out_last)]

        def c(value, n):
            return be_bytes(C(value, 8 * n), n)

        arp = (be_bytes(rq.mac, 6) + c(mac, 6) + c(frames.ETHERTYPE_ARP, 2)
               + c(1, 2) + c(frames.ETHERTYPE_IPV4, 2) + c(6, 1) + c(4, 1) + c(2, 2)
               + c(mac, 6) + c(ip, 4) + be_bytes(rq.mac, 6) + be_bytes(rq.ip, 4))
        ip_words = [C(0x4500, 16), rq.total, C(0, 16), C(0x4000, 16),
                    C((frames.TTL << 8) | frames.IPPROTO_ICMP, 16),
                    C(ip >> 16, 16), C(ip & 0xFFFF, 16), rq.ip[16:], rq.ip[:16]]
        ip_csum = Signal(16)
        m.d.comb += ip_csum.eq(~oc_sum(ip_words))
        icmp = (be_bytes(rq.mac, 6) + c(mac, 6) + c(frames.ETHERTYPE_IPV4, 2)
                + c(0x45, 1) + c(0, 1) + be_bytes(rq.total, 2) + c(0, 2) + c(0x4000, 2)
                + c(frames.TTL, 1) + c(frames.IPPROTO_ICMP, 1) + be_bytes(ip_csum, 2)
                + c(ip, 4) + be_bytes(rq.ip, 4)
                + c(frames.ICMP_ECHO_REPLY, 1) + c(0, 1) + be_bytes(rq.csum, 2)
                + be_bytes(rq.ident, 2) + be_bytes(rq.seq, 2))
        assert len(arp) == len(icmp) == HEAD
        is_arp = rq.kind == ReplyKind.ARP
        head_byte = Signal(8)
        with m.Switch(idx):
            for i in range(HEAD):
                with m.Case(i):
                    m.d.comb += head_byte.eq(Mux(is_arp, arp[i], icmp[i]))
        end = Mux(is_arp, HEAD, frames.ETH_HEADER + rq.total)

        advance = ~out_valid | self.o.ready
        # The memory is read one byte ahead: data byte idx - 42 + 1.
        rdata = registered_read(m, mem, (idx + 1 - HEAD)[:11], en=advance & busy,
                                name="resp_rdata")
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += [rq.eq(self.req.payload), busy.eq(1), idx.eq(0)]
        with m.If(busy & advance):
            m.d.sync += [out_valid.eq(1), out_data.eq(Mux(idx < HEAD, head_byte, rdata)),
                         out_last.eq(idx == end - 1), idx.eq(idx + 1)]
            with m.If(idx == end - 1):
                m.d.sync += busy.eq(0)
        with m.Elif(self.o.ready):
            m.d.sync += out_valid.eq(0)
        return m
