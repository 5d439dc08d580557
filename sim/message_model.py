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
    done, the RESULT values and status."""

    __slots__ = ("bits", "n", "done", "meta", "acc", "nan", "ovf", "values", "status")

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


class Switch:
    """The netagg switch for one build (``params``) and job table (``jobs``,
    a JobTable or a list of Job, validated against ``params``).

    ``counters`` is a dict with every name of :data:`protocol.COUNTERS`.
    """

    def __init__(self, params: Params, jobs: JobTable | Iterable[Job]):
        if not isinstance(jobs, JobTable):
            jobs = JobTable(jobs, params)
        elif jobs.params != params:
            # A table validated against other parameters may not fit this core.
            jobs = JobTable(list(jobs), params)
        self.params = params
        self.jobs = jobs
        self._dtypes = frozenset(int(DType.from_name(n)) for n in params.dtypes)
        self._ops = frozenset(int(Op.from_name(n)) for n in params.ops)
        self._mode = params.bf16_accumulate
        self._copies: dict[tuple[int, int], _Copy] = {}
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)

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
        data = bytes(data)
        self.counters["rx"] += 1
        verdict, h = self.validate(data)
        if verdict is not None:
            return self._drop(verdict)

        job = self.jobs.get(h.job)
        slot = job.slot_base + h.slot
        w = h.worker
        c = self._copy(slot, h.ver)
        meta = (h.dtype, h.op, h.count, h.offset)

        if not (c.bits >> w) & 1:                        # a new contribution
            if c.n > 0 and not c.done and meta != c.meta:
                return self._drop(Verdict.MISMATCH)
            o = self._copies.get((slot, 1 - h.ver))
            if o is not None and o.done:
                o.bits &= ~(1 << w)                      # w has the previous result
            values = decode_values(h.dtype, data[HEADER_BYTES:])
            if c.n == 0 or c.done:                       # first of a new round
                c.acc, nan = arith.to_acc(h.dtype, values, self._mode)
                c.meta, c.bits, c.n, c.done = meta, 1 << w, 1, False
                c.nan, c.ovf = bool(nan.any()), False
                c.values, c.status = None, 0
            else:
                c.acc, nan, ovf = arith.combine(h.dtype, h.op, c.acc, values, self._mode)
                c.bits |= 1 << w
                c.n += 1
                c.nan |= bool(nan.any())
                c.ovf |= bool(ovf.any())
            results = []
            if c.n == job.workers:                       # the round is complete
                c.done = True
                out, ovf = arith.from_acc(h.dtype, c.acc, self._mode)
                c.ovf |= bool(ovf.any())
                c.values = np.array(out, dtype=np.uint32)
                c.values.setflags(write=False)
                c.status = (c.n | (STATUS_NAN if c.nan else 0)
                            | (STATUS_OVERFLOW if c.ovf else 0))
                results = [self._result(c, h, dest) for dest in range(job.workers)]
                self.counters["results"] += 1
                self.counters["tx"] += len(results)
            return Outcome(Verdict.ACCEPT, results)

        if c.done:                                       # a retransmission
            self.counters["retransmit"] += 1
            self.counters["tx"] += 1
            return Outcome(Verdict.RETRANSMIT, [self._result(c, h, w)])
        return self._drop(Verdict.DUPLICATE)

    def _drop(self, verdict: Verdict) -> Outcome:
        self.counters[verdict.counter] += 1
        return Outcome(verdict, [])

    def _copy(self, slot: int, ver: int) -> _Copy:
        c = self._copies.get((slot, ver))
        if c is None:
            c = self._copies[(slot, ver)] = _Copy()
        return c

    @staticmethod
    def _result(c: _Copy, h: Header, dest: int) -> Message:
        dtype, op, count, offset = c.meta
        header = Header(version=VERSION, type=MsgType.RESULT, reserved=0, ver=h.ver,
                        job=h.job, dtype=dtype, op=op, slot=h.slot, worker=dest,
                        offset=offset, count=count, status=c.status)
        return Message(header, c.values)

    # -- introspection ---------------------------------------------------

    def copy_state(self, job: int, slot: int, ver: int) -> CopyState:
        """Snapshot of copy ``ver`` of the job's (relative) slot ``slot``."""
        j = self.jobs[job]
        if not 0 <= slot < j.slots or ver not in (0, 1):
            raise ValueError(f"no copy ({slot}, {ver}) in job {job}")
        c = self._copies.get((j.slot_base + slot, ver)) or _Copy()
        bits = frozenset(w for w in range(self.params.workers) if (c.bits >> w) & 1)
        return CopyState(bits, c.n, c.done, c.meta)
