"""Block RAM read ports for memories whose reads never need the data being
written in the same cycle."""

from __future__ import annotations

from amaranth.hdl import Signal
from amaranth.lib.memory import Memory

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
