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
"""

from __future__ import annotations

from collections.abc import Iterable

from netagg import frames as framing
from netagg import wire
from netagg.jobs import JobTable
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
                 max_frame: int = framing.MAX_WIRE_FRAME):
        if ports < 1:
            raise ValueError(f"a front end needs at least one port, not {ports}")
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

    def stats(self) -> dict[str, int]:
        """Every counter of protocol.md, ``ignored``, and each port's
        counters as ``eth<p>_<name>``."""
        stats = {name: int(self.switch.counters[name]) for name in COUNTERS}
        stats["ignored"] = self.ignored
        for port, c in enumerate(self.counters):
            for name in ETH_COUNTERS:
                stats[eth_counter_name(port, name)] = c[name]
        return stats


def wire_frame(frame: bytes) -> bytes:
    """An IN.pcap frame as ``netagg sim --frontend ethernet`` sends it: padded
    with zeros to 60 bytes, FCS appended."""
    return framing.with_fcs(frame)


def run_frontend_model(params: Params, jobs: JobTable, frames: Iterable[bytes | Record], *,
                       ports: int = DEFAULT_PORTS
                       ) -> tuple[list[tuple[int, int, bytes]], dict[str, int]]:
    """``netagg model --frontend ethernet``: every frame (padded, FCS added)
    into port 0 in order; returns the frames sent as ``(seq, port, frame)``
    (``seq`` the index of the input frame that caused it) in send order,
    and the stats (:meth:`FrontEnd.stats`)."""
    fe = FrontEnd(params, jobs, ports=ports)
    out = []
    for seq, frame in enumerate(frames):
        if isinstance(frame, Record):
            frame = frame.data
        out.extend((seq, port, f) for port, f in fe.receive(0, wire_frame(frame)))
    return out, fe.stats()
