"""The netagg v1 wire format (``docs/protocol.md``): one definition of the
header, its field enums, the verdicts and the counters. The hardware layouts
(:mod:`netagg.hdl.layouts`), the golden model, the host library and the
payload codec (:mod:`netagg.payload`) all take them from here.

Pure Python: imports nothing but the standard library.
"""

from __future__ import annotations

import dataclasses
import enum

VERSION = 1
HEADER_BYTES = 16


class MsgType(enum.IntEnum):
    CONTRIB = 0
    RESULT = 1


class DType(enum.IntEnum):
    INT32 = 0
    FP32 = 1
    BF16 = 2

    @property
    def wire(self) -> str:
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> DType:
        return cls[name.upper()]

    @property
    def size(self) -> int:
        """Bytes one payload element takes on the wire."""
        return 2 if self is DType.BF16 else 4


class Op(enum.IntEnum):
    SUM = 0
    MIN = 1
    MAX = 2

    @property
    def wire(self) -> str:
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> Op:
        return cls[name.upper()]


# Status field of a RESULT: bits 7..0 contributors, bit 8 NaN, bit 9 overflow.
STATUS_NAN = 1 << 8
STATUS_OVERFLOW = 1 << 9

# The header as one 128-bit big-endian integer, fields listed from the least
# significant bit up: (name, width). The hardware Struct is built from this
# table (Amaranth layouts are LSB first), the codec below too.
HEADER_FIELDS: tuple[tuple[str, int], ...] = (
    ("status", 16),    # bytes 14-15
    ("count", 16),     # bytes 12-13
    ("offset", 32),    # bytes 8-11
    ("worker", 16),    # bytes 6-7
    ("slot", 16),      # bytes 4-5
    ("op", 4),         # byte 3, bits 3..0
    ("dtype", 4),      # byte 3, bits 7..4
    ("job", 8),        # byte 2
    ("ver", 1),        # byte 1, bit 0
    ("reserved", 7),   # byte 1, bits 7..1
    ("type", 4),       # byte 0, bits 3..0
    ("version", 4),    # byte 0, bits 7..4
)
assert sum(w for _, w in HEADER_FIELDS) == 8 * HEADER_BYTES


def _field_offsets():
    offsets, at = {}, 0
    for name, width in HEADER_FIELDS:
        offsets[name] = (at, width)
        at += width
    return offsets


FIELD_OFFSETS = _field_offsets()


def _field_bytes():
    out = {}
    for name, (at, width) in FIELD_OFFSETS.items():
        if at % 8 == 0 and width % 8 == 0:
            stop = HEADER_BYTES - at // 8
            out[name] = slice(stop - width // 8, stop)
    return out


FIELD_BYTES: dict[str, slice] = _field_bytes()
"""Where each byte-aligned field (job, slot, worker, offset, count, status)
lies in a packed header, derived from :data:`HEADER_FIELDS`: for code that
reads one field of a message's bytes without decoding the whole header."""

JOB_BYTE = FIELD_BYTES["job"].start
WORKER_BYTES = FIELD_BYTES["worker"]


def job_worker(message: bytes) -> tuple[int, int]:
    """(job, worker) of a packed message (CONTRIB: the sender; RESULT: the
    destination), read through :data:`FIELD_BYTES`."""
    return message[JOB_BYTE], int.from_bytes(message[WORKER_BYTES], "big")


@dataclasses.dataclass(frozen=True)
class Header:
    """A decoded header; every field is a plain int (no range checks: any
    16 bytes decode, and validation is the switch's job)."""

    version: int = VERSION
    type: int = MsgType.CONTRIB
    reserved: int = 0
    ver: int = 0
    job: int = 0
    dtype: int = DType.FP32
    op: int = Op.SUM
    slot: int = 0
    worker: int = 0
    offset: int = 0
    count: int = 0
    status: int = 0

    def to_int(self) -> int:
        value = 0
        for name, (at, width) in FIELD_OFFSETS.items():
            field = getattr(self, name)
            if not 0 <= field < (1 << width):
                raise ValueError(f"header field {name}={field} does not fit in {width} bits")
            value |= field << at
        return value

    @classmethod
    def from_int(cls, value: int) -> Header:
        return cls(**{name: (value >> at) & ((1 << width) - 1)
                      for name, (at, width) in FIELD_OFFSETS.items()})

    def pack(self) -> bytes:
        return self.to_int().to_bytes(HEADER_BYTES, "big")

    @classmethod
    def unpack(cls, data: bytes) -> Header:
        if len(data) < HEADER_BYTES:
            raise ValueError(f"a header takes {HEADER_BYTES} bytes, got {len(data)}")
        return cls.from_int(int.from_bytes(data[:HEADER_BYTES], "big"))

    def replace(self, **changes) -> Header:
        return dataclasses.replace(self, **changes)


COUNTERS = (
    "rx", "tx", "results", "retransmit",
    "drop_bad_header", "drop_bad_length", "drop_bad_job", "drop_bad_slot",
    "drop_bad_worker", "drop_mismatch", "drop_duplicate",
)
"""The counters of protocol.md, in the order the hardware numbers them."""


class Verdict(enum.IntEnum):
    """What the switch did with one netagg message (the core's verdict port)."""

    ACCEPT = 0          # a new contribution
    RETRANSMIT = 1      # a retransmission of a completed round: RESULT resent
    BAD_HEADER = 2
    BAD_LENGTH = 3
    BAD_JOB = 4
    BAD_SLOT = 5
    BAD_WORKER = 6
    MISMATCH = 7
    DUPLICATE = 8

    @property
    def counter(self) -> str | None:
        """The drop counter this verdict increments (None if accepted)."""
        if self.value < Verdict.BAD_HEADER:
            return None
        return "drop_" + self.name.lower()

    @property
    def accepted(self) -> bool:
        return self.value <= Verdict.RETRANSMIT
