"""The transmit MAC: frame bytes to GMII with preamble, padding, FCS and gap."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import crc, stream, wiring
from amaranth.lib.wiring import In, Out

from netagg import frames
from netagg.hdl.eth.layouts import FrameByte, GmiiTx

PREAMBLE_BYTES = 7
MIN_GAP = 12


class MacTx(wiring.Component):
    """Transmit half of an Ethernet MAC at the GMII level.

    Parameters
    ----------
    gap : int
        Idle bytes between frames (at least 12, the inter-frame gap).

    Ports
    -----
    i : In(stream FrameByte)
        Whole frames without FCS. ``ready`` is high only while a frame's
        bytes are being sent; once its first byte is taken, the source must
        keep ``valid`` high up to ``last`` (a frame buffer in front does):
        a missing byte is sent with ``gmii.er`` high.
    gmii : Out(GmiiTx)
        To the PHY, per frame: 7 bytes 0x55, the SFD 0xD5, the frame, zeros
        up to 60 bytes, the FCS (CRC-32, least significant byte first), then
        ``gap`` cycles with ``en`` low. The first preamble byte is on
        ``gmii`` the cycle after ``i.valid`` rises (with the gap elapsed);
        a frame of n >= 60 bytes occupies n + 12 + ``gap`` cycles.
    busy : Out(1)
        High from the first preamble byte to the end of the gap.
    """

    def __init__(self, *, gap: int = MIN_GAP):
        if not isinstance(gap, int) or gap < MIN_GAP:
            raise ValueError(f"gap must be an integer of at least {MIN_GAP}, not {gap!r}")
        self._gap = gap
        super().__init__({
            "i": In(stream.Signature(FrameByte)),
            "gmii": Out(GmiiTx),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = fcs = crc.catalog.CRC32_ETHERNET(data_width=8).create()
        count = Signal(range(max(self._gap, frames.MIN_FRAME, PREAMBLE_BYTES) + 1))
        g = self.gmii

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.i.valid):
                    m.d.sync += [g.en.eq(1), g.er.eq(0), g.data.eq(0x55), count.eq(1)]
                    m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += count.eq(count + 1)
                with m.If(count == PREAMBLE_BYTES):
                    m.d.sync += [g.data.eq(0xD5), count.eq(0)]
                    m.d.comb += fcs.start.eq(1)
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.busy.eq(1), self.i.ready.eq(1),
                             fcs.valid.eq(1), fcs.data.eq(self.i.payload.data)]
                m.d.sync += [g.data.eq(self.i.payload.data), g.er.eq(~self.i.valid)]
                with m.If(count != frames.MIN_FRAME):
                    m.d.sync += count.eq(count + 1)
                with m.If(self.i.valid & self.i.payload.last):
                    with m.If(count >= frames.MIN_FRAME - 1):
                        m.d.sync += count.eq(0)
                        m.next = "FCS"
                    with m.Else():
                        m.next = "PAD"
            with m.State("PAD"):
                m.d.comb += [self.busy.eq(1), fcs.valid.eq(1), fcs.data.eq(0)]
                m.d.sync += [g.data.eq(0), g.er.eq(0), count.eq(count + 1)]
                with m.If(count == frames.MIN_FRAME - 1):
                    m.d.sync += count.eq(0)
                    m.next = "FCS"
            with m.State("FCS"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [g.data.eq(fcs.crc.word_select(count[:2], 8)), g.er.eq(0),
                             count.eq(count + 1)]
                with m.If(count == 3):
                    m.d.sync += count.eq(0)
                    m.next = "GAP"
            with m.State("GAP"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [g.en.eq(0), g.er.eq(0), count.eq(count + 1)]
                with m.If(count == self._gap - 1):
                    m.next = "IDLE"
        return m
