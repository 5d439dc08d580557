"""The Ethernet switch's generated Verilog at its GMII pins under cocotb with
cocotbext-eth models (sim/cocotb/test_eth_run.py, netagg.sim.eth_harness),
against the front-end model: both ports at once back to back with the
minimum gap, every MAC drop reason, ARP and ICMP, receive-buffer overflow
under a burst of large pings, and ``netagg sim --frontend ethernet``
against ``netagg model --frontend ethernet`` (cli.md's equivalence rule).

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from pathlib import Path

import pytest
from test_eth_switch import JOBS, PARAMS, SW, port_traffic, split

from netagg import cli, pcap
from netagg import frames as fr
from netagg.jobs import JobTable
from netagg.sim import eth_harness
from netagg.sim.eth_model import FrontEnd

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"
pytestmark = pytest.mark.cocotb


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def test_pins_two_ports_against_model():
    rng = random.Random(SEED)
    wires = [port_traffic(rng, 0, 30, SEED), port_traffic(rng, 1, 30, SEED + 1)]
    for p, ws in enumerate(wires):          # every drop reason at least once per port
        runt = rng.randbytes(50)
        bad = fr.with_fcs(rng.randbytes(70))
        for at, w in ((3, fr.with_fcs(rng.randbytes(1600))), (7, runt + fr.fcs(runt)),
                      (11, bad[:-1] + bytes([bad[-1] ^ 0x40]))):
            ws.insert(at + p, w)
    jobs = JobTable.from_dict(JOBS, PARAMS)
    run = eth_harness.run_frames(PARAMS, jobs, wires, root=BUILD)
    out = defaultdict(list)
    for port, wire, _t, er in run["frames"]:
        assert not er and fr.fcs_ok(wire)
        out[port].append(wire[:-4])
    fe = FrontEnd(PARAMS, jobs)
    model = defaultdict(list)
    for port in (0, 1):
        for w in wires[port]:
            for p, f in fe.receive(port, w):
                model[p].append(f)
    results, replies = split(out)
    exp_results, exp_replies = split(model)
    assert exp_results and exp_replies
    assert results == exp_results
    assert replies == exp_replies
    stats = fe.stats()
    got = eth_harness.stats_of(run["counters"], 2, run["cycles"])
    assert {k: v for k, v in got.items() if k != "cycles"} == stats
    for reason in ("drop_fcs", "drop_runt", "drop_too_long"):
        assert stats[f"eth0_{reason}"] > 0 and stats[f"eth1_{reason}"] > 0, reason


def test_overflow_under_a_ping_burst():
    rng = random.Random(SEED)
    host_mac, host_ip = bytes.fromhex("020000000077"), bytes([192, 168, 7, 77])
    reqs = [fr.build_echo_request(host_mac, host_ip, SW.mac, SW.ip, 7, seq, rng.randbytes(1400))
            for seq in range(12)]
    wires = [[fr.with_fcs(r) for r in reqs], []]
    jobs = JobTable.from_dict(JOBS, PARAMS)
    run = eth_harness.run_frames(PARAMS, jobs, wires, root=BUILD)
    answered = set()
    for port, wire, _t, _er in run["frames"]:
        assert port == 0 and fr.fcs_ok(wire)
        answered.add(int.from_bytes(wire[40:42], "big"))
    fe = FrontEnd(PARAMS, jobs)
    expected = []
    for seq, w in enumerate(wires[0]):
        expected += [f for _, f in fe.receive(0, w, overflow=seq not in answered)]
    assert [w[:-4] for _, w, _, _ in run["frames"]] == expected
    got = eth_harness.stats_of(run["counters"], 2, run["cycles"])
    assert {k: v for k, v in got.items() if k != "cycles"} == fe.stats()
    assert 0 < got["eth0_drop_overflow"] < len(reqs)


def _by_kind(frames):
    results, replies = defaultdict(list), []
    for f in frames:
        if f[12:14] == b"\x08\x00" and f[23] == 17:
            h = f[42:58]
            results[(h[2], h[4:6], h[1] & 1, h[6:8])].append(f)
        else:
            replies.append(f)
    return dict(results), replies


def test_cli_sim_frontend_ethernet(tmp_path, monkeypatch):
    import test_eth_model as tm
    monkeypatch.setenv("NETAGG_BUILD_CACHE", str(BUILD))
    frames = tm._traffic(40, SEED)
    frames.append(bytes(1600))
    frames.append(fr.build_arp_request(bytes(6), bytes(4), bytes([192, 168, 7, 1]))[:42])
    in_path, jobs_path = tmp_path / "in.pcap", tmp_path / "jobs.json"
    pcap.write(in_path, [pcap.Record(f, 1000 * i) for i, f in enumerate(frames)])
    jobs_path.write_text(json.dumps(tm.JOBS.to_dict()))
    common = ["--workers", "4", "--slots", "8", "--elements", "8", "--lanes", "4",
              "--jobs", "2", "--switch-mac", "02:aa:bb:cc:dd:ee", "--switch-ip", "192.168.7.1",
              "--jobs-config", str(jobs_path), "--in", str(in_path), "--frontend", "ethernet"]
    outs = {}
    for cmd in ("model", "sim"):
        o, s = tmp_path / f"{cmd}.pcap", tmp_path / f"{cmd}.json"
        assert cli.main([cmd] + common + ["--out", str(o), "--stats", str(s)]) == 0
        outs[cmd] = ([r.data for r in pcap.read(o)], json.loads(s.read_text()))
    (mf, ms), (sf, ss) = outs["model"], outs["sim"]
    assert _by_kind(sf) == _by_kind(mf)
    assert ss.pop("cycles") > 0
    assert ss == ms
    assert ms["eth0_arp_replies"] + ms["eth0_icmp_replies"] > 0
