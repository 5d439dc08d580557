"""Seeds of the randomised unit tests of the hdl parts: the ``seed`` fixture
of tests/conftest.py where there is one, else a stable function of the test's
id and ``$NETAGG_SEED`` (default 0). Printed with the test's output."""

from __future__ import annotations

import os
import zlib

import pytest


def seed_of(request) -> int:
    try:
        return request.getfixturevalue("seed")
    except pytest.FixtureLookupError:
        base = int(os.environ.get("NETAGG_SEED", "0"))
        value = zlib.crc32(f"{base}:{request.node.nodeid.split('::', 1)[-1]}".encode())
        print(f"seed {value} (NETAGG_SEED={base} reproduces it)")
        return value
