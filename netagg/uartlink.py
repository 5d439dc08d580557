"""Host side of the netagg UART bridge (``docs/boards.md``): SLIP framing,
the bridge's frame types, and a client that sends netagg messages to a
ULX3S or iCEBreaker running the bridge and collects verdicts and RESULTs.

Pure Python (termios for the tty; no pyserial). Messages are the bytes of
:mod:`netagg.wire` (the golden model's codec).

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
"""

from __future__ import annotations

import dataclasses

END, ESC, ESC_END, ESC_ESC = 0xC0, 0xDB, 0xDC, 0xDD

MSG, CTRL, SYNC = 0x01, 0x02, 0x03
VERDICT, RESULT, CTRLREP, SYNCREP = 0x80, 0x81, 0x82, 0x83



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
