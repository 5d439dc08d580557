# amaranth: UnusedElaboratable=no
"""The Colorlight 5A-75B Ethernet top (boards/eth_top.py), prepared for the
board without running the tools: PLL, RGMII DDR primitives and delays on
both ports, the PHY reset pin, and a clock constraint on every domain; the
board names: the switch and the self-test as separate tops."""

from __future__ import annotations

import re

import pytest
from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform

from netagg.boards import registry
from netagg.boards.eth_top import EthernetTop, domains_report
from netagg.jobs import JobTable
from netagg.params import Params

PARAMS = Params(workers=4, slots=16, elements=16, lanes=4, jobs=2)


@pytest.fixture(scope="module")
def plan():
    jobs = JobTable.from_dict({"jobs": [{"id": 0, "workers": 2, "slot_base": 0, "slots": 8}]},
                              PARAMS)
    return Colorlight_5A75B_R70Platform().prepare(EthernetTop(PARAMS, jobs=jobs), name="t")


def test_primitives(plan):
    il = plan.files["t.il"]
    assert il.count("EHXPLLL") == 1
    assert len(re.findall(r"cell \\IDDRX1F", il)) == 10          # 4 data + ctl, 2 ports
    assert len(re.findall(r"cell \\ODDRX1F", il)) == 12          # + the clock
    assert len(re.findall(r"cell \\DELAYG", il)) == 10


def test_pins_and_clocks(plan):
    lpf = plan.files["t.lpf"]
    for site in ("P5", "M1", "M16", "M2", "M12", "P6", "P11"):       # rst, rx/tx clocks, clk, led
        assert f'SITE "{site}"' in lpf
    # The receive clocks on their domains' nets; nextpnr derives the PLL's.
    nets = dict((n, float(f)) for n, f in re.findall(r'FREQUENCY NET "(\S+)" ([0-9.e+]+) HZ',
                                                     lpf))
    assert sorted(n.rsplit(".", 1)[-1] for n in nets) == ["eth0_rx_clk", "eth1_rx_clk"]
    assert set(nets.values()) == {125e6}
    assert 'FREQUENCY PORT "clk25_0__io" 25000000.0 HZ' in lpf
    assert [d["domain"] for d in domains_report()] == ["sync", "eth_tx", "eth0_rx", "eth1_rx"]


def test_board_names():
    assert registry.get("colorlight-5a75b").kind == "ethernet"
    assert registry.get("colorlight-5a75b-selftest").kind == "selftest"
    assert registry.get("colorlight-5a75b").top_ref == "netagg.boards.eth_top:EthernetTop"
    with pytest.raises(ValueError):
        registry.get("colorlight-5a75b-selftest").make_top(PARAMS, jobs=object())
    with pytest.raises(ValueError):
        EthernetTop(PARAMS, core_mhz=48)
