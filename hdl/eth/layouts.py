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
