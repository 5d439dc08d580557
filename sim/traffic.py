"""Random netagg traffic for tests and benchmarks: well-behaved workers
(SwitchML-style rounds on each slot, alternating ``ver``), mixed with
duplicates, retransmission requests, metadata mismatches and malformed
messages. Pure Python and NumPy."""

from __future__ import annotations

import random

from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.message_model import make_contrib
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS, INT32_SPECIALS
from netagg.wire import DType, Header, Op


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
