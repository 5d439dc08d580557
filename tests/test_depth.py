"""boards/depth.py: the logic depth of a synthesised ECP5 netlist, on a
netlist written by hand (each depth worked out below), and on a core
through Yosys."""

import json

import pytest

from netagg.boards import build as build_mod
from netagg.boards.depth import WEIGHTS, logic_depth


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
    assert r["LUT4"] > 100 and r["endpoints"] > 100 and 1.0 <= r["max"] < 20
    assert json.loads((tmp_path / "depth.json").read_text()) == r
    again = logic_depth(tmp_path / "netagg_core.json", "netagg_core")
    assert (r["max"], r["at_least"], r["endpoints"]) == \
        (again["max"], again["at_least"], again["endpoints"])
    with pytest.raises(ValueError, match="unknown ECP5 device"):
        build_mod.synth_ooc(p, tmp_path, device="LFE5U-99F")
