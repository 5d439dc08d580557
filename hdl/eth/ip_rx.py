"""The receive parser: whole frames to core message beats, ARP and ICMP
echo requests to the responder."""

from __future__ import annotations

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg import frames
from netagg.hdl import layouts
from netagg.hdl.eth.checksum import oc_add
from netagg.hdl.eth.layouts import (
    LENGTH_BITS,
    BufferedByte,
    CtrlRequest,
    ReplyKind,
    ReplyRequest,
    message_beat,
)
from netagg.params import Params
from netagg.wire import HEADER_BYTES

HEAD = frames.ETH_HEADER + frames.IPV4_HEADER + frames.UDP_HEADER     # 42


class IpRx(wiring.Component):
    """Classifies whole frames as ``netagg model`` does and turns netagg
    messages into core ingress beats (docs/core.md).

    Parameters
    ----------
    params : Params
        ``lanes``, ``port`` (UDP port of netagg messages) and ``switch_ip``
        (the address ARP and ICMP requests must ask for).
    ctrl_port : int or None
        The UDP port of the control plane (None: off, such datagrams are
        ``ignored`` frames).

    Ports
    -----
    i : In(stream BufferedByte)
        Whole frames (no FCS, at least 60 bytes as the MAC delivers them;
        ``length`` their byte count). One byte is taken per cycle except
        while a beat waits on ``o``, and the first byte of a frame waits
        until the previous frame's reply request is taken and the responder
        is not ``responder_busy``.
    o : Out(stream message_beat(L))
        For a frame that :func:`netagg.frames.parse` accepts (decided on its
        43rd byte): the UDP payload as max(1, ceil(E / L)) beats exactly as
        :func:`netagg.sim.beats.message_to_beats` forms them (header,
        ``length`` = UDP length - 8, ``tag`` 0, lanes past E zero), each
        with the frame's sender (Ethernet source, IPv4 source, UDP source
        port). A beat is valid the cycle after its last byte was taken.
    reply : Out(stream ReplyRequest)
        The cycle after the last byte of an ARP request for ``switch_ip``
        (:func:`netagg.frames.parse_arp_request`) or of an ICMP echo request
        to it with valid checksums (:func:`netagg.frames.parse_echo_request`):
        what the responder needs, the reply's ICMP checksum computed.
    tee_addr, tee_data, tee_en : Out
        Every byte at frame offset 42 and beyond, written at offset - 42:
        the ICMP data, into the responder's memory.
    responder_busy : In(1)
        The responder is sending; no new frame is started.
    ctrl : Out(stream CtrlRequest)
        The cycle after the last byte of a frame carrying a UDP datagram to
        ``switch_ip`` at ``ctrl_port`` (the IPv4 and UDP checks of a netagg
        message): its sender and payload length; the payload went out
        through ``tee`` (for :class:`netagg.hdl.eth.control.ControlPlane`).
    ctrl_busy : In(1)
        The control plane holds this port's datagram; no new frame is
        started.
    ignored : Out(1)
        One-cycle pulse, the cycle after the last byte of a frame that is
        neither a netagg message nor answered.
    """

    def __init__(self, params: Params, *, ctrl_port: int | None = None):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        if ctrl_port is not None and (not isinstance(ctrl_port, int)
                                      or not 0 < ctrl_port < 1 << 16 or ctrl_port == params.port):
            raise ValueError(f"ctrl_port must be None or a UDP port other than {params.port}, "
                             f"not {ctrl_port!r}")
        self._params, self._ctrl_port = params, ctrl_port
        super().__init__({
            "i": In(stream.Signature(BufferedByte)),
            "o": Out(stream.Signature(message_beat(params.lanes))),
            "reply": Out(stream.Signature(ReplyRequest)),
            "tee_addr": Out(LENGTH_BITS),
            "tee_data": Out(8),
            "tee_en": Out(1),
            "responder_busy": In(1),
            "ctrl": Out(stream.Signature(CtrlRequest)),
            "ctrl_busy": In(1),
            "ignored": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L = p.lanes
        switch_ip = int.from_bytes(p.switch_ip_bytes, "big")

        hdr = Signal(8 * HEAD)

        def byte(k):
            return hdr[8 * k:8 * k + 8]

        def field(start, n):
            return Cat(*[byte(start + n - 1 - i) for i in range(n)])

        ethertype, ver_ihl, total = field(12, 2), byte(14), field(16, 2)
        frag, proto = field(20, 2), byte(23)
        src_mac, src_ip, dst_ip = field(6, 6), field(26, 4), field(30, 4)
        sport, dport, udp_len = field(34, 2), field(36, 2), field(38, 2)

        pos = Signal(LENGTH_BITS)
        flen = Signal(LENGTH_BITS)
        ended = Signal()
        beat_valid = Signal()
        beat_last = Signal()
        d = self.i.payload.data
        can_take = (~beat_valid | self.o.ready) & ~(
            (pos == 0) & (ended | self.responder_busy | self.reply.valid | self.ctrl.valid
                          | self.ctrl_busy))
        take = Signal()
        m.d.comb += [self.i.ready.eq(can_take), take.eq(self.i.valid & can_take)]
        length = flen

        with m.If(take):
            m.d.sync += [pos.eq(pos + 1), flen.eq(self.i.payload.length)]
            with m.If(pos < HEAD):
                m.d.sync += hdr.word_select(pos[:6], 8).eq(d)
            with m.If(self.i.payload.last):
                m.d.sync += [pos.eq(0), ended.eq(1)]

        ip_ok = ((ethertype == frames.ETHERTYPE_IPV4) & (ver_ihl == 0x45)
                 & (frag[:14] == 0) & (total >= frames.IPV4_HEADER + 8)
                 & (length >= frames.ETH_HEADER + total))
        is_netagg = (ip_ok & (proto == frames.IPPROTO_UDP) & (dport == p.port)
                     & (udp_len >= frames.UDP_HEADER) & (udp_len + frames.IPV4_HEADER == total))

        udp_ok = ((proto == frames.IPPROTO_UDP) & (udp_len >= frames.UDP_HEADER)
                  & (udp_len + frames.IPV4_HEADER == total))
        if self._ctrl_port is None:
            is_ctrl = C(0)
        else:
            is_ctrl = ip_ok & udp_ok & (dport == self._ctrl_port) & (dst_ip == switch_ip)

        # -- netagg messages ------------------------------------------------
        in_msg = Signal()
        was_msg = Signal()
        mpos = Signal(16)
        msg_len = Signal(16)
        mhdr = Signal(8 * HEADER_BYTES)
        lanes = Array(Signal(32, name=f"lane{i}") for i in range(L))
        lane = Signal(range(L))
        elem = Signal(24)
        ebyte = Signal(2)
        ne = Signal(16)
        start_msg = take & (pos == HEAD) & is_netagg
        k = Mux(start_msg, 0, mpos)
        mlen = Mux(start_msg, udp_len - frames.UDP_HEADER, msg_len)
        size2 = data.View(layouts.Header, mhdr).dtype == layouts.DType.BF16
        body = Signal(16)
        m.d.comb += body.eq(msg_len - HEADER_BYTES)
        E = Mux(msg_len > HEADER_BYTES, Mux(size2, body[1:], body[2:]), 0)
        mb = (start_msg | (take & in_msg)) & (k < mlen)

        with m.If(beat_valid & self.o.ready):
            m.d.sync += beat_valid.eq(0)
            m.d.sync += [lane_sig.eq(0) for lane_sig in lanes]
        with m.If(start_msg):
            m.d.sync += [in_msg.eq(1), was_msg.eq(1), mpos.eq(0), msg_len.eq(mlen),
                         mhdr.eq(0), ne.eq(0), ebyte.eq(0), lane.eq(0)]
            with m.If(mlen == 0):
                m.d.sync += [in_msg.eq(0), beat_valid.eq(1), beat_last.eq(1)]
        with m.If(mb):
            m.d.sync += mpos.eq(k + 1)
            with m.If(k < HEADER_BYTES):
                m.d.sync += mhdr.word_select(~k[:4], 8).eq(d)
                with m.If((k == mlen - 1) | ((k == HEADER_BYTES - 1) & (E == 0))):
                    m.d.sync += [in_msg.eq(0), beat_valid.eq(1), beat_last.eq(1)]
            with m.Elif(ne < E):
                value = Mux(size2, Cat(d, elem[:8], C(0, 16)), Cat(d, elem))
                m.d.sync += [elem.eq(Cat(d, elem[:16])), ebyte.eq(ebyte + 1)]
                with m.If(ebyte == Mux(size2, 1, 3)):
                    m.d.sync += [lanes[lane].eq(value), ebyte.eq(0), ne.eq(ne + 1),
                                 lane.eq(lane + 1)]
                    with m.If((lane == L - 1) | (ne + 1 == E)):
                        m.d.sync += [beat_valid.eq(1), beat_last.eq(ne + 1 == E), lane.eq(0)]
                        with m.If(ne + 1 == E):
                            m.d.sync += in_msg.eq(0)
        with m.If(take & self.i.payload.last):
            m.d.sync += in_msg.eq(0)

        o = self.o.payload
        m.d.comb += [
            self.o.valid.eq(beat_valid),
            o.beat.header.eq(mhdr), o.beat.length.eq(msg_len), o.beat.last.eq(beat_last),
            o.sender.mac.eq(src_mac), o.sender.ip.eq(src_ip), o.sender.port.eq(sport),
        ]
        m.d.comb += [o.beat.data[i].eq(lanes[i]) for i in range(L)]

        # -- checksums of ICMP echo requests ---------------------------------
        hi = Signal(8)
        ip_sum, icmp_all, icmp_rest = Signal(16), Signal(16), Signal(16)
        word = Cat(d, hi)
        end = Signal(LENGTH_BITS + 6)
        m.d.comb += end.eq(frames.ETH_HEADER + total)
        with m.If(take):
            m.d.sync += hi.eq(d)
            with m.If(pos == 0):
                m.d.sync += [ip_sum.eq(0), icmp_all.eq(0), icmp_rest.eq(0)]
            with m.If(pos[0] & (pos >= 15) & (pos <= 33)):
                m.d.sync += ip_sum.eq(oc_add(ip_sum, word))
            with m.If((pos >= 34) & (pos < end)):
                last_odd = ~pos[0] & (pos == end - 1)
                w = Mux(last_odd, Cat(C(0, 8), d), word)
                with m.If(pos[0] | last_odd):
                    m.d.sync += icmp_all.eq(oc_add(icmp_all, w))
                    with m.If(pos >= 38):
                        m.d.sync += icmp_rest.eq(oc_add(icmp_rest, w))

        # -- end of frame: ARP and ICMP requests, or ignored -----------------
        arp_ok = ((ethertype == frames.ETHERTYPE_ARP) & (field(14, 2) == 1)
                  & (field(16, 2) == frames.ETHERTYPE_IPV4) & (byte(18) == 6) & (byte(19) == 4)
                  & (field(20, 2) == 1) & (field(38, 4) == switch_ip) & (flen >= HEAD))
        icmp_ok = (ip_ok & (proto == frames.IPPROTO_ICMP) & (ip_sum == 0xFFFF)
                   & (byte(34) == frames.ICMP_ECHO_REQUEST) & (byte(35) == 0)
                   & (icmp_all == 0xFFFF) & (dst_ip == switch_ip))
        r = self.reply.payload
        with m.If(self.reply.valid & self.reply.ready):
            m.d.sync += self.reply.valid.eq(0)
        cq = self.ctrl.payload
        with m.If(self.ctrl.valid & self.ctrl.ready):
            m.d.sync += self.ctrl.valid.eq(0)
        with m.If(ended):
            m.d.sync += [ended.eq(0), was_msg.eq(0)]
            with m.If(~was_msg & is_ctrl):
                m.d.sync += [self.ctrl.valid.eq(1), cq.sender.mac.eq(src_mac),
                             cq.sender.ip.eq(src_ip), cq.sender.port.eq(sport),
                             cq.length.eq(udp_len - frames.UDP_HEADER)]
            with m.Elif(~was_msg & (arp_ok | icmp_ok)):
                m.d.sync += [
                    self.reply.valid.eq(1),
                    r.kind.eq(Mux(arp_ok, ReplyKind.ARP, ReplyKind.ICMP)),
                    r.mac.eq(Mux(arp_ok, field(22, 6), src_mac)),
                    r.ip.eq(Mux(arp_ok, field(28, 4), src_ip)),
                    r.total.eq(total), r.csum.eq(~icmp_rest),
                    r.ident.eq(field(38, 2)), r.seq.eq(field(40, 2)),
                ]
            with m.Elif(~was_msg):
                m.d.comb += self.ignored.eq(1)
        m.d.comb += [self.tee_en.eq(take & (pos >= HEAD)), self.tee_addr.eq(pos - HEAD),
                     self.tee_data.eq(d)]
        return m
