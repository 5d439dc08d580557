"""Ethernet / IPv4 / UDP framing: round trip, the built header checked field
by field and by an independent checksum, every kind of frame that is not a
netagg message, and the address book."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netagg.frames import (
    AddressBook,
    Endpoint,
    build_frame,
    ipv4_checksum,
    parse,
)

PORT = 42662
W0 = Endpoint(bytes.fromhex("020000000001"), bytes([10, 0, 0, 1]), 5000)
SW = Endpoint(bytes.fromhex("02000000a6a6"), bytes([10, 166, 166, 1]), PORT)
PAYLOAD = bytes(range(24))


def checksum_ok(ip_header: bytes) -> bool:
    """RFC 1071 check, written independently: the one's-complement sum of all
    16-bit words, checksum included, is 0xFFFF."""
    s = 0
    for i in range(0, len(ip_header), 2):
        s += (ip_header[i] << 8) | ip_header[i + 1]
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def test_build_fields():
    f = build_frame(PAYLOAD, SW, W0)
    assert f[0:6] == W0.mac and f[6:12] == SW.mac and f[12:14] == b"\x08\x00"
    ip = f[14:34]
    assert ip[0] == 0x45 and ip[1] == 0
    assert int.from_bytes(ip[2:4], "big") == 20 + 8 + len(PAYLOAD)
    assert ip[4:6] == b"\0\0"                  # id 0
    assert ip[6:8] == b"\x40\x00"              # DF, offset 0
    assert ip[8] == 64 and ip[9] == 17
    assert ip[12:16] == SW.ip and ip[16:20] == W0.ip
    assert checksum_ok(ip)
    udp = f[34:42]
    assert struct.unpack(">HHHH", udp) == (PORT, 5000, 8 + len(PAYLOAD), 0)
    assert f[42:] == PAYLOAD and len(f) == 42 + len(PAYLOAD)


def test_known_checksum():
    # The worked example of the Wikipedia IPv4 checksum article.
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert ipv4_checksum(header) == 0xB861


@given(st.binary(max_size=300), st.integers(0, 0xFFFF), st.binary(min_size=6, max_size=6),
       st.binary(min_size=4, max_size=4))
def test_round_trip(payload, sport, mac, ip):
    src = Endpoint(mac, ip, sport)
    f = build_frame(payload, src, SW)
    assert len(f) >= 60
    assert checksum_ok(f[14:34])
    d = parse(f, PORT)
    assert d is not None
    assert d.payload == payload and d.src == src and d.dst == SW


def test_padding_and_trailing_bytes_are_not_payload():
    short = build_frame(b"abc", W0, SW)
    assert len(short) == 60                                   # padded
    assert parse(short, PORT).payload == b"abc"
    assert parse(build_frame(PAYLOAD, W0, SW) + b"\xde\xad\xbe\xef", PORT).payload == PAYLOAD


def mutate(frame: bytes, at: int, value: bytes, fix_checksum=True) -> bytes:
    f = bytearray(frame)
    f[at:at + len(value)] = value
    if fix_checksum:
        f[24:26] = b"\0\0"
        f[24:26] = ipv4_checksum(bytes(f[14:34])).to_bytes(2, "big")
    return bytes(f)


GOOD = build_frame(PAYLOAD, W0, SW)
IGNORED = {
    "empty": b"",
    "ethernet only": GOOD[:14],
    "truncated udp header": GOOD[:40],
    "truncated payload": GOOD[:-1],
    "arp": mutate(GOOD, 12, b"\x08\x06"),
    "ipv6 ethertype": mutate(GOOD, 12, b"\x86\xdd"),
    "vlan tag": GOOD[:12] + b"\x81\x00\x00\x01" + GOOD[12:],
    "ip version 6": mutate(GOOD, 14, b"\x65"),
    "ip options (ihl 6)": mutate(GOOD, 14, b"\x46"),
    "tcp": mutate(GOOD, 23, b"\x06"),
    "more fragments": mutate(GOOD, 20, b"\x20\x00"),
    "fragment offset": mutate(GOOD, 20, b"\x00\x10"),
    "wrong port": build_frame(PAYLOAD, W0, Endpoint(SW.mac, SW.ip, PORT + 1)),
    "udp length too long": mutate(GOOD, 38, (8 + len(PAYLOAD) + 1).to_bytes(2, "big")),
    "udp length too short": mutate(GOOD, 38, (8 + len(PAYLOAD) - 1).to_bytes(2, "big")),
    "udp length below 8": mutate(GOOD, 38, b"\x00\x07"),
    "ip length past frame": mutate(GOOD, 16, (28 + len(PAYLOAD) + 4).to_bytes(2, "big")),
    "ip length below headers": mutate(GOOD, 16, b"\x00\x1b"),
}


@pytest.mark.parametrize("name", list(IGNORED))
def test_not_a_netagg_message(name):
    assert parse(IGNORED[name], PORT) is None


def test_accepted_variants():
    # Checksums are not verified; DF clear is fine; another port if configured.
    assert parse(mutate(GOOD, 24, b"\x12\x34", fix_checksum=False), PORT).payload == PAYLOAD
    assert parse(mutate(GOOD, 40, b"\xab\xcd"), PORT).payload == PAYLOAD
    assert parse(mutate(GOOD, 20, b"\x00\x00"), PORT).payload == PAYLOAD
    assert parse(GOOD, PORT + 1) is None
    other = build_frame(PAYLOAD, W0, Endpoint(SW.mac, SW.ip, 9999))
    assert parse(other, 9999).payload == PAYLOAD
    # port None: any destination port (a RESULT frame to a worker's port)
    result = parse(build_frame(PAYLOAD, SW, W0), None)
    assert (result.payload, result.src, result.dst) == (PAYLOAD, SW, W0)
    assert parse(IGNORED[next(iter(IGNORED))], None) is None
    # An empty UDP payload is a (malformed) netagg message, not ignored.
    assert parse(build_frame(b"", W0, SW), PORT).payload == b""


def test_endpoint_checks_and_str():
    with pytest.raises(ValueError):
        Endpoint(b"\0" * 5, b"\0" * 4, 1)
    with pytest.raises(ValueError):
        Endpoint(b"\0" * 6, b"\0" * 4, 70000)
    e = Endpoint.from_strings("02:00:00:00:00:01", "10.0.0.1", 5000)
    assert e == W0 and str(e) == "02:00:00:00:00:01/10.0.0.1:5000"


def test_address_book_as_of_message():
    a = Endpoint(bytes(6), bytes([10, 0, 0, 1]), 1)
    b = Endpoint(bytes(6), bytes([10, 0, 0, 2]), 2)
    c = Endpoint(bytes(6), bytes([10, 0, 0, 3]), 3)
    book = AddressBook()
    book.note(3, 0, 1, a)
    book.note(5, 1, 1, c)           # another job, same worker rank
    book.note(7, 0, 1, b)
    book.note(9, 0, 1, b)
    with pytest.raises(KeyError):
        book.lookup(2, 0, 1)
    with pytest.raises(KeyError):
        book.lookup(10, 0, 2)
    assert [book.lookup(s, 0, 1) for s in (3, 4, 6, 7, 8, 100)] == [a, a, a, b, b, b]
    assert book.lookup(5, 1, 1) == c
    with pytest.raises(KeyError):
        book.lookup(4, 1, 1)
    with pytest.raises(ValueError):
        book.note(8, 0, 0, a)       # out of order
    book.forget_before(8)
    assert book.lookup(8, 0, 1) == b and book.lookup(9, 1, 1) == c
    book.note(9, 0, 1, a)           # same message noted again: the last note wins
    assert book.lookup(9, 0, 1) == a
