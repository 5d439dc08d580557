"""The cocotb regression of the generated ``netagg_core`` Verilog
(``sim/cocotb/test_regression.py``), per build configuration and simulator.

Each configuration is one parameter dict, used both to generate the Verilog
and (through ``$NETAGG_TB_PARAMS``) by the bench and its golden model.
Builds are cached in ``build/cocotb`` (keyed by parameters and design
sources), so only the first run of a configuration pays for Verilog
generation and, with Verilator, the C++ build.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netagg.params import Params

harness = pytest.importorskip("netagg.sim.harness")
pytest.importorskip("cocotb_test")

BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"

CONFIGS = {
    # The default shape: 8 lanes, full slots of 64 elements, 8 workers, 4 jobs.
    "L8-K64-W8": dict(lanes=8, elements=64, workers=8, slots=64, jobs=4),
    # Small, with a subset of dtypes and ops and bf16 accumulation in bf16.
    "L4-K16-W2": dict(lanes=4, elements=16, workers=2, slots=16, jobs=2,
                      dtypes=("fp32", "bf16"), ops=("sum", "max"), bf16_accumulate="bf16"),
}

SIMULATORS = ["icarus", pytest.param("verilator", marks=pytest.mark.verilator)]


def test_configs_are_valid():
    for config in CONFIGS.values():
        Params(**config)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_regression(config, simulator):
    seed = int(os.environ.get("NETAGG_TB_SEED", "1"))
    harness.run_cocotb(Params(**CONFIGS[config]), harness.REGRESSION_MODULE,
                       simulator=simulator, root=BUILD, quiet=True,
                       env={"NETAGG_TB_SEED": str(seed)})
