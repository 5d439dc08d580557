"""The cocotb regression of the generated ``netagg_core`` Verilog
(``sim/cocotb/test_regression.py``), per build configuration and simulator.

Each configuration is one parameter dict, used both to generate the Verilog
and (through ``$NETAGG_TB_PARAMS``) by the bench and its golden model.
Builds are cached in ``build/cocotb`` (keyed by parameters and design
sources), so only the first run of a configuration pays for Verilog
generation and, with Verilator, the C++ build.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from netagg.params import Params
from netagg.sim import harness
from netagg.sim.cocotb import tb
from netagg.sim.message_model import Switch, make_contrib
from netagg.sim.traffic import Traffic, regression_jobs
from netagg.wire import Verdict

BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"

CONFIGS = {
    # The default shape: 8 lanes, full slots of 64 elements, 8 workers, 4 jobs.
    "L8-K64-W8": dict(lanes=8, elements=64, workers=8, slots=64, jobs=4),
    # Small, with a subset of dtypes and ops and bf16 accumulation in bf16.
    "L4-K16-W2": dict(lanes=4, elements=16, workers=2, slots=16, jobs=2,
                      dtypes=("fp32", "bf16"), ops=("sum", "max"), bf16_accumulate="bf16"),
}

SIMULATORS = ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_regression(config, simulator, seed):
    harness.run_cocotb(Params(**CONFIGS[config]), harness.REGRESSION_MODULE,
                       simulator=simulator, root=BUILD, quiet=True,
                       env={"NETAGG_TB_SEED": str(seed)})


@pytest.mark.cocotb
def test_regression_ecp5_accumulator_ram(seed):
    """The default shape with its accumulators in DP16KD blocks (the ECP5
    builds' form, ``acc_ram="ecp5"``), under Icarus with the block model:
    the same bench, bit-exact against the golden model."""
    harness.run_cocotb(Params(**CONFIGS["L8-K64-W8"]), harness.REGRESSION_MODULE,
                       simulator="icarus", root=BUILD, quiet=True, acc_ram="ecp5",
                       env={"NETAGG_TB_SEED": str(seed)})


# -- the bench's pure parts (no simulator) ------------------------------------

def test_unwrap_tag():
    assert tb.unwrap_tag(5, 5) == 5
    assert tb.unwrap_tag(3, 5) == 3
    assert tb.unwrap_tag(0xFFFF, 0x10002) == 0xFFFF
    assert tb.unwrap_tag(2, 0x10002) == 0x10002
    assert tb.unwrap_tag(0, 0x2FFFF) == 0x20000


@pytest.mark.parametrize("config", list(CONFIGS))
def test_malformed_cases_get_their_verdicts(config, seed):
    params = Params(**CONFIGS[config])
    jobs = regression_jobs(params)
    tm = Traffic(params, jobs, random.Random(seed))
    sb = tb.Scoreboard(params, jobs)
    cases = tm.malformed()
    job = next(j for j in tm.enabled if j.workers >= 2)
    cases += tm.mismatches(job, 0)
    for i, (want, m) in enumerate(cases):
        sb.expect(i, m)
        assert sb.verdicts[i] == want, (i, tb.describe(m))
    drops = {v for v, _ in cases} - {Verdict.ACCEPT}
    assert drops == {v for v in Verdict if v.value >= Verdict.BAD_HEADER}


def _scoreboard_with_round():
    """A scoreboard expecting one fp32 round of job 0 (W=2): two messages."""
    params = Params(**CONFIGS["L4-K16-W2"])
    jobs = regression_jobs(params)
    sb = tb.Scoreboard(params, jobs)
    msgs = [make_contrib(0, 1, 0, w, [0x3F800000, w], dtype=1) for w in (0, 1)]
    for i, m in enumerate(msgs):
        sb.expect(i, m)
    return params, jobs, sb, msgs


def test_scoreboard_accepts_the_models_own_outputs():
    params, jobs, sb, msgs = _scoreboard_with_round()
    ref = Switch(params, jobs)
    outs = [ref.receive(m) for m in msgs]
    for i, o in enumerate(outs):
        sb.verdict(i, o.verdict)
    for r in outs[1].results:
        sb.result(1, r.pack())
    sb.final(dict(ref.counters, stall=0))
    assert sb.results_checked == 2


def test_scoreboard_catches_errors():
    params, jobs, sb, msgs = _scoreboard_with_round()
    ref = Switch(params, jobs)
    outs = [ref.receive(m) for m in msgs]
    with pytest.raises(tb.BenchError, match="verdict DUPLICATE, expected ACCEPT"):
        sb.verdict(0, Verdict.DUPLICATE)
    sb.verdict(1, 0)
    good = outs[1].results[0].pack()
    bad = good[:-1] + bytes([good[-1] ^ 1])                 # one bit of one element
    with pytest.raises(tb.BenchError, match="element 1"):
        sb.result(1, bad)
    with pytest.raises(tb.BenchError, match="unexpected RESULT"):
        sb.result(1, good[:5] + b"\x07" + good[6:])          # slot 7: nothing expected
    with pytest.raises(tb.BenchError, match="never sent"):
        sb.final()
    sb.result(1, outs[1].results[1].pack())
    counters = dict(ref.counters)
    counters["tx"] += 1
    with pytest.raises(tb.BenchError, match="counters"):
        sb.final(counters)


def test_result_from_the_wrong_message_is_caught():
    params, jobs, sb, msgs = _scoreboard_with_round()
    ref = Switch(params, jobs)
    outs = [ref.receive(m) for m in msgs]
    with pytest.raises(tb.BenchError, match="message 0"):
        sb.result(0, outs[1].results[0].pack())
