# amaranth: UnusedElaboratable=no
"""The RGMII receive layer's generated Verilog at its pins under Icarus
with cocotbext-eth's RgmiiSource and GmiiSink (sim/cocotb/test_rgmii_rx.py)."""

from __future__ import annotations

import os
import shutil

import pytest
from amaranth.back import verilog

from netagg.hdl.eth.rgmii import RgmiiRxPins
from netagg.sim import harness

pytestmark = pytest.mark.cocotb


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="needs Icarus Verilog")
def test_rgmii_rx_with_cocotbext_eth(tmp_path):
    from cocotb_test import simulator as cts
    src = tmp_path / "rgmii_rx.v"
    src.write_text(verilog.convert(RgmiiRxPins(), name="rgmii_rx", emit_src=False))
    harness._sim_env_path()
    env = {"NETAGG_TB_SEED": os.environ.get("NETAGG_TB_SEED", "1"),
           "COCOTB_LOG_LEVEL": "WARNING", "COCOTB_ANSI_OUTPUT": "0"}
    sim = cts.Icarus(toplevel="rgmii_rx", module="netagg.sim.cocotb.test_rgmii_rx",
                     verilog_sources=[str(src)], sim_build=str(tmp_path / "build"),
                     timescale=harness.TIMESCALE, compile_args=list(harness.ICARUS_ARGS),
                     extra_env=env)
    harness._run(sim, True)
