# amaranth: UnusedElaboratable=no
"""The two-port EthernetSwitch (netagg.hdl.eth.switch) in amaranth.sim at its
GMII pins against the front-end model: netagg traffic on both ports at once
(back to back, minimum gap), ARP, ICMP, foreign frames and every MAC drop
reason; every RESULT frame bit-exact and on the right port, every reply, and
every core and front-end counter read through the control port.

Port 0 carries job 0 and port 1 job 1, so that the order in which the core
interleaves the two ports cannot change any result: the model may take the
ports one after the other.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random
from collections import defaultdict

import eth_tb

from netagg import frames as fr
from netagg.frames import Endpoint, build_frame
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.eth_model import FrontEnd
from netagg.sim.traffic import random_traffic
from netagg.wire import Header

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
N = int(os.environ.get("NETAGG_ETH_N", "24"))
PARAMS = Params(workers=4, slots=8, elements=8, lanes=4, jobs=2,
                switch_mac="02:aa:bb:cc:dd:ee", switch_ip="192.168.7.1")
JOBS = {"jobs": [{"id": 0, "workers": 3, "slot_base": 0, "slots": 4},
                 {"id": 1, "workers": 2, "slot_base": 4, "slots": 4}]}
SW = Endpoint(PARAMS.switch_mac_bytes, PARAMS.switch_ip_bytes, PARAMS.port)


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED} NETAGG_ETH_N={N}")


def port_traffic(rng, job, n, seed):
    only = JobTable.from_dict({"jobs": [JOBS["jobs"][job]]}, PARAMS)
    msgs = random_traffic(PARAMS, only, n, seed=seed, p_bad=0.0)
    wires = []
    for msg in msgs:
        w = msg[7]
        src = Endpoint(bytes([2, 0, 0, job, 0, w]), bytes([10, 0, job, w + 1]), 5000 + w)
        if rng.random() < 0.1:                       # the worker moves
            src = Endpoint(bytes([2, 0, 1, job, 0, w]), bytes([10, 1, job, w + 1]), 6000 + w)
        r = rng.random()
        if r < 0.08:
            wires.append(fr.with_fcs(fr.build_arp_request(src.mac, src.ip, SW.ip)))
        elif r < 0.16:
            wires.append(fr.with_fcs(fr.build_echo_request(
                src.mac, src.ip, SW.mac, SW.ip, rng.getrandbits(16), rng.getrandbits(16),
                rng.randbytes(rng.randrange(80)))))
        elif r < 0.2:
            wires.append(fr.with_fcs(rng.randbytes(rng.randrange(60, 100))))    # foreign
        elif r < 0.23:
            bad = fr.with_fcs(build_frame(msg, src, SW))
            wires.append(bad[:-1] + bytes([bad[-1] ^ 1]))                       # bad FCS
        elif r < 0.25:
            runt = rng.randbytes(rng.randrange(1, 60))
            wires.append(runt + fr.fcs(runt))
        elif r < 0.27:
            wires.append(fr.with_fcs(rng.randbytes(1515)))                      # too long
        elif r < 0.3:                       # a message far longer than a slot (bad length)
            wires.append(fr.with_fcs(build_frame(msg[:16] + rng.randbytes(1400), src, SW)))
        wires.append(fr.with_fcs(build_frame(msg, src, SW)))
    return wires


def key(frame):
    h = Header.unpack(frame[42:58])
    return (h.job, h.slot, h.ver, h.worker)


def split(frames_by_port):
    results, replies = defaultdict(list), defaultdict(list)
    for port, frames in frames_by_port.items():
        for f in frames:
            if f[12:14] == b"\x08\x00" and f[23] == 17:
                results[(port,) + key(f)].append(f)
            else:
                replies[port].append(f)
    return dict(results), dict(replies)


def run_switch(wires_by_port, *, max_cycles=400_000, clocks=None):
    return eth_tb.run_switch(PARAMS, JobTable.from_dict(JOBS, PARAMS), wires_by_port,
                             max_cycles=max_cycles, clocks=clocks)


def test_two_ports_against_model():
    check_against_model(N, SEED)


def test_separate_clock_domains():
    """Receive MACs on the PHYs' clocks (8 ns and 8.3 ns), transmit MACs on
    8 ns, the core on 7 ns: frames and events cross through the FIFOs."""
    check_against_model(N // 2, SEED + 7,
                        clocks={"sync": 7e-9, "rx0": 8e-9, "rx1": 8.3e-9, "tx": 8e-9})


def check_against_model(n, seed, clocks=None):
    rng = random.Random(seed)
    wires = {0: port_traffic(rng, 0, n, seed), 1: port_traffic(rng, 1, n, seed + 1)}
    out, counters, mons = run_switch(wires, clocks=clocks)
    fe = FrontEnd(PARAMS, JobTable.from_dict(JOBS, PARAMS))
    model_out = {0: [], 1: []}
    for port in (0, 1):
        for w in wires[port]:
            for p, f in fe.receive(port, w):
                model_out[p].append(f)
    results, replies = split(out)
    exp_results, exp_replies = split(model_out)
    assert exp_results and exp_replies
    assert results == exp_results
    assert replies == exp_replies
    stats = fe.stats()
    for name, value in counters.items():
        if name in stats:
            assert value == stats[name], name
    assert stats["ignored"] == counters["eth0_ignored"] + counters["eth1_ignored"]
    for p in (0, 1):
        assert all(gap is None or gap >= 12 for _, gap, _ in mons[p].frames)
