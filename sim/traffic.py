"""The workload generators of every test, bench and the self-test: lists
of netagg messages (UDP payloads) and the job tables they run on.
Pure Python and NumPy.

- :func:`random_traffic`: well-behaved workers (SwitchML-style rounds on
  each slot, alternating ``ver``) mixed with duplicates, retransmission
  requests, metadata mismatches and malformed messages, from one seed
  (amaranth.sim tests, the bridge tests, ``make run``, the on-chip self-test).
- :class:`Traffic`: targeted workloads from one ``random.Random``: random
  mixes of interleaved rounds, lockstep workers, lost results, every kind
  of malformed message with its verdict, metadata mismatches (cocotb benches).
- :func:`saturation_patterns`: full-slot fp32 rounds for throughput and
  latency (``scripts/bench_core.py``).
- Job tables: :func:`regression_jobs` (cocotb regression),
  :func:`selftest_jobs` (on-chip self-test), :func:`single_job`.
"""

from __future__ import annotations

import random
from collections import Counter, deque

import numpy as np

from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.message_model import make_contrib
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS, INT32_SPECIALS
from netagg.wire import HEADER_BYTES, DType, Header, MsgType, Op, Verdict


def random_values(rng: random.Random, dtype: DType, count: int, specials: float = 0.1):
    """Raw element bits: special values with probability ``specials``; ints
    small or full-range; floats with exponents mostly near 1.0 (sums then
    round, cancel and tie often), sometimes anywhere in the range."""
    out = []
    for _ in range(count):
        if rng.random() < specials:
            table = {DType.FP32: FP32_SPECIALS, DType.BF16: BF16_SPECIALS,
                     DType.INT32: INT32_SPECIALS}[dtype]
            out.append(rng.choice(table))
        elif dtype is DType.INT32:
            out.append(rng.getrandbits(32) if rng.random() < 0.3 else rng.randrange(-1000, 1000)
                       & 0xFFFFFFFF)
        else:
            fbits = 23 if dtype is DType.FP32 else 7
            e = rng.choice((rng.randint(120, 134), rng.randint(120, 134), rng.randint(0, 254)))
            out.append((rng.getrandbits(1) << (8 + fbits)) | (e << fbits) | rng.getrandbits(fbits))
    return out


def malformed(rng: random.Random, params: Params, jobs: JobTable) -> bytes:
    """One message that the switch must drop before it touches state."""
    job = rng.choice(list(jobs)) if list(jobs) else None
    j = job.id if job else 0
    good = dict(job=j, slot=0, ver=0, worker=0, dtype=DType.INT32, op=Op.SUM, values=[1, 2])
    kind = rng.randrange(12)
    if kind == 0:
        return make_contrib(**good, version=rng.choice([0, 2, 15]))
    if kind == 1:
        return make_contrib(**good, type=1)
    if kind == 2:
        return make_contrib(**good, reserved=rng.randrange(1, 128))
    if kind == 3:
        return make_contrib(**good, status=rng.randrange(1, 65536))
    if kind == 4:
        return make_contrib(**{**good, "dtype": rng.randrange(3, 16)})
    if kind == 5:
        return make_contrib(**{**good, "op": rng.randrange(3, 16)})
    if kind == 6:   # count 0, or count > K
        h = Header(job=j, dtype=DType.INT32, count=rng.choice([0, params.elements + 1]))
        return h.pack() + b"\0" * 4 * h.count
    if kind == 7:   # payload length does not match count
        msg = make_contrib(**good)
        if rng.random() < 0.5:
            return msg[:-rng.randrange(1, 4)]
        return msg + b"\0" * rng.randrange(1, 9)
    if kind == 8:   # shorter than the header
        return make_contrib(**good)[:rng.randrange(0, 16)]
    if kind == 9:   # bad job: out of range or disabled
        ids = {jj.id for jj in jobs}
        bad = [x for x in range(min(256, params.jobs + 2)) if x not in ids]
        return make_contrib(**{**good, "job": rng.choice(bad) if bad else 255})
    if kind == 10:
        return make_contrib(**{**good, "slot": (job.slots if job else 0) + rng.randrange(0, 3)})
    return make_contrib(**{**good, "worker": (job.workers if job else 0) + rng.randrange(0, 3)})


def random_traffic(params: Params, jobs: JobTable, n: int, *, seed: int = 0,
                   p_dup: float = 0.05, p_retx: float = 0.05, p_bad: float = 0.05,
                   p_mismatch: float = 0.02, window: int = 4) -> list[bytes]:
    """About ``n`` messages from the workers of every enabled job.

    Each worker runs rounds over a window of its job's slots; a slot's rounds
    alternate ``ver``; every round picks a dtype, op and count that the core
    is built with.
    """
    rng = random.Random(seed)
    dtypes = [DType.from_name(d) for d in params.dtypes]
    ops = [Op.from_name(o) for o in params.ops]
    joblist = [j for j in jobs if j.enabled]
    # Per (job, slot): the round's metadata and which workers have sent.
    rounds = {}
    sent = {}       # (job, slot, ver, worker) -> last message, for duplicates
    done = []       # messages of completed rounds, for retransmission requests
    out: list[bytes] = []

    def new_round(job, slot, ver):
        dtype, op = rng.choice(dtypes), rng.choice(ops)
        count = rng.randrange(1, params.elements + 1)
        todo = list(range(job.workers))
        rng.shuffle(todo)
        for w in range(job.workers):
            sent.pop((job.id, slot, ver, w), None)
        rounds[(job.id, slot)] = dict(ver=ver, dtype=dtype, op=op, count=count,
                                      offset=rng.getrandbits(32), todo=todo)

    while len(out) < n:
        r = rng.random()
        if r < p_bad:
            out.append(malformed(rng, params, jobs))
            continue
        if r < p_bad + p_dup and sent:
            out.append(rng.choice(list(sent.values())))
            continue
        if r < p_bad + p_dup + p_retx and done:
            out.append(rng.choice(done))
            continue
        if not joblist:
            out.append(malformed(rng, params, jobs))
            continue
        job = rng.choice(joblist)
        slot = rng.randrange(min(window, job.slots))
        key = (job.id, slot)
        if key not in rounds:
            new_round(job, slot, 0)
        rd = rounds[key]
        worker = rd["todo"].pop()
        count = rd["count"]
        meta = (rd["dtype"], rd["op"], rd["offset"])
        if rng.random() < p_mismatch and len(rd["todo"]) + 1 < job.workers:
            count = rng.randrange(1, params.elements + 1)    # may happen to match
            rd["todo"].append(worker)                       # it will send again
        values = random_values(rng, rd["dtype"], count)
        msg = make_contrib(job.id, slot, rd["ver"], worker, values, dtype=meta[0], op=meta[1],
                           offset=meta[2])
        out.append(msg)
        sent[(job.id, slot, rd["ver"], worker)] = msg
        if not rd["todo"]:
            done.append(msg)
            if len(done) > 32:
                done.pop(0)
            new_round(job, slot, 1 - rd["ver"])
    return out


def saturation_patterns(params: Params, workers: int, rounds: int, window: int,
                        seed: int = 0, count: int | None = None) -> dict[str, list[bytes]]:
    """Job 0's ``workers`` send ``count`` fp32 elements (sum; default K, a
    full slot) to slots ``0 .. window-1``, ``rounds`` rounds each (ver
    alternating):

    - ``random``: every slot's workers in a random order, slots interleaved at random;
    - ``lockstep``: each worker streams the window in order, workers interleaved,
      so consecutive messages mostly hit one slot;
    - ``hammer``: one slot alone, ``rounds * window`` rounds.
    """
    rng = random.Random(seed)
    K = params.elements if count is None else count
    if not 1 <= K <= params.elements:
        raise ValueError(f"count must be in 1..{params.elements}, not {count}")

    def msg(slot, ver, w):
        vals = np.asarray([rng.uniform(-1, 1) for _ in range(K)], dtype=np.float32)
        return make_contrib(0, slot, ver, w, vals.view(np.uint32), dtype=DType.FP32, op=Op.SUM)

    lock = [msg(s, r % 2, w) for r in range(rounds) for s in range(window) for w in range(workers)]
    hammer = [msg(0, r % 2, w) for r in range(rounds * window) for w in range(workers)]
    todo = {(s, r): list(range(workers)) for s in range(window) for r in range(rounds)}
    for v in todo.values():
        rng.shuffle(v)
    nxt = {s: 0 for s in range(window)}
    rnd = []
    while any(nxt[s] < rounds for s in nxt):
        s = rng.choice([s for s in nxt if nxt[s] < rounds])
        r = nxt[s]
        rnd.append(msg(s, r % 2, todo[(s, r)].pop()))
        if not todo[(s, r)]:
            nxt[s] += 1
    return {"random": rnd, "lockstep": lock, "hammer": hammer}


def single_job(params: Params, workers: int | None = None) -> JobTable:
    """Job 0 alone: ``workers`` (default W_max) workers on every slot."""
    return JobTable([Job(0, params.workers if workers is None else workers, 0, params.slots)],
                    params)


def selftest_jobs(params: Params) -> JobTable:
    """Job 0: min(W_max, 3) workers on the first half of the slots; job 1
    (if J >= 2 and S >= 2): min(W_max, 2) workers on the rest."""
    S = params.slots
    if params.jobs >= 2 and S >= 2:
        half = S // 2
        jobs = [Job(0, min(params.workers, 3), 0, half),
                Job(1, min(params.workers, 2), half, S - half)]
    else:
        jobs = [Job(0, min(params.workers, 3), 0, S)]
    return JobTable(jobs, params)


def selftest_messages(params: Params, jobs: JobTable, n: int = 32, seed: int = 1) -> list[bytes]:
    """The on-chip self-test's workload: :func:`random_traffic` with more
    duplicates, retransmissions and malformed messages, over two slots per
    job, counts kept to at most 2 L elements (so that its ROMs stay small)."""
    small = params.replace(elements=min(params.elements, 2 * params.lanes))
    return random_traffic(small, JobTable(list(jobs), small), n, seed=seed, p_dup=0.08,
                          p_retx=0.08, p_bad=0.08, p_mismatch=0.04, window=2)


def regression_jobs(params: Params) -> JobTable:
    """A job table exercising several W and slot ranges: up to three
    enabled jobs with W_max, 3 (or fewer) and 1 workers, and one listed
    but disabled job if J allows; the rest unlisted."""
    S, W = params.slots, params.workers
    plan = [(W, max(1, S * 3 // 8)), (min(3, W), max(1, S // 4)), (1, max(1, S // 8))]
    jobs, base = [], 0
    for jid, (w, n) in enumerate(plan[:params.jobs]):
        if base + n > S:
            break
        jobs.append(Job(jid, w, base, n))
        base += n + (1 if base + n + 1 <= S else 0)       # leave a hole
    if len(jobs) < params.jobs:
        jobs.append(Job(len(jobs), 1, 0, 1, enabled=False))  # overlaps, but disabled
    return JobTable(jobs, params)


class Traffic:
    """Workload generators; every method returns a list of UDP payloads.

    Rounds per (job, slot) alternate ``ver`` as SwitchML workers do.
    """

    def __init__(self, params: Params, jobs: JobTable, rng: random.Random):
        self.params, self.jobs, self.rng = params, jobs, rng
        self.enabled = [j for j in jobs if j.enabled]
        self.dtypes = [DType.from_name(n) for n in params.dtypes]
        self.ops = [Op.from_name(n) for n in params.ops]
        self.K = params.elements
        self._rounds: Counter = Counter()

    # -- values --

    def values(self, dtype: int, count: int, specials: float = 0.05) -> list[int]:
        return random_values(self.rng, DType(dtype), count, specials)

    def count(self) -> int:
        r, K, L = self.rng, self.K, self.params.lanes
        return r.choice((K, 1, r.randint(1, K), r.randint(1, K), max(1, K - r.randint(0, L))))

    # -- rounds --

    def round(self, job: Job, slot: int, *, dtype=None, op=None, count=None, offset=None,
              workers=None, specials: float = 0.05, ver=None) -> list[bytes]:
        """One round's CONTRIBs of ``workers`` (default all), in random order."""
        r = self.rng
        if ver is None:
            ver = self._rounds[(job.id, slot)] % 2
            self._rounds[(job.id, slot)] += 1
        dtype = r.choice(self.dtypes) if dtype is None else dtype
        op = r.choice(self.ops) if op is None else op
        count = self.count() if count is None else count
        offset = r.getrandbits(32) if offset is None else offset
        workers = list(range(job.workers)) if workers is None else list(workers)
        r.shuffle(workers)
        return [make_contrib(job.id, slot, ver, w, self.values(dtype, count, specials),
                             dtype=dtype, op=op, offset=offset) for w in workers]

    def merge(self, streams: list[list[bytes]]) -> list[bytes]:
        """Interleave lists at random, keeping each list's order."""
        streams = [deque(s) for s in streams if s]
        out = []
        while streams:
            s = self.rng.choice(streams)
            out.append(s.popleft())
            if not s:
                streams.remove(s)
        return out

    def wave(self, nrounds: int, **kw) -> list[list[bytes]]:
        """Rounds on distinct (job, slot) pairs."""
        pairs = [(j, s) for j in self.enabled for s in range(j.slots)]
        picks = self.rng.sample(pairs, min(nrounds, len(pairs)))
        return [self.round(j, s, **kw) for j, s in picks]

    def random_mix(self, waves: int, per_wave: int = 6, **kw) -> list[bytes]:
        """Waves of interleaved rounds over every job, dtype and op."""
        out = []
        for _ in range(waves):
            out += self.merge(self.wave(per_wave, **kw))
        return out

    def lockstep(self, job: Job, passes: int = 2, *, window: int | None = None,
                 dtype=None, op=None, count=None) -> list[bytes]:
        """Each worker streams its window of the job's slots (default all)
        in order, ``passes`` times; workers in near lockstep, so consecutive
        messages mostly hit the same slot."""
        r = self.rng
        window = job.slots if window is None else min(window, job.slots)
        keyed = []
        for p in range(passes):
            dt = r.choice(self.dtypes) if dtype is None else dtype
            o = r.choice(self.ops) if op is None else op
            for s in range(window):
                msgs = self.round(job, s, dtype=dt, op=o, count=self.K if count is None else count)
                for m in msgs:
                    w = Header.unpack(m).worker
                    keyed.append(((p * window + s) + r.random() * 1.2, w, m))
        keyed.sort(key=lambda t: (t[0], t[1]))
        return [m for *_, m in keyed]

    def lossy(self, rounds: int, *, resend: float = 0.3, dup: float = 0.15) -> list[bytes]:
        """Rounds with lost RESULTs and duplicates, over a few slots reused
        with alternating ``ver``: a worker resends its CONTRIB before the
        round completed (duplicate), after (retransmission, possibly after
        others have started the slot's next round) or much later (by then a
        new contribution)."""
        r = self.rng
        pairs = [(j, s) for j in self.enabled for s in range(min(j.slots, 3))]
        out: list[bytes] = []
        late: list[bytes] = []
        for _ in range(rounds):
            j, s = r.choice(pairs)
            msgs = self.round(j, s)
            seq = []
            for i, m in enumerate(msgs):
                seq.append(m)
                if r.random() < dup and i + 1 < len(msgs):
                    seq.append(r.choice(msgs[:i + 1]))           # duplicate
            for m in msgs:
                if r.random() < resend:
                    (late if r.random() < 0.3 else seq).append(m)  # lost RESULT
            out += seq
            if late and r.random() < 0.5:
                out.append(late.pop(0))
        return out + late

    # -- malformed messages --

    def malformed(self) -> list[tuple[Verdict, bytes]]:
        """One message per kind of malformation, with the verdict each must get."""
        r, K, p = self.rng, self.K, self.params
        j = self.enabled[0]
        dt = self.dtypes[0]
        op = self.ops[0]

        def good(**kw):
            kw.setdefault("dtype", dt)
            kw.setdefault("op", op)
            count = kw.pop("n", r.randint(1, K))
            vals = kw.pop("vals", None)
            if vals is None:
                vals = self.values(kw["dtype"], count, 0)
            return make_contrib(kw.pop("job", j.id), kw.pop("slot", r.randrange(j.slots)),
                                kw.pop("ver", r.getrandbits(1)),
                                kw.pop("worker", r.randrange(j.workers)), vals, **kw)

        size = DType(dt).size
        cases = [
            (Verdict.BAD_HEADER, good(version=0)),
            (Verdict.BAD_HEADER, good(version=2)),
            (Verdict.BAD_HEADER, good(version=15)),
            (Verdict.BAD_HEADER, good(type=MsgType.RESULT)),
            (Verdict.BAD_HEADER, good(type=7)),
            (Verdict.BAD_HEADER, good(reserved=1)),
            (Verdict.BAD_HEADER, good(reserved=0x40)),
            (Verdict.BAD_HEADER, good(status=1)),
            (Verdict.BAD_HEADER, good(status=0x8000)),
            (Verdict.BAD_HEADER, good(dtype=3, vals=[1, 2])),
            (Verdict.BAD_HEADER, good(dtype=15, vals=[1])),
            (Verdict.BAD_HEADER, good(op=3)),
            (Verdict.BAD_HEADER, good(op=15)),
            (Verdict.BAD_LENGTH, good(vals=[], count=0)),
            (Verdict.BAD_LENGTH, good(n=K + 1)),
            (Verdict.BAD_LENGTH, good(n=min(K + p.lanes + 3, 0xFFFF))),
            (Verdict.BAD_LENGTH, good(n=3, count=4)),               # one element short
            (Verdict.BAD_LENGTH, good(n=K, count=K - 1)),           # one element long
            (Verdict.BAD_LENGTH, good(n=2) + b"\x00"),              # an odd byte more
            (Verdict.BAD_LENGTH, good(n=2)[:-1]),                   # a byte short
            (Verdict.BAD_LENGTH, good(n=1, count=0xFFFF)),
            (Verdict.BAD_LENGTH, good(n=K)[:HEADER_BYTES + size * (K // 2)]),  # truncated
            (Verdict.BAD_LENGTH, good(n=K) + bytes(size * 3 * p.lanes)),       # overlong
            (Verdict.BAD_LENGTH, b""),
            (Verdict.BAD_LENGTH, good(n=1)[:1]),
            (Verdict.BAD_LENGTH, good(n=1)[:10]),
            (Verdict.BAD_LENGTH, good(n=1)[:HEADER_BYTES - 1]),
            (Verdict.BAD_LENGTH, good(n=1)[:HEADER_BYTES]),
            (Verdict.BAD_JOB, good(job=p.jobs)),
            (Verdict.BAD_JOB, good(job=255)),
            (Verdict.BAD_SLOT, good(slot=j.slots)),
            (Verdict.BAD_SLOT, good(slot=0xFFFF)),
            (Verdict.BAD_WORKER, good(worker=j.workers)),
            (Verdict.BAD_WORKER, good(worker=0xFFFF)),
        ]
        if DType.BF16 in self.dtypes and DType.INT32 in self.dtypes:
            # element size follows the header's dtype: right for one, wrong for the other
            m = good(dtype=DType.BF16, n=4)
            h = Header.unpack(m).replace(dtype=DType.INT32)
            cases.append((Verdict.BAD_LENGTH, h.pack() + m[HEADER_BYTES:]))
        missing = [d for d in DType if d not in self.dtypes]
        if missing:
            cases.append((Verdict.BAD_HEADER, good(dtype=missing[0], n=2)))
        missing = [o for o in Op if o not in self.ops]
        if missing:
            cases.append((Verdict.BAD_HEADER, good(op=missing[0])))
        unlisted = [i for i in range(p.jobs) if i not in self.jobs]
        disabled = [job.id for job in self.jobs if not job.enabled]
        for i in unlisted[:1] + disabled[:1]:
            cases.append((Verdict.BAD_JOB, good(job=i, slot=0, worker=0)))
        # bad header beats bad length beats bad job beats bad slot beats bad worker
        cases += [
            (Verdict.BAD_HEADER, good(version=2, vals=[], count=0)),
            (Verdict.BAD_HEADER, good(status=3, job=255)),
            (Verdict.BAD_LENGTH, good(n=K + 1, job=255)),
            (Verdict.BAD_JOB, good(job=255, slot=0xFFFF, worker=0xFFFF)),
            (Verdict.BAD_SLOT, good(slot=0xFFFF, worker=0xFFFF)),
        ]
        return cases

    def mismatches(self, job: Job, slot: int) -> list[tuple[Verdict, bytes]]:
        """An open round of ``job``'s ``slot``, contributions whose metadata
        differs (dtype, op, count, offset): each a mismatch, a duplicate,
        then the round's other contributions."""
        if job.workers < 2:
            raise ValueError("a mismatch needs a job with two workers or more")
        r = self.rng
        ver = self._rounds[(job.id, slot)] % 2
        self._rounds[(job.id, slot)] += 1
        dt, op = self.dtypes[0], self.ops[0]
        count = r.randint(2, self.K)
        first = make_contrib(job.id, slot, ver, 0, self.values(dt, count), dtype=dt, op=op,
                             offset=7)
        out = [(Verdict.ACCEPT, first)]
        variants = [dict(offset=8), dict(count=count - 1)]
        if len(self.ops) > 1:
            variants.append(dict(op=self.ops[1]))
        if len(self.dtypes) > 1:
            variants.append(dict(dtype=self.dtypes[1]))
        for v in variants:
            d = v.get("dtype", dt)
            n = v.get("count", count)
            out.append((Verdict.MISMATCH, make_contrib(
                job.id, slot, ver, 1, self.values(d, n), dtype=d, op=v.get("op", op),
                offset=v.get("offset", 7))))
        out.append((Verdict.DUPLICATE, first))
        for w in range(1, job.workers):            # then the round completes
            out.append((Verdict.ACCEPT, make_contrib(job.id, slot, ver, w, self.values(dt, count),
                                                     dtype=dt, op=op, offset=7)))
        return out
