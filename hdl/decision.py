"""The slot algorithm of protocol.md for one message, as a combinational
function of its descriptor and its slot word (golden model:
:meth:`netagg.sim.message_model.Switch.receive`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.netlist import KEEP
from netagg.hdl.slot_layouts import Mode, beat_count_bits, round_meta, slot_state
from netagg.hdl.validator import descriptor
from netagg.params import Params

__all__ = ["Decision", "beats_of"]


def beats_of(count, lanes: int):
    """ceil(count / lanes) as a value: a shift when ``lanes`` is a power of
    two; else the number of multiples ``k x lanes`` below ``count`` (its
    compares with constants, a thermometer code, encoded in binary: a few
    LUT levels, where a divider is a chain of carry chains)."""
    if lanes == 1:
        return count
    if lanes & (lanes - 1) == 0:
        return (count + (lanes - 1)) >> (lanes - 1).bit_length()
    count = Value.cast(count)
    n = -(-((1 << len(count)) - 1) // lanes)        # multiples below the largest count
    above = [count > k * lanes for k in range(n)] + [Const(0, 1)]
    # exactly k + 1 multiples below count: above[k] and not above[k + 1]
    exact = [above[k] & ~above[k + 1] for k in range(n)]
    return Cat(*(Cat(*(exact[k] for k in range(n) if (k + 1) >> j & 1)).any()
                 for j in range(n.bit_length())))


def desc_terms(params: Params) -> data.StructLayout:
    """Terms of a descriptor alone that the decision uses (for a caller that
    registers them with the descriptor: :meth:`Decision.desc_terms_of`)."""
    n_bits = layouts.bits_for(params.workers + 1)
    return data.StructLayout({
        "worker_bit": unsigned(params.workers),     # one-hot of meta.worker
        # min(workers - 1, params.workers), in the width of a copy's count:
        # a count of distinct workers before a new one (at most
        # params.workers - 1) equals it exactly when the round completes
        # (any value for workers = 0, which the validator drops)
        "workers_m1": unsigned(n_bits),
        "workers_is1": unsigned(1),                 # workers == 1
    })


class Decision(wiring.Component):
    """What the slot algorithm does with one message.

    ``latency=0``: combinational (no state): every output is a function of
    ``desc`` and ``state`` alone. ``latency=1``: a pipeline stage inside
    (for the clock, docs/boards.md): the outputs are those of the ``desc``
    and ``state`` sampled at the most recent clock edge with ``en`` high,
    held while ``en`` is low. Before the stage register: everything that
    does not depend on whether the metadata matches (which copy, the
    bitmap, the count, the word after an ACCEPT, a retransmission and its
    round), the metadata compares per field and the verdict's products
    but for their OR (ACCEPT, ``completes``, ``needs_result`` for a fresh
    round and for a matching one); after it, their OR decides ACCEPT or
    MISMATCH (each of ``accepted``, ``completes``, ``needs_result`` one
    term ANDed with "the metadata matches" and ORed with one register;
    MISMATCH chooses last between the verdict and the one formed from
    registers) and selects the outputs (a few LUT levels). The slot table
    registers the outputs it needs before acting on them.

    Inputs
    ------
    desc : descriptor
        The message as validated (``validator.descriptor``): its verdict so
        far (ACCEPT or a drop reason), header fields, job W, absolute slot.
    state : slot_state
        The slot's word as stored: both copies (index ``ver``). Only with
        ``sources=1`` (the default).
    states : array of ``sources`` slot_state
    take : array of 2 (one per copy) of ``sources - 1`` bits
        With ``sources > 1``: candidate words, and per copy which one holds
        it: the first source whose ``take`` bit is set, else the last. Each
        copy's terms are computed from every candidate and chosen after
        (for a caller that forwards words: the selects are registers and
        meet the terms one multiplexer before the stage register, not
        before the compares).
    pre : desc_terms
        With ``sources > 1``: :meth:`desc_terms_of` of ``desc``, which the
        caller registers with it (no decoder or subtraction before the
        compares).
    last : 2
        With ``sources > 1``: bit ``v`` is ``desc.meta.ver == v`` and no
        ``take[v]`` bit set (the message's copy is the last source's,
        a block RAM's read register for the slot table), registered by the
        caller with them: the last source's terms meet the others' in the
        one LUT before the stage register, the others' choice made beside
        the last source's compares.
    en : 1
        Only with ``latency=1``: the stage register samples ``desc`` and
        ``state`` at the edge.

    Outputs
    -------
    verdict : Verdict
        The validator's drop reason if any; else MISMATCH (a new contributor
        with other metadata than the open round), ACCEPT (a new contributor),
        RETRANSMIT (a known contributor of a completed round) or DUPLICATE.
    mode : Mode
        LANES for ACCEPT, RETRANSMIT for RETRANSMIT, DISCARD otherwise.
    accepted : 1
        ``verdict`` is ACCEPT (one LUT level from the metadata compares'
        OR after the stage register, like ``completes`` and
        ``needs_result``).
    new_state : slot_state
        The slot word after an ACCEPT (to be written only then): the copy
        ``ver`` with the worker's bit set (a fresh bitmap and the header's
        metadata if the copy was empty or done), ``n`` counted and ``done``
        if ``n`` reached W; in the other copy, if done, the worker's bit is
        cleared (it has that copy's RESULT).
    state_after : slot_state
        The slot word after the message, whatever its verdict: ``new_state``
        for ACCEPT, else ``state_before``.
    state_before : slot_state
        The slot word as the message saw it (``state``; with several
        sources, each copy's chosen word): for a caller that keeps
        ``new_state`` and this apart and chooses later, from a registered
        verdict.
    first : 1
        The contribution opens a round (the copy was empty or done).
    completes : 1
        ACCEPT and the round is now complete: a RESULT to workers 0..W-1.
    needs_result : 1
        ``completes`` or RETRANSMIT: the message causes a RESULT.
    result_n : n
        The RESULT's contributor count (after this message for ACCEPT, the
        stored one for RETRANSMIT).
    round : round_meta
        dtype, op, count, offset of the round the message's beats and its
        RESULT belong to: the stored copy's for RETRANSMIT, else the header's.
    beats : beat count
        ceil(round.count / L): the beats to combine or to resend.
    """

    def __init__(self, params: Params, *, latency: int = 0, sources: int = 1):
        if latency not in (0, 1):
            raise ValueError(f"latency must be 0 or 1, not {latency!r}")
        if type(sources) is not int or not 1 <= sources <= 4:
            raise ValueError(f"sources must be an int in 1..4, not {sources!r}")
        self._params = params
        self._latency = latency
        self._sources = sources
        n_shape = slot_state(params).elem_shape["n"].shape
        ports = {
            "desc": In(descriptor(params)),
            **({"state": In(slot_state(params))} if sources == 1 else {
                "states": In(data.ArrayLayout(slot_state(params), sources)),
                "take": In(data.ArrayLayout(unsigned(sources - 1), 2)),
                "pre": In(desc_terms(params)),
                "last": In(2),
            }),
            "verdict": Out(layouts.Verdict),
            "mode": Out(Mode),
            "accepted": Out(1),
            "new_state": Out(slot_state(params)),
            "state_after": Out(slot_state(params)),
            "state_before": Out(slot_state(params)),
            "first": Out(1),
            "completes": Out(1),
            "needs_result": Out(1),
            "result_n": Out(n_shape),
            "round": Out(round_meta(params)),
            "beats": Out(beat_count_bits(params)),
        }
        if latency:
            ports["en"] = In(1)
        super().__init__(ports)

    @property
    def latency(self) -> int:
        return self._latency

    @staticmethod
    def desc_terms_of(params: Params, desc) -> dict:
        """The :func:`desc_terms` of descriptor ``desc`` (a value), as a dict
        of field to value."""
        return {"worker_bit": Cat(*(desc.meta.worker == i for i in range(params.workers))),
                "workers_m1": Mux(desc.workers > params.workers, params.workers,
                                  desc.workers - 1),
                "workers_is1": desc.workers == 1}

    def elaborate(self, platform):
        m = Module()
        p = self._params
        V = layouts.Verdict

        def stage(value, name, attrs=None):
            """``value`` after the stage register (itself with latency 0)."""
            if not self._latency:
                return value
            reg = Signal.like(value, name=name, reset_less=True, attrs=attrs) \
                if isinstance(value, (Signal, data.View)) \
                else Signal(len(value), name=name, reset_less=True, attrs=attrs)
            with m.If(self.en):
                m.d.sync += reg.eq(value)
            return reg

        # ---- before the stage register: everything but the metadata compare's
        # outcome (the compares themselves, per field, ORed after the stage):
        # which copy, the bitmap, the count, the word after an ACCEPT, the
        # retransmission, both candidate beat counts (the round's metadata
        # and beats are selected after it). With several sources, each
        # copy's terms are computed from every source's word and chosen by
        # the copy's ``take`` bits after (only registers select).
        desc_in, hdr_in = self.desc, self.desc.meta
        ver_in = hdr_in.ver
        desc_ok_in = desc_in.verdict == V.ACCEPT
        # (n_after == workers, without the increment on the word's path:
        # the message's ``workers - 1`` compared with the count; with
        # several sources the caller gives these registered, ``pre``)
        if self._sources == 1:
            pre = Signal(desc_terms(p))
            m.d.comb += [getattr(pre, k).eq(v)
                         for k, v in self.desc_terms_of(p, desc_in).items()]
        else:
            pre = self.pre
        worker_bit_in, workers_m1 = pre.worker_bit, pre.workers_m1
        copy_l = slot_state(p).elem_shape
        n_bits = Shape.cast(copy_l["n"].shape).width
        bbits = beat_count_bits(p)

        def terms_of(copy, v):
            """Copy ``v``'s terms from its word ``copy``: the flags, count and
            compares it gives as the message's copy, and its word after an
            ACCEPT (as the message's copy if ``ver`` is ``v``, else as the
            other copy)."""
            fresh = ~copy.open
            n_after = Mux(fresh, 1, copy.n + 1)
            # (the compares each a net of their own, ``keep``: mapped as
            # trees, not chained into the source choice after them)
            new_contributor = Signal(name=f"new_contributor{v}", attrs=KEEP)
            m.d.comb += new_contributor.eq(~(copy.bits & worker_bit_in).any())
            # (a known contributor of a completed copy: RETRANSMIT if the
            # message passed the validator, ANDed after the stage register)
            known_done = ~new_contributor & copy.done
            complete = Signal(name=f"complete{v}", attrs=KEEP)
            differs = Signal(7, name=f"differs{v}", attrs=KEEP)
            m.d.comb += [
                complete.eq(Mux(fresh, pre.workers_is1, copy.n == workers_m1)),
                differs.eq(Cat(hdr_in.dtype != copy.dtype, hdr_in.op != copy.op,
                               hdr_in.count != copy.count,
                               *(hdr_in.offset[k:k + 8] != copy.offset[k:k + 8]
                                 for k in range(0, 32, 8)))),
            ]
            new = Signal(copy_l, name=f"new{v}_in")
            mine = ver_in == v
            m.d.comb += new.eq(copy)
            with m.If(mine):
                with m.If(fresh):
                    m.d.comb += [new.bits.eq(worker_bit_in), new.dtype.eq(hdr_in.dtype),
                                 new.op.eq(hdr_in.op), new.count.eq(hdr_in.count),
                                 new.offset.eq(hdr_in.offset)]
                with m.Else():
                    m.d.comb += new.bits.eq(copy.bits | worker_bit_in)
                m.d.comb += [new.n.eq(n_after), new.done.eq(complete), new.open.eq(~complete)]
            with m.Elif(copy.done):
                m.d.comb += new.bits.eq(copy.bits & ~worker_bit_in)
            beats = Signal(bbits, name=f"beats{v}_in")
            m.d.comb += beats.eq(beats_of(copy.count, p.lanes))
            n_next = Signal(n_bits + 1, name=f"n{v}_after_in")
            m.d.comb += n_next.eq(n_after)
            return Cat(new_contributor, fresh, complete, known_done, differs, n_next, beats,
                       new.as_value())

        def chosen(values, take):
            """The first source whose ``take`` bit is set, else the last."""
            out = values[-1]
            for k in reversed(range(len(values) - 1)):
                out = Mux(take[k], values[k], out)
            return out

        states = [self.state] if self._sources == 1 else list(self.states)
        takes = [None, None] if self._sources == 1 else [self.take[v] for v in range(2)]
        per_copy = []
        words = []
        terms = []
        for v in range(2):
            values = [terms_of(st[v], v) for st in states]
            terms.append(values)
            per_copy.append(values[0] if self._sources == 1 else chosen(values, takes[v]))
            words.append(states[0][v].as_value() if self._sources == 1
                         else chosen([st[v].as_value() for st in states], takes[v]))
        state_in = Signal(slot_state(p))
        m.d.comb += state_in.eq(Cat(*words))
        widths = [1, 1, 1, 1, 7, n_bits + 1, bbits, copy_l.size]
        if self._sources == 1:
            cur = Mux(ver_in, per_copy[1], per_copy[0])      # the message's copy's terms
        else:
            # The message's copy's terms: the last source's copy ``v`` where
            # ``last[v]``, else the other sources' choice for copy ``ver``
            # (an AND-OR of registered selects: the last source's terms
            # pass one LUT).
            others = Mux(ver_in, chosen(terms[1][:-1], takes[1][:-1]),
                         chosen(terms[0][:-1], takes[0][:-1]))
            width = len(terms[0][-1])
            cur = ((terms[0][-1] & self.last[0].replicate(width))
                   | (terms[1][-1] & self.last[1].replicate(width))
                   | (others & (~self.last.any()).replicate(width)))
        fields, pos = [], 0
        for w in widths:
            fields.append(cur[pos:pos + w])
            pos += w
        new_contributor_in, fresh_in, complete_in, known_done_in = fields[:4]
        differs_in, n_after_in, beats_copy_in = fields[4:7]
        flags_in = Cat(new_contributor_in, fresh_in, complete_in, desc_ok_in, known_done_in)
        # the verdict's products but for the metadata compares' OR, formed
        # before the stage register, so that after it each of ACCEPT,
        # ``completes`` and ``needs_result`` is one term ANDed with "the
        # metadata matches" and ORed with one register: (ACCEPT of a fresh
        # round, ACCEPT if the metadata matches, completes of a fresh round,
        # completes if it matches, completes of a fresh round or
        # RETRANSMIT)
        ok_new_in = desc_ok_in & new_contributor_in
        sure_done_in = ok_new_in & fresh_in & complete_in
        prods_in = Cat(ok_new_in & fresh_in, ok_new_in & ~fresh_in, sure_done_in,
                       ok_new_in & ~fresh_in & complete_in,
                       sure_done_in | (desc_ok_in & known_done_in))
        new_in = Signal(slot_state(p))
        m.d.comb += new_in.eq(Cat(*(per_copy[v][pos - copy_l.size:pos] for v in range(2))))

        # both candidates' beat counts at once: the retransmission selects
        # after the stage register (as it selects the round's metadata)
        beats_hdr_in = Signal(bbits)
        m.d.comb += beats_hdr_in.eq(beats_of(hdr_in.count, p.lanes))
        beats_in = Cat(beats_copy_in, beats_hdr_in)

        desc, state = stage(self.desc, "s_desc"), stage(state_in, "s_state")
        new = stage(new_in, "s_new")
        meta_differs = stage(differs_in, "s_differs").any()
        flags = stage(flags_in, "s_flags")
        prods = stage(prods_in, "s_prods")
        n_after = stage(n_after_in, "s_n_after")
        both_beats = stage(beats_in, "s_beats")
        new_contributor, fresh_round, complete, desc_ok, known_done = (flags[k] for k in range(5))
        retransmit = desc_ok & known_done

        # ---- after it: the metadata compare's outcome decides ACCEPT or MISMATCH
        copy = state[desc.meta.ver]
        bbits = beat_count_bits(p)
        beats = Mux(retransmit, both_beats[:bbits], both_beats[bbits:])
        rnd = Signal(round_meta(p))
        hdr = desc.meta
        m.d.comb += [
            rnd.dtype.eq(Mux(retransmit, copy.dtype, hdr.dtype)),
            rnd.op.eq(Mux(retransmit, copy.op, hdr.op)),
            rnd.count.eq(Mux(retransmit, copy.count, hdr.count)),
            rnd.offset.eq(Mux(retransmit, copy.offset, hdr.offset)),
        ]
        same_meta = ~meta_differs
        accepted = prods[0] | (prods[1] & same_meta)
        completes = prods[2] | (prods[3] & same_meta)
        needs_result = prods[4] | (prods[3] & same_meta)
        # the verdict but for MISMATCH, from registers alone; MISMATCH (a
        # new contributor to an open round, the message validated, other
        # metadata) chooses last
        other_verdict, other_mode = Signal(V), Signal(Mode)
        with m.If(~desc_ok):
            m.d.comb += [other_verdict.eq(desc.verdict), other_mode.eq(Mode.DISCARD)]
        with m.Elif(new_contributor):
            m.d.comb += [other_verdict.eq(V.ACCEPT), other_mode.eq(Mode.LANES)]
        with m.Elif(copy.done):
            m.d.comb += [other_verdict.eq(V.RETRANSMIT), other_mode.eq(Mode.RETRANSMIT)]
        with m.Else():
            m.d.comb += [other_verdict.eq(V.DUPLICATE), other_mode.eq(Mode.DISCARD)]
        mismatch = prods[1] & meta_differs
        m.d.comb += [self.verdict.eq(Mux(mismatch, V.MISMATCH, other_verdict)),
                     self.mode.eq(Mux(mismatch, Mode.DISCARD, other_mode))]
        m.d.comb += [
            self.accepted.eq(accepted),
            self.completes.eq(completes),
            self.needs_result.eq(needs_result),
            self.first.eq(fresh_round),
            self.result_n.eq(Mux(accepted, n_after, copy.n)),
            self.round.eq(rnd),
            self.beats.eq(beats),
            self.new_state.eq(new),
            self.state_after.eq(Mux(accepted, new, state)),
            self.state_before.eq(state),
        ]
        return m
