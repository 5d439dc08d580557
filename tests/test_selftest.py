# amaranth: UnusedElaboratable=no
"""boards/selftest.py in amaranth.sim: the self-test passes on the real
core (twice in a row, with a core reset between) and fails when its
expected data is corrupted."""

from __future__ import annotations

import pytest

from netagg.boards import selftest as st
from netagg.params import Params
from netagg.sim.drive import simulate
from netagg.sim.reference import result_key
from netagg.wire import Verdict

PARAMS = Params(lanes=2, elements=4, workers=3, slots=4, jobs=2)


def run(dut, cycles):
    state = {}

    async def tb(ctx):
        for _ in range(cycles):
            await ctx.tick()
            if ctx.get(dut.failed) or ctx.get(dut.passes) >= 2:
                break
        state["passes"], state["failed"] = ctx.get(dut.passes), ctx.get(dut.failed)

    simulate(dut, tb)
    return state


def test_workload_reaches_every_path_it_is_built_for():
    """The self-test's ROM workload completes rounds in every job, resends
    a RESULT, drops a duplicate and a malformed message: otherwise a pass
    would not check those paths on the chip."""
    dut = st.SelfTest(PARAMS)
    codes = {Verdict(c) for c, _ in dut._verdicts}
    assert {Verdict.ACCEPT, Verdict.RETRANSMIT, Verdict.DUPLICATE} <= codes
    assert any(c.counter != "drop_duplicate" and not c.accepted for c in codes)
    assert {result_key(p)[0] for p, _ in dut._results} == {j.id for j in dut._jobs}
    assert dut.summary()["results"] == len(dut._results) > 0


def test_selftest_passes_twice():
    s = run(st.SelfTest(PARAMS), 20_000)
    assert s == {"passes": 2, "failed": 0}


@pytest.mark.parametrize("what", ["result", "verdict"])
def test_selftest_detects_corruption(what):
    dut = st.SelfTest(PARAMS)
    if what == "result":
        payload, tag = dut._results[0]
        dut._results[0] = (payload[:-1] + bytes([payload[-1] ^ 1]), tag)
    else:
        code, tag = dut._verdicts[-1]
        dut._verdicts[-1] = (code ^ 1, tag)
    s = run(dut, 20_000)
    assert s["failed"] == 1 and s["passes"] == 0
