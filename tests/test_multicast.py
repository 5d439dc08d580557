"""hdl/multicast.Multicast on its own (amaranth.sim): RESULT descriptors and
beats as the slot table sends them (credit-limited, descriptor first, beats
with random gaps), egress under random backpressure. Every RESULT goes to
workers 0..W-1 in turn (a completed round) or to its one worker (a
retransmission), each copy its beats in order with the RESULT header
(protocol.md: the round's fields, the destination, status = n | NaN and
overflow flags of any beat); bf16 RESULTs accumulated in binary32 rounded to
bf16 (the golden model's ``fp32_to_bf16``, its overflow in the status);
``free`` returns each RESULT's beats once."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from seeds import seed_of

from netagg.hdl.multicast import Multicast
from netagg.params import Params
from netagg.sim import arith
from netagg.sim.beats import unpack_egress
from netagg.wire import STATUS_NAN, STATUS_OVERFLOW, VERSION, DType, Header, MsgType

CONFIGS = {
    "l4k16": dict(lanes=4, elements=16, workers=5, slots=8, jobs=4, dtypes=("int32", "fp32")),
    "l1k4": dict(lanes=1, elements=4, workers=3, slots=4, jobs=2),   # bf16 accumulated as bf16
    "l3k12": dict(lanes=3, elements=12, workers=8, slots=6, jobs=2, dtypes=("fp32",)),
    # bf16 accumulated in binary32: the multicast rounds bf16 RESULTs' beats
    "l4k16bf": dict(lanes=4, elements=16, workers=5, slots=8, jobs=4),
}


def _element(rng: random.Random) -> int:
    """A random 32-bit element, often at a bf16 rounding boundary (ties,
    near-ties, NaN, the largest finite values) so that narrowing is exercised."""
    x = rng.getrandbits(32)
    kind = rng.randrange(4)
    if kind == 1:
        return (x & 0xFFFF0000) | rng.choice((0x7FFF, 0x8000, 0x8001, 0x0000, 0xFFFF))
    if kind == 2:
        return (x & 0x8001FFFF) | (rng.choice((0xFE, 0xFF)) << 23) | (0x7F << 16)
    return x


def _results(rng: random.Random, params: Params, n: int):
    """Random RESULTs: descriptor fields and beats (data, flags)."""
    L = params.lanes
    dtypes = [int(DType.from_name(d)) for d in params.dtypes]
    for k in range(n):
        count = rng.randint(1, params.elements)
        multicast = rng.random() < 0.6
        workers = rng.randint(1, params.workers)
        meta = dict(ver=rng.randrange(2), job=rng.randrange(params.jobs),
                    slot=rng.randrange(params.slots), worker=rng.randrange(params.workers),
                    dtype=rng.choice(dtypes), op=rng.randrange(3), count=count,
                    offset=rng.getrandbits(32))
        nbeats = -(-count // L)
        # bf16 accumulated in binary32 reaches the multicast wide, flagged
        narrow = int(meta["dtype"] == DType.BF16 and params.bf16_accumulate == "fp32")
        beats = [dict(data=[_element(rng) for _ in range(L)],
                      mask=sum(1 << i for i in range(L) if b * L + i < count),
                      nan=int(rng.random() < 0.1), ovf=int(rng.random() < 0.1),
                      last=int(b == nbeats - 1), bf16=narrow)
                 for b in range(nbeats)]
        yield dict(meta=meta, tag=k & 0xFFFF, multicast=int(multicast), workers=workers,
                   n=rng.randint(1, params.workers), beats=nbeats), beats


def _expected(desc, beats):
    """The egress beats of one RESULT: (header int, tag, last, data) per beat;
    a flagged beat's elements rounded to bf16 (the golden model's
    ``fp32_to_bf16``), an element that rounds to infinity within the count
    raising the overflow status."""
    m = desc["meta"]
    rounded_ovf = False
    narrowed = []
    for b in beats:
        if b["bf16"]:
            r, o = arith.fp32_to_bf16(np.array(b["data"], dtype=np.uint32))
            rounded_ovf |= any(bool(o[i]) and (b["mask"] >> i) & 1 for i in range(len(o)))
            narrowed.append(dict(b, data=[int(x) for x in r]))
        else:
            narrowed.append(b)
    beats = narrowed
    status = (desc["n"] | (STATUS_NAN if any(b["nan"] for b in beats) else 0)
              | (STATUS_OVERFLOW if rounded_ovf or any(b["ovf"] for b in beats) else 0))
    dests = range(desc["workers"]) if desc["multicast"] else [m["worker"]]
    out = []
    for dest in dests:
        h = Header(version=VERSION, type=MsgType.RESULT, reserved=0, ver=m["ver"], job=m["job"],
                   dtype=m["dtype"], op=m["op"], slot=m["slot"], worker=dest,
                   offset=m["offset"], count=m["count"], status=status)
        hv = int.from_bytes(h.pack(), "big")
        out += [(hv, desc["tag"], bool(b["last"]), tuple(b["data"])) for b in beats]
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("backpressure", [0.0, 0.6])
def test_result_beats_per_worker_under_backpressure(name, backpressure, request):
    seed = seed_of(request)
    rng = random.Random(seed)
    params = Params(**CONFIGS[name], **({"bf16_accumulate": "bf16"} if name == "l1k4" else {}))
    depth = 1 << (2 * params.beats - 1).bit_length()
    dut = Multicast(params, depth=depth)
    results = list(_results(rng, params, 60))
    expected = [beat for desc, beats in results for beat in _expected(desc, beats)]
    got, freed = [], []
    credit = {"beats": depth}

    async def slot_table(ctx):
        for desc, beats in results:
            while credit["beats"] < desc["beats"]:
                await ctx.tick()
            credit["beats"] -= desc["beats"]
            ctx.set(dut.res_desc.payload, desc)
            ctx.set(dut.res_desc.valid, 1)
            await ctx.tick().until(dut.res_desc.ready)
            ctx.set(dut.res_desc.valid, 0)
            await ctx.tick().repeat(2)      # a descriptor precedes its beats by two cycles
            for beat in beats:
                while rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(dut.res_beat.payload, beat)
                ctx.set(dut.res_beat.valid, 1)
                await ctx.tick()
                ctx.set(dut.res_beat.valid, 0)
        for _ in range(20 * len(expected) + 100):
            if len(got) == len(expected) and not ctx.get(dut.busy):
                break
            await ctx.tick()

    async def egress(ctx):
        while True:
            ctx.set(dut.o.ready, rng.random() >= backpressure)
            _, _, ov, orr, op, fv, fp = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload.as_value(), dut.free.valid,
                dut.free.payload)
            if ov and orr:
                b = unpack_egress(op, params.lanes)
                got.append((b.header, b.tag, bool(b.last), tuple(b.data)))
            if fv:
                freed.append(fp)
                credit["beats"] += fp

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(slot_table)
    sim.add_testbench(egress, background=True)
    sim.run()

    def per_worker(beats):
        out = {}
        for beat in beats:
            out.setdefault(Header.from_int(beat[0]).worker, []).append(beat)
        return out

    assert per_worker(got) == per_worker(expected), seed
    assert got == expected, seed         # and the RESULTs in order, destinations in turn
    assert freed == [desc["beats"] for desc, _ in results]
