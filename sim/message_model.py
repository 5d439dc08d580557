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

    __slots__ = ("bits", "n", "done", "meta", "acc", "nan", "ovf", "values", "status",
                 "safe", "head", "body")

    def __init__(self):
        self.bits = 0
        self.n = 0
        self.done = False
        self.meta = None
        self.acc = None
        self.nan = False
        self.ovf = False
        self.values = None
        self.status = 0
        self.safe = False
        self.head = b""
        self.body = b""


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
_BEF = {int(DType.FP32): np.dtype(">f4"), int(DType.BF16): np.dtype(np.float32)}
_RESULT_BYTE0 = (VERSION << 4) | MsgType.RESULT
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
        b0, b1, jid, dt_op, rslot, w, offset, count, status = _HEADER.unpack_from(data)
        dtype, op = dt_op >> 4, dt_op & 15
        if (b0 != (VERSION << 4) | MsgType.CONTRIB or b1 > 1 or status
                or dtype not in self._dtypes or op not in self._ops):
            return self._drop(Verdict.BAD_HEADER)
        if (count == 0 or count > self.params.elements
                or len(data) - HEADER_BYTES != count * _SIZE[dtype]):
            return self._drop(Verdict.BAD_LENGTH)
        job = self._job.get(jid)
        if job is None:
            return self._drop(Verdict.BAD_JOB)
        base, nslots, workers = job
        if rslot >= nslots:
            return self._drop(Verdict.BAD_SLOT)
        if w >= workers:
            return self._drop(Verdict.BAD_WORKER)

        ver = b1
        key = 2 * (base + rslot) + ver
        c = self._copies.get(key)
        if c is None:
            c = self._copies[key] = _Copy()
        meta = (dtype, op, count, offset)

        if not (c.bits >> w) & 1:                        # a new contribution
            if c.n > 0 and not c.done and meta != c.meta:
                return self._drop(Verdict.MISMATCH)
            o = self._copies.get(key ^ 1)
            if o is not None and o.done:
                o.bits &= ~(1 << w)                      # w has the previous result
            fast = op == Op.SUM and (dtype == DType.FP32
                                     or (dtype == DType.BF16 and self._mode == "fp32"))
            # small: every element below 2**119 in magnitude (and so finite),
            # from the first byte of each big-endian element.
            small = fast and _LARGE not in data[HEADER_BYTES::_SIZE[dtype]].translate(_BIG)
            if small:
                values = np.frombuffer(data, _BE[dtype], count, HEADER_BYTES)
                if dtype == DType.BF16:
                    values = (values.astype(_U32) << 16).view(_F32)  # exact widening
                else:
                    values = values.view(_BEF[dtype])
            else:
                values = np.frombuffer(data, _BE[dtype], count, HEADER_BYTES).astype(_U32)
            if c.n == 0 or c.done:                       # first of a new round
                if small:
                    c.acc, c.nan, c.safe = values.astype(_F32).view(_U32), False, True
                else:
                    c.acc, nan = arith.to_acc(dtype, values, self._mode)
                    c.nan, c.safe = bool(nan.any()), False
                c.meta, c.bits, c.n, c.done = meta, 1 << w, 1, False
                c.ovf, c.values, c.status = False, None, 0
            else:
                if small and c.safe:
                    # Every operand so far is below 2**119 in magnitude and a
                    # round has at most 255 of them: the sum stays below
                    # 2**127, so binary32 addition cannot overflow or give NaN.
                    c.acc = (c.acc.view(_F32) + values).view(_U32)
                else:
                    if small:
                        values = np.frombuffer(data, _BE[dtype], count,
                                               HEADER_BYTES).astype(_U32)
                    c.acc, nan, ovf = arith.combine(dtype, op, c.acc, values, self._mode)
                    c.nan |= bool(nan.any())
                    c.ovf |= bool(ovf.any())
                    c.safe = False
                c.bits |= 1 << w
                c.n += 1
            if c.n < workers:
                return Verdict.ACCEPT, []
            c.done = True                                # the round is complete
            if dtype == DType.FP32:
                out = c.acc
            else:
                out, ovf = arith.from_acc(dtype, c.acc, self._mode)
                c.ovf |= bool(ovf.any())
            c.status = (c.n | (STATUS_NAN if c.nan else 0)
                        | (STATUS_OVERFLOW if c.ovf else 0))
            c.head = _HEADER.pack(_RESULT_BYTE0, ver, jid, dt_op, rslot, 0, offset, count,
                                  c.status)
            c.body = out.astype(_BE[dtype]).tobytes()
            head, body = c.head, c.body
            results = [head[:6] + d.to_bytes(2, "big") + head[8:] + body
                       for d in range(workers)]
            counters["results"] += 1
            counters["tx"] += workers
            return Verdict.ACCEPT, results

        if c.done:                                       # a retransmission
            counters["retransmit"] += 1
            counters["tx"] += 1
            # The stored RESULT, with the retransmission's (relative) slot
            # and ver, which are the copy's own.
            return Verdict.RETRANSMIT, [c.head[:6] + w.to_bytes(2, "big") + c.head[8:] + c.body]
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
