"""Helpers of the host-side tests: an in-process ``netagg serve``
(:class:`netagg.host.serve.Server` in a thread), ranks run in threads, a
reordering UDP proxy, and the seed (``NETAGG_TEST_SEED``, printed)."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading

from netagg.jobs import Job, JobTable
from netagg.params import Params

SEED = int(os.environ.get("NETAGG_TEST_SEED", "1234"))


def seed(offset: int = 0) -> int:
    print(f"NETAGG_TEST_SEED={SEED} (+{offset})")
    return SEED + offset


@contextlib.contextmanager
def serving(params: Params, jobs, **kw):
    """A Server on 127.0.0.1 (ephemeral port) in a thread; yields it, stops it
    on exit (its ``final`` attribute then holds the stats)."""
    from netagg.host.serve import Server
    if jobs is not None and not isinstance(jobs, JobTable):
        jobs = JobTable(jobs, params)
    server = Server(params, jobs, listen=("127.0.0.1", 0), **kw)
    box = {}
    thread = threading.Thread(target=lambda: box.update(stats=server.run(handle_signals=False)),
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=30)
        server.close()
        server.final = box.get("stats")


def run_ranks(fn, nranks: int, timeout: float = 120.0) -> list:
    """``fn(rank)`` in one thread per rank; returns the results (an exception
    a rank raised is returned in its place)."""
    out: list = [None] * nranks

    def body(r):
        try:
            out[r] = fn(r)
        except BaseException as e:     # noqa: BLE001 (handed back to the test)
            out[r] = e

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank did not finish"
    return out


def raise_any(results: list) -> None:
    for r in results:
        if isinstance(r, BaseException):
            raise r


class ReorderProxy:
    """A UDP relay between one worker and a switch that reorders: datagrams
    of each direction are held in a pool of up to ``depth`` and released in
    a random order (a timeout flushes the pool), except that datagrams of
    one slot (header bytes 4-5) keep their order.

    Not reordered within a slot because the protocol cannot survive that: a
    rank's resend of chunk c overtaken by its chunk c+n (same slot, other
    ver) arrives when the rank's bit in copy ver(c) is already cleared, and
    opens a new round there with chunk c's offset, which the other ranks'
    chunk c+2n then mismatch."""

    def __init__(self, switch: tuple[str, int], depth: int = 4, rng_seed: int = 0):
        self.switch = switch
        self.depth = depth
        self.rng = random.Random(rng_seed)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.address = self.front.getsockname()
        self.client = None
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import select
        pools = {self.front: [], self.back: []}
        while not self._stop:
            ready, _, _ = select.select([self.front, self.back], [], [], 0.002)
            for s in ready:
                data, addr = s.recvfrom(65536)
                if s is self.front:
                    self.client = addr
                pools[s].append(data)
            for s, pool in pools.items():
                while pool and (len(pool) >= self.depth or not ready):
                    heads, seen = [], set()
                    for i, d in enumerate(pool):       # the oldest of each slot
                        if d[4:6] not in seen:
                            seen.add(d[4:6])
                            heads.append(i)
                    data = pool.pop(heads[self.rng.randrange(len(heads))])
                    if s is self.front:
                        self.back.sendto(data, self.switch)
                    elif self.client is not None:
                        self.front.sendto(data, self.client)

    def close(self):
        self._stop = True
        self.thread.join(timeout=5)
        self.front.close()
        self.back.close()


def jobs_of(params: Params, *spec: tuple[int, int, int, int]) -> JobTable:
    return JobTable([Job(*s) for s in spec], params)
