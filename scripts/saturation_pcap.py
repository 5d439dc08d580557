"""Write bench_core's saturation patterns (``netagg.sim.traffic.saturation_patterns``:
random, lockstep, hammer) as pcaps with a JOBS.json, so that the generated
RTL can be measured on them with ``netagg sim`` (its STATS.json has
``cycles``): payload beats per cycle = messages x ceil(count / L) / cycles.

Usage: python scripts/saturation_pcap.py --outdir DIR [--workers 8 --window 64
--rounds 16 --count 64] [build-time parameters: --lanes --elements --slots]

Then, e.g.: netagg sim --simulator verilator --jobs-config DIR/jobs.json
--in DIR/lockstep.pcap --out /tmp/out.pcap --stats DIR/lockstep.stats.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from netagg import pcap
from netagg.frames import Endpoint, build_frame
from netagg.params import Params
from netagg.sim.traffic import saturation_patterns
from netagg.wire import Header


def worker_endpoint(w: int, port: int) -> Endpoint:
    """Worker ``w``'s (MAC, IP, UDP port): 02:00:00:00:00:w+1, 10.0.0.w+1."""
    return Endpoint(bytes([2, 0, 0, 0, 0, w + 1]), bytes([10, 0, 0, w + 1]), port)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outdir", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--window", type=int, default=64, help="slots in flight (job 0's slots)")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--count", type=int, default=None, help="elements per message (default K)")
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    params = Params(lanes=args.lanes, elements=args.elements, slots=args.slots,
                    workers=max(8, args.workers))
    if not 1 <= args.window <= params.slots:
        ap.error(f"--window must be in 1..{params.slots}")
    args.outdir.mkdir(parents=True, exist_ok=True)
    switch = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    (args.outdir / "jobs.json").write_text(json.dumps({"jobs": [
        {"id": 0, "workers": args.workers, "slot_base": 0, "slots": args.window}]}) + "\n")
    pats = saturation_patterns(params, args.workers, args.rounds, args.window,
                               seed=args.seed, count=args.count)
    for name, msgs in pats.items():
        frames = [build_frame(m, worker_endpoint(Header.unpack(m).worker, params.port),
                              switch) for m in msgs]
        pcap.write(args.outdir / f"{name}.pcap", frames)
        print(f"{args.outdir / (name + '.pcap')}: {len(frames)} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
