"""One arithmetic lane: combines an accumulator element with a contribution
element for the packet's dtype and op (``../shared/spec/protocol.md``,
Arithmetic; golden model :func:`netagg.sim.arith.to_acc` and
:func:`netagg.sim.arith.combine`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from . import layouts
from .checked import CheckedComponent
from .fp import BF16, FP32, FPAdd, FPMinMax
from .intalu import IntAdd, IntMinMax
from .layouts import DType, Op
from .netlist import KEEP

__all__ = ["Lane", "LaneIn", "LaneOut", "LaneSel", "DEFAULT_STAGES", "decode_sel", "widen_b"]

LaneIn = data.StructLayout({
    "a": unsigned(32),        # accumulator bits (ignored when `first`)
    "b": unsigned(32),        # the contribution's wire element (bf16 in the low 16 bits)
    "dtype": layouts.DType,
    "op": layouts.Op,
    "first": unsigned(1),     # first contribution of a round: r = to_acc(b)
})

LaneOut = data.StructLayout({
    "r": unsigned(32),        # new accumulator bits (bf16 mode "bf16": low 16 bits, upper 0)
    "nan": unsigned(1),       # an input or the result is NaN
    "ovf": unsigned(1),       # finite float sum rounded to inf, or int32 add wrapped
})

LaneSel = data.StructLayout({
    "int": unsigned(1),       # dtype is int32
    "bf16": unsigned(1),      # dtype is bf16
    "sum": unsigned(1),       # op is sum
    "max": unsigned(1),       # op is max
    "first": unsigned(1),     # the beat's ``first``
})
"""The selects a lane decodes from a beat's dtype, op and first (a lane
built with ``decoded=True`` takes them registered on its ``sel`` port)."""


def decode_sel(dtype, op, first) -> dict:
    """The :data:`LaneSel` fields of a beat, as a dict of name to value: works
    on Amaranth values (a :class:`~netagg.hdl.layouts.DType` and
    :class:`~netagg.hdl.layouts.Op` view, a 1-bit ``first``) and on plain
    Python members and ints alike."""
    return {"int": dtype == DType.INT32, "bf16": dtype == DType.BF16,
            "sum": op == Op.SUM, "max": op == Op.MAX, "first": first}


def widen_b(b: Value, is_bf16) -> Value:
    """The contribution element as the lane's adders take it: a bf16 element
    (low 16 bits of ``b``) widened exactly to binary32, any other ``b`` as
    it is."""
    return Mux(is_bf16, Cat(Const(0, 16), b[:16]), b)


DEFAULT_STAGES = 6
"""Default floating-point adder depth (see docs/arithmetic.md for Fmax)."""

_DTYPES = {"int32": DType.INT32, "fp32": DType.FP32, "bf16": DType.BF16}
_OPS = {"sum": Op.SUM, "min": Op.MIN, "max": Op.MAX}

_SEL_EARLY, _SEL_ADD32, _SEL_ADD16 = 0, 1, 2


class Lane(CheckedComponent):
    """Per beat: if ``first``, ``r, nan = to_acc(dtype, b, mode)`` and
    ``ovf = 0``; else ``r, nan, ovf = combine(dtype, op, a, b, mode)``,
    bit-exact with :mod:`netagg.sim.arith` (``mode`` = ``bf16_accumulate``).

    The accumulator ``a`` holds binary32 bits for fp32, and for bf16 in mode
    ``"fp32"`` (the lane widens the bf16 element ``b`` exactly); bf16 bits in
    the low 16 bits in mode ``"bf16"``; int32 bits. Floats: round to nearest
    even, full subnormal support (no flush to zero), canonical NaNs
    (0x7FC00000; 0x7FC0 in mode ``"bf16"``), NaN-propagating min/max with
    -0 < +0. int32: wrapping add, signed min/max.

    Build options: ``dtypes`` and ``ops`` left out are not built (their beats
    give unspecified results); ``stages`` is the floating-point adder depth
    (``None``: :data:`DEFAULT_STAGES`).

    Decoded form (``decoded=True``): the lane has a ``sel`` input (a
    :data:`LaneSel`, valid with ``i``: :func:`decode_sel` of the beat) and
    takes ``i.payload.b`` already widened (:func:`widen_b`); it ignores
    ``i.payload.dtype``, ``op`` and ``first``. A caller that registers
    ``sel`` and the widened ``b`` itself, one copy per lane, one stage
    before the lane (``hdl/lane_loop.py``), takes the decode and its fanout
    off the adders' first stage; the latency is the same. In this form the
    results that need no adder (first contributions, int32, min/max) are
    computed over two cycles (compares and the int32 sum registered, then
    the choice) when ``stages >= 1``, over three when ``stages >= 2`` (the
    operands and selects registered again first, a kept copy of their own
    apart from the adders' first stage); the other form, for small
    builds, keeps them in one.

    Flow: the whole pipeline advances on cycles where ``~o.valid | o.ready``
    (which is ``i.ready``). With ``o.ready`` held high, a beat accepted on
    ``i`` appears on ``o`` exactly ``latency`` (= ``stages + 1``) cycles
    later, one beat per cycle (initiation interval 1), in order.

    ``nan_next``, ``ovf_next``: the flags ``o.payload`` takes at the next
    advance (combinational, before the output register), for a caller that
    registers a reduction of many lanes' flags alongside ``o``.
    """

    def __init__(self, *, dtypes=("int32", "fp32", "bf16"), ops=("sum", "min", "max"),
                 bf16_accumulate="fp32", stages=None, decoded=False):
        dtypes, ops = tuple(dtypes), tuple(ops)
        self._decoded = decoded
        self._dtypes = frozenset(dtypes)
        self._ops = frozenset(ops)
        self._mode = bf16_accumulate
        self._stages = DEFAULT_STAGES if stages is None else stages
        ports = {
            "i": In(stream.Signature(LaneIn)),
            "o": Out(stream.Signature(LaneOut)),
            "nan_next": Out(1),
            "ovf_next": Out(1),
        }
        if decoded:
            ports["sel"] = In(LaneSel)
        super().__init__(ports)

    @staticmethod
    def check(*, dtypes=("int32", "fp32", "bf16"), ops=("sum", "min", "max"),
              bf16_accumulate="fp32", stages=None, decoded=False) -> None:
        """Raise ``ValueError`` unless the build options are valid."""
        if not isinstance(decoded, bool):
            raise ValueError(f"decoded must be a bool, not {decoded!r}")
        if isinstance(dtypes, str) or isinstance(ops, str):
            raise ValueError("dtypes and ops must be tuples of names, not strings")
        try:
            dtypes, ops = tuple(dtypes), tuple(ops)
        except TypeError as exc:
            raise ValueError(f"dtypes and ops must be tuples of names: {exc}") from None
        bad = [d for d in dtypes if d not in _DTYPES]
        if bad or not dtypes:
            raise ValueError(f"dtypes must be a non-empty subset of {tuple(_DTYPES)}, "
                             f"not {dtypes!r}")
        bad = [o for o in ops if o not in _OPS]
        if bad or not ops:
            raise ValueError(f"ops must be a non-empty subset of {tuple(_OPS)}, not {ops!r}")
        if bf16_accumulate not in ("fp32", "bf16"):
            raise ValueError(f"bf16_accumulate must be 'fp32' or 'bf16', "
                             f"not {bf16_accumulate!r}")
        if stages is not None and (not isinstance(stages, int) or isinstance(stages, bool)
                                   or not 0 <= stages <= FPAdd.MAX_STAGES):
            raise ValueError(f"stages must be None or an int in 0..{FPAdd.MAX_STAGES}, "
                             f"not {stages!r}")

    @property
    def stages(self) -> int:
        return self._stages

    @property
    def latency(self) -> int:
        """Cycles from an accepted ``i`` beat to its ``o`` beat (o.ready high)."""
        return self._stages + 1

    @staticmethod
    def latency_of(stages=None) -> int:
        """:attr:`latency` of a lane built with ``stages`` (without building one)."""
        return (DEFAULT_STAGES if stages is None else stages) + 1

    @property
    def decoded(self) -> bool:
        """Built with a ``sel`` port and a pre-widened ``b``."""
        return self._decoded

    @property
    def dtypes(self) -> frozenset:
        return self._dtypes

    @property
    def ops(self) -> frozenset:
        return self._ops

    @property
    def bf16_accumulate(self) -> str:
        return self._mode

    def elaborate(self, platform):
        m = Module()
        has = self._dtypes.__contains__
        floats = has("fp32") or has("bf16")
        do_sum = "sum" in self._ops
        do_mm = bool(self._ops & {"min", "max"})
        narrow_mode = has("bf16") and self._mode == "bf16"

        adv = Signal()
        m.d.comb += [adv.eq(~self.o.valid | self.o.ready), self.i.ready.eq(adv)]

        p = self.i.payload
        a, b = p.a, p.b
        if self._decoded:
            sel = {name: self.sel[name] for name in LaneSel.members}
            b_w = b                                   # widened by the caller
            b, b16 = b_w, b_w[16:]                    # int32 element, bf16 element
        else:
            sel = decode_sel(p.dtype, p.op, p.first)
            b_w, b16 = widen_b(b, sel["bf16"]), b[:16]
        add_a, add_b_w, add_b16 = a, b_w, b16      # the adders' operands
        delay = self._stages
        if delay >= 2 and self._decoded:
            # The early path's own copy of the operands and selects (kept:
            # near its compares, apart from the adders' first stage).
            a, b_w = (Signal(32, name=f"e_in_{n}", reset_less=True, attrs=KEEP)
                      for n in "ab")
            sel = {k: Signal(name=f"e_in_{k}", reset_less=True, attrs=KEEP) for k in sel}
            with m.If(adv):
                m.d.sync += [a.eq(add_a), b_w.eq(add_b_w)]
                m.d.sync += [sel[k].eq(self.sel[k]) for k in sel]
            b, delay = b_w, delay - 1
        is_int, is_bf16, is_sum, is_max, first = (sel[k] for k in LaneSel.members)
        narrow = is_bf16 if narrow_mode else Const(0)
        a_w = Mux(narrow, Cat(Const(0, 16), a[:16]), a)

        # Results available without the adders ("early": first contributions,
        # int32, min/max), delayed to the adders' latency. In the decoded
        # form with stages >= 1 they take two of the delay line's cycles:
        # the compares and the int32 add, registered; then the choice; with
        # stages >= 2, three: the operands registered again first.
        bw = FP32.layout(b_w)
        x = {"a_w": a_w, "b_w": b_w, "b_nan": (bw.exp == FP32.exp_max) & (bw.frac != 0),
             "is_int": is_int, "is_sum": is_sum, "first": first, "narrow": narrow,
             "f_take_b": Const(0), "f_nan": Const(0), "i_take_b": Const(0),
             "isum_r": Const(0, 32), "isum_ovf": Const(0)}
        if do_mm and floats:
            m.submodules.fmm = fmm = FPMinMax(FP32)
            m.d.comb += [fmm.a.eq(a_w), fmm.b.eq(b_w), fmm.max.eq(is_max)]
            x.update(f_take_b=fmm.take_b, f_nan=fmm.nan)
        if has("int32"):
            if do_sum:
                m.submodules.iadd = iadd = IntAdd(32)
                m.d.comb += [iadd.a.eq(a), iadd.b.eq(b)]
                x.update(isum_r=iadd.r, isum_ovf=iadd.ovf)
            if do_mm:
                m.submodules.imm = imm = IntMinMax(32)
                m.d.comb += [imm.a.eq(a), imm.b.eq(b), imm.max.eq(is_max)]
                x["i_take_b"] = imm.take_b
        if delay and self._decoded:
            regs = {}
            for k, v in x.items():
                regs[k] = Signal(Value.cast(v).shape(), name=f"e_{k}", reset_less=True)
                with m.If(adv):
                    m.d.sync += regs[k].eq(v)
            x, delay = regs, delay - 1

        e_r = Signal(32)
        e_nan = Signal()
        e_ovf = Signal()
        sel = Signal(2)
        chosen = Mux(Mux(x["is_int"], x["i_take_b"], x["f_take_b"]), x["b_w"], x["a_w"])
        wide_r = Mux(x["first"], Mux(x["b_nan"], FP32.qnan, x["b_w"]),
                     Mux(x["f_nan"], FP32.qnan, chosen)) if floats else Const(0, 32)
        narrowed = Mux(x["narrow"], wide_r[16:], wide_r)
        with m.If(x["first"]):
            m.d.comb += [e_r.eq(Mux(x["is_int"], x["b_w"], narrowed)),
                         e_nan.eq(x["b_nan"] & ~x["is_int"])]
        with m.Elif(x["is_int"]):
            m.d.comb += [e_r.eq(Mux(x["is_sum"], x["isum_r"], chosen)),
                         e_ovf.eq(x["is_sum"] & x["isum_ovf"])]
        with m.Elif(x["is_sum"]):
            m.d.comb += sel.eq(Mux(x["narrow"], _SEL_ADD16, _SEL_ADD32))
        with m.Else():
            m.d.comb += [e_r.eq(narrowed), e_nan.eq(x["f_nan"])]

        # floating-point adders (decoded form: without their output
        # register, which the lane's output register follows at once; the
        # register saved splits the alignment step, FPAdd ``out_reg``)
        open_add = not self._decoded
        add32 = add16 = None
        if do_sum and (has("fp32") or (has("bf16") and self._mode == "fp32")):
            m.submodules.add32 = add32 = FPAdd(FP32, stages=self._stages, out_reg=open_add)
            m.d.comb += [add32.a.eq(add_a), add32.b.eq(add_b_w), add32.en.eq(adv)]
        if do_sum and narrow_mode:
            m.submodules.add16 = add16 = FPAdd(BF16, stages=self._stages, out_reg=open_add)
            m.d.comb += [add16.a.eq(add_a[:16]), add16.b.eq(add_b16), add16.en.eq(adv)]

        # delay line for the early results
        d_r, d_nan, d_ovf, d_sel = e_r, e_nan, e_ovf, sel
        for n in range(delay):
            regs = [Signal.like(s, name=f"{s.name}_d{n}", reset_less=True)
                    for s in (e_r, e_nan, e_ovf, sel)]
            with m.If(adv):
                m.d.sync += [r.eq(s) for r, s in zip(regs, (d_r, d_nan, d_ovf, d_sel), strict=True)]
            d_r, d_nan, d_ovf, d_sel = regs

        # final selection into the output register
        res = Signal(LaneOut)
        m.d.comb += [res.r.eq(d_r), res.nan.eq(d_nan), res.ovf.eq(d_ovf)]
        if add32 is not None:
            with m.If(d_sel == _SEL_ADD32):
                m.d.comb += [res.r.eq(add32.r), res.nan.eq(add32.nan), res.ovf.eq(add32.ovf)]
        if add16 is not None:
            with m.If(d_sel == _SEL_ADD16):
                m.d.comb += [res.r.eq(add16.r), res.nan.eq(add16.nan), res.ovf.eq(add16.ovf)]

        m.d.comb += [self.nan_next.eq(res.nan), self.ovf_next.eq(res.ovf)]
        valid = Signal(self.latency)
        with m.If(adv):
            m.d.sync += [
                valid.eq(Cat(self.i.valid, valid[:-1])),
                self.o.payload.eq(res),
            ]
        m.d.comb += self.o.valid.eq(valid[-1])
        return m
