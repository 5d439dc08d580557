"""The wire codec against protocol.md's header table, byte by byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from netagg.payload import Message, decode_values, encode_values
from netagg.wire import (
    COUNTERS,
    HEADER_BYTES,
    STATUS_NAN,
    STATUS_OVERFLOW,
    DType,
    Header,
    MsgType,
    Op,
    Verdict,
)


def spec_bytes(version, type, ver, reserved, job, dtype, op, slot, worker, offset, count,
               status) -> bytes:
    """The header laid out as protocol.md's table says, written out by hand."""
    return bytes([
        (version << 4) | type,
        (reserved << 1) | ver,
        job,
        (dtype << 4) | op,
        slot >> 8, slot & 0xFF,
        worker >> 8, worker & 0xFF,
        (offset >> 24) & 0xFF, (offset >> 16) & 0xFF, (offset >> 8) & 0xFF, offset & 0xFF,
        count >> 8, count & 0xFF,
        status >> 8, status & 0xFF,
    ])


FIELDS = dict(version=st.integers(0, 15), type=st.integers(0, 15), ver=st.integers(0, 1),
              reserved=st.integers(0, 127), job=st.integers(0, 255), dtype=st.integers(0, 15),
              op=st.integers(0, 15), slot=st.integers(0, 0xFFFF), worker=st.integers(0, 0xFFFF),
              offset=st.integers(0, 0xFFFFFFFF), count=st.integers(0, 0xFFFF),
              status=st.integers(0, 0xFFFF))


@given(st.fixed_dictionaries(FIELDS))
def test_header_layout(fields):
    data = spec_bytes(**fields)
    assert len(data) == HEADER_BYTES
    assert Header(**fields).pack() == data
    assert Header.unpack(data) == Header(**fields)


def test_example_header():
    h = Header(version=1, type=MsgType.RESULT, ver=1, job=3, dtype=DType.BF16, op=Op.MAX,
               slot=0x1234, worker=7, offset=0xDEADBEEF, count=64,
               status=8 | STATUS_NAN | STATUS_OVERFLOW)
    assert h.pack().hex() == "11010322123400" "07deadbeef0040" "0308"


def test_header_range_checks():
    with pytest.raises(ValueError):
        Header(ver=2).pack()
    with pytest.raises(ValueError):
        Header(job=256).pack()
    with pytest.raises(ValueError):
        Header.unpack(b"\0" * 15)


def test_values_big_endian():
    assert encode_values(DType.FP32, [0x3F800000, 1]) == bytes.fromhex("3f80000000000001")
    assert encode_values(DType.INT32, [0xFFFFFFFE]) == bytes.fromhex("fffffffe")
    assert encode_values(DType.BF16, [0x3F80, 0x7FC0]) == bytes.fromhex("3f807fc0")
    assert list(decode_values(DType.BF16, bytes.fromhex("3f80ff81"))) == [0x3F80, 0xFF81]
    assert list(decode_values(DType.FP32, bytes.fromhex("7fc00000"))) == [0x7FC00000]
    assert decode_values(DType.INT32, b"").dtype == np.uint32
    assert [d.size for d in DType] == [4, 4, 2]


def test_message_pack_and_equality():
    m = Message(Header(count=2, dtype=DType.INT32), np.array([1, 2], dtype=np.uint32))
    assert m.pack() == Header(count=2, dtype=DType.INT32).pack() + bytes.fromhex(
        "0000000100000002")
    assert m == Message(m.header, np.array([1, 2], dtype=np.uint32))
    assert m != Message(m.header, np.array([1, 3], dtype=np.uint32))
    assert len({m, Message(m.header, np.array([1, 2], dtype=np.uint32))}) == 1


def test_verdicts_and_counters():
    assert COUNTERS[:4] == ("rx", "tx", "results", "retransmit")
    drops = [v.counter for v in Verdict if v.counter]
    assert drops == [c for c in COUNTERS if c.startswith("drop_")]
    assert [v for v in Verdict if v.accepted] == [Verdict.ACCEPT, Verdict.RETRANSMIT]
    assert Verdict.ACCEPT.counter is None and Verdict.DUPLICATE.counter == "drop_duplicate"
    assert [DType.from_name(n) for n in ("int32", "fp32", "bf16")] == [0, 1, 2]
    assert [Op.from_name(n) for n in ("sum", "min", "max")] == [0, 1, 2]


def test_field_bytes_read_each_byte_aligned_field_of_a_packed_header():
    import random

    from netagg.wire import FIELD_BYTES, job_worker
    rng = random.Random(5)
    assert set(FIELD_BYTES) == {"job", "slot", "worker", "offset", "count", "status"}
    for _ in range(200):
        h = Header(ver=rng.getrandbits(1), job=rng.getrandbits(8), slot=rng.getrandbits(16),
                   worker=rng.getrandbits(16), offset=rng.getrandbits(32),
                   count=rng.getrandbits(16), status=rng.getrandbits(16))
        packed = h.pack()
        for name, where in FIELD_BYTES.items():
            assert int.from_bytes(packed[where], "big") == getattr(h, name), name
        assert job_worker(packed) == (h.job, h.worker)
