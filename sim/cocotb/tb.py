"""The cocotb test bench of ``netagg_core`` (docs/core.md ports).

:class:`TB` drives one core: clock and reset, the control port (job table
writes and read-back, counter reads), and one clocked loop that steps the
stream components every cycle: :class:`IngressDriver` (messages as beats,
optional random gaps between and within messages), :class:`EgressMonitor`
(RESULT beats, optional random ``o__ready`` backpressure) and
:class:`VerdictMonitor`. Every cycle the components drive their inputs
after the rising edge, then sample in the read-only phase which handshakes
complete at the next edge, so the bench is exact on Icarus and Verilator.

Message ``i`` (counted from reset) carries tag ``i mod 2**16``; verdicts must
come back in order with the right tag, and a RESULT's tag is unwrapped to
the most recent message number with that tag.

:class:`Scoreboard` checks against :class:`netagg.sim.reference.Expectation`
(the golden model fed in arrival order), which gives each message's verdict
and the RESULTs it causes; RESULTs are compared bit-exact,
with their causing message, in order per (job, slot, ver, worker); the
counters are compared at the end, and nothing expected may be left over.
The workloads come from :mod:`netagg.sim.traffic`.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, defaultdict, deque

from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from netagg import regmap
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim import beats as beatcodec
from netagg.sim.reference import TAG_MOD, Expectation
from netagg.wire import COUNTERS, HEADER_BYTES, DType, Header, MsgType, Verdict

PERIOD_NS = 10


class BenchError(AssertionError):
    """The core misbehaved (wrong verdict or RESULT, a hang, a protocol
    violation on its ports)."""


def describe(payload: bytes) -> str:
    """A message in one line, for error reports."""
    if len(payload) < HEADER_BYTES:
        return f"<{len(payload)} bytes: {payload.hex()}>"
    h = Header.unpack(payload)
    body = payload[HEADER_BYTES:]
    show = body[:32].hex() + ("..." if len(body) > 32 else "")
    return (f"v{h.version} t{h.type} r{h.reserved} ver{h.ver} job{h.job} dtype{h.dtype} "
            f"op{h.op} slot{h.slot} worker{h.worker} off{h.offset} count{h.count} "
            f"status0x{h.status:x} [{len(body)} B: {show}]")


def unwrap_tag(tag: int, newest: int) -> int:
    """The message number with tag ``tag`` (number mod 2**16) that is at
    most ``newest`` (the newest message presented) and closest to it."""
    return newest - ((newest - tag) % TAG_MOD)


# -- stream components ------------------------------------------------------

class IngressDriver:
    """Presents messages on ``i__*`` in order. ``gap``: probability of an
    idle cycle before a message; ``beat_gap``: before a later beat of one.
    A presented beat stays until accepted (stream rules)."""

    def __init__(self, dut, lanes: int, rng: random.Random, gap=0.0, beat_gap=0.0):
        self.dut, self.lanes, self.rng = dut, lanes, rng
        self.gap, self.beat_gap = gap, beat_gap
        self.queue: deque[tuple[int, bytes]] = deque()
        self._beats: deque[int] = deque()
        self._beat: int | None = None
        self._last = False
        self._valid = None
        self.presented = 0            # messages whose last beat was accepted
        self.first_cycle: int | None = None
        self.beats_in = 0

    def push(self, index: int, payload: bytes) -> None:
        self.queue.append((index, payload))

    @property
    def done(self) -> bool:
        return not self.queue and not self._beats and self._beat is None

    def _set_valid(self, v: int) -> None:
        if v != self._valid:
            self.dut.i__valid.value = v
            self._valid = v

    def drive(self) -> None:
        if self._beat is None:
            if not self._beats:
                if not self.queue or (self.gap and self.rng.random() < self.gap):
                    self._set_valid(0)
                    return
                index, payload = self.queue.popleft()
                msg = beatcodec.message_to_beats(payload, self.lanes, index % TAG_MOD)
                self._beats.extend(beatcodec.pack_ingress(b, self.lanes) for b in msg)
                self._nbeats = len(msg)
            elif self.beat_gap and self.rng.random() < self.beat_gap:
                self._set_valid(0)
                return
            self._beat = self._beats.popleft()
            self._last = not self._beats
            self.dut.i__payload.value = self._beat
        self._set_valid(1)

    def sample(self, cycle: int) -> bool:
        """True if a beat moved (at the coming edge)."""
        if self._beat is None:
            return False
        if self.first_cycle is None:
            self.first_cycle = cycle
        if not int(self.dut.i__ready.value):
            return False
        self._beat = None
        self.beats_in += 1
        if self._last:
            self.presented += 1
        return True


class EgressMonitor:
    """Collects RESULT beats from ``o__*`` into messages. ``backpressure``:
    the fraction of cycles ``o__ready`` is low (toggling in random bursts)."""

    def __init__(self, dut, lanes: int, rng: random.Random, on_result, backpressure=0.0):
        self.dut, self.lanes, self.rng = dut, lanes, rng
        self.on_result = on_result
        self.backpressure = backpressure
        self.assembler = beatcodec.ResultAssembler(lanes)
        self.partial = False
        self._ready = None
        self._state = 1
        self.beats_out = 0
        self.last_cycle: int | None = None

    def drive(self) -> None:
        bp = self.backpressure
        if bp:
            if self._state:
                self._state = 0 if self.rng.random() < bp / 2 else 1
            else:
                self._state = 1 if self.rng.random() < (1 - bp) / 2 else 0
        ready = self._state if bp else 1
        if ready != self._ready:
            self.dut.o__ready.value = ready
            self._ready = ready

    def sample(self, cycle: int) -> bool:
        if not self._ready or not int(self.dut.o__valid.value):
            return False
        beat = beatcodec.unpack_egress(self.dut.o__payload.value.to_unsigned(), self.lanes)
        self.beats_out += 1
        self.last_cycle = cycle
        try:
            done = self.assembler.push(beat)
        except ValueError as e:
            raise BenchError(f"cycle {cycle}: malformed RESULT on egress: {e}") from None
        self.partial = done is None
        if done is not None:
            self.on_result(done[0], done[1], cycle)
        return True


class VerdictMonitor:
    """Reports each ``v__valid`` cycle's (code, tag)."""

    def __init__(self, dut, on_verdict):
        self.dut, self.on_verdict = dut, on_verdict

    def sample(self, cycle: int) -> bool:
        if not int(self.dut.v__valid.value):
            return False
        code, tag = beatcodec.unpack_verdict(self.dut.v__payload.value.to_unsigned())
        self.on_verdict(code, tag, cycle)
        return True


# -- scoreboard ---------------------------------------------------------------

class Scoreboard:
    """The golden model as reference (see the module docstring)."""

    def __init__(self, params: Params, jobs: JobTable):
        self.reference = Expectation(params, jobs)
        self.verdicts: dict[int, Verdict] = {}
        self.payloads: dict[int, bytes] = {}
        self.pending: dict[tuple, deque] = defaultdict(deque)
        self.coverage: Counter = Counter()
        self.results_checked = 0

    def expect(self, index: int, payload: bytes) -> None:
        """Message ``index`` arrives (call in arrival order)."""
        outcome = self.reference.add(payload, index)
        self.verdicts[index] = outcome.verdict
        self.payloads[index] = payload
        self.coverage[outcome.verdict] += 1
        for r in outcome.results:
            h = r.header
            self.pending[(h.job, h.slot, h.ver, h.worker)].append((index, r.pack()))

    def verdict(self, index: int, code: int) -> None:
        exp = self.verdicts.pop(index, None)
        if exp is None:
            raise BenchError(f"verdict {code} for message {index}, which was not expected")
        if code != exp:
            got = Verdict(code).name if code in Verdict._value2member_map_ else code
            raise BenchError(f"message {index}: verdict {got}, expected {exp.name}: "
                             f"{describe(self.payloads[index])}")

    def result(self, index: int, payload: bytes) -> None:
        h = Header.unpack(payload)
        key = (h.job, h.slot, h.ver, h.worker)
        q = self.pending.get(key)
        if not q:
            raise BenchError(f"unexpected RESULT (tag of message {index}): {describe(payload)}")
        exp_index, exp = q.popleft()
        if payload != exp or index != exp_index:
            raise BenchError(
                f"RESULT for (job, slot, ver, worker) {key}:\n"
                f"  got      (message {index}) {describe(payload)}\n"
                f"  expected (message {exp_index}) {describe(exp)}"
                + _diff_values(payload, exp))
        self.results_checked += 1

    def final(self, counters: dict[str, int] | None = None) -> None:
        """Nothing expected is left; counters equal the model's."""
        if self.verdicts:
            first = min(self.verdicts)
            raise BenchError(f"{len(self.verdicts)} verdicts missing (first: message {first})")
        left = {k: len(q) for k, q in self.pending.items() if q}
        if left:
            k, q = next((k, q) for k, q in self.pending.items() if q)
            raise BenchError(f"{sum(left.values())} RESULTs never sent, e.g. for {k}: "
                             f"message {q[0][0]}: {describe(q[0][1])}")
        if counters is not None:
            model = self.reference.counters
            diff = {n: (counters[n], model[n]) for n in COUNTERS if counters[n] != model[n]}
            if diff:
                raise BenchError(f"counters (core, model) differ: {diff}")


def _diff_values(got: bytes, exp: bytes) -> str:
    if got[:HEADER_BYTES] != exp[:HEADER_BYTES] or len(got) != len(exp):
        return ""
    size = 2 if Header.unpack(got).dtype == DType.BF16 else 4
    out = []
    for at in range(HEADER_BYTES, len(got), size):
        if got[at:at + size] != exp[at:at + size]:
            out.append(f"element {(at - HEADER_BYTES) // size}: got {got[at:at + size].hex()} "
                       f"expected {exp[at:at + size].hex()}")
    return ("\n  " + "\n  ".join(out[:8])) if out else ""


# -- the bench ----------------------------------------------------------------

@dataclasses.dataclass
class RunResult:
    verdicts: list[int]                        # code per message of this run
    results: list[tuple[int, bytes]]           # (message index, RESULT payload), send order
    first_cycle: int | None                    # first ingress beat presented
    last_result_cycle: int | None              # last RESULT beat sent
    cycles_total: int

    @property
    def cycles(self) -> int:
        """Cycles from the first frame presented to the last RESULT beat
        sent (both included); 0 if no RESULT was sent."""
        if self.first_cycle is None or self.last_result_cycle is None:
            return 0
        return self.last_result_cycle - self.first_cycle + 1


class ControlPort:
    """The core's control register port (docs/core.md, ``netagg.regmap``),
    driven from a bench that has ``dut`` (with ``ctrl_addr``, ``ctrl_wdata``,
    ``ctrl_we``, ``ctrl_rdata``) and ``async tick()``: a write takes one
    cycle, a read two (``ctrl_rdata`` is registered)."""

    async def write_reg(self, addr: int, value: int) -> None:
        d = self.dut
        d.ctrl_addr.value = addr
        d.ctrl_wdata.value = value
        d.ctrl_we.value = 1
        await self.tick()
        d.ctrl_we.value = 0

    async def read_reg(self, addr: int) -> int:
        d = self.dut
        d.ctrl_we.value = 0
        d.ctrl_addr.value = addr
        await self.tick()
        await ReadOnly()
        value = d.ctrl_rdata.value.to_unsigned()
        await self.tick()
        return value

    async def configure(self, jobs: JobTable) -> None:
        """Write every job entry (unlisted ones disabled) and read it back."""
        want = {}
        for addr, value in regmap.job_writes(jobs):
            want[addr] = value
            await self.write_reg(addr, value)
        for addr, value in want.items():
            got = await self.read_reg(addr)
            if got != value:
                raise BenchError(f"control register 0x{addr:04x} reads 0x{got:x}, "
                                 f"wrote 0x{value:x}")


class TB(ControlPort):
    """One ``netagg_core`` under test (see the module docstring)."""

    def __init__(self, dut, params: Params, rng: random.Random | None = None):
        self.dut, self.params = dut, params
        self.rng = rng or random.Random(0)
        self.cycle = 0
        self._clock = None
        self.next_index = 0          # message number of the next message (since reset)
        self.scoreboard: Scoreboard | None = None

    # -- clock, reset, control port --

    async def start(self) -> None:
        """Start the clock, reset, wait until the core takes messages."""
        if self._clock is None:
            self._clock = Clock(self.dut.clk, PERIOD_NS, unit="ns")
            self._clock.start()
        await self.reset()

    async def tick(self, n: int = 1) -> None:
        for _ in range(n):
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def reset(self, cycles: int = 4) -> None:
        d = self.dut
        d.i__valid.value = 0
        d.i__payload.value = 0
        d.o__ready.value = 0
        d.ctrl_we.value = 0
        d.ctrl_addr.value = 0
        d.ctrl_wdata.value = 0
        d.rst.value = 1
        await self.tick(cycles)
        d.rst.value = 0
        self.next_index = 0
        limit = self.params.slots + 64
        for _ in range(limit):
            await self.tick()
            await ReadOnly()
            if int(d.i__ready.value):
                await self.tick()
                return
        raise BenchError(f"i__ready still low {limit} cycles after reset")

    async def read_counters(self) -> dict[str, int]:
        return {name: await self.read_reg(regmap.counter_addr(name))
                for name in regmap.CORE_COUNTERS}

    # -- traffic --

    async def run(self, messages, *, gap=0.0, beat_gap=0.0, backpressure=0.0,
                  timeout: int = 5000, settle: int = 4) -> RunResult:
        """Present ``messages`` (UDP payloads) and collect verdicts and
        RESULTs until every message has its verdict, nothing is in flight
        and ``idle`` has been high for ``settle`` cycles. Checks against
        ``self.scoreboard`` if set. Raises :class:`BenchError` if nothing
        moves for ``timeout`` cycles before that."""
        d = self.dut
        base = self.next_index
        messages = [bytes(m) for m in messages]
        self.next_index += len(messages)
        sb = self.scoreboard
        driver = IngressDriver(d, self.params.lanes, self.rng, gap, beat_gap)
        for i, m in enumerate(messages):
            driver.push(base + i, m)
            if sb is not None:
                sb.expect(base + i, m)
        verdicts: list[int] = []
        results: list[tuple[int, bytes]] = []

        def on_verdict(code, tag, cycle):
            index = base + len(verdicts)
            if index >= base + len(messages) or index >= base + driver.presented + 1:
                raise BenchError(f"cycle {cycle}: verdict (code {code}, tag {tag}) with no "
                                 f"message waiting for one")
            if tag != index % TAG_MOD:
                raise BenchError(f"cycle {cycle}: verdict for tag {tag}, expected the verdict "
                                 f"of message {index} (tag {index % TAG_MOD})")
            verdicts.append(code)
            if sb is not None:
                sb.verdict(index, code)

        def on_result(payload, tag, cycle):
            ref = base + driver.presented - 1
            if ref < base:
                raise BenchError(f"cycle {cycle}: RESULT before any message: {describe(payload)}")
            index = unwrap_tag(tag, ref)
            h = Header.unpack(payload)
            if h.version != 1 or h.type != MsgType.RESULT or h.reserved != 0:
                raise BenchError(f"cycle {cycle}: bad RESULT header: {describe(payload)}")
            results.append((index, payload))
            if sb is not None:
                sb.result(index, payload)

        egress = EgressMonitor(d, self.params.lanes, self.rng, on_result, backpressure)
        verdict_mon = VerdictMonitor(d, on_verdict)
        quiet = 0
        idle_run = 0
        while True:
            driver.drive()
            egress.drive()
            await ReadOnly()
            c = self.cycle
            moved = driver.sample(c)
            moved |= verdict_mon.sample(c)
            moved |= egress.sample(c)
            finished = driver.done and len(verdicts) == len(messages) and not egress.partial
            if finished and int(d.idle.value):
                idle_run += 1
                if idle_run >= settle:
                    break
            else:
                idle_run = 0
            quiet = 0 if moved else quiet + 1
            if quiet > timeout:
                raise BenchError(
                    f"cycle {c}: nothing moved for {timeout} cycles: {driver.presented}/"
                    f"{len(messages)} messages presented, {len(verdicts)} verdicts, "
                    f"{len(results)} RESULTs, idle={int(d.idle.value)}, "
                    f"i__ready={int(d.i__ready.value)}, o__valid={int(d.o__valid.value)}")
            await self.tick()
        await self.tick()
        d.i__valid.value = 0
        return RunResult(verdicts, results, driver.first_cycle, egress.last_cycle, self.cycle)
