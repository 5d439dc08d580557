"""Refused constructor arguments (hdl.checked.CheckedComponent): a clear
ValueError or TypeError, and no elaboratable left behind (Amaranth's
"created but never used" warning), without silencing anything."""

from __future__ import annotations

import gc
import warnings

import pytest
from amaranth.hdl import Fragment, Module

from netagg.boards.bridge import CoreBridge, UARTBridge
from netagg.boards.uart import UARTRx, UARTTx
from netagg.hdl.credit import ResultCredit
from netagg.hdl.fp import FPAdd, FPMinMax
from netagg.hdl.intalu import IntAdd, IntMinMax
from netagg.hdl.issue_queue import IssueQueue
from netagg.hdl.lane import Lane
from netagg.hdl.lane_loop import LaneLoop
from netagg.hdl.multicast import Multicast
from netagg.hdl.payload_buffer import PayloadBuffer
from netagg.hdl.slot_table import SlotTable
from netagg.params import Params

P = Params(lanes=2, elements=8, workers=2, slots=2, jobs=1)

REFUSED = {
    "slot_table_data": lambda: SlotTable(P, result_beats=4, data_beats=3),
    "slot_table_result": lambda: SlotTable(P, result_beats=3, data_beats=4),
    "slot_table_stages": lambda: SlotTable(P, result_beats=4, data_beats=4, fp_stages=99),
    "payload_buffer": lambda: PayloadBuffer(P, depth=2),
    "issue_queue": lambda: IssueQueue(P, data_beats=4, fp_stages=-1),
    "lane_loop": lambda: LaneLoop(P, fp_stages=7),
    "lane_loop_data_latency": lambda: LaneLoop(P, data_latency=5),
    "lane_loop_data_latency_compact": lambda: LaneLoop(P, acc_ram="compact", data_latency=3),
    "credit": lambda: ResultCredit(2, need=3),
    "multicast": lambda: Multicast(P, depth=6),
    "lane": lambda: Lane(dtypes=("fp64",)),
    "fp_add": lambda: FPAdd(stages=99),
    "fp_minmax": lambda: FPMinMax(fmt="fp32"),
    "int_add": lambda: IntAdd(1),
    "int_minmax": lambda: IntMinMax(1),
    "uart_tx": lambda: UARTTx(3),
    "uart_rx": lambda: UARTRx(2.5),
    "core_bridge": lambda: CoreBridge("params"),
    "uart_bridge": lambda: UARTBridge(P, 2),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_without_unused_elaboratable(name):
    # Amaranth warns about unused elaboratables once anything has been elaborated.
    Fragment.get(Module(), None)
    refused = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            REFUSED[name]()
        except (ValueError, TypeError):
            refused = True      # the traceback (and what it holds) goes with the block
        gc.collect()
    assert refused
    assert not [w for w in caught if "never used" in str(w.message)], caught


def test_accepted_arguments_build():
    """The same constructors with valid arguments build and elaborate."""
    m = Module()
    m.submodules.slots = slots = SlotTable(P, result_beats=4, data_beats=4)
    m.submodules.lane = lane = Lane()
    m.submodules.mcast = Multicast(P, depth=4)
    m.submodules.tx = UARTTx(4)
    m.submodules.add = IntAdd(8)
    assert slots.loop_latency == SlotTable.loop_latency_of(None)
    assert lane.latency == Lane.latency_of()
    Fragment.get(m, None)
