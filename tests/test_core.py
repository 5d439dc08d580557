"""NetaggCore in amaranth.sim against the golden model: verdicts in order,
RESULT messages bit-exact per (job, slot, ver, worker) in order, counters."""

import numpy as np
import pytest
from core_tb import expected, per_key, run_core

from netagg.params import Params
from netagg.sim.jobs import Job, JobTable
from netagg.sim.protocol import DType, Op
from netagg.sim.switch import make_contrib
from netagg.sim.traffic import random_traffic

CONFIGS = {
    "l4k16": (dict(lanes=4, elements=16, workers=3, slots=8, jobs=2),
              [dict(id=0, workers=3, slot_base=0, slots=4),
               dict(id=1, workers=2, slot_base=4, slots=4)]),
    "l1k4-bf16acc": (dict(lanes=1, elements=4, workers=2, slots=4, jobs=2, bf16_accumulate="bf16"),
                     [dict(id=1, workers=2, slot_base=1, slots=3)]),
    "l3k12-fp": (dict(lanes=3, elements=12, workers=4, slots=6, jobs=3, dtypes=("fp32", "bf16")),
                 [dict(id=0, workers=4, slot_base=0, slots=2),
                  dict(id=2, workers=1, slot_base=2, slots=4)]),
    "l8k16-int": (dict(lanes=8, elements=16, workers=5, slots=4, jobs=1, dtypes=("int32",),
                       ops=("sum", "max")),
                  [dict(id=0, workers=5, slot_base=0, slots=4)]),
}


def build(name):
    pd, jd = CONFIGS[name]
    params = Params(**pd)
    return params, JobTable([Job(enabled=True, **j) for j in jd], params)


def check(params, jobs, messages, **kw):
    ev, er, ec = expected(params, jobs, messages)
    gv, gr, gc = run_core(params, jobs, messages, **kw)
    assert gv == ev
    assert per_key(gr) == per_key(er)
    assert sorted(gr) == sorted(er)
    stall = gc.pop("stall")
    assert gc == ec
    return stall


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_random_traffic(name):
    params, jobs = build(name)
    msgs = random_traffic(params, jobs, 200, seed=hash(name) & 0xFFFF)
    check(params, jobs, msgs, seed=3, gap=0.2, backpressure=0.4)


def test_back_to_back_same_slot_hazard():
    """Single-beat messages to one slot back to back: every sum must see the
    previous one (read-after-write across the adder pipeline)."""
    params, jobs = build("l4k16")
    msgs = []
    for rnd in range(6):
        for w in range(3):
            msgs.append(make_contrib(0, 0, rnd % 2, w, [0x3F800000 + w + rnd, 0x3F800001],
                                     dtype=DType.FP32, op=Op.SUM))
    stall = check(params, jobs, msgs)
    assert stall > 0


def test_full_slot_lockstep_no_loss_under_backpressure():
    params, jobs = build("l4k16")
    rng = np.random.default_rng(5)
    msgs = []
    for rnd in range(4):
        for w in range(3):
            for slot in range(4):
                msgs.append(make_contrib(0, slot, rnd % 2, w,
                                         rng.integers(0, 2**32, 16, dtype=np.uint64),
                                         dtype=DType.INT32, op=Op.SUM))
    check(params, jobs, msgs, gap=0.1, backpressure=0.7)
