"""Train a small model with PyTorch DDP on W local processes, gradients
all-reduced through ``netagg serve``, then again with DDP's own all-reduce
(gloo) from the same seed; report both final losses, whether every rank's
parameters are bit-identical in the netagg run, and the largest parameter
difference between the two runs.

    python scripts/ddp_example.py --workers 3 --steps 20 [--loss 0.05] \\
        [--backend rtl] [--dtype bf16] [--json OUT.json]

torch.distributed (gloo) is used for start-up and DDP's initial broadcast
only in the netagg run; its gradients go through the switch
(``netagg.torch.allreduce_hook``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model(torch, seed, dtype):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    return model.to(dtype)


def _train(torch, ddp, rank, steps, seed, dtype):
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss = None
    for _ in range(steps):
        x = torch.randn(32, 16, generator=gen).to(dtype)
        y = (x[:, :1] * 0.5 - x[:, 1:2] ** 2).to(dtype)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
    return float(loss.detach().float())


def _rank_main(rank, args, store_port, switch_port, queue):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import netagg.torch as nt
    from netagg.host import Worker

    torch.set_num_threads(1)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{store_port}",
                            rank=rank, world_size=args.workers)
    out = {}
    # Run 1: gradients through netagg.
    model = _model(torch, args.seed, dtype)
    ddp = DDP(model)
    worker = Worker(("127.0.0.1", switch_port), job=0, rank=rank, workers=args.workers,
                    slots=args.slots, elements=args.elements, timeout=args.timeout,
                    retries=args.retries)
    state = nt.HookState(worker)
    ddp.register_comm_hook(state, nt.allreduce_hook)
    out["netagg_loss"] = _train(torch, ddp, rank, args.steps, args.seed, dtype)
    out["netagg_params"] = [p.detach().float().numpy().copy() for p in model.parameters()]
    out["stats"] = worker.stats.to_dict()
    worker.close()
    dist.barrier()
    # Run 2: DDP's own all-reduce.
    model = _model(torch, args.seed, dtype)
    ddp = DDP(model)
    out["ddp_loss"] = _train(torch, ddp, rank, args.steps, args.seed, dtype)
    out["ddp_params"] = [p.detach().float().numpy().copy() for p in model.parameters()]
    dist.barrier()
    dist.destroy_process_group()
    queue.put((rank, out))


def run(args) -> dict:
    tmp = tempfile.mkdtemp(prefix="netagg-ddp-")
    try:
        return _run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args, tmp: str) -> dict:
    import multiprocessing as mp

    import numpy as np

    jobs = os.path.join(tmp, "jobs.json")
    with open(jobs, "w") as f:
        json.dump({"jobs": [{"id": 0, "workers": args.workers, "slot_base": 0,
                             "slots": args.slots}]}, f)
    cmd = [sys.executable, "-m", "netagg", "serve", "--jobs-config", jobs,
           "--listen", "127.0.0.1:0", "--backend", args.backend,
           "--loss", str(args.loss), "--seed", str(args.seed),
           "--elements", str(max(args.elements, 8)), "--stats", os.path.join(tmp, "STATS.json")]
    if args.backend == "rtl":
        cmd += ["--lanes", str(args.lanes), "--slots", str(args.slots), "--jobs", "1",
                "--workers", str(max(args.workers, 2))]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("netagg serve: listening"):
            raise RuntimeError(f"netagg serve did not start: {line.strip()!r}")
        switch_port = int(line.split("udp ")[1].split(",")[0].rsplit(":", 1)[1])
        store_port = _free_port()
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        t0 = time.perf_counter()
        procs = [ctx.Process(target=_rank_main, args=(r, args, store_port, switch_port, queue))
                 for r in range(args.workers)]
        for p in procs:
            p.start()
        results = {}
        deadline = time.monotonic() + args.deadline
        while len(results) < args.workers:
            if time.monotonic() > deadline or not any(p.is_alive() for p in procs) \
                    and queue.empty():
                raise RuntimeError("a rank failed or the run took too long")
            try:
                rank, out = queue.get(timeout=1.0)
            except Exception:       # queue.Empty
                continue
            results[rank] = out
        for p in procs:
            p.join(timeout=30)
        elapsed = time.perf_counter() - t0
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    with open(os.path.join(tmp, "STATS.json")) as f:
        stats = json.load(f)
    ref = results[0]["netagg_params"]
    identical = all(all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
                        for a, b in zip(ref, results[r]["netagg_params"], strict=True))
                    for r in range(args.workers))
    max_diff = max(float(np.max(np.abs(a - b)))
                   for a, b in zip(ref, results[0]["ddp_params"], strict=True))
    return {
        "workers": args.workers, "steps": args.steps, "dtype": args.dtype,
        "backend": args.backend, "loss_probability": args.loss, "seed": args.seed,
        "elements": args.elements, "slots": args.slots,
        "netagg_final_loss": [results[r]["netagg_loss"] for r in range(args.workers)],
        "ddp_final_loss": [results[r]["ddp_loss"] for r in range(args.workers)],
        "netagg_params_bit_identical": identical,
        "max_param_diff_netagg_vs_ddp": max_diff,
        "worker_stats": [results[r]["stats"] for r in range(args.workers)],
        "serve_stats": stats, "seconds": round(elapsed, 2),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--loss", type=float, default=0.0, help="serve's --loss")
    ap.add_argument("--backend", choices=("model", "rtl"), default="model")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--elements", type=int, default=64, help="K")
    ap.add_argument("--lanes", type=int, default=8, help="L (rtl backend build)")
    ap.add_argument("--slots", type=int, default=32, help="n, the job's slots")
    ap.add_argument("--timeout", type=float, default=None,
                    help="worker retransmission timeout (default 0.02 s, rtl 0.5 s)")
    ap.add_argument("--retries", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=600.0, help="seconds before giving up")
    ap.add_argument("--json", metavar="OUT.json", help="write the report here ('-': stdout)")
    args = ap.parse_args(argv)
    if args.timeout is None:
        args.timeout = 0.5 if args.backend == "rtl" else 0.02
    report = run(args)
    if args.json:
        text = json.dumps(report, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    print(f"netagg run: final loss {report['netagg_final_loss'][0]:.6f}, params bit-identical "
          f"on every rank: {report['netagg_params_bit_identical']}; DDP run: final loss "
          f"{report['ddp_final_loss'][0]:.6f}; max |param difference| "
          f"{report['max_param_diff_netagg_vs_ddp']:.3g}", file=sys.stderr)
    return 0 if report["netagg_params_bit_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
