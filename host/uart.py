"""Host-side client of the netagg UART bridge (``docs/boards.md``): sends
netagg messages to a ULX3S or iCEBreaker running the bridge and collects
verdicts and RESULTs. The link format is :mod:`netagg.uartlink`, the
register map :mod:`netagg.regmap`.

Pure Python (termios for the tty; no pyserial).

Command line (``docs/boards.md``)::

    netagg uart --device /dev/ttyUSB0 [--baud 115200] [--jobs-config JOBS.json] \\
        --in IN.pcap [--out OUT.pcap] [--stats STATS.json] [build params]
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Iterable

from netagg.regmap import BRIDGE_BASE, BRIDGE_COUNTERS, CORE_COUNTERS, COUNTER_BASE, job_writes
from netagg.uartlink import (
    CTRLREP,
    RESULT,
    SYNCREP,
    VERDICT,
    Reply,
    SlipDecoder,
    ctrl_frame,
    msg_frame,
    parse_reply,
    slip_encode,
    sync_frame,
)

# -- transports ----------------------------------------------------------

class TtyTransport:
    """A serial port in raw mode (termios), 8N1, no flow control."""

    def __init__(self, path: str, baud: int = 115200):
        import termios
        import tty
        speed = getattr(termios, f"B{baud}", None)
        if speed is None:
            raise ValueError(f"baud rate {baud} is not supported by termios")
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        attrs = termios.tcgetattr(self.fd)
        attrs[4] = attrs[5] = speed
        attrs[2] &= ~(termios.PARENB | termios.CSTOPB | termios.CRTSCTS)
        attrs[2] |= termios.CS8 | termios.CLOCAL | termios.CREAD
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        termios.tcflush(self.fd, termios.TCIOFLUSH)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        return os.read(self.fd, 4096) if ready else b""

    def close(self) -> None:
        os.close(self.fd)


class BridgeTimeout(TimeoutError):
    pass


class BridgeClient:
    """Talks to the bridge over a transport with ``write(bytes)`` and
    ``read(timeout) -> bytes``.

    Flow control: at most ``window`` MSG frames wait for their VERDICT (the
    board buffers one rx FIFO of bytes; the default of 1 never overflows it).
    """

    def __init__(self, transport, *, window: int = 1, timeout: float = 5.0):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.transport = transport
        self.window = window
        self.timeout = timeout
        self._decoder = SlipDecoder()
        self._pending: list[Reply] = []
        self.verdicts: list[tuple[int, int]] = []       # (tag, code) in order
        self.results: list[tuple[int, bytes]] = []      # (tag, RESULT message) in order
        self._outstanding = 0

    def _poll(self, timeout: float) -> bool:
        data = self.transport.read(timeout)
        for frame in self._decoder.feed(data):
            reply = parse_reply(frame)
            if reply.type == VERDICT:
                self.verdicts.append((reply.tag, reply.code))
                self._outstanding -= 1
            elif reply.type == RESULT:
                self.results.append((reply.tag, reply.message))
            else:
                self._pending.append(reply)
        return bool(data)

    def _wait(self, done, what: str):
        deadline = time.monotonic() + self.timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BridgeTimeout(f"no {what} from the board within {self.timeout:g} s")
            self._poll(min(left, 0.05))

    def send(self, message: bytes, tag: int) -> None:
        """Send one netagg message (waits while ``window`` are unanswered)."""
        self._wait(lambda: self._outstanding < self.window, "VERDICT")
        self.transport.write(slip_encode(msg_frame(message, tag)))
        self._outstanding += 1

    def _reply(self, kind: int, what: str) -> Reply:
        def found():
            return any(r.type == kind for r in self._pending)
        self._wait(found, what)
        i = next(i for i, r in enumerate(self._pending) if r.type == kind)
        return self._pending.pop(i)

    def ctrl(self, addr: int, data: int = 0, write: bool = False) -> int:
        self.transport.write(slip_encode(ctrl_frame(addr, data, write)))
        return self._reply(CTRLREP, "control reply").data

    def sync(self) -> None:
        """Wait until every message sent so far is processed and its RESULTs
        received."""
        self.transport.write(slip_encode(sync_frame()))
        self._reply(SYNCREP, "SYNC reply")

    def load_jobs(self, jobs) -> None:
        for addr, data in job_writes(jobs):
            self.ctrl(addr, data, write=True)

    def counters(self) -> dict[str, int]:
        out = {name: self.ctrl(COUNTER_BASE + i) for i, name in enumerate(CORE_COUNTERS)}
        for i, name in enumerate(BRIDGE_COUNTERS):
            out[name] = self.ctrl(BRIDGE_BASE + i)
        return out

    def run(self, messages: Iterable[bytes]) -> tuple[list[tuple[int, int]],
                                                      list[tuple[int, bytes]]]:
        """Send messages (tags 0, 1, ...), sync, return (verdicts, results)."""
        start_v, start_r = len(self.verdicts), len(self.results)
        for tag, message in enumerate(messages):
            self.send(message, tag & 0xFFFF)
        self.sync()
        return self.verdicts[start_v:], self.results[start_r:]


# -- the `netagg uart` command ---------------------------------------------

def run_pcap(params, device: str, in_path, *, baud: int = 115200, jobs=None, out_path=None,
             stats_path=None, window: int = 1, timeout: float = 5.0) -> str:
    """Aggregate the netagg messages of a pcap on a board running the UART
    bridge (``netagg uart``): RESULT frames to ``out_path``, addressed as
    ``netagg model`` addresses them, the board's counters (plus ``ignored``)
    to ``stats_path``. Returns the one-line summary."""
    import json

    from netagg import pcap
    from netagg.payload import Message, decode_values
    from netagg.sim.frame_model import Router, classify
    from netagg.wire import HEADER_BYTES, Header

    messages, ignored = classify(pcap.read(in_path), params.port)
    link = BridgeClient(TtyTransport(device, baud), window=window, timeout=timeout)
    try:
        if jobs is not None:
            link.load_jobs(jobs)
        verdicts, results = link.run([m.payload for m in messages])
        stats = link.counters() if stats_path else None
    finally:
        link.transport.close()
    router = Router(params)
    by_tag = {}
    for i, (m, (_, code)) in enumerate(zip(messages, verdicts, strict=True)):
        router.note(m, code)
        by_tag[i & 0xFFFF] = m.seq
    out = []
    for tag, raw in results:
        h = Header.unpack(raw)
        msg = Message(h, decode_values(h.dtype, raw[HEADER_BYTES:]))
        out.append(pcap.Record(router.frame(msg, by_tag[tag]), 0))
    if out_path:
        pcap.write(out_path, out)
    if stats_path:
        stats["ignored"] = ignored
        with open(stats_path, "w") as f:
            json.dump(stats, f, indent=1)
    return (f"netagg uart: {len(messages)} messages ({ignored} frames ignored), "
            f"{len(results)} RESULTs, {sum(1 for _, c in verdicts if c > 1)} dropped")
