"""Runs the generated Verilog of the Ethernet switch (``netagg_eth``) under
cocotb with cocotbext-eth GMII models: the back-end of ``netagg sim
--frontend ethernet`` and of the Ethernet cocotb tests.

Contract of :func:`run_sim` (docs/ethernet.md): every IN.pcap frame, padded
with zeros to 60 bytes, gets its FCS and is sent into port 0 at the GMII
pins, back to back with the minimum gap; OUT.pcap receives every frame any
port transmits, in the order transmission started, its FCS checked (a bad
one, or a frame sent with GMII ``er``, fails the run) and removed; each
record is stamped with the first input record's time plus the simulated
time since the first frame went in. STATS.json has the counters of
``netagg sim`` (``ignored``: frames delivered by the MACs that were neither
netagg messages nor answered), every front-end counter as ``eth<p>_<name>``
and ``cycles`` (first frame in to last frame out), and with a control plane
(``ctrl_key``) its counters ``ctrl_ok``, ``ctrl_bad_key``, ``ctrl_malformed``.

Builds are cached like :mod:`netagg.sim.harness`'s (same cache root and
lock), keyed by every parameter (the switch's address and UDP port are
hardware here), the port count, ``fp_stages`` and the design's sources.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from netagg import frames as fr
from netagg import pcap, regmap
from netagg.ctrlproto import CTRL_COUNTERS, DEFAULT_CTRL_PORT
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim import harness
from netagg.sim.eth_model import summary
from netagg.sim.harness import SIMULATORS, SimError
from netagg.wire import COUNTERS

TOPLEVEL = "netagg_eth"
MODULE = "netagg.sim.cocotb.test_eth_run"
PERIOD_NS = 8
DEFAULT_PORTS = 2


def build_key(params: Params, fp_stages=None, ports: int = DEFAULT_PORTS, ctrl=None) -> str:
    blob = json.dumps({"params": params.to_dict(), "fp_stages": fp_stages, "ports": ports,
                       "top": TOPLEVEL, "design": harness._design_digest(),
                       "toolchain": harness.toolchain_id(),
                       **({"ctrl": list(ctrl)} if ctrl is not None else {})}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def verilog_path(params: Params, fp_stages=None, ports: int = DEFAULT_PORTS,
                 root=None, ctrl=None) -> Path:
    """The cached Verilog of ``netagg_eth`` (written on first use); ``ctrl``:
    None, or (key, port) of the control plane."""
    d = Path(root or harness.cache_root()) / f"eth-{build_key(params, fp_stages, ports, ctrl)}"
    v = d / f"{TOPLEVEL}.v"
    with harness._locked(d / "verilog.lock"):
        if not v.exists():
            from netagg.hdl.eth.top import write_verilog
            tmp = d / f".{TOPLEVEL}.v.{os.getpid()}"
            kw = {} if ctrl is None else {"ctrl_key": ctrl[0], "ctrl_port": ctrl[1]}
            write_verilog(params, tmp, ports=ports, fp_stages=fp_stages, **kw)
            os.replace(tmp, v)
    return v


def run_cocotb(params: Params, env: dict, *, simulator="icarus", fp_stages=None,
               ports: int = DEFAULT_PORTS, quiet=True, root=None, ctrl=None) -> None:
    if simulator not in SIMULATORS:
        raise SimError(f"unknown simulator {simulator!r} (choose from {', '.join(SIMULATORS)})")
    harness._sim_env_path()
    harness._check_tools(simulator)
    try:
        import cocotbext.eth  # noqa: F401
    except ModuleNotFoundError:
        raise SimError("the Ethernet benches need cocotbext-eth (pip install "
                       "cocotbext-eth)") from None
    source = verilog_path(params, fp_stages, ports, root, ctrl)
    build = source.parent / simulator
    cls = harness._simulator_class(simulator)
    kwargs = dict(toplevel=TOPLEVEL, module=MODULE, verilog_sources=[str(source)],
                  sim_build=str(build), timescale=harness.TIMESCALE)
    if simulator == "verilator":
        kwargs["compile_args"] = list(harness.VERILATOR_ARGS)
        kwargs["make_args"] = ["-j2", "CFG_CXXFLAGS_PCH_I=-include", "OPT_SLOW=-O0"]
    else:
        kwargs["compile_args"] = list(harness.ICARUS_ARGS)
    extra = {harness.ENV_PARAMS: json.dumps(params.to_dict())}
    extra.update(env)
    extra.setdefault("COCOTB_LOG_LEVEL", "WARNING" if quiet else "INFO")
    extra.setdefault("COCOTB_ANSI_OUTPUT", "0")
    saved = {k: os.environ.pop(k) for k in list(extra) if k in os.environ}
    saved_sim = os.environ.pop("SIM", None)
    try:
        with harness._locked(build.parent / f"{simulator}.lock"):
            harness._run(cls(**kwargs, extra_env=extra, compile_only=True), quiet)
        xml = Path(harness._run(cls(**kwargs, extra_env=extra), quiet))
        xml.unlink(missing_ok=True)
    finally:
        os.environ.update(saved)
        if saved_sim is not None:
            os.environ["SIM"] = saved_sim


def _ctrl(ctrl_key, ctrl_port):
    if ctrl_key is None:
        return None
    return (int(ctrl_key), DEFAULT_CTRL_PORT if ctrl_port is None else int(ctrl_port))


def run_frames(params: Params, jobs: JobTable, wires_by_port: list[list[bytes]], *,
               simulator="icarus", fp_stages=None, quiet=True, root=None,
               quiet_cycles: int = 4000, ctrl_key=None, ctrl_port=None) -> dict:
    """Send each port's wire frames (bytes after the SFD, FCS included) into
    the switch, all ports at once, back to back; returns ``{"frames":
    [(port, wire bytes, start cycle, er)], "counters": {...}, "cycles"}``.
    With ``ctrl_key`` the switch has the control plane over UDP (at
    ``ctrl_port``, default ctrlproto's) and the counters include its."""
    ports = len(wires_by_port)
    ctrl = _ctrl(ctrl_key, ctrl_port)
    inputs = {"jobs": jobs.to_dict(), "quiet": quiet_cycles, "ctrl": ctrl is not None,
              "ports": [[w.hex() for w in ws] for ws in wires_by_port]}
    out = harness.run_with_io(inputs, simulator, lambda env: run_cocotb(
        params, env, simulator=simulator, fp_stages=fp_stages, ports=ports, quiet=quiet,
        root=root, ctrl=ctrl))
    out["frames"] = [(p, bytes.fromhex(h), t, er) for p, h, t, er in out["frames"]]
    return out


def stats_of(counters: dict, ports: int, cycles: int) -> dict[str, int]:
    """STATS.json of a run: ``netagg sim``'s counters, then the front end's."""
    stats = {name: int(counters[name]) for name in COUNTERS}
    stats["ignored"] = sum(int(counters[regmap.eth_counter_name(p, "ignored")])
                           for p in range(ports))
    for p in range(ports):
        for name in regmap.ETH_COUNTERS:
            key = regmap.eth_counter_name(p, name)
            stats[key] = int(counters[key])
    for name in CTRL_COUNTERS:
        if name in counters:
            stats[name] = int(counters[name])
    stats["cycles"] = int(cycles)
    return stats


def run_sim(params: Params, jobs: JobTable, in_path, out_path, stats_path=None,
            simulator: str = "icarus", fp_stages=None, ports: int = DEFAULT_PORTS,
            ctrl_key=None, ctrl_port=None) -> dict:
    """``netagg sim --frontend ethernet``: IN.pcap through the switch's
    port 0 to OUT.pcap (and STATS.json); returns the stats."""
    records = pcap.read(in_path)
    wires = [fr.with_fcs(r.data) for r in records]
    run = run_frames(params, jobs, [wires] + [[] for _ in range(ports - 1)],
                     simulator=simulator, fp_stages=fp_stages, ctrl_key=ctrl_key,
                     ctrl_port=ctrl_port)
    out = []
    t0 = records[0].ts_ns if records else 0
    first = min((t for _, _, t, _ in run["frames"]), default=0)
    for port, wire, t, er in run["frames"]:
        if er or not fr.fcs_ok(wire):
            raise SimError(f"port {port} sent a frame with a bad FCS or GMII er: {wire.hex()}")
        out.append(pcap.Record(wire[:-fr.FCS_BYTES], t0 + (t - first) * PERIOD_NS))
    pcap.write(out_path, out)
    stats = stats_of(run["counters"], ports, run["cycles"])
    if stats_path:
        with open(stats_path, "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=1)
            f.write("\n")
    print(f"netagg sim ({simulator}, ethernet): {summary(stats, len(records))}, "
          f"{stats['cycles']} cycles")
    return stats
