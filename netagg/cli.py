"""The ``netagg`` command line (``docs/cli.md``).

Contract: :func:`main` returns 0 on success, 2 on a usage error (argparse),
1 on any other failure, which it reports as one line ``netagg: error: ...``
on stderr, never a traceback for a user's mistake. ``model`` runs the golden
model here; ``generate``, ``sim`` and ``build`` import their back-ends lazily
(``netagg.hdl.top``, ``netagg.sim.harness``, ``netagg.boards.build``) and say
so in one line if one is not available.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from netagg import __version__
from netagg.params import (
    BF16_ACC_MODES,
    DEFAULT_PORT,
    DEFAULT_SWITCH_IP,
    DEFAULT_SWITCH_MAC,
    ParamError,
    Params,
)

PROG = "netagg"
SIMULATORS = ("icarus", "verilator")
FRONTENDS = ("stream", "ethernet")

_PARAM_OPTIONS = (
    # (option, Params field, type, metavar, help)
    ("--workers", "workers", int, "W_MAX", "most workers a job can have (1..255; default 8)"),
    ("--slots", "slots", int, "S", "slots in total, each with two copies (1..65536; default 256)"),
    ("--elements", "elements", int, "K",
     "elements a slot holds, the most a packet may carry (default 64)"),
    ("--lanes", "lanes", int, "L", "elements combined per clock cycle, divides K (default 8)"),
    ("--jobs", "jobs", int, "J", "job table entries (1..256; default 4)"),
    ("--dtypes", "dtypes", str, "LIST", "comma list of int32, fp32, bf16 (default all three)"),
    ("--ops", "ops", str, "LIST", "comma list of sum, min, max (default all three)"),
    ("--bf16-accumulate", "bf16_accumulate", str, "MODE",
     f"bf16 accumulation: {' or '.join(BF16_ACC_MODES)} (default fp32)"),
    ("--port", "port", int, "PORT", f"UDP port of netagg messages (default {DEFAULT_PORT})"),
    ("--switch-mac", "switch_mac", str, "MAC",
     f"the switch's MAC, source of RESULT frames (default {DEFAULT_SWITCH_MAC})"),
    ("--switch-ip", "switch_ip", str, "IP",
     f"the switch's IPv4 address, source of RESULT frames (default {DEFAULT_SWITCH_IP})"),
)


class CliError(Exception):
    """A failure reported as one line, exit status 1."""


def _params_parser() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    group = parent.add_argument_group("build-time parameters")
    for option, dest, typ, metavar, text in _PARAM_OPTIONS:
        group.add_argument(option, dest=f"p_{dest}", type=typ, metavar=metavar, help=text)
    group.add_argument("--fp-stages", type=int, metavar="N",
                       help="floating-point adder pipeline depth (default: the design's)")
    return parent


RAM_FORMS = ("auto", "ecp5", "memory")


def _ram_argument(p: argparse.ArgumentParser, where: str = "") -> None:
    p.add_argument("--acc-ram", choices=RAM_FORMS, default=None,
                   help="block RAM form" + where + ": ecp5 (DP16KD instances with their "
                        "output register, the model of the block in the same file: Yosys "
                        "maps them on the ECP5, simulators run the model; needs "
                        "2 x S x K/L <= 4096), memory (portable inferred RAM, any flow) "
                        "or auto (default: ecp5 when it fits the LFE5U-85F, else memory)")


def _io_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs-config", metavar="JOBS.json",
                   help='job table: {"jobs": [{"id", "workers", "slot_base", "slots"}, ...]} '
                        "(required unless --ctrl-key: then all jobs start disabled)")
    p.add_argument("--in", dest="in_path", required=True, metavar="IN.pcap",
                   help="input frames (classic pcap, Ethernet)")
    p.add_argument("--out", dest="out_path", required=True, metavar="OUT.pcap",
                   help="RESULT frames, in the order sent")
    p.add_argument("--stats", dest="stats_path", metavar="STATS.json",
                   help="write the counters as one JSON object")
    p.add_argument("--frontend", choices=FRONTENDS, default="stream",
                   help="stream: messages straight into the core (default); ethernet: "
                        "frames through the Ethernet front end into port 0 "
                        "(docs/ethernet.md)")
    p.add_argument("--ctrl-key", metavar="HEX",
                   help="with --frontend ethernet: 64-bit key of the switch's UDP control "
                        "plane (without it: no control plane)")
    p.add_argument("--ctrl-port", type=int, default=None, metavar="PORT",
                   help="UDP port of the control plane (default 42663)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False,
        description="netagg: open FPGA in-network aggregation core (All-Reduce offload).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    params = _params_parser()

    p = sub.add_parser("generate", parents=[params], allow_abbrev=False,
                       help="write the core as Verilog",
                       description="Write synthesisable Verilog-2005 of the core "
                                   "(top module netagg_core).")
    p.add_argument("-o", "--output", required=True, metavar="FILE.v", help="Verilog file to write")
    _ram_argument(p)

    p = sub.add_parser("sim", parents=[params], allow_abbrev=False,
                       help="run the generated RTL in a simulator on a pcap",
                       description="Run the generated RTL under a simulator: IN.pcap in, "
                                   "RESULT frames to OUT.pcap, counters to STATS.json.")
    _io_arguments(p)
    p.add_argument("--simulator", choices=SIMULATORS, default="icarus",
                   help="HDL simulator (default icarus)")
    _ram_argument(p, " (stream front end)")

    p = sub.add_parser("model", parents=[params], allow_abbrev=False,
                       help="run the golden model on a pcap",
                       description="Run the NumPy golden model: IN.pcap in, RESULT frames "
                                   "to OUT.pcap, counters to STATS.json.")
    _io_arguments(p)

    p = sub.add_parser("build", parents=[params], allow_abbrev=False,
                       help="build a bitstream for a board and report resources and Fmax",
                       description="Build the core for a board (or out of context) with "
                                   "Yosys and nextpnr and report its use and Fmax.")
    from netagg.boards.registry import NAMES as boards  # pure Python, no Amaranth
    p.add_argument("--board", required=True, choices=boards,
                   help="target board; ooc-ecp5 is the bare core out of context on ECP5")
    p.add_argument("--outdir", metavar="DIR", help="build directory (default build/<board>)")
    p.add_argument("--json", dest="json_path", metavar="REPORT.json",
                   help="also write the report as JSON")
    p.add_argument("--jobs-config", metavar="JOBS.json",
                   help="job table written into the core after reset (UART bridge boards; "
                        "without it the host loads jobs over the UART)")
    p.add_argument("--baud", type=int, default=115200,
                   help="UART bridge rate (default 115200)")
    p.add_argument("--ctrl-key", metavar="HEX",
                   help="Ethernet boards: 64-bit key of the UDP control plane (without it: "
                        "no control plane, jobs from --jobs-config)")
    p.add_argument("--ctrl-port", type=int, default=None, metavar="PORT",
                   help="UDP port of the control plane (default 42663)")
    p.add_argument("--require-timing", action="store_true",
                   help="exit 1 if any clock domain misses its constraint (default: "
                        "reported as met: no, exit 0)")
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="place and route up to N times until every clock meets its "
                        "constraint, nextpnr's default seed first, then --seed 2..N; a board "
                        "keeps the last attempt, ooc-ecp5 the fastest (default 1)")

    p = sub.add_parser("uart", parents=[params], allow_abbrev=False,
                       help="run a pcap through a board's UART bridge",
                       description="Aggregate the netagg messages of IN.pcap on a board "
                                   "running the UART bridge (build parameters: the board's).")
    p.add_argument("--device", required=True, metavar="TTY",
                   help="serial device of the board, e.g. /dev/ttyUSB0")
    p.add_argument("--baud", type=int, default=115200, help="UART rate (default 115200)")
    p.add_argument("--jobs-config", metavar="JOBS.json",
                   help="load this job table first (else the board's is used)")
    p.add_argument("--in", dest="in_path", required=True, metavar="IN.pcap",
                   help="input frames (classic pcap, Ethernet)")
    p.add_argument("--out", dest="out_path", metavar="OUT.pcap",
                   help="RESULT frames, addressed as `netagg model` addresses them")
    p.add_argument("--stats", dest="stats_path", metavar="STATS.json",
                   help="write the board's counters as one JSON object")
    p.add_argument("--window", type=int, default=1, help="messages in flight (default 1)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for each reply (default 5)")

    p = sub.add_parser("serve", parents=[params], allow_abbrev=False,
                       help="a netagg switch on a UDP socket (golden model or RTL)",
                       description="Serve netagg messages on a UDP socket: each datagram is "
                                   "one message, RESULTs go to each worker's most recent "
                                   "accepted address. Stops on SIGINT/SIGTERM and writes "
                                   "STATS.json.")
    p.add_argument("--jobs-config", metavar="JOBS.json",
                   help="job table (required unless --ctrl-key loads it at run time)")
    p.add_argument("--listen", metavar="ADDR:PORT",
                   help="UDP address to bind: an IPv4 address or a host name that resolves to one "
                        "(default 127.0.0.1:PORT, PORT from --port)")
    p.add_argument("--backend", choices=("model", "rtl"), default="model",
                   help="golden model (default) or the generated core in a simulator")
    p.add_argument("--simulator", choices=SIMULATORS, default="verilator",
                   help="simulator of --backend rtl (default verilator)")
    p.add_argument("--record", metavar="DIR", help="write DIR/in.pcap and DIR/out.pcap")
    p.add_argument("--stats", dest="stats_path", metavar="STATS.json",
                   help="counters written on stop (default DIR/STATS.json with --record)")
    p.add_argument("--loss", type=float, default=0.0, metavar="P",
                   help="drop each received datagram and each RESULT with probability P")
    p.add_argument("--dup", type=float, default=0.0, metavar="P",
                   help="hand each received datagram to the backend twice with probability P")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault injection (default 0)")
    p.add_argument("--ctrl-key", metavar="HEX",
                   help="64-bit key of the UDP control plane (without it: no control plane)")
    p.add_argument("--ctrl-port", type=int, default=None, metavar="PORT",
                   help="UDP port of the control plane (default 42663)")

    p = sub.add_parser("ctl", allow_abbrev=False,
                       help="the UDP control plane of a board or of netagg serve",
                       description="Read and write a switch's registers over its UDP control "
                                   "plane: load a job table, read the counters.")
    p.add_argument("--switch", required=True, metavar="IP[:PORT]",
                   help="the switch's control plane (default port 42663)")
    p.add_argument("--key", required=True, metavar="HEX", help="the 64-bit control-plane key")
    p.add_argument("--timeout", type=float, default=1.0, metavar="S",
                   help="seconds to wait for an answer, retries included (default 1)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("load-jobs", allow_abbrev=False,
                           help="check JOBS.json against the switch's build, load it, read back")
    a.add_argument("jobs_file", metavar="JOBS.json")
    a = actions.add_parser("counters", allow_abbrev=False, help="every core and front-end counter")
    a.add_argument("--json", action="store_true", help="one JSON object")
    a = actions.add_parser("read", allow_abbrev=False, help="read one register")
    a.add_argument("addr", metavar="ADDR", help="16-bit address (decimal or 0x hex)")
    a = actions.add_parser("write", allow_abbrev=False, help="write one register")
    a.add_argument("addr", metavar="ADDR", help="16-bit address (decimal or 0x hex)")
    a.add_argument("value", metavar="VALUE", help="32-bit value (decimal or 0x hex)")
    return parser


def params_from_args(args: argparse.Namespace, defaults: dict | None = None) -> Params:
    """The Params the options name (unset options take ``defaults``, else
    Params' defaults)."""
    given = {dest: getattr(args, f"p_{dest}") for _, dest, *_ in _PARAM_OPTIONS
             if getattr(args, f"p_{dest}") is not None}
    return Params(**{**(defaults or {}), **given})


def _backend(module: str, function: str, command: str):
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise CliError(f"'{command}' is not available in this installation "
                           f"({module} is missing)") from None
        raise CliError(f"'{command}' needs the Python module {e.name!r}, "
                       "which is not installed") from None
    fn = getattr(mod, function, None)
    if fn is None:
        raise CliError(f"'{command}' is not available in this installation "
                       f"({module}.{function} is missing)")
    return fn


def _load_jobs(args, params):
    from netagg.jobs import JobTable
    if args.jobs_config is None:
        if getattr(args, "ctrl_key", None) is None:
            raise CliError("--jobs-config is required (or --ctrl-key with --frontend ethernet, "
                           "to load jobs over the control plane)")
        return JobTable([], params)
    return JobTable.from_file(args.jobs_config, params)


def _ctrl_args(args, params, *, frontend=True):
    """(key or None, port) of --ctrl-key / --ctrl-port."""
    from netagg.ctrlproto import DEFAULT_CTRL_PORT, parse_key
    port = DEFAULT_CTRL_PORT if args.ctrl_port is None else args.ctrl_port
    if args.ctrl_key is None:
        if args.ctrl_port is not None:
            raise CliError("--ctrl-port needs --ctrl-key")
        return None, port
    if frontend and args.frontend != "ethernet":
        raise CliError("--ctrl-key needs --frontend ethernet (the stream front end has no "
                       "control plane)")
    try:
        key = parse_key(args.ctrl_key)
    except ValueError as e:
        raise CliError(f"--ctrl-key: {e}") from None
    if not 0 < port < 65536 or port == params.port:
        raise CliError(f"--ctrl-port {port} must be a UDP port (1..65535) other than the "
                       f"netagg port {params.port}")
    return key, port


def cmd_generate(args, params) -> int:
    write_verilog = _backend("netagg.hdl.top", "write_verilog", "generate")
    form = {} if args.acc_ram is None else {"acc_ram": args.acc_ram}
    write_verilog(params, args.output, fp_stages=args.fp_stages, **form)
    print(f"netagg: wrote {args.output}")
    return 0


def cmd_sim(args, params) -> int:
    from netagg import pcap
    key, port = _ctrl_args(args, params)
    jobs = _load_jobs(args, params)
    pcap.read(args.in_path)               # a clear error before starting a simulator
    if args.frontend == "ethernet":
        if args.acc_ram is not None:
            raise CliError("--acc-ram applies to the stream front end (the Ethernet top "
                           "builds its core in the portable form)")
        run_sim = _backend("netagg.sim.eth_harness", "run_sim", "sim --frontend ethernet")
        run_sim(params, jobs, args.in_path, args.out_path, args.stats_path, args.simulator,
                fp_stages=args.fp_stages, ctrl_key=key, ctrl_port=port)
        return 0
    run_sim = _backend("netagg.sim.harness", "run_sim", "sim")
    form = {} if args.acc_ram is None else {"acc_ram": args.acc_ram}
    run_sim(params, jobs, args.in_path, args.out_path, args.stats_path, args.simulator,
            fp_stages=args.fp_stages, **form)
    return 0


def _write_stats(path, stats: dict) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({k: int(v) for k, v in stats.items()}, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_model(args, params) -> int:
    from netagg import pcap
    from netagg.sim.frame_model import run_model_seq
    _ctrl_args(args, params)
    jobs = _load_jobs(args, params)
    records = pcap.read(args.in_path)
    if args.frontend == "ethernet":
        return _model_ethernet(args, params, jobs, records)
    out, stats = run_model_seq(params, jobs, records)
    pcap.write(args.out_path, [pcap.Record(frame, records[seq].ts_ns) for seq, frame in out])
    if args.stats_path:
        _write_stats(args.stats_path, stats)
    drops = sum(v for k, v in stats.items() if k.startswith("drop_"))
    print(f"netagg model: {len(records)} frames in ({stats['ignored']} ignored), "
          f"{stats['rx']} messages, {stats['results']} rounds completed, "
          f"{stats['tx']} RESULT frames out, {stats['retransmit']} retransmitted, "
          f"{drops} dropped")
    return 0


def _model_ethernet(args, params, jobs, records) -> int:
    from netagg import pcap
    from netagg.sim.eth_model import run_frontend_model, summary
    key, port = _ctrl_args(args, params)
    out, stats = run_frontend_model(params, jobs, records, ctrl_key=key, ctrl_port=port)
    pcap.write(args.out_path, [pcap.Record(frame, records[seq].ts_ns)
                               for seq, _port, frame in out])
    if args.stats_path:
        _write_stats(args.stats_path, stats)
    print(f"netagg model (ethernet): {summary(stats, len(records))}")
    return 0


def _flatten(report, prefix=""):
    if isinstance(report, dict):
        for key, value in report.items():
            yield from _flatten(value, f"{prefix}{key}" if not prefix else f"{prefix}.{key}")
    elif isinstance(report, list | tuple) and any(isinstance(v, dict | list) for v in report):
        for i, value in enumerate(report):
            yield from _flatten(value, f"{prefix}[{i}]")
    else:
        if isinstance(report, list | tuple):
            report = ",".join(str(v) for v in report)
        elif isinstance(report, float):
            report = f"{report:.2f}"
        yield prefix, str(report)


def format_report(report: dict) -> str:
    """A build report as a two-column table."""
    rows = list(_flatten(report))
    if not rows:
        return "(empty report)"
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _board(name: str):
    from netagg.boards.registry import get
    return get(name)


def cmd_build(args, params) -> int:
    build = _backend("netagg.boards.build", "build", "build")
    defaults = _board(args.board).default_params()
    if defaults:                  # the board's own defaults where no option is given
        params = params_from_args(args, defaults)
    outdir = args.outdir or os.path.join("build", args.board)
    key, port = _ctrl_args(args, params, frontend=False)
    kw = {}
    if key is not None:
        if _board(args.board).kind != "ethernet":
            raise CliError(f"--ctrl-key: the {args.board} build has no UDP control plane "
                           "(Ethernet boards only)")
        kw = {"ctrl_key": key, "ctrl_port": port}
    if args.seeds < 1:
        raise CliError(f"--seeds must be at least 1, not {args.seeds}")
    seeds = {}
    if args.seeds != 1:
        seeds = {"seeds": args.seeds}
    report = build(params, args.board, outdir, fp_stages=args.fp_stages,
                   ooc=_board(args.board).ooc,
                   jobs=_load_jobs(args, params) if args.jobs_config else None,
                   baud=args.baud, **kw, **seeds)
    if not isinstance(report, dict):
        raise CliError("the build returned no report")
    print(format_report(report))
    if args.json_path:
        try:
            with open(args.json_path, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2, default=str)
                f.write("\n")
        except OSError as e:
            raise CliError(f"cannot write {args.json_path}: {e.strerror or e}") from None
    if args.require_timing:
        from netagg.boards.report import timing_misses
        missed = timing_misses(report)
        if missed:
            raise CliError("timing not met: " + ", ".join(missed))
        if not report.get("clocks"):
            raise CliError("timing not checked: the report lists no clock")
    return 0


def cmd_uart(args, params) -> int:
    from netagg.host.uart import run_pcap
    if args.window < 1 or args.timeout <= 0:
        raise CliError("--window must be at least 1 and --timeout positive")
    jobs = _load_jobs(args, params) if args.jobs_config else None
    print(run_pcap(params, args.device, args.in_path, baud=args.baud, jobs=jobs,
                   out_path=args.out_path, stats_path=args.stats_path, window=args.window,
                   timeout=args.timeout))
    return 0


def cmd_serve(args, params) -> int:
    from netagg.host.serve import parse_listen, serve_main
    jobs = _load_jobs(args, params) if args.jobs_config else None
    listen = parse_listen(args.listen or "127.0.0.1", params.port)
    key = None
    if args.ctrl_key is not None:
        from netagg.ctrlproto import parse_key
        key = parse_key(args.ctrl_key)
    elif args.ctrl_port is not None:
        raise CliError("--ctrl-port needs --ctrl-key")
    stats = args.stats_path
    if stats is None and args.record:
        stats = os.path.join(args.record, "STATS.json")
    return serve_main(params, jobs, listen=listen, backend=args.backend,
                      simulator=args.simulator, record=args.record, stats_path=stats,
                      loss=args.loss, dup=args.dup, seed=args.seed, fp_stages=args.fp_stages,
                      ctrl_key=key, ctrl_port=args.ctrl_port)


def cmd_ctl(args, params) -> int:
    from netagg.host.ctl import ctl_main
    return ctl_main(args)


COMMANDS = {"generate": cmd_generate, "sim": cmd_sim, "model": cmd_model, "build": cmd_build,
            "uart": cmd_uart, "serve": cmd_serve, "ctl": cmd_ctl}


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command in ("sim", "model") and args.jobs_config is None \
                and args.ctrl_key is None:
            parser.error(f"{args.command}: the following arguments are required: "
                         "--jobs-config (or --ctrl-key with --frontend ethernet)")
    except SystemExit as e:                 # usage error (2) or --help/--version (0)
        return e.code if isinstance(e.code, int) else 2
    from netagg.pcap import PcapError
    backend = args.command in ("generate", "sim", "build", "uart", "serve", "ctl")
    user_errors = (ParamError, PcapError, CliError) + ((ValueError,) if backend else ())
    if args.command in ("uart", "ctl"):
        user_errors += (TimeoutError,)
    try:
        params = params_from_args(args) if args.command != "ctl" else None
        return COMMANDS[args.command](args, params)
    except user_errors as e:
        message = _one_line(e)
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        message = f"{where}{e.strerror or _one_line(e)}"
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1
