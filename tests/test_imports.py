"""The import graph of the package (docs/architecture.md, "Layout"): every
module of every package (found through pyproject.toml's package-dir) is
parsed, not imported; each ``netagg.*`` import, lazy ones inside functions
included, is an edge between top-level parts:

- ``contracts``: the pure-Python modules under ``netagg/`` (wire, payload,
  regmap, uartlink, frames, pcap, jobs, params, the package itself);
- ``cli``: ``netagg.cli`` and ``netagg.__main__``;
- ``hdl``, ``sim``, ``boards``, ``host``: ``netagg.hdl`` ... ``netagg.host``;
  ``netagg.torch`` (the public name of :mod:`netagg.host.torch`) is ``host``.

It fails on a cycle between parts, on an edge the layout does not allow
(contracts <- hdl <- sim <- boards; host may import contracts and sim; the
cli anything), and on a contract module that imports anything but the
standard library and other contracts (``payload`` may use NumPy). The
checkers are tested on synthetic graphs first, so they can fail.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PARTS = {"netagg.cli": "cli", "netagg.__main__": "cli", "netagg.hdl": "hdl",
         "netagg.sim": "sim", "netagg.boards": "boards", "netagg.host": "host",
         "netagg.torch": "host"}
ALLOWED = {
    "contracts": set(),
    "hdl": {"contracts"},
    "sim": {"contracts", "hdl"},
    "boards": {"contracts", "hdl", "sim"},
    "host": {"contracts", "sim"},
    "cli": {"contracts", "hdl", "sim", "boards", "host"},
}
PURE_EXTRA = {"netagg.payload": {"numpy"}}
"""Third-party packages a contract module may import (none for the others)."""


def part_of(module: str) -> str | None:
    """The top-level part of a ``netagg`` module name (None: not netagg)."""
    if module != "netagg" and not module.startswith("netagg."):
        return None
    for prefix, part in PARTS.items():
        if module == prefix or module.startswith(prefix + "."):
            return part
    return "contracts"


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> source file."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    out = {}
    for package in config["packages"]:
        top = package.split(".")
        for n in range(len(top), 0, -1):                 # longest mapped prefix
            base = config["package-dir"].get(".".join(top[:n]))
            if base is not None:
                folder = ROOT / base / Path(*top[n:])
                break
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            out[name] = path
    return out


def imports(name: str, source: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``name`` imports (anywhere in the file)."""
    package = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.add(mod)
            # `from netagg import wire` imports the module netagg.wire
            out.update(f"{mod}.{a.name}" for a in node.names if mod.startswith("netagg"))
    return out


def part_graph(edges: dict[str, set[str]]) -> dict[str, set[tuple[str, str]]]:
    """Module imports -> {(part, part): [(module, imported), ...]} between parts."""
    out: dict = {}
    for mod, targets in edges.items():
        a = part_of(mod)
        for t in targets:
            b = part_of(t)
            if b is not None and a != b:
                out.setdefault((a, b), set()).add((mod, t))
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of a directed graph as a node list (first node repeated at
    the end), or None."""
    state: dict[str, int] = {}          # 1: on the path, 2: done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def disallowed(pairs, allowed=ALLOWED) -> list[str]:
    """The part edges the layout does not allow, with the imports behind them."""
    return [f"{a} -> {b}: " + ", ".join(f"{m} imports {t}" for m, t in sorted(why))
            for (a, b), why in sorted(pairs.items()) if b not in allowed[a]]


def impure(edges: dict[str, set[str]]) -> list[str]:
    """Contract modules importing anything but the standard library and
    other contracts (and their allowance of :data:`PURE_EXTRA`)."""
    bad = []
    for mod, targets in sorted(edges.items()):
        if part_of(mod) != "contracts":
            continue
        for t in sorted(targets):
            top = t.split(".")[0]
            if top == "netagg" or top in sys.stdlib_module_names or top == "__future__":
                continue
            if top not in PURE_EXTRA.get(mod, set()):
                bad.append(f"{mod} imports {t}")
    return bad


def module_edges() -> dict[str, set[str]]:
    names = modules()
    return {name: {t for t in imports(name, path.read_text(), path.stem == "__init__")
                   if not t.startswith("netagg") or t in names or t.rpartition(".")[0] in names
                   or t == "netagg"}
            for name, path in names.items()}


# -- the checkers on synthetic graphs -------------------------------------------

def test_find_cycle_on_synthetic_graphs():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({}) is None


def test_checkers_catch_a_synthetic_cycle_between_parts():
    edges = {
        "netagg.hdl.core": {"netagg.wire", "netagg.sim.arith"},     # hdl -> sim: not allowed
        "netagg.sim.arith": {"netagg.hdl.layouts", "numpy"},
        "netagg.hdl.layouts": set(),
        "netagg.wire": {"enum", "netagg.boards.tops"},              # contract -> boards
    }
    pairs = part_graph(edges)
    graph = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
    assert find_cycle(graph) == ["hdl", "sim", "hdl"]
    bad = disallowed(pairs)
    assert bad == ["contracts -> boards: netagg.wire imports netagg.boards.tops",
                   "hdl -> sim: netagg.hdl.core imports netagg.sim.arith"]


def test_purity_checker_on_synthetic_modules():
    edges = {"netagg.wire": {"enum", "amaranth.hdl"}, "netagg.payload": {"numpy"},
             "netagg.frames": {"numpy", "struct"}, "netagg.sim.arith": {"numpy"}}
    assert impure(edges) == ["netagg.frames imports numpy", "netagg.wire imports amaranth.hdl"]


def test_imports_parsed_from_source():
    src = ("from . import arith\nfrom ..wire import DType\nimport numpy as np\n"
           "def f():\n    from netagg.hdl import layouts\n")
    assert imports("netagg.sim.traffic", src, False) == {
        "netagg.sim", "netagg.sim.arith", "netagg.wire", "netagg.wire.DType", "numpy",
        "netagg.hdl", "netagg.hdl.layouts"}


# -- the package ------------------------------------------------------------------

def test_every_part_has_modules():
    parts = {part_of(m) for m in modules()}
    assert parts == set(ALLOWED)


def test_no_cycle_between_parts():
    pairs = part_graph(module_edges())
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between parts: " + " -> ".join(cycle) + "\n" + "\n".join(
        f"{a} -> {b}: {sorted(pairs[(a, b)])}" for a, b in zip(cycle, cycle[1:], strict=False))


def test_parts_import_only_what_the_layout_allows():
    assert disallowed(part_graph(module_edges())) == []


@pytest.mark.parametrize("name", ["wire", "regmap", "uartlink", "frames", "pcap", "jobs",
                                  "params", "payload"])
def test_contract_modules_are_pure_python(name):
    edges = module_edges()
    mod = f"netagg.{name}"
    assert mod in edges
    assert impure({mod: edges[mod]}) == []
