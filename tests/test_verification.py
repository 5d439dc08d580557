"""Launchers of the verification-depth cocotb modules (docs/verification.md):
reset under traffic and corner cases (default suite), the coverage run and
the long fault-injected run (``make test-slow``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from netagg.params import Params
from netagg.sim import coverage, harness

BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"
CONFIG = coverage.REGRESSION_CONFIG
SIMULATORS = ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)]


def _seed() -> int:
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    print(f"NETAGG_TB_SEED={seed}")
    return seed


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_reset_under_traffic(simulator):
    harness.run_cocotb(Params(**CONFIG), "netagg.sim.cocotb.test_reset", simulator=simulator,
                       root=BUILD, quiet=True, env={"NETAGG_TB_SEED": str(_seed())})


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_corners(simulator):
    harness.run_cocotb(Params(**CONFIG), "netagg.sim.cocotb.test_corners", simulator=simulator,
                       root=BUILD, quiet=True, env={"NETAGG_TB_SEED": str(_seed())})


def test_coverage_reader(tmp_path):
    """The coverage.dat reader on a hand-written file: counts merge, points
    are classified per module."""
    def rec(page, line, comment, count):
        key = "\x01".join(["", f"t\x02{page.split('/')[0]}", f"page\x02{page}", "f\x02x.v",
                           f"l\x02{line}", f"o\x02{comment}"])
        return f"C '{key}' {count}\n"
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    a.write_text("# SystemC::Coverage-3\n" + rec("v_line/top", 3, "if", 0)
                 + rec("v_line/top", 5, "else", 2) + rec("v_toggle/top.sub", 7, "x[0]", 0))
    b.write_text(rec("v_line/top", 3, "if", 1) + rec("v_toggle/top.sub", 7, "x[0]", 0))
    mods = coverage.summarise(coverage.read([a, b]))
    assert (mods["top"].line_hit, mods["top"].line_total) == (2, 2)
    assert (mods["top.sub"].toggle_hit, mods["top.sub"].toggle_total) == (0, 1)
    assert coverage.total(mods).line_total == 2
    assert "| `top` | 2/2 | 100.0 |" in coverage.report(mods)


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.verilator
def test_line_coverage(tmp_path):
    """Line coverage of netagg_core over the regression, reset and corner
    modules is at least 95 % (report: build/coverage/report.md)."""
    out = Path(__file__).resolve().parent.parent / "build" / "coverage"
    mods = coverage.run_coverage(out, seed=_seed(), root=BUILD)
    t = coverage.total(mods)
    print((out / "report.md").read_text())
    assert t.pct(t.line_hit, t.line_total) >= 95.0


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.verilator
def test_long_fault_injected(tmp_path):
    """At least 10^5 fault-injected messages on Verilator, bit-exact against
    the golden model (figures: build/long_run.json)."""
    n = int(os.environ.get("NETAGG_TB_MESSAGES", "100000"))
    out = Path(__file__).resolve().parent.parent / "build" / "long_run.json"
    out.unlink(missing_ok=True)
    harness.run_cocotb(Params(**CONFIG), "netagg.sim.cocotb.test_long", simulator="verilator",
                       root=BUILD, quiet=True,
                       env={"NETAGG_TB_SEED": str(_seed()), "NETAGG_TB_MESSAGES": str(n),
                            harness.ENV_OUT: str(out)})
    figures = json.loads(out.read_text())
    print(figures)
    assert figures["messages"] >= n
