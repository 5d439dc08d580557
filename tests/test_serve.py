"""netagg serve: the command line (ready line, SIGINT/SIGTERM -> STATS.json,
refusals), junk datagrams of every size counted as `netagg model` counts
them, record/replay equivalence, and the golden model's fast fp32 path
against netagg.sim.arith."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
from serve_util import jobs_of, seed, serving

from netagg import pcap
from netagg.cli import main
from netagg.host import Worker
from netagg.host.serve import MAX_DATAGRAM, ServeError, mac_for_ip, parse_listen
from netagg.jobs import Job
from netagg.params import Params
from netagg.sim import arith
from netagg.sim.frame_model import run_model_seq
from netagg.sim.message_model import Switch, make_contrib
from netagg.wire import COUNTERS, DType, Op

P = Params(workers=4, slots=32, elements=16, lanes=8, jobs=2)
NETAGG = [sys.executable, "-m", "netagg"]


def write_jobs(tmp_path, jobs):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": [j.to_dict() for j in jobs]}))
    return str(path)


def start_serve(args):
    proc = subprocess.Popen(NETAGG + ["serve"] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("netagg serve: listening on udp 127.0.0.1:"), (
        line, proc.stderr.read() if proc.poll() is not None else "")
    port = int(line.split("udp ")[1].split(",")[0].rsplit(":", 1)[1])
    return proc, port, line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_serve_stats_on_signal(tmp_path, sig):
    jobs = [Job(0, 2, 0, 4)]
    stats = tmp_path / "STATS.json"
    proc, port, line = start_serve(["--jobs-config", write_jobs(tmp_path, jobs),
                                    "--listen", "127.0.0.1:0", "--stats", str(stats),
                                    "--elements", "16", "--lanes", "8", "--loss", "0.1",
                                    "--dup", "0.1", "--seed", str(seed())])
    try:
        assert "backend model" in line and "job 0 (W=2" in line
        x = np.arange(100, dtype=np.int32)

        def rank(r):
            with Worker(("127.0.0.1", port), job=0, rank=r, workers=2, slots=4,
                        elements=16, timeout=0.01, retries=60) as w:
                return w.allreduce(x)
        from serve_util import raise_any, run_ranks
        out = run_ranks(rank, 2)
        raise_any(out)
        assert all(np.array_equal(y, 2 * x) for y in out)
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert err.startswith("netagg serve: stopped:")
    s = json.loads(stats.read_text())
    assert set(s) == set(COUNTERS) | {"ignored", "lost_in", "lost_out", "duplicated"}
    assert s["results"] >= 7 and s["ignored"] == 0
    assert all(isinstance(v, int) for v in s.values())


@pytest.mark.parametrize("args,match", [
    (["--loss", "1.5"], "--loss"),
    (["--dup", "-0.1"], "--dup"),
    (["--listen", "192.0.2.1:5000"], "cannot listen"),
    (["--listen", "nonsense"], "--listen"),
    (["--elements", "10", "--lanes", "4"], "lanes"),
    (["--no-jobs"], "job table"),
    (["--bad-jobs"], "jobs config"),
])
def test_cli_serve_refusals(tmp_path, capsys, args, match):
    jobs = write_jobs(tmp_path, [Job(0, 2, 0, 4)])
    if args == ["--no-jobs"]:
        argv = ["serve"]
    elif args == ["--bad-jobs"]:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"jobs": [{"id": 0, "workers": 99, "slot_base": 0,
                                             "slots": 4}]}))
        argv = ["serve", "--jobs-config", str(bad)]
    else:
        argv = ["serve", "--jobs-config", jobs] + args
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("netagg: error: ") and err.count("\n") == 1 and match in err


def test_cli_serve_port_in_use(tmp_path, capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        argv = ["serve", "--jobs-config", write_jobs(tmp_path, [Job(0, 2, 0, 4)]),
                "--listen", f"127.0.0.1:{port}"]
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert "cannot listen" in err and err.count("\n") == 1


def junk_messages(rng, params, jobs):
    """Datagrams of a sample of sizes 0..65507 (edges included): random bytes,
    and headers that are almost valid, with the right lengths or not."""
    sizes = sorted({0, 1, 2, 15, 16, 17, 18, 20, 16 + 4 * params.elements,
                    17 + 4 * params.elements, 1471, 1472, 1473, 9000, 65506, MAX_DATAGRAM}
                   | set(int(v) for v in rng.integers(0, MAX_DATAGRAM + 1, 12)))
    out = [rng.bytes(n) for n in sizes]
    for dtype in DType:
        for count in (0, 1, params.elements, params.elements + 1):
            for job, slot, worker in ((1, 0, 0), (1, 99, 0), (1, 0, 9), (0, 99, 0), (0, 0, 9),
                                      (7, 0, 0)):
                m = make_contrib(job, slot, 0, worker, rng.integers(0, 2**16, max(count, 1)),
                                 dtype=dtype, count=count)
                out += [m, m[:-1], m + b"\0"]
    out.append(make_contrib(1, 0, 0, 0, [1], version=2))
    out.append(make_contrib(1, 0, 0, 0, [1], type=1))
    out.append(make_contrib(1, 0, 0, 0, [1], reserved=3))
    out.append(make_contrib(1, 0, 0, 0, [1], status=1))
    out.append(make_contrib(1, 0, 0, 0, [1], op=5))
    rng.shuffle(out)
    return out


def test_junk_datagrams_of_every_size_counted_like_model(tmp_path):
    rng = np.random.default_rng(seed(20))
    jobs = jobs_of(P, (0, 2, 0, 4), (1, 2, 4, 4))
    junk = junk_messages(rng, P, jobs)
    rec = tmp_path / "rec"
    with serving(P, jobs, record=str(rec)) as srv:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 21)
            for m in junk:
                s.sendto(m, srv.address)
                s.settimeout(0.001)
                try:
                    while True:
                        s.recv(65536)
                except OSError:
                    pass
        # Still serving, and the junk did not disturb job 0's next round.
        from serve_util import raise_any, run_ranks

        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=2, slots=4, elements=16,
                        timeout=0.01, retries=100) as w:
                return w.allreduce(np.full(40, r + 1, np.int32))
        out = run_ranks(rank, 2)
        raise_any(out)
        assert all(np.array_equal(y, np.full(40, 3, np.int32)) for y in out)
    records = pcap.read(rec / "in.pcap")
    assert len(records) == srv.final["rx"]
    assert [r.data[42:34 + int.from_bytes(r.data[38:40], "big")] for r in records[:len(junk)]
            ] == junk
    sw = Switch(P, jobs)
    verdicts = [sw.process(m)[0] for m in junk]
    assert len(verdicts) == len(junk)
    frames, stats = run_model_seq(P, jobs, records)
    assert {k: srv.final[k] for k in stats} == stats
    assert [f for _, f in frames] == pcap.read_frames(rec / "out.pcap")


def test_record_replay_with_cli_model(tmp_path):
    """`netagg model` on the recorded in.pcap writes out.pcap's RESULT frames."""
    jobs = [Job(0, 3, 0, 4), Job(1, 2, 8, 2)]
    jobs_path = write_jobs(tmp_path, jobs)
    rec = tmp_path / "rec"
    with serving(P, jobs_of(P, *(tuple(j.to_dict().values()) for j in jobs)),
                 record=str(rec), loss=0.1, dup=0.1, seed=seed(30)) as srv:
        from serve_util import raise_any, run_ranks

        def rank(i):
            job, r, W, n = (0, i, 3, 4) if i < 3 else (1, i - 3, 2, 2)
            with Worker(srv.address, job=job, rank=r, workers=W, slots=n, elements=16,
                        timeout=0.01, retries=100) as w:
                return w.allreduce(np.arange(70, dtype=np.float32) * (r + 1), op="max")
        raise_any(run_ranks(rank, 5))
    out = tmp_path / "x.pcap"
    stats_path = tmp_path / "s.json"
    assert main(["model", "--jobs-config", jobs_path, "--in", str(rec / "in.pcap"),
                 "--out", str(out), "--stats", str(stats_path), "--elements", "16",
                 "--lanes", "8", "--slots", "32", "--workers", "4", "--jobs", "2"]) == 0
    assert pcap.read_frames(out) == pcap.read_frames(rec / "out.pcap")
    replay = json.loads(stats_path.read_text())
    assert {k: srv.final[k] for k in replay} == replay
    # Addresses: from the datagram's source, MACs by the documented rule.
    first = pcap.read(rec / "in.pcap")[0].data
    assert first[6:12] == mac_for_ip(socket.inet_aton("127.0.0.1"))
    assert first[0:6] == P.switch_mac_bytes and first[30:34] == P.switch_ip_bytes


def test_pcaps_valid_while_serving(tmp_path):
    rec = tmp_path / "rec"
    with serving(P, jobs_of(P, (0, 1, 0, 2)), record=str(rec)) as srv, \
            Worker(srv.address, job=0, rank=0, workers=1, slots=2, elements=16) as w:
        for i in range(3):
            w.allreduce(np.ones(20, np.float32))
            assert len(pcap.read(rec / "in.pcap")) == 2 * (i + 1)
            assert len(pcap.read(rec / "out.pcap")) == 2 * (i + 1)


def _fp32_cases(rng, n):
    exps = rng.integers(-149, 128, size=n)
    mant = rng.random(n) + 1.0
    vals = (mant * np.exp2(exps.astype(np.float64))) * rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        v = vals.astype(np.float32).view(np.uint32)
    edge = np.array([0x7F7FFFFF, 0x7F000000, 0x7B000000, 0x7AFFFFFF, 0x00000001, 0x80000000,
                     0x7F800000, 0x7FC00001, 0xFF800000, 0x3F800000], np.uint32)
    return np.concatenate([v, edge, edge | 0x80000000])


@pytest.mark.parametrize("dtype,mode", [(DType.FP32, "fp32"), (DType.BF16, "fp32"),
                                        (DType.BF16, "bf16")])
def test_fast_sum_path_bit_exact(dtype, mode):
    """Switch.process (whose fp32 sums of operands below 2**119 skip
    netagg.sim.arith) against arith.reduce, with magnitudes around 2**119 and
    2**127, subnormals and specials."""
    rng = np.random.default_rng(seed(40))
    K = 64
    params = Params(workers=8, slots=4, elements=K, lanes=8, jobs=1, bf16_accumulate=mode)
    for trial in range(60):
        W = int(rng.integers(1, 9))
        sw = Switch(params, [Job(0, W, 0, 4)])
        pool = _fp32_cases(rng, 4 * K)
        if dtype is DType.BF16:
            pool = pool >> 16
        scale = rng.choice([0, 1, 2])     # mostly huge, mostly small, or mixed
        contribs = []
        for _ in range(W):
            v = rng.choice(pool, K)
            if scale == 1 and dtype is DType.FP32:
                v = (v & 0x807FFFFF) | (rng.integers(240, 255, K, dtype=np.uint32) << 23)
            contribs.append(v.astype(np.uint32))
        results = []
        for w, v in enumerate(contribs):
            verdict, results = sw.process(make_contrib(0, 0, trial & 1, w, v, dtype=dtype))
        expect, nan, ovf = arith.reduce(dtype, Op.SUM, contribs, mode)
        got = sw.receive(make_contrib(0, 0, trial & 1, 0, contribs[0], dtype=dtype)).results[0]
        assert np.array_equal(got.values, expect), trial
        status = W | (256 if nan else 0) | (512 if ovf else 0)
        assert got.header.status == status
        assert results[0][16:] == got.pack()[16:]


def test_cli_help_lists_serve():
    out = subprocess.run(NETAGG + ["serve", "--help"], capture_output=True, text=True,
                         env=dict(os.environ), timeout=60)
    assert out.returncode == 0 and "--record" in out.stdout and "--loss" in out.stdout


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:5000", ("127.0.0.1", 5000)),
    ("127.0.0.2", ("127.0.0.2", 42662)),
    ("localhost:0", ("127.0.0.1", 0)),
])
def test_parse_listen_takes_addresses_and_names(text, expected):
    assert parse_listen(text, 42662) == expected


@pytest.mark.parametrize("text", [":5000", "127.0.0.1:x", "127.0.0.1:70000",
                                  "no.such.host.invalid:1"])
def test_parse_listen_refuses_in_one_line(text):
    with pytest.raises(ServeError, match="--listen") as e:
        parse_listen(text, 42662)
    assert "\n" not in str(e.value)
