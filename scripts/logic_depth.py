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
Yosys's mapper sees them. ``--netlist FILE`` reads a Yosys JSON netlist of
``netagg_core`` instead of synthesising one (e.g. the plain flow's
``core.json``: ``synth_ecp5 -top netagg_core -json core.json``).
``--enables N`` also lists the flip-flops' enable nets (CE, LSR) with at
least N loads, their driver and depth (``enable_nets`` in the JSON).
``--report REP.json`` (with ``--netlist``, once per placement of that
netlist: nextpnr's ``--report`` written with ``--detailed-timing-report``)
joins each endpoint's depth with its arrival and prints, per half level,
how late the endpoints of that depth arrive and how many miss ``--period``
(default 1000/150 ns) (``arrival_by_depth`` in the JSON; docs/boards.md,
"Session 43").

Usage: scripts/logic_depth.py [--lanes L --elements K --slots S ...]
       [--outdir DIR | --netlist core.json] [--threshold 5] [--json out.json]
       [--top N] [--untimed-inputs] [--enables N]
       [--report rep1.json --report rep2.json ... [--period NS]]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from netagg.boards.build import synth_ooc
from netagg.boards.depth import arrival_by_depth, enable_nets, logic_depth
from netagg.params import Params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int)
    ap.add_argument("--elements", type=int)
    ap.add_argument("--slots", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--outdir", help="keep the netlist here (default: a temporary directory)")
    ap.add_argument("--netlist", help="read this Yosys JSON netlist of netagg_core "
                                      "(no synthesis; the core's parameters are not used)")
    ap.add_argument("--threshold", type=float, default=5.0,
                    help="count endpoints at least this deep by block (default 5)")
    ap.add_argument("--top", type=int, default=20, help="deepest registers listed (default 20)")
    ap.add_argument("--json", dest="json_path", help="write the summary here")
    ap.add_argument("--untimed-inputs", action="store_true",
                    help="leave out paths from the core's input ports (as placed out of context)")
    ap.add_argument("--enables", type=int, metavar="N",
                    help="also list the enable nets of at least N flip-flops")
    ap.add_argument("--report", action="append", default=[], metavar="REP.json",
                    help="with --netlist: a nextpnr --report (--detailed-timing-report) of "
                         "that netlist, placed; repeat for several placements")
    ap.add_argument("--period", type=float, default=1000 / 150,
                    help="with --report: the clock period in ns (default 1000/150)")
    args = ap.parse_args(argv)
    given = {k: getattr(args, k) for k in ("lanes", "elements", "slots", "workers", "jobs")
             if getattr(args, k) is not None}
    if args.netlist and (given or args.outdir):
        print("logic_depth: --netlist reads a netlist: give no core parameters or --outdir",
              file=sys.stderr)
        return 2
    if args.report and not args.netlist:
        print("logic_depth: --report needs the --netlist that was placed", file=sys.stderr)
        return 2
    if not args.period > 0:
        print(f"logic_depth: --period must be positive, not {args.period}", file=sys.stderr)
        return 2
    if args.enables is not None and args.enables < 1:
        print(f"logic_depth: --enables must be at least 1, not {args.enables}", file=sys.stderr)
        return 2
    from_inputs = not args.untimed_inputs
    try:
        params = Params(**given)
    except (TypeError, ValueError) as e:
        print(f"logic_depth: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.netlist:
            try:
                with open(args.netlist, encoding="utf-8") as f:
                    netlist = json.load(f)
                r = {"netlist": args.netlist, **logic_depth(
                    netlist, "netagg_core", threshold=args.threshold, top_n=args.top,
                    from_inputs=from_inputs), "from_inputs": from_inputs}
            except (OSError, ValueError) as e:
                print(f"logic_depth: {args.netlist}: {e}", file=sys.stderr)
                return 2
            print(f"{args.netlist}: endpoints {r['endpoints']}, deepest {r['max']} levels")
        else:
            outdir = args.outdir or tmp
            print(f"synth_ecp5 of the core ({params.to_dict()}) in {outdir} ...",
                  file=sys.stderr, flush=True)
            r = synth_ooc(params, outdir, threshold=args.threshold, top_n=args.top,
                          from_inputs=from_inputs)
            netlist = f"{outdir}/netagg_core.json"
            print(f"LUT4 {r['LUT4']}, endpoints {r['endpoints']}, deepest {r['max']} levels "
                  f"(synth {r['synth_seconds']} s)")
        if args.report:
            try:
                # (paths from the input ports left out, as the placement
                # leaves them untimed, whatever --untimed-inputs says)
                r["arrival_by_depth"] = arrival_by_depth(
                    netlist, args.report, "netagg_core", period_ns=args.period)
            except (OSError, ValueError, KeyError) as e:
                print(f"logic_depth: --report: {e}", file=sys.stderr)
                return 2
        if args.enables is not None:
            r["enable_nets"] = enable_nets(netlist, "netagg_core", min_loads=args.enables,
                                           from_inputs=from_inputs)
    print("endpoints at least: " + ", ".join(f"{t}: {n}" for t, n in r["at_least"].items()))
    print(f"at least {r['threshold']:g} levels, by block:")
    for block, n in r["by_block"].items():
        print(f"  {n:5d}  {block}")
    print("deepest registers:")
    for d in r["deepest"]:
        print(f"  {d['depth']:5.2f}  {d['endpoints']:4d}  {d['register']}")
    if args.enables is not None:
        nets = r["enable_nets"]
        logic = [n for n in nets if n["driver"] not in ("TRELLIS_FF", "input")]
        print(f"enable nets of at least {args.enables} flip-flops: {len(nets)}, "
              f"{len(logic)} driven by logic ({sum(n['loads'] for n in logic)} loads):")
        for n in nets:
            depth = "  -  " if n["depth"] is None else f"{n['depth']:5.2f}"
            print(f"  {depth}  {n['loads']:4d}  {n['driver']:10s} {n['net']}")
    if args.report:
        a = r["arrival_by_depth"]
        print("placements: " + ", ".join(f"{x['fmax_mhz']} MHz ({x['joined']} endpoints joined)"
                                          for x in a["reports"]))
        print(f"arrival by depth (ns; late: after {a['period_ns']:.3f}):")
        print("  depth  endpoints  mean   p90    max   late")
        for b in a["bins"]:
            print(f"  {b['depth']:5.1f}  {b['endpoints']:9d}  {b['mean_ns']:5.2f}  "
                  f"{b['p90_ns']:5.2f}  {b['max_ns']:5.2f}  {b['late']:5d}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
