"""Block RAM: read ports for memories whose reads never need the data being
written in the same cycle, and a wide RAM with a portable and an ECP5 build
form (:class:`WideRAM`)."""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl.layouts import bits_for

NO_RW_CHECK = {"no_rw_check": 1}
"""Memory attributes: read-during-write of one entry is a don't-care."""

READ_REGISTER_SUFFIX = "_rdreg"

YOSYS_AFTER_READ = f"setattr -unset init w:*{READ_REGISTER_SUFFIX}* w:r_data"
"""Yosys commands to run after reading the design: the read registers'
power-up value is a don't-care too (Amaranth gives every register one, and
Yosys would otherwise gate each RAM output bit with an init flag). A
:class:`~netagg.hdl.fifo.BufferedFIFO`'s read register is its ``r_data``
port (the RTLIL backend names it after the port)."""


def registered_read(m, memory: Memory, addr, *, en=1, name: str):
    """A synchronous read port of ``memory`` (created with ``attrs=NO_RW_CHECK``)
    built as an asynchronous read and a register without reset, so that Yosys
    merges the register into the RAM's read port and honours
    ``no_rw_check``: no read-during-write bypass logic. Returns the data
    (``memory.shape``), valid the cycle after ``addr`` with ``en`` high, held
    while ``en`` is low. Same timing as ``memory.read_port()`` with
    non-transparent reads; the caller guarantees it never uses data read
    from an entry written in the same cycle, nor the data before the first
    read (synthesis scripts run :data:`YOSYS_AFTER_READ`)."""
    if memory.attrs.get("no_rw_check") != 1:
        raise ValueError(f"{name}: the memory must be created with attrs=NO_RW_CHECK")
    port = memory.read_port(domain="comb")
    data = Signal(memory.shape, name=name + READ_REGISTER_SUFFIX, reset_less=True)
    m.d.comb += port.addr.eq(addr)
    if isinstance(en, int) and en == 1:
        m.d.sync += data.eq(port.data)
    else:
        with m.If(en):
            m.d.sync += data.eq(port.data)
    return data


class WritePort(NamedTuple):
    """A write port's signals, named as a ``Memory`` write port's."""
    addr: Value
    data: Value
    en: Value


RAM_FORMS = ("memory", "ecp5")
"""Build forms of :class:`WideRAM`: ``"memory"`` (an Amaranth ``Memory``,
any FPGA flow) and ``"ecp5"`` (``DP16KD`` block instances)."""

DP16KD_DEPTH = 4096
"""Entries of one ECP5 block RAM in its 4-bit-wide configuration, the most
the ``"ecp5"`` form of :class:`WideRAM` holds."""

DP16KD_SHAPES = ((1024, 18), (2048, 9), (4096, 4))
"""(entries, bits) of the ``DP16KD`` configurations the ``"ecp5"`` form
uses, widest first (true dual port: 18 bits is the widest)."""


def dp16kd_shape(depth: int) -> tuple[int, int]:
    """The widest ``DP16KD`` configuration (entries, bits) that holds
    ``depth`` entries (at most :data:`DP16KD_DEPTH`)."""
    for entries, bits in DP16KD_SHAPES:
        if depth <= entries:
            return entries, bits
    raise ValueError(f"a DP16KD holds at most {DP16KD_DEPTH} entries, not {depth}")


class WideRAM(wiring.Component):
    """A wide, simple dual-port RAM (one write port, one read port, both in
    ``domain``) in one of two build forms, same ports and same timing.

    Parameters
    ----------
    width, depth : int
        Bits per entry and entries.
    form : ``"memory"`` or ``"ecp5"``
        ``"memory"`` (default, portable): one ``amaranth.lib.memory.Memory``
        (``no_rw_check``) with a registered read, mapped by whichever
        synthesis tool reads the design. ``"ecp5"``: ``ceil(width / 4)``
        ECP5 ``DP16KD`` instances in their 4096 x 4 configuration
        (``DATA_WIDTH`` 4, so no depth cascade and no multiplexer after the
        blocks; ``depth`` at most 4096), written on port A, read on port B;
        Lattice-specific Verilog.
    out_reg : bool
        A second read register: the ``DP16KD``'s own output register
        (``REGMODE_B="OUTREG"``) in the ``"ecp5"`` form, a fabric register
        in the ``"memory"`` form. It takes the block's 5.8 ns
        clock-to-out off the path to the next logic (docs/boards.md,
        Timing closure) at the cost of one cycle of read latency.
    out_en : bool
        With ``out_reg``: the second read register loads at the edges where
        the ``o_en`` port is high instead of ``r_en`` (the ``DP16KD``'s
        ``OCEB``), so that it can hold one entry while the first register
        reads the next. Not with ``group_bits``.
    group_bits : int
        0 (default): the ports drive the storage directly. ``n > 0``: the
        addresses and the write enable are registered inside, one kept copy
        (``keep``: Yosys does not merge them) per group of ``n`` data bits
        (a multiple of 4 in the ``"ecp5"`` form; the last group may be
        narrower), each driving only its group's storage, so that no
        register fans out to every block. The registered read address is
        then the read pipeline's first stage (read latency + 1), and
        ``w_addr`` and ``w_en`` are given one cycle before the ``w_data``
        they write.

    Ports
    -----
    w_addr, w_data, w_en : In
        Write ``w_data`` at ``w_addr`` at the clock edge where ``w_en`` is
        high (with ``group_bits``: ``w_addr`` and ``w_en`` of the cycle
        before).
    r_addr, r_en : In
        Read address, sampled at the edge where ``r_en`` is high (with
        ``group_bits``: into the address registers; the storage is read at
        the next edge with ``r_en`` high, and sees every write before it).
    o_en : In(1)
        Only with ``out_en``: the second read register's load enable.
    r_data : Out(width)
        The entry at the ``r_addr`` of the ``latency``-th most recent edge
        with ``r_en`` high (with ``out_en``: the entry the first register
        held at the most recent edge with ``o_en`` high), ``latency`` =
        1 + ``out_reg`` (+ 1 with
        ``group_bits``): the read pipeline advances only on edges with
        ``r_en`` high and holds otherwise (``r_en`` drives the blocks'
        ``CEB`` and ``OCEB``). Undefined before ``latency`` enabled reads,
        and for an entry read at the edge where it is written (no
        read-during-write bypass; the entry written at an earlier edge is
        read correctly). No reset and no power-up value: neither form gives
        the read registers one.
    """

    def __init__(self, width: int, depth: int, *, form: str = "memory", out_reg: bool = False,
                 out_en: bool = False, group_bits: int = 0, domain: str = "sync"):
        problems = []
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            problems.append(f"width must be a positive int, not {width!r}")
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 2:
            problems.append(f"depth must be an int >= 2, not {depth!r}")
        if form not in RAM_FORMS:
            problems.append(f"form must be one of {RAM_FORMS}, not {form!r}")
        elif form == "ecp5" and isinstance(depth, int) and depth > DP16KD_DEPTH:
            problems.append(f"the ecp5 form holds at most {DP16KD_DEPTH} entries, not {depth}")
        if not isinstance(out_reg, bool):
            problems.append(f"out_reg must be a bool, not {out_reg!r}")
        if not isinstance(out_en, bool) or (out_en and (not out_reg or group_bits)):
            problems.append(f"out_en must be a bool, True only with out_reg and without "
                            f"group_bits, not {out_en!r}")
        if not isinstance(group_bits, int) or isinstance(group_bits, bool) or group_bits < 0:
            problems.append(f"group_bits must be an int >= 0, not {group_bits!r}")
        if problems:
            self._MustUse__silence = True      # no "created but never used" warning
            raise ValueError("; ".join(problems))
        self._width, self._depth, self._form = width, depth, form
        self._out_reg, self._domain = out_reg, domain
        self._out_en = out_en
        self._group_bits = group_bits
        abits = bits_for(depth)
        ports = {
            "w_addr": In(abits), "w_data": In(width), "w_en": In(1),
            "r_addr": In(abits), "r_en": In(1), "r_data": Out(width),
        }
        if out_en:
            ports["o_en"] = In(1)
        super().__init__(ports)

    @property
    def write(self) -> WritePort:
        """The write port's ``addr``, ``data`` and ``en`` (the names of a
        ``Memory`` write port)."""
        return WritePort(self.w_addr, self.w_data, self.w_en)

    @property
    def width(self) -> int:
        return self._width

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def form(self) -> str:
        return self._form

    @property
    def latency(self) -> int:
        """Read latency in enabled cycles (1, + 1 with ``out_reg``, + 1 with
        ``group_bits``)."""
        return 1 + self._out_reg + bool(self._group_bits)

    @property
    def groups(self) -> list[tuple[int, int]]:
        """(first bit, bits) of each group with its own address registers
        (one group of all bits without ``group_bits``)."""
        n = self._group_bits or self._width
        return [(lo, min(n, self._width - lo)) for lo in range(0, self._width, n)]

    @property
    def block_shape(self) -> tuple[int, int]:
        """(entries, bits) of each ``DP16KD`` of the ``"ecp5"`` form."""
        return dp16kd_shape(self._depth)

    @property
    def blocks(self) -> int:
        """``DP16KD`` instances of the ``"ecp5"`` form."""
        return -(-self._width // self.block_shape[1])

    def elaborate(self, platform):
        m = Module()
        sync = m.d[self._domain]
        for g, (lo, n) in enumerate(self.groups):
            ctrl = {"w_addr": self.w_addr, "w_en": self.w_en, "r_addr": self.r_addr,
                    "r_en": self.r_en}
            if self._group_bits:
                # the group's own registered copies; the read address is the
                # first stage of the read pipeline (it advances with r_en)
                regs = {k: Signal.like(ctrl[k], name=f"g{g}_{k}", attrs={"keep": 1})
                        for k in ("w_addr", "w_en", "r_addr")}
                sync += [regs["w_addr"].eq(self.w_addr), regs["w_en"].eq(self.w_en)]
                with m.If(self.r_en):
                    sync += regs["r_addr"].eq(self.r_addr)
                ctrl.update(regs)
            build = self._group_memory if self._form == "memory" else self._group_ecp5
            build(m, g, lo, n, ctrl)
        return m

    def _group_memory(self, m, g, lo, n, ctrl):
        mem = Memory(shape=n, depth=self._depth, init=[], attrs=NO_RW_CHECK)
        m.submodules["mem" if len(self.groups) == 1 else f"mem{g}"] = mem
        wp = mem.write_port(domain=self._domain)
        m.d.comb += [wp.addr.eq(ctrl["w_addr"]), wp.data.eq(self.w_data[lo:lo + n]),
                     wp.en.eq(ctrl["w_en"])]
        prefix = "mem" if len(self.groups) == 1 else f"mem{g}_"
        data = Signal(n, name=prefix + READ_REGISTER_SUFFIX, reset_less=True)
        rp = mem.read_port(domain="comb")
        m.d.comb += rp.addr.eq(ctrl["r_addr"])
        sync = m.d[self._domain]
        with m.If(ctrl["r_en"]):
            sync += data.eq(rp.data)
        if self._out_reg:
            out = Signal(n, name=prefix.replace("mem", "out") + READ_REGISTER_SUFFIX,
                         reset_less=True)
            with m.If(self.o_en if self._out_en else ctrl["r_en"]):
                sync += out.eq(data)
            data = out
        m.d.comb += self.r_data[lo:lo + n].eq(data)

    def _group_ecp5(self, m, g, lo, n, ctrl):
        clk = ClockSignal(self._domain)
        zero = Const(0, 1)
        entries, bits = self.block_shape
        low = 14 - bits_for(entries)                   # AD[low-1:0]: not the word address
        w_addr, r_addr = ctrl["w_addr"], ctrl["r_addr"]
        # x18: port A's AD[1:0] are its byte write enables (both bytes)
        wlow = Cat(Const(0b11, 2), Const(0, low - 2)) if bits == 18 else Const(0, low)
        waddr = Cat(wlow, w_addr, Const(0, 14 - low - len(w_addr)))
        raddr = Cat(Const(0, low), r_addr, Const(0, 14 - low - len(r_addr)))
        # the blocks whose first bit is in this group
        for k in range(-(-lo // bits), -(-(lo + n) // bits)):
            b_lo = k * bits
            b_n = min(bits, self._width - b_lo)
            di = Cat(self.w_data[b_lo:b_lo + b_n], Const(0, 18 - b_n))
            do = Signal(18, name=f"bram{k}_do")
            ports = {
                "p_DATA_WIDTH_A": bits, "p_DATA_WIDTH_B": bits,
                "p_REGMODE_A": "NOREG", "p_REGMODE_B": "OUTREG" if self._out_reg else "NOREG",
                "p_RESETMODE": "SYNC", "p_ASYNC_RESET_RELEASE": "SYNC",
                "p_CSDECODE_A": "0b000", "p_CSDECODE_B": "0b000",
                "p_WRITEMODE_A": "NORMAL", "p_WRITEMODE_B": "NORMAL", "p_GSR": "AUTO",
                "i_CLKA": clk, "i_CEA": Const(1, 1), "i_OCEA": Const(1, 1), "i_WEA": ctrl["w_en"],
                "i_RSTA": zero,
                "i_CLKB": clk, "i_CEB": ctrl["r_en"],
                "i_OCEB": self.o_en if self._out_en else ctrl["r_en"], "i_WEB": zero,
                "i_RSTB": zero,
            }
            for i in range(3):
                ports[f"i_CSA{i}"] = zero
                ports[f"i_CSB{i}"] = zero
            for i in range(14):
                ports[f"i_ADA{i}"] = waddr[i]
                ports[f"i_ADB{i}"] = raddr[i]
            for i in range(18):
                ports[f"i_DIA{i}"] = di[i]
                ports[f"i_DIB{i}"] = zero
                ports[f"o_DOB{i}"] = do[i]
            m.submodules[f"bram{k}"] = Instance("DP16KD", **ports)
            m.d.comb += self.r_data[b_lo:b_lo + b_n].eq(do[:b_n])
