"""The frame-level golden model behind ``netagg model``: Ethernet frames in,
RESULT frames and counters out. Its pieces (:func:`classify`,
:class:`Router`) are what the RTL harness uses around the simulated core, so
that ``netagg sim`` and ``netagg model`` frame and address messages the same
way.

Pure Python and NumPy.

Contract of :func:`run_model`: frames are taken in order; a frame that is not
a netagg message (:func:`netagg.frames.parse`) only counts as
``ignored``; every other one goes through :class:`netagg.sim.message_model.Switch`.
Each RESULT becomes one frame, in send order, from the switch's endpoint
(``switch_mac``, ``switch_ip``, ``port``) to the endpoint (MAC, IP, UDP
source port) of the destination worker's most recent accepted CONTRIB (a new
contribution or a retransmission) in that job, as of the message that caused
the RESULT.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from netagg import frames as framing
from netagg import wire
from netagg.frames import AddressBook, Endpoint
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.payload import Message
from netagg.pcap import Record
from netagg.sim.message_model import Switch
from netagg.wire import Verdict

HEADERS = framing.ETH_HEADER + framing.IPV4_HEADER + framing.UDP_HEADER


class Ingress(NamedTuple):
    """One netagg message of the input: ``seq`` is the index of its frame
    in the input (ignored frames included), ``endpoint`` its sender."""

    seq: int
    payload: bytes
    endpoint: Endpoint


def classify(frames: Iterable[bytes | Record], port: int) -> tuple[list[Ingress], int]:
    """The netagg messages of a frame sequence, and how many frames were
    ignored (not netagg messages)."""
    messages, ignored = [], 0
    for seq, frame in enumerate(frames):
        if isinstance(frame, Record):
            frame = frame.data
        d = framing.parse(frame, port)
        if d is None:
            ignored += 1
        else:
            messages.append(Ingress(seq, d.payload, d.src))
    return messages, ignored


def switch_endpoint(params: Params) -> Endpoint:
    """The source of RESULT frames."""
    return Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)


class Router:
    """Addresses RESULTs: remembers accepted senders (:meth:`note`, in seq
    order) and frames a RESULT caused by message ``seq`` (:meth:`frame`)."""

    def __init__(self, params: Params):
        self.src = switch_endpoint(params)
        self.book = AddressBook()
        self._heads: dict[tuple[Endpoint, int], bytes] = {}

    def note(self, message: Ingress, verdict: Verdict) -> None:
        """Record a message's verdict: an accepted CONTRIB (ACCEPT or
        RETRANSMIT) updates its worker's endpoint."""
        if verdict <= Verdict.RETRANSMIT:              # accepted
            p = message.payload
            job, worker = wire.job_worker(p)
            self.book.note(message.seq, job, worker, message.endpoint)

    def frame(self, result: Message | bytes, seq: int) -> bytes:
        """The frame of a RESULT (a Message or its bytes) caused by message
        ``seq``."""
        if isinstance(result, Message):
            result = result.pack()
        dst = self.book.lookup(seq, *wire.job_worker(result))
        # The Ethernet / IPv4 / UDP headers depend on the destination and the
        # length only: built once per pair.
        key = (dst, len(result))
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) > 4096:
                self._heads.clear()
            head = self._heads[key] = framing.build_frame(
                bytes(len(result)), self.src, dst)[:HEADERS]
        return (head + result).ljust(framing.MIN_FRAME, b"\0")


def run_model_seq(params: Params, jobs: JobTable, frames: Iterable[bytes | Record]
                  ) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
    """Like :func:`run_model`, each output frame paired with the seq (input
    frame index) of the message that caused it."""
    messages, ignored = classify(frames, params.port)
    switch = Switch(params, jobs)
    router = Router(params)
    out = []
    for m in messages:
        verdict, results = switch.process(m.payload)
        router.note(m, verdict)
        out.extend((m.seq, router.frame(r, m.seq)) for r in results)
    stats = dict(switch.counters)
    stats["ignored"] = ignored
    return out, stats


def run_model(params: Params, jobs: JobTable, frames: Iterable[bytes | Record]
              ) -> tuple[list[bytes], dict[str, int]]:
    """RESULT frames in send order, and the stats: every counter of
    protocol.md plus ``ignored``."""
    out, stats = run_model_seq(params, jobs, frames)
    return [frame for _, frame in out], stats
