"""Session 31's netlist variants of the generated core (docs/boards.md,
"Session 31"), made from ``netagg generate``'s Verilog as text, for the
record: none of them is in the design.

Usage: python session31_variants.py VARIANT IN.v OUT.v

VARIANT is one of:

keep_all         ``(* keep_hierarchy *)`` on every submodule of netagg_core
keep_blocks      ... on the blocks only (see BLOCKS)
keep_adders      ... on the lanes' fp32 adders only
floorplan_rows4  a ``BEL`` attribute on each DP16KD of the default core
                 (LFE5U-85F sites; two lanes per block-RAM row)
floorplan_ooc    ... at the sites of the out-of-context build's placement
                 (session31_ooc_ram_sites.json beside this script: the
                 DP16KD cells' NEXTPNR_BEL in nextpnr's --write output)
"""

import json
import re
import sys
from pathlib import Path

BLOCKS = (r"jobs|validator|mcast|slots|slots\.decision|slots\.issue|slots\.issue\.loop"
          r"|slots\.issue\.loop\.lane\d+(\.add32)?")
KEEP = {"keep_all": r".*", "keep_blocks": BLOCKS,
        "keep_adders": r"slots\.issue\.loop\.lane\d+\.add32"}


def keep_hierarchy(text: str, pattern: str) -> str:
    """``(* keep_hierarchy *)`` before every ``module \\netagg_core.NAME``
    whose NAME matches ``pattern`` in full."""
    def sub(m):
        if re.fullmatch(pattern, m.group(2)):
            return "(* keep_hierarchy = 32'd1 *)\n" + m.group(1)
        return m.group(1)
    return re.sub(r"^(module \\netagg_core\.(\S+) )", sub, text, flags=re.M)


def _sites(y: int, x: int) -> list[str]:
    # the LFE5U-85F's block RAMs: rows Y22, Y46, Y70, Y82, four sites
    # (EBR0-3) at X, X+2, X+4, X+6 in each group of columns
    return [f"X{x + 2 * e}/Y{y}/EBR{e}" for e in range(4)]


def floorplan_rows4() -> dict:
    place = {}
    cols = [40, 49, 58, 69]
    for lane in range(8):
        y = (22, 46, 70, 82)[lane // 2]
        first = 2 * (lane % 2)
        sites = _sites(y, cols[first]) + _sites(y, cols[first + 1])
        for j in range(8):                          # acc_ram bram8L..8L+7: lane L
            place[("slots.issue.loop.acc_ram", f"bram{8 * lane + j}")] = sites[j]
    extra = _sites(46, 31) + _sites(46, 78)
    for j in range(7):
        place[("slots.state_mem", f"bram{j}")] = extra[j]
    place[("slots.issue.loop.acc_ram", "bram64")] = extra[7]
    mc = _sites(70, 31) + _sites(70, 78) + _sites(82, 31) + _sites(82, 78)
    for j in range(15):
        place[("mcast.buf", f"bram{j}")] = mc[j]
    return place


def floorplan(text: str, place: dict) -> str:
    def module(m):
        name = m.group(1)[len("netagg_core."):]
        def inst(mm):
            bel = place.get((name, mm.group(2)))
            if bel is None:
                return mm.group(0)
            return f'(* BEL = "{bel}" *)\n  DP16KD #({mm.group(1)}) {mm.group(2)} ('
        return re.sub(r"DP16KD #\((.*?)\) (bram\d+) \(", inst, m.group(0), flags=re.S)
    return re.sub(r"^module \\(\S+) .*?^endmodule", module, text, flags=re.S | re.M)


def floorplan_ooc() -> dict:
    sites = json.loads(Path(__file__).with_name("session31_ooc_ram_sites.json").read_text())
    return {tuple(cell.rsplit(".", 1)): bel for cell, bel in sites.items()}


def main(argv):
    if len(argv) != 4 or argv[1] not in (*KEEP, "floorplan_rows4", "floorplan_ooc"):
        sys.exit(__doc__)
    text = open(argv[2]).read()
    if argv[1] in KEEP:
        text = keep_hierarchy(text, KEEP[argv[1]])
    elif argv[1] == "floorplan_rows4":
        text = floorplan(text, floorplan_rows4())
    else:
        text = floorplan(text, floorplan_ooc())
    with open(argv[3], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv)
