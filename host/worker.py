"""The worker library: all-reduce NumPy arrays through a netagg switch over
UDP (``docs/host.md``; contract ``host.md`` of the specification).

Pure Python and NumPy (``ml_dtypes`` only if a bfloat16 array is passed).

Algorithm (SwitchML's worker): the flattened array is cut into chunks of K
elements (the last one may be shorter); chunk ``c`` carries ``offset`` =
c*K and goes to slot ``c mod n`` of the job with that slot's next ``ver``.
At most n chunks are in flight, one per slot; a slot sends its next chunk
as soon as its current chunk's RESULT arrives. A RESULT is matched by
(job, slot, ver, offset, worker) (and its count and length); every other
datagram is ignored. A chunk without a RESULT after ``timeout`` seconds is
sent again unchanged, the timeout doubling on each resend up to 16 times
``timeout``; after ``retries`` resends of one chunk :class:`AllReduceTimeout`
is raised. Every slot's ``ver`` alternates and persists across calls (after
a timeout, the ver of a chunk that was sent counts as used).

Messages are laid out once per call in one NumPy buffer (headers built
vectorised); sending a chunk hands a slice of it to the Worker's sending
thread (in order, ``MSG_DONTWAIT``), receiving a RESULT is one
``recv_into``, one dict look-up of its 14-byte key among the chunks in
flight and a copy of its payload into the output buffer.
"""

from __future__ import annotations

import queue
import select
import signal
import socket
import struct
import threading
import time
from collections.abc import Mapping

import numpy as np

from netagg.wire import HEADER_BYTES, STATUS_NAN, STATUS_OVERFLOW, VERSION, DType, MsgType, Op

_HEADER = struct.Struct(">BBBBHHIHH")
_HEADER_DTYPE = np.dtype([("b0", "u1"), ("ver", "u1"), ("job", "u1"), ("dt_op", "u1"),
                          ("slot", ">u2"), ("worker", ">u2"), ("offset", ">u4"),
                          ("count", ">u2"), ("status", ">u2")])
assert _HEADER_DTYPE.itemsize == HEADER_BYTES
_CONTRIB0 = (VERSION << 4) | MsgType.CONTRIB
_RESULT0 = (VERSION << 4) | MsgType.RESULT
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
MAX_BACKOFF = 16
"""The retransmission timeout doubles up to this many times ``timeout``."""
STATS = ("chunks", "resends", "results", "ignored", "nan", "overflow")


class AllReduceTimeout(TimeoutError):
    """A chunk got no RESULT after ``retries`` resends. Attributes ``job``,
    ``rank``, ``slot``, ``chunk``; the message is one line."""

    def __init__(self, message: str, *, job: int, rank: int, slot: int, chunk: int):
        super().__init__(message)
        self.job, self.rank, self.slot, self.chunk = job, rank, slot, chunk


class JobConfigError(RuntimeError):
    """A RESULT's contributor count differs from the Worker's ``workers``:
    the switch's job table and the workers disagree."""


class Stats(Mapping):
    """Counters of a Worker (or of one call): ``chunks`` (CONTRIBs sent,
    first sends), ``resends``, ``results`` (matched RESULTs), ``ignored``
    (any other datagram), ``nan`` and ``overflow`` (chunks whose RESULT status
    had that bit). Attributes, or a read-only mapping (``stats["name"]``,
    ``dict(stats)``, :meth:`to_dict`)."""

    __slots__ = STATS

    def __init__(self, **values):
        for name in STATS:
            setattr(self, name, int(values.get(name, 0)))

    def __getitem__(self, name: str) -> int:
        if name not in STATS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(STATS)

    def __len__(self) -> int:
        return len(STATS)

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in STATS}

    def add(self, other: Stats) -> None:
        for name in STATS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def __repr__(self):
        return "Stats(" + ", ".join(f"{k}={v}" for k, v in self.to_dict().items()) + ")"


def _bf16_type():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def _wire_dtype(x: np.ndarray, dtype: str | None) -> tuple[DType, np.dtype]:
    """The wire dtype of an array and the unsigned view dtype of its bits."""
    if dtype is not None:
        names = {"fp32": DType.FP32, "int32": DType.INT32, "bf16": DType.BF16}
        if dtype not in names:
            raise ValueError(f"dtype must be fp32, int32 or bf16, not {dtype!r}")
        want = names[dtype]
        ok = {DType.FP32: (np.dtype(np.float32),), DType.INT32: (np.dtype(np.int32),),
              DType.BF16: (np.dtype(np.uint16), _bf16_type())}[want]
        if x.dtype not in ok:
            raise TypeError(f"dtype={dtype!r} needs an array of "
                            f"{' or '.join(str(d) for d in ok if d is not None)}, "
                            f"not {x.dtype}")
        return want, np.dtype(np.uint16 if want is DType.BF16 else np.uint32)
    if x.dtype == np.float32:
        return DType.FP32, np.dtype(np.uint32)
    if x.dtype == np.int32:
        return DType.INT32, np.dtype(np.uint32)
    bf16 = _bf16_type()
    if bf16 is not None and x.dtype == bf16:
        return DType.BF16, np.dtype(np.uint16)
    raise TypeError(f"unsupported dtype {x.dtype}: float32, int32, bfloat16 "
                    "(ml_dtypes), or uint16 bit patterns with dtype='bf16'")


def _sender(outq, send) -> None:
    """Send the datagrams of ``outq`` (without blocking) until None; a failed
    send is as a datagram lost on the wire (the timeout resends it). SIGINT
    and SIGTERM are blocked in this thread: they interrupt the caller's."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    get = outq.get
    while True:
        item = get()
        if item is None:
            return
        try:
            send(item, _MSG_DONTWAIT)
        except OSError:
            pass


class Worker:
    """One rank of one job, talking to the switch at ``switch`` (host, port).

    Parameters
    ----------
    switch : (str, int) or "host:port"
        The switch's UDP address (a board, or ``netagg serve``).
    job : int
        Job id, 0..255.
    rank : int
        This worker's rank, 0..workers-1.
    workers : int
        W, the job's number of workers (1..255), as in the switch's job table.
    slots : int
        n, the job's number of slots (1..65536): the window.
    elements : int
        K, elements per chunk (1..65535, at most the switch's K).
    timeout : float
        First retransmission timeout in seconds (doubles per resend, up to 16x).
    retries : int
        Resends of one chunk before :class:`AllReduceTimeout`.
    """

    def __init__(self, switch: tuple[str, int], job: int, rank: int, workers: int,
                 slots: int, elements: int, timeout: float = 0.01, retries: int = 20):
        for name, value, lo, hi in (("job", job, 0, 255), ("workers", workers, 1, 255),
                                    ("slots", slots, 1, 65536), ("elements", elements, 1, 65535),
                                    ("retries", retries, 0, 1 << 30)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) \
                    or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) \
                or not 0 <= rank < workers:
            raise ValueError(f"rank must be an integer in 0..{workers - 1}, not {rank!r}")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.job, self.rank, self.workers = int(job), int(rank), int(workers)
        self.slots, self.elements = int(slots), int(elements)
        self.timeout, self.retries = float(timeout), int(retries)
        try:
            if isinstance(switch, str):            # "host:port"
                host, _, port = switch.rpartition(":")
            else:
                host, port = switch
            if not 0 < int(port) < 65536:
                raise ValueError(f"port {port} is not in 1..65535")
            infos = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_DGRAM)
        except (TypeError, ValueError, OSError) as e:
            raise ValueError(f"switch address {switch!r} cannot be resolved: {e}") from None
        self.switch = infos[0][4]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
            self.sock.connect(self.switch)
        except OSError as e:
            self.sock.close()
            raise ValueError(f"switch address {self.switch[0]}:{self.switch[1]} is not "
                             f"reachable: {e.strerror or e}") from None
        # Receives block in the kernel for at most ``_poll`` seconds
        # (SO_RCVTIMEO: no poll() before each recv, no exception per empty
        # queue); sends never block (MSG_DONTWAIT). Where SO_RCVTIMEO cannot
        # be set, the socket is non-blocking and waits in select().
        self._poll = min(self.timeout, 0.005)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                 struct.pack("ll", 0, max(1, int(self._poll * 1e6))))
            self._kernel_wait = True
        except (OSError, AttributeError, struct.error):
            self.sock.setblocking(False)
            self._kernel_wait = False
        self._ver = np.zeros(self.slots, dtype=np.uint8)     # next ver of every slot
        self._rbuf = bytearray(65536)
        # CONTRIBs are sent by a second thread, in order (its send system
        # calls run beside this thread's receiving and matching).
        self._outq: queue.SimpleQueue = queue.SimpleQueue()
        self._sender = threading.Thread(target=_sender, args=(self._outq, self.sock.send),
                                        daemon=True, name=f"netagg-worker-{job}-{rank}")
        self._sender.start()
        self.stats = Stats()
        self.last_status = Stats()

    # -- context manager -------------------------------------------------

    def close(self) -> None:
        """Stop the sending thread (after the CONTRIBs it holds) and close the socket."""
        sender = getattr(self, "_sender", None)
        if sender is not None:
            self._sender = None
            self._outq.put(None)
            sender.join()
        self.sock.close()

    def __del__(self):
        sender = getattr(self, "_sender", None)
        if sender is not None:                     # not closed: let the thread end
            self._outq.put(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- all-reduce ------------------------------------------------------

    def allreduce(self, x, op: str = "sum", dtype: str | None = None) -> np.ndarray:
        """All-reduce ``x`` over the job's ranks: a new array of ``x``'s dtype
        and shape holding the switch's RESULT values."""
        if isinstance(op, Op):
            op = op.wire
        if isinstance(dtype, DType):
            dtype = {DType.FP32: "fp32", DType.INT32: "int32", DType.BF16: "bf16"}[dtype]
        if op not in ("sum", "min", "max"):
            raise ValueError(f"op must be sum, min or max, not {op!r}")
        x = np.asarray(x)
        wire, bits = _wire_dtype(x, dtype)
        size = x.size
        status = Stats()
        self.last_status = status
        if size == 0:
            return np.empty(x.shape, dtype=x.dtype)
        K, n = self.elements, self.slots
        nchunks = -(-size // K)
        if (nchunks - 1) * K >= 1 << 32:
            raise ValueError(f"{size} elements do not fit the 32-bit offset field")
        esz = wire.size
        be = np.ascontiguousarray(x).reshape(-1).view(bits).astype(bits.newbyteorder(">"))
        msg_len = HEADER_BYTES + K * esz
        msgs = np.zeros(nchunks, dtype=np.dtype([("h", _HEADER_DTYPE), ("p", "u1", K * esz)]))
        h = msgs["h"]
        chunk = np.arange(nchunks, dtype=np.int64)
        slot_of = chunk % n
        ver0 = self._ver.copy()
        vers = (ver0[slot_of] ^ ((chunk // n) & 1)).astype(np.uint8)
        h["b0"] = _CONTRIB0
        h["ver"] = vers
        h["job"] = self.job
        h["dt_op"] = (int(wire) << 4) | int(Op.from_name(op))
        h["slot"] = slot_of
        h["worker"] = self.rank
        h["offset"] = chunk * K
        h["count"] = K
        last = size - (nchunks - 1) * K
        h["count"][-1] = last
        payload = be.view(np.uint8)
        full = nchunks - 1
        msgs["p"][:full] = payload[:full * K * esz].reshape(full, K * esz)
        msgs["p"][full, :last * esz] = payload[full * K * esz:]
        raw = msgs.view(np.uint8).reshape(nchunks, -1)
        # The RESULT expected for chunk c starts with its CONTRIB's bytes 0-13
        # but for the type (byte 0) and its dtype/op byte (3), which is not
        # matched: keys[c] is the first 14 bytes with byte 0 the RESULT's and
        # byte 3 the CONTRIB's.
        keys = raw[:, :14].copy()
        keys[:, 0] = _RESULT0
        buf = memoryview(raw.reshape(-1))
        out = np.empty(size * esz, dtype=np.uint8)
        out_mv = memoryview(out)
        try:
            self._run(buf, msg_len, nchunks, last, esz, out_mv, keys.tobytes(), status)
        finally:
            self.stats.add(status)
        y = out.view(bits.newbyteorder(">")).astype(bits).view(x.dtype)
        return y.reshape(x.shape)

    def _run(self, buf, msg_len, nchunks, last, esz, out_mv, keys, status) -> None:
        """The window loop: chunks in flight one per slot, RESULTs matched,
        resends on timeouts.

        ``pending`` maps the 14-byte key of every chunk in flight (a RESULT's
        bytes 0-13 with byte 3 set to the call's dtype/op byte: job, slot,
        ver, worker, offset and count) to its chunk; a datagram matches when
        its key is there and its length is the chunk's."""
        sock, K, n, rank, job = self.sock, self.elements, self.slots, self.rank, self.job
        W = self.workers
        recv_into = sock.recv_into
        if self._sender is None:
            raise ValueError("the Worker is closed")
        send = self._outq.put                      # to the sending thread
        kernel_wait = self._kernel_wait
        rbuf = self._rbuf
        rmv = memoryview(rbuf)
        key_of = memoryview(rmv[:14])
        dt_op = keys[3]
        base, cap = self.timeout, self.timeout * MAX_BACKOFF
        monotonic = time.monotonic
        active = min(n, nchunks)
        lastc = nchunks - 1
        last_len = HEADER_BYTES + last * esz
        inflight = list(range(active))              # chunk in flight on slot s, or -1
        inflight += [-1] * (n - active)
        hi = list(inflight)                         # the last chunk sent on slot s, or -1
        tries = [0] * n
        wait = [base] * n
        deadline = [0.0] * n
        pending: dict[bytes, int] = {}
        remaining = nchunks
        results = ignored = nan = ovf = resends = 0
        chunks_sent = 0

        def transmit(c):
            a = c * msg_len
            send(buf[a:a + (last_len if c == lastc else msg_len)])

        now = monotonic()
        for s in range(active):
            pending[keys[14 * s:14 * s + 14]] = s
            transmit(s)
            deadline[s] = now + base
        chunks_sent = active
        next_check = now + base
        try:
            while remaining:
                try:
                    nb = recv_into(rbuf)
                except (BlockingIOError, InterruptedError):
                    nb = -1
                except ConnectionRefusedError:      # ICMP port unreachable: no switch there
                    nb = -2
                if nb >= HEADER_BYTES:
                    rbuf[3] = dt_op                 # the RESULT's dtype/op is not matched
                    key = key_of.tobytes()
                    c = pending.get(key)
                    if c is not None and nb == (last_len if c == lastc else msg_len):
                        st = rbuf[15]               # status bits 7..0: contributors
                        if st != W:
                            raise JobConfigError(
                                f"job {job} rank {rank}: a RESULT has {st} "
                                f"contributors but the job has {W} workers (the switch's "
                                "job table and the workers disagree)")
                        del pending[key]
                        a = c * K * esz
                        out_mv[a:a + nb - HEADER_BYTES] = rmv[HEADER_BYTES:nb]
                        results += 1
                        st = rbuf[14]               # status bits 15..8
                        if st:
                            if st & (STATUS_NAN >> 8):
                                nan += 1
                            if st & (STATUS_OVERFLOW >> 8):
                                ovf += 1
                        remaining -= 1
                        s = c % n
                        c += n
                        if c < nchunks:
                            inflight[s] = hi[s] = c
                            tries[s] = 0
                            wait[s] = base
                            pending[keys[14 * c:14 * c + 14]] = c
                            a = c * msg_len
                            send(buf[a:a + (last_len if c == lastc else msg_len)])
                            chunks_sent += 1
                            now = monotonic()
                            d = deadline[s] = now + base
                            if now < next_check:
                                if d < next_check:
                                    next_check = d
                                continue
                        else:
                            inflight[s] = -1
                            continue
                    else:
                        ignored += 1
                        continue
                elif nb >= 0:
                    ignored += 1
                    continue
                else:
                    now = monotonic()
                    if now < next_check:
                        if nb == -1 and not kernel_wait:
                            select.select((sock,), (), (), next_check - now)
                        continue
                next_check = now + cap
                for s in range(n):
                    c = inflight[s]
                    if c < 0:
                        continue
                    if deadline[s] <= now:
                        if tries[s] >= self.retries:
                            raise AllReduceTimeout(
                                f"job {job} rank {rank}: no RESULT for chunk {c} (slot {s}, "
                                f"offset {c * K}) after {tries[s]} resends; likely causes: the "
                                f"switch at {self.switch[0]}:{self.switch[1]} is unreachable "
                                "or down, ranks called allreduce with different shapes, "
                                "dtypes or ops, or a rank stopped",
                                job=job, rank=rank, slot=s, chunk=c)
                        tries[s] += 1
                        resends += 1
                        wait[s] = min(wait[s] * 2, cap)
                        transmit(c)
                        deadline[s] = now + wait[s]
                    if deadline[s] < next_check:
                        next_check = deadline[s]
        finally:
            # Every slot's ver flipped once per chunk sent on it (chunks
            # s, s + n, ... up to hi[s]).
            sent = np.array(hi[:active], dtype=np.int64)
            self._ver[:active] ^= (((sent - np.arange(active)) // n + 1) & 1).astype(np.uint8)
            status.chunks += chunks_sent
            status.resends += resends
            status.results += results
            status.ignored += ignored
            status.nan += nan
            status.overflow += ovf


__all__ = ["AllReduceTimeout", "JobConfigError", "MAX_BACKOFF", "Stats", "Worker"]
