"""The Ethernet front end's frame-level model (netagg.sim.eth_model) and its
framing helpers (netagg.frames): FCS against a bitwise CRC written here, ARP
and ICMP replies field by field with independent checksums, every drop
reason, classification and RESULTs exactly as ``netagg model``'s, address
learning with the ingress port, and ``netagg model --frontend ethernet``.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import json
import os
import random
import struct

import pytest

from netagg import cli, pcap
from netagg import frames as fr
from netagg.frames import Endpoint, build_frame
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.regmap import ETH_COUNTERS, counter_addr, eth_counter_addr
from netagg.sim.eth_model import FrontEnd, run_frontend_model, wire_frame
from netagg.sim.frame_model import run_model_seq
from netagg.sim.message_model import make_contrib
from netagg.sim.traffic import random_traffic

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
PARAMS = Params(workers=4, slots=8, elements=8, lanes=4, jobs=2,
                switch_mac="02:aa:bb:cc:dd:ee", switch_ip="192.168.7.1")
JOBS = JobTable.from_dict({"jobs": [{"id": 0, "workers": 3, "slot_base": 0, "slots": 4},
                                    {"id": 1, "workers": 2, "slot_base": 4, "slots": 4}]},
                          PARAMS)
SW_MAC, SW_IP = bytes.fromhex("02aabbccddee"), bytes([192, 168, 7, 1])
SWITCH = Endpoint(SW_MAC, SW_IP, PARAMS.port)
HOST_MAC, HOST_IP = bytes.fromhex("020000000042"), bytes([192, 168, 7, 42])


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def crc32_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def ones_sum_ok(data: bytes) -> bool:
    if len(data) % 2:
        data += b"\0"
    s = sum((data[i] << 8) | data[i + 1] for i in range(0, len(data), 2))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def test_fcs():
    rng = random.Random(SEED)
    for n in (0, 1, 59, 60, 61, 1514):
        data = rng.randbytes(n)
        assert fr.fcs(data) == crc32_bitwise(data).to_bytes(4, "little")
        wire = fr.with_fcs(data)
        assert len(wire) == max(n, 60) + 4 and fr.fcs_ok(wire)
        bad = bytearray(wire)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        assert not fr.fcs_ok(bytes(bad))


def test_arp_reply_fields():
    req = fr.build_arp_request(HOST_MAC, HOST_IP, SW_IP)
    assert len(req) == 60 and req[:6] == b"\xff" * 6
    fe = FrontEnd(PARAMS, JOBS)
    out = fe.receive(1, fr.with_fcs(req))
    assert len(out) == 1 and out[0][0] == 1
    rep = out[0][1]
    assert len(rep) == 60
    assert rep[0:6] == HOST_MAC and rep[6:12] == SW_MAC and rep[12:14] == b"\x08\x06"
    htype, ptype, hlen, plen, oper, sha, spa, tha, tpa = struct.unpack(
        ">HHBBH6s4s6s4s", rep[14:42])
    assert (htype, ptype, hlen, plen, oper) == (1, 0x0800, 6, 4, 2)
    assert (sha, spa, tha, tpa) == (SW_MAC, SW_IP, HOST_MAC, HOST_IP)
    assert rep[42:] == bytes(18)
    assert fe.counters[1]["arp_replies"] == 1 and fe.counters[1]["tx"] == 1
    # Not for us, or not a request: ignored.
    other = fr.build_arp_request(HOST_MAC, HOST_IP, bytes([192, 168, 7, 2]))
    reply = bytearray(req)
    reply[21] = 2
    for frame in (other, bytes(reply)):
        assert fe.receive(0, fr.with_fcs(frame)) == []
    assert fe.ignored == 2 and fe.counters[0]["arp_replies"] == 0


@pytest.mark.parametrize("size", [0, 1, 17, 56, 1472])
def test_icmp_echo_reply(size):
    rng = random.Random(SEED + size)
    data = rng.randbytes(size)
    ident, seq = rng.getrandbits(16), rng.getrandbits(16)
    req = fr.build_echo_request(HOST_MAC, HOST_IP, SW_MAC, SW_IP, ident, seq, data)
    ip = req[14:34]
    assert ones_sum_ok(ip) and ones_sum_ok(req[34:34 + 8 + size])
    fe = FrontEnd(PARAMS, JOBS)
    out = fe.receive(0, fr.with_fcs(req))
    assert [p for p, _ in out] == [0]
    rep = out[0][1]
    assert len(rep) == max(60, 42 + size)
    assert rep[0:6] == HOST_MAC and rep[6:12] == SW_MAC and rep[12:14] == b"\x08\x00"
    rip = rep[14:34]
    ver_ihl, _tos, total, _id, frag, ttl, proto, _c, src, dst = struct.unpack(
        ">BBHHHBBH4s4s", rip)
    assert (ver_ihl, total, frag, ttl, proto, src, dst) == (
        0x45, 28 + size, 0x4000, 64, 1, SW_IP, HOST_IP)
    assert ones_sum_ok(rip)
    icmp = rep[34:34 + 8 + size]
    assert ones_sum_ok(icmp)
    assert icmp[0:2] == b"\0\0" and struct.unpack(">HH", icmp[4:8]) == (ident, seq)
    assert icmp[8:] == data
    assert fe.counters[0]["icmp_replies"] == 1


def test_icmp_not_answered():
    fe = FrontEnd(PARAMS, JOBS)
    req = fr.build_echo_request(HOST_MAC, HOST_IP, SW_MAC, SW_IP, 1, 2, b"abcdef")
    variants = []
    other = fr.build_echo_request(HOST_MAC, HOST_IP, SW_MAC, bytes([1, 2, 3, 4]), 1, 2, b"x")
    variants.append(other)
    bad_ip_csum = bytearray(req)
    bad_ip_csum[24] ^= 1
    variants.append(bytes(bad_ip_csum))
    bad_icmp_csum = bytearray(req)
    bad_icmp_csum[40] ^= 0x80
    variants.append(bytes(bad_icmp_csum))
    reply_type = bytearray(req)                         # an echo reply, checksum fixed
    reply_type[34] = 0
    reply_type[36:38] = b"\0\0"
    reply_type[36:38] = fr.inet_checksum(bytes(reply_type[34:34 + 14])).to_bytes(2, "big")
    variants.append(bytes(reply_type))
    frag = bytearray(req)
    frag[20] |= 0x20                                     # MF
    frag[24:26] = b"\0\0"
    frag[24:26] = fr.ipv4_checksum(bytes(frag[14:34])).to_bytes(2, "big")
    variants.append(bytes(frag))
    for v in variants:
        assert fe.receive(0, fr.with_fcs(v)) == []
    assert fe.ignored == len(variants)
    assert fe.counters[0]["icmp_replies"] == 0 and fe.counters[0]["tx"] == 0


def test_drop_reasons():
    rng = random.Random(SEED)
    fe = FrontEnd(PARAMS, JOBS)
    good = fr.with_fcs(fr.build_arp_request(HOST_MAC, HOST_IP, SW_IP))
    runt = rng.randbytes(59)
    cases = {
        "drop_runt": runt + fr.fcs(runt),
        "drop_too_long": fr.with_fcs(rng.randbytes(1515)),
        "drop_fcs": good[:-1] + bytes([good[-1] ^ 0x10]),
    }
    for reason, wire in cases.items():
        before = fe.stats()
        assert fe.receive(1, wire) == []
        after = fe.stats()
        changed = {k for k in after if after[k] != before[k]}
        assert changed == {"eth1_rx", f"eth1_{reason}"}
    before = fe.stats()
    assert fe.receive(1, good, overflow=True) == []
    assert fe.receive(1, good, rx_error=True) == []
    after = fe.stats()
    assert {k for k in after if after[k] != before[k]} == {
        "eth1_rx", "eth1_drop_overflow", "eth1_drop_fcs"}
    # The limits themselves are accepted: 64 and 1518 bytes with FCS.
    for n in (60, 1514):
        assert fe.receive(0, fr.with_fcs(bytes(n))) == []
    assert fe.counters[0]["rx"] == 2 and fe.ignored == 2


def _traffic(n, seed):
    rng = random.Random(seed)
    msgs = random_traffic(PARAMS, JOBS, n, seed=seed)
    frames = []
    for p in msgs:
        src = Endpoint(bytes([2, 0, 0, 0, p[2] & 0xFF, p[7]]), bytes([10, 0, p[2], p[7]]),
                       5000 + p[7])
        r = rng.random()
        if r < 0.05:
            frames.append(fr.build_arp_request(src.mac, src.ip, SW_IP))
        elif r < 0.1:
            frames.append(fr.build_echo_request(src.mac, src.ip, SW_MAC, SW_IP,
                                                rng.getrandbits(16), rng.getrandbits(16),
                                                rng.randbytes(rng.randrange(64))))
        elif r < 0.13:
            frames.append(rng.randbytes(rng.randrange(1, 100)))       # foreign
        frames.append(build_frame(p, src, SWITCH))
    return frames


def test_results_as_netagg_model():
    frames = _traffic(300, SEED)
    out, stats = run_frontend_model(PARAMS, JOBS, frames)
    ref, ref_stats = run_model_seq(PARAMS, JOBS, frames)
    results = [(seq, f) for seq, port, f in out if f[12:14] == b"\x08\x00" and f[23] == 17]
    assert results == ref
    assert all(port == 0 for _, port, _ in out)
    for k, v in ref_stats.items():
        if k != "ignored":
            assert stats[k] == v, k
    replies = stats["eth0_arp_replies"] + stats["eth0_icmp_replies"]
    assert replies > 0
    assert stats["ignored"] == ref_stats["ignored"] - replies
    assert stats["eth0_rx"] == len(frames)
    assert stats["eth0_tx"] == len(out)
    assert all(stats[f"eth1_{n}"] == 0 for n in ETH_COUNTERS)


def test_learning_with_ingress_port():
    fe = FrontEnd(PARAMS, JOBS)
    ep = [Endpoint(bytes([2, 0, 0, 0, 0, w]), bytes([10, 0, 0, w]), 6000 + w) for w in range(4)]
    moved = Endpoint(bytes([2, 0, 0, 0, 9, 9]), bytes([10, 0, 9, 9]), 7000)
    out = []
    # worker 1 first on port 0, its accepted retransmission-free contribution
    # is then superseded from another address on port 1 (slot 1).
    for slot, senders in ((0, [(0, 0), (1, 0), (2, 1)]), (1, [(0, 1), (1, 1), (2, 0)])):
        for w, port in senders:
            src = moved if (slot, w) == (1, 1) else ep[w]
            payload = make_contrib(0, slot, 0, w, [w + 1], count=1)
            out += fe.receive(port, wire_frame(build_frame(payload, src, SWITCH)))
    assert len(out) == 6
    first, second = out[:3], out[3:]
    assert [p for p, _ in first] == [0, 0, 1]
    assert [p for p, _ in second] == [1, 1, 0]
    dsts = [fr.parse(f, 6000) or fr.parse(f, 6001) or fr.parse(f, 6002) or fr.parse(f, 7000)
            for _, f in out]
    assert [d.dst for d in dsts] == [ep[0], ep[1], ep[2], ep[0], moved, ep[2]]
    assert all(d.src == SWITCH for d in dsts)
    # A retransmission request moves the worker; a dropped CONTRIB
    # (a duplicate in an open round) does not.
    again = make_contrib(0, 1, 0, 1, [2], count=1)
    out = fe.receive(0, wire_frame(build_frame(again, ep[3], SWITCH)))
    assert [p for p, _ in out] == [0] and fr.parse(out[0][1], 6003).dst == ep[3]
    new = make_contrib(0, 2, 0, 1, [2], count=1)
    assert fe.receive(1, wire_frame(build_frame(new, ep[1], SWITCH))) == []
    assert fe.receive(0, wire_frame(build_frame(new, ep[2], SWITCH))) == []
    assert fe.stats()["drop_duplicate"] == 1
    assert fe.learned[(0, 1)] == (ep[1], 1)


def test_counter_addresses():
    addrs = {eth_counter_addr(p, n) for p in range(2) for n in ETH_COUNTERS}
    assert len(addrs) == 2 * len(ETH_COUNTERS)
    assert counter_addr("eth1_drop_fcs") == eth_counter_addr(1, "drop_fcs")
    with pytest.raises(KeyError):
        counter_addr("eth0_nothing")


def test_cli_model_ethernet(tmp_path):
    frames = _traffic(120, SEED + 1)
    frames.append(bytes(1600))                              # too long on the wire
    in_path, out_path, stats_path = tmp_path / "in.pcap", tmp_path / "o.pcap", tmp_path / "s.json"
    jobs_path = tmp_path / "jobs.json"
    jobs_path.write_text(json.dumps(JOBS.to_dict()))
    pcap.write(in_path, [pcap.Record(f, 1000 * i) for i, f in enumerate(frames)])
    args = ["model", "--workers", "4", "--slots", "8", "--elements", "8", "--lanes", "4",
            "--jobs", "2", "--switch-mac", "02:aa:bb:cc:dd:ee", "--switch-ip", "192.168.7.1",
            "--jobs-config", str(jobs_path), "--in", str(in_path), "--out", str(out_path),
            "--stats", str(stats_path), "--frontend", "ethernet"]
    assert cli.main(args) == 0
    out, stats = run_frontend_model(PARAMS, JOBS, frames)
    assert [r.data for r in pcap.read(out_path)] == [f for _, _, f in out]
    written = json.loads(stats_path.read_text())
    assert written == stats and written["eth0_drop_too_long"] == 1
    # The default front end is today's model.
    assert cli.main(args[:-2]) == 0
    ref, _ = run_model_seq(PARAMS, JOBS, frames)
    assert [r.data for r in pcap.read(out_path)] == [f for _, f in ref]
