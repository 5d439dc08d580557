"""The job table (control plane): which jobs are enabled, their worker counts
and slot ranges, read from a ``JOBS.json`` file (``docs/cli.md``).

Pure Python: importable without Amaranth or cocotb.

Contract: a :class:`JobTable` is always valid for its :class:`Params`: every
job id is below J, W is in 1..W_max, n >= 1, [base, base + n) lies within
0..S, and the ranges of enabled jobs do not overlap. Any violation raises
:class:`netagg.params.ParamError` with a one-line message. Jobs that are not
listed are disabled.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator

from netagg import regmap
from netagg.params import ParamError, Params

_FIELDS = ("id", "workers", "slot_base", "slots")
_OPTIONAL = ("enabled",)


@dataclasses.dataclass(frozen=True)
class Job:
    """One job table entry: ``slots`` slots from ``slot_base`` (absolute
    slot indices), ``workers`` workers with ranks 0..workers-1."""

    id: int
    workers: int
    slot_base: int
    slots: int
    enabled: bool = True

    @property
    def slot_end(self) -> int:
        """One past the job's last absolute slot."""
        return self.slot_base + self.slots

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in _FIELDS}
        if not self.enabled:
            d["enabled"] = False
        return d


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class JobTable:
    """A validated set of jobs, iterable (in id order) and indexable by id.

    ``table[id]`` is the job (KeyError if not listed); ``table.get(id)`` is the
    job if it is listed *and enabled*, else None: that is the lookup the data
    plane makes.
    """

    def __init__(self, jobs: Iterable[Job], params: Params):
        self.params = params
        jobs = list(jobs)
        by_id: dict[int, Job] = {}
        for job in jobs:
            self._check(job, params)
            if job.id in by_id:
                raise ParamError(f"jobs config: duplicate job id {job.id}")
            by_id[job.id] = job
        enabled = sorted((j for j in jobs if j.enabled), key=lambda j: (j.slot_base, j.id))
        for a, b in zip(enabled, enabled[1:], strict=False):
            if b.slot_base < a.slot_end:
                raise ParamError(
                    f"jobs config: slot ranges of job {a.id} [{a.slot_base}, {a.slot_end}) "
                    f"and job {b.id} [{b.slot_base}, {b.slot_end}) overlap")
        self._jobs = dict(sorted(by_id.items()))

    @staticmethod
    def _check(job: Job, params: Params):
        for name in _FIELDS:
            if not _is_int(getattr(job, name)):
                raise ParamError(
                    f"jobs config: job field {name!r} must be an integer, "
                    f"not {getattr(job, name)!r}")
        if not isinstance(job.enabled, bool):
            raise ParamError(
                f"jobs config: job {job.id}: 'enabled' must be true or false, "
                f"not {job.enabled!r}")
        if not 0 <= job.id < params.jobs:
            raise ParamError(
                f"jobs config: job id {job.id} is not in 0..{params.jobs - 1} "
                f"(the core has J={params.jobs} job entries)")
        if not 1 <= job.workers <= params.workers:
            raise ParamError(
                f"jobs config: job {job.id} has {job.workers} workers, "
                f"not in 1..{params.workers} (W_max)")
        if job.slots < 1:
            raise ParamError(f"jobs config: job {job.id} has {job.slots} slots (at least 1)")
        if job.slot_base < 0 or job.slot_end > params.slots:
            raise ParamError(
                f"jobs config: job {job.id} slot range [{job.slot_base}, {job.slot_end}) "
                f"is not within the core's {params.slots} slots")

    @classmethod
    def from_dict(cls, data, params: Params) -> JobTable:
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
            raise ParamError('jobs config: expected an object {"jobs": [...]}')
        extra = set(data) - {"jobs"}
        if extra:
            raise ParamError(f"jobs config: unknown key {sorted(extra)[0]!r} (only \"jobs\")")
        jobs = []
        for i, entry in enumerate(data["jobs"]):
            if not isinstance(entry, dict):
                raise ParamError(f"jobs config: jobs[{i}] is not an object")
            for name in _FIELDS:
                if name not in entry:
                    raise ParamError(f"jobs config: jobs[{i}] lacks {name!r}")
                if not _is_int(entry[name]):
                    raise ParamError(
                        f"jobs config: jobs[{i}].{name} must be an integer, "
                        f"not {json.dumps(entry[name])}")
            extra = set(entry) - set(_FIELDS) - set(_OPTIONAL)
            if extra:
                raise ParamError(f"jobs config: jobs[{i}] has unknown key {sorted(extra)[0]!r}")
            enabled = entry.get("enabled", True)
            if not isinstance(enabled, bool):
                raise ParamError(
                    f"jobs config: jobs[{i}].enabled must be true or false, "
                    f"not {json.dumps(enabled)}")
            jobs.append(Job(*(entry[name] for name in _FIELDS), enabled=enabled))
        return cls(jobs, params)

    @classmethod
    def from_json(cls, text: str, params: Params) -> JobTable:
        try:
            data = json.loads(text)
        except ValueError as e:
            msg = getattr(e, "msg", str(e))
            where = f" at line {e.lineno} column {e.colno}" if hasattr(e, "lineno") else ""
            raise ParamError(f"jobs config: invalid JSON: {msg}{where}") from None
        return cls.from_dict(data, params)

    @classmethod
    def from_file(cls, path: str | os.PathLike, params: Params) -> JobTable:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ParamError(f"cannot read jobs config {os.fspath(path)}: "
                             f"{e.strerror or e}") from None
        except UnicodeDecodeError:
            raise ParamError(f"jobs config {os.fspath(path)} is not UTF-8 text") from None
        return cls.from_json(text, params)

    def to_dict(self) -> dict:
        return {"jobs": [job.to_dict() for job in self]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __iter__(self) -> Iterator[Job]:
        return iter(self._jobs.values())

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id) -> bool:
        return job_id in self._jobs

    def __getitem__(self, job_id: int) -> Job:
        return self._jobs[job_id]

    def get(self, job_id: int) -> Job | None:
        """The job ``job_id`` if listed and enabled, else None."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.enabled else None

    def __repr__(self):
        return f"JobTable({list(self)!r})"


def table_from_registers(read, params: Params) -> JobTable:
    """The job table a switch runs from its job registers
    (:mod:`netagg.regmap`; ``read(addr)`` gives a register's value): every
    enabled entry, in job order, except one that would make the table
    invalid (a range outside 0..S, overlapping an entry before it, no
    workers), which is left out. The hardware uses the entries as stored; a
    model can only run a valid table. Computed from the registers as they
    stand (not entry by entry as they are written), so the order in which a
    table's entries are rewritten does not matter."""
    entries: list[Job] = []
    for j in range(params.jobs):
        ctrl = read(regmap.job_addr(j, regmap.JOB_CTRL))
        if not ctrl >> regmap.JOB_ENABLE_BIT & 1:
            continue
        entry = Job(j, ctrl >> regmap.JOB_WORKERS_SHIFT & ((1 << regmap.JOB_WORKERS_BITS) - 1),
                    read(regmap.job_addr(j, regmap.JOB_BASE_SLOT)),
                    read(regmap.job_addr(j, regmap.JOB_NSLOTS)))
        try:
            JobTable(entries + [entry], params)
        except ParamError:
            continue
        entries.append(entry)
    return JobTable(entries, params)
