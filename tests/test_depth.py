"""boards/depth.py: the logic depth of a synthesised ECP5 netlist, on a
netlist written by hand (each depth worked out below), and on a core
through Yosys."""

import json

import pytest

from netagg.boards import build as build_mod
from netagg.boards.depth import WEIGHTS, arrival_by_depth, enable_nets, logic_depth


def _cell(kind, ports, **params):
    return {"type": kind, "parameters": params,
            "port_directions": {p: d for p, (d, _) in ports.items()},
            "connections": {p: bits for p, (_, bits) in ports.items()}}


def _ff(name, q, di=None, ce=None):
    ports = {"CLK": ("input", [1]), "Q": ("output", [q])}
    if di is not None:
        ports["DI"] = ("input", [di])
    if ce is not None:
        ports["CE"] = ("input", [ce])
    return _cell("TRELLIS_FF", ports)


def _netlist():
    cells = {
        "fa": _ff("a", 2), "fb": _ff("b", 3),
        # a LUT, a PFUMX and a LUT into register c: 1 + 0.3 + 1
        "l1": _cell("LUT4", {"A": ("input", [2]), "B": ("input", [3]), "Z": ("output", [4])}),
        "m1": _cell("PFUMX", {"ALUT": ("input", [4]), "BLUT": ("input", [3]),
                              "C0": ("input", [2]), "Z": ("output", [5])}),
        "l2": _cell("LUT4", {"A": ("input", [5]), "Z": ("output", [6])}),
        "fc": _ff("c", 20, di=6),
        # register g's enable from l1: 1
        "fg": _ff("g", 21, ce=4),
        # a carry chain: the second cell's sum from the carry (1 + 0.1)
        "c1": _cell("CCU2C", {"A0": ("input", [2]), "CIN": ("input", []),
                              "COUT": ("output", [7]), "S0": ("output", [8])}),
        "c2": _cell("CCU2C", {"A0": ("input", [3]), "CIN": ("input", [7]),
                              "COUT": ("output", [13]), "S0": ("output", [9])}),
        "fd": _ff("d", 22, di=9),
        # a block RAM with its output register, a LUT, register e: 1 + 1
        "r1": _cell("DP16KD", {"CLKB": ("input", [1]), "ADB0": ("input", [6]),
                               "DOB0": ("output", [10])}, REGMODE_B="OUTREG"),
        "l3": _cell("LUT4", {"A": ("input", [10]), "Z": ("output", [11])}),
        "fe": _ff("e", 23, di=11),
        # without it, straight into register f: 5
        "r2": _cell("DP16KD", {"CLKB": ("input", [1]), "ADB0": ("input", [2]),
                               "DOB0": ("output", [12])}, REGMODE_B="NOREG"),
        "ff": _ff("f", 24, di=12),
    }
    netnames = {"clk": {"bits": [1]}, "u.a": {"bits": [2]}, "u.b": {"bits": [3]},
                "u.c": {"bits": [20]}, "u.g": {"bits": [21]}, "v.d": {"bits": [22]},
                "v.e": {"bits": [23]}, "f": {"bits": [24]}, "$auto$x": {"bits": [24]}}
    return {"modules": {"top": {"attributes": {"top": "00000000000000000000000000000001"},
                                "cells": cells, "netnames": netnames}}}


def test_each_cells_delay_counts_along_the_deepest_chain(tmp_path):
    path = tmp_path / "n.json"
    path.write_text(json.dumps(_netlist()))
    r = logic_depth(path, threshold=2.0)
    got = {d["register"]: d["depth"] for d in r["deepest"]}
    lut, mux, cin = WEIGHTS["LUT4"], WEIGHTS["PFUMX"], WEIGHTS["CCU2C.CIN"]
    assert got["u.c"] == pytest.approx(lut + mux + lut)
    assert got["u.g"] == pytest.approx(lut)
    assert got["v.d"] == pytest.approx(WEIGHTS["CCU2C"] + cin)
    assert got["v.e"] == pytest.approx(WEIGHTS["DP16KD.OUTREG"] + lut)
    # the designer's name, not the tool's; a RAM's address is an endpoint
    assert got["f"] == pytest.approx(WEIGHTS["DP16KD.NOREG"])
    assert got["r1"] == pytest.approx(lut + mux + lut)
    assert r["max"] == pytest.approx(WEIGHTS["DP16KD.NOREG"])
    # at least 2 deep: f and r1 (no hierarchy: "(top)"), u.c, v.e
    assert r["by_block"] == {"(top)": 2, "u": 1, "v": 1}
    assert r["at_least"]["5"] == 1 and r["at_least"]["4"] == 1
    # (a and b have no input: no endpoint)
    assert r["endpoints"] == 7 and r["deepest"][0]["register"] == "f"


def test_paths_from_the_inputs_count_unless_told_not_to():
    """An input port is depth 0 for the mapper's view and no start for an
    out-of-context placement's: a LUT of a port and a flip-flop's LUT
    counts from the flip-flop; an endpoint fed by ports alone is left out."""
    n = _netlist()
    top = n["modules"]["top"]
    top["ports"] = {"p": {"direction": "input", "bits": [30, 31]},
                    "o": {"direction": "output", "bits": [20]}}
    top["cells"].update({
        # port -> LUT -> LUT -> register h (2 from the port)
        "lp1": _cell("LUT4", {"A": ("input", [30]), "Z": ("output", [32])}),
        "lp2": _cell("LUT4", {"A": ("input", [32]), "B": ("input", [31]), "Z": ("output", [33])}),
        "fh": _ff("h", 25, di=33),
        # port -> LUT -> LUT and a register -> LUT (its second) -> register i
        "lq": _cell("LUT4", {"A": ("input", [32]), "B": ("input", [2]), "Z": ("output", [34])}),
        "fi": _ff("i", 26, di=34),
    })
    top["netnames"].update({"w.h": {"bits": [25]}, "w.i": {"bits": [26]}})
    lut = WEIGHTS["LUT4"]
    timed = {d["register"]: d["depth"] for d in logic_depth(n, threshold=0.5)["deepest"]}
    assert timed["w.h"] == pytest.approx(2 * lut) and timed["w.i"] == pytest.approx(2 * lut)
    r = logic_depth(n, threshold=0.5, from_inputs=False)
    untimed = {d["register"]: d["depth"] for d in r["deepest"]}
    assert "w.h" not in untimed and untimed["w.i"] == pytest.approx(lut)
    assert r["endpoints"] == 8 and logic_depth(n)["endpoints"] == 9


def _with_enables():
    """_netlist() with wide enables: l1's output (1 level) on the CE of g and
    of two more flip-flops, register a on two LSRs, input port p on a CE."""
    n = _netlist()
    top = n["modules"]["top"]
    top["ports"] = {"p": {"direction": "input", "bits": [30]}}
    for k in range(2):
        top["cells"][f"fx{k}"] = _cell("TRELLIS_FF", {
            "CLK": ("input", [1]), "CE": ("input", [4]), "Q": ("output", [40 + k])})
        top["cells"][f"fy{k}"] = _cell("TRELLIS_FF", {
            "CLK": ("input", [1]), "LSR": ("input", [2]), "Q": ("output", [42 + k])})
    top["cells"]["fz"] = _cell("TRELLIS_FF", {
        "CLK": ("input", [1]), "CE": ("input", [30]), "Q": ("output", [44])})
    top["netnames"].update({"u.en": {"bits": [4]}, "p": {"bits": [30]}})
    return n


def test_enable_nets_counts_each_flip_flop_pin_with_its_drivers_depth():
    n = _with_enables()
    lut = WEIGHTS["LUT4"]
    assert enable_nets(n, min_loads=2) == [
        {"net": "u.en", "loads": 3, "pins": ["CE"], "driver": "LUT4", "depth": lut},
        {"net": "u.a", "loads": 2, "pins": ["LSR"], "driver": "TRELLIS_FF", "depth": 0.0}]
    assert [r["net"] for r in enable_nets(n, min_loads=3)] == ["u.en"]
    ones = {r["net"]: r for r in enable_nets(n, min_loads=1)}
    assert ones["p"] == {"net": "p", "loads": 1, "pins": ["CE"], "driver": "input", "depth": 0.0}
    assert enable_nets(n, min_loads=1, from_inputs=False)[-1]["depth"] is None
    with pytest.raises(ValueError, match="min_loads"):
        enable_nets(n, min_loads=0)


def _script():
    """scripts/logic_depth.py as a module (its ``main``)."""
    import importlib.util
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "scripts" / "logic_depth.py"
    spec = importlib.util.spec_from_file_location("_script_logic_depth", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_script_reads_a_netlist_and_lists_its_enables(tmp_path, capsys):
    mod = _script()
    n = _with_enables()
    n["modules"]["netagg_core"] = n["modules"].pop("top")
    path, out = tmp_path / "core.json", tmp_path / "out.json"
    path.write_text(json.dumps(n))
    assert mod.main(["--netlist", str(path), "--enables", "2", "--untimed-inputs",
                     "--threshold", "1", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    want = logic_depth(n, "netagg_core", threshold=1, top_n=20, from_inputs=False)
    assert {k: r[k] for k in want} == json.loads(json.dumps(want))
    assert r["from_inputs"] is False
    assert r["enable_nets"] == enable_nets(n, "netagg_core", min_loads=2, from_inputs=False)
    assert ("enable nets of at least 2 flip-flops: 2, 1 driven by logic (3 loads):"
            in capsys.readouterr().out)
    assert mod.main(["--netlist", str(path), "--lanes", "4"]) == 2
    assert mod.main(["--netlist", str(tmp_path / "none.json")]) == 2
    assert mod.main(["--netlist", str(path), "--enables", "0"]) == 2


def test_a_netlist_without_a_single_top_names_it():
    n = _netlist()
    # Yosys writes attributes as binary strings: all zeros is not the top
    n["modules"]["not_top"] = {"attributes": {"top": "0" * 32}, "cells": {}, "netnames": {}}
    assert logic_depth(n)["endpoints"] == 7
    n["modules"]["other"] = {"attributes": {"top": 1}, "cells": {}, "netnames": {}}
    with pytest.raises(ValueError, match="no single top"):
        logic_depth(n)
    assert logic_depth(n, "other")["endpoints"] == 0
    with pytest.raises(ValueError, match="no module 'x'"):
        logic_depth(n, "x")


def test_synth_ooc_reports_a_small_cores_depth(tmp_path):
    from netagg.params import Params
    p = Params(lanes=1, elements=4, slots=4, workers=2, jobs=1, dtypes=("int32",), ops=("sum",))
    r = build_mod.synth_ooc(p, tmp_path)
    assert r["from_inputs"] is True
    assert r["LUT4"] > 100 and r["endpoints"] > 100 and 1.0 <= r["max"] < 20
    assert json.loads((tmp_path / "depth.json").read_text()) == r
    again = logic_depth(tmp_path / "netagg_core.json", "netagg_core")
    assert (r["max"], r["at_least"], r["endpoints"]) == \
        (again["max"], again["at_least"], again["endpoints"])
    with pytest.raises(ValueError, match="unknown ECP5 device"):
        build_mod.synth_ooc(p, tmp_path, device="LFE5U-99F")


def _report(fmax, arrivals):
    """A nextpnr report with ``--detailed-timing-report``: each (cell, port,
    max arrival) as an endpoint of a net (two nets reach ("fc", "DI"))."""
    nets = [{"net": f"n{i}", "endpoints": [{"cell": c, "port": p, "delay": [0.1, a]}]}
            for i, (c, p, a) in enumerate(arrivals)]
    return {"fmax": {"clk": {"achieved": fmax, "constraint": 150.0}},
            "detailed_net_timings": nets}


def test_arrival_by_depth_joins_each_endpoint_with_its_placed_arrival(tmp_path):
    n = _netlist()
    # depths (above): fc DI 2.3 -> bin 2.5, r1 ADB0 2.3 -> 2.5, fg CE 1.0,
    # fd DI 1.1 -> 1.0 (reported on M), fe DI 2.0, ff DI 5.0
    rep1 = _report(140.0, [("fc", "DI", 6.0), ("fc", "DI", 6.9), ("fg", "CE", 3.0),
                           ("fd", "M", 4.0), ("fe", "DI", 5.0), ("ff", "DI", 7.5),
                           ("r1", "ADB0", 5.5), ("elsewhere", "DI", 9.9)])
    rep2 = tmp_path / "rep2.json"
    rep2.write_text(json.dumps(_report(150.5, [("fc", "DI", 5.0), ("fg", "CE", 2.0)])))
    r = arrival_by_depth(n, [rep1, str(rep2)], period_ns=6.5)
    assert r["period_ns"] == 6.5
    assert r["reports"] == [{"fmax_mhz": 140.0, "joined": 6, "unjoined": 1},
                            {"fmax_mhz": 150.5, "joined": 2, "unjoined": 0}]
    assert r["bins"] == [
        {"depth": 1.0, "endpoints": 3, "mean_ns": 3.0, "p90_ns": 4.0, "max_ns": 4.0, "late": 0},
        {"depth": 2.0, "endpoints": 1, "mean_ns": 5.0, "p90_ns": 5.0, "max_ns": 5.0, "late": 0},
        {"depth": 2.5, "endpoints": 3, "mean_ns": 5.8, "p90_ns": 6.9, "max_ns": 6.9, "late": 1},
        {"depth": 5.0, "endpoints": 1, "mean_ns": 7.5, "p90_ns": 7.5, "max_ns": 7.5, "late": 1}]
    with pytest.raises(ValueError, match="period_ns"):
        arrival_by_depth(n, [rep1], period_ns=0)
    with pytest.raises(ValueError, match="detailed-timing-report"):
        arrival_by_depth(n, [{"fmax": {}}], period_ns=6.5)


def test_the_script_prints_arrival_by_depth(tmp_path, capsys):
    mod = _script()
    n = _netlist()
    n["modules"]["netagg_core"] = n["modules"].pop("top")
    path, rep, out = tmp_path / "core.json", tmp_path / "rep.json", tmp_path / "out.json"
    path.write_text(json.dumps(n))
    rep.write_text(json.dumps(_report(140.0, [("ff", "DI", 7.5), ("fg", "CE", 3.0)])))
    assert mod.main(["--netlist", str(path), "--report", str(rep), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "placements: 140.0 MHz (2 endpoints joined)" in text
    assert "    5.0          1   7.50   7.50   7.50      1" in text
    got = json.loads(out.read_text())["arrival_by_depth"]
    assert got == json.loads(json.dumps(arrival_by_depth(n, [str(rep)], "netagg_core",
                                                         period_ns=1000 / 150)))
    assert mod.main(["--report", str(rep)]) == 2
    assert mod.main(["--netlist", str(path), "--report", str(tmp_path / "none.json")]) == 2
    assert mod.main(["--netlist", str(path), "--report", str(rep), "--period", "0"]) == 2
