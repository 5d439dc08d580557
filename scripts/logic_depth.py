#!/usr/bin/env python3
"""The core's logic depth after ``synth_ecp5`` (issue 12, target 1): for each
register, the deepest chain of cells in front of it in LUT levels
(:mod:`netagg.boards.depth`), without placing and routing.

A change to the logic shows here in about a minute (``synth_ecp5`` alone),
free of the placement's seed-to-seed spread; ``build_ooc`` records the same
summary beside its Fmax (``logic_depth`` in its report). 150 MHz on the
LFE5U-85F-6 holds about five levels where the routes are short.

``--untimed-inputs`` leaves out the paths from the core's input ports (an
out-of-context placement does not time them); by default they count, as
Yosys's mapper sees them.

Usage: scripts/logic_depth.py [--lanes L --elements K --slots S ...]
       [--outdir DIR] [--threshold 5] [--json out.json] [--top N] [--untimed-inputs]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from netagg.boards.build import synth_ooc
from netagg.boards.depth import logic_depth
from netagg.params import Params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int)
    ap.add_argument("--elements", type=int)
    ap.add_argument("--slots", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--outdir", help="keep the netlist here (default: a temporary directory)")
    ap.add_argument("--threshold", type=float, default=5.0,
                    help="count endpoints at least this deep by block (default 5)")
    ap.add_argument("--top", type=int, default=20, help="deepest registers listed (default 20)")
    ap.add_argument("--json", dest="json_path", help="write the summary here")
    ap.add_argument("--untimed-inputs", action="store_true",
                    help="leave out paths from the core's input ports (as placed out of context)")
    args = ap.parse_args(argv)
    given = {k: getattr(args, k) for k in ("lanes", "elements", "slots", "workers", "jobs")
             if getattr(args, k) is not None}
    try:
        params = Params(**given)
    except (TypeError, ValueError) as e:
        print(f"logic_depth: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        outdir = args.outdir or tmp
        print(f"synth_ecp5 of the core ({params.to_dict()}) in {outdir} ...", file=sys.stderr,
              flush=True)
        r = synth_ooc(params, outdir, threshold=args.threshold, top_n=args.top)
        if args.untimed_inputs:
            r.update(logic_depth(Path(outdir) / "netagg_core.json", "netagg_core",
                                 threshold=args.threshold, top_n=args.top, from_inputs=False),
                     from_inputs=False)
    print(f"LUT4 {r['LUT4']}, endpoints {r['endpoints']}, deepest {r['max']} levels "
          f"(synth {r['synth_seconds']} s)")
    print("endpoints at least: " + ", ".join(f"{t}: {n}" for t, n in r["at_least"].items()))
    print(f"at least {r['threshold']:g} levels, by block:")
    for block, n in r["by_block"].items():
        print(f"  {n:5d}  {block}")
    print("deepest registers:")
    for d in r["deepest"]:
        print(f"  {d['depth']:5.2f}  {d['endpoints']:4d}  {d['register']}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
