# amaranth: UnusedElaboratable=no
"""Throughput and latency of the netagg core, measured in simulation
(amaranth.sim, cycle-accurate RTL), printed as a table and JSON.

Patterns (every message ``--count`` elements, default a full slot of K,
fp32 sum, ingress always valid, egress always ready):
  random    messages of random workers to random slots of several jobs;
  lockstep  each of W workers streams its window of slots in order, the
            workers interleaved, so consecutive messages mostly hit one slot;
  hammer    one slot alone, round after round.
Throughput = accepted payload beats per cycle at saturation (from the first
beat accepted to the last). Latency = cycles from a round's last
contribution's last beat accepted to its first RESULT beat on the egress.

Usage: python scripts/bench_core.py [--lanes 8 --elements 64 ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

from netagg.hdl.lane_loop import LaneLoop
from netagg.hdl.slot_table import SlotTable
from netagg.params import Params
from netagg.sim.drive import run_core
from netagg.sim.reference import result_key
from netagg.sim.traffic import saturation_patterns, single_job


def measure(params: Params, workers: int, messages: list[bytes], fp_stages=None) -> dict:
    """One pattern through the core (:func:`netagg.sim.drive.run_core`, job 0
    with ``workers`` workers, no gaps, no backpressure)."""
    run = run_core(params, single_job(params, workers), messages, fp_stages=fp_stages,
                   max_cycles=50 * len(messages) * params.beats + 10000)
    cycles = run.beats_in[-1] - run.beats_in[0] + 1
    # latency: a round's last contribution's last beat accepted to the first
    # beat of its RESULT to worker 0 (tags are message numbers here)
    done = {seq: cycle for seq, cycle in enumerate(run.message_done)}
    lat = [start - done.pop(tag) for (payload, tag), start in zip(run.results, run.result_start,
                                                                   strict=True)
           if result_key(payload)[3] == 0 and tag in done]
    return {
        "messages": len(messages),
        "beats": len(run.beats_in),
        "cycles": cycles,
        "beats_per_cycle": round(len(run.beats_in) / cycles, 4),
        "stall_cycles": run.counters["stall"],
        "results": run.counters["results"],
        "latency_cycles_min": min(lat) if lat else None,
        "latency_cycles_max": max(lat) if lat else None,
    }


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=8)
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--count", type=int, default=None,
                    help="elements per message (default K: full slots)")
    ap.add_argument("--fp-stages", type=int, default=None)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    params = Params(lanes=args.lanes, elements=args.elements, workers=args.workers,
                    slots=args.slots, jobs=1, dtypes=("fp32",), ops=("sum",))
    probe = SlotTable(params, result_beats=_pow2(params.beats), data_beats=_pow2(params.beats),
                      fp_stages=args.fp_stages)
    D = probe.loop_latency
    spacing = LaneLoop.spacing_of(args.fp_stages)
    count = params.elements if args.count is None else args.count
    beats = -(-count // params.lanes)
    bound = min(1.0, beats / spacing)
    out = {"params": params.to_dict(), "fp_stages": args.fp_stages, "loop_latency": D,
           "spacing": spacing, "count": count, "hammer_bound": round(bound, 4), "patterns": {}}
    for name, msgs in saturation_patterns(params, args.workers, args.rounds, args.window,
                                          count=count).items():
        out["patterns"][name] = measure(params, args.workers, msgs, args.fp_stages)
    print(f"core L={params.lanes} K={params.elements} W={args.workers}, "
          f"messages of {count} elements: "
          f"read-add-write loop {D} cycles, same-address spacing D={spacing} cycles "
          f"(forwarding), hammer bound min(1, beats/D) = {bound:.3f}")
    print(f"{'pattern':10} {'msgs':>5} {'beats':>6} {'cycles':>7} {'beats/cyc':>9} "
          f"{'stalls':>6} {'lat min':>7} {'lat max':>7}")
    for name, r in out["patterns"].items():
        print(f"{name:10} {r['messages']:5} {r['beats']:6} {r['cycles']:7} "
              f"{r['beats_per_cycle']:9.3f} {r['stall_cycles']:6} "
              f"{r['latency_cycles_min']!s:>7} {r['latency_cycles_max']!s:>7}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
