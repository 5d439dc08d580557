#!/usr/bin/env python3
"""Throughput and latency of the netagg core, measured in simulation
(amaranth.sim, cycle-accurate RTL), printed as a table and JSON.

Patterns (every message a full slot of K elements, fp32 sum, ingress always
valid, egress always ready):
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
import random
import sys

import numpy as np
from amaranth.sim import Simulator

from netagg import regmap
from netagg.hdl.core import NetaggCore
from netagg.hdl.slot_table import SlotTable
from netagg.params import Params
from netagg.sim.beats import message_to_beats, pack_ingress, unpack_egress
from netagg.sim.message_model import make_contrib
from netagg.wire import DType, Header, Op


def patterns(params: Params, workers: int, rounds: int, window: int, seed: int = 0):
    rng = random.Random(seed)
    K = params.elements

    def msg(slot, ver, w):
        vals = np.asarray([rng.uniform(-1, 1) for _ in range(K)], dtype=np.float32)
        return make_contrib(0, slot, ver, w, vals.view(np.uint32), dtype=DType.FP32, op=Op.SUM)

    lock = [msg(s, r % 2, w) for r in range(rounds) for s in range(window) for w in range(workers)]
    hammer = [msg(0, r % 2, w) for r in range(rounds * window) for w in range(workers)]
    # Random: every slot's workers in a random order, slots interleaved at random.
    todo = {(s, r): list(range(workers)) for s in range(window) for r in range(rounds)}
    for v in todo.values():
        rng.shuffle(v)
    nxt = {s: 0 for s in range(window)}
    rnd = []
    while any(nxt[s] < rounds for s in nxt):
        s = rng.choice([s for s in nxt if nxt[s] < rounds])
        r = nxt[s]
        rnd.append(msg(s, r % 2, todo[(s, r)].pop()))
        if not todo[(s, r)]:
            nxt[s] += 1
    return {"random": rnd, "lockstep": lock, "hammer": hammer}


def measure(params: Params, workers: int, messages: list[bytes], fp_stages=None) -> dict:
    dut = NetaggCore(params, fp_stages=fp_stages)
    L = params.lanes
    acc = {"first": None, "last": None, "beats": 0, "msg_end": {}, "lat": [], "counters": {}}
    nmsg = len(messages)

    async def bench(ctx):
        for reg, value in enumerate(regmap.job_entry_words(True, workers, 0, params.slots)):
            ctx.set(dut.ctrl_addr, regmap.job_addr(0, reg))
            ctx.set(dut.ctrl_wdata, value)
            ctx.set(dut.ctrl_we, 1)
            await ctx.tick()
        ctx.set(dut.ctrl_we, 0)
        ctx.set(dut.o.ready, 1)
        beats = [(seq, b) for seq, m in enumerate(messages) for b in message_to_beats(m, L, seq)]
        cycle, k, verdicts = 0, 0, 0
        pending_first = {}     # tag -> cycle its last beat was accepted (round-completing)
        while k < len(beats) or verdicts < nmsg or not ctx.get(dut.idle):
            if k < len(beats):
                ctx.set(dut.i.payload.as_value(), pack_ingress(beats[k][1], L))
                ctx.set(dut.i.valid, 1)
            else:
                ctx.set(dut.i.valid, 0)
            _, _, iv, ir, ov, op, vv = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.payload.as_value(), dut.v.valid)
            if iv and ir:
                if acc["first"] is None:
                    acc["first"] = cycle
                acc["last"] = cycle
                acc["beats"] += 1
                if beats[k][1].last:
                    pending_first[beats[k][0] & 0xFFFF] = cycle
                k += 1
            if ov:
                beat = unpack_egress(op, L)
                h = Header.from_int(beat.header)
                if h.worker == 0 and beat.tag in pending_first:
                    acc["lat"].append(cycle - pending_first.pop(beat.tag))
            verdicts += vv
            cycle += 1
            if cycle > 50 * len(beats) + 10000:
                raise RuntimeError("core did not finish")
        for name in regmap.CORE_COUNTERS:
            ctx.set(dut.ctrl_addr, regmap.counter_addr(name))
            await ctx.tick()
            acc["counters"][name] = ctx.get(dut.ctrl_rdata)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    cycles = acc["last"] - acc["first"] + 1
    return {
        "messages": nmsg,
        "beats": acc["beats"],
        "cycles": cycles,
        "beats_per_cycle": round(acc["beats"] / cycles, 4),
        "stall_cycles": acc["counters"]["stall"],
        "results": acc["counters"]["results"],
        "latency_cycles_min": min(acc["lat"]) if acc["lat"] else None,
        "latency_cycles_max": max(acc["lat"]) if acc["lat"] else None,
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
    ap.add_argument("--fp-stages", type=int, default=None)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    params = Params(lanes=args.lanes, elements=args.elements, workers=args.workers,
                    slots=args.slots, jobs=1, dtypes=("fp32",), ops=("sum",))
    probe = SlotTable(params, result_beats=_pow2(params.beats), data_beats=_pow2(params.beats),
                      fp_stages=args.fp_stages)
    probe._MustUse__silence = True
    D = probe.loop_latency
    bound = min(1.0, params.elements / (params.lanes * D))
    out = {"params": params.to_dict(), "fp_stages": args.fp_stages, "loop_latency": D,
           "hammer_bound": round(bound, 4), "patterns": {}}
    for name, msgs in patterns(params, args.workers, args.rounds, args.window).items():
        out["patterns"][name] = measure(params, args.workers, msgs, args.fp_stages)
    print(f"core L={params.lanes} K={params.elements} W={args.workers}: "
          f"read-add-write loop D={D} cycles, hammer bound min(1, K/(L*D)) = {bound:.3f}")
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
