"""The UDP control plane (format: :mod:`netagg.ctrlproto`): the client behind
``netagg ctl`` (:class:`CtlClient`, :func:`ctl_main`) and the server side of
``netagg serve --ctrl-key`` (:class:`ControlServer`).

Plain Python.

``netagg serve``'s registers: the job table (``regmap.job_addr``; a write to
an entry's ``JOB_CTRL`` register applies the entry, a table that would not
be valid leaves that entry disabled), the core counters at
``regmap.COUNTER_BASE`` (``stall`` reads 0 on the model backend), and the
read-only INFO, CTRL and SERVE registers of :mod:`netagg.ctrlproto`. Other
addresses read 0 and ignore writes.
"""

from __future__ import annotations

import json
import os
import socket
import time

from netagg import ctrlproto as cp
from netagg import regmap
from netagg.jobs import JobTable, table_from_registers

ETH_PORTS = 2
"""Ports whose counters ``counters`` reads from an Ethernet switch."""


class CtlTimeout(TimeoutError):
    """No answer from the control plane (one line)."""


# -- the server side (netagg serve) -------------------------------------------

class ControlServer:
    """The control plane of a :class:`netagg.host.serve.Server`."""

    def __init__(self, server, key: int, listen: tuple[str, int | None]):
        self.server = server
        self.key = key
        self.counters = dict.fromkeys(cp.CTRL_COUNTERS, 0)
        host, port = listen
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind((host, cp.DEFAULT_CTRL_PORT if port is None else port))
        except OSError as e:
            self.sock.close()
            from netagg.host.serve import ServeError
            raise ServeError(f"cannot listen on {host}:{port or cp.DEFAULT_CTRL_PORT} "
                             f"(control plane): {e.strerror or e}") from None
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()
        self.regs: dict[int, int] = {}
        jobs = server.jobs
        for addr, value in regmap.job_writes(jobs):
            self.regs[addr] = value
        for j in range(server.params.jobs):
            self.regs.setdefault(regmap.job_addr(j, regmap.JOB_BASE_SLOT), 0)
            self.regs.setdefault(regmap.job_addr(j, regmap.JOB_NSLOTS), 0)
        self.info = cp.info_values(server.params, cp.FRONTEND_SERVE)

    def poll(self) -> None:
        """Answer every request waiting on the socket."""
        while True:
            try:
                data, addr = self.sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue
            self.handle(data, addr)

    def handle(self, data: bytes, addr) -> None:
        try:
            seq, accesses = cp.decode_request(data, self.key)
        except cp.CtrlError as e:
            self.counters[f"ctrl_{e.reason}"] += 1
            return
        out = []
        for a in accesses:
            if a.op == cp.OP_WRITE:
                self._write(a.addr, a.value)
            out.append(cp.Access(a.op, a.addr, self._read(a.addr)))
        if any(a.op == cp.OP_WRITE for a in accesses):
            self._apply()
        self.counters["ctrl_ok"] += 1
        try:
            self.sock.sendto(cp.encode_reply(seq, self.key, out), addr)
        except OSError:
            pass

    # -- registers --

    def _job_reg(self, addr: int):
        J = self.server.params.jobs
        if regmap.JOB_BASE <= addr < regmap.JOB_BASE + regmap.JOB_REGS * J:
            return divmod(addr - regmap.JOB_BASE, regmap.JOB_REGS)
        return None

    def _read(self, addr: int) -> int:
        jr = self._job_reg(addr)
        if jr is not None:
            return self.regs.get(addr, 0) if jr[1] < regmap.JOB_REGS - 1 else 0
        if regmap.COUNTER_BASE <= addr < regmap.COUNTER_BASE + len(regmap.CORE_COUNTERS):
            name = regmap.CORE_COUNTERS[addr - regmap.COUNTER_BASE]
            return int(self.server.backend.counters.get(name, 0)) & 0xFFFFFFFF
        for base, names, values in (
                (cp.CTRL_BASE, cp.CTRL_COUNTERS, self.counters),
                (cp.SERVE_BASE, cp.SERVE_COUNTERS, self.server.faults)):
            if base <= addr < base + len(names):
                return int(values[names[addr - base]]) & 0xFFFFFFFF
        if cp.INFO_BASE <= addr < cp.INFO_BASE + len(self.info):
            return self.info[addr - cp.INFO_BASE]
        return 0

    def _write(self, addr: int, value: int) -> None:
        jr = self._job_reg(addr)
        if jr is None or jr[1] == regmap.JOB_REGS - 1:
            return                              # read-only or unmapped
        _, r = jr
        width = {regmap.JOB_CTRL: 16, regmap.JOB_BASE_SLOT: regmap.JOB_BASE_BITS,
                 regmap.JOB_NSLOTS: regmap.JOB_NSLOTS_BITS}[r]
        self.regs[addr] = value & ((1 << width) - 1) & (
            0xFF01 if r == regmap.JOB_CTRL else 0xFFFFFFFF)

    def _apply(self) -> None:
        """Take the job table of the registers as they stand after a
        request (:func:`netagg.jobs.table_from_registers`, as the Ethernet
        front end's model does), so that a table whose entries trade ranges
        loads whatever the order of its writes."""
        table = table_from_registers(lambda a: self.regs.get(a, 0), self.server.params)
        if list(table) != [job for job in self.server.jobs if job.enabled]:
            self.server.set_jobs(table)

    def close(self) -> None:
        self.sock.close()


# -- the client (netagg ctl) ---------------------------------------------------

def parse_switch(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(cp.DEFAULT_CTRL_PORT)
    try:
        number = int(port)
        socket.inet_aton(host)
    except (ValueError, OSError):
        raise ValueError(f"--switch {text!r} is not IPV4ADDR[:PORT]") from None
    if not 0 < number < 65536:
        raise ValueError(f"--switch port {number} is not in 1..65535")
    return host, number


class CtlClient:
    """Register reads and writes on a switch's control plane. Each
    :meth:`transact` is one request per MAX_ACCESSES accesses, each resent
    (same seq) until its reply arrives, within ``timeout`` seconds in all."""

    ATTEMPTS = 4

    def __init__(self, switch: tuple[str, int], key: int, timeout: float = 1.0):
        if not timeout > 0:
            raise ValueError(f"--timeout must be positive, not {timeout}")
        self.switch, self.key, self.timeout = switch, key, timeout
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(switch)
        self._seq = int.from_bytes(os.urandom(2), "big")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def transact(self, accesses: list[cp.Access]) -> list[int]:
        """The value of every accessed register after its access."""
        values = []
        for at in range(0, len(accesses), cp.MAX_ACCESSES):
            values += self._one(accesses[at:at + cp.MAX_ACCESSES])
        return values

    def _one(self, accesses: list[cp.Access]) -> list[int]:
        self._seq = (self._seq + 1) & 0xFFFF
        request = cp.encode_request(self._seq, self.key, accesses)
        deadline = time.monotonic() + self.timeout
        for attempt in range(self.ATTEMPTS):
            try:
                self.sock.send(request)
            except OSError:
                pass
            until = time.monotonic() + self.timeout / self.ATTEMPTS
            if attempt == self.ATTEMPTS - 1:
                until = deadline
            while (left := until - time.monotonic()) > 0:
                self.sock.settimeout(left)
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    break
                except OSError:               # e.g. ICMP port unreachable
                    time.sleep(min(left, 0.01))
                    continue
                try:
                    seq, got = cp.decode_reply(data, self.key)
                except cp.CtrlError:
                    continue
                if seq == self._seq and [(a.op, a.addr) for a in got] == \
                        [(a.op, a.addr) for a in accesses]:
                    return [a.value for a in got]
        host, port = self.switch
        raise CtlTimeout(f"no answer from the control plane at {host}:{port} within "
                         f"{self.timeout:g} s ({self.ATTEMPTS} tries; a wrong key, a wrong "
                         "address or port, or the control plane is off)")

    def read(self, addrs: list[int]) -> list[int]:
        return self.transact([cp.read(a) for a in addrs])

    def params(self):
        """The switch's build parameters (its INFO registers)."""
        values = self.read([cp.INFO_BASE + i for i in range(len(cp.INFO_FIELDS))])
        return cp.params_from_info(values), values[cp.INFO_FIELDS.index("frontend")]

    def counters(self) -> dict[str, int]:
        _, frontend = self.params()
        names = [(n, regmap.COUNTER_BASE + i) for i, n in enumerate(regmap.CORE_COUNTERS)]
        names += [(n, cp.CTRL_BASE + i) for i, n in enumerate(cp.CTRL_COUNTERS)]
        if frontend == cp.FRONTEND_SERVE:
            names += [(n, cp.SERVE_BASE + i) for i, n in enumerate(cp.SERVE_COUNTERS)]
        if frontend == cp.FRONTEND_ETHERNET:
            # The Ethernet switch's ports' counters (a one-port build reads 0
            # for port 1).
            names += [(regmap.eth_counter_name(p, n), regmap.eth_counter_addr(p, n))
                      for p in range(ETH_PORTS) for n in regmap.ETH_COUNTERS]
        values = self.read([a for _, a in names])
        return {n: v for (n, _), v in zip(names, values, strict=True)}

    def load_jobs(self, path: str) -> JobTable:
        """Check JOBS.json against the switch's build, write it, read it back."""
        params, _ = self.params()
        table = JobTable.from_file(path, params)
        writes = regmap.job_writes(table)
        self.transact([cp.write(a, v) for a, v in writes])
        want = {}
        for a, v in writes:
            want[a] = v
        got = self.read(list(want))
        for (a, v), g in zip(want.items(), got, strict=True):
            if v != g:
                raise ValueError(f"register 0x{a:04x} reads back 0x{g:x}, wrote 0x{v:x} "
                                 "(the switch refused the job table)")
        return table


def _int(text: str, what: str, bits: int) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer (decimal or 0x hex)") from None
    if not 0 <= v < 1 << bits:
        raise ValueError(f"{what} {text} does not fit in {bits} bits")
    return v


def ctl_main(args) -> int:
    """``netagg ctl`` (arguments from :mod:`netagg.cli`)."""
    switch = parse_switch(args.switch)
    key = cp.parse_key(args.key)
    with CtlClient(switch, key, args.timeout) as c:
        if args.action == "load-jobs":
            table = c.load_jobs(args.jobs_file)
            jobs = [j for j in table if j.enabled]
            print(f"netagg ctl: loaded {len(jobs)} job(s) into {switch[0]}:{switch[1]}: " + (
                ", ".join(f"job {j.id} (W={j.workers}, slots {j.slot_base}..{j.slot_end - 1})"
                          for j in jobs) or "all disabled"))
        elif args.action == "counters":
            counters = c.counters()
            if args.json:
                print(json.dumps(counters, indent=1))
            else:
                width = max(len(n) for n in counters)
                for n, v in counters.items():
                    print(f"{n:<{width}}  {v}")
        elif args.action == "read":
            (v,) = c.read([_int(args.addr, "ADDR", 16)])
            print(f"0x{v:08x} {v}")
        elif args.action == "write":
            (v,) = c.transact([cp.write(_int(args.addr, "ADDR", 16),
                                        _int(args.value, "VALUE", 32))])
            print(f"0x{v:08x} {v}")
    return 0
