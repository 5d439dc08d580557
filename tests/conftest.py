"""Shared pytest configuration.

Seeds: a randomised test takes the ``seed`` fixture, a stable function of
the test's id and of a base seed (``--seed N``, else ``$NETAGG_SEED``, else
0), printed with the test's output; run again with the same base seed to
reproduce a failure bit for bit.
"""

import os
import sys
import zlib
from pathlib import Path

import pytest

# Test helpers (tests/*.py that are not tests) import by name.
sys.path.insert(0, str(Path(__file__).parent))

ENV_SEED = "NETAGG_SEED"


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, metavar="N",
                     help=f"base seed of the randomised tests (default ${ENV_SEED} or 0)")


def base_seed(config) -> int:
    value = config.getoption("--seed")
    if value is None:
        value = int(os.environ.get(ENV_SEED, "0"))
    return value


def pytest_report_header(config):
    return f"netagg base seed: {base_seed(config)} (--seed N or ${ENV_SEED} to change)"


def test_seed(base: int, test_id: str) -> int:
    """The seed of test ``test_id`` under base seed ``base`` (32 bits)."""
    return zlib.crc32(f"{base}:{test_id}".encode())


test_seed.__test__ = False


@pytest.fixture
def seed(request) -> int:
    base = base_seed(request.config)
    value = test_seed(base, request.node.nodeid.split("::", 1)[-1])
    print(f"seed {value} (base seed {base}: --seed {base} reproduces it)")
    return value
