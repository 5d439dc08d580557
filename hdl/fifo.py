"""FIFOs for this design: a buffered synchronous FIFO whose storage maps to
block RAM without read-during-write bypass logic, and an asynchronous FIFO
whose handshakes are flip-flops."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

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

    ``w_rdy`` is a flip-flop (the same value, registered from the next
    level): a writer's enable may depend on it without a path through the
    level counter.

    ``distributed=True``: the storage carries the Yosys attribute
    ``ram_style = "distributed"`` (LUT RAM, read asynchronously into the
    ``r_data`` register), so that ``r_data`` is a fabric flip-flop that
    logic may read at once, not the output of a block RAM (ECP5: 5.83 ns
    clock to output, docs/boards.md).
    """

    def __init__(self, *, width: int, depth: int, distributed: bool = False):
        super().__init__(width=width, depth=depth)
        self._distributed = distributed

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
            inner_r_rdy.eq(inner_level != 0),
        ]
        # the room after this cycle: compares of the level register with
        # constants, chosen by the enables (no path through the counter)
        room = Signal(init=1, name="w_room")
        m.d.comb += self.w_rdy.eq(room)
        with m.If(do_write & ~do_inner_read):
            m.d.sync += [inner_level.eq(inner_level + 1),
                         room.eq(inner_level != inner_depth - 1)]
        with m.If(do_inner_read & ~do_write):
            m.d.sync += [inner_level.eq(inner_level - 1), room.eq(1)]

        attrs = {**NO_RW_CHECK, **({"ram_style": "distributed"} if self._distributed else {})}
        m.submodules.storage = storage = Memory(shape=self.width, depth=inner_depth, init=[],
                                                attrs=attrs)
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
        with m.If(do_inner_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        m.d.comb += self.level.eq(inner_level + self.r_rdy)
        return m


class RegisteredAsyncFIFO(wiring.Component):
    """An asynchronous FIFO (``amaranth.lib.fifo.AsyncFIFO``'s ports and
    clock-domain crossing: Gray-coded pointers through two-stage
    synchronizers) whose handshakes are flip-flops, for 125 MHz.

    Unlike ``AsyncFIFO``, whose read reaches the storage through the
    next read pointer (the compare, the enable, the increment and the
    storage read in one cycle), the storage is read at the registered read
    pointer into an output register, in parallel with the increment; and
    ``w_rdy`` is a flip-flop (conservative: it counts the entries as the
    write side last saw the read pointer).

    Parameters
    ----------
    width : int
    depth : int
        A power of two, at least 4. It holds ``depth`` entries: ``depth - 1``
        in the storage, one in the output register.
    w_domain, r_domain : str

    Ports
    -----
    w_data, w_en : In, w_rdy : Out (``w_domain``)
        An entry is written at an edge with ``w_en`` and ``w_rdy`` high;
        ``w_rdy`` is a flip-flop. One write per cycle while there is room.
    r_data, r_rdy : Out, r_en : In (``r_domain``)
        ``r_rdy`` (a flip-flop) and ``r_data`` (a flip-flop) present the
        oldest entry; it is taken at an edge with ``r_en`` and ``r_rdy``
        high, and the next entry, if any, is presented from that edge on:
        one read per cycle. An entry is readable four ``r_domain`` edges
        after its write, at the earliest (two synchronizer stages, the
        pointer's conversion, the output register). Both domains' resets
        are to be asserted together (at start-up); they empty the FIFO.
    """

    def __init__(self, *, width: int, depth: int, w_domain: str = "write",
                 r_domain: str = "read"):
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise ValueError(f"width must be a positive integer, not {width!r}")
        if not isinstance(depth, int) or depth < 4 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 4, not {depth!r}")
        for name, d in (("w_domain", w_domain), ("r_domain", r_domain)):
            if not isinstance(d, str):
                raise ValueError(f"{name} must be a domain name, not {d!r}")
        self.width, self.depth = width, depth
        self._w, self._r = w_domain, r_domain
        super().__init__({
            "w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
            "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        abits = self.depth.bit_length() - 1
        n = abits + 1

        def gray(b):
            return b ^ (b >> 1)

        def binary(g):
            bits = [g[n - 1]]
            for i in range(n - 2, -1, -1):
                bits.insert(0, bits[0] ^ g[i])
            return Cat(*bits)

        m.submodules.storage = storage = Memory(shape=self.width, depth=self.depth, init=[],
                                                attrs=NO_RW_CHECK)
        wp = storage.write_port(domain=self._w)
        rp = storage.read_port(domain="comb")
        wd, rd = m.d[self._w], m.d[self._r]

        # Write side.
        produce, produce_gry = Signal(n), Signal(n)
        consume_gry_w, consume_w = Signal(n), Signal(n)
        do_write = self.w_en & self.w_rdy
        m.d.comb += [wp.addr.eq(produce[:abits]), wp.data.eq(self.w_data), wp.en.eq(do_write)]
        produce_nxt = Signal(n)
        m.d.comb += produce_nxt.eq(produce + 1)
        with m.If(do_write):
            wd += [produce.eq(produce_nxt), produce_gry.eq(gray(produce_nxt))]
        # room for one more after this cycle's write, if any: both compares
        # from registers, the write only selects
        fill = Signal(n)
        m.d.comb += fill.eq(produce - consume_w)
        wd += [consume_w.eq(binary(consume_gry_w)),
               self.w_rdy.eq(Mux(do_write, fill < self.depth - 2, fill < self.depth - 1))]

        # Read side.
        consume, consume_gry = Signal(n), Signal(n)
        produce_gry_r, produce_r = Signal(n), Signal(n)
        rd += produce_r.eq(binary(produce_gry_r))
        nonempty = produce_r != consume
        advance = ~self.r_rdy | self.r_en
        consume_nxt = Signal(n)
        m.d.comb += [rp.addr.eq(consume[:abits]), consume_nxt.eq(consume + 1)]
        with m.If(advance):
            rd += self.r_rdy.eq(nonempty)
            with m.If(nonempty):
                rd += [self.r_data.eq(rp.data), consume.eq(consume_nxt),
                       consume_gry.eq(gray(consume_nxt))]

        m.submodules.produce_cdc = FFSynchronizer(produce_gry, produce_gry_r, o_domain=self._r)
        m.submodules.consume_cdc = FFSynchronizer(consume_gry, consume_gry_w, o_domain=self._w)
        return m
