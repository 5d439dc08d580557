"""The formal harness of the multicast back-end alone (``hdl/multicast.py``):
the real ``Multicast`` of the core's formal configuration (W_max = 3,
K = L = 1, its buffer of 4 beats, as ``NetaggCore`` sizes it), driven by an
environment that keeps the slot table's side of the contract, and a model of
what must leave.

Environment (free inputs each cycle, within the slot table's contract): a
RESULT descriptor (multicast or not, 1..3 workers, requester 0..2, n, job,
ver, offset, tag) offered only with a credit for its beat (the credit is the
buffer's 4 beats, taken at each descriptor, returned by ``free``); the
beat of each descriptor at least two cycles after it, in order, whenever the
solver chooses (free data bits, NaN and overflow flags); ``o.ready``.

Property ``fanout``: every egress beat is the model's next one: for a
multicast descriptor of W workers, W copies to workers 0, 1, .., W-1 in turn,
for a retransmission one copy to its requester, each with the descriptor's
header fields, status ``n | nan << 8 | ovf << 9`` and the stored beat's
data; nothing else leaves; a presented beat stays until taken; ``busy`` is
high while anything is owed; with ``o.ready`` never low two cycles in a row
a beat leaves at least every ``PROGRESS`` cycles while one is owed
(property ``progress``, the only one with that assumption).
"""

from __future__ import annotations

import sys

from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, ResetSignal, Signal

from netagg import wire
from netagg.hdl import core as core_mod
from netagg.hdl import layouts
from tests.formal.harness import CONFIG

PROPERTIES = ("fanout", "progress")
DEPTH = 4                          # the core's result buffer for K/L = 1 (4 x beats)
MQ = 16                            # RESULTs in flight the model can track (4 + 8 queued)
# the lines of this file whose assertions bound the model, not the multicast
MODEL_LIMIT_LINES: set[int] = set()
PROGRESS = 10


class MulticastTop(Elaboratable):
    def __init__(self, props=PROPERTIES, *, params=CONFIG, progress=PROGRESS):
        unknown = set(props) - set(PROPERTIES)
        if unknown:
            raise ValueError(f"unknown properties {sorted(unknown)}")
        self.props = frozenset(props)
        self.params = params
        self.progress = progress
        self.d_valid = Signal()
        self.d_mc = Signal()
        self.d_workers = Signal(2)
        self.d_worker = Signal(2)
        self.d_n = Signal(2)
        self.d_job = Signal()
        self.d_ver = Signal()
        self.d_offset = Signal(2)
        self.d_tag = Signal(2)
        self.b_go = Signal()
        self.b_data = Signal(2)
        self.b_nan = Signal()
        self.b_ovf = Signal()
        self.o_ready = Signal()
        self.watch_in = Signal(8)

    @property
    def ports(self):
        return [self.d_valid, self.d_mc, self.d_workers, self.d_worker, self.d_n, self.d_job,
                self.d_ver, self.d_offset, self.d_tag, self.b_go, self.b_data, self.b_nan,
                self.b_ovf, self.o_ready, self.watch_in]

    def elaborate(self, platform):
        m = Module()
        p = self.params
        # The class the core instantiates (a mutation of it applies here too).
        m.submodules.mc = mc = core_mod.Multicast(p, depth=DEPTH)
        m.d.comb += Assume(~ResetSignal())
        want = self.props

        def check(cond, prop="fanout", *, model_limit=False):
            if model_limit:
                MODEL_LIMIT_LINES.add(sys._getframe(1).f_lineno)
            if prop in want:
                m.d.comb += Assert(cond, prop, src_loc_at=1)

        # ---------------- the environment: descriptors under credit ----------------
        credit = Signal(range(DEPTH + 1), init=DEPTH)
        rd = mc.res_desc
        take = rd.valid & rd.ready
        freed = Mux(mc.free.valid, mc.free.payload, 0)
        m.d.sync += credit.eq(credit - take + freed)
        check(credit <= DEPTH)          # nothing freed that was not taken
        workers = Mux(self.d_workers == 0, 1, self.d_workers)       # 1..3
        held = Signal()                # a descriptor offered and not taken stays the same
        m.d.sync += held.eq(rd.valid & ~rd.ready)
        hold = {k: Signal(len(v), name=f"hold_{k}") for k, v in
                dict(mc=self.d_mc, workers=workers, worker=self.d_worker, n=self.d_n,
                     job=self.d_job, ver=self.d_ver, offset=self.d_offset,
                     tag=self.d_tag).items()}
        cur = dict(mc=Signal(name="cur_mc"), workers=Signal(2, name="cur_workers"),
                   worker=Signal(2, name="cur_worker"), n=Signal(2, name="cur_n"),
                   job=Signal(name="cur_job"), ver=Signal(name="cur_ver"),
                   offset=Signal(2, name="cur_offset"), tag=Signal(2, name="cur_tag"))
        fresh = dict(mc=self.d_mc, workers=workers, worker=Mux(self.d_worker == 3, 2,
                                                                 self.d_worker),
                     n=self.d_n, job=self.d_job, ver=self.d_ver, offset=self.d_offset,
                     tag=self.d_tag)
        for k in cur:
            m.d.comb += cur[k].eq(Mux(held, hold[k], fresh[k]))
            m.d.sync += hold[k].eq(cur[k])
        m.d.comb += [
            rd.valid.eq(held | (self.d_valid & (credit >= 1))),
            rd.payload.multicast.eq(cur["mc"]), rd.payload.workers.eq(cur["workers"]),
            rd.payload.n.eq(cur["n"]), rd.payload.beats.eq(1), rd.payload.tag.eq(cur["tag"]),
            rd.payload.meta.worker.eq(cur["worker"]), rd.payload.meta.job.eq(cur["job"]),
            rd.payload.meta.ver.eq(cur["ver"]), rd.payload.meta.offset.eq(cur["offset"]),
            rd.payload.meta.dtype.eq(layouts.DType.INT32), rd.payload.meta.op.eq(layouts.Op.SUM),
            rd.payload.meta.count.eq(1), rd.payload.meta.slot.eq(0),
        ]

        # ---------------- the model: RESULTs in order ----------------
        # Per RESULT only its destinations (multicast, workers, requester);
        # every other field, its data and flags for one RESULT, ``watch``,
        # chosen freely at reset: what is proven for it holds for each one.
        qb = (MQ - 1).bit_length()
        dq = [dict(mc=Signal(name=f"q{k}_mc"), workers=Signal(2, name=f"q{k}_workers"),
                   worker=Signal(2, name=f"q{k}_worker")) for k in range(MQ)]
        qw = Signal(8)                 # descriptors taken
        qw1 = Signal(8)                # ... one cycle ago
        qbt = Signal(8)                # beats sent
        qr = Signal(8)                 # RESULTs whose every copy has left
        m.d.sync += qw1.eq(qw)
        check((qw - qr) <= MQ, model_limit=True)
        with m.If(take):
            m.d.sync += qw.eq(qw + 1)
            with m.Switch(qw[:qb]):
                for k, e in enumerate(dq):
                    with m.Case(k):
                        m.d.sync += [e[f].eq(cur[f]) for f in e]
        first = Signal(init=1)
        watch = Signal(8)
        m.d.sync += first.eq(0)
        with m.If(first):
            m.d.sync += watch.eq(self.watch_in)
        watch_now = Mux(first, self.watch_in, watch)
        wf = {f: Signal(len(v), name=f"w_{f}") for f, v in cur.items()}
        wdata, wnan, wovf = Signal(2), Signal(), Signal()
        with m.If(take & (qw == watch_now)):
            m.d.sync += [wf[f].eq(cur[f]) for f in cur]
        # Beats: in order, each at least two cycles after its descriptor
        # (only descriptors taken before the previous cycle are owed one).
        send_beat = self.b_go & (qbt != qw1)
        rb = mc.res_beat
        m.d.comb += [rb.valid.eq(send_beat), rb.payload.data[0].eq(self.b_data),
                     rb.payload.mask.eq(1), rb.payload.bf16.eq(0),
                     rb.payload.nan.eq(self.b_nan), rb.payload.ovf.eq(self.b_ovf),
                     rb.payload.last.eq(1)]
        with m.If(send_beat):
            m.d.sync += qbt.eq(qbt + 1)
            with m.If(qbt == watch_now):
                m.d.sync += [wdata.eq(self.b_data), wnan.eq(self.b_nan), wovf.eq(self.b_ovf)]

        # ---------------- egress: the model's next copy ----------------
        h = {f: Signal(len(v), name=f"h_{f}") for f, v in dq[0].items()}
        with m.Switch(qr[:qb]):
            for k, e in enumerate(dq):
                with m.Case(k):
                    m.d.comb += [h[f].eq(e[f]) for f in h]
        dest = Signal(2)
        o = mc.o
        m.d.comb += o.ready.eq(self.o_ready)
        fire = o.valid & o.ready
        oh = o.payload.header
        exp_worker = Mux(h["mc"], dest, h["worker"])
        status = wf["n"] | (wnan << 8) | (wovf << 9)
        fields = ((oh.job == wf["job"]) & (oh.ver == wf["ver"]) & (oh.offset == wf["offset"])
                  & (oh.status == status) & (o.payload.data[0] == wdata)
                  & (o.payload.tag == wf["tag"]))
        fixed = ((oh.version == wire.VERSION) & (oh.type == layouts.MsgType.RESULT)
                 & (oh.reserved == 0) & (oh.slot == 0) & (oh.dtype == layouts.DType.INT32)
                 & (oh.op == layouts.Op.SUM) & (oh.count == 1) & o.payload.last)
        # A copy only of a RESULT whose beat is in (qr < qbt), to the next
        # destination; the watched one's copies carry its fields and data.
        check(~fire | ((qr != qbt) & fixed & (oh.worker == exp_worker)))
        check(~fire | (qr != watch) | fields)
        last_copy = ~h["mc"] | (dest == h["workers"] - 1)
        with m.If(fire):
            with m.If(last_copy):
                m.d.sync += [qr.eq(qr + 1), dest.eq(0)]
            with m.Else():
                m.d.sync += dest.eq(dest + 1)
        # Stream rule and busy.
        was_held = Signal()
        m.d.sync += was_held.eq(o.valid & ~o.ready)
        check(~was_held | o.valid)
        check(mc.busy | (qr == qw))
        # Progress, assuming o.ready never low two cycles in a row.
        ready_r = Signal(init=1)
        m.d.sync += ready_r.eq(self.o_ready)
        if "progress" in want:
            m.d.comb += Assume(self.o_ready | ready_r)
        quiet = Signal(range(self.progress + 1))
        with m.If((qr == qbt) | fire):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self.progress):
            m.d.sync += quiet.eq(quiet + 1)
        check(quiet != self.progress, "progress")

        self.covers = {}

        def cover(name, cond):
            sig = Signal(name=f"cover_{name}")
            m.d.comb += [sig.eq(cond), Cover(sig, name, src_loc_at=1)]
            self.covers[name] = sig
        cover("third_copy_watched", fire & h["mc"] & (h["workers"] == 3) & (dest == 2)
              & (qr == watch) & (watch != 0))
        cover("two_full_fanouts", fire & last_copy & h["mc"] & (h["workers"] == 3) & (qr == 1))
        cover("retransmit_after_fanout", fire & ~h["mc"] & (qr == 1))
        cover("buffer_full", credit == 0)
        return m
