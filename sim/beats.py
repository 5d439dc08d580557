"""Messages as the core's stream beats (docs/core.md), as plain integers.

The flat bit positions follow ``netagg.hdl.layouts.ingress_beat`` and
``egress_beat`` (fields from bit 0 up: header, length, tag, last, data for
ingress; header, tag, last, data for egress); tests check the two agree.
Pure Python.
"""

from __future__ import annotations

import dataclasses

from netagg.wire import HEADER_BYTES, DType, Header

TAG_BITS = 16
HEADER_BITS = 8 * HEADER_BYTES


@dataclasses.dataclass(frozen=True)
class Beat:
    header: int          # the 16 header bytes as a big-endian integer
    data: tuple[int, ...]  # L lane values (32 bits each)
    last: bool
    tag: int = 0
    length: int = 0      # ingress only: UDP payload length


def element_size(header: int) -> int:
    """Bytes per element as a front end must assume them: 2 if the header's
    dtype field says bf16, else 4."""
    return 2 if Header.from_int(header).dtype == DType.BF16 else 4


def message_to_beats(payload: bytes, lanes: int, tag: int = 0) -> list[Beat]:
    """A netagg message (UDP payload) as ingress beats, as a front end presents it."""
    length = len(payload)
    head = payload[:HEADER_BYTES]
    header = int.from_bytes(head.ljust(HEADER_BYTES, b"\0"), "big")
    body = payload[HEADER_BYTES:]
    size = element_size(header)
    n = len(body) // size
    elems = [int.from_bytes(body[k * size:(k + 1) * size], "big") for k in range(n)]
    nbeats = max(1, -(-n // lanes))
    beats = []
    for b in range(nbeats):
        chunk = elems[b * lanes:(b + 1) * lanes]
        chunk += [0] * (lanes - len(chunk))
        beats.append(Beat(header, tuple(chunk), b == nbeats - 1, tag & 0xFFFF, length))
    return beats


def pack_ingress(beat: Beat, lanes: int) -> int:
    value = beat.header | (beat.length << HEADER_BITS) | (beat.tag << (HEADER_BITS + 16))
    value |= int(beat.last) << (HEADER_BITS + 16 + TAG_BITS)
    at = HEADER_BITS + 16 + TAG_BITS + 1
    for i, d in enumerate(beat.data):
        value |= (d & 0xFFFFFFFF) << (at + 32 * i)
    return value


def unpack_egress(value: int, lanes: int) -> Beat:
    header = value & ((1 << HEADER_BITS) - 1)
    tag = (value >> HEADER_BITS) & 0xFFFF
    last = bool((value >> (HEADER_BITS + TAG_BITS)) & 1)
    at = HEADER_BITS + TAG_BITS + 1
    data = tuple((value >> (at + 32 * i)) & 0xFFFFFFFF for i in range(lanes))
    return Beat(header, data, last, tag)


def unpack_verdict(value: int) -> tuple[int, int]:
    """(code, tag) of a verdict port value."""
    return value & 0xF, (value >> 4) & 0xFFFF


class ResultAssembler:
    """Collects egress beats into RESULT messages (UDP payload bytes)."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        self._elems: list[int] = []
        self._header: int | None = None

    def push(self, beat: Beat) -> tuple[bytes, int] | None:
        """Add a beat; returns (payload, tag) when a RESULT is complete."""
        if self._header is None:
            self._header = beat.header
        elif beat.header != self._header:
            raise ValueError("RESULT header changed within a message")
        self._elems.extend(beat.data)
        if not beat.last:
            return None
        h = Header.from_int(self._header)
        size = 2 if h.dtype == DType.BF16 else 4
        if len(self._elems) < h.count:
            raise ValueError(f"RESULT has {len(self._elems)} elements, header says {h.count}")
        body = b"".join((e & ((1 << (8 * size)) - 1)).to_bytes(size, "big")
                        for e in self._elems[:h.count])
        self._elems, self._header = [], None
        return h.pack() + body, beat.tag
