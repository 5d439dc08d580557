"""netagg serve --backend rtl: the generated core under Verilator serving
workers in real time; the RESULTs equal the golden model's on the recorded
arrival order, per (job, slot, ver, worker) in the same order, and the
counters the core's."""

from __future__ import annotations

import socket
from collections import defaultdict

import numpy as np
import pytest
from serve_util import jobs_of, raise_any, run_ranks, seed, serving

from netagg import pcap
from netagg.host import Worker
from netagg.params import Params
from netagg.sim.frame_model import run_model_seq
from netagg.sim.message_model import make_contrib

P = Params(workers=2, slots=16, elements=8, lanes=4, jobs=1)


def per_key(frames):
    d = defaultdict(list)
    for f in frames:
        p = f[42:]
        d[(p[2], p[4:6], p[1] & 1, p[6:8])].append(f)
    return d


@pytest.mark.cocotb
@pytest.mark.verilator
def test_rtl_backend_matches_model(tmp_path):
    rng = np.random.default_rng(seed(60))
    jobs = jobs_of(P, (0, 2, 0, 8))
    xs = [rng.standard_normal(37).astype(np.float32) for _ in range(2)]
    ints = [rng.integers(-2**31, 2**31, 20, dtype=np.int32) for _ in range(2)]
    rec = tmp_path / "rec"
    with serving(P, jobs, backend="rtl", simulator="verilator", record=str(rec),
                 loss=0.1, dup=0.1, seed=seed(61)) as srv:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for n in (0, 1, 15, 16, 17, 1472, 65507):     # junk of several sizes, edges
                s.sendto(rng.bytes(n), srv.address)
            s.sendto(make_contrib(0, 0, 0, 0, [1] * 8, count=9), srv.address)
        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=2, slots=8, elements=8,
                        timeout=0.2, retries=40) as w:
                return w.allreduce(xs[r]), w.allreduce(ints[r], op="min")
        out = run_ranks(rank, 2, timeout=600)
        raise_any(out)
    for y, z in out:
        assert np.array_equal(y, xs[0] + xs[1])
        assert np.array_equal(z, np.minimum(ints[0], ints[1]))
    frames, stats = run_model_seq(P, jobs, pcap.read(rec / "in.pcap"))
    assert per_key(f for _, f in frames) == per_key(pcap.read_frames(rec / "out.pcap"))
    assert {k: srv.final[k] for k in stats} == stats
    assert stats["drop_bad_length"] + stats["drop_bad_header"] >= 6
