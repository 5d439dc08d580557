"""The netagg control plane over UDP (``docs/host.md``, Control plane): one definition of
the datagram format that ``netagg ctl`` speaks and that ``netagg serve`` and
the Ethernet boards answer, and of the read-only registers it adds to the
register map of :mod:`netagg.regmap` (build information, control-plane
counters, serve's fault-injection counters).

Pure Python: imports only the standard library and the other contract
modules (:mod:`netagg.params`, :mod:`netagg.wire`).

Datagram (UDP payload to the switch's address, port ``--ctrl-port``, default
42663), all fields big-endian:

====== ===== =========================================================
bytes  field meaning
====== ===== =========================================================
0      ver   protocol version, 1
1      type  0 = request (host to switch), 1 = reply (switch to host)
2-3    seq   request number, chosen by the host, echoed in the reply
4-11   key   the 64-bit key set at build time (``--ctrl-key HEX``)
12-13  n     number of accesses, 1..MAX_ACCESSES
14-15  rsvd  0
16-    n accesses of 8 bytes each:
       byte 0 op (0 = read, 1 = write), byte 1 reserved 0,
       bytes 2-3 register address (16 bits), bytes 4-7 value (32 bits:
       the value to write; 0 for a read)
====== ===== =========================================================

A request is valid when its length is exactly 16 + 8n, ver = 1, type = 0,
1 <= n <= MAX_ACCESSES, the reserved fields are 0 and every op is 0 or 1;
then, if its key is the switch's, the accesses are made in order and the
switch answers with one reply datagram to the request's source address and
port: the same header (type 1, the request's seq and key, n) and the same
n accesses, each with its ``value`` replaced by the register's value after
the access (a write reads back what the register now holds). A read of an
unmapped address gives 0; a write to a read-only or unmapped address changes
nothing. A request with the wrong key, or a malformed one, is dropped and
counted (``ctrl_bad_key``, ``ctrl_malformed``); it changes nothing and gets
no reply. Every answered request counts ``ctrl_ok``. Without a key the
control plane is off (nothing listens on the port).

Registers added to :mod:`netagg.regmap`'s (read-only):

* ``INFO_BASE + i``: build information ``INFO_FIELDS[i]`` (what ``netagg ctl
  load-jobs`` checks a JOBS.json against).
* ``CTRL_BASE + i``: control-plane counter ``CTRL_COUNTERS[i]``.
* ``SERVE_BASE + i``: ``netagg serve``'s fault-injection counter
  ``SERVE_COUNTERS[i]`` (0 on a board).
"""

from __future__ import annotations

import dataclasses
import struct

VERSION = 1
REQUEST, REPLY = 0, 1
OP_READ, OP_WRITE = 0, 1
DEFAULT_CTRL_PORT = 42663
HEADER = struct.Struct(">BBHQHH")
ACCESS = struct.Struct(">BBHI")
HEADER_BYTES = HEADER.size          # 16
ACCESS_BYTES = ACCESS.size          # 8
MAX_ACCESSES = 182
"""Most accesses in one datagram: 16 + 8 * 182 = 1472 bytes, one UDP
datagram in a 1500-byte Ethernet MTU."""

INFO_BASE = 0xF000
INFO_ID = 0x6E616767                 # "nagg"
INFO_FIELDS: tuple[str, ...] = (
    "id",               # INFO_ID
    "version",          # VERSION of this protocol
    "workers",          # W_max
    "slots",            # S
    "elements",         # K
    "lanes",            # L
    "jobs",             # J
    "dtypes",           # bit mask over netagg.wire.DType values
    "ops",              # bit mask over netagg.wire.Op values
    "bf16_accumulate",  # 0 = bf16, 1 = fp32
    "port",             # UDP port of netagg messages
    "frontend",         # FRONTEND_SERVE or FRONTEND_ETHERNET
)
FRONTEND_SERVE, FRONTEND_ETHERNET = 0, 1

CTRL_BASE = 0xF100
CTRL_COUNTERS: tuple[str, ...] = ("ctrl_ok", "ctrl_bad_key", "ctrl_malformed")
SERVE_BASE = 0xF200
SERVE_COUNTERS: tuple[str, ...] = ("lost_in", "lost_out", "duplicated")


class CtrlError(ValueError):
    """A datagram that is not a valid request or reply; ``reason`` is
    ``"malformed"`` or ``"bad_key"`` (the counter it increments)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Access:
    """One register access: ``op`` (OP_READ or OP_WRITE), 16-bit ``addr``,
    32-bit ``value`` (to write, or as read back in a reply)."""

    op: int
    addr: int
    value: int = 0

    def __post_init__(self):
        if self.op not in (OP_READ, OP_WRITE) or not 0 <= self.addr <= 0xFFFF \
                or not 0 <= self.value <= 0xFFFFFFFF:
            raise ValueError(f"invalid register access {self!r}")


def read(addr: int) -> Access:
    return Access(OP_READ, addr)


def write(addr: int, value: int) -> Access:
    return Access(OP_WRITE, addr, value)


def parse_key(text: str) -> int:
    """A key given as up to 16 hex digits (``0x`` prefix allowed)."""
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not 1 <= len(t) <= 16 or any(c not in "0123456789abcdef" for c in t):
        raise ValueError(f"key {text!r} is not a 64-bit hex number (1 to 16 hex digits)")
    return int(t, 16)


def encode(kind: int, seq: int, key: int, accesses: list[Access]) -> bytes:
    """A request (``kind`` REQUEST) or reply (REPLY) datagram."""
    if not 1 <= len(accesses) <= MAX_ACCESSES:
        raise ValueError(f"a datagram carries 1..{MAX_ACCESSES} accesses, not {len(accesses)}")
    out = [HEADER.pack(VERSION, kind, seq & 0xFFFF, key, len(accesses), 0)]
    out += [ACCESS.pack(a.op, 0, a.addr, a.value) for a in accesses]
    return b"".join(out)


def encode_request(seq: int, key: int, accesses: list[Access]) -> bytes:
    return encode(REQUEST, seq, key, accesses)


def encode_reply(seq: int, key: int, accesses: list[Access]) -> bytes:
    return encode(REPLY, seq, key, accesses)


def decode(data: bytes, key: int, kind: int = REQUEST) -> tuple[int, list[Access]]:
    """(seq, accesses) of a datagram of ``kind`` carrying ``key``; raises
    :class:`CtrlError` (``malformed`` before ``bad_key``: the key is checked
    on a well-formed datagram)."""
    data = bytes(data)
    if len(data) < HEADER_BYTES:
        raise CtrlError("malformed", f"{len(data)} bytes: shorter than the {HEADER_BYTES}-byte "
                                     "header")
    ver, typ, seq, got_key, n, rsvd = HEADER.unpack_from(data)
    if ver != VERSION or typ != kind or rsvd != 0:
        raise CtrlError("malformed", f"version {ver}, type {typ}, reserved {rsvd}")
    if not 1 <= n <= MAX_ACCESSES or len(data) != HEADER_BYTES + ACCESS_BYTES * n:
        raise CtrlError("malformed", f"{n} accesses in {len(data)} bytes")
    accesses = []
    for i in range(n):
        op, r, addr, value = ACCESS.unpack_from(data, HEADER_BYTES + ACCESS_BYTES * i)
        if op not in (OP_READ, OP_WRITE) or r != 0:
            raise CtrlError("malformed", f"access {i}: op {op}, reserved {r}")
        accesses.append(Access(op, addr, value))
    if got_key != key:
        raise CtrlError("bad_key", "wrong key")
    return seq, accesses


def decode_request(data: bytes, key: int) -> tuple[int, list[Access]]:
    return decode(data, key, REQUEST)


def decode_reply(data: bytes, key: int) -> tuple[int, list[Access]]:
    return decode(data, key, REPLY)


def info_values(params, frontend: int) -> list[int]:
    """The INFO registers' values for a build (a :class:`netagg.params.Params`)."""
    from netagg.wire import DType, Op
    dmask = sum(1 << int(DType.from_name(d)) for d in params.dtypes)
    omask = sum(1 << int(Op.from_name(o)) for o in params.ops)
    return [INFO_ID, VERSION, params.workers, params.slots, params.elements, params.lanes,
            params.jobs, dmask, omask, int(params.bf16_accumulate == "fp32"), params.port,
            frontend]


def params_from_info(values: list[int]):
    """The :class:`netagg.params.Params` (hardware fields) the INFO registers
    describe; ValueError if they are not a netagg switch's."""
    from netagg.params import Params
    from netagg.wire import DType, Op
    info = dict(zip(INFO_FIELDS, values, strict=True))
    if info["id"] != INFO_ID:
        raise ValueError(f"register 0x{INFO_BASE:04x} reads 0x{info['id']:08x}, not a netagg "
                         "switch's id")
    dtypes = ",".join(d.wire for d in DType if info["dtypes"] >> int(d) & 1)
    ops = ",".join(o.wire for o in Op if info["ops"] >> int(o) & 1)
    return Params(workers=info["workers"], slots=info["slots"], elements=info["elements"],
                  lanes=info["lanes"], jobs=info["jobs"], dtypes=dtypes, ops=ops,
                  bf16_accumulate="fp32" if info["bf16_accumulate"] else "bf16",
                  port=info["port"])
