"""The frame-level model of the Ethernet front end (docs/ethernet.md): wire
frames in on P ports, frames out on P ports, per-port counters, around the
message-level golden model :class:`netagg.sim.message_model.Switch`.

Pure Python and NumPy.

Contract of :meth:`FrontEnd.receive` (one frame as the MAC sees it after
the SFD: the bytes with the FCS, on a port):

* ``rx`` counts every frame. A frame shorter than 64 bytes is a runt
  (``drop_runt``), one longer than ``max_frame`` (1518) is ``drop_too_long``,
  one whose last 4 bytes are not the FCS of the others (or that the PHY
  flagged with a receive error) is ``drop_fcs``, and one that found the
  port's receive buffer full (``overflow=True``, the bench's knowledge of
  timing) is ``drop_overflow``, checked in that order; a dropped frame
  changes nothing else.
* A delivered frame (FCS removed) is classified as
  :func:`netagg.frames.parse` says (``netagg model``'s classification): a
  netagg message goes to the core; else an ARP request for the switch's
  IPv4 address is answered on the same port (``arp_replies``); else an ICMP
  echo request to the switch's IPv4 address is answered on the same port
  (``icmp_replies``); anything else counts as ``ignored`` (and as the
  port's ``ignored``).
* An accepted CONTRIB (verdict ACCEPT or RETRANSMIT) records the sender's
  endpoint (MAC, IPv4, UDP source port) and the ingress port for its (job,
  worker); every RESULT it causes goes, in the core's send order, to the
  recorded endpoint of its destination worker on the recorded port, framed
  by :func:`netagg.frames.build_frame` from the switch's endpoint.
* Frames sent are padded to 60 bytes, without FCS; ``tx`` counts them.
* With a control-plane key (``ctrl_key``), a delivered frame that is not a
  netagg message and carries a UDP datagram to the switch's IPv4 address at
  ``ctrl_port`` (:func:`netagg.frames.parse`'s checks) is a control request
  (:mod:`netagg.ctrlproto`): malformed or with the wrong key, it counts
  ``ctrl_malformed`` or ``ctrl_bad_key`` and changes nothing; else its
  accesses are made in order on the registers of
  :class:`netagg.hdl.eth.switch.EthernetSwitch` (:meth:`FrontEnd.read_reg`,
  :meth:`FrontEnd.write_reg`: job table entries stored as written, core and
  port counters as of every earlier frame, INFO, CTRL, SERVE reading 0),
  ``ctrl_ok`` counts it and the reply frame goes out on the same port. The
  job table the core uses is the registers' after the request
  (:meth:`FrontEnd.apply_jobs`).
"""

from __future__ import annotations

from collections.abc import Iterable

from netagg import ctrlproto as cp
from netagg import frames as framing
from netagg import regmap, wire
from netagg.jobs import JobTable, table_from_registers
from netagg.params import Params
from netagg.pcap import Record
from netagg.regmap import ETH_COUNTERS, eth_counter_name
from netagg.sim.frame_model import switch_endpoint
from netagg.sim.message_model import Switch
from netagg.wire import COUNTERS, Verdict

DEFAULT_PORTS = 2


class FrontEnd:
    """The switch with its Ethernet front end: ``ports`` MACs, one core."""

    def __init__(self, params: Params, jobs: JobTable, *, ports: int = DEFAULT_PORTS,
                 max_frame: int = framing.MAX_WIRE_FRAME, ctrl_key: int | None = None,
                 ctrl_port: int = cp.DEFAULT_CTRL_PORT):
        if ports < 1:
            raise ValueError(f"a front end needs at least one port, not {ports}")
        if ctrl_key is not None and not 0 <= ctrl_key < 1 << 64:
            raise ValueError(f"the control-plane key must be a 64-bit integer, not {ctrl_key}")
        if ctrl_key is not None and (not 0 < ctrl_port < 1 << 16 or ctrl_port == params.port):
            raise ValueError(f"the control port must be a UDP port other than the netagg "
                             f"port {params.port}, not {ctrl_port}")
        self.ctrl_key, self.ctrl_port = ctrl_key, ctrl_port
        self.ctrl_counters = dict.fromkeys(cp.CTRL_COUNTERS, 0)
        self.info = cp.info_values(params, cp.FRONTEND_ETHERNET)
        self.regs: dict[int, int] = {}
        for addr, value in regmap.job_writes(jobs):
            self.regs[addr] = value
        self.params = params
        self.ports = ports
        self.max_frame = max_frame
        self.switch = Switch(params, jobs)
        self.src = switch_endpoint(params)
        self.mac = params.switch_mac_bytes
        self.ip = params.switch_ip_bytes
        self.learned: dict[tuple[int, int], tuple[framing.Endpoint, int]] = {}
        self.counters = [dict.fromkeys(ETH_COUNTERS, 0) for _ in range(ports)]
        self.ignored = 0

    def _drop_reason(self, wire: bytes, overflow: bool, rx_error: bool) -> str | None:
        if len(wire) < framing.MIN_WIRE_FRAME:
            return "drop_runt"
        if len(wire) > self.max_frame:
            return "drop_too_long"
        if rx_error or not framing.fcs_ok(wire):
            return "drop_fcs"
        if overflow:
            return "drop_overflow"
        return None

    def receive(self, port: int, wire: bytes, *, overflow: bool = False,
                rx_error: bool = False) -> list[tuple[int, bytes]]:
        """One frame (with its FCS) in on ``port``; returns the frames sent
        because of it, ``(port, frame without FCS)`` in send order."""
        if not 0 <= port < self.ports:
            raise ValueError(f"no port {port} (the front end has {self.ports})")
        c = self.counters[port]
        c["rx"] += 1
        reason = self._drop_reason(bytes(wire), overflow, rx_error)
        if reason is not None:
            c[reason] += 1
            return []
        frame = bytes(wire)[:-framing.FCS_BYTES]
        out = self._deliver(port, frame)
        for p, _ in out:
            self.counters[p]["tx"] += 1
        return out

    def _deliver(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        d = framing.parse(frame, self.params.port)
        if d is not None:
            return self._message(port, d)
        arp = framing.parse_arp_request(frame)
        if arp is not None and arp.tpa == self.ip:
            self.counters[port]["arp_replies"] += 1
            return [(port, framing.build_arp_reply(arp, self.mac, self.ip))]
        if self.ctrl_key is not None:
            c = framing.parse(frame, self.ctrl_port)
            if c is not None and c.dst.ip == self.ip:
                return self._control(port, c)
        echo = framing.parse_echo_request(frame)
        if echo is not None and echo.dst_ip == self.ip:
            self.counters[port]["icmp_replies"] += 1
            return [(port, framing.build_echo_reply(echo, self.mac, self.ip))]
        self.ignored += 1
        self.counters[port]["ignored"] += 1
        return []

    def _message(self, port: int, d: framing.Datagram) -> list[tuple[int, bytes]]:
        p = d.payload
        outcome = self.switch.receive(p)
        if Verdict(outcome.verdict).accepted:
            self.learned[wire.job_worker(p)] = (d.src, port)
        out = []
        for r in outcome.results:
            dst, out_port = self.learned[(r.header.job, r.header.worker)]
            out.append((out_port, framing.build_frame(r.pack(), self.src, dst)))
        return out

    # -- the control plane ---------------------------------------------

    def _control(self, port: int, d: framing.Datagram) -> list[tuple[int, bytes]]:
        try:
            seq, accesses = cp.decode_request(d.payload, self.ctrl_key)
        except cp.CtrlError as e:
            self.ctrl_counters[f"ctrl_{e.reason}"] += 1
            return []
        out = []
        for a in accesses:
            if a.op == cp.OP_WRITE:
                self.write_reg(a.addr, a.value)
            out.append(cp.Access(a.op, a.addr, self.read_reg(a.addr)))
        self.apply_jobs()
        self.ctrl_counters["ctrl_ok"] += 1
        src = framing.Endpoint(self.mac, self.ip, self.ctrl_port)
        return [(port, framing.build_frame(cp.encode_reply(seq, self.ctrl_key, out), src,
                                           d.src))]

    def _job_reg(self, addr: int) -> tuple[int, int] | None:
        if regmap.JOB_BASE <= addr < regmap.JOB_BASE + regmap.JOB_REGS * self.params.jobs:
            return divmod(addr - regmap.JOB_BASE, regmap.JOB_REGS)
        return None

    def read_reg(self, addr: int) -> int:
        """The register at ``addr`` as the switch's register port reads it
        (the core's ``stall`` cycle counter reads 0 here)."""
        jr = self._job_reg(addr)
        if jr is not None:
            return self.regs.get(addr, 0) if jr[1] != regmap.JOB_REGS - 1 else 0
        at = addr - regmap.COUNTER_BASE
        if 0 <= at < len(regmap.CORE_COUNTERS):
            name = regmap.CORE_COUNTERS[at]
            return int(self.switch.counters.get(name, 0)) & 0xFFFFFFFF
        at = addr - regmap.ETH_BASE
        if 0 <= at < regmap.ETH_PORT_STRIDE * self.ports and \
                at % regmap.ETH_PORT_STRIDE < len(ETH_COUNTERS):
            port, i = divmod(at, regmap.ETH_PORT_STRIDE)
            return self.counters[port][ETH_COUNTERS[i]] & 0xFFFFFFFF
        if self.ctrl_key is not None:
            if cp.INFO_BASE <= addr < cp.INFO_BASE + len(self.info):
                return self.info[addr - cp.INFO_BASE]
            if cp.CTRL_BASE <= addr < cp.CTRL_BASE + len(cp.CTRL_COUNTERS):
                return self.ctrl_counters[cp.CTRL_COUNTERS[addr - cp.CTRL_BASE]] & 0xFFFFFFFF
        return 0

    def write_reg(self, addr: int, value: int) -> None:
        """A write through the register port: job registers store the bits
        the hardware keeps; every other address ignores it. The core uses
        the new table from :meth:`apply_jobs`."""
        jr = self._job_reg(addr)
        if jr is None or jr[1] == regmap.JOB_REGS - 1:
            return
        mask = {regmap.JOB_CTRL: ((1 << regmap.JOB_WORKERS_BITS) - 1) << regmap.JOB_WORKERS_SHIFT
                | 1 << regmap.JOB_ENABLE_BIT,
                regmap.JOB_BASE_SLOT: (1 << regmap.JOB_BASE_BITS) - 1,
                regmap.JOB_NSLOTS: (1 << regmap.JOB_NSLOTS_BITS) - 1}[jr[1]]
        self.regs[addr] = value & mask

    def apply_jobs(self) -> None:
        """The core takes the job table of the registers: every enabled
        entry. The hardware uses an entry as stored; the model can only run
        a valid table (:class:`netagg.jobs.JobTable`), so an entry that would
        make it invalid (ranges outside S or overlapping, no workers) is
        left out here, in job order."""
        table = table_from_registers(lambda a: self.regs.get(a, 0), self.params)
        entries = list(table)
        if entries != [job for job in self.switch.jobs if job.enabled]:
            self.switch.set_jobs(table)

    def stats(self) -> dict[str, int]:
        """Every counter of protocol.md, ``ignored``, each port's counters
        as ``eth<p>_<name>`` and, with a control plane, ctrlproto's
        CTRL_COUNTERS."""
        stats = {name: int(self.switch.counters[name]) for name in COUNTERS}
        stats["ignored"] = self.ignored
        for port, c in enumerate(self.counters):
            for name in ETH_COUNTERS:
                stats[eth_counter_name(port, name)] = c[name]
        if self.ctrl_key is not None:
            stats.update(self.ctrl_counters)
        return stats


def summary(stats: dict, frames_in: int) -> str:
    """The one-line summary of an Ethernet front-end run (``netagg model`` and
    ``netagg sim --frontend ethernet``) from its STATS.json counters."""
    drops = sum(v for k, v in stats.items() if k.startswith("drop_"))
    eth_drops = sum(v for k, v in stats.items() if k.startswith("eth") and "_drop_" in k)
    replies = sum(v for k, v in stats.items() if k.endswith(("_arp_replies", "_icmp_replies")))
    return (f"{frames_in} frames in ({eth_drops} dropped by the MAC, {stats['ignored']} "
            f"ignored, {replies} ARP/ICMP replies), {stats['rx']} messages, "
            f"{stats['results']} rounds completed, {stats['tx']} RESULT frames out, "
            f"{stats['retransmit']} retransmitted, {drops} dropped")


def wire_frame(frame: bytes) -> bytes:
    """An IN.pcap frame as ``netagg sim --frontend ethernet`` sends it: padded
    with zeros to 60 bytes, FCS appended."""
    return framing.with_fcs(frame)


def run_frontend_model(params: Params, jobs: JobTable, frames: Iterable[bytes | Record], *,
                       ports: int = DEFAULT_PORTS, ctrl_key: int | None = None,
                       ctrl_port: int = cp.DEFAULT_CTRL_PORT
                       ) -> tuple[list[tuple[int, int, bytes]], dict[str, int]]:
    """``netagg model --frontend ethernet``: every frame (padded, FCS added)
    into port 0 in order; returns the frames sent as ``(seq, port, frame)``
    (``seq`` the index of the input frame that caused it) in send order,
    and the stats (:meth:`FrontEnd.stats`)."""
    fe = FrontEnd(params, jobs, ports=ports, ctrl_key=ctrl_key, ctrl_port=ctrl_port)
    out = []
    for seq, frame in enumerate(frames):
        if isinstance(frame, Record):
            frame = frame.data
        out.extend((seq, port, f) for port, f in fe.receive(0, wire_frame(frame)))
    return out, fe.stats()
