"""The slot table's payload buffer: payload beats of accepted messages, in
arrival order, read by address."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl.checked import CheckedComponent
from netagg.hdl.netlist import KEEP
from netagg.hdl.ram import NO_RW_CHECK, registered_read
from netagg.hdl.slot_layouts import beat_count_bits, data_addr_bits
from netagg.hdl.validator import payload_beat
from netagg.params import Params

__all__ = ["PayloadBuffer"]


class PayloadBuffer(CheckedComponent):
    """A circular buffer of ``depth`` payload beats (block RAM) with a write
    pointer, a free pointer and the first beat of the message at the head.

    Beats are written in arrival order and freed in arrival order (the
    caller gives the first beat it still needs, ``free``); between the two
    they are read by address, so a message can be read while an older one
    waits.

    Ports
    -----
    w : In(stream of payload_beat)
        Beats to store. ``w.ready`` is registered: high when fewer than
        ``depth - 2`` beats (``depth - 1`` with ``compact=True``) were
        counted in the previous cycle (before its write and release; a beat
        is counted from the second cycle after its acceptance), so a beat written while
        it is high always fits. Low in the first cycle after reset. One
        beat per cycle.
    rd_addr : In(address)
        Read address; ``rd_data`` holds that beat :attr:`read_latency`
        cycles later: two (the address registered, one kept copy per
        lane's RAM, then the RAM read and its register), one with
        ``compact=True``. A beat accepted on ``w`` in cycle t can be read
        from cycle t + :attr:`write_latency` on, never earlier: 2 (the
        accepted beat is registered, then copied into each lane's RAM's
        kept write enable and data registers and written at the end of
        t + 2, at that RAM's own write pointer, while the address given in
        t + 2 is registered and read in t + 3: no net from logic or from
        one register fans out to every RAM), 1 with ``compact=True`` (the
        write is not registered).
    free : In(address + 1)
        The first beat still needed (mod 2 x ``depth``): every beat before
        it is free. It moves only forward and never past a beat not yet
        written (at most to ``head``); the space is seen by ``w.ready`` two
        cycles later (the count held, then the registered ready).
    head : Out(address + 1)
        Registered: the first beat of the oldest message not yet claimed
        (mod 2 x ``depth``).
    claim : In(beat count)
        Beats of the message at the head (whether or not it is claimed).
    take : In(1)
        The message at the head is claimed this cycle: ``head`` moves past
        its ``claim`` beats on the next cycle (``take`` only selects a
        register's next value: it may arrive late in the cycle).
    empty : Out(1)
        Combinational: no beat is held (accepted, and before ``free`` as
        counted in the previous cycle).
    """

    @staticmethod
    def check(params: Params, *, depth: int, compact: bool = False) -> None:
        if not isinstance(depth, int) or depth < params.beats or depth & (depth - 1):
            raise ValueError(f"data_beats must be a power of two >= K/L ({params.beats}), "
                             f"not {depth}")

    def __init__(self, params: Params, *, depth: int, compact: bool = False):
        self._params = params
        self._depth = depth
        self._compact = compact
        abits = data_addr_bits(depth)
        super().__init__({
            "w": In(stream.Signature(payload_beat(params))),
            "rd_addr": In(abits),
            "rd_data": Out(payload_beat(params)),
            "free": In(abits + 1),
            "head": Out(abits + 1),
            "claim": In(beat_count_bits(self._params)),
            "take": In(1),
            "empty": Out(1),
        })

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def write_latency(self) -> int:
        """Cycles from a beat's acceptance on ``w`` to its first read: 2 (1 ``compact``)."""
        return 1 if self._compact else 2

    @property
    def read_latency(self) -> int:
        """Cycles from ``rd_addr`` to ``rd_data``: 2 (1 ``compact``)."""
        return 1 if self._compact else 2

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        abits = data_addr_bits(depth)
        L = self._params.lanes
        head = Signal(abits + 1)         # first beat of the head message (mod 2 depth)
        held = Signal(abits + 1)         # beats written (counted) and not before ``free``
        wrote = Signal(abits + 1)        # beats counted as written (mod 2 depth)
        w_en = Signal()
        if self._compact:
            # Never read where it is written in the same cycle: no bypass logic.
            m.submodules.mem = mem = Memory(shape=payload_beat(self._params), depth=depth,
                                            init=[], attrs=NO_RW_CHECK)
            wr = mem.write_port()
            room = Signal()              # registered: a beat written now still fits
            write = self.w.valid & room
            m.d.comb += [w_en.eq(write), self.w.ready.eq(room),
                         # (the count written is the write address)
                         wr.addr.eq(wrote[:abits]), wr.data.eq(self.w.payload),
                         wr.en.eq(write)]
            m.d.sync += room.eq(held < depth - 1)
            m.d.comb += self.empty.eq(held == 0)
            m.d.comb += self.rd_data.eq(registered_read(m, mem, self.rd_addr, name="rd_data"))
        else:
            # The beat accepted is registered (``w_en``, ``w_data``), then
            # copied into each lane's RAM's kept write registers and written
            # (and counted in that RAM's write pointer) a cycle later: one
            # flip-flop drives the copies of the enable, and each copy drives
            # one RAM and its pointer. ``held`` lags by the beat in ``w_en``,
            # so the room leaves one more beat. Two kept copies of the room:
            # one for the writer's side (``w.ready``), one for the accept
            # register's.
            room = Signal(name="room", attrs=KEEP)
            room_w = Signal(name="room_w", attrs=KEEP)
            m.d.sync += [room.eq(held < depth - 2), room_w.eq(held < depth - 2)]
            w_data = Signal.like(self.w.payload, name="w_data")
            m.d.sync += [w_en.eq(self.w.valid & room_w), w_data.eq(self.w.payload)]
            m.d.comb += self.w.ready.eq(room)
            m.d.comb += self.empty.eq((held == 0) & ~w_en)
            # One RAM per lane's element, each with its own (kept) write
            # enable, write pointer and read address registers, so that no
            # register fans out to every block of the buffer.
            for i in range(L):
                mem = Memory(shape=32, depth=depth, init=[], attrs=NO_RW_CHECK)
                m.submodules[f"mem{i}"] = mem
                wr = mem.write_port()
                en_i = Signal(name=f"w_en{i}", attrs=KEEP)
                ptr_i = Signal(abits, name=f"w_ptr{i}", attrs=KEEP)
                data_i = Signal(32, name=f"w_data{i}")
                addr_i = Signal(abits, name=f"rd_addr{i}", attrs=KEEP)
                m.d.sync += [en_i.eq(w_en), data_i.eq(w_data[i]),
                             addr_i.eq(self.rd_addr)]
                with m.If(en_i):
                    m.d.sync += ptr_i.eq(ptr_i + 1)
                m.d.comb += [wr.addr.eq(ptr_i), wr.data.eq(data_i), wr.en.eq(en_i)]
                m.d.comb += self.rd_data[i].eq(registered_read(m, mem, addr_i,
                                                               name=f"rd_data{i}"))
        m.d.comb += self.head.eq(head)
        m.d.sync += head.eq(Mux(self.take, head + self.claim, head))
        # ``held`` (beats written and not before ``free``) is a register of
        # its own, so that the room compares a register with a constant;
        # its sums are of registers and ``w_en`` (a register but compact)
        wrote_next = wrote + w_en
        m.d.sync += [wrote.eq(wrote_next), held.eq(wrote_next - self.free)]
        return m
