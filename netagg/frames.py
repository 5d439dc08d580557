"""Ethernet II / IPv4 / UDP framing of netagg messages (``docs/protocol.md``,
Framing), and the address book that tells where a worker's RESULTs go.

Pure Python.

Contract of :func:`parse`: a frame is a netagg message exactly when it is
Ethernet II with ethertype 0x0800 (no VLAN tag), IPv4 with version 4 and
IHL 5 (no options), not fragmented (MF clear, fragment offset 0; DF may be
set), protocol UDP, UDP destination port ``port``, and its lengths agree:
IPv4 total length = 20 + UDP length, UDP length >= 8, and the frame holds
at least 14 + IPv4 total length bytes. The message is the UDP payload as the
UDP length delimits it; bytes past the IPv4 datagram (Ethernet padding, a
frame check sequence) are ignored. Checksums are not verified (a UDP
checksum of 0 means none). Addresses other than the port are not checked.
"""

from __future__ import annotations

import bisect
import dataclasses
import ipaddress
import struct

ETH_HEADER = 14
IPV4_HEADER = 20
UDP_HEADER = 8
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
MIN_FRAME = 60          # Ethernet minimum without the FCS
TTL = 64
_DF = 0x4000


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """An (Ethernet MAC, IPv4 address, UDP port) triple; ``mac`` is 6 bytes,
    ``ip`` 4 bytes."""

    mac: bytes
    ip: bytes
    port: int

    def __post_init__(self):
        if len(self.mac) != 6 or len(self.ip) != 4 or not 0 <= self.port <= 0xFFFF:
            raise ValueError(f"invalid endpoint {self!r}")

    @classmethod
    def from_strings(cls, mac: str, ip: str, port: int) -> Endpoint:
        from netagg.params import parse_ip, parse_mac
        return cls(parse_mac(mac), parse_ip(ip), port)

    def __str__(self):
        return (f"{':'.join(f'{b:02x}' for b in self.mac)}/"
                f"{ipaddress.IPv4Address(self.ip)}:{self.port}")


@dataclasses.dataclass(frozen=True)
class Datagram:
    """A parsed netagg frame: sender, destination and the UDP payload."""

    src: Endpoint
    dst: Endpoint
    payload: bytes


def parse(frame: bytes, port: int | None) -> Datagram | None:
    """The netagg message a frame carries, or None if it carries none (the
    switch counts such a frame as ``ignored``). ``port``: the UDP
    destination port netagg messages are sent to (the switch's); None takes
    any (RESULT frames go to each worker's own port)."""
    frame = bytes(frame)
    if len(frame) < ETH_HEADER + IPV4_HEADER + UDP_HEADER:
        return None
    dst_mac, src_mac, ethertype = frame[0:6], frame[6:12], int.from_bytes(frame[12:14], "big")
    if ethertype != ETHERTYPE_IPV4:
        return None
    ip = frame[ETH_HEADER:ETH_HEADER + IPV4_HEADER]
    (ver_ihl, _tos, total, _ident, frag, _ttl, proto, _csum,
     src_ip, dst_ip) = struct.unpack(">BBHHHBBH4s4s", ip)
    if ver_ihl != 0x45 or proto != IPPROTO_UDP:
        return None
    if frag & 0x3FFF:                   # MF set or a non-zero fragment offset
        return None
    if total < IPV4_HEADER + UDP_HEADER or len(frame) < ETH_HEADER + total:
        return None
    at = ETH_HEADER + IPV4_HEADER
    src_port, dst_port, udp_len, _ucsum = struct.unpack(">HHHH", frame[at:at + UDP_HEADER])
    if port is not None and dst_port != port:
        return None
    if udp_len < UDP_HEADER or IPV4_HEADER + udp_len != total:
        return None
    payload = frame[at + UDP_HEADER:at + udp_len]
    return Datagram(Endpoint(src_mac, src_ip, src_port), Endpoint(dst_mac, dst_ip, dst_port),
                    payload)


def ipv4_checksum(header: bytes) -> int:
    """The ones'-complement checksum of an IPv4 header (checksum field 0)."""
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_frame(payload: bytes, src: Endpoint, dst: Endpoint) -> bytes:
    """An Ethernet II / IPv4 / UDP frame carrying ``payload`` from ``src`` to
    ``dst``: IPv4 without options, TTL 64, id 0, DF set, valid header
    checksum; UDP checksum 0; padded with zeros to 60 bytes if shorter."""
    payload = bytes(payload)
    udp_len = UDP_HEADER + len(payload)
    total = IPV4_HEADER + udp_len
    if total > 0xFFFF:
        raise ValueError(f"payload of {len(payload)} bytes does not fit in one IPv4 datagram")
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, _DF, TTL, IPPROTO_UDP, 0,
                     src.ip, dst.ip)
    ip = ip[:10] + ipv4_checksum(ip).to_bytes(2, "big") + ip[12:]
    udp = struct.pack(">HHHH", src.port, dst.port, udp_len, 0)
    frame = dst.mac + src.mac + ETHERTYPE_IPV4.to_bytes(2, "big") + ip + udp + payload
    return frame.ljust(MIN_FRAME, b"\0")


class AddressBook:
    """Where each worker of each job is: the sender endpoint of its accepted
    CONTRIBs (verdict ACCEPT or RETRANSMIT), as of any message number.

    ``note(seq, job, worker, endpoint)`` records that message ``seq`` was an
    accepted CONTRIB from ``endpoint``; notes come in increasing ``seq``.
    ``lookup(seq, job, worker)`` gives the endpoint of the worker's most
    recent accepted CONTRIB with a number <= ``seq``: the destination of a
    RESULT that message ``seq`` caused, even when the RESULT is looked up
    after later messages were noted.
    """

    def __init__(self):
        self._seqs: dict[tuple[int, int], list[int]] = {}
        self._endpoints: dict[tuple[int, int], list[Endpoint]] = {}
        self._last = -1

    def note(self, seq: int, job: int, worker: int, endpoint: Endpoint) -> None:
        if seq < self._last:
            raise ValueError(f"address book notes must come in order ({seq} after {self._last})")
        self._last = seq
        key = (job, worker)
        seqs = self._seqs.setdefault(key, [])
        eps = self._endpoints.setdefault(key, [])
        if seqs and seqs[-1] == seq:
            eps[-1] = endpoint
        elif not eps or eps[-1] != endpoint:
            seqs.append(seq)
            eps.append(endpoint)

    def lookup(self, seq: int, job: int, worker: int) -> Endpoint:
        """The worker's endpoint as of message ``seq``; KeyError if it had
        no accepted CONTRIB by then."""
        key = (job, worker)
        seqs = self._seqs.get(key, ())
        i = bisect.bisect_right(seqs, seq)
        if i == 0:
            raise KeyError(f"job {job} worker {worker} has no accepted CONTRIB up to message {seq}")
        return self._endpoints[key][i - 1]

    def forget_before(self, seq: int) -> None:
        """Drop what no lookup at ``seq`` or later can need (memory bound)."""
        for key, seqs in self._seqs.items():
            i = bisect.bisect_right(seqs, seq)
            if i > 1:
                del seqs[:i - 1]
                del self._endpoints[key][:i - 1]


# -- the Ethernet front end's framing (docs/ethernet.md) -----------------------
#
# Pure Python, used by the front-end model (netagg.sim.eth_model), the HDL
# tests and the benches: the frame check sequence, and the two kinds of frame
# the switch answers itself (ARP requests, ICMP echo requests).

ETHERTYPE_ARP = 0x0806
IPPROTO_ICMP = 1
FCS_BYTES = 4
MIN_WIRE_FRAME = MIN_FRAME + FCS_BYTES     # 64: shorter with its FCS is a runt
MAX_WIRE_FRAME = 1518                      # longest frame with its FCS (no jumbo)
BROADCAST_MAC = b"\xff" * 6
ARP_LEN = 28
ICMP_ECHO_REQUEST, ICMP_ECHO_REPLY = 8, 0


def fcs(frame: bytes) -> bytes:
    """The Ethernet frame check sequence of ``frame`` (CRC-32, IEEE 802.3),
    as its 4 bytes are sent on the wire."""
    import zlib
    return zlib.crc32(bytes(frame)).to_bytes(4, "little")


def pad(frame: bytes) -> bytes:
    """``frame`` padded with zeros to the 60-byte Ethernet minimum."""
    return bytes(frame).ljust(MIN_FRAME, b"\0")


def with_fcs(frame: bytes) -> bytes:
    """``frame`` padded to 60 bytes and followed by its FCS: what a MAC sends."""
    frame = pad(frame)
    return frame + fcs(frame)


def fcs_ok(wire: bytes) -> bool:
    """True if the last 4 bytes of ``wire`` are the FCS of the bytes before."""
    wire = bytes(wire)
    return len(wire) >= FCS_BYTES and fcs(wire[:-FCS_BYTES]) == wire[-FCS_BYTES:]


def inet_checksum(data: bytes) -> int:
    """The Internet (RFC 1071) ones'-complement checksum of ``data`` (an odd
    length is padded with a zero byte)."""
    data = bytes(data)
    if len(data) % 2:
        data += b"\0"
    return ipv4_checksum(data)


@dataclasses.dataclass(frozen=True)
class ArpRequest:
    """An ARP request (Ethernet, IPv4): the asker's MAC and IPv4 address
    and the IPv4 address it asks for."""

    sha: bytes
    spa: bytes
    tpa: bytes


def parse_arp_request(frame: bytes) -> ArpRequest | None:
    """The ARP request a frame (without FCS) carries: Ethernet II, ethertype
    0x0806, htype 1, ptype 0x0800, hlen 6, plen 4, oper 1; else None. The
    destination MAC is not checked."""
    frame = bytes(frame)
    if len(frame) < ETH_HEADER + ARP_LEN:
        return None
    if int.from_bytes(frame[12:14], "big") != ETHERTYPE_ARP:
        return None
    htype, ptype, hlen, plen, oper, sha, spa, _tha, tpa = struct.unpack(
        ">HHBBH6s4s6s4s", frame[ETH_HEADER:ETH_HEADER + ARP_LEN])
    if (htype, ptype, hlen, plen, oper) != (1, ETHERTYPE_IPV4, 6, 4, 1):
        return None
    return ArpRequest(sha, spa, tpa)


def build_arp_request(sha: bytes, spa: bytes, tpa: bytes) -> bytes:
    """A broadcast ARP request from (``sha``, ``spa``) for ``tpa``, padded to 60."""
    arp = struct.pack(">HHBBH6s4s6s4s", 1, ETHERTYPE_IPV4, 6, 4, 1, sha, spa, b"\0" * 6, tpa)
    return pad(BROADCAST_MAC + sha + ETHERTYPE_ARP.to_bytes(2, "big") + arp)


def build_arp_reply(request: ArpRequest, mac: bytes, ip: bytes) -> bytes:
    """The reply of the owner (``mac``, ``ip``) of ``request.tpa``: to the
    asker's MAC, oper 2, padded to 60."""
    arp = struct.pack(">HHBBH6s4s6s4s", 1, ETHERTYPE_IPV4, 6, 4, 2, mac, ip,
                      request.sha, request.spa)
    return pad(request.sha + mac + ETHERTYPE_ARP.to_bytes(2, "big") + arp)


@dataclasses.dataclass(frozen=True)
class EchoRequest:
    """An ICMP echo request: sender MAC and IPv4 address, destination IPv4
    address, identifier, sequence number and data."""

    src_mac: bytes
    src_ip: bytes
    dst_ip: bytes
    ident: int
    seq: int
    data: bytes


def _ipv4_header(total: int, proto: int, src_ip: bytes, dst_ip: bytes) -> bytes:
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, _DF, TTL, proto, 0, src_ip, dst_ip)
    return ip[:10] + ipv4_checksum(ip).to_bytes(2, "big") + ip[12:]


def parse_echo_request(frame: bytes) -> EchoRequest | None:
    """The ICMP echo request a frame (without FCS) carries, or None. It is
    one when the frame is Ethernet II / IPv4 as :func:`parse` wants it
    (version 4, IHL 5, not fragmented, the frame holding the whole
    datagram), with a valid IPv4 header checksum, protocol ICMP, total
    length >= 28, and an ICMP message of type 8, code 0 with a valid
    checksum over the datagram's payload (Ethernet padding excluded).
    Addresses are not checked."""
    frame = bytes(frame)
    if len(frame) < ETH_HEADER + IPV4_HEADER + 8:
        return None
    if int.from_bytes(frame[12:14], "big") != ETHERTYPE_IPV4:
        return None
    ip = frame[ETH_HEADER:ETH_HEADER + IPV4_HEADER]
    (ver_ihl, _tos, total, _ident, frag, _ttl, proto, _csum,
     src_ip, dst_ip) = struct.unpack(">BBHHHBBH4s4s", ip)
    if ver_ihl != 0x45 or proto != IPPROTO_ICMP or frag & 0x3FFF:
        return None
    if total < IPV4_HEADER + 8 or len(frame) < ETH_HEADER + total or ipv4_checksum(ip) != 0:
        return None
    icmp = frame[ETH_HEADER + IPV4_HEADER:ETH_HEADER + total]
    icmp_type, code, _c, ident, seq = struct.unpack(">BBHHH", icmp[:8])
    if icmp_type != ICMP_ECHO_REQUEST or code != 0 or inet_checksum(icmp) != 0:
        return None
    return EchoRequest(frame[6:12], src_ip, dst_ip, ident, seq, icmp[8:])


def _build_echo(icmp_type: int, src_mac: bytes, src_ip: bytes, dst_mac: bytes,
                dst_ip: bytes, ident: int, seq: int, data: bytes) -> bytes:
    icmp = struct.pack(">BBHHH", icmp_type, 0, 0, ident, seq) + bytes(data)
    icmp = icmp[:2] + inet_checksum(icmp).to_bytes(2, "big") + icmp[4:]
    ip = _ipv4_header(IPV4_HEADER + len(icmp), IPPROTO_ICMP, src_ip, dst_ip)
    return pad(dst_mac + src_mac + ETHERTYPE_IPV4.to_bytes(2, "big") + ip + icmp)


def build_echo_request(src_mac: bytes, src_ip: bytes, dst_mac: bytes, dst_ip: bytes,
                       ident: int, seq: int, data: bytes) -> bytes:
    """An ICMP echo request (IPv4 id 0, DF, TTL 64, valid checksums), padded to 60."""
    return _build_echo(ICMP_ECHO_REQUEST, src_mac, src_ip, dst_mac, dst_ip, ident, seq, data)


def build_echo_reply(request: EchoRequest, mac: bytes, ip: bytes) -> bytes:
    """The echo reply from (``mac``, ``ip``) to ``request``'s sender: IPv4
    without options, id 0, DF, TTL 64, ICMP type 0 with the request's
    identifier, sequence number and data, both checksums valid; padded to 60."""
    return _build_echo(ICMP_ECHO_REPLY, mac, ip, request.src_mac, request.src_ip,
                       request.ident, request.seq, request.data)
