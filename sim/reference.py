"""Expected results of a workload: the golden model
(:class:`netagg.sim.message_model.Switch`) fed in arrival order, for every
test, bench and the self-test that checks the RTL. Pure Python and NumPy.

Contract: :meth:`Expectation.add` takes the next message (UDP payload bytes)
and its ``tag`` and records its verdict ``(code, tag)`` and the RESULTs it
causes ``(payload, tag)``, in send order; :func:`expected` does that for a
list of messages, message ``i`` tagged ``i mod 2**16`` (the RTL benches'
tagging). ``counters`` are the model's, every name of
:data:`netagg.wire.COUNTERS`.
"""

from __future__ import annotations

from collections import defaultdict

from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.message_model import Outcome, Switch
from netagg.wire import Header

TAG_MOD = 1 << 16
"""Tags are 16 bits (``netagg.hdl.layouts.TAG_BITS``)."""


class Expectation:
    """What the switch must do with messages given in arrival order."""

    def __init__(self, params: Params, jobs: JobTable):
        self.switch = Switch(params, jobs)
        self.verdicts: list[tuple[int, int]] = []
        self.results: list[tuple[bytes, int]] = []

    def add(self, payload: bytes, tag: int) -> Outcome:
        """The next message; returns the model's :class:`Outcome` of it."""
        out = self.switch.receive(payload)
        self.verdicts.append((int(out.verdict), tag))
        self.results.extend((r.pack(), tag) for r in out.results)
        return out

    @property
    def counters(self) -> dict[str, int]:
        return self.switch.counters


def expected(params: Params, jobs: JobTable, messages) -> Expectation:
    """The expectation of ``messages``, message ``i`` tagged ``i mod 2**16``."""
    exp = Expectation(params, jobs)
    for seq, payload in enumerate(messages):
        exp.add(payload, seq % TAG_MOD)
    return exp


def result_key(payload: bytes) -> tuple[int, int, int, int]:
    """(job, slot, ver, worker) of a RESULT: the order the switch keeps
    RESULTs in (docs/protocol.md); different keys may interleave."""
    h = Header.unpack(payload)
    return (h.job, h.slot, h.ver, h.worker)


def per_key(results) -> dict:
    """``(payload, tag)`` pairs grouped by :func:`result_key`, in order."""
    d = defaultdict(list)
    for payload, tag in results:
        d[result_key(payload)].append((payload, tag))
    return dict(d)
