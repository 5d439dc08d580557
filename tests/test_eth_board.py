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
    # The receive clocks on their RXC pads (a FREQUENCY NET on the domain's
    # signal does not reach nextpnr's clock net); nextpnr derives the PLL's.
    ports = dict((n, float(f)) for n, f in re.findall(r'FREQUENCY PORT "(\S+)" ([0-9.e+]+) HZ',
                                                      lpf))
    assert ports == {"clk25_0__io": 25e6, "eth_rgmii_0__rx_clk__io": 125e6,
                     "eth_rgmii_data_1__rx_clk__io": 125e6}
    assert "FREQUENCY NET" not in lpf
    assert [d["domain"] for d in domains_report()] == ["sync", "eth_tx", "eth0_rx", "eth1_rx"]


def test_board_names():
    assert registry.get("colorlight-5a75b").kind == "ethernet"
    assert registry.get("colorlight-5a75b-selftest").kind == "selftest"
    assert registry.get("colorlight-5a75b").top_ref == "netagg.boards.eth_top:EthernetTop"
    with pytest.raises(ValueError):
        registry.get("colorlight-5a75b-selftest").make_top(PARAMS, jobs=object())
    with pytest.raises(ValueError):
        EthernetTop(PARAMS, core_mhz=48)


def _fake_build(monkeypatch, clocks):
    """``netagg.boards.build`` replaced by a build returning ``clocks``;
    returns the list of the Params it was called with."""
    import sys
    import types
    calls = []

    def build(params, board, outdir, fp_stages=None, ooc=False, **kw):
        calls.append(params)
        return {"board": board, "clocks": clocks, "params": params.to_dict()}
    mod = types.ModuleType("netagg.boards.build")
    mod.build = build
    monkeypatch.setitem(sys.modules, "netagg.boards.build", mod)
    return calls


def test_board_default_params(monkeypatch, capsys, tmp_path):
    # `netagg build --board colorlight-5a75b` takes the board's defaults
    # where no option is given (the generic defaults do not fit the 25F)
    from netagg import cli
    calls = _fake_build(monkeypatch, {})
    defaults = registry.get("colorlight-5a75b").default_params()
    assert defaults and Params(**defaults) != Params()
    out = str(tmp_path / "b")
    assert cli.main(["build", "--board", "colorlight-5a75b", "--outdir", out]) == 0
    assert cli.main(["build", "--board", "colorlight-5a75b", "--outdir", out,
                     "--lanes", "2"]) == 0
    assert cli.main(["build", "--board", "ulx3s", "--outdir", out]) == 0
    assert calls == [Params(**defaults), Params(**{**defaults, "lanes": 2}), Params()]
    capsys.readouterr()


def test_require_timing(monkeypatch, capsys, tmp_path):
    # timing is reported by default; --require-timing fails in one line
    # naming every clock that missed its constraint
    from netagg import cli
    clocks = {"clk_core": {"fmax_mhz": 52.5, "constraint_mhz": 40.0, "met": True},
              "eth0_rx_clk": {"fmax_mhz": 120.25, "constraint_mhz": 125.0, "met": False}}
    _fake_build(monkeypatch, clocks)
    argv = ["build", "--board", "colorlight-5a75b", "--outdir", str(tmp_path)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(argv + ["--require-timing"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["netagg: error: timing not met: eth0_rx_clk 120.25 MHz < 125.00 MHz"]
    clocks["eth0_rx_clk"].update(fmax_mhz=125.5, met=True)
    assert cli.main(argv + ["--require-timing"]) == 0
    clocks.clear()
    assert cli.main(argv + ["--require-timing"]) == 1
    assert "lists no clock" in capsys.readouterr().err


def test_domains_timing_names_every_domain():
    # nextpnr's clock nets as it names them on this top, mapped to the
    # board's domains with their constraints
    from netagg.boards.eth_top import CORE_MHZ, domains_timing

    def c(fmax, constraint):
        return {"fmax_mhz": fmax, "constraint_mhz": constraint, "met": fmax >= constraint}
    clocks = {"$glbnet$clk": c(55.1, round(CORE_MHZ, 2)), "$glbnet$eth_tx_clk": c(130.0, 125.0),
              "$glbnet$switch.mac_rx0.eth0_rx_clk": c(126.0, 125.0),
              "$glbnet$switch.mac_rx1.crc.eth1_rx_clk": c(120.0, 125.0),
              "$glbnet$clk25.buf.i": c(200.0, 25.0)}
    got = {d["domain"]: d for d in domains_timing(clocks)}
    assert list(got) == ["sync", "eth_tx", "eth0_rx", "eth1_rx"]
    assert [got[d]["met"] for d in got] == [True, True, True, False]
    assert got["eth1_rx"]["clock"] == "$glbnet$switch.mac_rx1.crc.eth1_rx_clk"
    assert got["sync"]["fmax_mhz"] == 55.1 and got["sync"]["constraint_mhz"] == round(CORE_MHZ, 3)
    # a domain nextpnr did not constrain as the board needs is not met
    clocks["$glbnet$eth_tx_clk"] = c(130.0, 12.0)
    del clocks["$glbnet$clk"]
    got = {d["domain"]: d for d in domains_timing(clocks)}
    assert not got["eth_tx"]["met"] and not got["sync"]["met"] and got["sync"]["fmax_mhz"] is None


def test_require_timing_checks_the_board_domains(monkeypatch, capsys, tmp_path):
    # a receive clock that nextpnr timed at its 12 MHz default (no
    # constraint reached it) is "met" in `clocks` but not for the board
    import sys
    import types

    from netagg import cli
    from netagg.boards.eth_top import domains_timing
    clocks = {"$glbnet$clk": {"fmax_mhz": 50.0, "constraint_mhz": 41.67, "met": True},
              "$glbnet$eth_tx_clk": {"fmax_mhz": 130.0, "constraint_mhz": 125.0, "met": True},
              "$glbnet$eth0_rx_clk": {"fmax_mhz": 130.0, "constraint_mhz": 125.0, "met": True},
              "$glbnet$eth1_rx_clk": {"fmax_mhz": 90.0, "constraint_mhz": 12.0, "met": True}}
    mod = types.ModuleType("netagg.boards.build")
    mod.build = lambda params, board, outdir, **kw: {
        "clocks": clocks, "ethernet": {"clock_domains": domains_timing(clocks)}}
    monkeypatch.setitem(sys.modules, "netagg.boards.build", mod)
    argv = ["build", "--board", "colorlight-5a75b", "--outdir", str(tmp_path), "--require-timing"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["netagg: error: timing not met: eth1_rx ($glbnet$eth1_rx_clk) not met at "
                   "125.00 MHz"]
    clocks["$glbnet$eth1_rx_clk"]["constraint_mhz"] = 125.0
    clocks["$glbnet$eth1_rx_clk"]["fmax_mhz"] = 125.0
    assert cli.main(argv) == 0


def test_domains_timing_knows_the_mac_clock_names():
    # the receive MACs run in a local domain of the receive clock
    # (EthernetSwitch); nextpnr may name the clock net after it
    from netagg.boards.eth_top import domains_timing
    c = {"fmax_mhz": 126.0, "constraint_mhz": 125.0, "met": True}
    clocks = {"$glbnet$switch.mac_rx0.crc.eth0_rx_mac_clk": c,
              "$glbnet$switch.mac_rx1.crc.eth1_rx_mac_clk": {**c, "fmax_mhz": 107.0,
                                                              "met": False}}
    got = {d["domain"]: d for d in domains_timing(clocks)}
    assert got["eth0_rx"]["clock"] == "$glbnet$switch.mac_rx0.crc.eth0_rx_mac_clk"
    assert got["eth0_rx"]["met"] and not got["eth1_rx"]["met"]
    assert got["eth1_rx"]["fmax_mhz"] == 107.0


def test_seeds_option(monkeypatch, capsys, tmp_path):
    # --seeds N reaches the build as seeds=N (a board's and the
    # out-of-context core's); 1 is the default and is not passed
    import sys
    import types

    from netagg import cli
    calls = []
    mod = types.ModuleType("netagg.boards.build")

    def build(params, board, outdir, **kw):
        calls.append(kw.get("seeds"))
        return {"clocks": {"clk": {"fmax_mhz": 50.0, "constraint_mhz": 40.0, "met": True}}}
    mod.build = build
    monkeypatch.setitem(sys.modules, "netagg.boards.build", mod)
    argv = ["build", "--board", "colorlight-5a75b", "--outdir", str(tmp_path)]
    assert cli.main(argv) == 0
    assert cli.main(argv + ["--seeds", "3", "--require-timing"]) == 0
    assert cli.main(["build", "--board", "ooc-ecp5", "--outdir", str(tmp_path),
                     "--seeds", "2"]) == 0
    assert calls == [None, 3, 2]
    capsys.readouterr()
    assert cli.main(argv + ["--seeds", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seeds" in err[0], err
    assert calls == [None, 3, 2]


def test_build_retries_seeds_until_timing_is_met(monkeypatch, tmp_path):
    # build(..., seeds=N): nextpnr's default seed first, then --seed 2, 3...,
    # stopping at the first attempt whose clocks are all met
    from netagg.boards import build as b
    from netagg.boards.eth_top import CORE_MHZ, domains_timing

    def clocks(rx1):
        def c(fmax, constraint):
            return {"fmax_mhz": fmax, "constraint_mhz": constraint, "met": fmax >= constraint}
        return {"$glbnet$clk": c(40.0, round(CORE_MHZ, 2)),
                "$glbnet$eth0_tx_clk": c(130.0, 125.0),
                "$glbnet$switch.mac_rx0.crc.eth0_rx_mac_clk": c(140.0, 125.0),
                "$glbnet$switch.mac_rx1.crc.eth1_rx_mac_clk": c(rx1, 125.0)}
    fmax = {None: 107.0, 2: 120.0, 3: 131.0, 4: 140.0}
    seen = []

    def fake(spec, platform, top, name, outdir, seed):
        seen.append(seed)
        return {"resources": {}, "clocks": clocks(fmax[seed]), "bitstream": None,
                "build_seconds": 1.0}
    class Top:        # the report's Ethernet entry as EthernetTop gives it
        def summary(self, clocks):
            return {"clock_domains": domains_timing(clocks)}
    monkeypatch.setattr(b, "_build_board", fake)
    monkeypatch.setattr(b, "tool_environment", lambda: None)
    monkeypatch.setattr(registry.Board, "make_top", lambda self, params, **kw: Top())
    params = Params(workers=4, slots=64, elements=16, lanes=2, jobs=2)
    r = b.build(params, "colorlight-5a75b", tmp_path, seeds=4)
    assert seen == [None, 2, 3]
    assert r["seed"] == 3 and [a["seed"] for a in r["attempts"]] == [None, 2, 3]
    assert [bool(a["missed"]) for a in r["attempts"]] == [True, True, False]
    assert "eth1_rx" in r["attempts"][0]["missed"][0]
    seen.clear()
    r = b.build(params, "colorlight-5a75b", tmp_path, seeds=2)
    assert seen == [None, 2] and r["attempts"][-1]["missed"]
    with pytest.raises(ValueError):
        b.build(params, "colorlight-5a75b", tmp_path, seeds=0)
