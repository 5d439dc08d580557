"""Build reports: resource use against the device's capacity and Fmax per
clock domain against its constraint, read from nextpnr's ``--report`` JSON
and the synthesised netlist (``docs/boards.md``).

Pure Python (no Amaranth).

Contract: :func:`summarise` returns a JSON-serialisable dict with
``resources`` (LUT, FF, BRAM, DSP and, where the family has them, LUTRAM and
SPRAM: each ``{"used", "available", "percent"}``) and ``clocks`` (per clock
net: ``{"fmax_mhz", "constraint_mhz", "met"}``). :func:`format_table` renders
a report as a readable table.
"""

from __future__ import annotations

import json
import os
import re

# nextpnr utilisation keys per family: (our name, nextpnr bel type).
_ECP5_KEYS = (
    ("LUT", "TRELLIS_COMB"),      # LUT4 / carry halves: the logic cells of a slice
    ("FF", "TRELLIS_FF"),
    ("BRAM", "DP16KD"),           # 18 Kbit block RAMs
    ("DSP", "MULT18X18D"),
    ("LUTRAM", "TRELLIS_RAMW"),   # distributed RAM write ports (one per 16x4 RAM)
)
_ICE40_KEYS = (
    ("LUT", "ICESTORM_LC"),       # logic cells (LUT4 + carry + FF)
    ("BRAM", "ICESTORM_RAM"),     # 4 Kbit block RAMs
    ("DSP", "ICESTORM_DSP"),
    ("SPRAM", "ICESTORM_SPRAM"),
)


def _entry(used: int, available: int) -> dict:
    percent = 100.0 * used / available if available else 0.0
    return {"used": int(used), "available": int(available), "percent": round(percent, 2)}


def count_ffs(netlist_path: str | os.PathLike, top: str | None = None) -> int:
    """Flip-flops in a Yosys JSON netlist (after synth_ecp5 / synth_ice40)."""
    with open(netlist_path, encoding="utf-8") as f:
        netlist = json.load(f)
    modules = netlist.get("modules", {})
    total = 0
    for name, module in modules.items():
        if top is not None and name != top:
            continue
        for cell in module.get("cells", {}).values():
            kind = cell.get("type", "")
            if kind.startswith("SB_DFF") or kind == "TRELLIS_FF":
                total += 1
    return total


def summarise(nextpnr_report: dict, family: str, *, ff_count: int | None = None) -> dict:
    """Resources and clocks of one nextpnr ``--report`` JSON (already loaded).

    ``family`` is "ecp5" or "ice40". On iCE40, nextpnr does not count
    flip-flops separately (an LC holds a LUT and a FF): ``ff_count`` (from
    :func:`count_ffs`) is reported against the number of LCs.
    """
    util = nextpnr_report.get("utilization", {})
    keys = _ECP5_KEYS if family == "ecp5" else _ICE40_KEYS
    resources = {}
    for ours, bel in keys:
        if bel in util:
            resources[ours] = _entry(util[bel]["used"], util[bel]["available"])
    if family == "ice40" and ff_count is not None and "ICESTORM_LC" in util:
        resources["FF"] = _entry(ff_count, util["ICESTORM_LC"]["available"])
    clocks = {}
    for name, f in sorted(nextpnr_report.get("fmax", {}).items()):
        achieved = float(f.get("achieved", 0.0))
        constraint = float(f.get("constraint", 0.0))
        clocks[name] = {"fmax_mhz": round(achieved, 2), "constraint_mhz": round(constraint, 2),
                        "met": achieved >= constraint}
    return {"resources": resources, "clocks": clocks}


def timing_misses(report: dict) -> list[str]:
    """Every clock of a build report that misses its constraint, one
    phrase each (empty: timing met): nextpnr's clocks, and an Ethernet
    board's own domains (``report["ethernet"]["clock_domains"]``), each of
    which must have been constrained as the board needs and met."""
    clocks = report.get("clocks", {})
    missed = [f"{name} {c['fmax_mhz']:.2f} MHz < {c['constraint_mhz']:.2f} MHz"
              for name, c in clocks.items() if not c["met"]]
    for d in (report.get("ethernet") or {}).get("clock_domains", []):
        if "met" in d and not d["met"] and not (d.get("clock") in clocks
                                                and not clocks[d["clock"]]["met"]):
            missed.append(f"{d['domain']} ({d.get('clock') or 'no clock'}) not met at "
                          f"{d['constraint_mhz']:.2f} MHz")
    return missed


def format_table(report: dict) -> str:
    """A build report as readable text: resources, clocks, parameters."""
    lines = []
    head = f"netagg build: {report.get('board', '?')} ({report.get('device', '?')})"
    lines.append(head)
    lines.append("-" * len(head))
    lines.append(f"{'resource':<10} {'used':>8} {'available':>10} {'use':>8}")
    for name, r in report.get("resources", {}).items():
        lines.append(f"{name:<10} {r['used']:>8} {r['available']:>10} {r['percent']:>7.2f}%")
    lines.append("")
    lines.append(f"{'clock':<28} {'Fmax MHz':>9} {'target MHz':>11}  met")
    for name, c in report.get("clocks", {}).items():
        lines.append(f"{name:<28} {c['fmax_mhz']:>9.2f} {c['constraint_mhz']:>11.2f}  "
                     f"{'yes' if c['met'] else 'NO'}")
    lines.append("")
    params = report.get("params", {})
    if params:
        lines.append("parameters: " + ", ".join(
            f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in params.items()))
    for key in ("fp_stages", "acc_ram", "jobs_config", "baud", "seed", "bitstream",
                "build_seconds"):
        if report.get(key) is not None:
            lines.append(f"{key}: {report[key]}")
    return "\n".join(lines) + "\n"


def _register_of(cell: str) -> str:
    """The register (or RAM) an endpoint cell belongs to, from nextpnr's
    packed cell name: bit indices, packing suffixes and LUTRAM/DP16KD parts
    removed (``slots.issue.entry0_can_TRELLIS_FF_Q.M`` -> ``slots.issue.entry0_can``)."""
    name = re.sub(r"_TRELLIS_FF_Q.*", "", cell)
    name = re.sub(r"\$DPRAM.*|\$CCU2.*|_DP16KD.*", "", name)
    name = re.sub(r"\[\d+\]", "", name)
    return re.sub(r"\.\d+(\.\d+)*$", "", name)


def endpoint_arrivals(nextpnr_report: dict) -> dict[tuple[str, str], float] | None:
    """Every endpoint's latest arrival in ns, by (cell, port), from a report
    written with ``--detailed-timing-report``: the largest per-sink delay
    that any net gives it (from the launching edge, setup not added).
    ``None`` when the report has no detailed net timings."""
    nets = nextpnr_report.get("detailed_net_timings")
    if nets is None:
        return None
    arrival: dict[tuple[str, str], float] = {}
    for net in nets:
        for e in net.get("endpoints", []):
            key = (e["cell"], e["port"])
            arrival[key] = max(arrival.get(key, 0.0), float(e["delay"][-1]))
    return arrival


def endpoint_slack(nextpnr_report: dict, period_ns: float, *, top: int = 25) -> dict:
    """The endpoints that miss ``period_ns``, from a report written with
    ``--detailed-timing-report``: every endpoint's latest arrival (nextpnr's
    per-sink delay from the launching edge, setup not added), how many are
    later than the period, grouped by block (the
    register's hierarchy, lane numbers merged: ``slots.issue.loop.laneN.add32``;
    ``(top)`` for the top level) and by register (``top`` latest), and the
    arrival histogram in 0.5 ns bins. ``None`` when the report has no
    detailed net timings."""
    arrival = endpoint_arrivals(nextpnr_report)
    if arrival is None:
        return None
    late = {k: v for k, v in arrival.items() if v > period_ns}

    def block_of(reg: str) -> str:
        parts = reg.split(".")[:-1]
        return re.sub(r"lane\d+", "laneN", ".".join(parts)) if parts else "(top)"

    blocks: dict[str, int] = {}
    regs: dict[str, list] = {}
    for (cell, port), t in late.items():
        reg = _register_of(cell)
        block = block_of(reg)
        blocks[block] = blocks.get(block, 0) + 1
        entry = regs.setdefault(f"{reg}:{port}", [0, 0.0])
        entry[0] += 1
        entry[1] = max(entry[1], t)
    hist: dict[str, int] = {}
    for t in arrival.values():
        lo = 0.5 * int(t / 0.5)
        hist[f"{lo:.1f}"] = hist.get(f"{lo:.1f}", 0) + 1
    worst = sorted(regs.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "period_ns": period_ns,
        "endpoints": len(arrival),
        "late": len(late),
        "late_by_block": dict(sorted(blocks.items(), key=lambda kv: -kv[1])),
        "latest_registers": [{"register": k, "endpoints": n, "arrival_ns": round(t, 2)}
                             for k, (n, t) in worst],
        "arrival_histogram": dict(sorted(hist.items(), key=lambda kv: float(kv[0]))),
    }
