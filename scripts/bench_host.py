"""Host-side benchmark (JSON): the golden model's and ``netagg serve``'s
messages per second, one rank's worker-library rate, all-reduce goodput and
per-call latency through ``netagg serve`` beside ``torch.distributed``
(gloo) on the same tensors in the same run, the slowdown under loss, and
the rtl backend's messages per second.

    python scripts/bench_host.py --json out/bench_host.json            # full grid
    python scripts/bench_host.py --quick --json out/bench_host.json    # reduced grid
    python scripts/bench_host.py --only model,serve,worker             # sections

Sections: ``model`` (Switch.process and the frame-level model on 131,072
lockstep K = 64 fp32 messages), ``serve`` (a raw client keeps a window of
lockstep CONTRIBs in flight against serve: messages/s), ``worker`` (one
rank, W = 1 job: every CONTRIB answered at once; messages/s and the rank's
CPU time per message; and against an ideal switch, a C reflector, for the
library's own rate), ``grid`` (W x tensor size x K: goodput MB/s per rank
= tensor bytes / call time, median call latency; gloo beside it and the
ratio), ``loss`` (slowdown of one grid point under 1% and 5% loss), ``rtl``
(Verilator backend, small build: messages/s). Figures depend on the machine
and its load; the JSON records the load average.
"""

from __future__ import annotations

import argparse
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
    t = time.perf_counter()
    for m in msgs:
        sw.process(m)
    dt = time.perf_counter() - t
    src = framing.Endpoint(b"\2\0\x7f\0\0\1", b"\x7f\0\0\1", 5000)
    dst = framing.Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    frames = [framing.build_frame(m, src, dst) for m in msgs]
    t = time.perf_counter()
    run_model_seq(params, jobs, frames)
    dt2 = time.perf_counter() - t
    return {"messages": n, "workers": 4, "K": 64,
            "switch_process_msgs_per_s": round(n / dt), "switch_process_s": round(dt, 3),
            "frame_model_msgs_per_s": round(n / dt2), "frame_model_s": round(dt2, 3)}


class Serve:
    """A ``netagg serve`` subprocess."""

    def __init__(self, jobs: list[dict], extra: list[str] = ()):
        self.tmp = tempfile.mkdtemp(prefix="netagg-bench-")
        path = os.path.join(self.tmp, "jobs.json")
        with open(path, "w") as f:
            json.dump({"jobs": jobs}, f)
        self.stats_path = os.path.join(self.tmp, "STATS.json")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "netagg", "serve", "--jobs-config", path, "--listen",
             "127.0.0.1:0", "--stats", self.stats_path, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("netagg serve: listening"):
            raise RuntimeError(f"netagg serve did not start: {line!r}")
        self.port = int(line.split("udp ")[1].split(",")[0].rsplit(":", 1)[1])
        self.address = ("127.0.0.1", self.port)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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
    srv = Serve([{"id": 0, "workers": 1, "slot_base": 0, "slots": slots}])
    try:
        x = np.ones(chunks * K, np.float32)
        with Worker(srv.address, 0, 0, 1, slots, K, timeout=0.5) as w:
            w.allreduce(x[:K * 100])
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
            "serve_cpu_us_per_msg": round(scpu / chunks * 1e6, 1), "status": st}


REFLECTOR_C = r"""
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
/* An ideal switch for a W = 1 job: every CONTRIB comes back at once as its
   RESULT (type 1, status = 1 contributor). Prints its port, serves until
   killed. */
int main(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {0}; socklen_t l = sizeof a;
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &l);
    printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
    unsigned char b[65536];
    for (;;) {
        struct sockaddr_in f; socklen_t fl = sizeof f;
        ssize_t n = recvfrom(s, b, sizeof b, 0, (struct sockaddr *)&f, &fl);
        if (n < 16) continue;
        b[0] = 0x11; b[14] = 0; b[15] = 1;
        sendto(s, b, n, 0, (struct sockaddr *)&f, fl);
    }
}
"""


def bench_worker_alone(chunks: int = 100000, K: int = 64, slots: int = 128) -> dict:
    """One rank against an ideal switch (a C reflector): the worker library's
    own rate. Skipped without a C compiler."""
    import shutil

    from netagg.host import Worker
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return {"skipped": "no C compiler"}
    tmp = tempfile.mkdtemp(prefix="netagg-bench-")
    src, exe = os.path.join(tmp, "reflector.c"), os.path.join(tmp, "reflector")
    with open(src, "w") as f:
        f.write(REFLECTOR_C)
    subprocess.run([cc, "-O2", "-o", exe, src], check=True)
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        x = np.ones(chunks * K, np.float32)
        with Worker(("127.0.0.1", port), 0, 0, 1, slots, K, timeout=0.5) as w:
            w.allreduce(x[:K * 1000])
            c0 = time.process_time()
            t = time.perf_counter()
            y = w.allreduce(x)
            dt = time.perf_counter() - t
            cpu = time.process_time() - c0
            st = w.last_status.to_dict()
        assert np.array_equal(y, x)
    finally:
        proc.kill()
        proc.wait()
    return {"chunks": chunks, "K": K, "slots": slots, "rank_msgs_per_s": round(chunks / dt),
            "rank_cpu_us_per_msg": round(cpu / chunks * 1e6, 1), "status": st}


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
    ap.add_argument("--only", default="model,serve,worker,grid,loss,rtl",
                    help="comma list of sections")
    ap.add_argument("--workers", default=None, help="comma list of W (default 2,4,8)")
    ap.add_argument("--sizes", default=None, help="comma list of tensor bytes")
    ap.add_argument("--reps", type=int, default=5, help="calls per point (median)")
    args = ap.parse_args(argv)
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
        report["serve"] = bench_serve()
        print("serve", report["serve"], file=sys.stderr)
    if "worker" in only:
        report["worker"] = bench_worker()
        print("worker", report["worker"], file=sys.stderr)
    if "worker" in only:
        report["worker_alone"] = bench_worker_alone()
        print("worker_alone", report["worker_alone"], file=sys.stderr)
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
