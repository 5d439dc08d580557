"""cocotb test of the RGMII receive layer (``netagg.hdl.eth.rgmii.RgmiiRxPins``,
generic form) with cocotbext-eth: an ``RgmiiSource`` drives the pins at
1 Gb/s, a ``GmiiSink`` reads the GMII side; every frame (random lengths,
some with GMII errors) must come out byte for byte from the SFD on, with
its errors.
Seed: ``$NETAGG_TB_SEED`` (default 1)."""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge


@cocotb.test()
async def rgmii_rx(dut):
    from cocotbext.eth import GmiiFrame, GmiiSink, RgmiiSource
    rng = random.Random(int(os.environ.get("NETAGG_TB_SEED", "1")))
    Clock(dut.rxc, 8, unit="ns").start()
    source = RgmiiSource(dut.rxd, dut.rx_ctl, dut.rxc)
    sink = GmiiSink(dut.gmii__data, dut.gmii__er, dut.gmii__dv, dut.rxc)
    frames = []
    for _ in range(20):
        payload = rng.randbytes(rng.randrange(1, 200))
        f = GmiiFrame.from_payload(payload)
        if rng.random() < 0.3:
            f.error = [0] * len(f.data)
            f.error[rng.randrange(8, len(f.data))] = 1
        frames.append(f)
        await source.send(f)
    for f in frames:
        got = await sink.recv(compact=False)
        # A GMII sink may miss preamble bytes; from the SFD on, every byte
        # and its error flag must be there.
        want = bytes(f.get_payload(strip_fcs=False))
        assert bytes(got.get_payload(strip_fcs=False)) == want, "frame bytes differ"
        want_er = (f.error or [0] * len(f.data))[-len(want):]
        got_er = got.error or [0] * len(got.data)
        assert list(got_er)[-len(want):] == list(want_er), "errors differ"
        assert got.check_fcs()
    for _ in range(20):
        await RisingEdge(dut.rxc)
    assert sink.empty()
