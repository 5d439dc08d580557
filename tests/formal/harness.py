"""The formal harness: the real ``NetaggCore`` in a small configuration,
driven by free inputs, with a reference model of protocol.md's slot
algorithm in HDL (shadow state) and the properties as Amaranth
``Assert`` / ``Assume`` / ``Cover`` statements.

Configuration (``CONFIG``): W_max = 3, S = 2, J = 2, K = L = 1, int32 sum
only, ``fp_stages=0`` (lane latency 1). The job table is written through the
control port in the first cycles (``SETUP``): job 0 has slot 0 and W = 3,
job 1 has slot 1 and W = 1 (a round completes with one message).

Free inputs each cycle: a message (``in_*``: job, slot, worker and count
fields of full header width, ver, offset, a bad-version flag), ``o_ready``,
``ctrl_addr`` (counter reads) and ``stop``. Every message is one beat
(``last``), with a UDP length matching its count, dtype int32 and op sum;
its one element is ``1 << (4 * job[0] + worker[1:0])``, so a RESULT's value
says which contributions were combined into it. Tags number the messages.

Properties (each can be enabled alone, see ``PROPERTIES``):

``once``      every RESULT's value has exactly ``n`` bits set, all of them
              bits of its job's workers: no contribution combined twice,
              none of another job.
``isolation`` every slot-word write after the post-reset clear belongs to an
              accepted message and goes to its job's base + slot.
``verdicts``  one verdict per message, in arrival order, equal to the
              reference model's; the counters read through the control port
              equal the counts of those verdicts (and of RESULTs sent).
``results``   every RESULT equals the model's (header, status n, value, tag):
              a completed round goes to workers 0..W-1 once each, a
              retransmission to its requester; no other RESULT.
``liveness``  ``idle`` implies nothing outstanding; assuming ``o.ready`` is
              never low two cycles in a row: while the core is busy, a verdict
              or a RESULT beat leaves at least every ``PROGRESS`` cycles, a
              presented egress beat stays presented until taken, and
              once ``stop`` is raised (no new messages) ``idle`` is high
              within ``DRAIN`` cycles.
"""

from __future__ import annotations

import sys

from amaranth.hdl import (
    Assert,
    Assume,
    Cat,
    Const,
    Cover,
    Elaboratable,
    Module,
    Mux,
    ResetSignal,
    Signal,
)

from netagg import regmap, wire
from netagg.hdl import layouts
from netagg.hdl.core import NetaggCore
from netagg.params import Params

CONFIG = Params(workers=3, slots=2, jobs=2, elements=1, lanes=1,
                dtypes=("int32",), ops=("sum",))
FP_STAGES = 0
JOBS = ((0, 1, 3), (1, 1, 1))      # (base, nslots, W) of jobs 0 and 1
PROPERTIES = ("once", "isolation", "verdicts", "results", "liveness")
DRAIN = 24                         # liveness: idle this many cycles after stop
PROGRESS = 13                      # liveness: busy cycles without a verdict or RESULT beat
QUEUE = 16                         # messages in flight the model can track
RQUEUE = 8                         # RESULT messages the model can hold
WQUEUE = 6                         # isolation: slot-word writes ahead of their verdicts
WORK_MAX = (QUEUE + 1) * (1 + 3) + RQUEUE * 3   # liveness: the work measure's bound
# the lines of this file whose assertions bound the model, not the core
# (filled as a harness is elaborated)
MODEL_LIMIT_LINES: set[int] = set()

V = wire.Verdict


def setup_writes():
    """The control writes of the job table (regmap.job_writes order)."""
    writes = []
    for j, (base, nslots, w) in enumerate(JOBS):
        writes += [(regmap.job_addr(j, regmap.JOB_BASE_SLOT), base),
                   (regmap.job_addr(j, regmap.JOB_NSLOTS), nslots),
                   (regmap.job_addr(j, regmap.JOB_CTRL), regmap.job_ctrl_word(True, w))]
    return writes


SETUP = len(setup_writes())


def find_state_memory(memories, params):
    """The slot table's slot-word RAM among the memories created while
    elaborating the core: depth S, two copies per word with a ``bits`` field."""
    from amaranth.lib import data
    found = [mem for mem in memories
             if mem.depth == params.slots and isinstance(mem.shape, data.ArrayLayout)
             and mem.shape.length == 2 and "bits" in dict(mem.shape.elem_shape)]
    if len(found) != 1:
        raise RuntimeError(f"expected one slot-word memory, found {len(found)}")
    return found[0]


class FormalTop(Elaboratable):
    """The core with its driver, reference model and properties.

    ``props``: the properties whose assertions are built (covers always are).
    ``covers``: the names of the covers built (None: every one).
    ``halves``: each widened field's two upper-bit inputs free (default);
    False assumes them equal and the offset's zero (session 40's driver:
    one bit sets every upper bit), for the cover run, whose traces need no
    more and whose deep steps the larger input space slows many times.
    ``steer``: input names (``in_job``, ``in_slot``, ...) and the values
    assumed for them at every cycle (None: every input free): a cover's
    trace under a narrower driver is a trace of the core too, and the
    solver finds a deep one many times sooner (``result_retransmit``).
    """

    @staticmethod
    def cover_list():
        """The names of the covers, in the order they are built."""
        from netagg.hdl import layouts
        return ([f"verdict_{v.name.lower()}" for v in layouts.Verdict]
                + ["result_full_round", "desc_full_round", "result_one_worker_round",
                   "result_retransmit", "write_job1_slot", "bad_slot_into_job1",
                   "counter_read", "drained", "drained_from_busy"])

    STEERABLE = ("in_valid", "in_job", "in_slot", "in_worker", "in_ver", "in_count",
                 "in_offset", "in_hi", "in_badver")

    @classmethod
    def check_steer(cls, steer):
        """Raise ValueError unless every name of ``steer`` is a driver input."""
        for name in steer:
            if name not in cls.STEERABLE:
                raise ValueError(f"cannot steer {name!r}: not a driver input")

    def __init__(self, props=PROPERTIES, *, params=CONFIG, drain=DRAIN, progress=PROGRESS,
                 halves=True, covers=None, steer=None):
        unknown = set(props) - set(PROPERTIES)
        if unknown:
            raise ValueError(f"unknown properties {sorted(unknown)}")
        self.props = frozenset(props)
        self.params = params
        self.drain = drain
        self.progress = progress
        self.halves = halves
        self.cover_names = None if covers is None else frozenset(covers)
        self.check_steer(steer or {})
        self.steer = dict(steer or {})
        if covers is not None and not self.cover_names <= set(self.cover_list()):
            raise ValueError(f"unknown covers {sorted(self.cover_names - set(self.cover_list()))}")
        self.in_valid = Signal()
        # Narrow free fields (zero-extended into the header), each with two
        # ``in_hi`` bits (job, slot, worker, count, offset in that order):
        # one sets the field's upper bits within its low half (the job's low
        # nibble, a 16-bit field's low byte, the offset's low 16 bits), the
        # other its whole high half, so that small low bits come with a
        # nonzero high half too (an 8-bit compare of a 16-bit field fails:
        # session 40's worker check).
        self.in_job = Signal(2)
        self.in_slot = Signal(2)
        self.in_worker = Signal(2)
        self.in_ver = Signal()
        self.in_count = Signal(2)
        self.in_offset = Signal(1)
        self.in_hi = Signal(10)
        self.in_badver = Signal()
        self.o_ready = Signal()
        self.ctrl_addr = Signal(16)
        self.stop = Signal()
        # (STEERABLE names exactly the driver's inputs)
        assert set(self.STEERABLE) == {n for n in vars(self) if n.startswith("in_")}

    @property
    def ports(self):
        return [self.in_valid, self.in_job, self.in_slot, self.in_worker, self.in_ver,
                self.in_count, self.in_offset, self.in_hi, self.in_badver, self.o_ready,
                self.ctrl_addr, self.stop]

    def elaborate(self, platform):
        from amaranth.hdl import Fragment
        from amaranth.lib import memory as memory_mod

        m = Module()
        p = self.params
        core = NetaggCore(p, fp_stages=FP_STAGES)
        # Elaborate the core now, noting the memories it creates: the
        # isolation property watches the slot-word RAM's write port.
        created = []
        orig_init = memory_mod.Memory.__init__

        def recording_init(mem, *args, **kwargs):
            orig_init(mem, *args, **kwargs)
            created.append(mem)
        memory_mod.Memory.__init__ = recording_init
        # The multicast back-end, for its descriptor input (``results``).
        from netagg.hdl import core as core_mod
        orig_mcast = core_mod.Multicast         # (or a mutation's wrapper of it)
        mcasts = []

        def recording_mcast(*args, **kwargs):
            mcasts.append(orig_mcast(*args, **kwargs))
            return mcasts[-1]
        core_mod.Multicast = recording_mcast
        try:
            m.submodules.core = Fragment.get(core, platform)
        finally:
            memory_mod.Memory.__init__ = orig_init
            core_mod.Multicast = orig_mcast
        if len(mcasts) != 1:
            raise RuntimeError(f"expected one Multicast, found {len(mcasts)}")
        res_desc = mcasts[0].res_desc
        st_wr = find_state_memory(created, p).write_ports[0]
        want = self.props
        rst = ResetSignal()
        m.d.comb += Assume(~rst)

        def check(prop, cond, *, model_limit=False):
            if model_limit:
                # (a bound of the model, not a promise of the core: a planted
                # bug is not caught by it, tests/test_formal.py)
                MODEL_LIMIT_LINES.add(sys._getframe(1).f_lineno)
            if prop in want:
                # Located at the check's line: a failure names the assertion.
                m.d.comb += Assert(cond, prop, src_loc_at=1)

        # ---------------- setup: job table writes ----------------
        writes = setup_writes()
        step = Signal(range(len(writes) + 1))
        setup_done = Signal()
        m.d.comb += setup_done.eq(step == len(writes))
        with m.If(~setup_done):
            m.d.sync += step.eq(step + 1)
        with m.Switch(step):
            for k, (addr, value) in enumerate(writes):
                with m.Case(k):
                    m.d.comb += [core.ctrl_we.eq(1), core.ctrl_addr.eq(addr),
                                 core.ctrl_wdata.eq(value)]
            with m.Default():
                m.d.comb += core.ctrl_addr.eq(self.ctrl_addr)
        # The slot words are cleared after reset: the core is ready once done.
        cleared = Signal()
        with m.If(core.i.ready):
            m.d.sync += cleared.eq(1)

        # ---------------- the driver: one message at a time ----------------
        stopped = Signal()
        with m.If(self.stop & setup_done):
            m.d.sync += stopped.eq(1)
        pv = Signal()
        pjob = Signal(8)
        pslot = Signal(16)
        pworker = Signal(16)
        pver = Signal()
        pcount = Signal(16)
        poffset = Signal(32)
        pbad = Signal()
        seq = Signal(16)               # messages handed to the core
        # the driver holds a message back while the model tracks QUEUE
        # messages without their verdicts (a deep enough run otherwise
        # hands the core more than the model's queue holds: sessions 39,
        # 40), in every run
        model_room = Signal(name="model_room")
        take = core.i.valid & core.i.ready

        for name, v in self.steer.items():
            m.d.comb += Assume(getattr(self, name) == v)
        if not self.halves:
            m.d.comb += [Assume(self.in_hi[2 * k] == self.in_hi[2 * k + 1]) for k in range(4)]
            m.d.comb += Assume(self.in_hi[8:10] == 0)

        def widen(lo, k, width):
            mid, top = self.in_hi[2 * k], self.in_hi[2 * k + 1]
            half = width // 2
            return Cat(lo, mid.replicate(half - len(lo)), top.replicate(width - half))
        with m.If(~pv | take):
            m.d.sync += [pv.eq(self.in_valid & setup_done & ~stopped & ~self.stop),
                         pjob.eq(widen(self.in_job, 0, 8)),
                         pslot.eq(widen(self.in_slot, 1, 16)),
                         pworker.eq(widen(self.in_worker, 2, 16)),
                         pver.eq(self.in_ver),
                         pcount.eq(widen(self.in_count, 3, 16)),
                         poffset.eq(widen(self.in_offset, 4, 32)),
                         pbad.eq(self.in_badver)]
        with m.If(take):
            m.d.sync += seq.eq(seq + 1)
        value = Signal(32)
        m.d.comb += value.eq(Const(1, 32) << Cat(pworker[:2], pjob[0]))
        hdr = core.i.payload.header
        m.d.comb += [
            core.i.valid.eq(pv & model_room),
            hdr.version.eq(Mux(pbad, wire.VERSION + 1, wire.VERSION)),
            hdr.type.eq(layouts.MsgType.CONTRIB),
            hdr.ver.eq(pver), hdr.job.eq(pjob), hdr.dtype.eq(layouts.DType.INT32),
            hdr.op.eq(layouts.Op.SUM), hdr.slot.eq(pslot), hdr.worker.eq(pworker),
            hdr.offset.eq(poffset), hdr.count.eq(pcount),
            core.i.payload.length.eq(wire.HEADER_BYTES + (pcount << 2)),
            core.i.payload.tag.eq(seq),
            core.i.payload.last.eq(1),
            core.i.payload.data[0].eq(value),
            core.o.ready.eq(self.o_ready),
        ]

        # ---------------- the model: messages in flight ----------------
        qb = (QUEUE - 1).bit_length()
        mq = [dict(job=Signal(8, name=f"mq{k}_job"), slot=Signal(16, name=f"mq{k}_slot"),
                   worker=Signal(16, name=f"mq{k}_worker"), ver=Signal(name=f"mq{k}_ver"),
                   count=Signal(16, name=f"mq{k}_count"),
                   offset=Signal(32, name=f"mq{k}_offset"), bad=Signal(name=f"mq{k}_bad"),
                   value=Signal(32, name=f"mq{k}_value"))
              for k in range(QUEUE)]
        with m.If(take):
            with m.Switch(seq[:qb]):
                for k, e in enumerate(mq):
                    with m.Case(k):
                        m.d.sync += [e["job"].eq(pjob), e["slot"].eq(pslot),
                                     e["worker"].eq(pworker), e["ver"].eq(pver),
                                     e["count"].eq(pcount), e["offset"].eq(poffset),
                                     e["bad"].eq(pbad), e["value"].eq(value)]
        head = Signal(16)              # verdicts received
        outstanding = Signal(16)
        m.d.comb += [outstanding.eq(seq - head), model_room.eq(outstanding < QUEUE)]
        check("verdicts", outstanding <= QUEUE, model_limit=True)
        h = {k: Signal(len(v), name=f"h_{k}") for k, v in mq[0].items()}
        with m.Switch(head[:qb]):
            for k, e in enumerate(mq):
                with m.Case(k):
                    m.d.comb += [h[f].eq(e[f]) for f in h]

        # Slot state of the model: per absolute slot and copy.
        W = p.workers
        ms = [[dict(bits=Signal(W, name=f"ms{s}{c}_bits"), n=Signal(2, name=f"ms{s}{c}_n"),
                    done=Signal(name=f"ms{s}{c}_done"),
                    offset=Signal(32, name=f"ms{s}{c}_offset"),
                    acc=Signal(32, name=f"ms{s}{c}_acc"))
               for c in range(2)] for s in range(p.slots)]

        # The head message's expected verdict.
        jbase = Signal(16)
        jn = Signal(17)
        jw = Signal(8)
        for j, (base, nslots, w) in enumerate(JOBS):
            with m.If(h["job"] == j):
                m.d.comb += [jbase.eq(base), jn.eq(nslots), jw.eq(w)]
        sabs = Signal(16)
        m.d.comb += sabs.eq(jbase + h["slot"])
        cur = {f: Signal(len(ms[0][0][f]), name=f"c_{f}") for f in ms[0][0]}
        oth = {f: Signal(len(ms[0][0][f]), name=f"o_{f}") for f in ms[0][0]}
        for s in range(p.slots):
            for c in range(2):
                with m.If((sabs == s) & (h["ver"] == c)):
                    m.d.comb += [cur[f].eq(ms[s][c][f]) for f in cur]
                with m.If((sabs == s) & (h["ver"] != c)):
                    m.d.comb += [oth[f].eq(ms[s][c][f]) for f in oth]
        wbit = Signal(W)
        m.d.comb += wbit.eq(Const(1, W) << h["worker"][:2])
        is_new = (cur["bits"] & wbit) == 0
        fresh = (cur["n"] == 0) | cur["done"]
        n_new = Mux(fresh, 1, cur["n"] + 1)
        expect = Signal(4)
        length = Signal(16)
        m.d.comb += length.eq(wire.HEADER_BYTES + (h["count"] << 2))
        with m.If(length < wire.HEADER_BYTES):      # the 16-bit length wrapped
            m.d.comb += expect.eq(V.BAD_LENGTH)
        with m.Elif(h["bad"]):
            m.d.comb += expect.eq(V.BAD_HEADER)
        with m.Elif(h["count"] != 1):
            m.d.comb += expect.eq(V.BAD_LENGTH)
        with m.Elif(h["job"] >= len(JOBS)):
            m.d.comb += expect.eq(V.BAD_JOB)
        with m.Elif(h["slot"] >= jn):
            m.d.comb += expect.eq(V.BAD_SLOT)
        with m.Elif(h["worker"] >= jw):
            m.d.comb += expect.eq(V.BAD_WORKER)
        with m.Elif(is_new & (cur["n"] != 0) & ~cur["done"] & (h["offset"] != cur["offset"])):
            m.d.comb += expect.eq(V.MISMATCH)
        with m.Elif(is_new):
            m.d.comb += expect.eq(V.ACCEPT)
        with m.Elif(cur["done"]):
            m.d.comb += expect.eq(V.RETRANSMIT)
        with m.Else():
            m.d.comb += expect.eq(V.DUPLICATE)
        acc_new = Mux(fresh, h["value"], cur["acc"] + h["value"])
        completes = (expect == V.ACCEPT) & (n_new == jw)

        # ---------------- verdicts ----------------
        vv = core.v.valid
        vcode = core.v.payload.code.as_value()
        check("verdicts", ~vv | (outstanding != 0))
        check("verdicts", ~vv | (core.v.payload.tag == head))
        check("verdicts", ~vv | (vcode == expect))
        with m.If(vv):
            m.d.sync += head.eq(head + 1)
            with m.If(expect == V.ACCEPT):
                for s in range(p.slots):
                    for c in range(2):
                        cs = ms[s][c]
                        with m.If((sabs == s) & (h["ver"] == c)):
                            m.d.sync += [cs["n"].eq(n_new), cs["done"].eq(n_new == jw),
                                         cs["acc"].eq(acc_new),
                                         cs["bits"].eq(Mux(fresh, wbit, cs["bits"] | wbit))]
                            with m.If(fresh):
                                m.d.sync += cs["offset"].eq(h["offset"])
                        with m.If((sabs == s) & (h["ver"] != c) & cs["done"]):
                            m.d.sync += cs["bits"].eq(cs["bits"] & ~wbit)

        # Counters: the verdicts seen so far (registered like the core's).
        names = regmap.CORE_COUNTERS
        shadow = {name: Signal(32, name=f"sh_{name}") for name in wire.COUNTERS}
        with m.If(vv):
            m.d.sync += shadow["rx"].eq(shadow["rx"] + 1)
            for verdict in V:
                name = "retransmit" if verdict is V.RETRANSMIT else verdict.counter
                if name:
                    with m.If(vcode == verdict):
                        m.d.sync += shadow[name].eq(shadow[name] + 1)
            with m.If(completes):
                m.d.sync += shadow["results"].eq(shadow["results"] + 1)
        o_fire = core.o.valid & core.o.ready
        with m.If(o_fire & core.o.payload.last):
            m.d.sync += shadow["tx"].eq(shadow["tx"] + 1)
        sel = Signal(32)
        known = Signal()
        for name in wire.COUNTERS:
            with m.If(core.ctrl_addr == regmap.COUNTER_BASE + names.index(name)):
                m.d.comb += [sel.eq(shadow[name]), known.eq(1)]
        sel_r = Signal(32)
        known_r = Signal()
        m.d.sync += [sel_r.eq(sel), known_r.eq(known & setup_done)]
        check("verdicts", ~known_r | (core.ctrl_rdata == sel_r))

        # ---------------- RESULTs: the model's queue ----------------
        rb = (RQUEUE - 1).bit_length()
        rq = [dict(job=Signal(1, name=f"rq{k}_job"), ver=Signal(name=f"rq{k}_ver"),
                   offset=Signal(32, name=f"rq{k}_offset"), n=Signal(2, name=f"rq{k}_n"),
                   value=Signal(32, name=f"rq{k}_value"), mc=Signal(name=f"rq{k}_mc"),
                   worker=Signal(2, name=f"rq{k}_worker"), last=Signal(2, name=f"rq{k}_last"),
                   tag=Signal(16, name=f"rq{k}_tag"))
              for k in range(RQUEUE)]
        rw = Signal(8)
        rr = Signal(8)
        dest = Signal(2)
        rpending = Signal(8)
        m.d.comb += rpending.eq(rw - rr)
        push = vv & ((expect == V.RETRANSMIT) | completes)
        with m.If(push):
            m.d.sync += rw.eq(rw + 1)
            with m.Switch(rw[:rb]):
                for k, e in enumerate(rq):
                    with m.Case(k):
                        m.d.sync += [
                            e["job"].eq(h["job"][0]), e["ver"].eq(h["ver"]),
                            e["offset"].eq(Mux(completes, h["offset"], cur["offset"])),
                            e["n"].eq(Mux(completes, n_new, cur["n"])),
                            e["value"].eq(Mux(completes, acc_new, cur["acc"])),
                            e["mc"].eq(completes), e["worker"].eq(h["worker"][:2]),
                            e["last"].eq(jw - 1), e["tag"].eq(head)]
        check("results", rpending <= RQUEUE, model_limit=True)
        r = {k: Signal(len(v), name=f"r_{k}") for k, v in rq[0].items()}
        with m.Switch(rr[:rb]):
            for k, e in enumerate(rq):
                with m.Case(k):
                    m.d.comb += [r[f].eq(e[f]) for f in r]
        oh = core.o.payload.header
        exp_worker = Mux(r["mc"], dest, r["worker"])
        match = ((oh.version == wire.VERSION) & (oh.type == layouts.MsgType.RESULT)
                 & (oh.reserved == 0) & (oh.job == r["job"]) & (oh.slot == 0)
                 & (oh.ver == r["ver"]) & (oh.dtype == layouts.DType.INT32)
                 & (oh.op == layouts.Op.SUM) & (oh.worker == exp_worker)
                 & (oh.offset == r["offset"]) & (oh.count == 1) & (oh.status == r["n"])
                 & (core.o.payload.data[0] == r["value"]) & (core.o.payload.tag == r["tag"])
                 & core.o.payload.last)
        check("results", ~o_fire | ((rpending != 0) & match))
        with m.If(o_fire):
            with m.If(~r["mc"] | (dest == r["last"])):
                m.d.sync += [rr.eq(rr + 1), dest.eq(0)]
            with m.Else():
                m.d.sync += dest.eq(dest + 1)

        # The descriptors the slot table hands the multicast back-end, in
        # order, each equal to the model's RESULT of the same rank (a W = 3
        # round's fan-out count and n, at a depth its egress beats are not).
        dq = [dict(mc=Signal(name=f"dq{k}_mc"), workers=Signal(8, name=f"dq{k}_workers"),
                   n=Signal(8, name=f"dq{k}_n"), job=Signal(8, name=f"dq{k}_job"),
                   ver=Signal(name=f"dq{k}_ver"), worker=Signal(8, name=f"dq{k}_worker"),
                   offset=Signal(32, name=f"dq{k}_offset"), tag=Signal(16, name=f"dq{k}_tag"),
                   beats=Signal(8, name=f"dq{k}_beats"))
              for k in range(RQUEUE)]
        dw = Signal(8)                 # descriptors taken
        dc = Signal(8)                 # descriptors compared with the model
        rd = res_desc.payload
        with m.If(res_desc.valid & res_desc.ready):
            m.d.sync += dw.eq(dw + 1)
            with m.Switch(dw[:rb]):
                for k, e in enumerate(dq):
                    with m.Case(k):
                        m.d.sync += [e["mc"].eq(rd.multicast), e["workers"].eq(rd.workers),
                                     e["n"].eq(rd.n), e["job"].eq(rd.meta.job),
                                     e["ver"].eq(rd.meta.ver), e["worker"].eq(rd.meta.worker),
                                     e["offset"].eq(rd.meta.offset), e["tag"].eq(rd.tag),
                                     e["beats"].eq(rd.beats)]
        d = {k: Signal(len(v), name=f"d_{k}") for k, v in dq[0].items()}
        md = {k: Signal(len(v), name=f"md_{k}") for k, v in rq[0].items()}
        with m.Switch(dc[:rb]):
            for k, e in enumerate(dq):
                with m.Case(k):
                    m.d.comb += [d[f].eq(e[f]) for f in d]
                    m.d.comb += [md[f].eq(rq[k][f]) for f in md]
        both = (dc != dw) & (dc != rw)
        # (The harness's queues are deep enough: no entry is overwritten unread.)
        hs = res_desc.valid & res_desc.ready
        check("results", ((dw - dc) <= RQUEUE) & ((rw - dc) <= RQUEUE))
        check("results", ~(hs & ((dw - dc) == RQUEUE) & ~both))
        check("results", ~(push & ((rw - dc) == RQUEUE) & ~both))
        desc_ok = ((d["mc"] == md["mc"]) & (d["n"] == md["n"]) & (d["job"] == md["job"])
                   & (d["ver"] == md["ver"]) & (d["offset"] == md["offset"])
                   & (d["tag"] == md["tag"]) & (d["beats"] == 1)
                   & Mux(md["mc"], d["workers"] == md["last"] + 1, d["worker"] == md["worker"]))
        check("results", ~both | desc_ok)
        with m.If(both):
            m.d.sync += dc.eq(dc + 1)

        # ---------------- once: the value of every RESULT ----------------
        data0 = core.o.payload.data[0]
        popcount = Signal(3)
        m.d.comb += popcount.eq(sum(data0[i] for i in (0, 1, 2, 4, 5)))
        status_n = oh.status[:8]
        job_mask = Mux(oh.job == 0, 0b111, 0b110000)
        check("once", ~o_fire | ((popcount == status_n) & ((data0 & ~job_mask) == 0)))

        # ---------------- isolation: slot-word writes ----------------
        # The slot table writes an accepted message's word once, in message
        # order, at the latest in the cycle of its verdict's decision (the
        # verdict leaves registered): the writes (``wr``, registered) are
        # queued and each ACCEPT verdict takes the oldest (or this cycle's),
        # which must go to its job's base + slot; a write no ACCEPT takes is
        # left in the queue, which is empty whenever the core is idle.
        wr = Signal()
        wr_addr = Signal(len(st_wr.addr))
        m.d.sync += [wr.eq(st_wr.en & cleared), wr_addr.eq(st_wr.addr)]
        wq = [Signal(len(st_wr.addr), name=f"wq{k}") for k in range(WQUEUE)]
        wn = Signal(range(WQUEUE + 1), name="wq_n")
        took = vv & (vcode == V.ACCEPT)
        oldest = Mux(wn == 0, wr_addr, wq[0])
        # (From the message's fields alone, not the model's slot state.)
        fields_ok = (~h["bad"] & (h["count"] == 1) & (h["job"] < len(JOBS)) & (h["slot"] < jn)
                     & (h["worker"] < jw))
        check("isolation", ~took | ((wr | (wn != 0)) & fields_ok & (sabs == oldest)))
        check("isolation", ~wr | took | (wn != WQUEUE))
        check("isolation", ~core.idle | ((wn + wr) == took))
        # the queue after this cycle: shifted by a take, the write appended
        after = [Mux(took, wq[k + 1] if k + 1 < WQUEUE else 0, wq[k]) for k in range(WQUEUE)]
        n_after = Mux(took & (wn != 0), wn - 1, wn)
        with m.If(wr & ~(took & (wn == 0))):
            for k in range(WQUEUE):
                with m.If(n_after == k):
                    m.d.sync += wq[k].eq(wr_addr)
                with m.Else():
                    m.d.sync += wq[k].eq(after[k])
            m.d.sync += wn.eq(n_after + 1)
        with m.Else():
            m.d.sync += [wq[k].eq(after[k]) for k in range(WQUEUE)]
            m.d.sync += wn.eq(n_after)

        # ---------------- liveness ----------------
        # (The verdict of a drop leaves in the cycle the core turns idle.)
        check("liveness", ~core.idle | ((outstanding == vv) & (rpending == 0)))
        check("results", ~core.idle | (rpending == 0))
        ready_r = Signal(init=1)
        m.d.sync += ready_r.eq(self.o_ready)
        if "liveness" in want:
            m.d.comb += Assume(self.o_ready | ready_r)
        quiet = Signal(range(self.progress + 1))
        with m.If(core.idle | vv | o_fire):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self.progress):
            m.d.sync += quiet.eq(quiet + 1)
        check("liveness", quiet != self.progress)
        # Egress stream rule: a presented beat stays presented until taken.
        held = Signal()
        m.d.sync += held.eq(core.o.valid & ~core.o.ready)
        check("liveness", ~held | core.o.valid)
        since = Signal(range(self.drain + 2))
        with m.If(stopped & (since != self.drain + 1)):
            m.d.sync += since.eq(since + 1)
        idle_seen = Signal()
        with m.If(stopped & core.idle & ~pv):
            m.d.sync += idle_seen.eq(1)
        check("liveness", ~(since == self.drain + 1) | idle_seen)
        # The drain bound at every stop within the depth: a work measure
        # (each message presented or in flight counts 1 + W_max, each RESULT
        # copy still to leave 1) never grows once stopped and, while the core
        # is busy, falls at least every PROGRESS cycles; it is at most
        # WORK_MAX, and the core is idle when it is 0 (above), so after a
        # stop the core is idle within PROGRESS * (WORK_MAX + 1) cycles.
        copies = []
        for k, e in enumerate(rq):
            live = (k - rr[:rb])[:rb] < rpending
            n_copies = Mux(e["mc"], e["last"] + 1, 1) - Mux(k == rr[:rb], dest, 0)
            copies.append(Mux(live, n_copies, 0))
        work = Signal(16)             # (wide: an excess is asserted, never wrapped)
        m.d.comb += work.eq((outstanding + pv) * (1 + p.workers) + sum(copies))
        check("liveness", work <= WORK_MAX)
        work_r = Signal.like(work)
        m.d.sync += work_r.eq(work)
        stopped_r = Signal()
        m.d.sync += stopped_r.eq(stopped)
        check("liveness", ~stopped_r | (work <= work_r))
        flat = Signal(range(self.progress + 1))
        with m.If(~stopped | core.idle | (work < work_r)):
            m.d.sync += flat.eq(0)
        with m.Elif(flat != self.progress):
            m.d.sync += flat.eq(flat + 1)
        check("liveness", flat != self.progress)
        work_at_stop = Signal.like(work)
        with m.If(self.stop & setup_done & ~stopped):
            m.d.sync += work_at_stop.eq(work)

        # ---------------- covers ----------------
        self.covers = {}

        self.cover_lines = {}

        def cover(name, cond):
            assert name in self.cover_list(), name
            if self.cover_names is not None and name not in self.cover_names:
                return
            sig = Signal(name=f"cover_{name}")
            m.d.comb += [sig.eq(cond), Cover(sig, name, src_loc_at=1)]
            self.covers[name] = sig
            self.cover_lines[sys._getframe(1).f_lineno] = name
        for verdict in V:
            cover(f"verdict_{verdict.name.lower()}", vv & (vcode == verdict) & (expect == verdict))
        cover("result_full_round", o_fire & (status_n == 3) & r["mc"])
        cover("desc_full_round", both & d["mc"] & (d["n"] == 3) & (d["workers"] == 3))
        cover("result_one_worker_round", o_fire & (oh.job == 1) & r["mc"])
        cover("result_retransmit", o_fire & ~r["mc"])
        cover("write_job1_slot", wr & (wr_addr == 1))
        cover("bad_slot_into_job1", vv & (vcode == V.BAD_SLOT) & (h["job"] == 0)
              & (sabs == 1))
        cover("counter_read", known_r & (sel_r != 0) & (core.ctrl_rdata == sel_r))
        cover("drained", stopped & idle_seen & (shadow["tx"] != 0))
        cover("drained_from_busy", stopped & core.idle & (work_at_stop >= 1 + p.workers + 1))
        # every cover named in cover_list() is built (or chosen)
        assert set(self.covers) == (self.cover_names or set(self.cover_list()))
        return m
