"""Session 40's variants of the generated core (docs/boards.md, "Session
40"), for the record: none of them is in the design.

Usage:
    python session40_variants.py fpV|fpH IN.v OUT.v        (Verilog, before synthesis)
    python session40_variants.py E1|E2 IN.json OUT.json    (synthesized netlist)

fpV  ``BEL`` attributes on the DP16KD instances (LFE5U-85F): rows Y70 and
     Y82 only; each lane's eight accumulator blocks four above four in one
     group of four columns (lanes in groups 2-5 and 7-10 of the 13), the
     slot words and the accumulator's flag block in the middle group 6; the
     multicast buffer left to the placer
fpH  the same rows: lanes 0-3 in Y70 and 4-7 in Y82, two groups each
     (groups 2-3, 4-5, 8-9, 10-11), the slot words and flag block in group 6
E1   every TRELLIS_FF without an LSR net put on ``rst`` (placement only:
     the function changes)
E2   ``rst`` taken off every TRELLIS_FF (placement only)
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from session31_variants import floorplan  # noqa: E402

# the LFE5U-85F's DP16KD columns (the same in rows Y22, Y46, Y70, Y82):
# 13 groups of four sites, EBR0-3
XS = [4, 6, 8, 10, 13, 15, 17, 19, 22, 24, 26, 28, 31, 33, 35, 37, 40, 42, 44, 46,
      49, 51, 53, 55, 58, 60, 62, 64, 69, 71, 73, 75, 78, 80, 82, 84, 87, 89, 91, 93,
      96, 98, 100, 102, 105, 107, 109, 111, 114, 116, 118, 120]
ACC, SLOTS = "slots.issue.loop.acc_ram", "slots.state_mem"


def _group(y: int, g: int) -> list[str]:
    return [f"X{XS[4 * g + e]}/Y{y}/EBR{e}" for e in range(4)]


def _middle(place: dict) -> dict:
    sites = _group(70, 6) + _group(82, 6)
    for j in range(7):
        place[(SLOTS, f"bram{j}")] = sites[j]
    place[(ACC, "bram64")] = sites[7]              # the lanes' flags
    return place


def fp_v() -> dict:
    place = {}
    for lane, g in enumerate((2, 3, 4, 5, 7, 8, 9, 10)):
        sites = _group(70, g) + _group(82, g)
        for j in range(8):                         # bram8L..8L+7: lane L
            place[(ACC, f"bram{8 * lane + j}")] = sites[j]
    return _middle(place)


def fp_h() -> dict:
    place = {}
    for lane in range(8):
        y, g = (70 if lane < 4 else 82), (2, 4, 8, 10)[lane % 4]
        sites = _group(y, g) + _group(y, g + 1)
        for j in range(8):
            place[(ACC, f"bram{8 * lane + j}")] = sites[j]
    return _middle(place)


def reset_nets(netlist: dict, mode: str) -> int:
    mod = netlist["modules"]["netagg_core"]
    rst = mod["netnames"]["rst"]["bits"][0]
    changed = 0
    for cell in mod["cells"].values():
        if cell["type"] != "TRELLIS_FF":
            continue
        lsr = cell["connections"].get("LSR")
        if mode == "E1" and lsr == ["0"]:
            cell["connections"]["LSR"] = [rst]
            cell["parameters"]["SRMODE"] = "LSR_OVER_CE"
            changed += 1
        elif mode == "E2" and lsr == [rst]:
            cell["connections"]["LSR"] = ["0"]
            cell["parameters"].pop("SRMODE", None)
            changed += 1
    return changed


def main(argv):
    if len(argv) != 4 or argv[1] not in ("fpV", "fpH", "E1", "E2"):
        sys.exit(__doc__)
    src = Path(argv[2]).read_text()
    if argv[1] in ("E1", "E2"):
        netlist = json.loads(src)
        print(argv[1], reset_nets(netlist, argv[1]), "flip-flops changed")
        Path(argv[3]).write_text(json.dumps(netlist))
    else:
        Path(argv[3]).write_text(floorplan(src, fp_v() if argv[1] == "fpV" else fp_h()))


if __name__ == "__main__":
    main(sys.argv)
