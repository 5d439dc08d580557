"""RESULTs to frames: the address table lookup and the RESULT framer."""

from __future__ import annotations

from amaranth.hdl import C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.eth.checksum import be_bytes
from netagg.hdl.eth.layouts import FrameByte, Learned, result_beat
from netagg.hdl.eth.udp_head import HEAD_BYTES, udp_frame_head
from netagg.params import Params
from netagg.wire import HEADER_BYTES

HEAD = HEAD_BYTES


def table_index_bits(params: Params) -> int:
    return layouts.bits_for(params.jobs * params.workers)


def table_index(params: Params, job, worker):
    """Address-table entry of (job, worker): job * W_max + worker."""
    j = job[:layouts.bits_for(params.jobs)]
    w = worker[:layouts.bits_for(params.workers)]
    return (j * params.workers + w)[:table_index_bits(params)]


class ResultRouter(wiring.Component):
    """Looks up each RESULT's destination and sends it to that port.

    Parameters
    ----------
    params : Params
    ports : int

    Ports
    -----
    i : In(stream egress_beat(L))
        The core's RESULT beats.
    lookup_valid, lookup_addr, lookup_tag : Out; lookup_ready, lookup_data : In
        The address-table lookup (:class:`netagg.hdl.eth.address_table.AddressTable`)
        of each RESULT's (job, worker) (:func:`table_index`) as of its tag.
    o : Out(stream result_beat(L)) x ports
        Each RESULT's beats with its looked-up destination, on its port:
        two idle cycles per RESULT after the lookup is served, then one beat
        per cycle.
    """

    def __init__(self, params: Params, *, ports: int = 2):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        if ports not in (1, 2):
            raise ValueError(f"ports must be 1 or 2, not {ports!r}")
        self._params, self._ports = params, ports
        L = params.lanes
        super().__init__({
            "i": In(stream.Signature(layouts.egress_beat(L))),
            "lookup_valid": Out(1),
            "lookup_addr": Out(table_index_bits(params)),
            "lookup_tag": Out(16),
            "lookup_ready": In(1),
            "lookup_data": In(Learned),
            "o": Out(stream.Signature(result_beat(L))).array(ports),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        h = data.View(layouts.Header, self.i.payload.header)
        m.d.comb += [self.lookup_addr.eq(table_index(p, h.job, h.worker)),
                     self.lookup_tag.eq(self.i.payload.tag)]
        dst = Signal(Learned)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.lookup_valid.eq(self.i.valid)
                with m.If(self.i.valid & self.lookup_ready):
                    m.next = "LOOK"
            with m.State("LOOK"):
                m.d.sync += dst.eq(self.lookup_data)
                m.next = "PASS"
            with m.State("PASS"):
                for port, o in enumerate(self.o):
                    sel = (dst.port == port) if self._ports > 1 else C(1)
                    m.d.comb += [o.payload.beat.eq(self.i.payload), o.payload.dst.eq(dst.sender),
                                 o.valid.eq(self.i.valid & sel)]
                    with m.If(sel):
                        m.d.comb += self.i.ready.eq(o.ready)
                with m.If(self.i.valid & self.i.ready & self.i.payload.last):
                    m.next = "IDLE"
        return m


class ResultFramer(wiring.Component):
    """Frames RESULTs: Ethernet II / IPv4 / UDP as :func:`netagg.frames.build_frame`
    builds them (from the switch's endpoint; IPv4 without options, id 0, DF,
    TTL 64, header checksum; UDP checksum 0), unpadded (the MAC pads).

    Parameters
    ----------
    params : Params
        ``lanes``, ``port``, ``switch_mac``, ``switch_ip``.

    Ports
    -----
    i : In(stream result_beat(L))
        A RESULT's ceil(count / L) beats with its destination. A beat is
        taken with the frame byte holding its last element (the last beat
        with the frame's last byte).
    o : Out(stream FrameByte)
        42 + 16 + count * size bytes per RESULT, one per cycle while
        ``ready``; the first valid the cycle after the first beat arrived.
    """

    def __init__(self, params: Params):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        self._params = params
        super().__init__({
            "i": In(stream.Signature(result_beat(params.lanes))),
            "o": Out(stream.Signature(FrameByte)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L = p.lanes
        mac = int.from_bytes(p.switch_mac_bytes, "big")
        ip = int.from_bytes(p.switch_ip_bytes, "big")
        beat, dst = self.i.payload.beat, self.i.payload.dst
        h = data.View(layouts.Header, beat.header)
        size2 = h.dtype == layouts.DType.BF16
        count = h.count
        body = Signal(18)
        m.d.comb += body.eq(Mux(size2, count << 1, count << 2))
        head = udp_frame_head(m, src_mac=mac, src_ip=ip, src_port=p.port, dst_mac=dst.mac,
                              dst_ip=dst.ip, dst_port=dst.port,
                              payload_len=HEADER_BYTES + body) + be_bytes(beat.header,
                                                                          HEADER_BYTES)
        NHEAD = HEAD + HEADER_BYTES
        assert len(head) == NHEAD

        idx = Signal(range(NHEAD + 1))
        lane = Signal(range(L))
        ebyte = Signal(2)
        ne = Signal(16)
        out_valid, out_data, out_last = Signal(), Signal(8), Signal()
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.data.eq(out_data),
                     self.o.payload.last.eq(out_last)]
        advance = ~out_valid | self.o.ready
        head_byte = Signal(8)
        with m.Switch(idx):
            for i in range(NHEAD):
                with m.Case(i):
                    m.d.comb += head_byte.eq(head[i])
        lane_value = beat.data[lane]
        elem_byte = Signal(8)
        m.d.comb += elem_byte.eq(Mux(size2, lane_value.word_select(~ebyte[0], 8),
                                     lane_value.word_select(~ebyte, 8)))

        with m.If(advance):
            m.d.sync += out_valid.eq(0)
        with m.If(advance & self.i.valid):
            m.d.sync += out_valid.eq(1)
            with m.If(idx < NHEAD):
                m.d.sync += [out_data.eq(head_byte), idx.eq(idx + 1), out_last.eq(0)]
                with m.If((idx == NHEAD - 1) & (count == 0)):
                    m.d.comb += self.i.ready.eq(1)
                    m.d.sync += [out_last.eq(1), idx.eq(0)]
            with m.Else():
                m.d.sync += [out_data.eq(elem_byte), out_last.eq(0), ebyte.eq(ebyte + 1)]
                with m.If(ebyte == Mux(size2, 1, 3)):
                    m.d.sync += [ebyte.eq(0), ne.eq(ne + 1), lane.eq(lane + 1)]
                    with m.If(ne + 1 == count):
                        m.d.comb += self.i.ready.eq(1)
                        m.d.sync += [out_last.eq(1), idx.eq(0), ne.eq(0), lane.eq(0)]
                    with m.Elif(lane == L - 1):
                        m.d.comb += self.i.ready.eq(1)
                        m.d.sync += lane.eq(0)
        return m
