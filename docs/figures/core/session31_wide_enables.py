"""The flip-flops' enable nets (CE, LSR) of a flat ``synth_ecp5`` netlist
with at least MIN_LOADS loads: their driver's cell type and its depth in
LUT levels from registers (LUT4 and CCU2C 1, PFUMX and L6MUX21 0.3, a
carry input 0.1; as netagg.boards.depth). Session 31's record
(docs/boards.md, "Session 31"), standard library only.

Usage: python session31_wide_enables.py core.json MIN_LOADS out.json
"""

import collections
import json
import sys
from functools import lru_cache

WEIGHTS = {"LUT4": 1.0, "PFUMX": 0.3, "L6MUX21": 0.3, "CCU2C": 1.0}


def wide_enables(netlist: dict, min_loads: int, top: str = "netagg_core") -> list[dict]:
    m = netlist["modules"][top]
    cells = m["cells"]
    names = {}
    for n, v in m["netnames"].items():
        for b in v["bits"]:
            if isinstance(b, int) and (b not in names or n.count("$") < names[b].count("$")):
                names[b] = n
    driver = {}
    for cn, c in cells.items():
        for p, d in c.get("port_directions", {}).items():
            if d == "output":
                for b in c["connections"].get(p, []):
                    if isinstance(b, int):
                        driver[b] = cn

    @lru_cache(None)
    def depth(bit: int) -> float:
        c = cells.get(driver.get(bit, ""), {})
        if c.get("type") not in WEIGHTS:
            return 0.0
        best = 0.0
        for q, d in c["port_directions"].items():
            if d != "input":
                continue
            w = 0.1 if (c["type"] == "CCU2C" and q == "CIN") else WEIGHTS[c["type"]]
            for b in c["connections"][q]:
                if isinstance(b, int):
                    best = max(best, depth(b) + w)
        return best

    loads, pins = collections.Counter(), collections.defaultdict(set)
    for c in cells.values():
        if c["type"] != "TRELLIS_FF":
            continue
        for p in ("CE", "LSR"):
            for b in c["connections"].get(p, []):
                if isinstance(b, int):
                    loads[b] += 1
                    pins[b].add(p)
    rows = []
    for b, f in loads.items():
        if f >= min_loads:
            d = driver.get(b)
            rows.append({"net": names.get(b, str(b)), "loads": f, "pins": sorted(pins[b]),
                         "driver": cells[d]["type"] if d else "input", "depth": round(depth(b), 1)})
    rows.sort(key=lambda r: (-r["depth"], -r["loads"]))
    return rows


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    sys.setrecursionlimit(100000)
    with open(argv[1]) as f:
        rows = wide_enables(json.load(f), int(argv[2]))
    logic = [r for r in rows if r["driver"] not in ("TRELLIS_FF", "input")]
    with open(argv[3], "w") as f:
        json.dump({"netlist": argv[1], "min_loads": int(argv[2]), "nets": rows}, f, indent=0)
    print(f"{len(rows)} enable nets with >= {argv[2]} loads, {len(logic)} driven by logic "
          f"({sum(r['loads'] for r in logic)} loads)")


if __name__ == "__main__":
    main(sys.argv)
