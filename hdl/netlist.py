"""Netlist text of the core as every synthesis flow should read it: the
fix-ups the project's builds need are made in the RTLIL and Verilog text
itself (``netagg generate``, ``netagg build``), so that a user's plain
``read_verilog; synth_ecp5`` gets the same netlist as the project's flow.

* Plain names: Amaranth names the fields of an array-layout port
  ``\\payload.data[0]``. Yosys 0.70's ABC9 flow (``synth_ecp5``) takes a
  wire named like a bit select of another wire for that bit and fails
  (``Assert GetSize(conn.first) == GetSize(conn.second)`` in
  ``ABC_OPS_REINTEGRATE``, or a silent ABC9 failure on a small design;
  docs/yosys-abc9-assert.md). Every ``[`` and ``]`` in a name becomes
  ``_``.
* No power-up value on block-RAM read registers (the ``*_rdreg*``
  registers of :func:`netagg.hdl.ram.registered_read` and
  :class:`netagg.hdl.ram.WideRAM`, a BufferedFIFO's ``r_data``): their
  value before the first read is never used, and with one Yosys gates
  every RAM output bit with an init flag. Amaranth gives every register a
  power-up value; it is removed from the text.
"""

from __future__ import annotations

import re

from netagg.hdl.ram import READ_REGISTER_SUFFIX

__all__ = ["fix_rtlil", "fix_verilog", "is_read_register"]

_FIFO_READ_REGISTER = "r_data"


def is_read_register(name: str) -> bool:
    """A register whose power-up value is a don't-care (by its name)."""
    name = name.lstrip("\\")
    return READ_REGISTER_SUFFIX in name or name == _FIFO_READ_REGISTER


def _plain(ident: str, taken: set[str]) -> str:
    new = ident.replace("[", "_").replace("]", "_")
    while new in taken:
        new += "_"
    taken.add(new)
    return new


def _renamer(text: str, pattern: re.Pattern):
    idents = set(pattern.findall(text))
    taken = set(idents)
    mapping = {i: _plain(i, taken) for i in sorted(idents) if "[" in i or "]" in i}
    return mapping


_RTLIL_IDENT = re.compile(r"\\[^\s]+")


def fix_rtlil(text: str) -> str:
    """RTLIL text (Amaranth's ``rtlil.convert``) with plain names and no
    ``init`` attribute on read registers."""
    mapping = _renamer(text, _RTLIL_IDENT)
    out, pending = [], []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith("attribute "):
            pending.append(line)
            continue
        if stripped.startswith("wire "):
            name = stripped.split()[-1]
            if is_read_register(name):
                pending = [a for a in pending if not a.lstrip().startswith("attribute \\init ")]
        out.extend(pending)
        pending = []
        out.append(line)
    out.extend(pending)
    text = "".join(out)
    if mapping:
        text = _RTLIL_IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
    return text


_VERILOG_IDENT = re.compile(r"\\[^\s]+")
_VERILOG_REG_INIT = re.compile(
    r"^(?P<head>\s*(?:output\s+)?reg\s+(?:signed\s+)?(?:\[[^\]]+\]\s+)?)"
    r"(?P<name>\\\S+|[A-Za-z_][A-Za-z0-9_$]*)\s*=\s*[^;]+;", re.M)


def fix_verilog(text: str) -> str:
    """Verilog text (Amaranth's ``verilog.convert``) with plain escaped
    names and no power-up value on read registers."""
    def strip(m):
        if not is_read_register(m.group("name")):
            return m.group(0)
        return f"{m.group('head')}{m.group('name')} ;"

    text = _VERILOG_REG_INIT.sub(strip, text)
    mapping = _renamer(text, _VERILOG_IDENT)
    if mapping:
        text = _VERILOG_IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
    return text
