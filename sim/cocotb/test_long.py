"""The long fault-injected run (``make test-slow``, launched by
``tests/test_verification.py``): ``$NETAGG_TB_MESSAGES`` messages (default
10^5) of :func:`netagg.sim.traffic.random_traffic` rounds over every enabled
job, with faults injected on the way to the core:

* lost RESULTs: workers resend a contribution after its round completed
  (retransmission requests), also after others moved on;
* duplicates: copies of contributions before completion;
* corrupted copies: a copy of a recent message with one random bit flipped
  (header or payload): dropped, a mismatch, a duplicate or a retransmission
  request, or a new contribution, whatever the model says;
* cross-slot reordering: messages are shuffled in windows of 8, so rounds
  of different slots interleave (and one slot's messages may be reordered:
  the model is fed in arrival order);
* malformed messages and metadata mismatches (the generator's own).

Everything is checked against the golden model: every verdict, every RESULT
bit-exact, the counters at the end. The figures are logged as one JSON line
(``LONG-RUN {...}``) and written to ``$NETAGG_TB_OUT`` if set.
"""

from __future__ import annotations

import json
import os
import random
import time
import zlib

import cocotb

from netagg.params import Params
from netagg.sim.cocotb.tb import TB, Scoreboard
from netagg.sim.harness import ENV_OUT, ENV_PARAMS
from netagg.sim.traffic import random_traffic, regression_jobs

CHUNK = 2000


def inject_faults(msgs, rng: random.Random, *, p_corrupt=0.03, p_lost=0.04, window=8):
    """The fault-injected stream (see the module docstring)."""
    out = []
    recent = []
    for m in msgs:
        out.append(m)
        recent.append(m)
        if len(recent) > 64:
            recent.pop(0)
        r = rng.random()
        if r < p_corrupt:
            c = bytearray(rng.choice(recent))
            if c:
                bit = rng.randrange(8 * len(c))
                c[bit // 8] ^= 1 << (bit % 8)
            out.append(bytes(c))
        elif r < p_corrupt + p_lost:
            out.append(rng.choice(recent))            # resent: its RESULT was lost
    for start in range(0, len(out), window):         # cross-slot reordering
        block = out[start:start + window]
        rng.shuffle(block)
        out[start:start + window] = block
    return out


@cocotb.test()
async def long_fault_injected(dut):
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    n = int(os.environ.get("NETAGG_TB_MESSAGES", "100000"))
    dut._log.info("seed %d (NETAGG_TB_SEED), %d messages", seed, n)
    rng = random.Random(zlib.crc32(f"{seed}:long".encode()))
    jobs = regression_jobs(params)
    base = random_traffic(params, jobs, n, seed=seed, p_dup=0.05, p_retx=0.05,
                          p_bad=0.03, p_mismatch=0.02, window=8)
    msgs = inject_faults(base, rng)
    tb = TB(dut, params, rng)
    t0 = time.monotonic()
    await tb.start()
    await tb.configure(jobs)
    tb.scoreboard = sb = Scoreboard(params, jobs)
    cycles = 0
    results = 0
    for start in range(0, len(msgs), CHUNK):
        run = await tb.run(msgs[start:start + CHUNK], gap=0.05, beat_gap=0.02,
                           backpressure=0.3)
        cycles += run.cycles
        results += len(run.results)
    counters = await tb.read_counters()
    sb.final(counters)
    wall = time.monotonic() - t0
    drops = {k: v for k, v in counters.items() if k.startswith("drop_")}
    figures = {"messages": len(msgs), "rounds": counters["results"],
               "results_sent": counters["tx"], "retransmissions": counters["retransmit"],
               "drops": sum(drops.values()), "drops_by_reason": drops,
               "results_checked": sb.results_checked, "stall_cycles": counters["stall"],
               "cycles": tb.cycle, "wall_seconds": round(wall, 1), "seed": seed}
    dut._log.warning("LONG-RUN %s", json.dumps(figures))
    out = os.environ.get(ENV_OUT)
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1)
            f.write("\n")
