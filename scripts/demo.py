#!/usr/bin/env python3
"""The main job (`make run`): generate the core's Verilog, make a workload
pcap (several jobs, dtypes and ops, with duplicates, retransmissions,
malformed and non-netagg frames), run it through the RTL (`netagg sim`,
Icarus) and the golden model (`netagg model`), and check that they agree
(the equivalence rule of cli.md). Exit 0 only if they do.

Usage: python scripts/demo.py [--out DIR] [--messages N] [--simulator icarus|verilator]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from netagg import pcap
from netagg.frames import Endpoint, build_frame, parse
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.reference import result_key
from netagg.sim.traffic import random_traffic

PARAMS = dict(workers=4, slots=32, elements=16, lanes=4, jobs=3)
JOBS = {"jobs": [{"id": 0, "workers": 4, "slot_base": 0, "slots": 16},
                 {"id": 2, "workers": 2, "slot_base": 16, "slots": 8}]}


def param_args(d: dict) -> list[str]:
    return [a for k, v in d.items() for a in (f"--{k}", str(v))]


def make_workload(params: Params, jobs: JobTable, n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    switch = Endpoint.from_strings(params.switch_mac, params.switch_ip, params.port)
    frames = []
    for payload in random_traffic(params, jobs, n, seed=seed):
        w = rng.randrange(8)
        src = Endpoint.from_strings(f"02:00:00:00:01:{w:02x}", f"10.166.0.{w + 10}", 40000 + w)
        frames.append(build_frame(payload, src, switch))
        if rng.random() < 0.03:   # something that is not a netagg message
            frames.append(build_frame(b"hello", src, Endpoint(switch.mac, switch.ip, 53)))
    return frames


def by_key(frames: list[bytes]) -> dict:
    """RESULT frames grouped by (job, slot, ver, worker), in order."""
    out = defaultdict(list)
    for f in frames:
        out[result_key(parse(f, None).payload)].append(f)
    return dict(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = Params(**PARAMS)
    (out / "jobs.json").write_text(json.dumps(JOBS, indent=1))
    jobs = JobTable.from_dict(JOBS, params)
    pcap.write(out / "in.pcap", make_workload(params, jobs, args.messages, args.seed))
    pa = param_args(PARAMS)
    netagg = [sys.executable, "-m", "netagg"]
    steps = [
        netagg + ["generate", "-o", str(out / "netagg_core.v")] + pa,
        netagg + ["model", "--jobs-config", str(out / "jobs.json"), "--in", str(out / "in.pcap"),
                  "--out", str(out / "model.pcap"), "--stats", str(out / "model.json")] + pa,
        netagg + ["sim", "--jobs-config", str(out / "jobs.json"), "--in", str(out / "in.pcap"),
                  "--out", str(out / "sim.pcap"), "--stats", str(out / "sim.json"),
                  "--simulator", args.simulator] + pa,
    ]
    for cmd in steps:
        print("$ netagg", " ".join(cmd[3:]), flush=True)
        subprocess.run(cmd, check=True)
    model_frames = pcap.read_frames(out / "model.pcap")
    sim_frames = pcap.read_frames(out / "sim.pcap")
    model_stats = json.loads((out / "model.json").read_text())
    sim_stats = json.loads((out / "sim.json").read_text())
    cycles = sim_stats.pop("cycles")
    same_frames = by_key(model_frames) == by_key(sim_frames)
    same_stats = model_stats == sim_stats
    print(f"frames in: {len(pcap.read_frames(out / 'in.pcap'))}, RESULT frames: "
          f"model {len(model_frames)}, RTL {len(sim_frames)}; RTL cycles: {cycles}")
    print("counters:", json.dumps(model_stats))
    print(f"RESULT frames per (job, slot, ver, worker) identical: {same_frames}")
    print(f"counters identical: {same_stats}")
    return 0 if same_frames and same_stats else 1


if __name__ == "__main__":
    sys.exit(main())
