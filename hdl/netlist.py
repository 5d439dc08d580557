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
* Kept registers: a register whose signal has the ``keep`` attribute
  (``Signal(..., attrs={"keep": 1})``, the replicated per-lane selects of
  :mod:`netagg.hdl.lane_loop`) gets ``keep`` on its flip-flop cell as well
  (the ``$dff`` cell in RTLIL, the ``always`` block in Verilog). Amaranth
  puts a signal's attributes on its wire only, and Yosys's ``opt_merge``
  honours ``keep`` on cells only: it would merge the identical copies back
  into one register.
"""

from __future__ import annotations

import re

from amaranth.hdl import Signal

from netagg.hdl.ram import READ_REGISTER_SUFFIX

__all__ = ["KEEP", "and_or", "fix_rtlil", "fix_verilog", "is_read_register"]

KEEP = {"keep": 1}
"""Attributes of a register that Yosys must not merge with its identical
copies (:func:`fix_rtlil` and :func:`fix_verilog` put ``keep`` on the
register cell as well: on a wire alone it does not stop ``opt_merge``)."""

_FIFO_READ_REGISTER = "r_data"


def and_or(m, terms, *, width: int, name: str):
    """The OR of ``hit & word`` over ``terms`` (pairs of a 1-bit select and a
    ``width``-bit word; at most one select high for a multiplexer), built from
    kept nets: each select, and each pair of terms (``sel_a & a | sel_b &
    b``, a LUT4 a bit, or a wider LUT). Yosys's ABC9 keeps the nets, so the
    result is the pairs' OR tree after them (two LUT levels for up to
    sixteen pairs), not a chain of multiplexers (its delay target is the
    deepest cone's, and it grows shallower cones to it otherwise; the
    selects' compares stay ahead). Returns the OR of the pairs (a value, not kept: a caller
    may OR two of these)."""
    sels = []
    for k, (sel, _) in enumerate(terms):
        s = Signal(name=f"{name}_sel{k}", attrs=KEEP)
        m.d.comb += s.eq(sel)
        sels.append(s)
    out = 0
    for k in range(0, len(terms), 2):
        pair = Signal(width, name=f"{name}_pair{k // 2}", attrs=KEEP)
        value = sels[k].replicate(width) & terms[k][1]
        if k + 1 < len(terms):
            value = value | (sels[k + 1].replicate(width) & terms[k + 1][1])
        m.d.comb += pair.eq(value)
        out = pair | out
    return out


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


def _keep_value(attr_line: str) -> bool:
    parts = attr_line.split()
    return len(parts) >= 3 and parts[1] == "\\keep" and parts[2].strip("\"") not in ("0", "")


def _keep_rtlil_cells(text: str) -> str:
    """``attribute \\keep 1`` on every ``$dff``/``$adff`` cell whose ``Q``
    is a wire with ``keep``."""
    kept, pending = set(), []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("attribute "):
            pending.append(s)
            continue
        if s.startswith("wire ") and any(_keep_value(a) for a in pending):
            kept.add(s.split()[-1])
        pending = []
    if not kept:
        return text
    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        s = lines[i].strip()
        if s.split()[:2] in (["cell", "$dff"], ["cell", "$adff"]):
            j = i
            while j < len(lines) and lines[j].strip() != "end":
                j += 1
            body = lines[i:j + 1]
            q = [b.split()[2] for b in body if b.split()[:2] == ["connect", "\\Q"]]
            attrs = []
            k = len(out)
            while k and out[k - 1].lstrip().startswith("attribute "):
                k -= 1
                attrs.append(out[k])
            if q and q[0] in kept and not any(_keep_value(a.strip()) for a in attrs):
                indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
                out.append(f"{indent}attribute \\keep 1\n")
            out.extend(body)
            i = j + 1
            continue
        out.append(lines[i])
        i += 1
    return "".join(out)


def fix_rtlil(text: str) -> str:
    """RTLIL text (Amaranth's ``rtlil.convert``) with plain names, no
    ``init`` attribute on read registers and ``keep`` on kept registers'
    cells."""
    text = _keep_rtlil_cells(text)
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


_VERILOG_KEPT_REG = re.compile(
    r"^\s*\(\* keep = (?:32'd)?1 \*\)\n(?:\s*\(\*[^\n]*\*\)\n)*"
    r"\s*(?:output\s+)?reg\s+(?:signed\s+)?(?:\[[^\]]+\]\s+)?"
    r"(?P<name>\\\S+|[A-Za-z_][A-Za-z0-9_$]*)", re.M)


def _keep_verilog_blocks(text: str) -> str:
    """``(* keep *)`` on the ``always`` block of every register declared
    with ``keep``."""
    names = set(_VERILOG_KEPT_REG.findall(text))
    if not names:
        return text
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    block = re.compile(r"^(?P<indent>[ \t]*)(?P<always>always @\(posedge [^)]+\)\n\s*"
                       r"(?:" + alt + r")(?=[\s\[<])\s*(?:\[[^\]]*\]\s*)?<=)", re.M)
    return block.sub(lambda m: f"{m.group('indent')}(* keep = 32'd1 *)\n"
                               f"{m.group('indent')}{m.group('always')}", text)


def fix_verilog(text: str) -> str:
    """Verilog text (Amaranth's ``verilog.convert``) with plain escaped
    names, no power-up value on read registers and ``keep`` on kept
    registers' ``always`` blocks."""
    text = _keep_verilog_blocks(text)
    def strip(m):
        if not is_read_register(m.group("name")):
            return m.group(0)
        return f"{m.group('head')}{m.group('name')} ;"

    text = _VERILOG_REG_INIT.sub(strip, text)
    mapping = _renamer(text, _VERILOG_IDENT)
    if mapping:
        text = _VERILOG_IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
    return text
