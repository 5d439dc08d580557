#!/usr/bin/env python3
"""Fmax and LUTs of the bare core out of context on the LFE5U-85F-6 (or
``--device``, ``--speed``) over lanes and dtype sets, through the
project's flow, the plain user flow or both, as JSON and a plot.

    python scripts/sweep.py --lanes 1,2,4,8,16 --dtype-sets "int32;fp32;bf16;int32,fp32,bf16" \
        --out build/sweep [--parallel 2] [--flow project|plain|both] [--seeds 1-5]
    python scripts/sweep.py --merge A/sweep.json B/sweep.json --out build/sweep

Flows: ``project`` is ``netagg build --board ooc-ecp5``
(netagg.boards.build.build_ooc: RTLIL, DP16KD accumulators where they fit,
nextpnr's default seed); ``plain`` is the user's flow of issue 12
(netagg.boards.build.build_plain: ``netagg generate``, ``read_verilog;
synth_ecp5``, ``nextpnr-ecp5 --seed N``), synthesised once and placed and
routed once per ``--seeds`` seed, the lower median Fmax reported (a
measured build). Each point is one Yosys + nextpnr run (minutes each for
the larger cores). Figures are what nextpnr measured; nothing is
extrapolated.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path


def core_commit() -> str | None:
    """The last git commit that changed hdl/ (``-dirty`` when hdl/ has
    uncommitted changes): the core the sweep measures."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h", "--", "hdl"], cwd=root,
                              check=True, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hdl"], cwd=root,
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


FLOWS = ("project", "plain")


def parse_seeds(text: str) -> list[int]:
    """``"1"``, ``"1,3"``, ``"1-5"`` -> the nextpnr seeds, in order, once each."""
    seeds = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if m is None:
            raise SystemExit(f"sweep.py: --seeds {text!r}: expected N, N,M or N-M")
        seeds += range(int(m[1]), int(m[2] or m[1]) + 1)
    if not seeds:
        raise SystemExit(f"sweep.py: --seeds {text!r} names no seed")
    return list(dict.fromkeys(seeds))


def point_name(L: int, dtypes, flow: str = "project") -> str:
    return f"L{L}-{'+'.join(dtypes)}" + ("" if flow == "project" else f"-{flow}")


def _measure(L: int, dtypes: tuple, args, flow: str = "project") -> dict:
    """One sweep point: an out-of-context build through ``flow``; a tool
    failure is recorded."""
    from netagg.boards import build as _build
    from netagg.params import Params

    p = Params(lanes=L, elements=args.elements, slots=args.slots, workers=args.workers,
               jobs=args.jobs, dtypes=dtypes)
    outdir = Path(args.out) / (point_name(L, dtypes, flow) + (
        "" if args.acc_ram == "auto" else f"-{args.acc_ram}"))
    seeds = parse_seeds(args.seeds) if flow == "plain" else None
    head = {"lanes": L, "dtypes": list(dtypes), "flow": flow,
            "seed": seeds[0] if seeds and len(seeds) == 1 else None}
    acc = {} if args.acc_ram == "auto" else {"acc_ram": args.acc_ram}
    try:
        if flow == "plain":
            rep = _build.build_plain(p, outdir, seed=seeds, device=args.device,
                                     freq_mhz=args.freq, speed=args.speed, **acc)
        else:
            rep = _build.build_ooc(p, outdir, device=args.device, freq_mhz=args.freq,
                                   speed=args.speed, **acc)
    except _build.BuildError as e:  # a tool failure ends this point, not the sweep
        return {**head, "error": str(e), "params": p.to_dict()}
    clk = next(iter(rep["clocks"].values()), {"fmax_mhz": None})
    acc = {"acc_ram": rep["acc_ram"]} if rep.get("acc_ram") else {}
    pt = {**head, **acc, "lut": rep["resources"]["LUT"]["used"],
          "ff": rep["resources"]["FF"]["used"], "bram": rep["resources"]["BRAM"]["used"],
          "fmax_mhz": clk["fmax_mhz"], "build_seconds": rep["build_seconds"],
          "params": p.to_dict()}
    if flow == "plain":
        pt["seed"] = rep["seed"]
        pt["seeds"] = rep["seeds"]
    return pt


def _describe(pt: dict) -> str:
    name = point_name(pt["lanes"], pt["dtypes"], pt.get("flow", "project"))
    if "error" in pt:
        return f"{name}: FAILED: {pt['error']}"
    seeds = pt.get("seeds") or {}
    seed = (f", seed {pt['seed']}" if len(seeds) <= 1 else
            f", median of seeds {','.join(seeds)} (seed {pt['seed']})") \
        if pt.get("seed") is not None else ""
    return f"{name}: {pt['lut']} LUT, {pt['fmax_mhz']} MHz{seed}, {pt['build_seconds']} s"


def plot(points: list, sets: list, path: Path, device: str, freq: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    flows = [f for f in FLOWS if any(q.get("flow", "project") == f for q in points)]
    for dtypes in sets:
        for flow in flows:
            pts = sorted((q for q in points if tuple(q["dtypes"]) == tuple(dtypes)
                          and q.get("flow", "project") == flow and "error" not in q),
                         key=lambda q: q["lanes"])
            if not pts:
                continue
            label = "+".join(dtypes) + ("" if flows == ["project"] else f" ({flow})")
            style = "o-" if flow == "project" else "s--"
            a1.plot([q["lanes"] for q in pts], [q["lut"] for q in pts], style, label=label)
            a2.plot([q["lanes"] for q in pts], [q["fmax_mhz"] for q in pts], style,
                    label=label)
    a1.set(xscale="log", xlabel="lanes L", ylabel="LUTs (TRELLIS_COMB)", title=device)
    a2.set(xscale="log", xlabel="lanes L", ylabel="Fmax (MHz)", title="out of context")
    a2.axhline(freq, color="grey", ls="--")
    ticks = sorted({q["lanes"] for q in points})
    for a in (a1, a2):                  # the measured L, not powers of ten
        a.set_xticks(ticks, [str(t) for t in ticks])
        a.minorticks_off()
    if a1.get_legend_handles_labels()[0]:   # none when every point failed
        a1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", default="1,2,4,8,16", help="comma list of L")
    ap.add_argument("--dtype-sets", default="int32;fp32;bf16;int32,fp32,bf16",
                    help="semicolon-separated dtype lists")
    ap.add_argument("--points", help="explicit points instead of lanes x dtype sets: "
                    "semicolon-separated L:dtypes, e.g. \"1:int32;2:int32;2:int32,fp32,bf16\"")
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--freq", type=float, default=150.0, help="constraint, MHz")
    ap.add_argument("--device", default="LFE5U-85F")
    from netagg.boards.build import ECP5_SPEEDS
    ap.add_argument("--speed", type=int, choices=ECP5_SPEEDS, default=6,
                    help="ECP5 speed grade (default 6, the Colorlight boards' and issue 12's)")
    ap.add_argument("--parallel", type=int, default=1, metavar="N",
                    help="builds at a time (each tool is single-threaded)")
    ap.add_argument("--flow", choices=(*FLOWS, "both"), default="project",
                    help="project: netagg build --board ooc-ecp5 (default); plain: netagg "
                         "generate, read_verilog; synth_ecp5, nextpnr-ecp5 --seed N; both")
    ap.add_argument("--seeds", default="1",
                    help="nextpnr seeds of the plain flow: N, N,M or N-M (default 1); "
                         "the lower median Fmax is reported")
    ap.add_argument("--acc-ram", choices=("auto", "memory", "ecp5"), default="auto",
                    help="the block RAM form (auto: build_ooc's choice and netagg generate's "
                         "default, DP16KD when the depth fits)")
    ap.add_argument("--merge", nargs="+", metavar="SWEEP.json",
                    help="build nothing: combine these sweeps' points into one JSON and plot")
    ap.add_argument("--out", default="build/sweep", help="build directory")
    ap.add_argument("--json", help="results JSON (default OUT/sweep.json)")
    ap.add_argument("--plot", help="plot PNG (default OUT/sweep.png)")
    args = ap.parse_args(argv)

    from tqdm import tqdm

    out = Path(args.out)
    json_path = Path(args.json or out / "sweep.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    plot_path = Path(args.plot or out / "sweep.png")
    head = {"device": args.device if args.speed == 6 else f"{args.device}-{args.speed}",
            "constraint_mhz": args.freq, "commit": core_commit(),
            "command": " ".join(["scripts/sweep.py",
                                 *(argv if argv is not None else sys.argv[1:])])}

    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        keys = {(q["device"], q["constraint_mhz"], q["commit"]) for q in parts}
        if len(keys) != 1:
            raise SystemExit(f"sweep.py: the sweeps differ in device, constraint or core "
                             f"commit: {sorted(keys, key=str)}")
        device, freq, commit = keys.pop()
        points = [pt for q in parts for pt in q["points"]]
        sets = list(dict.fromkeys(tuple(pt["dtypes"]) for pt in points))
        merged = {"device": device, "constraint_mhz": freq, "commit": commit,
                  "command": [q["command"] for q in parts], "points": points}
        json_path.write_text(json.dumps(merged, indent=1) + "\n")
        plot(points, sets, plot_path, device, freq)
        for pt in points:
            print(_describe(pt))
        print(f"wrote {json_path} and {plot_path}")
        return 0

    lanes = [int(x) for x in args.lanes.split(",")]
    sets = [tuple(s.split(",")) for s in args.dtype_sets.split(";")]
    todo = [(L, d) for d in sets for L in lanes]
    if args.points:
        todo = [(int(pt.split(":")[0]), tuple(pt.split(":")[1].split(",")))
                for pt in args.points.split(";")]
        sets = list(dict.fromkeys(d for _, d in todo))
    flows = FLOWS if args.flow == "both" else (args.flow,)
    if "plain" in flows:
        parse_seeds(args.seeds)             # a usage error before any build
    todo = [(L, d, f) for L, d in todo for f in flows]
    points = []
    bar = tqdm(total=len(todo), desc="sweep", unit="build")

    def record(pt):
        points.append(pt)
        points.sort(key=lambda q: (sets.index(tuple(q["dtypes"])), q["lanes"],
                                   FLOWS.index(q.get("flow", "project"))))
        tqdm.write(_describe(pt))
        bar.update()
        # written after every point, so an interrupted sweep keeps what it measured
        json_path.write_text(json.dumps({**head, "points": points}, indent=1) + "\n")

    if args.parallel > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(_measure, L, d, args, f) for L, d, f in todo]
            for f in as_completed(futures):
                record(f.result())
    else:
        for L, d, f in todo:
            record(_measure(L, d, args, f))
    bar.close()
    plot(points, sets, plot_path, args.device, args.freq)
    print(f"wrote {json_path} and {plot_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
