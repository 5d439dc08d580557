"""``netagg serve``: a netagg switch on a UDP socket (``docs/host.md``).

Plain Python and NumPy. Every datagram received on the listening socket is
one netagg message; messages go to the backend one at a time, in arrival
order, and each RESULT the backend produces is sent from the listening
socket to the (IP, UDP port) the destination worker's most recent accepted
CONTRIB (verdict accept or retransmit) in that job came from: the addressing
rule of ``netagg sim`` / ``netagg model``.

Backends (:class:`ModelBackend`, and :class:`netagg.host.rtl.RtlBackend`)
have one method, ``process(data) -> (verdict, [RESULT bytes])``, and a
``counters`` dict with every counter of protocol.md.

Fault injection (one :class:`random.Random` seeded with ``seed``; draws in
a fixed order per datagram: loss of the received datagram, then its
duplication, then one loss draw per RESULT): ``loss`` drops a received
datagram before the backend sees it (``lost_in``) and a RESULT instead of
sending it (``lost_out``); ``dup`` hands a received datagram to the backend
twice (``duplicated``).

Recording: ``DIR/in.pcap`` holds every message the backend processed, in
order, as an Ethernet II / IPv4 / UDP frame from the datagram's source
(IP, port) to the switch's endpoint (``--switch-mac``, ``--switch-ip``,
``--port``: what ``netagg model`` classifies and answers from, whatever
address serve listens on); ``DIR/out.pcap`` every RESULT the backend
produced (including the ones ``loss`` dropped) as ``netagg model`` frames
it. MAC addresses of hosts are derived from their IPv4 address by
:func:`mac_for_ip` (``02:00`` followed by the four address bytes). Both files
are flushed after every frame.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

from netagg import frames as framing
from netagg import pcap
from netagg.frames import Endpoint
from netagg.host import mmsg
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.wire import JOB_BYTE, WORKER_BYTES, Verdict

_RETRANSMIT = int(Verdict.RETRANSMIT)
MAX_DATAGRAM = 65507
"""The largest UDP payload of an IPv4 datagram."""
RECORD_SNAPLEN = 262144
"""Snap length of recorded pcaps: a 65507-byte message makes a 65549-byte frame."""
FAULT_COUNTERS = ("lost_in", "lost_out", "duplicated")

# (job, worker) of a message, read in place on the hot path (netagg.wire.FIELD_BYTES)
_J, _W0, _W1 = JOB_BYTE, WORKER_BYTES.start, WORKER_BYTES.start + 1


class ServeError(ValueError):
    """A refusal of ``netagg serve`` (one line)."""


def mac_for_ip(ip: bytes) -> bytes:
    """The MAC address recorded for a host: locally administered unicast
    ``02:00:a:b:c:d`` for IPv4 address ``a.b.c.d``."""
    return b"\x02\x00" + bytes(ip)


def parse_listen(text: str, default_port: int) -> tuple[str, int]:
    """``ADDR[:PORT]`` to (IPv4 address, port); a bare address takes
    ``default_port``. ``ADDR`` is an IPv4 address or a host name that
    resolves to one (``localhost``); the address returned is numeric."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port)
    try:
        number = int(port)
    except ValueError:
        raise ServeError(f"--listen {text!r} is not ADDR:PORT") from None
    if not 0 <= number <= 65535:
        raise ServeError(f"--listen port {number} is not in 0..65535")
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_DGRAM)
        except (OSError, UnicodeError):
            infos = []
        if not host or not infos:
            raise ServeError(f"--listen {text!r}: {host!r} is not an IPv4 address "
                             "or a host name that resolves to one") from None
        host = infos[0][4][0]
    return host, number


class PcapStream:
    """A classic pcap file written one frame at a time, flushed after each,
    so it is complete and valid whenever no frame is being written."""

    def __init__(self, path: str):
        try:
            self._f = open(path, "wb")   # noqa: SIM115 (closed by close())
        except OSError as e:
            raise ServeError(f"cannot write {path}: {e.strerror or e}") from None
        self._f.write(struct.pack("<IHHiIII", pcap.MAGIC_US, 2, 4, 0, 0, RECORD_SNAPLEN,
                                  pcap.LINKTYPE_ETHERNET))
        self._f.flush()

    def write(self, frame: bytes, ts_ns: int) -> None:
        sec, usec = divmod(ts_ns // 1000, 1_000_000)
        self._f.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class ModelBackend:
    """The golden model (:class:`netagg.sim.message_model.Switch`)."""

    name = "model"

    def __init__(self, params: Params, jobs: JobTable):
        from netagg.sim.message_model import Switch
        self.switch = Switch(params, jobs)
        self.counters = self.switch.counters
        self.process = self.switch.process

    def set_jobs(self, jobs: JobTable) -> None:
        self.switch.set_jobs(jobs)

    def close(self) -> None:
        pass


class _Stop(Exception):
    pass


class Server:
    """The switch on a UDP socket. ``run()`` serves until :meth:`stop` (or
    SIGINT / SIGTERM when ``handle_signals``), then writes the stats."""

    def __init__(self, params: Params, jobs: JobTable | None, *, listen: tuple[str, int],
                 backend: str = "model", simulator: str = "verilator", record: str | None = None,
                 stats_path: str | None = None, loss: float = 0.0, dup: float = 0.0,
                 seed: int = 0, fp_stages: int | None = None, ctrl_key: int | None = None,
                 ctrl_port: int | None = None, batch: int = 64):
        for name, p in (("--loss", loss), ("--dup", dup)):
            if not 0.0 <= p <= 1.0:
                raise ServeError(f"{name} must be in 0..1, not {p}")
        if jobs is None:
            if ctrl_key is None:
                raise ServeError("a job table is needed: --jobs-config, or --ctrl-key to "
                                 "load one over the control plane")
            jobs = JobTable([], params)
        self.params = params
        self.jobs = jobs
        self.loss, self.dup = float(loss), float(dup)
        self.seed = seed
        self.batch = int(batch)     # datagrams per recvmmsg (0: one recvfrom each)
        self.stats_path = stats_path
        self.rng = random.Random(seed)
        self.faults = dict.fromkeys(FAULT_COUNTERS, 0)
        self.book: dict[tuple[int, int], tuple[str, int]] = {}
        self._stop = False
        self._in_recv = False
        self.switch_ep = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
            self.sock.bind(listen)
        except OSError as e:
            self.sock.close()
            raise ServeError(f"cannot listen on {listen[0]}:{listen[1]}: "
                             f"{e.strerror or e}") from None
        self.address = self.sock.getsockname()
        self.ctrl = None
        try:
            if ctrl_key is not None:
                from netagg.host.ctl import ControlServer
                self.ctrl = ControlServer(self, ctrl_key, (listen[0], ctrl_port))
            if backend == "model":
                self.backend = ModelBackend(params, jobs)
            elif backend == "rtl":
                from netagg.host.rtl import RtlBackend
                self.backend = RtlBackend(params, jobs, simulator=simulator,
                                          fp_stages=fp_stages)
            else:
                raise ServeError(f"unknown backend {backend!r} (model or rtl)")
        except BaseException:
            self.sock.close()
            if self.ctrl is not None:
                self.ctrl.close()
            raise
        self.in_pcap = self.out_pcap = None
        if record is not None:
            try:
                os.makedirs(record, exist_ok=True)
            except OSError as e:
                self.close()
                raise ServeError(f"cannot create {record}: {e.strerror or e}") from None
            self.in_pcap = PcapStream(os.path.join(record, "in.pcap"))
            self.out_pcap = PcapStream(os.path.join(record, "out.pcap"))

    # -- reporting -------------------------------------------------------

    def ready_line(self) -> str:
        jobs = ", ".join(f"job {j.id} (W={j.workers}, slots {j.slot_base}..{j.slot_end - 1})"
                         for j in self.jobs if j.enabled) or "no jobs"
        ctrl = (f", control plane on udp {self.ctrl.address[0]}:{self.ctrl.address[1]}"
                if self.ctrl is not None else "")
        faults = (f", loss {self.loss:g}, dup {self.dup:g}, seed {self.seed}"
                  if self.loss or self.dup else "")
        return (f"netagg serve: listening on udp {self.address[0]}:{self.address[1]}, "
                f"backend {self.backend.name}, {jobs}{faults}{ctrl}")

    def stats(self) -> dict[str, int]:
        """Every counter of ``netagg model``'s STATS.json, plus the fault counters
        (and the control plane's, when it is on)."""
        s = {k: int(v) for k, v in self.backend.counters.items()}
        s["ignored"] = 0            # every datagram is a netagg message
        s.update(self.faults)
        if self.ctrl is not None:
            s.update(self.ctrl.counters)
        return s

    def write_stats(self) -> None:
        if self.stats_path is None:
            return
        try:
            with open(self.stats_path, "w", encoding="utf-8") as f:
                json.dump(self.stats(), f, indent=1)
                f.write("\n")
        except OSError as e:
            raise ServeError(f"cannot write {self.stats_path}: {e.strerror or e}") from None

    # -- the data plane --------------------------------------------------

    def handle(self, data: bytes, addr: tuple[str, int]) -> None:
        """One received datagram (after the loss draw): to the backend,
        once or twice."""
        self._process(data, addr)
        if self.dup and self.rng.random() < self.dup:
            self.faults["duplicated"] += 1
            self._process(data, addr)

    def _process(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.in_pcap is not None:
            ip = socket.inet_aton(addr[0])
            src = Endpoint(mac_for_ip(ip), ip, addr[1])
            self.in_pcap.write(framing.build_frame(data, src, self.switch_ep), time.time_ns())
        verdict, results = self.backend.process(data)
        if verdict <= Verdict.RETRANSMIT:          # accepted: its sender is the worker's address
            self.book[(data[_J], (data[_W0] << 8) | data[_W1])] = addr
        if not results:
            return
        book, sock, loss, rng = self.book, self.sock, self.loss, self.rng
        for r in results:
            dst = book.get((r[_J], (r[_W0] << 8) | r[_W1]))
            if dst is None:                        # no accepted CONTRIB (job table reloaded)
                continue
            if self.out_pcap is not None:
                ip = socket.inet_aton(dst[0])
                self.out_pcap.write(framing.build_frame(
                    r, self.switch_ep, Endpoint(mac_for_ip(ip), ip, dst[1])), time.time_ns())
            if loss and rng.random() < loss:
                self.faults["lost_out"] += 1
                continue
            try:
                sock.sendto(r, dst)
            except OSError:
                pass                               # e.g. a full buffer: as lost on the wire

    def set_jobs(self, jobs: JobTable) -> None:
        """Replace the job table (the control plane's job writes)."""
        self.jobs = jobs
        self.backend.set_jobs(jobs)

    def stop(self) -> None:
        """Ask :meth:`run` to return after the message in hand."""
        self._stop = True

    def _signal(self, signum, frame):
        self._stop = True
        if self._in_recv:                          # (the per-datagram loop only)
            raise _Stop

    def run(self, *, handle_signals: bool = True, ready=None) -> dict[str, int]:
        """Serve until stopped; returns (and writes) the stats."""
        old = {}
        if handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, self._signal)
        buf = bytearray(MAX_DATAGRAM + 1)
        view = memoryview(buf)
        sock, ctrl = self.sock, self.ctrl
        if ctrl is not None:
            sock.setblocking(False)
            waitlist = [sock, ctrl.sock]
        elif not handle_signals:
            sock.settimeout(0.05)
        if ready is not None:
            ready(self.ready_line())
        since_poll = 0
        # No fault injection and no recording: the loop handles each message
        # itself (the same steps as handle() and _process()).
        plain = not self.loss and not self.dup and self.in_pcap is None
        if plain and self.batch and mmsg.available():
            try:
                self._run_batched()
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)
            self.write_stats()
            return self.stats()
        process, book, sendto = self.backend.process, self.book, sock.sendto
        book_get, recvfrom_into = book.get, sock.recvfrom_into
        try:
            while not self._stop:
                try:
                    self._in_recv = True
                    n, addr = recvfrom_into(buf)
                except _Stop:
                    break
                except (TimeoutError, InterruptedError):
                    continue
                except BlockingIOError:           # only with the control plane
                    try:
                        ctrl.poll()
                        select.select(waitlist, (), (), 0.05)
                    except _Stop:
                        break
                    continue
                except OSError:
                    continue                       # e.g. ICMP port unreachable reported back
                finally:
                    self._in_recv = False
                if ctrl is not None:
                    since_poll += 1
                    if since_poll >= 64:           # not starved by a busy data plane
                        since_poll = 0
                        ctrl.poll()
                if plain:                          # the hot path: _process inlined
                    data = bytes(view[:n])
                    verdict, results = process(data)
                    if verdict <= _RETRANSMIT:     # accepted: the worker's address
                        key = (data[_J], (data[_W0] << 8) | data[_W1])
                        if book_get(key) != addr:
                            book[key] = addr
                    for r in results:
                        dst = book_get((r[_J], (r[_W0] << 8) | r[_W1]))
                        if dst is not None:
                            try:
                                sendto(r, dst)
                            except OSError:
                                pass
                    continue
                if self.loss and self.rng.random() < self.loss:
                    self.faults["lost_in"] += 1
                    continue
                self.handle(bytes(view[:n]), addr)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        self.write_stats()
        return self.stats()

    def _run_batched(self) -> None:
        """The hot path with recvmmsg / sendmmsg (:mod:`netagg.host.mmsg`): the
        steps of :meth:`_process` for each datagram of a batch, in arrival
        order; the RESULTs of a batch leave together at its end. A signal
        or :meth:`stop` ends it within the receive timeout."""
        ctrl = self.ctrl
        io = mmsg.BatchIO(self.sock, batch=self.batch,
                          timeout=0.01 if ctrl is not None else 0.05)
        process, book = self.backend.process, self.book
        book_get, recv, addr_of, send, flush = book.get, io.recv, io.addr, io.send, io.flush
        since_poll = 0
        while not self._stop:
            k = recv()
            if ctrl is not None:
                since_poll += k
                if not k or since_poll >= 64:      # idle, or not starved by a busy data plane
                    since_poll = 0
                    ctrl.poll()
            for i, data in enumerate(io.data[:k]):
                verdict, results = process(data)
                if verdict <= _RETRANSMIT:         # accepted: the worker's address
                    addr = addr_of(i)
                    key = (data[_J], (data[_W0] << 8) | data[_W1])
                    if book_get(key) is not addr:
                        book[key] = addr
                for r in results:
                    dst = book_get((r[_J], (r[_W0] << 8) | r[_W1]))
                    if dst is not None:
                        send(r, dst)
            flush()

    def close(self) -> None:
        self.sock.close()
        if self.ctrl is not None:
            self.ctrl.close()
        for f in (self.in_pcap, self.out_pcap):
            if f is not None:
                f.close()
        self.backend.close()


def serve_main(params: Params, jobs: JobTable | None, **kw) -> int:
    """``netagg serve``: build the server, print the ready line, serve until
    SIGINT / SIGTERM, write STATS.json; exit status 0."""
    server = Server(params, jobs, **kw)
    try:
        server.run(ready=lambda line: print(line, flush=True))
    finally:
        server.close()
    s = server.stats()
    print(f"netagg serve: stopped: {s['rx']} messages, {s['results']} rounds completed, "
          f"{s['tx']} RESULTs, {s['lost_in']} lost in, {s['lost_out']} lost out, "
          f"{s['duplicated']} duplicated", file=sys.stderr, flush=True)
    return 0


__all__ = ["MAX_DATAGRAM", "ModelBackend", "PcapStream", "Server", "ServeError",
           "mac_for_ip", "parse_listen", "serve_main"]
