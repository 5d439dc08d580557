#!/usr/bin/env python3
"""Line rate of the Ethernet switch, measured cycle by cycle at its GMII
pins (the generated Verilog under Icarus with cocotbext-eth, one clock:
the GMII byte clock is the core clock, 125 MHz = 1 Gb/s per port).

Both ports are offered back-to-back minimum-gap frames at once: port p
carries job p, whose W workers send full CONTRIBs (K fp32 elements) round
after round over a window of slots; every round's W RESULTs go back out
of the same port. Per port: frames offered, accepted by the core (verdict
ACCEPT), dropped by the MAC or buffer; goodput = netagg payload bytes of
accepted CONTRIBs per second of simulated time from the first frame in to
the last frame in (offered at line rate, so equal to the bound when no
frame is lost), against the Ethernet bound (payload / (payload + 66
bytes of headers, FCS, preamble and gap) x 1 Gb/s); RESULT frames out;
``cycles_after_input``: cycles from the last byte offered to the last
frame sent (small when the switch keeps up with the load).

Usage: python scripts/bench_eth.py [--elements 64 256] [--frames N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

from netagg import frames as fr
from netagg.frames import Endpoint, build_frame
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim import eth_harness
from netagg.sim.message_model import make_contrib

OVERHEAD = 14 + 20 + 8 + 4 + 8 + 12     # Ethernet, IPv4, UDP, FCS, preamble/SFD, gap
LINE_BPS = 1e9
BYTE_NS = 8


def traffic(params: Params, job: int, workers: int, slots: int, n: int) -> list[bytes]:
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    out, rnd = [], 0
    while len(out) < n:
        for slot in range(slots):
            for w in range(workers):
                src = Endpoint(bytes([2, 0, 0, 0, job, w]), bytes([10, 0, job, w + 1]), 5000 + w)
                values = [(rnd * 7 + w + i) & 0xFFFF for i in range(params.elements)]
                msg = make_contrib(job, slot, rnd & 1, w, values)
                out.append(fr.with_fcs(build_frame(msg, src, sw)))
        rnd += 1
    return out[:n - n % workers] if n % workers else out


def measure(k: int, frames: int, workers: int = 2, window: int = 8) -> dict:
    params = Params(workers=workers, slots=2 * window, elements=k, lanes=8, jobs=2)
    jobs = JobTable.from_dict({"jobs": [
        {"id": j, "workers": workers, "slot_base": j * window, "slots": window}
        for j in range(2)]}, params)
    wires = [traffic(params, j, workers, window, frames) for j in range(2)]
    run = eth_harness.run_frames(params, jobs, wires)
    c = run["counters"]
    payload = 16 + 4 * k
    wire_bytes = [sum(len(w) + 20 for w in ws) for ws in wires]   # + preamble/SFD and gap
    in_ns = [b * BYTE_NS for b in wire_bytes]
    per_port = []
    for p in range(2):
        out = [f for q, f, _, _ in run["frames"] if q == p]
        delivered = (c[f"eth{p}_rx"] - c[f"eth{p}_drop_fcs"] - c[f"eth{p}_drop_runt"]
                     - c[f"eth{p}_drop_too_long"] - c[f"eth{p}_drop_overflow"])
        per_port.append({
            "frames_offered": len(wires[p]),
            "frames_delivered": delivered,
            "dropped": len(wires[p]) - delivered,
            "results_out": len(out),
            "goodput_gbps": round(delivered * payload * 8 / in_ns[p], 4),
            "bound_gbps": round(payload / (payload + OVERHEAD) * LINE_BPS / 1e9, 4),
        })
    accepted = c["rx"] - sum(v for n, v in c.items() if n.startswith("drop_"))
    return {"K": k, "lanes": 8, "workers_per_port": workers, "frame_bytes": 42 + payload + 4,
            "core_clock_mhz": 125.0, "ports": per_port,
            "core_rx": c["rx"], "core_accepted": accepted, "core_results": c["results"],
            "core_tx": c["tx"], "cycles": run["cycles"],
            "offered_cycles": max(wire_bytes),
            "cycles_after_input": run["cycles"] - max(wire_bytes),
            "lossless": all(p["dropped"] == 0 for p in per_port)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--frames", type=int, default=64, help="frames per port (default 64)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    rows = [measure(k, args.frames) for k in args.elements]
    for r in rows:
        for p, port in enumerate(r["ports"]):
            print(f"K={r['K']:<4} port {p}: {port['frames_delivered']}/{port['frames_offered']} "
                  f"frames delivered, goodput {port['goodput_gbps']:.4f} Gb/s "
                  f"(bound {port['bound_gbps']:.4f}), {port['results_out']} RESULTs out")
    text = json.dumps({"benchmark": "bench_eth", "rows": rows}, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
