"""``netagg serve --backend rtl``: the generated core under a simulator
(Verilator by default, or Icarus), serving messages as they arrive: a
real-time co-simulation, not a replay.

:class:`RtlBackend` starts the cocotb test :mod:`netagg.sim.cocotb.serve_rtl`
through :func:`netagg.sim.harness.run_cocotb` (cached builds) in a thread and
talks to it over a Unix stream socket (the request format is that module's).
Each message is presented to the core when serve hands it over; the
simulation runs until the core is idle and returns the message's verdict and
the RESULTs the core sent, in order. So for one arrival order the RESULTs are
those of the golden model, per (job, slot, ver, worker) in the same order.
``counters`` are the core's own (read through its control port; the last
values read if the simulation has stopped).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import tempfile
import threading
import time

from netagg.jobs import JobTable
from netagg.params import Params
from netagg.wire import COUNTERS

MODULE = "netagg.sim.cocotb.serve_rtl"
ENV_SOCK = "NETAGG_SERVE_SOCK"
START_TIMEOUT = 3600.0
"""Seconds to wait for the simulator to connect (the first Verilator build
of a configuration takes minutes)."""


class RtlError(ValueError):
    """The simulation could not start or stopped (one line)."""


class RtlBackend:
    name = "rtl"

    def __init__(self, params: Params, jobs: JobTable, *, simulator: str = "verilator",
                 fp_stages: int | None = None, start_timeout: float = START_TIMEOUT):
        from netagg.sim import harness
        self.params = params
        self.simulator = simulator
        self._tmp = tempfile.TemporaryDirectory(prefix="netagg-serve-rtl-")
        path = os.path.join(self._tmp.name, "sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._error: BaseException | None = None
        self._counters = dict.fromkeys(COUNTERS, 0)
        self.sock = None

        def body():
            try:
                harness.run_cocotb(params, MODULE, simulator=simulator, fp_stages=fp_stages,
                                   env={ENV_SOCK: path}, quiet=True)
            except BaseException as e:     # noqa: BLE001 (reported by the server)
                self._error = e

        self._thread = threading.Thread(target=body, daemon=True, name="netagg-rtl")
        self._thread.start()
        self._listener.settimeout(0.5)
        deadline = time.monotonic() + start_timeout
        try:
            while self.sock is None:
                try:
                    self.sock, _ = self._listener.accept()
                except TimeoutError:
                    if not self._thread.is_alive():
                        raise RtlError(f"the {simulator} simulation did not start: "
                                       f"{self._why()}") from None
                    if time.monotonic() > deadline:
                        raise RtlError(f"the {simulator} simulation did not start within "
                                       f"{start_timeout:.0f} s") from None
        except BaseException:
            self._listener.close()
            self._tmp.cleanup()
            raise
        self.sock.settimeout(None)
        self.set_jobs(jobs)

    def _why(self) -> str:
        e = self._error
        return (str(e).strip().splitlines() or [type(e).__name__])[0] if e else "no reason given"

    def _request(self, kind: bytes, body: bytes = b"") -> bytes:
        try:
            self.sock.sendall(kind + struct.pack(">I", len(body)) + body)
            head = self._recv(5)
            if head[:1] != b"R":
                raise RtlError("the simulation sent a malformed reply")
            return self._recv(struct.unpack(">I", head[1:])[0])
        except OSError as e:
            raise RtlError(f"the {self.simulator} simulation stopped: {e}") from None

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                self._thread.join(timeout=5)
                raise RtlError(f"the {self.simulator} simulation stopped: {self._why()}")
            buf += chunk
        return bytes(buf)

    def set_jobs(self, jobs: JobTable) -> None:
        self._request(b"J", json.dumps(jobs.to_dict()).encode())

    def process(self, data: bytes) -> tuple[int, list[bytes]]:
        reply = self._request(b"M", bytes(data))
        verdict, n = reply[0], struct.unpack(">H", reply[1:3])[0]
        results, at = [], 3
        for _ in range(n):
            length = struct.unpack(">I", reply[at:at + 4])[0]
            results.append(reply[at + 4:at + 4 + length])
            at += 4 + length
        return verdict, results

    @property
    def counters(self) -> dict[str, int]:
        if self.sock is not None and self._thread.is_alive():
            try:
                got = json.loads(self._request(b"C"))
                self._counters = {k: int(got[k]) for k in COUNTERS}
            except (RtlError, ValueError, KeyError):
                pass
        return dict(self._counters)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self._counters = self.counters       # the last values, for the stats
                self.sock.sendall(b"Q" + struct.pack(">I", 0))
            except (OSError, RtlError):
                pass
            self.sock.close()
            self.sock = None
        self._thread.join(timeout=60)
        self._listener.close()
        self._tmp.cleanup()
