"""The command line: exit codes 0/1/2, one-line errors, dispatch to the
back-ends, and ``netagg model`` end to end on a generated pcap whose
expected RESULT frames are computed independently (arith.reduce on each
round's contributions in arrival order, addresses from the scenario)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import types

import numpy as np
import pytest

from netagg import cli, pcap
from netagg.frames import Endpoint, build_frame, parse
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.payload import Message
from netagg.sim import arith
from netagg.sim.frame_model import Router, classify, run_model, run_model_seq
from netagg.sim.message_model import make_contrib
from netagg.wire import COUNTERS, STATUS_NAN, STATUS_OVERFLOW, DType, Header, MsgType, Op, Verdict

PARAM_ARGS = ["--workers", "4", "--slots", "8", "--elements", "8", "--lanes", "4",
              "--jobs", "2", "--switch-mac", "02:aa:bb:cc:dd:ee", "--switch-ip", "192.168.7.1"]
PARAMS = Params(workers=4, slots=8, elements=8, lanes=4, jobs=2,
                switch_mac="02:aa:bb:cc:dd:ee", switch_ip="192.168.7.1")
JOBS = {"jobs": [{"id": 0, "workers": 3, "slot_base": 0, "slots": 4},
                 {"id": 1, "workers": 2, "slot_base": 4, "slots": 4}]}
WORKERS = {0: 3, 1: 2}
SWITCH = (bytes.fromhex("02aabbccddee"), bytes([192, 168, 7, 1]), 42662)


def endpoint(job, worker, port_shift=0):
    return Endpoint(bytes([2, 0, 0, 0, job, worker]), bytes([10, 0, job, worker + 1]),
                    5000 + 10 * job + worker + port_shift)


def scenario():
    """Input frames and the expected output: a list of (dst endpoint, header,
    values) in protocol order, and the expected counters."""
    rng = np.random.default_rng(2024)
    frames, expected = [], []
    stats = dict.fromkeys(COUNTERS, 0)
    stats["ignored"] = 0
    where = {(j, w): endpoint(j, w) for j in WORKERS for w in range(WORKERS[j])}

    def send(job, worker, data, src=None):
        src = src or where[(job, worker)]
        frames.append(build_frame(data, src, Endpoint(*SWITCH)))
        stats["rx"] += 1

    kinds = [(DType.FP32, Op.SUM), (DType.BF16, Op.SUM), (DType.INT32, Op.SUM),
             (DType.FP32, Op.MIN), (DType.BF16, Op.MAX), (DType.INT32, Op.MAX)]
    rounds = []
    for r, (dtype, op) in enumerate(kinds * 2):
        job = r % 2
        top = 0xFFFF if dtype is DType.BF16 else 0xFFFFFFFF
        count = int(rng.integers(1, 9))
        contribs = [rng.integers(0, top + 1, size=count, dtype=np.uint64).astype(np.uint32)
                    for _ in range(WORKERS[job])]
        if dtype is not DType.INT32:          # mostly finite values, a few specials
            contribs[0][0] = 0x3F80 if dtype is DType.BF16 else 0x3F800000
            if r in (3, 4):                   # a signalling NaN: canonical NaN, NaN bit
                contribs[-1][-1] = 0x7F81 if dtype is DType.BF16 else 0x7F800001
        order = list(rng.permutation(WORKERS[job]))
        rounds.append(dict(job=job, slot=(r // 2) % 4, ver=(r // 8) % 2, dtype=dtype, op=op,
                           offset=1000 * r, contribs=contribs, order=order, seen=0))
    # Interleave rounds two at a time (one per job), contributions alternating.
    events = []
    for a, b in zip(rounds[0::2], rounds[1::2], strict=True):
        for k in range(max(len(a["order"]), len(b["order"]))):
            events += [(x, x["order"][k]) for x in (a, b) if k < len(x["order"])]

    def expect(rd, dests):
        arrived = [rd["contribs"][w] for w in rd["order"]]
        values, nan, ovf = arith.reduce(rd["dtype"], rd["op"], arrived)
        status = len(arrived) | (STATUS_NAN if nan else 0) | (STATUS_OVERFLOW if ovf else 0)
        for d in dests:
            h = Header(version=1, type=MsgType.RESULT, ver=rd["ver"], job=rd["job"],
                       dtype=rd["dtype"], op=rd["op"], slot=rd["slot"], worker=d,
                       offset=rd["offset"], count=len(arrived[0]), status=status)
            expected.append((where[(rd["job"], d)], h, [int(v) for v in values]))

    def contrib(rd, w, values=None):
        return make_contrib(rd["job"], rd["slot"], rd["ver"], int(w),
                            rd["contribs"][w] if values is None else values,
                            dtype=rd["dtype"], op=rd["op"], offset=rd["offset"])

    for i, (rd, w) in enumerate(events):
        send(rd["job"], w, contrib(rd, w))
        rd["seen"] += 1
        if rd["seen"] == len(rd["order"]):
            stats["results"] += 1
            stats["tx"] += len(rd["order"])
            expect(rd, range(len(rd["order"])))
        if i == 2:                            # noise after the 3rd message
            frames.append(b"\xff" * 6 + bytes(6) + b"\x08\x06" + bytes(46))       # ARP
            stats["ignored"] += 1
            bad_port = Endpoint(SWITCH[0], SWITCH[1], 42663)
            frames.append(build_frame(contrib(rd, w), where[(rd["job"], w)], bad_port))
            stats["ignored"] += 1
            send(rd["job"], w, contrib(rd, w)[:-2])                   # bad_length
            stats["drop_bad_length"] += 1
            if rd["seen"] < len(rd["order"]):
                send(rd["job"], w, contrib(rd, w, [0] * len(rd["contribs"][w])))
                stats["drop_duplicate"] += 1
            # An unaccepted message from a new address does not move the worker.
            send(rd["job"], w, contrib(rd, w)[:16], src=endpoint(rd["job"], w, 99))
            stats["drop_bad_length"] += 1
        if i == 12:                           # worker 1 of round 0 lost its result and
            rd0 = rounds[0]                   # resends from a new port: a retransmission
            where[(rd0["job"], 1)] = endpoint(rd0["job"], 1, port_shift=500)
            send(rd0["job"], 1, contrib(rd0, 1))
            stats["retransmit"] += 1
            stats["tx"] += 1
            expect(rd0, [1])
    return frames, expected, stats


def check_output(out_frames, expected):
    assert len(out_frames) == len(expected)
    for frame, (dst, header, values) in zip(out_frames, expected, strict=True):
        assert frame[0:6] == dst.mac and frame[6:12] == SWITCH[0]
        assert frame[26:30] == SWITCH[1] and frame[30:34] == dst.ip
        assert struct.unpack(">HH", frame[34:38]) == (SWITCH[2], dst.port)
        payload = frame[42:]
        assert Header.unpack(payload) == header
        size = DType(header.dtype).size
        assert len(payload) == 16 + size * header.count
        got = [int.from_bytes(payload[16 + size * i:16 + size * (i + 1)], "big")
               for i in range(header.count)]
        assert got == values


def test_run_model_scenario():
    frames, expected, stats = scenario()
    out, got = run_model(PARAMS, JobTable.from_dict(JOBS, PARAMS), frames)
    check_output(out, expected)
    assert got == stats


def test_classify_and_router_for_the_harness():
    frames, expected, _ = scenario()
    messages, ignored = classify(frames, PARAMS.port)
    assert ignored == 2
    assert [m.seq for m in messages] == [i for i in range(len(frames)) if i not in (3, 4)]
    # The router gives a result caused by message k the address as of k,
    # even if later messages were noted first (the RTL emits results late).
    router = Router(PARAMS)
    seq, ep = messages[0].seq, messages[0].endpoint
    router.note(messages[0], Verdict.ACCEPT)
    moved = messages[0]._replace(seq=seq + 100, endpoint=endpoint(9, 9))
    router.note(moved, Verdict.RETRANSMIT)
    router.note(messages[0]._replace(seq=seq + 200, endpoint=endpoint(8, 8)), Verdict.DUPLICATE)
    h = Header.unpack(messages[0].payload)
    result = Message(h.replace(type=MsgType.RESULT, status=1), np.zeros(h.count, np.uint32))
    def dst(frame):
        return parse(frame, None).dst

    assert dst(router.frame(result, seq)) == ep
    assert dst(router.frame(result, seq + 150)) == endpoint(9, 9)
    assert dst(router.frame(result, seq + 250)) == endpoint(9, 9)   # dropped: no move


def write_inputs(tmp_path, frames, timestamps=None):
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps(JOBS))
    inp = tmp_path / "in.pcap"
    ts = timestamps or [0] * len(frames)
    pcap.write(inp, [pcap.Record(f, t) for f, t in zip(frames, ts, strict=True)])
    return jobs, inp


def test_python_m_netagg_model_end_to_end(tmp_path):
    frames, expected, stats = scenario()
    ts = [1_700_000_000_000_000_000 + 1000 * i for i in range(len(frames))]
    jobs, inp = write_inputs(tmp_path, frames, ts)
    out, st = tmp_path / "out.pcap", tmp_path / "stats.json"
    proc = subprocess.run(
        [sys.executable, "-m", "netagg", "model", "--jobs-config", str(jobs), "--in", str(inp),
         "--out", str(out), "--stats", str(st), *PARAM_ARGS],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    records = pcap.read(out)
    check_output([r.data for r in records], expected)
    got = json.loads(st.read_text())
    assert got == stats and "cycles" not in got
    assert all(type(v) is int for v in got.values())
    # Each RESULT frame carries the timestamp of the frame that caused it.
    caused_by, _ = run_model_seq(PARAMS, JobTable.from_dict(JOBS, PARAMS), frames)
    assert [r.ts_ns for r in records] == [ts[seq] for seq, _ in caused_by]


def run(argv, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("netagg: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_model_in_process_and_stats_optional(tmp_path, capsys):
    frames, expected, _ = scenario()
    jobs, inp = write_inputs(tmp_path, frames)
    code, out, err = run(["model", "--jobs-config", str(jobs), "--in", str(inp),
                          "--out", str(tmp_path / "o.pcap"), *PARAM_ARGS], capsys)
    assert code == 0 and err == "" and "RESULT frames out" in out
    check_output(pcap.read_frames(tmp_path / "o.pcap"), expected)


@pytest.mark.parametrize("argv", [
    [], ["frobnicate"], ["model"], ["model", "--in", "x", "--out", "y"],
    ["model", "--jobs-config", "j", "--in", "x", "--out", "y", "--workers", "many"],
    ["model", "--jobs-config", "j", "--in", "x", "--out", "y", "--bogus"],
    ["model", "--jobs-config", "j", "--in", "x", "--out", "y", "--job", "2"],
    ["sim", "--jobs-config", "j", "--in", "x", "--out", "y", "--simulator", "modelsim"],
    ["build", "--board", "arty"], ["build"], ["generate"],
    ["generate", "-o", "x.v", "--fp-stages", "two"],
])
def test_usage_errors_exit_2(argv, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert "usage:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [[], ["generate"], ["sim"], ["model"], ["build"]])
def test_help_exits_0(argv, capsys):
    code, out, err = run(argv + ["--help"], capsys)
    assert code == 0 and "usage: netagg" in out
    if argv:
        assert "--bf16-accumulate" in out and "--switch-mac" in out and "--fp-stages" in out


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.startswith("netagg ")


def test_failures_exit_1_with_one_line(tmp_path, capsys):
    frames, _, _ = scenario()
    jobs, inp = write_inputs(tmp_path, frames[:3])
    io = ["--jobs-config", str(jobs), "--in", str(inp), "--out", str(tmp_path / "o.pcap")]

    def fails(argv, pattern):
        code, _, err = run(argv, capsys)
        assert code == 1, err
        line = one_line_error(err)
        assert pattern in line, line

    fails(["model", *io, "--lanes", "3"], "lanes (L=3) must divide elements (K=64)")
    fails(["model", *io, "--workers", "0"], "workers must be a positive integer")
    fails(["model", *io, "--workers", "256"], "1..255")
    fails(["model", *io, "--slots", "65537"], "1..65536")
    fails(["model", *io, "--dtypes", "fp64"], "unknown dtype 'fp64'")
    fails(["model", *io, "--ops", "sum,avg"], "unknown op 'avg'")
    fails(["model", *io, "--bf16-accumulate", "fp16"], "bf16-accumulate")
    fails(["model", *io, "--switch-ip", "300.1.1.1"], "invalid IPv4 address")
    fails(["model", *io, "--switch-mac", "zz"], "invalid MAC address")
    # JOBS.json refused against the build parameters (default W_max=8, S=256, J=4).
    (tmp_path / "big.json").write_text(
        '{"jobs": [{"id": 0, "workers": 9, "slot_base": 0, "slots": 1}]}')
    fails(["model", "--jobs-config", str(tmp_path / "big.json"), "--in", str(inp),
           "--out", str(tmp_path / "o.pcap")], "9 workers, not in 1..8")
    (tmp_path / "bad.json").write_text("{not json")
    fails(["model", "--jobs-config", str(tmp_path / "bad.json"), *io[2:]],
          "invalid JSON")
    fails(["model", "--jobs-config", str(tmp_path / "nope.json"), *io[2:]],
          "cannot read jobs config")
    fails(["model", *io[:2], "--in", str(tmp_path / "nope.pcap"), *io[4:]], "cannot read")
    (tmp_path / "ng.pcap").write_bytes(bytes.fromhex("0a0d0d0a") + bytes(40))
    fails(["model", *io[:2], "--in", str(tmp_path / "ng.pcap"), *io[4:]], "pcapng")
    fails(["model", *io[:4], "--out", str(tmp_path / "no" / "o.pcap"), *PARAM_ARGS],
          "cannot write")
    fails(["model", *io, "--stats", str(tmp_path / "no" / "s.json"), *PARAM_ARGS],
          "cannot write")


def test_missing_backend_is_one_line(monkeypatch, capsys, tmp_path):
    for name in ("netagg.hdl.top", "netagg.sim.harness", "netagg.boards.build"):
        monkeypatch.setitem(sys.modules, name, None)      # makes the import fail
    jobs, inp = write_inputs(tmp_path, [])
    for argv in (["generate", "-o", str(tmp_path / "x.v")],
                 ["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap"],
                 ["build", "--board", "ulx3s"]):
        code, _, err = run(argv, capsys)
        assert code == 1
        assert "is not available" in one_line_error(err)
    # A back-end that exists but lacks a dependency says which one.
    def import_module(name):
        raise ModuleNotFoundError("No module named 'no_such_dependency'",
                                  name="no_such_dependency")
    monkeypatch.setattr(cli.importlib, "import_module", import_module)
    with pytest.raises(cli.CliError, match="needs the Python module 'no_such_dependency'"):
        cli._backend("netagg.hdl.top", "write_verilog", "generate")
    # A back-end module without the function.
    monkeypatch.undo()
    fake_module(monkeypatch, "netagg.hdl.top")
    code, _, err = run(["generate", "-o", str(tmp_path / "x.v")], capsys)
    assert code == 1 and "write_verilog is missing" in one_line_error(err)


def fake_module(monkeypatch, name, **functions):
    mod = types.ModuleType(name)
    for fname, fn in functions.items():
        setattr(mod, fname, fn)
    monkeypatch.setitem(sys.modules, name, mod)


def test_generate_dispatch(monkeypatch, capsys, tmp_path):
    calls = []
    fake_module(monkeypatch, "netagg.hdl.top",
                write_verilog=lambda params, path, fp_stages=None, acc_ram="auto": calls.append(
                    (params, path, fp_stages, acc_ram)))
    code, out, err = run(["generate", "-o", "core.v", "--lanes", "4", "--dtypes", "bf16,fp32",
                          "--fp-stages", "3"], capsys)
    assert code == 0, err
    assert calls == [(Params(lanes=4, dtypes=("fp32", "bf16")), "core.v", 3, "auto")]
    for form in ("ecp5", "memory", "auto"):
        code, _, _ = run(["generate", "-o", "core.v", "--acc-ram", form], capsys)
        assert calls[-1] == (Params(), "core.v", None, form)
    code, _, err = run(["generate", "-o", "core.v", "--acc-ram", "bram"], capsys)
    assert code == 2 and "--acc-ram" in err

    def refuse(params, path, fp_stages=None, acc_ram="memory"):
        raise ValueError("fp_stages must be in 1..6, not 9\n(details)")
    fake_module(monkeypatch, "netagg.hdl.top", write_verilog=refuse)
    code, _, err = run(["generate", "-o", "core.v", "--fp-stages", "9"], capsys)
    assert code == 1 and "fp_stages must be in 1..6" in one_line_error(err)


def test_sim_dispatch(monkeypatch, capsys, tmp_path):
    calls = []

    def run_sim(params, jobs, in_path, out_path, stats_path, simulator, fp_stages=None,
                acc_ram="auto"):
        calls.append((params, jobs.to_dict(), in_path, out_path, stats_path, simulator,
                      fp_stages, acc_ram))
    fake_module(monkeypatch, "netagg.sim.harness", run_sim=run_sim)
    jobs, inp = write_inputs(tmp_path, [])
    code, _, err = run(["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap",
                        "--simulator", "verilator", "--stats", "s.json", *PARAM_ARGS], capsys)
    assert code == 0, err
    assert calls == [(PARAMS, JOBS, str(inp), "o.pcap", "s.json", "verilator", None, "auto")]
    code, _, err = run(["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap",
                        *PARAM_ARGS], capsys)
    assert calls[-1][4:6] == (None, "icarus")
    code, _, err = run(["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap",
                        "--acc-ram", "memory", *PARAM_ARGS], capsys)
    assert code == 0 and calls.pop()[-1] == "memory"
    code, _, err = run(["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap",
                        "--frontend", "ethernet", "--acc-ram", "ecp5", *PARAM_ARGS], capsys)
    assert code == 1 and "--acc-ram applies to the stream front end" in one_line_error(err)
    # The jobs config and the input are checked before a simulator starts.
    code, _, err = run(["sim", "--jobs-config", str(jobs), "--in", str(inp), "--out", "o.pcap"
                        ], capsys)
    assert code == 0                      # default params accept these jobs
    (tmp_path / "bad.json").write_text('{"jobs": [{"id": 5}]}')
    code, _, err = run(["sim", "--jobs-config", str(tmp_path / "bad.json"), "--in", str(inp),
                        "--out", "o.pcap"], capsys)
    assert code == 1 and "lacks 'workers'" in one_line_error(err)
    assert len(calls) == 3


def test_build_dispatch_and_report(monkeypatch, capsys, tmp_path):
    calls = []
    report = {"board": "ulx3s", "device": "LFE5U-85F",
              "resources": {"LUT4": {"used": 1234, "total": 83640}},
              "fmax_mhz": {"sync": 151.234}, "params": {"dtypes": ["fp32"]}}

    def build(params, board, outdir, fp_stages=None, ooc=False, *, jobs=None, baud=115200):
        calls.append((params, board, outdir, fp_stages, ooc))
        jobs_seen.append((jobs.to_dict() if jobs is not None else None, baud))
        return report
    jobs_seen = []
    fake_module(monkeypatch, "netagg.boards.build", build=build)
    code, out, err = run(["build", "--board", "ulx3s", "--json", str(tmp_path / "r.json"),
                          "--fp-stages", "4"], capsys)
    assert code == 0, err
    assert calls == [(Params(), "ulx3s", os.path.join("build", "ulx3s"), 4, False)]
    assert "resources.LUT4.used" in out and "1234" in out and "151.23" in out
    assert json.loads((tmp_path / "r.json").read_text()) == report
    code, out, err = run(["build", "--board", "ooc-ecp5", "--outdir", "b", "--lanes", "2"],
                         capsys)
    assert code == 0 and calls[-1] == (Params(lanes=2), "ooc-ecp5", "b", None, True)
    assert jobs_seen == [(None, 115200)] * 2
    # A job table for the bridge boards, checked against the build parameters first.
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps(JOBS))
    code, out, err = run(["build", "--board", "icebreaker", "--jobs-config", str(jobs),
                          "--baud", "9600"], capsys)
    assert code == 0, err
    assert jobs_seen[-1] == (JobTable.from_dict(JOBS, Params()).to_dict(), 9600)
    (tmp_path / "bad.json").write_text('{"jobs": [{"id": 9, "workers": 2, "slot_base": 0, '
                                       '"slots": 1}]}')
    code, _, err = run(["build", "--board", "ulx3s", "--jobs-config",
                        str(tmp_path / "bad.json")], capsys)
    assert code == 1 and len(calls) == 3 and "9" in one_line_error(err)
