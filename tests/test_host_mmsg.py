"""The batched socket I/O of ``netagg serve`` (netagg.host.mmsg): datagrams of
every size in arrival order with their source addresses, refused sends
skipped, the receive timeout; and serve on its batched path against the
golden model and against its one-datagram-at-a-time path."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from serve_util import jobs_of, seed, serving
from test_serve import P, junk_messages

from netagg.host import mmsg
from netagg.host.serve import MAX_DATAGRAM
from netagg.sim.message_model import Switch, make_contrib
from netagg.wire import COUNTERS, WORKER_BYTES, DType

pytestmark = pytest.mark.skipif(not mmsg.available(),
                                reason="recvmmsg/sendmmsg exist on Linux only")


def _udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    return s


def _drain(s, timeout=0.3):
    s.settimeout(timeout)
    out = []
    try:
        while True:
            out.append(s.recvfrom(MAX_DATAGRAM + 1))
    except TimeoutError:
        return out


def test_batches_keep_order_sizes_and_addresses():
    rng = np.random.default_rng(seed(40))
    sizes = [0, 1, 15, 16, 17, 1472, 9000, 65506, MAX_DATAGRAM] + \
        [int(v) for v in rng.integers(0, 2000, 40)]
    with _udp() as a, _udp() as b, _udp() as c:
        io = mmsg.BatchIO(a, batch=7)
        sent = []
        for k, n in enumerate(sizes):
            src = (b, c)[k % 3 == 0]
            data = rng.bytes(n)
            src.sendto(data, a.getsockname())
            sent.append((data, src.getsockname()))
        got = []
        while len(got) < len(sent):
            k = io.recv()
            assert 0 < k <= 7
            got += [(io.data[i], io.addr(i)) for i in range(k)]
        assert got == sent
        # The address objects are cached: one tuple per source.
        assert len({id(addr) for _, addr in got}) == 2
        # Sends: every one queued, in order, through full and partial batches;
        # an unreachable or malformed destination is skipped and counted.
        for k, (data, addr) in enumerate(got):
            io.send(data, addr)
            if k == 5:
                io.send(b"x", ("999.0.0.1", 1))
                io.send(b"y", ("127.0.0.1", 65536))
        io.flush()
        assert io.refused == 2
        # Each destination receives its datagrams, in order.
        assert [d for d, _ in _drain(b)] == [d for k, (d, _) in enumerate(sent) if k % 3]
        assert [d for d, _ in _drain(c)] == [d for k, (d, _) in enumerate(sent) if not k % 3]
        t = time.monotonic()
        assert io.recv() == 0                      # nothing queued: the timeout
        assert time.monotonic() - t < 5


def test_batched_serve_counts_junk_like_the_model():
    """Junk of every size through serve's batched path (no recording, no
    faults): the counters are the model's on the same sequence."""
    rng = np.random.default_rng(seed(41))
    jobs = jobs_of(P, (0, 2, 0, 4), (1, 2, 4, 4))
    junk = junk_messages(rng, P, jobs)
    with serving(P, jobs) as srv, _udp() as s:
        assert srv.batch > 0
        for k in range(0, len(junk), 16):          # bursts the server takes as batches
            for m in junk[k:k + 16]:
                s.sendto(m, srv.address)
            time.sleep(0.002)
        deadline = time.monotonic() + 10
        while srv.backend.counters["rx"] < len(junk) and time.monotonic() < deadline:
            time.sleep(0.01)
    sw = Switch(P, jobs)
    for m in junk:
        sw.process(m)
    assert {k: srv.final[k] for k in COUNTERS} == {k: sw.counters[k] for k in COUNTERS}


def _rounds(rng, W, slots, n):
    """n lockstep rounds of int32 contributions from W workers, round r on
    slot r % slots (ver alternating per use), with a duplicate now and then."""
    out = []
    for r in range(n):
        slot, ver = r % slots, (r // slots) & 1
        for w in range(W):
            m = make_contrib(0, slot, ver, w, rng.integers(0, 2**20, 8),
                             dtype=DType.INT32, offset=r * 8)
            out.append((w, m))
            if rng.random() < 0.1:
                out.append((w, m))
    return out


@pytest.mark.parametrize("batch", [0, 64])
def test_batched_and_unbatched_serve_send_the_same_results(batch):
    """The same traffic through serve with ``batch`` (0: recvfrom/sendto per
    datagram): every worker receives exactly the RESULTs the golden model
    produces for it, in order."""
    rng = np.random.default_rng(seed(42))
    W, slots = 3, 4
    jobs = jobs_of(P, (0, W, 0, slots))
    traffic = _rounds(rng, W, slots, 60)
    sw = Switch(P, jobs)
    want = {w: [] for w in range(W)}
    for _, m in traffic:
        for r in sw.process(m)[1]:
            want[int.from_bytes(r[WORKER_BYTES], "big")].append(r)
    socks = [_udp() for _ in range(W)]
    try:
        with serving(P, jobs, batch=batch) as srv:
            for k in range(0, len(traffic), 20):
                for w, m in traffic[k:k + 20]:
                    socks[w].sendto(m, srv.address)
                time.sleep(0.002)
            got = {w: [d for d, _ in _drain(socks[w])] for w in range(W)}
    finally:
        for s in socks:
            s.close()
    assert got == want
    assert srv.final["tx"] == sum(len(v) for v in want.values())
