"""The parts of boards/bridge.CoreBridge on their own (amaranth.sim):
FrameParser against the host codec's frames (netagg.uartlink) and the
ingress beats of sim/beats.py; ReplySerializer's frames parsed back with
uartlink.parse_reply."""

from __future__ import annotations

import random

from amaranth.sim import Simulator
from seeds import seed_of

from netagg import uartlink as hu
from netagg.boards.bridge import FrameParser, ReplySerializer
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.beats import message_to_beats
from netagg.sim.message_model import Switch
from netagg.sim.traffic import malformed, random_traffic
from netagg.wire import HEADER_BYTES, Header

PARAMS = Params(lanes=3, elements=9, workers=3, slots=4, jobs=2)
JOBS = JobTable([Job(0, 3, 0, 2), Job(1, 2, 2, 2)], PARAMS)


def _frames(rng):
    """(kind, frame bytes, message or None): MSG frames of random and
    malformed messages, CTRL and SYNC frames, and frames of neither shape."""
    msgs = random_traffic(PARAMS, JOBS, 30, seed=rng.getrandbits(32))
    msgs += [malformed(rng, PARAMS, JOBS) for _ in range(15)]
    out = [("msg", hu.msg_frame(m, rng.getrandbits(16)), m) for m in msgs]
    out += [("ctrl", hu.ctrl_frame(rng.getrandbits(16), rng.getrandbits(32),
                                   write=rng.random() < 0.5), None) for _ in range(10)]
    out += [("sync", hu.sync_frame(), None) for _ in range(3)]
    out += [("bad", bytes([rng.choice([hu.CTRL, hu.SYNC, 0x55])])
             + rng.randbytes(rng.choice([1, 2, 8])), None) for _ in range(8)]
    rng.shuffle(out)
    return out


def test_frame_parser_matches_host_codec(request):
    seed = seed_of(request)
    rng = random.Random(seed)
    L, B = PARAMS.lanes, PARAMS.beats
    dut = FrameParser(PARAMS)

    async def tb(ctx):
        for kind, frame, msg in _frames(rng):
            for b in frame:
                ctx.set(dut.byte, b)
                ctx.set(dut.take, 1)
                await ctx.tick()
                ctx.set(dut.take, 0)
                if rng.random() < 0.3:
                    await ctx.tick()
            where = (seed, kind, frame.hex())
            assert (ctx.get(dut.is_msg), ctx.get(dut.is_ctrl), ctx.get(dut.is_sync)) == \
                (kind == "msg", kind == "ctrl", kind == "sync"), where
            if kind == "msg":
                beats = message_to_beats(msg, L, tag=int.from_bytes(frame[1:3], "big"))
                assert ctx.get(dut.tag) == beats[0].tag
                assert ctx.get(dut.length) == len(msg) == beats[0].length
                assert ctx.get(dut.beats_m1) == len(beats) - 1, where
                # Shifted in: a runt's bytes end up in the low bytes.
                header = int.from_bytes(msg[:HEADER_BYTES], "big")
                assert ctx.get(dut.header.as_value()) == header
                size = 2 if Header.from_int(header).dtype == 2 else 4
                n = (len(msg) - HEADER_BYTES) // size if len(msg) > HEADER_BYTES else 0
                assert ctx.get(dut.no_elements) == (n == 0)
                for k, beat in enumerate(beats[:B]):
                    ctx.set(dut.rd_addr, k)
                    await ctx.tick()
                    word = ctx.get(dut.rd_data)
                    lanes = [(word >> (32 * i)) & 0xFFFFFFFF for i in range(L)]
                    valid = min(L, max(0, min(n, PARAMS.elements) - k * L))
                    assert lanes[:valid] == list(beat.data[:valid]), where
            if kind == "ctrl":
                assert (ctx.get(dut.ctrl_write), ctx.get(dut.ctrl_addr),
                        ctx.get(dut.ctrl_data)) == \
                    (frame[1] & 1, int.from_bytes(frame[2:4], "big"),
                     int.from_bytes(frame[4:8], "big")), where
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_reply_serializer_frames_parse_back(request):
    seed = seed_of(request)
    rng = random.Random(seed)
    L = PARAMS.lanes
    dut = ReplySerializer(PARAMS)
    sw = Switch(PARAMS, JOBS)
    results = [r for m in random_traffic(PARAMS, JOBS, 80, seed=rng.getrandbits(32))
               for r in sw.receive(m).results]
    # What to send, one reply at a time: (kind, value, expected Reply).
    todo = []
    for r in results[:12]:
        tag = rng.getrandbits(16)
        todo.append(("result", (r.pack(), tag), hu.Reply(hu.RESULT, tag=tag, message=r.pack())))
        if rng.random() < 0.5:
            code, vtag = rng.randrange(9), rng.getrandbits(16)
            todo.append(("verdict", (code, vtag), hu.Reply(hu.VERDICT, tag=vtag, code=code)))
        if rng.random() < 0.4:
            a, d = rng.getrandbits(16), rng.getrandbits(32)
            todo.append(("ctrl", (a, d), hu.Reply(hu.CTRLREP, addr=a, data=d)))
    todo.append(("sync", None, hu.Reply(hu.SYNCREP)))
    got = []

    async def source(ctx):
        for kind, value, _ in todo:
            if kind == "verdict":
                ctx.set(dut.verdict.payload, {"code": value[0], "tag": value[1]})
                ctx.set(dut.verdict.valid, 1)
                await ctx.tick().until(dut.verdict.ready)
                ctx.set(dut.verdict.valid, 0)
            elif kind == "ctrl":
                ctx.set(dut.ctrl_addr, value[0])
                ctx.set(dut.ctrl_data, value[1])
                ctx.set(dut.ctrl_pending, 1)
                await ctx.tick().until(dut.ctrl_taken)
                ctx.set(dut.ctrl_pending, 0)
            elif kind == "sync":
                ctx.set(dut.sync, 1)
                await ctx.tick().until(dut.sync_taken)
                ctx.set(dut.sync, 0)
            else:
                payload, tag = value
                header = int.from_bytes(payload[:HEADER_BYTES], "big")
                out = dut.result.payload
                for beat in message_to_beats(payload, L, tag=tag):
                    ctx.set(out.header.as_value(), header)
                    ctx.set(out.tag, tag)
                    ctx.set(out.last, beat.last)
                    ctx.set(out.data, list(beat.data))
                    ctx.set(dut.result.valid, 1)
                    await ctx.tick().until(dut.result.ready)
                ctx.set(dut.result.valid, 0)
        while len(got) < len(todo):
            await ctx.tick()

    async def sink(ctx):
        frame = bytearray()
        while True:
            ctx.set(dut.o.ready, rng.random() < 0.7)
            _, _, valid, ready, data, last = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload.data, dut.o.payload.last)
            if valid and ready:
                frame.append(data)
                if last:
                    got.append(hu.parse_reply(bytes(frame)))
                    frame.clear()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink, background=True)
    sim.run()
    assert got == [reply for *_, reply in todo], seed

