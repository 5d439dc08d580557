"""Messages as the core's stream beats (docs/core.md), as plain integers.

Every bit position comes from the Amaranth layouts that define the ports,
:func:`netagg.hdl.layouts.ingress_beat`, :func:`~netagg.hdl.layouts.egress_beat`
and :data:`~netagg.hdl.layouts.VerdictLayout` (read once per lane count);
nothing here re-types an offset.
"""

from __future__ import annotations

import dataclasses
import functools

from netagg.hdl import layouts
from netagg.payload import decode_values, encode_values
from netagg.wire import HEADER_BYTES, DType, Header

TAG_BITS = layouts.TAG_BITS
TAG_MOD = 1 << TAG_BITS


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
    elems = decode_values(DType.BF16 if size == 2 else DType.INT32, body[:n * size]).tolist()
    nbeats = max(1, -(-n // lanes))
    beats = []
    for b in range(nbeats):
        chunk = elems[b * lanes:(b + 1) * lanes]
        chunk += [0] * (lanes - len(chunk))
        beats.append(Beat(header, tuple(chunk), b == nbeats - 1, tag % TAG_MOD, length))
    return beats


_LAYOUTS = {"ingress": layouts.ingress_beat, "egress": layouts.egress_beat}


@functools.cache
def beat_fields(kind: str, lanes: int) -> dict:
    """``{field: (offset, width)}`` of an ``"ingress"`` or ``"egress"`` beat
    of ``lanes`` lanes, lane ``i`` as field ``("data", i)``."""
    layout = _LAYOUTS[kind](lanes)
    out = {}
    for name, field in layout:
        if name == "data":
            lanes_layout = field.shape
            for i in range(lanes):
                out[("data", i)] = (field.offset + lanes_layout[i].offset, lanes_layout[i].width)
        else:
            out[name] = (field.offset, field.width)
    return out


def _pack(kind: str, beat: Beat, lanes: int) -> int:
    fields = beat_fields(kind, lanes)
    value = 0
    for name, (at, width) in fields.items():
        v = beat.data[name[1]] if isinstance(name, tuple) else int(getattr(beat, name))
        value |= (v & ((1 << width) - 1)) << at
    return value


def _unpack(kind: str, value: int, lanes: int) -> dict:
    out = {}
    data = [0] * lanes
    for name, (at, width) in beat_fields(kind, lanes).items():
        v = (value >> at) & ((1 << width) - 1)
        if isinstance(name, tuple):
            data[name[1]] = v
        else:
            out[name] = v
    out["data"] = tuple(data)
    return out


def pack_ingress(beat: Beat, lanes: int) -> int:
    """An ingress beat as the value of ``i.payload``."""
    return _pack("ingress", beat, lanes)


def pack_egress(beat: Beat, lanes: int) -> int:
    """An egress beat as the value of ``o.payload`` (``length`` not carried)."""
    return _pack("egress", beat, lanes)


def unpack_ingress(value: int, lanes: int) -> Beat:
    f = _unpack("ingress", value, lanes)
    return Beat(f["header"], f["data"], bool(f["last"]), f["tag"], f["length"])


def unpack_egress(value: int, lanes: int) -> Beat:
    """The value of ``o.payload`` as a beat."""
    f = _unpack("egress", value, lanes)
    return Beat(f["header"], f["data"], bool(f["last"]), f["tag"])


_VERDICT = {name: (field.offset, field.width) for name, field in layouts.VerdictLayout}


def unpack_verdict(value: int) -> tuple[int, int]:
    """(code, tag) of a verdict port value."""
    return tuple((value >> at) & ((1 << width) - 1)
                 for at, width in (_VERDICT["code"], _VERDICT["tag"]))


def pack_verdict(code: int, tag: int) -> int:
    """A verdict port value."""
    return ((int(code) << _VERDICT["code"][0]) | (tag << _VERDICT["tag"][0]))


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
        if len(self._elems) < h.count:
            raise ValueError(f"RESULT has {len(self._elems)} elements, header says {h.count}")
        body = encode_values(h.dtype, self._elems[:h.count])     # ValueError: not a dtype
        self._elems, self._header = [], None
        return h.pack() + body, beat.tag
