"""Signatures, layouts and enums of the Ethernet front end, derived once.

GMII is the byte-wide PHY interface (one byte per 125 MHz clock at
1 Gb/s); the other layouts are the payloads of the front end's internal
streams (``amaranth.lib.stream`` rules).
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import Out

from netagg import frames

MAX_FRAME = frames.MAX_WIRE_FRAME
"""Longest frame with its FCS."""

LENGTH_BITS = 11
"""Bits of a frame length (without FCS, at most 1514)."""

GmiiRx = wiring.Signature({"dv": Out(1), "er": Out(1), "data": Out(8)})
"""GMII receive, as the PHY drives it: ``dv`` high from the first preamble
byte to the last FCS byte, ``er`` a receive error, one byte per clock."""

GmiiTx = wiring.Signature({"en": Out(1), "er": Out(1), "data": Out(8)})
"""GMII transmit, as the MAC drives it."""


class RxStatus(enum.Enum, shape=2):
    """How a received frame ended (meaningful on its last byte)."""
    OK = 0
    RUNT = 1          # shorter than 64 bytes with its FCS
    TOO_LONG = 2      # longer than the build's maximum with its FCS
    FCS = 3           # FCS wrong, or a receive error during the frame


MacByte = data.StructLayout({"data": unsigned(8), "last": unsigned(1), "status": RxStatus})
"""A byte from the receive MAC (FCS included); ``status`` on the last one."""

FrameByte = data.StructLayout({"data": unsigned(8), "last": unsigned(1)})
"""A byte of a whole frame (no FCS)."""

WriteByte = data.StructLayout({"data": unsigned(8), "last": unsigned(1), "drop": unsigned(1)})
"""A byte written into a frame buffer; ``drop`` on the last byte discards
the frame."""

BufferedByte = data.StructLayout({"data": unsigned(8), "last": unsigned(1),
                                  "length": unsigned(LENGTH_BITS)})
"""A byte of a whole buffered frame; ``length`` (bytes of the frame) is the
same on all of its bytes."""

Sender = data.StructLayout({"mac": unsigned(48), "ip": unsigned(32), "port": unsigned(16)})
"""Where a frame came from (MAC, IPv4 address, UDP port), each the
big-endian integer of its bytes."""


def message_beat(lanes: int) -> data.StructLayout:
    """A core ingress beat (``netagg.hdl.layouts.ingress_beat``) with the
    sender of its message."""
    from netagg.hdl import layouts
    return data.StructLayout({"beat": layouts.ingress_beat(lanes), "sender": Sender})


def result_beat(lanes: int) -> data.StructLayout:
    """A core egress beat with the destination of its RESULT."""
    from netagg.hdl import layouts
    return data.StructLayout({"beat": layouts.egress_beat(lanes), "dst": Sender})


class ReplyKind(enum.Enum, shape=1):
    ARP = 0
    ICMP = 1


ReplyRequest = data.StructLayout({
    "kind": ReplyKind,
    "mac": unsigned(48),      # the asker: ARP sender hardware address, or Ethernet source
    "ip": unsigned(32),       # ARP sender protocol address, or IPv4 source
    "total": unsigned(16),    # ICMP: the request's IPv4 total length
    "csum": unsigned(16),     # ICMP: the reply's ICMP checksum
    "ident": unsigned(16),    # ICMP: identifier
    "seq": unsigned(16),      # ICMP: sequence number
})
"""What the responder needs to answer a request; an ICMP reply's data are
in the responder's memory (written through the parser's ``tee`` port)."""

Learned = data.StructLayout({"sender": Sender, "port": unsigned(1)})
"""An address-table entry: a worker's endpoint and ingress port."""

CtrlRequest = data.StructLayout({"sender": Sender, "length": unsigned(LENGTH_BITS)})
"""A UDP datagram to the switch's control port, as the parser hands it to
:class:`netagg.hdl.eth.control.ControlPlane` (its payload bytes are in the
control plane's memory, written through the parser's ``tee`` port):
its sender and its payload's byte count (UDP length - 8)."""

Tee = wiring.Signature({"en": Out(1), "addr": Out(LENGTH_BITS), "data": Out(8)})
"""The parser's copy of a frame's bytes from offset 42 on: ``data`` at
``addr`` (frame offset - 42) with ``en``."""
