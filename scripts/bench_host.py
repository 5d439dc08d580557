"""Host-side benchmark (JSON): the golden model's and ``netagg serve``'s
messages per second, one rank's worker-library rate, all-reduce goodput and
per-call latency through ``netagg serve`` beside ``torch.distributed``
(gloo) on the same tensors in the same run, the slowdown under loss, and
the rtl backend's messages per second.

    python scripts/bench_host.py --json out/bench_host.json            # full grid
    python scripts/bench_host.py --quick --json out/bench_host.json    # reduced grid
    python scripts/bench_host.py --only model,serve,worker,ceiling     # the message rates

Sections: ``model`` (Switch.process and the frame-level model on 131,072
lockstep K = 64 fp32 messages), ``serve`` (serve kept saturated by a C
load generator, W = 2, 4, 8 ranks streaming lockstep K = 64 chunks from
their own sockets: serve's messages/s and CPU us/message; and the earlier
figure, a Python raw client keeping a window of 64 in flight), ``worker``
(one rank, W = 1 job: every CONTRIB answered at once; messages/s and the
rank's CPU time per message; and against an ideal switch, a batched C
reflector, for the library's own rate), ``ceiling`` (raw Python UDP, one
system call per datagram, measured the same ways: a client against the C
reflector, a reflector fed by the C load generator), ``grid`` (W x tensor
size x K: goodput MB/s per rank
= tensor bytes / call time, median call latency; gloo beside it and the
ratio), ``loss`` (slowdown of one grid point under 1% and 5% loss), ``rtl``
(Verilator backend, small build: messages/s). Figures depend on the machine
and its load; the JSON records the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SIZES_FULL = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
PIN: dict[str, set[int]] = {}
"""With ``--pin``: CPU sets of the measured process ("measured") and of its
peer ("peer"), e.g. serve on CPU 1 and the load generator on CPU 0."""


def _preexec(role: str):
    cpus = PIN.get(role)
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)
SIZES_QUICK = [4 << 10, 256 << 10, 4 << 20]


def _lockstep(n_msgs: int, W: int, K: int, slots: int):
    from netagg.sim.message_model import make_contrib
    rng = np.random.default_rng(0)
    vals = rng.standard_normal((16, K)).astype(np.float32).view(np.uint32)
    msgs = []
    rounds = n_msgs // W
    for r in range(rounds):
        s, ver = r % slots, (r // slots) & 1
        for w in range(W):
            msgs.append(make_contrib(0, s, ver, w, vals[(r + w) % 16], offset=r * K))
    return msgs


def bench_model(n: int = 131072) -> dict:
    from netagg import frames as framing
    from netagg.jobs import Job, JobTable
    from netagg.params import Params
    from netagg.sim.frame_model import run_model_seq
    from netagg.sim.message_model import Switch
    params = Params()
    jobs = JobTable([Job(0, 4, 0, 64)], params)
    msgs = _lockstep(n, 4, 64, 64)
    sw = Switch(params, jobs)
    load = os.getloadavg()
    c0, t = time.process_time(), time.perf_counter()
    for m in msgs:
        sw.process(m)
    dt, cpu = time.perf_counter() - t, time.process_time() - c0
    src = framing.Endpoint(b"\2\0\x7f\0\0\1", b"\x7f\0\0\1", 5000)
    dst = framing.Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    frames = [framing.build_frame(m, src, dst) for m in msgs]
    t = time.perf_counter()
    run_model_seq(params, jobs, frames)
    dt2 = time.perf_counter() - t
    return {"messages": n, "workers": 4, "K": 64,
            "switch_process_msgs_per_s": round(n / dt), "switch_process_s": round(dt, 3),
            "switch_process_cpu_us_per_msg": round(cpu / n * 1e6, 2), "load_average": load,
            "frame_model_msgs_per_s": round(n / dt2), "frame_model_s": round(dt2, 3)}


class Serve:
    """A ``netagg serve`` subprocess."""

    def __init__(self, jobs: list[dict], extra: list[str] = (), role: str = "measured"):
        self.tmp = tempfile.mkdtemp(prefix="netagg-bench-")
        path = os.path.join(self.tmp, "jobs.json")
        with open(path, "w") as f:
            json.dump({"jobs": jobs}, f)
        self.stats_path = os.path.join(self.tmp, "STATS.json")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "netagg", "serve", "--jobs-config", path, "--listen",
             "127.0.0.1:0", "--stats", self.stats_path, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            preexec_fn=_preexec(role))
        line = self.proc.stdout.readline()
        if not line.startswith("netagg serve: listening"):
            raise RuntimeError(f"netagg serve did not start: {line!r}")
        self.port = int(line.split("udp ")[1].split(",")[0].rsplit(":", 1)[1])
        self.address = ("127.0.0.1", self.port)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def receiver_waits(self) -> int:
        """Voluntary context switches of serve's receiving (main) thread: how
        often it found no datagram waiting and slept."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        return -1

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)
        with open(self.stats_path) as f:
            return json.load(f)


def bench_serve(n: int = 40000, window: int = 64) -> dict:
    """A raw client keeps ``window`` lockstep CONTRIBs (W = 4 from one socket)
    in flight; rate = messages / elapsed time."""
    W = 4
    srv = Serve([{"id": 0, "workers": W, "slot_base": 0, "slots": 64}])
    try:
        msgs = _lockstep(n, W, 64, 64)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        s.connect(srv.address)
        s.settimeout(2.0)
        buf = bytearray(65536)
        c0 = srv.cpu_seconds()
        t = time.perf_counter()
        sent = got = 0
        # RESULTs: W per round, every W-th message completes a round.
        for m in msgs[:window]:
            s.send(m)
            sent += 1
        expected = (n // W) * W
        try:
            while got < expected:
                s.recv_into(buf)
                got += 1
                if got % W == 0:
                    for m in msgs[sent:sent + W]:
                        s.send(m)
                    sent += min(W, n - sent)
        except TimeoutError:
            pass
        dt = time.perf_counter() - t
        cpu = srv.cpu_seconds() - c0
        s.close()
    finally:
        stats = srv.stop()
    return {"messages": stats["rx"], "results_sent": stats["tx"], "window": window,
            "serve_msgs_per_s": round(stats["rx"] / dt),
            "serve_cpu_us_per_msg": round(cpu / max(stats["rx"], 1) * 1e6, 1),
            "complete": got == expected}


def bench_worker(chunks: int = 50000, K: int = 64, slots: int = 128) -> dict:
    from netagg.host import Worker
    srv = Serve([{"id": 0, "workers": 1, "slot_base": 0, "slots": slots}], role="peer")
    try:
        x = np.ones(chunks * K, np.float32)
        with Worker(srv.address, 0, 0, 1, slots, K, timeout=0.5) as w:
            w.allreduce(x[:K * 100])
            load = os.getloadavg()
            c0, s0 = time.process_time(), srv.cpu_seconds()
            t = time.perf_counter()
            w.allreduce(x)
            dt = time.perf_counter() - t
            cpu, scpu = time.process_time() - c0, srv.cpu_seconds() - s0
            st = w.last_status.to_dict()
    finally:
        srv.stop()
    return {"chunks": chunks, "K": K, "slots": slots, "rank_msgs_per_s": round(chunks / dt),
            "rank_cpu_us_per_msg": round(cpu / chunks * 1e6, 1),
            "serve_cpu_us_per_msg": round(scpu / chunks * 1e6, 1), "status": st,
            "load_average": load}


REFLECTOR_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
/* An ideal switch for W = 1 jobs: every CONTRIB comes back at once as its
   RESULT (type 1, status = 1 contributor), in batches (recvmmsg, sendmmsg).
   Prints its port, serves until killed. */
#define B 64
int main(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0), big = 1 << 22;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct sockaddr_in a = {0}; socklen_t l = sizeof a;
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &l);
    printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
    static unsigned char b[B][65536];
    struct sockaddr_in f[B]; struct mmsghdr m[B], o[B]; struct iovec v[B], w[B];
    for (;;) {
        for (int i = 0; i < B; i++) {
            v[i].iov_base = b[i]; v[i].iov_len = sizeof b[i];
            memset(&m[i], 0, sizeof m[i]);
            m[i].msg_hdr.msg_iov = &v[i]; m[i].msg_hdr.msg_iovlen = 1;
            m[i].msg_hdr.msg_name = &f[i]; m[i].msg_hdr.msg_namelen = sizeof f[i];
        }
        int n = recvmmsg(s, m, B, MSG_WAITFORONE, NULL), k = 0;
        for (int i = 0; i < n; i++) {
            if (m[i].msg_len < 16) continue;
            b[i][0] = 0x11; b[i][14] = 0; b[i][15] = 1;
            w[k].iov_base = b[i]; w[k].iov_len = m[i].msg_len;
            memset(&o[k], 0, sizeof o[k]);
            o[k].msg_hdr.msg_iov = &w[k]; o[k].msg_hdr.msg_iovlen = 1;
            o[k].msg_hdr.msg_name = &f[i]; o[k].msg_hdr.msg_namelen = m[i].msg_hdr.msg_namelen;
            k++;
        }
        for (int j = 0; j < k;) { int r = sendmmsg(s, o + j, k - j, 0); if (r <= 0) break; j += r; }
    }
}
"""

LOADGEN_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
/* W ranks of a lockstep job streaming to a netagg switch, each from its own
   UDP socket: rank w sends chunk c (K fp32 elements, offset c*K) on slot
   c mod S with ver (c / S) & 1, and slot s's next chunk once its RESULT for
   slot s arrived (one chunk in flight per slot and rank).
   usage: loadgen PORT W S K CHUNKS JOB; prints one JSON line. */
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
#define BATCH 64
int main(int argc, char **argv) {
    if (argc < 7) return 2;
    int port = atoi(argv[1]), W = atoi(argv[2]), S = atoi(argv[3]), K = atoi(argv[4]);
    long N = atol(argv[5]); int job = atoi(argv[6]);
    int len = 16 + 4 * K;
    int *fd = calloc(W, sizeof *fd);
    long *next = calloc(W, sizeof *next), *got = calloc(W, sizeof *got);
    struct pollfd *pf = calloc(W, sizeof *pf);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001); a.sin_port = htons(port);
    unsigned char *msg = calloc(BATCH, len), rb[BATCH][2048];
    struct mmsghdr rm[BATCH], sm[BATCH]; struct iovec rv[BATCH], sv[BATCH];
    for (int i = 0; i < BATCH; i++) {
        rv[i].iov_base = rb[i]; rv[i].iov_len = sizeof rb[i];
        memset(&rm[i], 0, sizeof rm[i]);
        rm[i].msg_hdr.msg_iov = &rv[i]; rm[i].msg_hdr.msg_iovlen = 1;
        sv[i].iov_base = msg + i * len; sv[i].iov_len = len;
        memset(&sm[i], 0, sizeof sm[i]);
        sm[i].msg_hdr.msg_iov = &sv[i]; sm[i].msg_hdr.msg_iovlen = 1;
    }
    for (int w = 0; w < W; w++) {
        fd[w] = socket(AF_INET, SOCK_DGRAM, 0);
        int big = 1 << 22;
        setsockopt(fd[w], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        setsockopt(fd[w], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        connect(fd[w], (struct sockaddr *)&a, sizeof a);
        pf[w].fd = fd[w]; pf[w].events = POLLIN;
    }
    /* fill: chunk c of rank w into message i of the send batch */
#define FILL(i, w, c) do { unsigned char *m = msg + (i) * len; long c_ = (c); \
        m[0] = 0x10; m[1] = (c_ / S) & 1; m[2] = job; m[3] = 0x10; \
        m[4] = (c_ % S) >> 8; m[5] = (c_ % S) & 255; m[6] = (w) >> 8; m[7] = (w) & 255; \
        uint32_t o = htonl((uint32_t)(c_ * K)); memcpy(m + 8, &o, 4); \
        m[12] = K >> 8; m[13] = K & 255; m[14] = m[15] = 0; \
        for (int e = 0; e < K; e++) { float f = (float)((c_ + e + (w)) % 97) * 0.25f; uint32_t u; \
            memcpy(&u, &f, 4); u = htonl(u); memcpy(m + 16 + 4 * e, &u, 4); } } while (0)
    double t0 = now(), last = t0;
    long total = 0, want = N * W;
    for (int w = 0; w < W; w++) {
        long first = N < S ? N : S;
        for (long c = 0; c < first; c += BATCH) {
            int b = 0;
            for (; b < BATCH && c + b < first; b++) FILL(b, w, c + b);
            sendmmsg(fd[w], sm, b, 0);
        }
        next[w] = first;
    }
    while (total < want) {
        int r = poll(pf, W, 1000);
        if (r <= 0) { if (now() - last > 2.0) break; continue; }
        for (int w = 0; w < W; w++) {
            if (!(pf[w].revents & POLLIN)) continue;
            int n = recvmmsg(fd[w], rm, BATCH, MSG_DONTWAIT, NULL);
            if (n <= 0) continue;
            int b = 0;
            for (int i = 0; i < n; i++) {
                if (rm[i].msg_len < 16 || rb[i][0] != 0x11) continue;
                got[w]++; total++;
                if (next[w] < N) { FILL(b, w, next[w]); next[w]++; b++; }
            }
            if (b) sendmmsg(fd[w], sm, b, 0);
            last = now();
        }
    }
    double dt = last - t0;
    printf("{\"ranks\": %d, \"chunks_per_rank\": %ld, \"results\": %ld, \"seconds\": %.6f, "
           "\"complete\": %s}\n", W, N, total, dt, total == want ? "true" : "false");
    return 0;
}
"""


_BUILT: dict[str, str] = {}


def _c_program(name: str, source: str) -> str | None:
    """Compile one of the C helpers (once per run); None without a C compiler."""
    import shutil
    if name in _BUILT:
        return _BUILT[name]
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    tmp = tempfile.mkdtemp(prefix="netagg-bench-")
    src, exe = os.path.join(tmp, name + ".c"), os.path.join(tmp, name)
    with open(src, "w") as f:
        f.write(source)
    subprocess.run([cc, "-O2", "-o", exe, src], check=True)
    _BUILT[name] = exe
    return exe


def _loadgen(port: int, W: int, slots: int, K: int, chunks: int, job: int = 0) -> dict:
    exe = _c_program("loadgen", LOADGEN_C)
    out = subprocess.run([exe, str(port), str(W), str(slots), str(K), str(chunks), str(job)],
                         capture_output=True, text=True, check=True, timeout=600,
                         preexec_fn=_preexec("peer")).stdout
    return json.loads(out)


def bench_serve_saturated(Ws=(2, 4, 8), messages: int = 160000, K: int = 64,
                          slots: int = 64) -> list[dict]:
    """``netagg serve`` (model backend) kept saturated by a C load generator:
    W ranks, each from its own UDP socket, stream lockstep K-element fp32
    chunks with one chunk in flight per slot and rank (``slots`` x W
    messages queued at serve). Rate = messages serve processed (its ``rx``) /
    the load's wall time; CPU = serve's user + system time per message."""
    if _c_program("loadgen", LOADGEN_C) is None:
        return [{"skipped": "no C compiler"}]
    rows = []
    for W in Ws:
        srv = Serve([{"id": 0, "workers": W, "slot_base": 0, "slots": slots}])
        try:
            _loadgen(srv.port, W, slots, K, 200, job=0)             # warm-up (slots reused)
            load = os.getloadavg()
            c0, v0 = srv.cpu_seconds(), srv.receiver_waits()
            r0 = 200 * W
            res = _loadgen(srv.port, W, slots, K, messages // W, job=0)
            cpu, waits = srv.cpu_seconds() - c0, srv.receiver_waits() - v0
        finally:
            stats = srv.stop()
        rx = stats["rx"] - r0
        rows.append({"workers": W, "K": K, "slots": slots, "messages": rx,
                     "results_sent": stats["tx"] - r0, "seconds": res["seconds"],
                     "serve_msgs_per_s": round(rx / res["seconds"]),
                     "serve_cpu_us_per_msg": round(cpu / max(rx, 1) * 1e6, 2),
                     "serve_cpu_share": round(cpu / res["seconds"], 3),
                     "serve_receiver_waits": waits,
                     "complete": res["complete"], "load_average": load})
    return rows


@contextlib.contextmanager
def _reflector():
    """The C reflector (the ideal switch) on the peer CPUs; yields its port."""
    proc = subprocess.Popen([_c_program("reflector", REFLECTOR_C)], stdout=subprocess.PIPE,
                            text=True, preexec_fn=_preexec("peer"))
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def bench_worker_alone(chunks: int = 100000, K: int = 64, slots: int = 128) -> dict:
    """One rank against an ideal switch (a C reflector answering each batch
    of CONTRIBs with one sendmmsg): the worker library's own rate. Skipped
    without a C compiler."""
    from netagg.host import Worker
    if _c_program("reflector", REFLECTOR_C) is None:
        return {"skipped": "no C compiler"}
    with _reflector() as port:
        x = np.ones(chunks * K, np.float32)
        with Worker(("127.0.0.1", port), 0, 0, 1, slots, K, timeout=0.5) as w:
            w.allreduce(x[:K * 1000])
            load = os.getloadavg()
            c0 = time.process_time()
            t = time.perf_counter()
            y = w.allreduce(x)
            dt = time.perf_counter() - t
            cpu = time.process_time() - c0
            st = w.last_status.to_dict()
        assert np.array_equal(y, x)
    return {"chunks": chunks, "K": K, "slots": slots, "rank_msgs_per_s": round(chunks / dt),
            "rank_cpu_us_per_msg": round(cpu / chunks * 1e6, 2),
            "rank_cpu_share": round(cpu / dt, 3), "status": st, "load_average": load}


def bench_ceiling(n: int = 100000, K: int = 64, window: int = 128) -> dict:
    """The raw Python UDP ceilings, measured the same way: (1) a Python
    client with one ``send`` and one ``recv_into`` per datagram, ``window``
    in flight, against the C reflector (the most a rank can do with one
    system call per datagram); (2) a Python reflector, one ``recvfrom_into``
    and one ``sendto`` per datagram, fed by the C load generator (W = 1,
    ``window`` in flight): the most serve can do with no work per message."""
    out = {}
    if _c_program("reflector", REFLECTOR_C) is None:
        return {"skipped": "no C compiler"}
    with _reflector() as port:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        s.connect(("127.0.0.1", port))
        msg = bytes(16 + 4 * K)
        buf = bytearray(65536)
        send, recv_into = s.send, s.recv_into
        load = os.getloadavg()
        c0, t = time.process_time(), time.perf_counter()
        for _ in range(window):
            send(msg)
        for _ in range(n - window):
            recv_into(buf)
            send(msg)
        for _ in range(window):
            recv_into(buf)
        dt, cpu = time.perf_counter() - t, time.process_time() - c0
        s.close()
        out["python_client_vs_reflector"] = {
            "msgs_per_s": round(n / dt), "cpu_us_per_msg": round(cpu / n * 1e6, 2),
            "load_average": load}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    s.bind(("127.0.0.1", 0))
    exe = _c_program("loadgen", LOADGEN_C)
    lg = subprocess.Popen([exe, str(s.getsockname()[1]), "1", str(window), str(K), str(n), "0"],
                          stdout=subprocess.PIPE, text=True, preexec_fn=_preexec("peer"))
    buf = bytearray(65536)
    view = memoryview(buf)
    recvfrom_into, sendto = s.recvfrom_into, s.sendto
    load = os.getloadavg()
    c0 = time.process_time()
    for _ in range(n):
        m, addr = recvfrom_into(buf)
        buf[0] = 0x11
        buf[15] = 1
        sendto(view[:m], addr)
    cpu = time.process_time() - c0
    res = json.loads(lg.communicate(timeout=600)[0])
    s.close()
    out["python_reflector_vs_loadgen"] = {
        "msgs_per_s": round(n / res["seconds"]), "cpu_us_per_msg": round(cpu / n * 1e6, 2),
        "load_average": load}
    return out


# -- the grid: W ranks, netagg vs gloo ----------------------------------------

def _rank(rank, W, store_port, switch_port, sizes, Ks, slots, reps, queue):
    import torch
    import torch.distributed as dist

    from netagg.host import Worker
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{store_port}", rank=rank,
                            world_size=W)
    workers = {K: Worker(("127.0.0.1", switch_port), job=j, rank=rank, workers=W, slots=slots,
                         elements=K, timeout=0.05, retries=200) for j, K in enumerate(Ks)}
    out = []
    for size in sizes:
        n = size // 4
        x = (np.arange(n, dtype=np.float32) % 97) * (rank + 1)
        t_ = torch.from_numpy(x.copy())
        r = max(1, min(reps, (4 << 20) // size * 2 if size < (4 << 20) else 1))
        row = {"bytes": size}
        for K, w in workers.items():
            times = []
            for _ in range(r):
                dist.barrier()
                t = time.perf_counter()
                w.allreduce(x)
                times.append(time.perf_counter() - t)
            row[f"netagg_K{K}_s"] = statistics.median(times)
            row[f"netagg_K{K}_resends"] = w.last_status.resends
        times = []
        for _ in range(r):
            dist.barrier()
            t = time.perf_counter()
            dist.all_reduce(t_)
            times.append(time.perf_counter() - t)
        row["gloo_s"] = statistics.median(times)
        row["reps"] = r
        out.append(row)
    for w in workers.values():
        w.close()
    dist.destroy_process_group()
    queue.put((rank, out))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_grid_point(W, sizes, Ks, reps, loss=0.0, slots=64) -> list[dict]:
    import multiprocessing as mp
    jobs = [{"id": j, "workers": W, "slot_base": j * slots, "slots": slots}
            for j in range(len(Ks))]
    srv = Serve(jobs, ["--elements", str(max(Ks)), "--slots", str(slots * len(Ks)),
                       "--loss", str(loss), "--seed", "1"])
    try:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        store = _free_port()
        procs = [ctx.Process(target=_rank, args=(r, W, store, srv.port, sizes, Ks, slots, reps,
                                                 q)) for r in range(W)]
        for p in procs:
            p.start()
        res = dict(q.get(timeout=3600) for _ in procs)
        for p in procs:
            p.join(timeout=60)
    finally:
        srv.stop()
    rows = []
    for i, size in enumerate(sizes):
        row = {"workers": W, "bytes": size, "loss": loss, "reps": res[0][i]["reps"]}
        gloo = max(res[r][i]["gloo_s"] for r in range(W))
        row["gloo_latency_ms"] = round(gloo * 1e3, 3)
        row["gloo_MBps_per_rank"] = round(size / gloo / 1e6, 2)
        for K in Ks:
            t = max(res[r][i][f"netagg_K{K}_s"] for r in range(W))
            row[f"K{K}_latency_ms"] = round(t * 1e3, 3)
            row[f"K{K}_MBps_per_rank"] = round(size / t / 1e6, 2)
            row[f"K{K}_vs_gloo"] = round(gloo / t, 3)
            row[f"K{K}_resends"] = sum(res[r][i][f"netagg_K{K}_resends"] for r in range(W))
        rows.append(row)
    return rows


def bench_rtl(n_chunks: int = 200) -> dict:
    from netagg.host import Worker
    srv = Serve([{"id": 0, "workers": 1, "slot_base": 0, "slots": 8}],
                ["--backend", "rtl", "--slots", "16", "--elements", "8", "--lanes", "4",
                 "--jobs", "1", "--workers", "2"])
    try:
        with Worker(srv.address, 0, 0, 1, 8, 8, timeout=1.0) as w:
            w.allreduce(np.ones(80, np.float32))
            t = time.perf_counter()
            w.allreduce(np.ones(n_chunks * 8, np.float32))
            dt = time.perf_counter() - t
    finally:
        srv.stop()
    return {"simulator": "verilator", "params": "S=16 K=8 L=4 J=1 W_max=2",
            "messages": n_chunks, "rtl_msgs_per_s": round(n_chunks / dt, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="OUT.json", help="write the report ('-': stdout)")
    ap.add_argument("--quick", action="store_true",
                    help="reduced grid: W = 2, 4; 4 KB, 256 KB, 4 MB")
    ap.add_argument("--only", default="model,serve,worker,ceiling,grid,loss,rtl",
                    help="comma list of sections")
    ap.add_argument("--workers", default=None, help="comma list of W (default 2,4,8)")
    ap.add_argument("--sizes", default=None, help="comma list of tensor bytes")
    ap.add_argument("--reps", type=int, default=5, help="calls per point (median)")
    ap.add_argument("--pin", metavar="MEASURED,PEER", default=None,
                    help="CPU of the measured process (serve; this process for the worker "
                         "library) and of its peer (load generator, reflector, serve), e.g. 1,0")
    args = ap.parse_args(argv)
    if args.pin:
        a, b = (int(c) for c in args.pin.split(","))
        PIN.update(measured={a}, peer={b})
    only = set(args.only.split(","))
    Ws = [int(w) for w in args.workers.split(",")] if args.workers else (
        [2, 4] if args.quick else [2, 4, 8])
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        SIZES_QUICK if args.quick else SIZES_FULL)
    report = {"load_average": os.getloadavg(), "cpus": os.cpu_count(),
              "command": " ".join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:]))}
    if "model" in only:
        report["model"] = bench_model()
        print("model", report["model"], file=sys.stderr)
    if "serve" in only:
        report["serve_saturated"] = bench_serve_saturated()
        for r in report["serve_saturated"]:
            print("serve_saturated", r, file=sys.stderr)
        report["serve"] = bench_serve()
        print("serve", report["serve"], file=sys.stderr)
    if PIN:
        report["pin"] = {k: sorted(v) for k, v in PIN.items()}
    if "worker" in only:
        all_cpus = os.sched_getaffinity(0)
        if PIN:                                    # the worker library runs here
            os.sched_setaffinity(0, PIN["measured"])
        report["worker"] = bench_worker()
        print("worker", report["worker"], file=sys.stderr)
    if "worker" in only:
        report["worker_alone"] = bench_worker_alone()
        print("worker_alone", report["worker_alone"], file=sys.stderr)
        os.sched_setaffinity(0, all_cpus)
    if "ceiling" in only:
        all_cpus = os.sched_getaffinity(0)
        if PIN:
            os.sched_setaffinity(0, PIN["measured"])
        report["ceiling"] = bench_ceiling()
        os.sched_setaffinity(0, all_cpus)
        print("ceiling", report["ceiling"], file=sys.stderr)
    if "grid" in only:
        report["grid"] = []
        for W in Ws:
            rows = run_grid_point(W, sizes, [64, 256], args.reps)
            report["grid"] += rows
            for r in rows:
                print("grid", r, file=sys.stderr)
    if "loss" in only:
        size = 1 << 20
        base = run_grid_point(2, [size], [256], args.reps)[0]
        report["loss"] = []
        for p in (0.01, 0.05):
            row = run_grid_point(2, [size], [256], args.reps, loss=p)[0]
            row["slowdown_vs_no_loss"] = round(row["K256_latency_ms"] / base["K256_latency_ms"],
                                               3)
            report["loss"].append(row)
            print("loss", row, file=sys.stderr)
        report["loss"].insert(0, base)
    if "rtl" in only:
        report["rtl"] = bench_rtl()
        print("rtl", report["rtl"], file=sys.stderr)
    report["load_average_end"] = os.getloadavg()
    if args.json:
        text = json.dumps(report, indent=1)
        if args.json == "-":
            print(text)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
