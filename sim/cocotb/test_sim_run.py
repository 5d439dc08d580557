"""The cocotb test behind ``netagg sim`` (run by :func:`netagg.sim.harness.run_core`).

Input (JSON file named by ``$NETAGG_TB_IO``): ``{"jobs": JobTable dict,
"messages": [UDP payload hex, ...]}``; the build parameters come from
``$NETAGG_TB_PARAMS``. The core is reset, its job table written (and read
back), the messages presented in order back to back (``o__ready`` always
high), then every counter is read through the control port.

Output (JSON file named by ``$NETAGG_TB_OUT``): ``{"verdicts": [code per
message], "results": [[message index, RESULT payload hex], ...] in send
order, "counters": {name: value, ...} (hdl.core.COUNTER_NAMES), "cycles":
first frame presented to last RESULT beat sent, "cycles_total"}``, or
``{"error": "..."}`` if the run failed.
"""

from __future__ import annotations

import json
import os

import cocotb

from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.cocotb.tb import TB
from netagg.sim.harness import ENV_IO, ENV_OUT, ENV_PARAMS


def _write(obj) -> None:
    with open(os.environ[ENV_OUT], "w", encoding="utf-8") as f:
        json.dump(obj, f)


@cocotb.test()
async def sim_run(dut):
    params = Params.from_dict(json.loads(os.environ[ENV_PARAMS]))
    with open(os.environ[ENV_IO], encoding="utf-8") as f:
        spec = json.load(f)
    jobs = JobTable.from_dict(spec["jobs"], params)
    messages = [bytes.fromhex(m) for m in spec["messages"]]
    tb = TB(dut, params)
    try:
        await tb.start()
        await tb.configure(jobs)
        run = await tb.run(messages, timeout=20000)
        counters = await tb.read_counters()
    except Exception as e:
        _write({"error": (str(e).strip() or type(e).__name__).splitlines()[0]})
        raise
    _write({
        "verdicts": run.verdicts,
        "results": [[index, payload.hex()] for index, payload in run.results],
        "counters": counters,
        "cycles": run.cycles,
        "cycles_total": run.cycles_total,
    })
