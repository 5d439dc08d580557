# amaranth: UnusedElaboratable=no
"""The receive parser and the responder (netagg.hdl.eth.ip_rx, responder) in
amaranth.sim against the front-end model: netagg frames become exactly the
beats of netagg.sim.beats.message_to_beats with their sender; ARP and ICMP
echo requests are answered byte for byte as the model answers them; every
other frame is counted as ignored. Random backpressure on both outputs.

Seed: NETAGG_ETH_SEED (default 11), printed."""

from __future__ import annotations

import os
import random

from amaranth.hdl import Module
from amaranth.sim import Simulator

from netagg import frames as fr
from netagg.frames import Endpoint, build_frame
from netagg.hdl.eth.ip_rx import IpRx
from netagg.hdl.eth.responder import Responder
from netagg.jobs import JobTable
from netagg.params import Params
from netagg.sim.beats import message_to_beats
from netagg.sim.eth_model import FrontEnd
from netagg.sim.message_model import make_contrib
from netagg.wire import DType

SEED = int(os.environ.get("NETAGG_ETH_SEED", "11"))
PARAMS = Params(workers=4, slots=8, elements=8, lanes=4, jobs=2,
                switch_mac="02:aa:bb:cc:dd:ee", switch_ip="192.168.7.1")
SW = Endpoint(PARAMS.switch_mac_bytes, PARAMS.switch_ip_bytes, PARAMS.port)


def setup_module():
    print(f"NETAGG_ETH_SEED={SEED}")


def random_frames(rng, n):
    out = []
    for _ in range(n):
        src = Endpoint(rng.randbytes(6), rng.randbytes(4), rng.getrandbits(16))
        r = rng.random()
        if r < 0.35:
            dtype = rng.choice([DType.FP32, DType.BF16, DType.INT32])
            count = rng.randrange(0, 10)
            payload = make_contrib(rng.randrange(3), rng.randrange(9), 0, rng.randrange(5),
                                   [rng.getrandbits(16) for _ in range(count)], dtype=dtype)
            if rng.random() < 0.3:          # odd lengths and short messages
                payload = payload[:rng.randrange(len(payload) + 1)] + rng.randbytes(
                    rng.randrange(3))
            f = build_frame(payload, src, SW)
        elif r < 0.5:
            f = fr.build_arp_request(src.mac, src.ip,
                                     SW.ip if rng.random() < 0.8 else rng.randbytes(4))
        elif r < 0.7:
            f = fr.build_echo_request(src.mac, src.ip, SW.mac,
                                      SW.ip if rng.random() < 0.8 else rng.randbytes(4),
                                      rng.getrandbits(16), rng.getrandbits(16),
                                      rng.randbytes(rng.choice([0, 1, 7, 32, 200, 1472])))
        elif r < 0.8:                       # a damaged header
            f = bytearray(build_frame(rng.randbytes(20), src, SW))
            f[rng.randrange(12, 42)] ^= 1 << rng.randrange(8)
            f = bytes(f)
        elif r < 0.9:                       # a damaged echo request
            f = bytearray(fr.build_echo_request(src.mac, src.ip, SW.mac, SW.ip, 1, 2,
                                                rng.randbytes(9)))
            f[rng.randrange(14, len(f))] ^= 1 << rng.randrange(8)
            f = bytes(f)
        else:
            f = rng.randbytes(rng.randrange(60, 120))
        out.append(fr.pad(f))
    return out


def run(frames, *, backpressure=0.3, seed=SEED):
    rng = random.Random(seed)
    m = Module()
    m.submodules.rx = rx = IpRx(PARAMS)
    m.submodules.resp = resp = Responder(PARAMS)
    m.d.comb += [resp.req.valid.eq(rx.reply.valid), resp.req.payload.eq(rx.reply.payload),
                 rx.reply.ready.eq(resp.req.ready), rx.responder_busy.eq(resp.busy),
                 resp.tee_addr.eq(rx.tee_addr), resp.tee_data.eq(rx.tee_data),
                 resp.tee_en.eq(rx.tee_en)]
    beats, replies, cur = [], [], bytearray()
    state = {"done": False, "ignored": 0}

    async def source(ctx):
        for f in frames:
            for i, b in enumerate(f):
                ctx.set(rx.i.valid, 1)
                ctx.set(rx.i.payload.data, b)
                ctx.set(rx.i.payload.last, i == len(f) - 1)
                ctx.set(rx.i.payload.length, len(f))
                await ctx.tick().until(rx.i.ready)
            ctx.set(rx.i.valid, 0)
            if rng.random() < 0.3:
                await ctx.tick()
        for _ in range(2000):
            await ctx.tick()
        state["done"] = True

    async def sinks(ctx):
        L = PARAMS.lanes
        while not state["done"]:
            ctx.set(rx.o.ready, rng.random() >= backpressure)
            ctx.set(resp.o.ready, rng.random() >= backpressure)
            b = rx.o.payload.beat
            (_, _, ov, ordy, header, length, lanes, last, tag, mac, ip, port, rv, rrdy, rdata,
             rlast, ign) = await ctx.tick().sample(
                rx.o.valid, rx.o.ready, b.header.as_value(), b.length, b.data.as_value(),
                b.last, b.tag, rx.o.payload.sender.mac,
                rx.o.payload.sender.ip, rx.o.payload.sender.port, resp.o.valid, resp.o.ready,
                resp.o.payload.data, resp.o.payload.last, rx.ignored)
            if ov and ordy:
                beats.append((header, length,
                              tuple((lanes >> (32 * i)) & 0xFFFFFFFF for i in range(L)),
                              last, tag, mac, ip, port))
            if rv and rrdy:
                cur.append(rdata)
                if rlast:
                    replies.append(bytes(cur))
                    cur.clear()
            state["ignored"] += ign

    sim = Simulator(m)
    sim.add_clock(8e-9)
    sim.add_testbench(source)
    sim.add_testbench(sinks)
    sim.run()
    return beats, replies, state["ignored"]


def expected(frames):
    fe = FrontEnd(PARAMS, JobTable.from_dict({"jobs": []}, PARAMS))
    beats, replies = [], []
    for f in frames:
        d = fr.parse(f, PARAMS.port)
        if d is not None:
            src = d.src
            for b in message_to_beats(d.payload, PARAMS.lanes):
                beats.append((b.header, b.length, b.data, int(b.last), 0,
                              int.from_bytes(src.mac, "big"), int.from_bytes(src.ip, "big"),
                              src.port))
            fe.ignored += 0
        else:
            replies += [r for _, r in fe._deliver(0, f)]
    return beats, replies, fe.ignored


def test_parser_and_responder():
    rng = random.Random(SEED)
    frames = random_frames(rng, 120)
    beats, replies, ignored = run(frames)
    exp_beats, exp_replies, exp_ignored = expected(frames)
    assert exp_replies and exp_ignored and exp_beats
    assert beats == exp_beats
    assert [fr.pad(r) for r in replies] == exp_replies
    assert ignored == exp_ignored


def test_back_to_back_without_backpressure():
    rng = random.Random(SEED + 5)
    frames = random_frames(rng, 40)
    beats, replies, ignored = run(frames, backpressure=0.0, seed=SEED + 5)
    exp_beats, exp_replies, exp_ignored = expected(frames)
    assert beats == exp_beats
    assert [fr.pad(r) for r in replies] == exp_replies
    assert ignored == exp_ignored
