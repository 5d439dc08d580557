"""Classic pcap read (both byte orders, micro- and nanosecond timestamps) and
write; pcapng, other link types and damaged files refused with one line."""

from __future__ import annotations

import struct

import pytest

from netagg import pcap
from netagg.cli import main
from netagg.frames import Endpoint, build_frame
from netagg.params import Params, parse_ip, parse_mac
from netagg.pcap import PcapError, Record
from netagg.sim.message_model import make_contrib

FRAMES = [bytes(range(60)), b"\xff" * 1514, b"\x01\x02"]
TS = [(1_700_000_000, 123_456), (1_700_000_001, 0), (5, 999_999)]


def handmade(endian: str, nanos: bool, linktype: int = 1, frames=FRAMES, ts=TS) -> bytes:
    """A pcap file built field by field from the libpcap file format."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    blob = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 262144, linktype)
    for data, (sec, frac) in zip(frames, ts, strict=True):
        blob += struct.pack(endian + "IIII", sec, frac, len(data), len(data) + 4) + data
    return blob


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_read(endian, nanos, tmp_path):
    path = tmp_path / "in.pcap"
    path.write_bytes(handmade(endian, nanos))
    records = pcap.read(path)
    assert [r.data for r in records] == FRAMES
    scale = 1 if nanos else 1000
    assert [r.ts_ns for r in records] == [s * 10**9 + f * scale for s, f in TS]
    assert pcap.read_frames(path) == FRAMES


def test_write_format(tmp_path):
    path = tmp_path / "out.pcap"
    pcap.write(path, [Record(FRAMES[0], 1_700_000_000_123_456_789), FRAMES[1]])
    blob = path.read_bytes()
    assert struct.unpack("<IHHiIII", blob[:24]) == (0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    assert struct.unpack("<IIII", blob[24:40]) == (1_700_000_000, 123_456, 60, 60)
    assert blob[40:100] == FRAMES[0]
    assert struct.unpack("<IIII", blob[100:116]) == (0, 0, 1514, 1514)
    assert len(blob) == 116 + 1514
    records = pcap.read(path)
    assert [r.data for r in records] == FRAMES[:2]
    assert records[0].ts_ns == 1_700_000_000_123_456_000


def test_empty_file_round_trip(tmp_path):
    path = tmp_path / "empty.pcap"
    pcap.write(path, [])
    assert pcap.read(path) == []


BAD = {
    "pcapng": (bytes.fromhex("0a0d0d0a") + b"\0" * 40, "pcapng"),
    "not pcap": (b"GIF89a" + b"\0" * 30, "not a classic pcap"),
    "too short": (b"\xd4\xc3", "too short"),
    "short header": (handmade("<", False)[:20], "truncated pcap header"),
    "raw ip link type": (handmade("<", False, linktype=101), "link type 101 is not Ethernet"),
    "linux sll": (handmade(">", True, linktype=113), "link type 113"),
    "truncated record header": (handmade("<", False)[:24 + 8], "truncated record header"),
    "truncated frame": (handmade("<", False)[:-1], "frame 2 is truncated"),
    "version 1": (struct.pack("<IHHiIII", 0xA1B2C3D4, 1, 0, 0, 0, 65535, 1), "version 1.0"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_refused(name, tmp_path):
    blob, pattern = BAD[name]
    path = tmp_path / "bad.pcap"
    path.write_bytes(blob)
    with pytest.raises(PcapError, match=pattern) as info:
        pcap.read(path)
    assert "\n" not in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(PcapError, match="cannot read"):
        pcap.read(tmp_path / "missing.pcap")
    with pytest.raises(PcapError, match="cannot write"):
        pcap.write(tmp_path / "no" / "dir.pcap", [])


def test_model_timestamp_beyond_pcap(tmp_path, capsys):
    """A nanosecond record whose fraction carries it past 2^32 seconds is
    read, but cannot be written back to a microsecond pcap: netagg model
    says so in one line (exit 1), no traceback."""
    path, jobs = tmp_path / "in.pcap", tmp_path / "jobs.json"
    p = Params()
    switch = Endpoint(parse_mac(p.switch_mac), parse_ip(p.switch_ip), p.port)
    worker = Endpoint(bytes.fromhex("020000000001"), bytes([10, 0, 0, 1]), 5000)
    frame = build_frame(make_contrib(0, 0, 0, 0, [1, 2]), worker, switch)
    path.write_bytes(handmade("<", True, frames=[frame], ts=[(0xFFFFFFFF, 2 * 10**9)]))
    assert pcap.read(path)[0].ts_ns == (0xFFFFFFFF + 2) * 10**9
    jobs.write_text('{"jobs": [{"id": 0, "workers": 1, "slot_base": 0, "slots": 4}]}')
    assert main(["model", "--jobs-config", str(jobs), "--in", str(path),
                 "--out", str(tmp_path / "out.pcap")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("netagg: error: ") and "pcap record" in err and err.count("\n") == 1
