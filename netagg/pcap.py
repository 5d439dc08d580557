"""Classic libpcap files (not pcapng) of Ethernet frames.

Pure Python.

Contract: :func:`read` accepts either byte order and microsecond or
nanosecond timestamps, link type Ethernet (1) only; anything else (pcapng,
another link type, a truncated file) raises :class:`PcapError` with a
one-line message. :func:`write` writes little-endian, microsecond
timestamps, snap length 65535, link type 1. Timestamps are integers in
nanoseconds since the epoch.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterable

LINKTYPE_ETHERNET = 1
MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
PCAPNG_MAGIC = 0x0A0D0D0A
SNAPLEN = 65535
_GLOBAL = 24
_RECORD = 16


class PcapError(ValueError):
    """An unreadable pcap file; the message is one line meant for a user."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One captured frame and its timestamp (ns since the epoch)."""

    data: bytes
    ts_ns: int = 0


def parse(blob: bytes, name: str = "pcap") -> list[Record]:
    """The records of a whole pcap file's bytes."""
    if len(blob) < 4:
        raise PcapError(f"{name}: not a pcap file (too short)")
    (magic_le,) = struct.unpack("<I", blob[:4])
    (magic_be,) = struct.unpack(">I", blob[:4])
    if magic_le == PCAPNG_MAGIC:
        raise PcapError(f"{name}: is pcapng, not classic pcap "
                        "(convert it with: editcap -F pcap IN OUT)")
    if magic_le in (MAGIC_US, MAGIC_NS):
        endian, magic = "<", magic_le
    elif magic_be in (MAGIC_US, MAGIC_NS):
        endian, magic = ">", magic_be
    else:
        raise PcapError(f"{name}: not a classic pcap file (magic 0x{magic_be:08x})")
    scale = 1000 if magic == MAGIC_US else 1
    if len(blob) < _GLOBAL:
        raise PcapError(f"{name}: truncated pcap header")
    major, minor, _tz, _sig, _snap, network = struct.unpack(endian + "HHiIII", blob[4:_GLOBAL])
    if major != 2:
        raise PcapError(f"{name}: unsupported pcap version {major}.{minor}")
    linktype = network & 0xFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise PcapError(f"{name}: link type {linktype} is not Ethernet (1)")
    records, at, index = [], _GLOBAL, 0
    while at < len(blob):
        if at + _RECORD > len(blob):
            raise PcapError(f"{name}: truncated record header of frame {index}")
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", blob[at:at + _RECORD])
        at += _RECORD
        if at + incl > len(blob):
            raise PcapError(f"{name}: frame {index} is truncated ({incl} bytes announced, "
                            f"{len(blob) - at} left)")
        records.append(Record(blob[at:at + incl], sec * 1_000_000_000 + frac * scale))
        at += incl
        index += 1
    return records


def read(path: str | os.PathLike) -> list[Record]:
    """Every record of a pcap file."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise PcapError(f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
    return parse(blob, os.fspath(path))


def read_frames(path: str | os.PathLike) -> list[bytes]:
    """Just the frames of a pcap file."""
    return [r.data for r in read(path)]


def dumps(records: Iterable[Record | bytes]) -> bytes:
    """A pcap file's bytes (little-endian, microseconds, link type 1);
    plain bytes are frames with timestamp 0."""
    out = [struct.pack("<IHHiIII", MAGIC_US, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET)]
    for r in records:
        if not isinstance(r, Record):
            r = Record(bytes(r))
        us = r.ts_ns // 1000
        sec, usec = divmod(us, 1_000_000)
        if not 0 <= sec < 1 << 32:
            raise PcapError(f"timestamp {r.ts_ns} ns does not fit in a pcap record "
                            "(seconds beyond 32 bits)")
        out.append(struct.pack("<IIII", sec, usec, len(r.data), len(r.data)))
        out.append(bytes(r.data))
    return b"".join(out)


def write(path: str | os.PathLike, records: Iterable[Record | bytes]) -> None:
    """Write a pcap file (see :func:`dumps`)."""
    blob = dumps(records)
    try:
        with open(path, "wb") as f:
            f.write(blob)
    except OSError as e:
        raise PcapError(f"cannot write {os.fspath(path)}: {e.strerror or e}") from None
