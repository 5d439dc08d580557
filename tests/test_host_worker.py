"""The worker library (netagg.host.Worker) against netagg serve: loss,
duplication and reordering; every rank bit-identical; RESULTs equal to
what `netagg model` predicts from the recorded in.pcap; int32 and min/max
exact; bf16; sizes 0 and non-multiples of K; ver persisting across calls;
timeouts (different sizes, switch down); two jobs at once; up-front checks."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from serve_util import ReorderProxy, jobs_of, raise_any, run_ranks, seed, serving

from netagg import pcap
from netagg.host import AllReduceTimeout, JobConfigError, Worker
from netagg.params import Params
from netagg.payload import decode_values
from netagg.sim import arith
from netagg.sim.frame_model import run_model_seq
from netagg.wire import DType, Header, Op

P = Params(workers=4, slots=64, elements=16, lanes=8, jobs=4)
K = P.elements


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def allreduce_all(addr, job, xs, *, slots, op="sum", dtype=None, timeout=0.01, retries=60,
                  addrs=None, calls=1):
    W = len(xs)

    def rank(r):
        where = addrs[r] if addrs else addr
        with Worker(where, job=job, rank=r, workers=W, slots=slots, elements=K,
                    timeout=timeout, retries=retries) as w:
            ys = [w.allreduce(xs[r], op=op, dtype=dtype) for _ in range(calls)]
            return ys, w.stats.to_dict()
    out = run_ranks(rank, W)
    raise_any(out)
    return out


def model_results(params, jobs, in_path):
    """(worker, offset) -> RESULT payload bits, from `netagg model` on in.pcap;
    also the model's frames."""
    out, stats = run_model_seq(params, jobs, pcap.read(in_path))
    values = {}
    for _, frame in out:
        payload = frame[42:34 + int.from_bytes(frame[38:40], "big")]
        h = Header.unpack(payload)
        v = decode_values(h.dtype, payload[16:16 + h.count * DType(h.dtype).size])
        key = (h.worker, h.offset)
        if key in values:
            assert np.array_equal(values[key], v)
        values[key] = v
    return values, [f for _, f in out], stats


@pytest.mark.parametrize("loss,dup,reorder", [(0.0, 0.0, False), (0.1, 0.1, False),
                                              (0.1, 0.2, True)])
def test_fp32_sum_under_faults_matches_model_replay(tmp_path, loss, dup, reorder):
    s = seed(int(loss * 100) + 7 * reorder)
    rng = np.random.default_rng(s)
    W, n, size = 3, 4, 12 * K + 7
    xs = [(rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
          for _ in range(W)]
    jobs = jobs_of(P, (0, W, 8, n))
    rec = tmp_path / "rec"
    with serving(P, jobs, record=str(rec), loss=loss, dup=dup, seed=s) as srv:
        proxies = ([ReorderProxy(srv.address, depth=3, rng_seed=s + r) for r in range(W)]
                   if reorder else None)
        try:
            out = allreduce_all(srv.address, 0, xs, slots=n,
                                addrs=[p.address for p in proxies] if proxies else None)
        finally:
            for p in proxies or ():
                p.close()
    ys = [o[0][0] for o in out]
    for y in ys[1:]:
        assert np.array_equal(bits(y), bits(ys[0]))
    values, frames, stats = model_results(P, jobs, rec / "in.pcap")
    assert frames == pcap.read_frames(rec / "out.pcap")
    for r, y in enumerate(ys):
        for c in range(-(-size // K)):
            assert np.array_equal(bits(y)[c * K:(c + 1) * K], values[(r, c * K)])
    final = srv.final
    assert {k: final[k] for k in stats} == stats
    if loss:
        assert final["lost_in"] + final["lost_out"] > 0
    if dup:
        assert final["duplicated"] > 0


@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_int32_exact(op):
    rng = np.random.default_rng(seed(1))
    W, n = 4, 3
    xs = [rng.integers(-2**31, 2**31, size=(7, 11), dtype=np.int32) for _ in range(W)]
    with serving(P, jobs_of(P, (1, W, 0, n)), loss=0.05, seed=seed(2)) as srv:
        out = allreduce_all(srv.address, 1, xs, slots=n, op=op)
    expect = xs[0].reshape(-1).view(np.uint32)
    for x in xs[1:]:
        expect, _, _ = arith.combine(DType.INT32, Op.from_name(op), expect,
                                     x.reshape(-1).view(np.uint32))
    for o in out:
        y = o[0][0]
        assert y.dtype == np.int32 and y.shape == (7, 11)
        assert np.array_equal(y.reshape(-1).view(np.uint32), expect)


@pytest.mark.parametrize("op", ["min", "max"])
def test_fp32_minmax_exact(op):
    rng = np.random.default_rng(seed(3))
    W, n = 3, 2
    xs = [rng.standard_normal(50).astype(np.float32) for _ in range(W)]
    xs[1][3], xs[2][4] = np.inf, -np.inf
    with serving(P, jobs_of(P, (0, W, 0, n))) as srv:
        out = allreduce_all(srv.address, 0, xs, slots=n, op=op)
    expect = (np.minimum if op == "min" else np.maximum).reduce(np.stack(xs))
    for o in out:
        assert np.array_equal(bits(o[0][0]), bits(expect))


def test_bf16_uint16_and_ml_dtypes():
    import ml_dtypes
    rng = np.random.default_rng(seed(4))
    W, n, size = 2, 2, 3 * K + 1
    xs = [rng.standard_normal(size).astype(ml_dtypes.bfloat16) for _ in range(W)]
    with serving(P, jobs_of(P, (0, W, 0, n)), dup=0.2, seed=seed(5)) as srv:
        out = allreduce_all(srv.address, 0, xs, slots=n)
        raw = allreduce_all(srv.address, 0, [x.view(np.uint16) for x in xs], slots=n,
                            dtype="bf16")
    wide = [arith.bf16_to_fp32(x.view(np.uint16)) for x in xs]
    acc, _, _ = arith.combine(DType.FP32, Op.SUM, wide[0], wide[1])
    expect, _ = arith.fp32_to_bf16(acc)
    for o, q in zip(out, raw, strict=True):
        assert o[0][0].dtype == xs[0].dtype and q[0][0].dtype == np.uint16
        assert np.array_equal(o[0][0].view(np.uint16), expect.astype(np.uint16))
        assert np.array_equal(q[0][0], expect.astype(np.uint16))


def test_sizes_and_ver_persisting_across_calls():
    """Consecutive calls of several sizes (0, 1, K-1, K, K+1, more chunks than
    slots) reuse the slots; each result is exact (int32 sum)."""
    rng = np.random.default_rng(seed(6))
    W, n = 2, 3
    sizes = [0, 1, K - 1, K, K + 1, 7 * K + 3, 2 * K]
    xs = [[rng.integers(-1000, 1000, size=m, dtype=np.int32) for m in sizes] for _ in range(W)]
    with serving(P, jobs_of(P, (0, W, 0, n))) as srv:
        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=W, slots=n, elements=K,
                        timeout=0.02, retries=50) as w:
                ys = [w.allreduce(x) for x in xs[r]]
                return ys, w.last_status.to_dict(), w.stats.to_dict()
        out = run_ranks(rank, W)
        raise_any(out)
    for r in range(W):
        ys, last, total = out[r]
        for i, y in enumerate(ys):
            assert np.array_equal(y, xs[0][i] + xs[1][i])
        assert last["results"] == 2          # the last call: 2*K elements
        assert total["results"] == sum(-(-m // K) for m in sizes)
        assert total["chunks"] == total["results"]


def test_ranks_with_different_sizes_time_out():
    W, n = 2, 4
    xs = [np.ones(K + 5, np.float32), np.ones(2 * K + 5, np.float32)]
    with serving(P, jobs_of(P, (0, W, 0, n))) as srv:
        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=W, slots=n, elements=K,
                        timeout=0.002, retries=3) as w:
                w.allreduce(xs[r])
        out = run_ranks(rank, W)
    for r, e in enumerate(out):
        assert isinstance(e, AllReduceTimeout), e
        text = str(e)
        assert "\n" not in text
        assert f"job 0 rank {r}" in text and f"chunk {e.chunk}" in text
        assert f"slot {e.slot}" in text and "different shapes" in text
        assert (e.job, e.rank) == (0, r)


def test_switch_down_times_out_and_worker_stays_usable():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()            # bound, never answers
        with Worker(dead, job=0, rank=0, workers=1, slots=2, elements=K, timeout=0.001,
                    retries=4) as w:
            with pytest.raises(AllReduceTimeout) as e:
                w.allreduce(np.zeros(3 * K, np.float32))
            assert e.value.chunk in (0, 1) and w.last_status.resends >= 4
            with pytest.raises(AllReduceTimeout):
                w.allreduce(np.zeros(1, np.float32))
    port = dead[1]                        # now closed: ICMP port unreachable
    with Worker(("127.0.0.1", port), job=0, rank=0, workers=1, slots=1, elements=K,
                timeout=0.001, retries=3) as w, pytest.raises(AllReduceTimeout):
        w.allreduce(np.zeros(1, np.float32))


def test_two_jobs_at_once_are_isolated():
    rng = np.random.default_rng(seed(8))
    a = [rng.integers(-9, 9, 300, dtype=np.int32) for _ in range(2)]
    b = [rng.integers(-9, 9, 200, dtype=np.int32) for _ in range(3)]
    with serving(P, jobs_of(P, (0, 2, 0, 4), (2, 3, 4, 4)), loss=0.05, seed=seed(9)) as srv:
        def rank(i):
            job, r, xs = (0, i, a) if i < 2 else (2, i - 2, b)
            with Worker(srv.address, job=job, rank=r, workers=len(xs), slots=4, elements=K,
                        timeout=0.01, retries=60) as w:
                return w.allreduce(xs[r])
        out = run_ranks(rank, 5)
        raise_any(out)
    for y in out[:2]:
        assert np.array_equal(y, a[0] + a[1])
    for y in out[2:]:
        assert np.array_equal(y, b[0] + b[1] + b[2])


def test_contributor_count_mismatch_is_an_error():
    with serving(P, jobs_of(P, (0, 2, 0, 2))) as srv:
        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=3, slots=2, elements=K,
                        timeout=0.01, retries=5) as w:
                w.allreduce(np.ones(4, np.float32))
        out = run_ranks(rank, 2)
    assert all(isinstance(e, JobConfigError) for e in out), out


@pytest.mark.parametrize("kw,match", [
    (dict(rank=2, workers=2), "rank"), (dict(workers=0), "workers"),
    (dict(workers=256), "workers"), (dict(slots=0), "slots"), (dict(elements=0), "elements"),
    (dict(elements=65536), "elements"), (dict(job=256), "job"), (dict(job=-1), "job"),
    (dict(timeout=0), "timeout"), (dict(switch=("no.such.host.invalid", 1)), "switch"),
    (dict(switch=("127.0.0.1", 70000)), "switch"),
])
def test_up_front_checks(kw, match):
    args = dict(switch=("127.0.0.1", 9), job=0, rank=0, workers=2, slots=2, elements=K)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        Worker(**args)


def test_unsupported_dtype_and_op():
    with Worker(("127.0.0.1", 9), job=0, rank=0, workers=1, slots=1, elements=K) as w:
        with pytest.raises(TypeError, match="unsupported dtype"):
            w.allreduce(np.zeros(3))
        with pytest.raises(TypeError):
            w.allreduce(np.zeros(3, np.float32), dtype="bf16")
        with pytest.raises(ValueError, match="op"):
            w.allreduce(np.zeros(3, np.float32), op="prod")
        with pytest.raises(ValueError, match="dtype"):
            w.allreduce(np.zeros(3, np.float32), dtype="fp64")
        y = w.allreduce(np.zeros((0, 3), np.float32))
        assert y.shape == (0, 3) and w.last_status.chunks == 0


def test_stale_results_are_ignored():
    """With every datagram duplicated, each chunk's CONTRIB is answered twice
    (the second time as a retransmission); the second RESULT is stale and
    ignored, and the results stay exact."""
    n = 2
    with serving(P, jobs_of(P, (0, 1, 0, n)), dup=1.0) as srv, \
            Worker(srv.address, job=0, rank=0, workers=1, slots=n, elements=K) as w:
        x = np.arange(10 * K, dtype=np.int32)
        assert np.array_equal(w.allreduce(x), x)
        st = w.last_status
        assert st.results == 10 and st.ignored >= st.results - n
        assert np.array_equal(w.allreduce(x), x)
