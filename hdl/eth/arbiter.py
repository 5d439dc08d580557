"""Arbiters: message beats of the ports into the core (with the address
learning the verdicts drive), and frames of two sources into one MAC."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.eth.layouts import FrameByte, Learned, message_beat
from netagg.hdl.eth.result_tx import table_index, table_index_bits
from netagg.hdl.fifo import BufferedFIFO
from netagg.params import Params
from netagg.wire import Verdict

_ACCEPTED = [layouts.Verdict(v.value) for v in Verdict if v.accepted]


def _pending(params: Params) -> data.StructLayout:
    return data.StructLayout({"learned": Learned, "job": 8, "worker": 16})


class IngressArbiter(wiring.Component):
    """Round-robin, message by message, of the ports' beats into the core,
    and the address learning.

    Parameters
    ----------
    params : Params
    ports : int
    pending : int
        Messages whose verdict may be outstanding at once (a power of two);
        a new message waits while that many are.

    Ports
    -----
    i : In(stream message_beat(L)) x ports
        Each port's messages. Once a port's first beat is taken, its beats
        go through until ``last``; then the next port with a message.
    o : Out(stream ingress_beat(L))
        To the core. ``tag`` is a message count modulo 2**16. Beats pass
        combinationally (no added latency).
    v : In(valid, payload VerdictLayout)
        The core's verdicts, one per message, in order.
    learn_valid, learn_tag : Out
        The cycle after every verdict: its message's tag.
    learn_en, learn_addr, learn_data : Out
        With ``learn_valid``, if the verdict accepted the message (ACCEPT or
        RETRANSMIT): its sender and ingress port, for entry
        :func:`table_index` of its (job, worker)
        (:class:`netagg.hdl.eth.address_table.AddressTable`).
    """

    def __init__(self, params: Params, *, ports: int = 2, pending: int = 32):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        if ports not in (1, 2):
            raise ValueError(f"ports must be 1 or 2, not {ports!r}")
        if not isinstance(pending, int) or pending < 2 or pending & (pending - 1):
            raise ValueError(f"pending must be a power of two of at least 2, not {pending!r}")
        self._params, self._ports, self._pending = params, ports, pending
        L = params.lanes
        super().__init__({
            "i": In(stream.Signature(message_beat(L))).array(ports),
            "o": Out(stream.Signature(layouts.ingress_beat(L))),
            "v": In(wiring.Signature({"valid": Out(1), "payload": Out(layouts.VerdictLayout)})),
            "learn_valid": Out(1),
            "learn_tag": Out(16),
            "learn_en": Out(1),
            "learn_addr": Out(table_index_bits(params)),
            "learn_data": Out(Learned),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        layout = _pending(p)
        m.submodules.q = q = BufferedFIFO(width=layout.size, depth=self._pending)
        locked = Signal()
        owner = Signal(range(self._ports))
        prefer = Signal(range(self._ports))
        tag = Signal(16)

        sel = Signal(range(self._ports))
        src = stream.Signature(message_beat(p.lanes)).flip().create(path=("src",))
        if self._ports == 2:
            with m.If(locked):
                m.d.comb += sel.eq(owner)
            with m.Elif(Mux(prefer, self.i[1].valid, self.i[0].valid)):
                m.d.comb += sel.eq(prefer)
            with m.Else():
                m.d.comb += sel.eq(~prefer)
            m.d.comb += [src.valid.eq(Mux(sel, self.i[1].valid, self.i[0].valid)),
                         src.payload.eq(Mux(sel, self.i[1].payload, self.i[0].payload))]
        else:
            m.d.comb += [src.valid.eq(self.i[0].valid), src.payload.eq(self.i[0].payload)]
        go = locked | q.w_rdy
        m.d.comb += [self.o.payload.eq(src.payload.beat), self.o.payload.tag.eq(tag),
                     self.o.valid.eq(src.valid & go)]
        for port, i in enumerate(self.i):
            m.d.comb += i.ready.eq((sel == port) & go & self.o.ready)
        taken = self.o.valid & self.o.ready
        entry = data.View(layout, q.w_data)
        h = data.View(layouts.Header, src.payload.beat.header)
        m.d.comb += [entry.learned.sender.eq(src.payload.sender), entry.learned.port.eq(sel),
                     entry.job.eq(h.job), entry.worker.eq(h.worker),
                     q.w_en.eq(taken & ~locked)]
        with m.If(taken):
            with m.If(src.payload.beat.last):
                m.d.sync += [locked.eq(0), tag.eq(tag + 1)]
                if self._ports == 2:
                    m.d.sync += prefer.eq(~sel)
            with m.Else():
                m.d.sync += [locked.eq(1), owner.eq(sel)]

        # Verdicts, in message order: learn the senders of accepted CONTRIBs.
        head = data.View(layout, q.r_data)
        m.d.comb += q.r_en.eq(self.v.valid)
        accepted = Signal()
        for code in _ACCEPTED:
            with m.If(self.v.payload.code == code):
                m.d.comb += accepted.eq(1)
        m.d.sync += [self.learn_valid.eq(self.v.valid), self.learn_tag.eq(self.v.payload.tag),
                     self.learn_en.eq(self.v.valid & accepted),
                     self.learn_addr.eq(table_index(p, head.job, head.worker)),
                     self.learn_data.eq(head.learned)]
        return m


class TxArbiter(wiring.Component):
    """Frame by frame, two frame sources into one transmit MAC.

    Ports
    -----
    i : In(stream FrameByte) x 2
        Whole frames; source 0 (RESULTs) and 1 (replies) take turns when
        both have one. A frame, once its first byte is taken, goes through
        to ``last``.
    o : Out(stream FrameByte)
        Combinational: no added latency.
    sent : Out(1)
        One-cycle pulse with the last byte of every frame.
    """

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(FrameByte)).array(2),
            "o": Out(stream.Signature(FrameByte)),
            "sent": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        locked, owner, prefer, sel = Signal(), Signal(), Signal(), Signal()
        with m.If(locked):
            m.d.comb += sel.eq(owner)
        with m.Elif(Mux(prefer, self.i[1].valid, self.i[0].valid)):
            m.d.comb += sel.eq(prefer)
        with m.Else():
            m.d.comb += sel.eq(~prefer)
        src = stream.Signature(FrameByte).flip().create(path=("src",))
        m.d.comb += [src.valid.eq(Mux(sel, self.i[1].valid, self.i[0].valid)),
                     src.payload.eq(Mux(sel, self.i[1].payload, self.i[0].payload)),
                     self.o.payload.eq(src.payload), self.o.valid.eq(src.valid)]
        for k, i in enumerate(self.i):
            m.d.comb += i.ready.eq((sel == k) & self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            with m.If(src.payload.last):
                m.d.comb += self.sent.eq(1)
                m.d.sync += [locked.eq(0), prefer.eq(~sel)]
            with m.Else():
                m.d.sync += [locked.eq(1), owner.eq(sel)]
        return m
