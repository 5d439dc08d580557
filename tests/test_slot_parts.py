"""The slot table's small parts on their own (amaranth.sim) against models
of their stated contracts: ResultCredit (credit, registered ``ok``) and
PayloadBuffer (arrival order, read by address, freed up to a pointer, ``head``
and ``claim``, registered ``w.ready``)."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from seeds import seed_of

from netagg.hdl.credit import ResultCredit
from netagg.hdl.payload_buffer import PayloadBuffer
from netagg.params import Params


@pytest.mark.parametrize("capacity,need", [(4, 4), (16, 4), (8, 1)])
def test_result_credit_model(capacity, need, request):
    rng = random.Random(seed_of(request))
    dut = ResultCredit(capacity, need=need)

    async def tb(ctx):
        # credit: counted; waiting: returned in the previous cycle, counted
        # in this one (the contract's registered return)
        credit, waiting, ok = capacity, 0, 1
        for _ in range(400):
            assert ctx.get(dut.ok) == ok
            take = rng.randint(1, need) if ok and rng.random() < 0.5 else 0
            used = capacity - credit - waiting + take
            free = rng.randint(0, used) if rng.random() < 0.4 else 0
            ctx.set(dut.take, take != 0)
            ctx.set(dut.beats, take if take else rng.randint(0, capacity))
            ctx.set(dut.free.valid, free != 0 or rng.random() < 0.1)
            ctx.set(dut.free.payload, free)
            await ctx.tick()
            credit, waiting = credit - take + waiting, free
            ok = int(credit >= need)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("depth", [4, 8])
def test_payload_buffer_model(depth, compact, request):
    rng = random.Random(seed_of(request))
    params = Params(lanes=2, elements=8, workers=2, slots=2, jobs=1)
    dut = PayloadBuffer(params, depth=depth, compact=compact)

    async def tb(ctx):
        written = []            # every beat written, in order (index = position)
        freed = 0               # the free pointer given in the previous cycle
        head = 0                # first unclaimed beat
        room = 0                # the registered ready (low after reset)
        # beats accepted up to 3 cycles ago, 2 cycles ago, 1 cycle ago
        accepted = [0, 0, 0]
        reads = [None] * dut.read_latency    # the beats read, oldest first
        for _ in range(600):
            held = len(written) - freed
            # counted by the buffer: every beat written into the RAM (with
            # the registered write, those accepted two cycles ago or earlier)
            # and not before the pointer of the previous cycle
            counted = (len(written) if compact else accepted[-2]) - freed
            assert ctx.get(dut.w.ready) == room
            assert ctx.get(dut.empty) == (held == 0)
            assert ctx.get(dut.head) == head % (2 * depth)
            beat = [rng.getrandbits(32) for _ in range(params.lanes)]
            valid = rng.random() < 0.6
            ctx.set(dut.w.valid, valid)
            ctx.set(dut.w.payload, beat)
            # Read a held beat accepted write_latency cycles ago or earlier
            # (2, the RAM write registered twice but the read address once:
            # not one accepted in the last cycle; compact: 1).
            ready_to_read = accepted[-dut.write_latency]
            addr = rng.randrange(freed, ready_to_read) if ready_to_read > freed else None
            ctx.set(dut.rd_addr, (addr or 0) % depth)
            # the head message's beats, claimed or not (then any count); the
            # free pointer moves forward, at most to the head
            claim = rng.randint(0, min(params.beats, len(written) - head))
            take = rng.random() < 0.7
            free = min(head, freed + rng.randint(0, 3)) if rng.random() < 0.5 else freed
            ctx.set(dut.claim, claim if take or rng.random() < 0.5
                    else rng.randint(0, params.beats))
            ctx.set(dut.take, take)
            ctx.set(dut.free, free % (2 * depth))
            await ctx.tick()
            reads = reads[1:] + [None if addr is None else written[addr]]
            if reads[0] is not None:
                assert [int(x) for x in ctx.get(dut.rd_data)] == reads[0]
            if valid and room:
                written.append(beat)
            if take:
                head += claim
            freed = free
            accepted = accepted[1:] + [len(written)]
            # as counted at the start of the cycle
            room = int(counted < (depth - 1 if compact else depth - 2))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
