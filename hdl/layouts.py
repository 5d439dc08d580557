"""Hardware layouts and enums shared by the netagg components.

The header Struct is built from :data:`netagg.sim.wire.HEADER_FIELDS`, the
one definition of the wire format (the header is the 128-bit big-endian
integer of its 16 bytes; Amaranth lays fields out LSB first).
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from netagg import wire


class DType(enum.Enum, shape=4):
    INT32 = wire.DType.INT32
    FP32 = wire.DType.FP32
    BF16 = wire.DType.BF16


class Op(enum.Enum, shape=4):
    SUM = wire.Op.SUM
    MIN = wire.Op.MIN
    MAX = wire.Op.MAX


class MsgType(enum.Enum, shape=4):
    CONTRIB = wire.MsgType.CONTRIB
    RESULT = wire.MsgType.RESULT


_HEADER_SHAPES = {"dtype": DType, "op": Op, "type": MsgType}

Header = data.StructLayout({
    name: _HEADER_SHAPES.get(name, unsigned(width))
    for name, width in wire.HEADER_FIELDS
})
"""The 16-byte netagg header as a 128-bit Struct layout."""
assert Header.size == 8 * wire.HEADER_BYTES


class Verdict(enum.Enum, shape=4):
    ACCEPT = wire.Verdict.ACCEPT
    RETRANSMIT = wire.Verdict.RETRANSMIT
    BAD_HEADER = wire.Verdict.BAD_HEADER
    BAD_LENGTH = wire.Verdict.BAD_LENGTH
    BAD_JOB = wire.Verdict.BAD_JOB
    BAD_SLOT = wire.Verdict.BAD_SLOT
    BAD_WORKER = wire.Verdict.BAD_WORKER
    MISMATCH = wire.Verdict.MISMATCH
    DUPLICATE = wire.Verdict.DUPLICATE


TAG_BITS = 16


def bits_for(n: int) -> int:
    """Bits of an unsigned field holding 0..n-1 (at least one)."""
    return max(1, (n - 1).bit_length())


def message_meta(params) -> data.StructLayout:
    """The header fields a message carries through the core once validated,
    each only as wide as the build needs: an accepted message has
    job < J, slot < S, worker < W_max and count <= K (docs/core.md). The
    RESULT header is rebuilt from them (zero-extended) at the egress; the
    fields of a dropped message are not used past its verdict."""
    return data.StructLayout({
        "ver": unsigned(1),
        "job": unsigned(bits_for(params.jobs)),
        "slot": unsigned(bits_for(params.slots)),
        "worker": unsigned(bits_for(params.workers)),
        "dtype": DType,
        "op": Op,
        "count": unsigned(bits_for(params.elements + 1)),
        "offset": unsigned(32),
    })


def ingress_beat(lanes: int) -> data.StructLayout:
    """One beat of the ingress message stream (see docs/core.md)."""
    return data.StructLayout({
        "header": Header,            # the message's header (same on every beat)
        "length": unsigned(16),      # UDP payload length in bytes (same on every beat)
        "tag": unsigned(TAG_BITS),   # opaque, echoed on the verdict and on RESULTs it causes
        "last": unsigned(1),         # last beat of the message
        "data": data.ArrayLayout(unsigned(32), lanes),  # element i of the beat in lane i
    })


def egress_beat(lanes: int) -> data.StructLayout:
    """One beat of the egress RESULT stream (see docs/core.md)."""
    return data.StructLayout({
        "header": Header,
        "tag": unsigned(TAG_BITS),   # tag of the message that caused this RESULT
        "last": unsigned(1),
        "data": data.ArrayLayout(unsigned(32), lanes),
    })


VerdictLayout = data.StructLayout({
    "code": Verdict,
    "tag": unsigned(TAG_BITS),
})


def meta_from_header(meta, header) -> list:
    """Assignments of a header's fields to a :func:`message_meta` view
    (each truncated to its width)."""
    return [getattr(meta, name).eq(getattr(header, name))
            for name in ("ver", "job", "slot", "worker", "dtype", "op", "count", "offset")]


def result_header(header, meta, *, worker, status) -> list:
    """Assignments building a RESULT header from a round's :func:`message_meta`
    (zero-extended), its destination ``worker`` and its ``status``."""
    return [
        header.version.eq(wire.VERSION),
        header.type.eq(MsgType.RESULT),
        header.reserved.eq(0),
        header.ver.eq(meta.ver),
        header.job.eq(meta.job),
        header.dtype.eq(meta.dtype),
        header.op.eq(meta.op),
        header.slot.eq(meta.slot),
        header.worker.eq(worker),
        header.offset.eq(meta.offset),
        header.count.eq(meta.count),
        header.status.eq(status),
    ]
