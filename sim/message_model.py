"""The golden model of the netagg switch: validation, job table, slot table
with two copies per slot, multicast and retransmission (``docs/protocol.md``).

Plain Python and NumPy (no Amaranth, no cocotb); element arithmetic only
through :mod:`netagg.sim.arith`, so results are bit-exact by construction.

Contract: :meth:`Switch.receive` takes one netagg message (the UDP payload
bytes) and returns its :class:`Outcome`: the verdict (exactly one per
message; a dropped message changes no slot state and increments exactly one
``drop_<reason>`` counter) and the RESULT messages it caused, in send order
(a completed round's RESULT to workers 0..W-1 in turn, or one RESULT to the
sender of a retransmission). ``rx`` counts every message, ``tx`` every RESULT,
``results`` every completed round, ``retransmit`` every RESULT resent.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable

import numpy as np

from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.payload import Message, decode_values, encode_values
from netagg.sim import arith
from netagg.wire import (
    COUNTERS,
    HEADER_BYTES,
    STATUS_NAN,
    STATUS_OVERFLOW,
    VERSION,
    DType,
    Header,
    MsgType,
    Op,
    Verdict,
)


def make_contrib(job: int, slot: int, ver: int, worker: int, values, *,
                 dtype: int = DType.FP32, op: int = Op.SUM, offset: int = 0,
                 count: int | None = None, **header) -> bytes:
    """A CONTRIB message's bytes: ``values`` are raw element bits (bf16 in
    the low 16 bits); ``count`` defaults to len(values); other header fields
    (``version``, ``type``, ``reserved``, ``status``) may be overridden to
    build malformed messages. The payload is :func:`netagg.payload.encode_values`
    (4-byte elements for a dtype code the wire format does not define)."""
    values = np.atleast_1d(np.asarray(values, dtype=np.uint64))
    h = Header(ver=ver, job=job, dtype=dtype, op=op, slot=slot, worker=worker,
               offset=offset, count=len(values) if count is None else count, **header)
    # a dtype the wire format does not define: 4-byte elements
    elem = dtype if dtype in DType._value2member_map_ else DType.INT32
    return h.pack() + encode_values(elem, values)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one message did: its verdict and the RESULTs it caused, in the
    order the switch sends them."""

    verdict: Verdict
    results: list[Message] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class CopyState:
    """A snapshot of one slot copy (for tests and scoreboards)."""

    bits: frozenset[int]
    n: int
    done: bool
    meta: tuple[int, int, int, int] | None   # (dtype, op, count, offset)


class _Copy:
    """One copy of a slot: contributor bitmap (an int, bit w = worker w), n,
    done, the round's metadata, its accumulators and sticky flags, and, once
    done, the RESULT status and bytes (header with the worker field zeroed,
    and the payload)."""

    __slots__ = ("bits", "n", "done", "dt_op", "count", "offset", "acc", "accf", "nan",
                 "ovf", "status", "pre", "suf")

    def __init__(self):
        self.bits = 0
        self.n = 0
        self.done = False
        self.dt_op = None          # the round's metadata: dtype/op byte, count, offset
        self.count = 0
        self.offset = 0
        self.acc = None            # accumulator bits (uint32)
        self.accf = None           # the same memory as binary32 while every operand is small
        self.nan = False
        self.ovf = False
        self.status = 0
        self.pre = b""             # RESULT bytes 0-5 (once done)
        self.suf = b""             # RESULT bytes 8-15 and the payload (once done)

    @property
    def meta(self) -> tuple[int, int, int, int] | None:
        """(dtype, op, count, offset) of the current or last round."""
        if self.dt_op is None:
            return None
        return (self.dt_op >> 4, self.dt_op & 15, self.count, self.offset)


_HEADER = struct.Struct(">BBBBHHIHH")      # the 16 header bytes, field by field
_BE = {int(DType.INT32): np.dtype(">u4"), int(DType.FP32): np.dtype(">u4"),
       int(DType.BF16): np.dtype(">u2")}
_SIZE = {int(d): d.size for d in DType}
_U32 = np.uint32
_F32 = np.float32
# fp32 bits shifted left by one (dropping the sign) below this: exponent
# field below 246, |x| < 2**119 (finite, not NaN).
# The first byte of a big-endian fp32 or bf16 element holds the sign and the
# exponent's upper 7 bits: (byte & 0x7F) < 123 means exponent < 246.
_BIG = bytes(int((b & 0x7F) >= 123) for b in range(256))
_LARGE = 1
_ACCEPT = Verdict.ACCEPT
_RESULT_BYTE0 = (VERSION << 4) | MsgType.RESULT
_CONTRIB_BYTE0 = (VERSION << 4) | MsgType.CONTRIB
_PREFIX = struct.Struct(">BBBBH")          # RESULT bytes 0-5: up to the worker field
_SUFFIX = struct.Struct(">IHH")            # bytes 8-15: offset, count, status
_WORKER_BYTES = tuple(w.to_bytes(2, "big") for w in range(256))
_FP32 = int(DType.FP32)
_BEF4 = np.dtype(">f4")
_VERDICTS = tuple(Verdict)
_DROP_COUNTER = {v: v.counter for v in Verdict if v.counter is not None}


class Switch:
    """The netagg switch for one build (``params``) and job table (``jobs``,
    a JobTable or a list of Job, validated against ``params``).

    ``counters`` is a dict with every name of :data:`protocol.COUNTERS`.

    :meth:`process` is the fast path (bytes in, verdict and RESULT bytes
    out); :meth:`receive` the same with decoded :class:`Message` RESULTs.
    fp32 sums (and bf16 sums in the ``fp32`` accumulation mode) whose every
    operand is below 2**119 in magnitude take NumPy's binary32 addition
    directly (at most 255 operands: no NaN, no overflow possible); every
    other combination goes through
    :mod:`netagg.sim.arith`. Both give the same bits.
    """

    def __init__(self, params: Params, jobs: JobTable | Iterable[Job]):
        self.params = params
        self._dtypes = frozenset(int(DType.from_name(n)) for n in params.dtypes)
        self._ops = frozenset(int(Op.from_name(n)) for n in params.ops)
        self._mode = params.bf16_accumulate
        self._elements = params.elements
        # Every valid dtype/op header byte: (dtype, element bytes, whether
        # the binary32 fast sum applies, big-endian element dtype).
        self._kinds: dict[int, tuple[int, int, bool, np.dtype]] = {
            (d << 4) | o: (d, _SIZE[d], o == Op.SUM and (d == DType.FP32 or (
                d == DType.BF16 and self._mode == "fp32")), _BE[d])
            for d in self._dtypes for o in self._ops}
        self._copies: dict[int, _Copy] = {}          # key: 2 * absolute slot + ver
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.set_jobs(jobs)

    def set_jobs(self, jobs: JobTable | Iterable[Job]) -> None:
        """Replace the job table (the control plane's job writes). Slot
        state is kept, as the hardware keeps its slot RAM."""
        if not isinstance(jobs, JobTable):
            jobs = JobTable(jobs, self.params)
        elif jobs.params != self.params:
            # A table validated against other parameters may not fit this core.
            jobs = JobTable(list(jobs), self.params)
        self.jobs = jobs
        self._job = {j.id: (j.slot_base, j.slots, j.workers) for j in jobs if j.enabled}

    # -- validation ------------------------------------------------------

    def validate(self, data: bytes) -> tuple[Verdict | None, Header | None]:
        """The checks of protocol.md in order: (first failing verdict or None,
        the decoded header or None if the message is shorter than one)."""
        if len(data) < HEADER_BYTES:
            return Verdict.BAD_LENGTH, None
        h = Header.unpack(data)
        if (h.version != VERSION or h.type != MsgType.CONTRIB or h.reserved != 0
                or h.status != 0 or h.dtype not in self._dtypes or h.op not in self._ops):
            return Verdict.BAD_HEADER, h
        if (h.count == 0 or h.count > self.params.elements
                or len(data) - HEADER_BYTES != h.count * DType(h.dtype).size):
            return Verdict.BAD_LENGTH, h
        job = self.jobs.get(h.job)
        if job is None:
            return Verdict.BAD_JOB, h
        if h.slot >= job.slots:
            return Verdict.BAD_SLOT, h
        if h.worker >= job.workers:
            return Verdict.BAD_WORKER, h
        return None, h

    # -- data plane ------------------------------------------------------

    def receive(self, data: bytes | Message) -> Outcome:
        """Process one netagg message (UDP payload bytes, or a Message)."""
        if isinstance(data, Message):
            data = data.pack()
        verdict, results = self.process(bytes(data))
        return Outcome(_VERDICTS[verdict], [_message(r) for r in results])

    def process(self, data: bytes) -> tuple[int, list[bytes]]:
        """Process one netagg message (UDP payload bytes): its verdict (a
        :class:`Verdict` value) and the RESULT messages' bytes, in send order."""
        counters = self.counters
        counters["rx"] += 1
        if len(data) < HEADER_BYTES:
            return self._drop(Verdict.BAD_LENGTH)
        b0, ver, jid, dt_op, rslot, w, offset, count, status = _HEADER.unpack_from(data)
        kind = self._kinds.get(dt_op)
        if b0 != _CONTRIB_BYTE0 or ver > 1 or status or kind is None:
            return self._drop(Verdict.BAD_HEADER)
        dtype, size, fast, be = kind
        if count == 0 or count > self._elements or len(data) - HEADER_BYTES != count * size:
            return self._drop(Verdict.BAD_LENGTH)
        job = self._job.get(jid)
        if job is None:
            return self._drop(Verdict.BAD_JOB)
        base, nslots, workers = job
        if rslot >= nslots:
            return self._drop(Verdict.BAD_SLOT)
        if w >= workers:
            return self._drop(Verdict.BAD_WORKER)

        key = 2 * (base + rslot) + ver
        copies = self._copies
        c = copies.get(key)
        if c is None:
            c = copies[key] = _Copy()
        bit = 1 << w

        if not c.bits & bit:                             # a new contribution
            fresh = c.n == 0 or c.done                   # first of a new round
            if not fresh and (dt_op != c.dt_op or count != c.count or offset != c.offset):
                return self._drop(Verdict.MISMATCH)
            o = copies.get(key ^ 1)
            if o is not None and o.done:
                o.bits &= ~bit                           # w has the previous result
            # small: every element below 2**119 in magnitude (and so finite),
            # from the first byte of each big-endian element.
            small = fast and _LARGE not in data[HEADER_BYTES::size].translate(_BIG)
            if fresh:
                if small:
                    if dtype == _FP32:
                        accf = np.frombuffer(data, _BEF4, count, HEADER_BYTES).astype(_F32)
                    else:                                # bf16, exact widening
                        accf = (np.frombuffer(data, be, count, HEADER_BYTES).astype(_U32)
                                << 16).view(_F32)
                    c.accf, c.acc, c.nan = accf, accf.view(_U32), False
                else:
                    values = np.frombuffer(data, be, count, HEADER_BYTES).astype(_U32)
                    c.acc, nan = arith.to_acc(dtype, values, self._mode)
                    c.accf, c.nan = None, bool(nan.any())
                c.dt_op, c.count, c.offset = dt_op, count, offset
                c.bits, c.n, c.done = bit, 1, False
                c.ovf, c.status = False, 0
            else:
                accf = c.accf
                if small and accf is not None:
                    # Every operand so far is below 2**119 in magnitude and a
                    # round has at most 255 of them: the sum stays below
                    # 2**127, so binary32 addition cannot overflow or give NaN.
                    if dtype == _FP32:
                        accf += np.frombuffer(data, _BEF4, count, HEADER_BYTES)
                    else:
                        accf += (np.frombuffer(data, be, count, HEADER_BYTES).astype(_U32)
                                 << 16).view(_F32)
                else:
                    values = np.frombuffer(data, be, count, HEADER_BYTES).astype(_U32)
                    c.acc, nan, ovf = arith.combine(dtype, dt_op & 15, c.acc, values,
                                                    self._mode)
                    c.nan |= bool(nan.any())
                    c.ovf |= bool(ovf.any())
                    c.accf = None
                c.bits |= bit
                c.n += 1
            if c.n < workers:
                return _ACCEPT, []
            c.done = True                                # the round is complete
            if dtype == _FP32:
                out = c.acc
            else:
                out, ovf = arith.from_acc(dtype, c.acc, self._mode)
                c.ovf |= bool(ovf.any())
            c.status = (c.n | (STATUS_NAN if c.nan else 0)
                        | (STATUS_OVERFLOW if c.ovf else 0))
            # RESULT bytes: prefix (bytes 0-5), the worker field, suffix
            # (bytes 8-15 and the payload).
            c.pre = _PREFIX.pack(_RESULT_BYTE0, ver, jid, dt_op, rslot)
            pre = c.pre
            c.suf = suf = _SUFFIX.pack(offset, count, c.status) + out.astype(be).tobytes()
            counters["results"] += 1
            counters["tx"] += workers
            return _ACCEPT, [pre + wb + suf for wb in _WORKER_BYTES[:workers]]

        if c.done:                                       # a retransmission
            counters["retransmit"] += 1
            counters["tx"] += 1
            # The stored RESULT, with the retransmission's (relative) slot
            # and ver, which are the copy's own.
            return Verdict.RETRANSMIT, [c.pre + _WORKER_BYTES[w] + c.suf]
        return self._drop(Verdict.DUPLICATE)

    def _drop(self, verdict: Verdict) -> tuple[int, list[bytes]]:
        self.counters[_DROP_COUNTER[verdict]] += 1
        return verdict, []

    # -- introspection ---------------------------------------------------

    def copy_state(self, job: int, slot: int, ver: int) -> CopyState:
        """Snapshot of copy ``ver`` of the job's (relative) slot ``slot``."""
        j = self.jobs[job]
        if not 0 <= slot < j.slots or ver not in (0, 1):
            raise ValueError(f"no copy ({slot}, {ver}) in job {job}")
        c = self._copies.get(2 * (j.slot_base + slot) + ver) or _Copy()
        bits = frozenset(w for w in range(self.params.workers) if (c.bits >> w) & 1)
        return CopyState(bits, c.n, c.done, c.meta)


def _message(data: bytes) -> Message:
    """A RESULT's bytes as a Message (header and raw element bits)."""
    h = Header.unpack(data)
    values = decode_values(h.dtype, data[HEADER_BYTES:])
    values.setflags(write=False)
    return Message(h, values)
