"""The receive MAC: GMII bytes to frame bytes with an end-of-frame status."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import crc, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl.eth.layouts import MAX_FRAME, GmiiRx, MacByte, RxStatus

PREAMBLE, SFD = 0x55, 0xD5


class MacRx(wiring.Component):
    """Receive half of an Ethernet MAC at the GMII level.

    Parameters
    ----------
    max_frame : int
        Longest frame with its FCS that is not ``TOO_LONG`` (1518).

    Ports
    -----
    gmii : In(GmiiRx)
        From the PHY. A frame is ``dv`` high: any number of preamble bytes
        (0x55, none needed), the SFD (0xD5), then the frame and its FCS; a
        frame whose first non-preamble byte is not the SFD is skipped.
    o : Out(valid, payload MacByte), no ready
        Every byte after the SFD, FCS included, two cycles after it was on
        ``gmii``, except the last, which comes the cycle after ``dv``
        falls, with ``last`` and ``status``: ``RUNT`` below 64 bytes, ``TOO_LONG``
        above ``max_frame``, else ``FCS`` if the CRC-32 of the bytes
        (``amaranth.lib.crc.catalog.CRC32_ETHERNET``) does not leave its
        residue or ``er`` was high during the frame, else ``OK``. A frame
        with no byte after the SFD is one ``RUNT`` last byte. Throughput:
        one byte per cycle; there is no backpressure.
    """

    def __init__(self, *, max_frame: int = MAX_FRAME):
        if not isinstance(max_frame, int) or max_frame < 64:
            raise ValueError(f"max_frame must be an integer of at least 64, not {max_frame!r}")
        self._max_frame = max_frame
        super().__init__({
            "gmii": In(GmiiRx),
            "o": Out(wiring.Signature({"valid": Out(1), "payload": Out(MacByte)})),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = fcs = crc.catalog.CRC32_ETHERNET(data_width=8).create()
        count = Signal(range(self._max_frame + 2))
        # registered: count == max_frame + 1 (it stops there), so that the
        # count's enable is the state, dv and this flag
        count_top = Signal()
        held = Signal(8)
        held_valid = Signal()
        err = Signal()
        g = self.gmii

        # The CRC runs one cycle behind ``gmii``, from registers (its
        # controls come from the state machine), and the output one cycle
        # behind the state machine, so that the status of a frame's last
        # byte finds the CRC of all its bytes (every path for 125 MHz is
        # a flip-flop, at most one decision, then the CRC's XORs).
        crc_start, crc_valid, crc_data = Signal(), Signal(), Signal(8)
        m.d.comb += [fcs.start.eq(crc_start), fcs.valid.eq(crc_valid), fcs.data.eq(crc_data)]
        m.d.sync += [crc_start.eq(0), crc_valid.eq(0), crc_data.eq(g.data)]
        o_valid, o_last, o_data = Signal(), Signal(), Signal(8)
        runt, too_long, o_err = Signal(), Signal(), Signal()
        m.d.sync += [o_valid.eq(0), o_last.eq(0), o_data.eq(held)]
        with m.FSM():
            with m.State("IDLE"):
                # (a frame's counters start from IDLE's values: no compare
                # of the byte on their paths)
                m.d.sync += [count.eq(0), count_top.eq(0), held_valid.eq(0), err.eq(g.er)]
                with m.If(g.dv):
                    with m.If(g.data == SFD):
                        m.d.sync += crc_start.eq(1)
                        m.next = "DATA"
                    with m.Elif(g.data != PREAMBLE):
                        m.next = "SKIP"
            with m.State("SKIP"):
                with m.If(~g.dv):
                    m.next = "IDLE"
            with m.State("DATA"):
                with m.If(g.dv):
                    m.d.sync += [crc_valid.eq(1), o_valid.eq(held_valid),
                                 held.eq(g.data), held_valid.eq(1), err.eq(err | g.er)]
                    with m.If(~count_top):
                        m.d.sync += [count.eq(count + 1),
                                     count_top.eq(count == self._max_frame)]
                with m.Else():
                    m.d.sync += [o_valid.eq(1), o_last.eq(1), runt.eq(count < 64),
                                 too_long.eq(count > self._max_frame), o_err.eq(err)]
                    m.next = "IDLE"
        m.d.comb += [self.o.valid.eq(o_valid), self.o.payload.data.eq(o_data),
                     self.o.payload.last.eq(o_last)]
        with m.If(o_last):
            with m.If(runt):
                m.d.comb += self.o.payload.status.eq(RxStatus.RUNT)
            with m.Elif(too_long):
                m.d.comb += self.o.payload.status.eq(RxStatus.TOO_LONG)
            with m.Elif(o_err | ~fcs.match_detected):
                m.d.comb += self.o.payload.status.eq(RxStatus.FCS)
        return m
