#!/usr/bin/env python3
"""Fmax and LUTs of the bare core out of context on the LFE5U-85F-6 over
lanes and dtype sets (netagg.boards.build.build_ooc), as JSON and a plot.

    python scripts/sweep.py --lanes 1,2,4,8,16 --dtype-sets "int32;fp32;bf16;int32,fp32,bf16" \
        --out build/sweep [--parallel 2]
    python scripts/sweep.py --merge A/sweep.json B/sweep.json --out build/sweep

Each point is one Yosys + nextpnr run (minutes each for the larger cores).
Figures are what nextpnr measured; nothing is extrapolated.
"""

from __future__ import annotations

import argparse
import json
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


def _measure(L: int, dtypes: tuple, args) -> dict:
    """One sweep point: an out-of-context build; a tool failure is recorded."""
    from netagg.boards.build import BuildError, build_ooc
    from netagg.params import Params

    p = Params(lanes=L, elements=args.elements, slots=args.slots, workers=args.workers,
               jobs=args.jobs, dtypes=dtypes)
    name = f"L{L}-{'+'.join(dtypes)}"
    try:
        rep = build_ooc(p, Path(args.out) / name, device=args.device, freq_mhz=args.freq)
    except BuildError as e:         # a tool failure ends this point, not the sweep
        return {"lanes": L, "dtypes": list(dtypes), "error": str(e), "params": p.to_dict()}
    clk = next(iter(rep["clocks"].values()), {"fmax_mhz": None})
    return {"lanes": L, "dtypes": list(dtypes), "lut": rep["resources"]["LUT"]["used"],
            "ff": rep["resources"]["FF"]["used"], "bram": rep["resources"]["BRAM"]["used"],
            "fmax_mhz": clk["fmax_mhz"], "build_seconds": rep["build_seconds"],
            "params": p.to_dict()}


def _describe(pt: dict) -> str:
    name = f"L{pt['lanes']}-{'+'.join(pt['dtypes'])}"
    if "error" in pt:
        return f"{name}: FAILED: {pt['error']}"
    return f"{name}: {pt['lut']} LUT, {pt['fmax_mhz']} MHz, {pt['build_seconds']} s"


def plot(points: list, sets: list, path: Path, device: str, freq: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for dtypes in sets:
        pts = sorted((q for q in points if tuple(q["dtypes"]) == tuple(dtypes)
                      and "error" not in q), key=lambda q: q["lanes"])
        label = "+".join(dtypes)
        a1.plot([q["lanes"] for q in pts], [q["lut"] for q in pts], "o-", label=label)
        a2.plot([q["lanes"] for q in pts], [q["fmax_mhz"] for q in pts], "o-", label=label)
    a1.set(xscale="log", xlabel="lanes L", ylabel="LUTs (TRELLIS_COMB)", title=device)
    a2.set(xscale="log", xlabel="lanes L", ylabel="Fmax (MHz)", title="out of context")
    a2.axhline(freq, color="grey", ls="--")
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
    ap.add_argument("--parallel", type=int, default=1, metavar="N",
                    help="builds at a time (each tool is single-threaded)")
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
    head = {"device": args.device, "constraint_mhz": args.freq, "commit": core_commit(),
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
    points = []
    bar = tqdm(total=len(todo), desc="sweep", unit="build")

    def record(pt):
        points.append(pt)
        points.sort(key=lambda q: (sets.index(tuple(q["dtypes"])), q["lanes"]))
        tqdm.write(_describe(pt))
        bar.update()
        # written after every point, so an interrupted sweep keeps what it measured
        json_path.write_text(json.dumps({**head, "points": points}, indent=1) + "\n")

    if args.parallel > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(_measure, L, d, args) for L, d in todo]
            for f in as_completed(futures):
                record(f.result())
    else:
        for L, d in todo:
            record(_measure(L, d, args))
    bar.close()
    plot(points, sets, plot_path, args.device, args.freq)
    print(f"wrote {json_path} and {plot_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
