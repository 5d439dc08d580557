"""The cocotb test behind ``netagg serve --backend rtl``
(:class:`netagg.host.rtl.RtlBackend`): the core serves messages as they
arrive, in real time, over a Unix stream socket.

The socket's path is ``$NETAGG_SERVE_SOCK``; the build parameters come from
``$NETAGG_TB_PARAMS``. The core is reset, then requests are served until
``Q`` or end of file. A request is one byte (its kind), a 4-byte big-endian
length and that many bytes:

* ``J`` + JobTable JSON: write the job table (read back); reply empty.
* ``M`` + one netagg message: presented to the core (back to back after
  the previous one; the clock stands still between requests), run until
  the core is idle; reply: verdict code (1 byte), RESULT count (2 bytes),
  then per RESULT its 4-byte length and bytes, in send order.
* ``C``: reply: the core's counters as JSON.
* ``Q``: stop.

Replies use the same framing with kind ``R``. SIGINT is ignored here (the
serve process stops the simulation through the socket).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct

import cocotb

from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.cocotb.tb import TB
from netagg.sim.harness import ENV_PARAMS

ENV_SOCK = "NETAGG_SERVE_SOCK"


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _reply(sock: socket.socket, body: bytes) -> None:
    sock.sendall(b"R" + struct.pack(">I", len(body)) + body)


@cocotb.test()
async def serve_rtl(dut):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    tb = TB(dut, params)
    await tb.start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ[ENV_SOCK])
    try:
        while True:
            head = _recv_exact(sock, 5)
            if head is None:
                break
            kind, length = head[:1], struct.unpack(">I", head[1:])[0]
            body = _recv_exact(sock, length) if length else b""
            if body is None or kind == b"Q":
                break
            if kind == b"J":
                await tb.configure(JobTable.from_dict(json.loads(body), params))
                _reply(sock, b"")
            elif kind == b"M":
                run = await tb.run([body], timeout=200000)
                out = [bytes([run.verdicts[0]]), struct.pack(">H", len(run.results))]
                for _, payload in run.results:
                    out.append(struct.pack(">I", len(payload)) + payload)
                _reply(sock, b"".join(out))
            elif kind == b"C":
                _reply(sock, json.dumps(await tb.read_counters()).encode())
            else:
                break
    finally:
        sock.close()
