"""Host side of the netagg UART bridge (``docs/boards.md``): SLIP framing,
the bridge's frame types, and a client that sends netagg messages to a
ULX3S or iCEBreaker running the bridge and collects verdicts and RESULTs.

Pure Python (termios for the tty; no pyserial). Messages are the bytes of
:mod:`netagg.sim.protocol` (the golden model's codec).

Framing: every frame is SLIP (RFC 1055): END (0xC0) before and after, 0xC0
in the body sent as ESC ESC_END (0xDB 0xDC), 0xDB as ESC ESC_ESC (0xDB
0xDD); empty frames are ignored. A frame's first byte is its type:

host -> board
  MSG   0x01  tag (2) + one netagg message (header + payload, as in UDP)
  CTRL  0x02  flags (1, bit 0 = write) + addr (2) + data (4): a control
              register access (docs/core.md; bridge registers from 0xC000)
  SYNC  0x03  (nothing): answered once everything sent before it is done

board -> host
  VERDICT  0x80  tag (2) + code (1): one per MSG, in order
  RESULT   0x81  tag (2) + one RESULT message (header + count elements)
  CTRLREP  0x82  addr (2) + data (4): the register after the access
  SYNCREP  0x83  (nothing)

All multi-byte fields are big-endian.

Command line::

    python -m netagg.sim.host_uart --port /dev/ttyUSB0 --jobs-config JOBS.json \\
        --in IN.pcap --out OUT.pcap [--stats STATS.json] [--baud 115200]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import select
import sys
import time
from collections.abc import Iterable

END, ESC, ESC_END, ESC_ESC = 0xC0, 0xDB, 0xDC, 0xDD

MSG, CTRL, SYNC = 0x01, 0x02, 0x03
VERDICT, RESULT, CTRLREP, SYNCREP = 0x80, 0x81, 0x82, 0x83

BRIDGE_BASE = 0xC000
BRIDGE_COUNTERS = ("bad_frame", "rx_overrun", "rx_frame_error", "verdict_overflow")
"""Bridge counters, readable at BRIDGE_BASE + index."""
COUNTER_BASE = 0x8000


def slip_encode(body: bytes) -> bytes:
    """One SLIP frame: END, escaped body, END."""
    out = bytearray([END])
    for b in body:
        if b == END:
            out += bytes([ESC, ESC_END])
        elif b == ESC:
            out += bytes([ESC, ESC_ESC])
        else:
            out.append(b)
    out.append(END)
    return bytes(out)


class SlipDecoder:
    """Incremental SLIP decoder: :meth:`feed` bytes, get complete frames.
    An escape followed by anything but ESC_END / ESC_ESC passes that byte
    through (RFC 1055); empty frames are skipped."""

    def __init__(self):
        self._buf = bytearray()
        self._esc = False

    def feed(self, data: bytes) -> list[bytes]:
        frames = []
        for b in data:
            if b == END:
                if self._buf:
                    frames.append(bytes(self._buf))
                self._buf.clear()
                self._esc = False
            elif b == ESC:
                self._esc = True
            else:
                if self._esc:
                    b = {ESC_END: END, ESC_ESC: ESC}.get(b, b)
                    self._esc = False
                self._buf.append(b)
        return frames


def msg_frame(message: bytes, tag: int) -> bytes:
    if not 0 <= tag < 1 << 16:
        raise ValueError(f"tag {tag} is not a 16-bit value")
    return bytes([MSG]) + tag.to_bytes(2, "big") + bytes(message)


def ctrl_frame(addr: int, data: int = 0, write: bool = False) -> bytes:
    if not 0 <= addr < 1 << 16 or not 0 <= data < 1 << 32:
        raise ValueError(f"control access out of range: addr={addr:#x} data={data:#x}")
    return bytes([CTRL, int(write)]) + addr.to_bytes(2, "big") + data.to_bytes(4, "big")


def sync_frame() -> bytes:
    return bytes([SYNC])


@dataclasses.dataclass(frozen=True)
class Reply:
    """A decoded board -> host frame."""

    type: int
    tag: int = 0
    code: int = 0          # VERDICT
    message: bytes = b""   # RESULT
    addr: int = 0          # CTRLREP
    data: int = 0          # CTRLREP


class FrameError(ValueError):
    """A frame from the board that does not parse."""


def parse_reply(frame: bytes) -> Reply:
    if not frame:
        raise FrameError("empty frame")
    kind, body = frame[0], frame[1:]
    if kind == VERDICT and len(body) == 3:
        return Reply(VERDICT, tag=int.from_bytes(body[:2], "big"), code=body[2])
    if kind == RESULT and len(body) >= 2 + 16:
        return Reply(RESULT, tag=int.from_bytes(body[:2], "big"), message=bytes(body[2:]))
    if kind == CTRLREP and len(body) == 6:
        return Reply(CTRLREP, addr=int.from_bytes(body[:2], "big"),
                     data=int.from_bytes(body[2:], "big"))
    if kind == SYNCREP and not body:
        return Reply(SYNCREP)
    raise FrameError(f"unexpected frame type {kind:#04x} with {len(body)} body bytes")


def job_writes(jobs) -> list[tuple[int, int]]:
    """Control writes (addr, data) that load a JobTable (docs/core.md): for
    every entry 0..J-1, slot base and count, then enable and W; unlisted or
    disabled jobs are written disabled."""
    writes = []
    for j in range(jobs.params.jobs):
        job = jobs[j] if j in jobs else None
        if job is not None and job.enabled:
            writes += [(4 * j + 1, job.slot_base), (4 * j + 2, job.slots),
                       (4 * j + 0, 1 | (job.workers << 8))]
        else:
            writes.append((4 * j + 0, 0))
    return writes


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
        from netagg.sim.protocol import COUNTERS
        out = {name: self.ctrl(COUNTER_BASE + i) for i, name in enumerate(COUNTERS)}
        out["stall"] = self.ctrl(COUNTER_BASE + len(COUNTERS))
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


# -- command line --------------------------------------------------------

def main(argv=None) -> int:
    import json

    from netagg.params import ParamError, Params
    from netagg.sim import pcap
    from netagg.sim.jobs import JobTable
    from netagg.sim.model import Router, classify
    from netagg.sim.protocol import Header, Message, decode_values

    ap = argparse.ArgumentParser(prog="python -m netagg.sim.host_uart",
                                 description="Aggregate the netagg messages of a pcap on a "
                                             "board running the UART bridge.")
    ap.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyUSB0")
    ap.add_argument("--baud", type=int, default=115200)
    ap.add_argument("--jobs-config", metavar="JOBS.json",
                    help="load this job table first (else the board's is used)")
    ap.add_argument("--in", dest="in_path", required=True, metavar="IN.pcap")
    ap.add_argument("--out", dest="out_path", metavar="OUT.pcap",
                    help="RESULT frames, addressed as `netagg model` addresses them")
    ap.add_argument("--stats", metavar="STATS.json", help="write the board's counters")
    ap.add_argument("--window", type=int, default=1,
                    help="messages in flight (default 1)")
    ap.add_argument("--timeout", type=float, default=5.0)
    for name, default in (("workers", 8), ("slots", 256), ("elements", 64), ("lanes", 8),
                          ("jobs", 4)):
        ap.add_argument(f"--{name}", type=int, default=default,
                        help=f"the board's build parameter (default {default})")
    args = ap.parse_args(argv)
    try:
        params = Params(workers=args.workers, slots=args.slots, elements=args.elements,
                        lanes=args.lanes, jobs=args.jobs)
        jobs = JobTable.from_file(args.jobs_config, params) if args.jobs_config else None
        messages, ignored = classify(pcap.read(args.in_path), params.port)
        link = BridgeClient(TtyTransport(args.port, args.baud), window=args.window,
                            timeout=args.timeout)
        if jobs is not None:
            link.load_jobs(jobs)
        verdicts, results = link.run([m.payload for m in messages])
        router = Router(params)
        by_tag = {}
        for i, (m, (_, code)) in enumerate(zip(messages, verdicts, strict=True)):
            router.note(m, code)
            by_tag[i & 0xFFFF] = m.seq
        out = []
        for tag, raw in results:
            h = Header.unpack(raw)
            msg = Message(h, decode_values(h.dtype, raw[16:]))
            seq = by_tag[tag]
            out.append(pcap.Record(router.frame(msg, seq), 0))
        print(f"host_uart: {len(messages)} messages ({ignored} frames ignored), "
              f"{len(results)} RESULTs, {sum(1 for _, c in verdicts if c > 1)} dropped")
        if args.out_path:
            pcap.write(args.out_path, out)
        if args.stats:
            stats = link.counters()
            stats["ignored"] = ignored
            with open(args.stats, "w") as f:
                json.dump(stats, f, indent=1)
    except (ParamError, OSError, ValueError, TimeoutError) as e:
        print(f"host_uart: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
