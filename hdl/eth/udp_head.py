"""The Ethernet II + IPv4 + UDP header of a frame the switch sends, as byte
values (``netagg.frames``' layout: no IPv4 options, DF set, TTL
``frames.TTL``, UDP checksum 0)."""

from __future__ import annotations

from amaranth.hdl import C, Module, Signal, Value

from netagg import frames
from netagg.hdl.eth.checksum import be_bytes, oc_sum

__all__ = ["HEAD_BYTES", "udp_frame_head"]

HEAD_BYTES = frames.ETH_HEADER + frames.IPV4_HEADER + frames.UDP_HEADER
"""Bytes of :func:`udp_frame_head` (42)."""


def udp_frame_head(m: Module, *, src_mac: int, src_ip: int, src_port: int,
                   dst_mac, dst_ip, dst_port, payload_len) -> list[Value]:
    """The 42 header bytes of a UDP datagram of ``payload_len`` bytes from the
    switch (``src_*``: build constants) to ``dst_*`` (signals), first byte
    first. The IPv4 total length and header checksum are combinational in
    ``payload_len`` and ``dst_ip`` (a ones'-complement tree; drivers added
    to ``m.d.comb``)."""
    udp_len, total, ip_csum = Signal(16), Signal(16), Signal(16)
    m.d.comb += [udp_len.eq(frames.UDP_HEADER + payload_len),
                 total.eq(frames.IPV4_HEADER + frames.UDP_HEADER + payload_len)]
    dst_ip = Value.cast(dst_ip)
    m.d.comb += ip_csum.eq(~oc_sum([
        C(0x4500, 16), total, C(0, 16), C(0x4000, 16),
        C((frames.TTL << 8) | frames.IPPROTO_UDP, 16),
        C(src_ip >> 16, 16), C(src_ip & 0xFFFF, 16), dst_ip[16:], dst_ip[:16]]))

    def c(v, nbytes):
        return be_bytes(C(v, 8 * nbytes), nbytes)

    head = (be_bytes(dst_mac, 6) + c(src_mac, 6) + c(frames.ETHERTYPE_IPV4, 2)
            + c(0x45, 1) + c(0, 1) + be_bytes(total, 2) + c(0, 2) + c(0x4000, 2)
            + c(frames.TTL, 1) + c(frames.IPPROTO_UDP, 1) + be_bytes(ip_csum, 2)
            + c(src_ip, 4) + be_bytes(dst_ip, 4)
            + c(src_port, 2) + be_bytes(dst_port, 2) + be_bytes(udp_len, 2) + c(0, 2))
    assert len(head) == HEAD_BYTES
    return head
