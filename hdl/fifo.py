"""A buffered synchronous FIFO whose storage maps to block RAM without
read-during-write bypass logic."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory

from netagg.hdl.ram import NO_RW_CHECK, registered_read


class BufferedFIFO(SyncFIFOBuffered):
    """:class:`amaranth.lib.fifo.SyncFIFOBuffered` (same ports, same timing:
    one write and one read per cycle, an entry readable two cycles after
    its write into an empty queue, ``level`` counting every entry), with
    its storage ``Memory`` marked ``no_rw_check``.

    The queue never reads the entry it writes in the same cycle (a read is
    enabled only for a stored entry, a write only for a free one), so the
    read-during-write behaviour of the RAM does not matter. Without the
    attribute Yosys emulates it with a register of the write data and a
    multiplexer per bit, which doubles the flip-flops of every queue.
    """

    def elaborate(self, platform):
        if self.depth <= 1:
            return super().elaborate(platform)
        m = Module()
        inner_depth = self.depth - 1
        inner_level = Signal(range(inner_depth + 1))
        inner_r_rdy = Signal()
        do_write = self.w_rdy & self.w_en
        do_inner_read = inner_r_rdy & (~self.r_rdy | self.r_en)
        m.d.comb += [
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
            self.w_rdy.eq(inner_level != inner_depth),
            inner_r_rdy.eq(inner_level != 0),
        ]

        m.submodules.storage = storage = Memory(shape=self.width, depth=inner_depth, init=[],
                                                attrs=NO_RW_CHECK)
        w_port = storage.write_port()
        produce = Signal(range(inner_depth))
        consume = Signal(range(inner_depth))

        def incr(ptr):
            if inner_depth == 1 << len(ptr):
                return ptr + 1
            return Mux(ptr == inner_depth - 1, 0, ptr + 1)

        m.d.comb += [
            w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(do_write),
            self.r_data.eq(registered_read(m, storage, consume, en=do_inner_read,
                                           name="storage_r_data")),
        ]
        with m.If(do_write):
            m.d.sync += produce.eq(incr(produce))
        with m.If(do_inner_read):
            m.d.sync += consume.eq(incr(consume))
        with m.If(do_write & ~do_inner_read):
            m.d.sync += inner_level.eq(inner_level + 1)
        with m.If(do_inner_read & ~do_write):
            m.d.sync += inner_level.eq(inner_level - 1)
        with m.If(do_inner_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        m.d.comb += self.level.eq(inner_level + self.r_rdy)
        return m
