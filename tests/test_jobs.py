"""JOBS.json parsing and validation (cli.md): every refusal is a ParamError
with a one-line message naming the problem."""

from __future__ import annotations

import json

import pytest

from netagg.jobs import Job, JobTable
from netagg.params import ParamError, Params

P = Params(workers=8, slots=256, jobs=4)
SPEC_EXAMPLE = ('{"jobs": [{"id": 0, "workers": 4, "slot_base": 0, "slots": 64},\n'
                '          {"id": 1, "workers": 2, "slot_base": 64, "slots": 32}]}')


def test_spec_example():
    t = JobTable.from_json(SPEC_EXAMPLE, P)
    assert list(t) == [Job(0, 4, 0, 64), Job(1, 2, 64, 32)]
    assert t[1].workers == 2 and t[1].slot_end == 96
    assert t.get(0) == Job(0, 4, 0, 64)
    assert t.get(2) is None and 2 not in t and len(t) == 2
    with pytest.raises(KeyError):
        t[3]


def test_iteration_in_id_order_and_round_trip():
    text = json.dumps({"jobs": [{"id": 3, "workers": 1, "slot_base": 255, "slots": 1},
                                {"id": 0, "workers": 8, "slot_base": 0, "slots": 255}]})
    t = JobTable.from_json(text, P)
    assert [j.id for j in t] == [0, 3]
    assert JobTable.from_json(t.to_json(), P).to_dict() == t.to_dict()


def test_disabled_jobs_may_overlap_and_are_not_looked_up():
    text = json.dumps({"jobs": [{"id": 0, "workers": 2, "slot_base": 0, "slots": 10},
                                {"id": 1, "workers": 2, "slot_base": 5, "slots": 10,
                                 "enabled": False}]})
    t = JobTable.from_json(text, P)
    assert t.get(1) is None and t[1].enabled is False
    assert JobTable.from_json(t.to_json(), P)[1].enabled is False


def test_whole_range_and_adjacent_ranges():
    JobTable([Job(0, 8, 0, 256)], P)
    JobTable([Job(0, 1, 0, 1), Job(1, 1, 1, 255)], P)
    JobTable([Job(0, 1, 0, 1)], Params(slots=1, lanes=1, elements=1, workers=1, jobs=1))


def test_from_file(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(SPEC_EXAMPLE)
    assert len(JobTable.from_file(path, P)) == 2
    with pytest.raises(ParamError, match="cannot read jobs config"):
        JobTable.from_file(tmp_path / "missing.json", P)
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(ParamError, match="not UTF-8"):
        JobTable.from_file(path, P)


def job(**changes):
    d = {"id": 0, "workers": 2, "slot_base": 0, "slots": 4}
    d.update(changes)
    return {k: v for k, v in d.items() if v is not ...}


BAD = {
    "not json": ("{jobs: []}", "invalid JSON"),
    "truncated": ('{"jobs": [', "invalid JSON"),
    "empty": ("", "invalid JSON"),
    "list at top": ("[]", "expected an object"),
    "no jobs key": ("{}", "expected an object"),
    "jobs not a list": ('{"jobs": {}}', "expected an object"),
    "extra top key": ({"jobs": [], "x": 1}, "unknown key 'x'"),
    "entry not object": ({"jobs": [3]}, r"jobs\[0\] is not an object"),
    "missing id": ({"jobs": [job(id=...)]}, "lacks 'id'"),
    "missing workers": ({"jobs": [job(workers=...)]}, "lacks 'workers'"),
    "missing slot_base": ({"jobs": [job(slot_base=...)]}, "lacks 'slot_base'"),
    "missing slots": ({"jobs": [job(slots=...)]}, "lacks 'slots'"),
    "string id": ({"jobs": [job(id="0")]}, "id must be an integer"),
    "float workers": ({"jobs": [job(workers=2.0)]}, "workers must be an integer"),
    "bool slots": ({"jobs": [job(slots=True)]}, "slots must be an integer"),
    "null base": ({"jobs": [job(slot_base=None)]}, "slot_base must be an integer"),
    "enabled not bool": ({"jobs": [job(enabled=1)]}, "enabled must be true or false"),
    "unknown field": ({"jobs": [job(worker=2)]}, "unknown key 'worker'"),
    "duplicate id": ({"jobs": [job(), job(slot_base=10)]}, "duplicate job id 0"),
    "id = J": ({"jobs": [job(id=4)]}, r"job id 4 is not in 0\.\.3"),
    "negative id": ({"jobs": [job(id=-1)]}, "job id -1"),
    "workers 0": ({"jobs": [job(workers=0)]}, r"0 workers, not in 1\.\.8"),
    "workers > W_max": ({"jobs": [job(workers=9)]}, r"9 workers, not in 1\.\.8"),
    "slots 0": ({"jobs": [job(slots=0)]}, "0 slots"),
    "negative slots": ({"jobs": [job(slots=-3)]}, "-3 slots"),
    "range beyond S": ({"jobs": [job(slot_base=200, slots=57)]}, r"\[200, 257\) is not within"),
    "base beyond S": ({"jobs": [job(slot_base=256, slots=1)]}, "is not within"),
    "negative base": ({"jobs": [job(slot_base=-1)]}, "is not within"),
    "overlap": ({"jobs": [job(id=2, slot_base=10, slots=10), job(id=1, slot_base=19, slots=1)]},
                r"job 2 \[10, 20\) and job 1 \[19, 20\) overlap"),
    "overlap contained": ({"jobs": [job(id=0, slot_base=0, slots=100),
                                    job(id=1, slot_base=100, slots=10),
                                    job(id=2, slot_base=50, slots=1)]}, "overlap"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_refused(name):
    config, pattern = BAD[name]
    text = config if isinstance(config, str) else json.dumps(config)
    with pytest.raises(ParamError, match=pattern) as info:
        JobTable.from_json(text, P)
    message = str(info.value)
    assert "\n" not in message and message.startswith("jobs config")


def test_constructor_checks_types_too():
    with pytest.raises(ParamError, match="must be an integer"):
        JobTable([Job(0, "2", 0, 1)], P)
    with pytest.raises(ParamError, match="enabled"):
        JobTable([Job(0, 2, 0, 1, enabled=None)], P)
