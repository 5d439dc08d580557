"""The UDP control plane of the Ethernet switch (netagg.hdl.eth.control,
format netagg.ctrlproto): the model twin (netagg.sim.eth_model.FrontEnd)
on its own, then the generated Verilog at its GMII pins under cocotb
against it bit-exactly (every reply frame, every RESULT, every counter):
good requests (reads of every register kind, writes, the job table
loaded at run time and then used by netagg traffic), every malformed kind,
wrong keys, datagrams for another address; and ``netagg sim --frontend
ethernet --ctrl-key`` against ``netagg model`` on a pcap whose control
requests are the bytes ``netagg ctl load-jobs`` sends (recorded from
:class:`netagg.host.ctl.CtlClient` talking to the model twin on loopback).

Seed: NETAGG_CTRL_SEED (default 5), printed."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from test_eth_switch import JOBS, PARAMS, SW, port_traffic

from netagg import cli, pcap, regmap
from netagg import ctrlproto as cp
from netagg import frames as fr
from netagg.frames import Endpoint
from netagg.host.ctl import CtlClient
from netagg.jobs import JobTable
from netagg.sim.eth_model import FrontEnd
from netagg.wire import COUNTERS, Header

SEED = int(os.environ.get("NETAGG_CTRL_SEED", "5"))
BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"
KEY = 0x0123456789ABCDEF
CTRL = Endpoint(SW.mac, SW.ip, cp.DEFAULT_CTRL_PORT)
HOST = Endpoint(bytes.fromhex("020000000099"), bytes([192, 168, 7, 99]), 40000)
ONLY_JOB0 = {"jobs": [JOBS["jobs"][0]]}
CHECK_SEQ = 0xBEEF


def setup_module():
    print(f"NETAGG_CTRL_SEED={SEED}")


def request(accesses, *, seq=1, key=KEY, src=HOST, dst=CTRL) -> bytes:
    return fr.build_frame(cp.encode_request(seq, key, accesses), src, dst)


MALFORMED = ("short", "ver", "type", "n0", "n_big", "length", "op", "acc_rsvd", "rsvd",
             "empty")


def malformed(rng, seq, kind=None) -> tuple[str, bytes]:
    """One malformed request payload of ``kind`` (default: a random one)."""
    good = bytearray(cp.encode_request(seq, KEY, [cp.read(cp.INFO_BASE), cp.read(0)]))
    kind = kind or rng.choice(MALFORMED)
    if kind == "short":
        good = good[:rng.randrange(1, cp.HEADER_BYTES)]
    elif kind == "ver":
        good[0] = rng.choice([0, 2, 255])
    elif kind == "type":
        good[1] = rng.choice([cp.REPLY, 7])
    elif kind == "n0":
        good[12:14] = b"\0\0"
    elif kind == "n_big":
        good[12:14] = (cp.MAX_ACCESSES + 1).to_bytes(2, "big")
    elif kind == "length":
        good = good + bytes(rng.choice([1, 7, 8])) if rng.random() < 0.5 else good[:-1]
    elif kind == "op":
        good[cp.HEADER_BYTES + cp.ACCESS_BYTES * rng.randrange(2)] = rng.choice([2, 128])
    elif kind == "acc_rsvd":
        good[cp.HEADER_BYTES + cp.ACCESS_BYTES * rng.randrange(2) + 1] = 1
    elif kind == "rsvd":
        good[14 + rng.randrange(2)] = rng.randrange(1, 256)
    else:
        good = bytearray()
    with pytest.raises(cp.CtrlError) as e:
        cp.decode_request(bytes(good), KEY)
    assert e.value.reason == "malformed", kind
    return kind, bytes(good)


def safe_reads(rng, k) -> list[cp.Access]:
    """Reads whose values do not depend on timing: job registers (and past
    them), core counters but ``stall``, INFO, SERVE, unmapped addresses."""
    J = PARAMS.jobs
    pool = ([regmap.JOB_BASE + a for a in range(regmap.JOB_REGS * J + 4)]
            + [regmap.COUNTER_BASE + i for i in range(len(COUNTERS))]
            + [cp.INFO_BASE + i for i in range(len(cp.INFO_FIELDS) + 1)]
            + [cp.SERVE_BASE + i for i in range(len(cp.SERVE_COUNTERS))]
            + [0x0400, 0x1234, 0x7FFF, 0xC000, 0xE000, 0xFFFF])
    return [cp.read(rng.choice(pool)) for _ in range(k)]


def harmless_writes(rng, k) -> list[cp.Access]:
    """Writes to read-only and unmapped registers (they change nothing)."""
    pool = ([regmap.COUNTER_BASE + i for i in range(len(regmap.CORE_COUNTERS))]
            + [cp.INFO_BASE + i for i in range(len(cp.INFO_FIELDS))]
            + [regmap.job_addr(0, regmap.JOB_REGS - 1), regmap.JOB_REGS * PARAMS.jobs,
               regmap.eth_counter_addr(0, "ignored"), 0x4321])
    return [cp.write(rng.choice(pool), rng.getrandbits(32)) for _ in range(k)]


def final_read() -> list[cp.Access]:
    """Every counter but ``stall``, as the last request of a run."""
    addrs = [regmap.COUNTER_BASE + i for i in range(len(COUNTERS))]
    addrs += [regmap.eth_counter_addr(p, n) for p in range(2) for n in regmap.ETH_COUNTERS]
    addrs += [cp.CTRL_BASE + i for i in range(len(cp.CTRL_COUNTERS))]
    return [cp.read(a) for a in addrs]


def port0_traffic(rng, n):
    """Port 0's wire frames: job 0 traffic with control requests between the
    messages, a wrong-key attempt to disable job 0, the job table loaded
    (job 1 enabled) and job 1 traffic, a final read of every counter."""
    seq = rng.getrandbits(16)
    ctrl = []

    def nxt():
        nonlocal seq
        seq = (seq + 1) & 0xFFFF
        if seq == CHECK_SEQ:
            seq += 1
        return seq

    for _ in range(n // 2):
        r = rng.random()
        if r < 0.4:
            acc = safe_reads(rng, rng.randrange(1, 12))
            if rng.random() < 0.3:
                acc += harmless_writes(rng, rng.randrange(1, 4))
                rng.shuffle(acc)
            ctrl.append(request(acc, seq=nxt()))
        elif r < 0.7:
            ctrl.append(fr.build_frame(malformed(rng, nxt())[1], HOST, CTRL))
        elif r < 0.85:
            bad_key = KEY ^ (1 << rng.randrange(64))
            ctrl.append(request(safe_reads(rng, 2), seq=nxt(), key=bad_key))
        else:                      # for another host, or the control port of none
            other = Endpoint(SW.mac, bytes([192, 168, 7, 2]), cp.DEFAULT_CTRL_PORT)
            ctrl.append(request(safe_reads(rng, 1), seq=nxt(), dst=other))
    ctrl += [fr.build_frame(malformed(rng, nxt(), kind)[1], HOST, CTRL) for kind in MALFORMED]
    ctrl.append(request(safe_reads(rng, 2), seq=nxt(), key=KEY ^ 1 << 40))
    wires = port_traffic(rng, 0, n, SEED)
    for c in ctrl:
        wires.insert(rng.randrange(len(wires) + 1), fr.with_fcs(c))
    # A wrong key cannot disable job 0 (its traffic goes on)...
    ctrl0 = regmap.job_addr(0, regmap.JOB_CTRL)
    wires.append(fr.with_fcs(request([cp.write(ctrl0, 0)], seq=nxt(), key=KEY ^ 1)))
    wires.append(fr.with_fcs(request([cp.read(ctrl0)], seq=CHECK_SEQ)))
    wires += port_traffic(rng, 0, 6, SEED + 2)
    # ... the right one loads the table (job 1 enabled), the most accesses at once.
    writes = [cp.write(a, v) for a, v in regmap.job_writes(JobTable.from_dict(JOBS, PARAMS))]
    big = writes + safe_reads(rng, cp.MAX_ACCESSES - len(writes))
    wires.append(fr.with_fcs(request(big, seq=nxt())))
    wires += port_traffic(rng, 1, n // 2, SEED + 3)
    wires.append(fr.with_fcs(request(final_read(), seq=nxt())))
    return wires


def port1_traffic(rng):
    """Port 1: INFO reads (answered on port 1) and a wrong key."""
    src = Endpoint(bytes.fromhex("020000000198"), bytes([192, 168, 7, 98]), 40001)
    info = [cp.read(cp.INFO_BASE + i) for i in range(len(cp.INFO_FIELDS))]
    return [fr.with_fcs(request(info, seq=7, src=src)),
            fr.with_fcs(request(info, seq=8, src=src, key=KEY + 1)),
            fr.with_fcs(request(info[:3], seq=9, src=src))]


def is_ctrl_reply(f: bytes) -> bool:
    d = fr.parse(f, None)
    return d is not None and d.src.ip == SW.ip and d.src.port == cp.DEFAULT_CTRL_PORT


def by_kind(frames_by_port):
    """Per port: control replies in order; RESULTs grouped by (job, slot,
    ver, worker) in order; other replies in order."""
    out = {}
    for port, frames in frames_by_port.items():
        ctrl, results, other = [], defaultdict(list), []
        for f in frames:
            if is_ctrl_reply(f):
                ctrl.append(f)
            elif f[12:14] == b"\x08\x00" and f[23] == 17:
                h = Header.unpack(f[42:58])
                results[(h.job, h.slot, h.ver, h.worker)].append(f)
            else:
                other.append(f)
        out[port] = (ctrl, dict(results), other)
    return out


def model_run(jobs, wires_by_port):
    fe = FrontEnd(PARAMS, jobs, ctrl_key=KEY)
    out = {p: [] for p in range(len(wires_by_port))}
    for port in reversed(range(len(wires_by_port))):   # port 1's few requests first
        for w in wires_by_port[port]:
            for p, f in fe.receive(port, w):
                out[p].append(f)
    return out, fe


# -- the model twin ------------------------------------------------------------------

def test_model_answers_and_counts():
    rng = random.Random(SEED)
    fe = FrontEnd(PARAMS, JobTable.from_dict(ONLY_JOB0, PARAMS), ctrl_key=KEY)
    acc = [cp.read(cp.INFO_BASE + i) for i in range(len(cp.INFO_FIELDS))]
    (port, reply), = fe.receive(1, fr.with_fcs(request(acc, seq=77)))
    assert port == 1
    d = fr.parse(reply, None)
    assert (d.src, d.dst) == (CTRL, HOST)
    seq, got = cp.decode_reply(d.payload, KEY)
    assert seq == 77
    assert [a.value for a in got] == cp.info_values(PARAMS, cp.FRONTEND_ETHERNET)
    assert cp.params_from_info([a.value for a in got]).elements == PARAMS.elements
    # A write reads back what the register holds; read-only ones are unchanged.
    w = [cp.write(regmap.job_addr(1, regmap.JOB_NSLOTS), 0xFFFFFFFF),
         cp.write(regmap.COUNTER_BASE, 5), cp.read(cp.CTRL_BASE)]
    (_, reply), = fe.receive(0, fr.with_fcs(request(w, seq=78)))
    _, got = cp.decode_reply(fr.parse(reply, None).payload, KEY)
    assert [a.value for a in got] == [(1 << regmap.JOB_NSLOTS_BITS) - 1, 0, 1]
    kinds = set()
    for i in range(40):
        kind, payload = malformed(rng, i)
        kinds.add(kind)
        assert fe.receive(0, fr.with_fcs(fr.build_frame(payload, HOST, CTRL))) == []
    assert fe.receive(0, fr.with_fcs(request(acc, key=KEY ^ 1 << 63))) == []
    st = fe.stats()
    assert (st["ctrl_ok"], st["ctrl_malformed"], st["ctrl_bad_key"]) == (2, 40, 1)
    assert st["ignored"] == 0 and len(kinds) > 5
    assert st["eth0_rx"] == 42 and st["eth0_tx"] == 1 and st["eth1_tx"] == 1


def test_model_without_key_ignores_and_checks_ports():
    fe = FrontEnd(PARAMS, JobTable.from_dict(JOBS, PARAMS))
    assert fe.receive(0, fr.with_fcs(request([cp.read(cp.INFO_BASE)]))) == []
    assert fe.stats()["ignored"] == 1 and "ctrl_ok" not in fe.stats()
    with pytest.raises(ValueError):
        FrontEnd(PARAMS, JobTable.from_dict(JOBS, PARAMS), ctrl_key=KEY, ctrl_port=PARAMS.port)


def test_model_loaded_jobs_take_traffic():
    rng = random.Random(SEED)
    jobs = JobTable.from_dict(ONLY_JOB0, PARAMS)
    job1 = port_traffic(rng, 1, 12, SEED)
    fe = FrontEnd(PARAMS, jobs, ctrl_key=KEY)
    assert not any(f[23] == 17 for w in job1 for _, f in fe.receive(0, w))
    assert fe.stats()["drop_bad_job"] > 0
    writes = [cp.write(a, v) for a, v in regmap.job_writes(JobTable.from_dict(JOBS, PARAMS))]
    fe.receive(0, fr.with_fcs(request(writes)))
    fe2 = FrontEnd(PARAMS, JobTable.from_dict(JOBS, PARAMS))
    for w in job1:
        assert fe.receive(0, w) == fe2.receive(0, w)


def test_cli_ctrl_key_errors(tmp_path, capsys):
    in_path = tmp_path / "in.pcap"
    pcap.write(in_path, [])
    common = ["model", "--in", str(in_path), "--out", str(tmp_path / "o.pcap")]
    assert cli.main(common + ["--ctrl-key", "12"]) == 1          # stream front end
    assert cli.main(common + ["--frontend", "ethernet", "--ctrl-key", "xyz"]) == 1
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps(JOBS))
    assert cli.main(common + ["--frontend", "ethernet", "--ctrl-port", "5",
                              "--jobs-config", str(jobs)]) == 1     # a port, no key
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("netagg: error: ") for e in err)
    assert cli.main(common + ["--frontend", "ethernet"]) == 2     # no jobs, no key
    assert "usage:" in capsys.readouterr().err
    assert cli.main(common + ["--frontend", "ethernet", "--ctrl-key", "12"]) == 0


# -- the HDL against the model -----------------------------------------------------

@pytest.fixture(scope="module")
def pins_run():
    from netagg.sim import eth_harness
    rng = random.Random(SEED)
    wires = [port0_traffic(rng, 30), port1_traffic(rng)]
    jobs = JobTable.from_dict(ONLY_JOB0, PARAMS)
    run = eth_harness.run_frames(PARAMS, jobs, wires, root=BUILD, ctrl_key=KEY)
    out = defaultdict(list)
    for port, wire, _t, er in run["frames"]:
        assert not er and fr.fcs_ok(wire)
        out[port].append(wire[:-4])
    model, fe = model_run(jobs, wires)
    got = eth_harness.stats_of(run["counters"], 2, run["cycles"])
    return {"wires": wires, "out": dict(out), "model": model, "fe": fe, "stats": got}


@pytest.mark.cocotb
def test_pins_control_plane_against_model(pins_run):
    got, exp = by_kind(pins_run["out"]), by_kind(pins_run["model"])
    for port in (0, 1):
        ctrl, results, other = got.get(port, ([], {}, []))
        e_ctrl, e_results, e_other = exp[port]
        assert ctrl == e_ctrl, port
        assert results == e_results, port
        assert other == e_other, port
    stats = pins_run["fe"].stats()
    assert {k: v for k, v in pins_run["stats"].items() if k != "cycles"} == stats
    assert stats["ctrl_ok"] > 5 and stats["ctrl_bad_key"] > 2
    assert stats["ctrl_malformed"] >= len(MALFORMED)
    # job 1, loaded at run time, aggregated
    assert any(k[0] == 1 for k in exp[0][1])
    # the final read: every counter as the model has it after the last frame
    _, final = cp.decode_reply(fr.parse(exp[0][0][-1], None).payload, KEY)
    assert final[0].value == stats[COUNTERS[0]]


@pytest.mark.cocotb
def test_pins_wrong_key_changes_nothing(pins_run):
    """No reply to a request with a wrong key (the key check), and its write
    did not disable job 0: the job-0 traffic after it completes rounds."""
    seqs = set()
    for frames in pins_run["out"].values():
        for f in frames:
            if is_ctrl_reply(f):
                seq, _ = cp.decode_reply(fr.parse(f, None).payload, KEY)
                seqs.add(seq)
    wrong = set()
    for port, ws in enumerate(pins_run["wires"]):
        for w in ws:
            d = fr.parse(w[:-4], cp.DEFAULT_CTRL_PORT)
            if d is None or d.dst.ip != SW.ip:
                continue
            try:
                cp.decode_request(d.payload, KEY)
            except cp.CtrlError as e:
                if e.reason == "bad_key":
                    wrong.add((port, int.from_bytes(d.payload[2:4], "big")))
    assert wrong and not {s for _, s in wrong} & seqs
    assert pins_run["stats"]["ctrl_bad_key"] == len(wrong)
    # job 0's JOB_CTRL read right after the wrong-key write: still enabled
    replies = [cp.decode_reply(fr.parse(f, None).payload, KEY)
               for f in pins_run["out"][0] if is_ctrl_reply(f)]
    (check,) = [acc for seq, acc in replies if seq == CHECK_SEQ]
    assert check[0].value == regmap.job_ctrl_word(True, JOBS["jobs"][0]["workers"])
    assert len(replies[-2][1]) == cp.MAX_ACCESSES


# -- netagg ctl's requests through netagg sim --frontend ethernet ------------------

@contextlib.contextmanager
def twin_server(fe: FrontEnd):
    """A loopback UDP socket whose datagrams, framed from HOST to the
    switch, go into ``fe``'s port 0 and whose replies go back: yields (its
    address, the request frames received)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(0.2)
    frames, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                data, addr = srv.recvfrom(65536)
            except TimeoutError:
                continue
            frame = fr.build_frame(data, HOST, CTRL)
            frames.append(frame)
            for _, reply in fe.receive(0, fr.with_fcs(frame)):
                srv.sendto(fr.parse(reply, None).payload, addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname(), frames
    finally:
        stop.set()
        t.join(5)
        srv.close()


def record_ctl_load_jobs(jobs_path, fe: FrontEnd) -> list[bytes]:
    """The frames of every request :meth:`CtlClient.load_jobs` sends."""
    with twin_server(fe) as (addr, frames):
        with CtlClient(addr, KEY, timeout=5.0) as c:
            table = c.load_jobs(str(jobs_path))
    assert len([j for j in table if j.enabled]) == 2
    return list(frames)


def test_ctl_counters_of_the_model_twin():
    """``netagg ctl counters`` against the Ethernet switch's model: every
    core, control-plane and port counter."""
    rng = random.Random(SEED)
    fe = FrontEnd(PARAMS, JobTable.from_dict(JOBS, PARAMS), ctrl_key=KEY)
    for w in port_traffic(rng, 0, 10, SEED):
        fe.receive(0, w)
    with twin_server(fe) as (addr, _):
        with CtlClient(addr, KEY, timeout=5.0) as c:
            got = c.counters()
    stats = fe.stats()
    stats["ctrl_ok"] -= 1                     # the counters read itself: after its reads
    stats["eth0_tx"] -= 1                     # and its reply
    assert got.pop("stall") == 0
    assert got == {k: stats[k] for k in got}
    assert "eth0_rx" in got and "eth1_ignored" in got and got["rx"] > 0


@pytest.mark.cocotb
def test_cli_sim_loads_jobs_from_ctl(tmp_path, monkeypatch):
    monkeypatch.setenv("NETAGG_BUILD_CACHE", str(BUILD))
    rng = random.Random(SEED + 1)
    jobs_path = tmp_path / "jobs.json"
    jobs_path.write_text(json.dumps(JOBS))
    fe = FrontEnd(PARAMS, JobTable([], PARAMS), ctrl_key=KEY)
    frames = record_ctl_load_jobs(jobs_path, fe)
    assert len(frames) >= 3
    frames += [w[:-4] for w in port_traffic(rng, 0, 12, SEED + 4)]
    frames += [w[:-4] for w in port_traffic(rng, 1, 12, SEED + 5)]
    frames.append(request(safe_reads(rng, 20), seq=3))
    frames.append(fr.build_frame(malformed(rng, 4)[1], HOST, CTRL))
    frames.append(request(final_read(), seq=5))
    in_path = tmp_path / "in.pcap"
    pcap.write(in_path, [pcap.Record(f, 1000 * i) for i, f in enumerate(frames)])
    common = ["--workers", "4", "--slots", "8", "--elements", "8", "--lanes", "4",
              "--jobs", "2", "--switch-mac", "02:aa:bb:cc:dd:ee", "--switch-ip", "192.168.7.1",
              "--in", str(in_path), "--frontend", "ethernet", "--ctrl-key", f"{KEY:x}"]
    outs = {}
    for cmd in ("model", "sim"):
        o, s = tmp_path / f"{cmd}.pcap", tmp_path / f"{cmd}.json"
        assert cli.main([cmd] + common + ["--out", str(o), "--stats", str(s)]) == 0
        outs[cmd] = ({0: [r.data for r in pcap.read(o)]}, json.loads(s.read_text()))
    (mf, ms), (sf, ss) = outs["model"], outs["sim"]
    assert by_kind(sf) == by_kind(mf)
    ss.pop("cycles")
    assert ss == ms
    assert ms["results"] > 0 and ms["ctrl_ok"] >= 4 and ms["ctrl_malformed"] == 1
    assert ms["drop_bad_job"] == 0                       # the table was there in time


# -- the board ----------------------------------------------------------------------

def test_board_top_carries_the_control_plane():
    from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform

    from netagg.boards import registry
    top = registry.get("colorlight-5a75b").make_top(PARAMS, ctrl_key=KEY, ctrl_port=40500)
    plan = Colorlight_5A75B_R70Platform().prepare(top, name="t")
    assert "control" in plan.files["t.il"]
    assert top.summary()["control_plane"] == {"udp_port": 40500}
    with pytest.raises(ValueError):
        registry.get("ulx3s").make_top(PARAMS, ctrl_key=KEY)


def test_cli_build_ctrl_key_only_for_ethernet_boards(tmp_path, capsys):
    out = str(tmp_path / "b")
    assert cli.main(["build", "--board", "ulx3s", "--ctrl-key", "12", "--outdir", out]) == 1
    assert cli.main(["build", "--board", "colorlight-5a75b", "--ctrl-key", "12",
                     "--ctrl-port", str(PARAMS.port), "--outdir", out]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("netagg: error: ") for e in err)


# -- the component alone -------------------------------------------------------------

def test_unit_control_plane_backpressure_whole_datagrams():
    """ControlPlane in amaranth.sim with a register bus written in the test,
    ``quiet`` toggling and random backpressure on both reply outputs: each
    reply equals the model's bytes (ctrlproto + frames.build_frame), on the
    request's port, in order; the bus sees exactly the good requests' writes
    (a bad datagram never makes any access); counters exact."""
    from amaranth.hdl import Module, Mux, Signal
    from amaranth.sim import Simulator

    from netagg.hdl.eth.control import ControlPlane

    rng = random.Random(SEED + 9)
    cpl = ControlPlane(PARAMS, key=KEY, ports=2)
    top = Module()
    top.submodules.cp = cpl
    ext = Signal(32)
    top.d.comb += [cpl.local_addr.eq(cpl.bus_addr),
                   cpl.bus_rdata.eq(Mux(cpl.local_hit, cpl.local_rdata, ext))]
    info = cp.info_values(PARAMS, cp.FRONTEND_ETHERNET)

    def ext_read(regs, a):
        return regs.get(a, (a * 2654435761) & 0xFFFFFFFF) if a < 0x100 or a >= 0x200 else 0

    reqs, expected, writes, n_acc, own_cycles = [], {0: [], 1: []}, [], [0], [0]
    regs = {}
    counters = dict.fromkeys(cp.CTRL_COUNTERS, 0)
    for i in range(24):
        port = rng.randrange(2)
        sender = Endpoint(rng.randbytes(6), rng.randbytes(4), rng.getrandbits(16))
        r = rng.random()
        if r < 0.25:
            payload = malformed(rng, i)[1]
            counters["ctrl_malformed"] += 1
        elif r < 0.4:
            payload = cp.encode_request(i, KEY ^ 1 << rng.randrange(64), safe_reads(rng, 3))
            counters["ctrl_bad_key"] += 1
        else:
            n = cp.MAX_ACCESSES if i == 5 else rng.randrange(1, 10)
            pool = [rng.randrange(16), rng.randrange(0x100, 0x200), cp.INFO_BASE + 2,
                    cp.CTRL_BASE + rng.randrange(3), cp.SERVE_BASE, rng.getrandbits(16)]
            acc = [cp.Access(rng.randrange(2), rng.choice(pool), rng.getrandbits(32))
                   for _ in range(n)]
            payload = cp.encode_request(i, KEY, acc)
            n_acc[0] += n
            out = []
            for a in acc:
                if a.op == cp.OP_WRITE:
                    writes.append((a.addr, a.value))
                    if a.addr < 16:
                        regs[a.addr] = a.value
                if cp.INFO_BASE <= a.addr < cp.INFO_BASE + len(info):
                    v = info[a.addr - cp.INFO_BASE]
                elif cp.CTRL_BASE <= a.addr < cp.CTRL_BASE + 3:
                    v = counters[cp.CTRL_COUNTERS[a.addr - cp.CTRL_BASE]]
                elif cp.SERVE_BASE <= a.addr < cp.SERVE_BASE + 3:
                    v = 0
                else:
                    v = ext_read(regs, a.addr)
                out.append(cp.Access(a.op, a.addr, v))
            counters["ctrl_ok"] += 1
            expected[port].append(fr.build_frame(cp.encode_reply(i, KEY, out), CTRL, sender))
        reqs.append((port, sender, payload))
    got, seen_writes = {0: [], 1: []}, []
    state = {"done": False}

    async def driver(ctx):
        for port, sender, payload in reqs:
            tee, req = cpl.tee[port], cpl.req[port]
            while ctx.get(cpl.busy[port]):
                await ctx.tick()
            for k, byte in enumerate(payload):
                ctx.set(tee.en, 1)
                ctx.set(tee.addr, k)
                ctx.set(tee.data, byte)
                await ctx.tick()
            ctx.set(tee.en, 0)
            ctx.set(req.valid, 1)
            ctx.set(req.payload.sender.mac, int.from_bytes(sender.mac, "big"))
            ctx.set(req.payload.sender.ip, int.from_bytes(sender.ip, "big"))
            ctx.set(req.payload.sender.port, sender.port)
            ctx.set(req.payload.length, len(payload))
            await ctx.tick()
            while not ctx.get(req.ready):
                await ctx.tick()
            ctx.set(req.valid, 0)
        while not ctx.get(cpl.idle):
            await ctx.tick()
        for _ in range(200):
            await ctx.tick()
        state["done"] = True

    async def bus(ctx):
        bregs = {}
        while not state["done"]:
            a, we, wd = ctx.get(cpl.bus_addr), ctx.get(cpl.bus_we), ctx.get(cpl.bus_wdata)
            own = ctx.get(cpl.bus_own)
            nxt = ext_read(bregs, a)
            own_cycles[0] += own
            if own and we:
                seen_writes.append((a, wd))
                if a < 16:
                    bregs[a] = wd
            await ctx.tick()
            ctx.set(ext, nxt)

    async def quiet(ctx):
        while not state["done"]:
            ctx.set(cpl.quiet, rng.random() < 0.9)
            for _ in range(rng.randrange(1, 40)):
                await ctx.tick()

    def sink(port):
        async def run(ctx):
            frame = []
            o = cpl.o[port]
            while not state["done"]:
                ctx.set(o.ready, rng.random() < 0.6)
                if ctx.get(o.valid) and ctx.get(o.ready):
                    frame.append(ctx.get(o.payload.data))
                    if ctx.get(o.payload.last):
                        got[port].append(bytes(frame))
                        frame = []
                await ctx.tick()
        return run

    sim = Simulator(top)
    sim.add_clock(8e-9)
    for tb in (driver, bus, quiet, sink(0), sink(1)):
        sim.add_testbench(tb)
    sim.run()
    assert got == expected
    assert seen_writes == writes
    assert own_cycles[0] == 17 * n_acc[0]        # the docstring's cycles per access
    assert sum(map(len, expected.values())) == counters["ctrl_ok"] > 5


def test_board_clock_domains_against_model():
    """The switch as the board builds it (receive MACs on the PHYs' clocks,
    8 ns and 8.3 ns, transmit on 8 ns, the core on 30 ns: 33.33 MHz; the
    board top's options: no message or RESULT queues) in amaranth.sim with the control plane:
    control replies, RESULTs and every counter as the model's."""
    from eth_tb import run_switch

    from netagg.boards.eth_top import switch_options

    rng = random.Random(SEED + 11)
    jobs = JobTable.from_dict(ONLY_JOB0, PARAMS)
    writes = [cp.write(a, v) for a, v in regmap.job_writes(JobTable.from_dict(JOBS, PARAMS))]
    w0 = port_traffic(rng, 0, 6, SEED)
    w0.insert(2, fr.with_fcs(request(safe_reads(rng, 5), seq=1)))
    w0.insert(4, fr.with_fcs(fr.build_frame(malformed(rng, 2)[1], HOST, CTRL)))
    w0 += [fr.with_fcs(request(writes, seq=3))] + port_traffic(rng, 1, 6, SEED + 1)
    w0.append(fr.with_fcs(request(final_read(), seq=4)))
    wires = [w0, port1_traffic(rng)]
    out, _, _ = run_switch(PARAMS, jobs, wires, max_cycles=200_000, quiet=1500,
                           clocks={"sync": 30e-9, "rx0": 8e-9, "rx1": 8.3e-9, "tx": 8e-9},
                           ctrl_key=KEY, **switch_options(PARAMS))
    model, fe = model_run(jobs, wires)
    assert by_kind(out) == by_kind(model)
    ctrl0 = by_kind(model)[0][0]
    assert len(ctrl0) == 3 and any(k[0] == 1 for k in by_kind(model)[0][1])
