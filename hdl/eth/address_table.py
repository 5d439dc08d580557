"""The address table: where each (job, worker) receives its RESULTs, as of
the message that caused each RESULT."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl.eth.layouts import Learned
from netagg.hdl.eth.result_tx import table_index_bits
from netagg.params import Params


def _after(a, b):
    """``a`` is ``b`` or later in 16-bit tag order (modulo 2**16)."""
    return ~(a - b)[15]


class AddressTable(wiring.Component):
    """Per (job, worker) the endpoint and ingress port of the worker's most
    recent accepted CONTRIB, looked up as of a message: the lookup for a
    RESULT with tag t sees exactly the accepted CONTRIBs with tags up to t,
    as :class:`netagg.sim.frame_model.Router` does.

    Two tables: ``latest`` takes every learnt entry at once; ``routed``,
    the one looked up, takes an entry that changes an address only when no
    RESULT of an earlier message can still come (a lookup with a later tag,
    or ``drain``). Changes wait in a queue of ``depth``; when it is full the
    oldest change is applied early (a RESULT of an earlier message may
    then go to the new address: the only difference from the model, and
    only when a worker moves while ``depth`` other moves are pending).

    Parameters
    ----------
    params : Params
    depth : int
        Address changes that can wait (a power of two).

    Ports
    -----
    learn_valid, learn_tag : In
        A verdict (any) went through, for message ``learn_tag``.
    learn_en, learn_addr, learn_data : In
        With ``learn_valid``: the verdict accepted the message; entry
        ``learn_addr`` becomes ``learn_data``.
    lookup_valid, lookup_addr, lookup_tag : In; lookup_ready : Out
        A lookup is served (``lookup_ready``) once the message's verdict
        has gone through and every change up to ``lookup_tag`` is applied;
        ``lookup_data`` holds the entry from the next cycle until the next
        served lookup.
    drain : In(1)
        No RESULT can come (the core is idle): apply every change.
    """

    def __init__(self, params: Params, *, depth: int = 16):
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {params!r}")
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        self._params, self._depth = params, depth
        abits = table_index_bits(params)
        super().__init__({
            "learn_valid": In(1), "learn_tag": In(16),
            "learn_en": In(1), "learn_addr": In(abits), "learn_data": In(Learned),
            "lookup_valid": In(1), "lookup_addr": In(abits), "lookup_tag": In(16),
            "lookup_ready": Out(1), "lookup_data": Out(Learned),
            "drain": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._params
        n = p.jobs * p.workers
        abits = table_index_bits(p)
        m.submodules.latest = latest = Memory(shape=Learned, depth=n, init=[])
        m.submodules.routed = routed = Memory(shape=Learned, depth=n, init=[])
        entry = data.StructLayout({"tag": 16, "addr": abits, "data": Learned})
        m.submodules.queue = queue = Memory(shape=entry, depth=self._depth, init=[])
        lw = latest.write_port()
        lr = latest.read_port(transparent_for=(lw,))
        rw = routed.write_port()
        rr = routed.read_port(transparent_for=(rw,))
        qw = queue.write_port()
        qr = queue.read_port(domain="comb")

        # Stage 1: compare with the latest entry; queue a change.
        s1_valid, s1_en, s1_tag = Signal(), Signal(), Signal(16)
        s1_addr, s1_data = Signal(abits), Signal(Learned)
        m.d.comb += [lr.addr.eq(self.learn_addr), lr.en.eq(self.learn_valid)]
        m.d.sync += [s1_valid.eq(self.learn_valid), s1_en.eq(self.learn_valid & self.learn_en),
                     s1_tag.eq(self.learn_tag), s1_addr.eq(self.learn_addr),
                     s1_data.eq(self.learn_data)]
        seen = Signal(16, init=0xFFFF)
        push = Signal()
        m.d.comb += [push.eq(s1_en & (lr.data.as_value() != s1_data.as_value())),
                     lw.en.eq(s1_en), lw.addr.eq(s1_addr), lw.data.eq(s1_data)]
        with m.If(s1_valid):
            m.d.sync += seen.eq(s1_tag)

        wptr = Signal(range(self._depth))
        rptr = Signal(range(self._depth))
        count = Signal(range(self._depth + 1))
        full = count == self._depth
        head = qr.data
        m.d.comb += qr.addr.eq(rptr)
        apply = Signal()
        pending_before = (count != 0) & _after(self.lookup_tag, head.tag)
        m.d.comb += apply.eq((count != 0) & ((self.lookup_valid & pending_before)
                                            | self.drain | (full & push)))
        m.d.comb += [qw.en.eq(push), qw.addr.eq(wptr),
                     qw.data.tag.eq(s1_tag), qw.data.addr.eq(s1_addr), qw.data.data.eq(s1_data),
                     rw.en.eq(apply), rw.addr.eq(head.addr), rw.data.eq(head.data)]
        with m.If(push):
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(apply):
            m.d.sync += rptr.eq(rptr + 1)
        with m.If(push & ~apply):
            m.d.sync += count.eq(count + 1)
        with m.Elif(apply & ~push):
            m.d.sync += count.eq(count - 1)

        # Lookups.
        ready = self.lookup_valid & ~pending_before & ~apply & _after(seen, self.lookup_tag)
        m.d.comb += [self.lookup_ready.eq(ready), rr.addr.eq(self.lookup_addr), rr.en.eq(ready),
                     self.lookup_data.eq(rr.data)]
        return m
