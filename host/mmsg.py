"""Batched UDP receive and send on Linux: ``recvmmsg(2)`` / ``sendmmsg(2)``
through :mod:`ctypes` (plain Python, no compiled code).

``netagg serve`` spends most of a message's time in the two system calls and
in building Python objects for each datagram's address; these batches take
up to ``batch`` datagrams per call and keep the address objects in a cache,
so that a saturated server pays one receive and one send call per batch.

:class:`BatchIO` is available where :func:`available` is true (Linux with a
C library that has both calls); elsewhere ``netagg serve`` uses one
``recvfrom`` / ``sendto`` per datagram, with the same behaviour.

Contract of :meth:`BatchIO.recv`: blocks until at least one datagram is
queued or the receive timeout passes, then returns the number ``k`` of
datagrams taken (0 on timeout or on a signal), in arrival order; datagram
``i < k`` is ``data[i]`` (bytes, 0 to 65507 of them) from :meth:`addr`
``(i)`` (an ``(ip, port)`` tuple, the same object for the same address).
:meth:`send` queues one datagram and sends the queue when it is full;
:meth:`flush` sends what is queued, in order. A datagram the kernel
refuses (a full buffer, an unreachable address) is skipped, as if lost on
the wire; the others are still sent.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import socket
import struct
import sys

SLOT = 65536                # bytes per datagram buffer (the largest UDP payload fits)
MSG_WAITFORONE = 0x10000


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


_SOCKADDR_IN = 16
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                for name in ("recvmmsg", "sendmmsg"):
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_int
                    fn.argtypes = ((ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                    ctypes.c_void_p) if name == "recvmmsg" else
                                   (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int))
                _LIBC = lib
            except (OSError, AttributeError):
                _LIBC = False
    return _LIBC


def available() -> bool:
    """Whether :class:`BatchIO` works here (Linux, recvmmsg and sendmmsg)."""
    return bool(_libc())


class _Ring:
    """``n`` message headers, each with its own buffer of SLOT bytes and its
    own IPv4 socket address, in memory that ctypes and Python both see
    (``lens``: the headers' ``msg_len`` words, ``iov_lens``: the buffers'
    lengths, ``names``: each address's first 8 bytes, as integers)."""

    def __init__(self, n: int):
        self.n = n
        self.buf = bytearray(n * SLOT)
        self.view = memoryview(self.buf)
        self.name_bytes = bytearray(n * _SOCKADDR_IN)
        self.iov = (_IoVec * n)()
        self.hdrs = (_MMsgHdr * n)()
        base = ctypes.addressof((ctypes.c_char * len(self.buf)).from_buffer(self.buf))
        nbase = ctypes.addressof((ctypes.c_char * len(self.name_bytes))
                                 .from_buffer(self.name_bytes))
        for i in range(n):
            self.iov[i].iov_base = base + i * SLOT
            self.iov[i].iov_len = SLOT
            h = self.hdrs[i].msg_hdr
            h.msg_name = nbase + i * _SOCKADDR_IN
            h.msg_namelen = _SOCKADDR_IN
            h.msg_iov = ctypes.addressof(self.iov[i])
            h.msg_iovlen = 1
        self.ptr = ctypes.addressof(self.hdrs)
        self.stride = ctypes.sizeof(_MMsgHdr)
        self.hdr_raw = memoryview(self.hdrs).cast("B")
        self.pristine = bytes(self.hdr_raw)
        lens = self.hdr_raw.cast("I")
        first, step = _MMsgHdr.msg_len.offset // 4, self.stride // 4
        self.len_index = [first + i * step for i in range(n)]
        self.lens = lens
        iov_words = memoryview(self.iov).cast("B").cast("Q")
        w = ctypes.sizeof(_IoVec) // 8
        self.iov_lens = iov_words
        self.iov_len_index = [_IoVec.iov_len.offset // 8 + i * w for i in range(n)]
        self.names = memoryview(self.name_bytes).cast("Q")


class BatchIO:
    """Batched receive and send on one bound IPv4 UDP socket.

    ``timeout``: seconds :meth:`recv` waits for a first datagram. The socket
    is put in blocking mode with that receive timeout (``SO_RCVTIMEO``).
    After :meth:`recv` returned ``k``, ``data[:k]`` holds the datagrams.
    """

    def __init__(self, sock: socket.socket, *, batch: int = 64, timeout: float = 0.05):
        lib = _libc()
        if not lib:
            raise OSError("recvmmsg/sendmmsg are not available on this platform")
        if sock.family != socket.AF_INET or sock.type != socket.SOCK_DGRAM:
            raise ValueError("BatchIO needs an IPv4 UDP socket")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        self.sock = sock
        self.fd = sock.fileno()
        sock.setblocking(True)
        usec = max(1, int(timeout * 1e6))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                        struct.pack("@ll", usec // 1000000, usec % 1000000))
        self._recvmmsg, self._sendmmsg = lib.recvmmsg, lib.sendmmsg
        self.rx = _Ring(batch)
        self.tx = _Ring(batch)
        self.data: list[bytes] = []
        self._addrs: dict[int, tuple[str, int]] = {}
        self._names: dict[tuple[str, int], int] = {}
        self._queued = 0
        self.refused = 0            # datagrams the kernel would not send
        self.send = self._make_send()

    # -- receive ---------------------------------------------------------

    def recv(self) -> int:
        rx = self.rx
        rx.hdr_raw[:] = rx.pristine                # namelen back to 16 on every header
        k = self._recvmmsg(self.fd, rx.ptr, rx.n, MSG_WAITFORONE, None)
        if k <= 0:              # timeout, a signal, or an error reported back (ICMP)
            return 0
        view, lens, idx = rx.view, rx.lens, rx.len_index
        self.data = [bytes(view[i * SLOT:i * SLOT + lens[idx[i]]]) for i in range(k)]
        return k

    def addr(self, i: int) -> tuple[str, int]:
        """The source (ip, port) of datagram ``i`` of the last :meth:`recv`."""
        key = self.rx.names[2 * i]
        a = self._addrs.get(key)
        if a is None:
            raw = bytes(self.rx.name_bytes[i * _SOCKADDR_IN:i * _SOCKADDR_IN + 8])
            a = (socket.inet_ntoa(raw[4:8]), int.from_bytes(raw[2:4], "big"))
            if len(self._addrs) > 65536:
                self._addrs.clear()
            self._addrs[key] = a
        return a

    # -- send ------------------------------------------------------------

    def _make_send(self):
        tx, names_get = self.tx, self._names.get
        view, names, iov_lens, iov_idx, n = tx.view, tx.names, tx.iov_lens, tx.iov_len_index, tx.n

        def send(data: bytes, dst: tuple[str, int]) -> None:
            """Queue ``data`` for ``dst``; sends the queue when it is full."""
            name = names_get(dst)
            if name is None:
                name = self._sockaddr(dst)
                if name is None:
                    self.refused += 1
                    return
            j = self._queued
            view[j * SLOT:j * SLOT + len(data)] = data
            names[2 * j] = name
            iov_lens[iov_idx[j]] = len(data)
            self._queued = j + 1
            if j + 1 == n:
                self.flush()
        return send

    def _sockaddr(self, dst):
        try:
            ip = socket.inet_aton(dst[0])
            port = int(dst[1])
            if not 0 <= port < 65536:
                return None
        except (OSError, TypeError, ValueError, IndexError):
            return None
        word = int.from_bytes(struct.pack("=H", socket.AF_INET) + port.to_bytes(2, "big") + ip,
                              sys.byteorder)
        if len(self._names) > 65536:
            self._names.clear()
        self._names[dst] = word
        return word

    def flush(self) -> None:
        """Send the queued datagrams, in order."""
        start, end = 0, self._queued
        tx = self.tx
        while start < end:
            sent = self._sendmmsg(self.fd, tx.ptr + start * tx.stride, end - start, 0)
            if sent > 0:
                start += sent
                continue
            if sent < 0 and ctypes.get_errno() == errno_mod.EINTR:
                continue
            self.refused += 1                      # this one is lost; send the rest
            start += 1
        self._queued = 0


__all__ = ["BatchIO", "available"]
