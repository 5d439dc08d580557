"""Logic depth of a synthesised ECP5 netlist: for every flip-flop and block
RAM input, the deepest chain of cells in front of it, in LUT levels.

Pure Python (no Amaranth, no tools): it reads the Yosys JSON netlist that
``synth_ecp5`` writes (``netagg_core.json`` of an out-of-context build).

Why: on the LFE5U-85F-6 every level of a control path costs a LUT (0.24 ns)
and a route (0.5-1.5 ns), so a path's delay is its levels times about 1.1 ns
plus the clock-to-out, and 150 MHz (6.67 ns) holds about five levels. The
placement moves a build's Fmax by 3-6 % from seed to seed (docs/boards.md),
which hides what one change of the logic does; the depth of each endpoint is
a property of the netlist alone, the same for every placement, so it
measures a change to the logic without the placement's noise.

Contract: :func:`logic_depth` returns a JSON-serialisable dict:
``max`` (the deepest endpoint's depth), ``at_least`` (for each threshold of
:data:`THRESHOLDS`, the endpoints at least that deep), ``by_block`` (for
the threshold ``threshold``, those endpoints counted by block: the
register's hierarchical name without its last component), ``deepest`` (the
``top_n`` deepest registers: name, endpoints, depth) and ``weights``.

Weights, in LUT levels (a level: one LUT4 and the route into it):

- ``LUT4``: 1; ``PFUMX``, ``L6MUX21``: 0.3 (the slice's wide multiplexers:
  no route between them and their LUTs);
- ``CCU2C`` (carry chain): 1 from its LUT inputs, 0.1 from ``CIN``;
- ``DP16KD`` read data: 1 with the block's output register
  (``REGMODE_B="OUTREG"``: 0.96 ns from the clock), 5 without it (5.83 ns);
- ``TRELLIS_DPR16X4`` read data (distributed RAM): 1 after its read address;
- a flip-flop's output and the module's inputs: 0 (the inputs: not a
  start at all with ``from_inputs=False``).

An endpoint is a flip-flop's data, clock enable or set/reset input, or a
block or distributed RAM's address, data or enable input; its depth is the
deepest of its inputs' (a flip-flop's register name is that of the net on
its output).
"""

from __future__ import annotations

import collections
import json
import os

from netagg.boards.report import endpoint_arrivals

__all__ = ["THRESHOLDS", "WEIGHTS", "arrival_by_depth", "enable_nets", "logic_depth"]

WEIGHTS = {"LUT4": 1.0, "PFUMX": 0.3, "L6MUX21": 0.3, "CCU2C": 1.0, "CCU2C.CIN": 0.1,
           "DP16KD.OUTREG": 1.0, "DP16KD.NOREG": 5.0, "TRELLIS_DPR16X4": 1.0}
"""Cell delays in LUT levels (see the module's docstring)."""

THRESHOLDS = (4.0, 4.5, 5.0, 5.5, 6.0)
"""Depths counted in ``at_least``."""

_COMB = ("LUT4", "PFUMX", "L6MUX21", "CCU2C")
# endpoint inputs of the sequential cells (every other input of a flip-flop
# or RAM is its clock)
_FF_INPUTS = ("DI", "M", "CE", "LSR")


def _module(netlist: dict, top: str | None) -> dict:
    modules = netlist.get("modules", {})
    if top is None:
        tops = [n for n, m in modules.items() if _flag(m.get("attributes", {}).get("top", 0))]
        if len(tops) != 1:
            raise ValueError("the netlist has no single top module: name it (top=...)")
        top = tops[0]
    if top not in modules:
        raise ValueError(f"no module {top!r} in the netlist")
    return modules[top]


def _flag(value) -> bool:
    """A Yosys JSON attribute as a truth value (an int, or a binary string)."""
    return int(value, 2) != 0 if isinstance(value, str) else bool(value)


def _bits(conn) -> list[int]:
    return [b for b in conn if isinstance(b, int)]


class _Cones:
    """The names, drivers and depths (in LUT levels, from registers, RAM
    outputs and, with ``from_inputs``, the module's input ports) of the bits
    of one module of a Yosys JSON netlist; a bit fed by input ports alone
    has depth ``UNTIMED`` when ``from_inputs`` is false."""

    UNTIMED = float("-inf")

    def __init__(self, netlist, top: str | None, from_inputs: bool):
        if isinstance(netlist, (str, os.PathLike)):
            with open(netlist, encoding="utf-8") as f:
                netlist = json.load(f)
        module = _module(netlist, top)
        self.cells = cells = module.get("cells", {})
        self.names: dict[int, str] = {}
        for name, net in module.get("netnames", {}).items():
            # prefer the names a designer gave (fewer "$" of the tools)
            for bit in _bits(net.get("bits", [])):
                if bit not in self.names or name.count("$") < self.names[bit].count("$"):
                    self.names[bit] = name
        self.driver: dict[int, tuple[str, str]] = {}
        for cname, cell in cells.items():
            for port, direction in cell.get("port_directions", {}).items():
                if direction == "output":
                    for bit in _bits(cell["connections"].get(port, [])):
                        self.driver[bit] = (cname, port)
        self._depth: dict[int, float] = {}
        self._input_bits = set() if from_inputs else {
            b for port in module.get("ports", {}).values()
            if port.get("direction") == "input" for b in _bits(port.get("bits", []))}

    @staticmethod
    def inputs(cell, ports=None):
        for port, direction in cell.get("port_directions", {}).items():
            if direction == "input" and (ports is None or port in ports):
                yield port, _bits(cell["connections"].get(port, []))

    def _cost(self, bit: int) -> tuple[float | None, list[tuple[int, float]]]:
        """The depth of ``bit`` if fixed by its driver, else None and the
        (input bit, cell delay) pairs it is the deepest of."""
        cname, port = self.driver[bit]
        cell = self.cells[cname]
        kind = cell["type"]
        if kind in _COMB:
            if kind == "CCU2C":
                deps = [(b, WEIGHTS["CCU2C.CIN"] if p == "CIN" else WEIGHTS["CCU2C"])
                        for p, bs in self.inputs(cell) for b in bs]
                return None, deps
            return None, [(b, WEIGHTS[kind]) for _, bs in self.inputs(cell) for b in bs]
        if kind == "DP16KD":
            mode = str(cell.get("parameters", {}).get("REGMODE_B", "NOREG")).strip('"')
            return (WEIGHTS["DP16KD.OUTREG"] if mode == "OUTREG" else WEIGHTS["DP16KD.NOREG"]), []
        if kind == "TRELLIS_DPR16X4" and port.startswith("DO"):
            rad = [b for p, bs in self.inputs(cell) if p.startswith("RAD") for b in bs]
            if not rad:
                return WEIGHTS["TRELLIS_DPR16X4"], []
            return None, [(b, WEIGHTS["TRELLIS_DPR16X4"]) for b in rad]
        return 0.0, []          # a flip-flop's output, or a cell the model does not know

    def depth(self, bit: int) -> float:
        depth = self._depth
        # iterative: control cones are deep chains of nets
        stack = [bit]
        while stack:
            b = stack[-1]
            if b in depth:
                stack.pop()
                continue
            if b not in self.driver:
                depth[b] = self.UNTIMED if b in self._input_bits else 0.0
                stack.pop()
                continue
            fixed, deps = self._cost(b)
            if fixed is not None:
                depth[b] = fixed
                stack.pop()
                continue
            todo = [d for d, _ in deps if d not in depth]
            if todo:
                stack.extend(todo)
                continue
            depth[b] = max((w + depth[d] for d, w in deps), default=0.0)
            stack.pop()
        return depth[bit]


def logic_depth(netlist, top: str | None = None, *, threshold: float = 5.0,
                top_n: int = 25, from_inputs: bool = True) -> dict:
    """The logic depth summary of ``netlist`` (a path to a Yosys JSON netlist,
    or the loaded dict) for module ``top`` (default: the one marked top).

    ``from_inputs``: paths from the module's input ports count, from depth 0
    (as Yosys's mapper sees them: its deepest path bounds how far it lets
    every other path grow while it saves area); ``False``: they do not (as
    an out-of-context placement times them: an input port is no timing
    startpoint), and an endpoint reached from input ports only is left out."""
    cones = _Cones(netlist, top, from_inputs)
    cells, names = cones.cells, cones.names

    per_cell: dict[str, float] = {}
    for (cname, _), d in _endpoint_depths(cones).items():
        per_cell[cname] = max(per_cell.get(cname, d), d)
    endpoints = []          # (depth, register name)
    for cname, d in per_cell.items():
        cell = cells[cname]
        name = cname
        if cell["type"] == "TRELLIS_FF":
            q = _bits(cell["connections"].get("Q", []))
            name = names.get(q[0], cname) if q else cname
        endpoints.append((d, name))

    def block(name: str) -> str:
        return name.rsplit(".", 1)[0] if "." in name else "(top)"

    deep = [(d, n) for d, n in endpoints if d >= threshold - 1e-9]
    by_block = collections.Counter(block(n) for _, n in deep)
    per_reg: dict[str, list] = {}
    for d, n in endpoints:
        e = per_reg.setdefault(n, [0, 0.0])
        e[0] += 1
        e[1] = max(e[1], d)
    deepest = sorted(per_reg.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top_n]
    return {
        "max": round(max((d for d, _ in endpoints), default=0.0), 2),
        "endpoints": len(endpoints),
        "at_least": {f"{t:g}": sum(d >= t - 1e-9 for d, _ in endpoints) for t in THRESHOLDS},
        "threshold": threshold,
        "by_block": dict(by_block.most_common()),
        "deepest": [{"register": n, "endpoints": e[0], "depth": round(e[1], 2)}
                    for n, e in deepest],
        "weights": dict(WEIGHTS),
    }


def enable_nets(netlist, top: str | None = None, *, min_loads: int = 32,
                from_inputs: bool = True) -> list[dict]:
    """The flip-flops' enable nets (``CE`` and ``LSR`` inputs) of module
    ``top`` of ``netlist`` with at least ``min_loads`` flip-flop pins: a
    wide register's load enable, which the placer pulls towards its loads.
    Each as ``net`` (its name), ``loads``, ``pins`` (``CE``, ``LSR``),
    ``driver`` (the driving cell's type; ``"input"`` for a port) and
    ``depth`` (in LUT levels, as :func:`logic_depth`), deepest first, then
    by loads."""
    if type(min_loads) is not int or min_loads < 1:
        raise ValueError(f"min_loads must be a positive int, not {min_loads!r}")
    cones = _Cones(netlist, top, from_inputs)
    loads: collections.Counter = collections.Counter()
    pins: dict[int, set] = collections.defaultdict(set)
    for cell in cones.cells.values():
        if cell["type"] == "TRELLIS_FF":
            for port, bits in cones.inputs(cell, ("CE", "LSR")):
                for b in bits:
                    loads[b] += 1
                    pins[b].add(port)
    rows = []
    for b, n in loads.items():
        if n < min_loads:
            continue
        drv = cones.driver.get(b)
        d = cones.depth(b)
        rows.append({"net": cones.names.get(b, str(b)), "loads": n, "pins": sorted(pins[b]),
                     "driver": cones.cells[drv[0]]["type"] if drv else "input",
                     "depth": None if d == cones.UNTIMED else round(d, 2)})
    rows.sort(key=lambda r: (-(r["depth"] if r["depth"] is not None else -1), -r["loads"],
                             r["net"]))
    return rows


def _endpoint_depths(cones: _Cones) -> dict[tuple[str, str], float]:
    """Each endpoint input's depth, by (cell, port): a flip-flop's ``DI``,
    ``CE``, ``LSR``; a RAM's every input but its clocks (timed ones only)."""
    out = {}
    for cname, cell in cones.cells.items():
        kind = cell["type"]
        if kind == "TRELLIS_FF":
            ports = _FF_INPUTS
        elif kind in ("DP16KD", "TRELLIS_DPR16X4"):
            ports = None
        else:
            continue
        for port, bits in cones.inputs(cell, ports):
            if port.startswith("CLK") or not bits:
                continue
            depths = [d for d in map(cones.depth, bits) if d != cones.UNTIMED]
            if depths:
                out[cname, port] = max(depths)
    return out


def _arrivals(report) -> dict[tuple[str, str], float]:
    """:func:`~netagg.boards.report.endpoint_arrivals` keyed by the
    netlist's ports: a flip-flop's ``M`` input (its data when no LUT of its
    slice feeds it) is its netlist's ``DI``."""
    arrivals = endpoint_arrivals(report)
    if arrivals is None:
        raise ValueError("the report has no detailed net timings "
                         "(nextpnr --detailed-timing-report)")
    arr: dict[tuple[str, str], float] = {}
    for (cell, port), a in arrivals.items():
        key = (cell, "DI" if port == "M" else port)
        arr[key] = max(arr.get(key, 0.0), a)
    return arr


def arrival_by_depth(netlist, reports, top: str | None = None, *, period_ns: float,
                     from_inputs: bool = False) -> dict:
    """How late each logic depth arrives once placed: the endpoints of
    ``netlist`` (as :func:`logic_depth`; ``from_inputs`` false by default,
    as an out-of-context placement times them) joined by cell and port with
    their arrivals in each of ``reports`` (nextpnr ``--report`` JSON with
    ``--detailed-timing-report``: paths or loaded dicts), grouped by depth
    in half levels.

    Returns ``period_ns``, ``reports`` (per report: ``fmax_mhz``,
    ``joined``, the endpoints found in the netlist, and ``unjoined``) and
    ``bins``, by depth: ``depth``, ``endpoints`` (over all reports),
    ``mean_ns``, ``p90_ns``, ``max_ns`` and ``late`` (arrivals after
    ``period_ns``). What it tells: the depth at which an endpoint can still
    miss the period somewhere in these placements."""
    if not (isinstance(period_ns, (int, float)) and period_ns > 0):
        raise ValueError(f"period_ns must be a positive number, not {period_ns!r}")
    depths = _endpoint_depths(_Cones(netlist, top, from_inputs))
    per_bin: dict[float, list[float]] = collections.defaultdict(list)
    summary = []
    for rep in reports:
        if isinstance(rep, (str, os.PathLike)):
            with open(rep, encoding="utf-8") as f:
                rep = json.load(f)
        arr = _arrivals(rep)
        joined = 0
        for key, a in arr.items():
            if key in depths:
                per_bin[round(depths[key] * 2) / 2].append(a)
                joined += 1
        fmax = rep.get("fmax", {})
        clocks = [c.get("achieved") for c in fmax.values() if isinstance(c, dict)]
        summary.append({"fmax_mhz": round(min(clocks), 2) if clocks else None,
                        "joined": joined, "unjoined": len(arr) - joined})
    bins = []
    for d in sorted(per_bin):
        v = sorted(per_bin[d])
        bins.append({"depth": d, "endpoints": len(v),
                     "mean_ns": round(sum(v) / len(v), 2),
                     "p90_ns": round(v[min(len(v) - 1, int(0.9 * len(v)))], 2),
                     "max_ns": round(v[-1], 2),
                     "late": sum(a > period_ns for a in v)})
    return {"period_ns": period_ns, "reports": summary, "bins": bins}
