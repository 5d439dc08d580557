"""Floating-point arithmetic components: formats, a pipelined adder, min/max
and the bf16 <-> fp32 conversions.

Policy shared by every component here (``../shared/spec/protocol.md``,
Arithmetic; the golden model is :mod:`netagg.sim.arith`):

* IEEE 754 binary formats given by their exponent and fraction widths
  (:data:`FP32`, :data:`BF16`); round to nearest, ties to even.
* Subnormals are fully supported, as inputs and as results: there is no
  flush to zero anywhere.
* Overflow gives the correctly signed infinity and raises ``ovf`` (finite
  operands only); ``inf + (-inf)`` is NaN; ``x + (-x) = +0``;
  ``(-0) + (-0) = -0``.
* Every NaN produced is the canonical quiet NaN of the format (sign 0,
  exponent all ones, fraction MSB only: 0x7FC00000, 0x7FC0), whatever NaN
  came in (signalling or quiet, any payload); ``nan`` is raised when an
  input or the result is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .checked import CheckedComponent

__all__ = [
    "FloatFormat", "FP32", "BF16", "FPAdd", "FPMinMax", "FP32ToBF16", "BF16ToFP32",
]


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: 1 sign bit, ``exp_bits``, ``frac_bits``."""

    name: str
    exp_bits: int
    frac_bits: int

    def __post_init__(self):
        if self.exp_bits < 2 or self.frac_bits < 1:
            raise ValueError(f"bad float format {self.name}: exp_bits >= 2, frac_bits >= 1")

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.frac_bits

    @property
    def precision(self) -> int:
        """Significand bits, the hidden bit included."""
        return self.frac_bits + 1

    @property
    def exp_max(self) -> int:
        return (1 << self.exp_bits) - 1

    @property
    def qnan(self) -> int:
        """The canonical quiet NaN's bits."""
        return (self.exp_max << self.frac_bits) | (1 << (self.frac_bits - 1))

    @property
    def layout(self) -> data.StructLayout:
        """The format as a Struct layout, fields LSB first: frac, exp, sign."""
        return data.StructLayout({
            "frac": unsigned(self.frac_bits),
            "exp": unsigned(self.exp_bits),
            "sign": unsigned(1),
        })


FP32 = FloatFormat("fp32", 8, 23)
BF16 = FloatFormat("bf16", 8, 7)


def _is_nan(fmt: FloatFormat, v) -> Value:
    return (v.exp == fmt.exp_max) & (v.frac != 0)


def _is_inf(fmt: FloatFormat, v) -> Value:
    return (v.exp == fmt.exp_max) & (v.frac == 0)


def _lzc(v: Value) -> Value:
    """Leading zeros of a power-of-two-wide, nonzero ``v``, as a mux tree
    (no adders)."""
    n = len(v)
    assert n & (n - 1) == 0
    if n == 2:
        return ~v[1]
    half = n // 2
    hi, lo = v[half:], v[:half]
    hz = hi == 0
    return Cat(Mux(hz, _lzc(lo), _lzc(hi)), hz)


def _lzc_pad(v: Value) -> Value:
    """Leading zeros of ``v`` (any width; ``len(v)`` when zero)."""
    n = len(v)
    w = 1 << n.bit_length()                  # > n: leaves room for a guard one
    return _lzc(Cat(Const((1 << (w - n)) - 1, w - n), v))


def _gt_const(v: Value, c: int) -> Value:
    """``v > c`` for a constant ``c``, as plain logic (no carry chain)."""
    terms = []
    for i in range(len(v)):
        if not (c >> i) & 1:
            hi = v[i + 1:]
            terms.append(v[i] & (hi == (c >> (i + 1))) if len(hi) else v[i])
    if c >> len(v):
        return Const(0)
    return Cat(*terms) != 0 if terms else Const(0)


class _Pipe:
    """Places pipeline registers at the chosen cut points of a chain of
    combinational steps; registers advance when ``en`` is high. An unchosen
    cut point still names its values (combinational signals), so that every
    step reads named nets and the netlist stays small at any depth."""

    def __init__(self, m: Module, en: Value, cuts: set[int], name: str):
        self.m, self.en, self.cuts, self.name = m, en, cuts, name

    def cut(self, point: int, vals: dict) -> dict:
        reg = point in self.cuts
        out = {}
        for key, val in vals.items():
            val = Value.cast(val)
            sig = Signal(val.shape(), name=f"{self.name}_{'p' if reg else 'c'}{point}_{key}",
                         reset_less=True)
            if reg:
                with self.m.If(self.en):
                    self.m.d.sync += sig.eq(val)
            else:
                self.m.d.comb += sig.eq(val)
            out[key] = sig
        return out


def _rep(bit: Value, n: int) -> Value:
    return Cat(*([bit] * n))


# Cut points of the adder, after each of its steps:
#   0a the exponent compares and subtractions, the operands classified;
#   0 order operands by raw exponent (an E-bit compare drives the swap
#     multiplexers), effective exponent difference, the near path's flip
#     (equal exponents, |b| > |a|: a compare whose result is only
#     registered), classify specials;
#   1a far path: alignment by the distance's high bits (whole bytes) and
#     the sticky bit of the bytes shifted out; near path: subtraction, the
#     shift-limit mark;
#   1 far path: alignment by the distance's low bits, the rest of the
#     sticky bit (ORed into the last bit), the subtrahend inverted; near
#     path: the difference complemented when flipped; the far path's
#     exponent candidates and overflow flags;
#   2 far path: addition; near path: leading-zero count, cancellation;
#   3 normalisation of both paths, path selection: significand (hidden bit
#     included), guard, sticky, biased exponent minus one, the forced
#     (NaN, infinite, certain overflow) result flags;
#   4 rounding: one increment adds the hidden bit and the rounding bit to
#     exponent and fraction at once;
#   5 specials forced onto the rounded bits: the output.
# (bf16 moves a few of these by one step: the round-up decision into 3, the
# near path's complement-free difference, the shift-limit OR and the far
# sticky OR after cut 1; FPAdd._raw_d, docs/arithmetic.md.)
# A depth of n registers uses the cut set _ADD_CUTS[n]; without the output
# register (``out_reg=False``: the caller registers the result), the cut set
# _ADD_CUTS_OPEN[n], which spends that register on the alignment's split.
_ADD_CUTS = {
    0: set(),
    1: {5},
    2: {2, 5},
    3: {1, 3, 5},
    4: {0, 2, 3, 5},
    5: {0, 1, 2, 3, 5},
    6: {0, 1, 2, 3, 4, 5},
}
_ADD_CUTS_OPEN = {0: set(), 1: {2}, 2: {1, 3}, 3: {0, 2, 3}, 4: {0, 1, 2, 3},
                  5: {0, "1a", 1, 2, 3}, 6: {"0a", 0, "1a", 1, 2, 3}}


class FPAdd(CheckedComponent):
    """IEEE 754 adder ``r = a + b`` for a :class:`FloatFormat`.

    Round to nearest, ties to even; full subnormal support (no flush to
    zero); overflow to the signed infinity; ``x + (-x) = +0``,
    ``(-0) + (-0) = -0``, ``inf + (-inf)`` = canonical NaN, and any NaN input
    gives the canonical NaN.

    Flags: ``nan`` (an input or the result is NaN), ``ovf`` (finite operands
    whose sum rounds to infinity).

    Structure: a raw addition with separate near path (effective subtraction
    with exponent difference <= 1: exact subtraction, leading-zero count,
    normalising left shift) and far path (alignment shift with sticky bit,
    addition, at most one bit of normalisation), giving significand, guard
    and sticky bits; then one rounding addition, which also forms the
    exponent field (exponent - 1 plus the hidden bit) and gives the forced
    results (NaN, infinity) as they are, so that nothing follows it. The
    operands are ordered by raw exponent only (the borrow of the exponent
    subtraction drives the swap; the alignment distance is the effective
    exponent difference, a subnormal's exponent being 1); the
    magnitude order, which the near path needs when the exponents are
    equal, is computed in parallel and applied after the first cut (the
    near difference is complemented), so that no wide compare drives the
    swap multiplexers (the open form, ``out_reg=False``, in fp32: from
    the near subtraction's own borrow, with 2y - 2x beside it and the
    magnitude chosen after the next cut, so that step 0 holds no
    magnitude compare). Overflow is predicted from the exponent and the far
    sum's top bits before rounding. For bf16 (fractions of 16 bits or
    fewer) the same function is retimed: raw exponent distance with the
    subnormal y doubled before the alignment shift, the near operands
    exchanged when flipped instead of the difference complemented
    (docs/arithmetic.md).

    Timing: ``stages`` pipeline registers (0 to 6; 0 is combinational).
    Throughput one operation per cycle (initiation interval 1); the result of
    operands presented on a cycle with ``en`` high appears ``latency``
    (= ``stages``) cycles with ``en`` high later; the pipeline holds while
    ``en`` is low. ``out_reg`` (default): the last register holds the
    result (for ``stages >= 1``); ``out_reg=False``, for a caller that
    registers the result itself (after a choice of its own): the result is
    combinational after the last register, the rounding step, and the
    register it saves splits the alignment step instead (depth 5; depth 6
    splits the first step too), with the same latency.
    """

    MAX_STAGES = max(_ADD_CUTS)

    @classmethod
    def check(cls, fmt: FloatFormat = FP32, *, stages: int = 5, out_reg: bool = True) -> None:
        if not isinstance(fmt, FloatFormat):
            raise ValueError(f"fmt must be a FloatFormat, not {fmt!r}")
        if not isinstance(stages, int) or not 0 <= stages <= cls.MAX_STAGES:
            raise ValueError(f"stages must be an int in 0..{cls.MAX_STAGES}, not {stages!r}")
        if not isinstance(out_reg, bool):
            raise ValueError(f"out_reg must be a bool, not {out_reg!r}")

    def __init__(self, fmt: FloatFormat = FP32, *, stages: int = 5, out_reg: bool = True):
        self._fmt = fmt
        self._stages = stages
        self._out_reg = out_reg
        # narrow formats (bf16) take the raw exponent distance, the near
        # difference's magnitude from exchanged operands and the sticky and
        # round-up decisions one step earlier or later; wide formats (fp32)
        # the effective distance and the complemented near difference: each
        # maps faster for its width (docs/arithmetic.md)
        self._raw_d = fmt.frac_bits <= 16
        super().__init__({
            "a": In(fmt.layout),
            "b": In(fmt.layout),
            "en": In(1, init=1),
            "r": Out(fmt.layout),
            "nan": Out(1),
            "ovf": Out(1),
        })

    @property
    def fmt(self) -> FloatFormat:
        return self._fmt

    @property
    def stages(self) -> int:
        return self._stages

    @property
    def latency(self) -> int:
        return self._stages

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        E, F, p = fmt.exp_bits, fmt.frac_bits, fmt.precision
        cuts = (_ADD_CUTS if self._out_reg else _ADD_CUTS_OPEN)[self._stages]
        pipe = _Pipe(m, self.en, cuts, "add")

        # steps 0 to 2: as measured for the adder alone (issue 12, target 3),
        # or with the split cut points of the open form
        v = self._front(m, pipe) if self._out_reg else self._front_split(m, pipe)
        # -- step 3: normalise both paths, select ---------------------------
        # Both paths give (mant, guard, sticky, em1, hid): mant has the
        # hidden bit on top, em1 = biased exponent - 1 of the path's
        # unnormalised sum, and the exponent field is em1 + hid, hid in
        # {0, 1, 2} (added by the rounding step): near path mant's top bit
        # (0 for a subnormal result, whose em1 is 0); far path 2 (carry
        # out), 1 (top bit set) or 0 (an effective subtraction lost the top
        # bit, or two subnormals added without reaching the normal range).
        near, sub = v["near"], v["sub"]
        s = v["s_far"]
        carry, top = s[p + 3], s[p + 2]
        f_mant = Signal(p, name="f_mant")
        f_guard = Signal(name="f_guard")
        f_sticky = Signal(name="f_sticky")
        with m.If(carry):
            m.d.comb += [f_mant.eq(s[4:p + 4]), f_guard.eq(s[3]), f_sticky.eq(s[:3] != 0)]
        with m.Elif(top | ~sub):
            m.d.comb += [f_mant.eq(s[3:p + 3]), f_guard.eq(s[2]), f_sticky.eq(s[:2] != 0)]
        with m.Else():
            m.d.comb += [f_mant.eq(s[2:p + 2]), f_guard.eq(s[1]), f_sticky.eq(s[0])]
        if "t_near" in v:
            t_near = v["t_near"]
        else:
            t_near = v["t_raw"] if self._raw_d else v["t_raw"] ^ _rep(v["flip"], p + 1)
        n_shifted = (t_near << v["sh"])[:p + 1]
        n_em1 = Mux(v["zero"], 0, (v["exm1"] - v["sh"])[:E])
        # overflow, far path only (the near path's result is below x): the
        # field em1 + hid + c (c: rounding carries out of the fraction) is
        # >= exp_max for sure, or exactly exp_max when c, which the rounding
        # step then produces as the infinity itself (ovf_c: the rounded
        # field is then odd, exp_max, instead of exp_max - 1)
        special = v["nan"] | v["inf"]
        ovf_now = ~near & carry & v["e_top"]
        ovf_c = ~near & ((carry & v["e_top1"]) | (~carry & top & v["e_top"]))
        mant = Mux(near, n_shifted[1:], f_mant)
        guard = Mux(near, n_shifted[0], f_guard)
        force = special | ovf_now
        if self._raw_d:
            # bf16: the round-up bit decided here, registered
            rnd = {"inc": ~force & guard & ((~near & f_sticky) | mant[0])}
        else:
            rnd = {"guard": guard, "sticky": ~near & f_sticky}
        if self._out_reg:
            ovf = {"ovf_now": ~special & ovf_now, "ovf_c": ~special & ovf_c}
        else:
            # without the output register: the overflow flag whole, here
            # (beside the normalisation), so that it leaves the rounding
            # step as a register. ovf_c overflows when the rounding carries
            # out of the fraction: the far path's guard bit set and its
            # fraction all ones (its last bit then is set: the tie rounds up)
            def ones(bits):
                return bits == (1 << len(bits)) - 1
            rounds_over = ((carry & v["e_top1"] & s[3] & ones(s[4:4 + F]))
                           | (~carry & top & v["e_top"] & s[2] & ones(s[3:3 + F])))
            ovf = {"ovf": ~special & (ovf_now | (~near & rounds_over))}
        v = pipe.cut(3, {
            "mant": mant, **rnd,
            "em1": Mux(near, n_em1, v["exm1"]),
            "hid": Mux(near, n_shifted[p], Cat(top & ~carry, carry)),
            "sign": Mux(v["nan"], 0, Mux(v["inf"], v["inf_sign"],
                                         v["sign"] & ~(near & v["zero"]))),
            "force": force, "nan": v["nan"], **ovf,
        })

        # -- step 4: round to nearest even, specials ------------------------
        # The forced results (NaN, infinity, certain overflow) replace the
        # rounding adder's operand (all-ones exponent, NaN or zero
        # fraction, nothing added), so that the adder's sum is the output.
        mant, force = v["mant"], v["force"]
        inc = v["inc"] if self._raw_d else ~force & v["guard"] & (v["sticky"] | mant[0])
        nan_frac = fmt.qnan & ((1 << F) - 1)
        frac = Mux(force, Mux(v["nan"], nan_frac, 0), mant[:F])
        packed = (Cat(frac, v["em1"] | _rep(force, E))
                  + Cat(Const(0, F), Mux(force, 0, v["hid"])) + inc)[:E + F]
        # (bf16: the rounding carry out of the fraction from the registered
        # round-up bit and an all-ones detect, beside the adder; fp32: the
        # rounded exponent's LSB; without the output register: the flag
        # formed in step 3)
        if self._out_reg:
            ovf = v["ovf_now"] | (v["ovf_c"] & (inc & (mant[:F] == (1 << F) - 1)
                                               if self._raw_d else packed[F]))
        else:
            ovf = v["ovf"]
        v = pipe.cut(4, {"r": Cat(packed, v["sign"]), "ovf": ovf, "nan": v["nan"]})

        # -- step 5: output register (deepest pipelines only) ---------------
        v = pipe.cut(5, v)

        m.d.comb += [
            self.r.eq(v["r"]),
            self.nan.eq(v["nan"]),
            self.ovf.eq(v["ovf"]),
        ]
        return m

    def _order(self, a, b, c):
        """The first cut's values (step 0's multiplexers) from the operands
        ``a``, ``b`` and their classification ``c``: ``swap``, ``a_sub``,
        ``b_sub``, the NaN and infinity flags, the raw exponent differences
        ``d_ab``, ``d_ba`` (and, fp32, the decrements ``am1``, ``bm1``);
        ``flip`` where ``c`` has it (bf16, and fp32 in the adder alone: fp32's
        open form forms it after cut 0)."""
        a_sub, b_sub, swap = c["a_sub"], c["b_sub"], c["swap"]
        eff_sub = a.sign ^ b.sign
        ea = Cat(a.exp[0] | a_sub, a.exp[1:])          # effective exponents
        eb = Cat(b.exp[0] | b_sub, b.exp[1:])
        # d = ex - ey >= 0 (effective exponents); a is y only when
        # b.exp > a.exp (so b is normal)
        mx = Mux(swap, Cat(b.frac, ~b_sub), Cat(a.frac, ~a_sub))
        my = Mux(swap, Cat(a.frac, ~a_sub), Cat(b.frac, ~b_sub))
        if self._raw_d:
            # bf16: d is the raw distance (the subtractions and the swap
            # multiplexer only); a subnormal y beside a normal x (one_sub:
            # the effective distance is d - 1) is doubled on the far path
            # after the cut. d0, the effective distance's LSB, is ea[0] ^
            # eb[0] whatever the order (no carry chain). NaN dominates the
            # infinity flags, so these test the exponent alone.
            a_emax, b_emax = c["a_emax"], c["b_emax"]
            return {
                "mx": mx, "my": my, "d0": ea[0] ^ eb[0], "one_sub": a_sub ^ b_sub,
                "ex": Mux(swap, eb, ea),
                "d": Mux(swap, c["d_ba"], c["d_ab"]),
                "flip": c["flip"], "sub": eff_sub,
                "sign": Mux(swap, b.sign, a.sign),
                "nan": c["a_nan"] | c["b_nan"] | (a_emax & b_emax & eff_sub),
                "inf": a_emax | b_emax,
                "inf_sign": Mux(a_emax, a.sign, b.sign),
            }
        # (the two forms are equivalent; each is the one that maps
        # smaller and faster for its width, docs/arithmetic.md)
        am1 = Mux(a_sub, 0, c["am1"])                   # effective exponent - 1
        bm1 = Mux(b_sub, 0, c["bm1"])
        d_ab = Mux(b_sub, am1, c["d_ab"])
        d_ba = Mux(a_sub, bm1, c["d_ba"])
        a_inf, b_inf = c["a_inf"], c["b_inf"]
        return {
            "mx": mx, "my": my,
            "ex": Mux(swap, eb, ea), "d": Mux(swap, d_ba, d_ab),
            "exm1": Mux(swap, bm1, am1),
            **({"flip": c["flip"]} if "flip" in c else {}), "sub": eff_sub,
            "sign": Mux(swap, b.sign, a.sign),
            "nan": c["a_nan"] | c["b_nan"] | (a_inf & b_inf & eff_sub),
            "inf": a_inf | b_inf,
            "inf_sign": Mux(a_inf, a.sign, b.sign),
        }

    def _align_in(self, v):
        """Step 1's inputs: the distance (saturated: a shift >= p+3 moves
        all of y into the sticky bit, ``ovr``), and y with three guard bits
        (bf16: a subnormal y beside a normal x doubled, d = ex - ey + 1,
        its top bit 0: the same shifted value and sticky bit)."""
        E, p = self._fmt.exp_bits, self._fmt.precision
        d = v["d"]
        dw = (p + 3).bit_length()
        dl, ovr = (d[:dw], d[dw:] != 0) if E > dw else (d, Const(0))
        my3 = Cat(Const(0, 3), v["my"])                       # p+3 bits
        if self._raw_d:
            my3 = Mux(v["one_sub"], Cat(Const(0, 4), v["my"][:p - 1]), my3)
        return d, dw, dl, ovr, my3

    def _step2(self, pipe, v, near, zero):
        """Step 2 (cut 2): the far addition, the near path's leading zeros
        (``near``: the keys of its difference, passed on), ``zero`` (the
        near path's exact cancellation) registered."""
        p = self._fmt.precision
        mx3 = Cat(Const(0, 3), v["mx"], Const(0, 1))          # p+4 bits
        keep = ("exm1", "e_top", "e_top1", "sub", "near", "sign",
                "nan", "inf", "inf_sign") + near
        y_far = v["y_far"]
        if self._raw_d:
            y0, st = y_far[0], v["sticky"]
            y_far = Cat(Mux(v["sub"], y0 & ~st, y0 | st), y_far[1:])
        return pipe.cut(2, {
            **{k: v[k] for k in keep},
            "s_far": (mx3 + y_far + v["sub"])[:p + 4],
            "sh": _lzc_pad(v[near[0]] | v["limit"] if self._raw_d else v["u_near"]),
            "zero": zero,
        })

    def _near_sub(self, v, d, ex):
        """Step 1's near path (effective subtraction, d <= 1), exact: 2x - y
        (d = 1) or 2x - 2y (d = 0), y1 = y or 2y; a flipped pair (d = 0,
        |y| > |x|) needs 2y - 2x. fp32: t = x + ~y = -(y - x) - 1, whose
        complement ~t = y - x > 0 the caller takes (t ^ flip; x1 = 2x has a
        zero LSB, which holds the carry-in ~flip). bf16: the operands
        exchanged when flipped (then d = 0, y1 = 2y), the difference is the
        magnitude itself. Returns (the distance is at most 1, the effective
        exponent - 1, the difference)."""
        E, p = self._fmt.exp_bits, self._fmt.precision
        flip, my = v["flip"], v["my"]
        if self._raw_d:
            y1n = ~Mux(v["d0"], Cat(my, Const(0, 1)), Cat(Const(0, 1), my))
            # effective distance d - one_sub <= 1
            near_d = Mux(v["one_sub"], (d[2:] == 0) & ~(d[1] & d[0]), d[1:] == 0)
            exm1 = (ex - 1)[:E]                  # ex >= 1 (effective exponent)
            mx = v["mx"]
            t_raw = (Mux(flip, Cat(Const(0, 1), my), Cat(Const(0, 1), mx))
                     - Mux(flip, Cat(Const(0, 1), mx), ~y1n))[:p + 1]
        else:
            y1n = ~Mux(d[0], Cat(my, Const(0, 1)), Cat(Const(0, 1), my))
            near_d = d[1:] == 0
            exm1 = v["exm1"]
            t_raw = (Cat(~flip, v["mx"]) + y1n)[:p + 1]
        return near_d, exm1, t_raw

    def _front(self, m, pipe):
        """Steps 0 to 2 (cuts 0, 1, 2), the form of the adder alone."""
        fmt = self._fmt
        E, p = fmt.exp_bits, fmt.precision
        a, b = self.a, self.b

        # -- step 0: order by exponent, exponent difference, specials -----
        # The operands are ordered by their raw exponents only: the borrow
        # of the raw exponent subtraction drives the swap multiplexers. The
        # difference d is the effective one (a subnormal's exponent is 1):
        # for a subnormal y beside a normal x it is x.exp - 1, selected
        # from a parallel decrement, so that the significands pass the
        # swap multiplexers as they are (hidden bit = exponent nonzero).
        # The far path adds or subtracts in that order; the near path's
        # order for equal exponents (|y| > |x|, "flip") is computed here in
        # parallel and used after the cut.
        a_sub, b_sub = a.exp == 0, b.exp == 0          # subnormal or zero
        c = {"swap": (a.exp - b.exp)[E],                # raw borrow: b.exp > a.exp
             "a_sub": a_sub, "b_sub": b_sub,
             "a_nan": _is_nan(fmt, a), "b_nan": _is_nan(fmt, b),
             "a_inf": _is_inf(fmt, a), "b_inf": _is_inf(fmt, b),
             "a_emax": a.exp == fmt.exp_max, "b_emax": b.exp == fmt.exp_max,
             "flip": (a.exp == b.exp) & (b.frac > a.frac),
             "d_ab": (a.exp - b.exp)[:E], "d_ba": (b.exp - a.exp)[:E]}
        if not self._raw_d:
            c.update(am1=(a.exp - 1)[:E], bm1=(b.exp - 1)[:E])
        cut0 = self._order(a, b, c)
        v = pipe.cut(0, cut0)

        # -- step 1: far alignment and sticky; near subtraction ------------
        d, dw, dl, ovr, my3 = self._align_in(v)
        ex, sub = v["ex"], v["sub"]
        my_al = Mux(ovr, 0, (my3 >> dl)[:p + 3])
        below = Cat(*(_gt_const(dl, i) | ovr for i in range(p + 3)))   # bits shifted out
        sticky = (my3 & below) != 0
        # far subtrahend, sticky bit ORed into its last bit (which lies
        # below the guard and round bits), complemented here (p+4 bits): the
        # addition after the cut adds it as it comes, with carry-in ``sub``
        # (bf16: the sticky bit registered apart, ORed in after the cut)
        y_far = Cat(my_al if self._raw_d else my_al | sticky, Const(0, 1))
        flip = v["flip"]
        near_d, exm1, t_raw = self._near_sub(v, d, ex)
        # (fp32: the complement ~t = y - x > 0 of a flipped pair taken here)
        t_near = t_raw if self._raw_d else t_raw ^ _rep(flip, p + 1)
        # a left shift by ex-1 brings bit p-(ex-1) to the top: mark it, so
        # that the leading-zero count never exceeds ex-1 (subnormal results;
        # bf16: ORed in after the cut)
        limit = Cat(*(ex == p + 1 - i for i in range(p + 1)))
        keep = ("mx", "ex", "sub", "nan", "inf", "inf_sign")
        v = pipe.cut(1, {
            **{k: v[k] for k in keep},
            "sign": v["sign"] ^ (flip & sub),   # flipped: y's sign
            "near": sub & near_d,
            "y_far": y_far ^ _rep(sub, p + 4),
            "t_raw": t_raw, "flip": flip,
            **({"limit": limit} if self._raw_d else {"u_near": t_near | limit}),
            **({"sticky": sticky} if self._raw_d else {}),
            "exm1": exm1,
            "e_top": ex == fmt.exp_max - 1, "e_top1": ex == fmt.exp_max - 2,
        })

        # (exact cancellation: a flipped difference is > 0)
        zero = (v["t_raw"] == 0) if self._raw_d else ~v["flip"] & (v["t_raw"] == 0)
        return self._step2(pipe, v, ("t_raw", "flip"), zero)

    def _front_split(self, m, pipe):
        """Steps 0 to 2 with the split cut points "0a" and "1a" (the open
        form). fp32: the near path's flip (equal exponents, |y| > |x|) is
        the borrow of its subtraction 2x - 2y in step 1a, not a compare in
        step 0; both differences are registered at "1a" and the flip
        chooses one (and the sign) in step 1."""
        fmt = self._fmt
        E, p = fmt.exp_bits, fmt.precision
        a, b = self.a, self.b

        # -- step 0 (as in _front), in two halves around cut point "0a":
        # (0a) the compares, the exponent subtractions and the
        # classification; (0b) the multiplexers they drive (_order).
        a_emax, b_emax = a.exp == fmt.exp_max, b.exp == fmt.exp_max
        a_sub, b_sub = a.exp == 0, b.exp == 0          # subnormal or zero
        w = pipe.cut("0a", {
            "a": a.as_value(), "b": b.as_value(),
            "a_fnz": a.frac != 0, "b_fnz": b.frac != 0,
            "a_emax": a_emax, "b_emax": b_emax, "a_sub": a_sub, "b_sub": b_sub,
            "swap": (a.exp - b.exp)[E],                 # raw borrow: b.exp > a.exp
            "d_ab": (a.exp - b.exp)[:E], "d_ba": (b.exp - a.exp)[:E],
            **({"flip": (a.exp == b.exp) & (b.frac > a.frac)} if self._raw_d
               else {"am1": (a.exp - 1)[:E], "bm1": (b.exp - 1)[:E]}),
        })
        a, b = fmt.layout(w["a"]), fmt.layout(w["b"])
        a_emax, b_emax, a_sub, b_sub = w["a_emax"], w["b_emax"], w["a_sub"], w["b_sub"]
        cut0 = self._order(a, b, {
            "swap": w["swap"], "a_sub": a_sub, "b_sub": b_sub,
            **({"flip": w["flip"]} if self._raw_d else {}),
            "a_emax": a_emax, "b_emax": b_emax,
            "a_nan": a_emax & w["a_fnz"], "b_nan": b_emax & w["b_fnz"],
            "a_inf": a_emax & ~w["a_fnz"], "b_inf": b_emax & ~w["b_fnz"],
            **{k: w[k] for k in ("d_ab", "d_ba", "am1", "bm1") if k in w}})
        v = pipe.cut(0, cut0)

        # -- step 1: far alignment and sticky; near subtraction ------------
        # Two halves around cut point "1a": (1a) the near subtraction and
        # the alignment by d's high bits (whole bytes), with the sticky bit
        # of the bytes shifted out; (1b) the alignment by d's three low
        # bits, the rest of the sticky bit, the near difference's
        # complement. The alignment shift is saturated: a shift >= p+3
        # moves all of y into the sticky bit (``ovr``: d beyond the
        # shifter's select bits).
        d, dw, dl, ovr, my3 = self._align_in(v)
        ex, sub = v["ex"], v["sub"]
        fine = min(3, dw)
        d_hi = dl[fine:]
        my_c = Mux(ovr, 0, (my3 >> Cat(Const(0, fine), d_hi))[:p + 3])
        # bits shifted out by the coarse shift (bit i: d_hi > i // 8)
        below_c = Cat(*(_gt_const(d_hi, i >> fine) | ovr if len(d_hi) else ovr
                        for i in range(p + 3)))
        if self._raw_d:
            flip = v["flip"]
            near_d, exm1, t_raw = self._near_sub(v, d, ex)
            near_t = {"t_raw": t_raw}
        else:
            # fp32: the near path's order from its own subtraction: 2x - y1
            # (y1 = y, or 2y when d = 0) and, beside it, 2y - 2x; flipped
            # (|y| > |x|: equal exponents, d = 0) when the first borrows.
            # The flip leaves step 0 (no magnitude compare before cut 0);
            # the difference's magnitude is chosen after this cut.
            y1 = Mux(d[0], Cat(v["my"], Const(0, 1)), Cat(Const(0, 1), v["my"]))
            x1 = Cat(Const(0, 1), v["mx"])
            t_xy = x1 - y1                               # p+2 bits, the borrow on top
            flip = (d == 0) & t_xy[p + 1]
            near_d, exm1 = d[1:] == 0, v["exm1"]
            near_t = {"t_xy": t_xy[:p + 1], "t_yx": (y1 - x1)[:p + 1]}
        # a left shift by ex-1 brings bit p-(ex-1) to the top: mark it, so
        # that the leading-zero count never exceeds ex-1 (subnormal results;
        # bf16: ORed in after the cut)
        limit = Cat(*(ex == p + 1 - i for i in range(p + 1)))
        keep = ("mx", "ex", "sub", "nan", "inf", "inf_sign")
        v = pipe.cut("1a", {
            **{k: v[k] for k in keep},
            # flipped: y's sign (fp32: applied after the cut, where the
            # flip, from the near subtraction's borrow, is registered)
            "sign": v["sign"] ^ (flip & sub) if self._raw_d else v["sign"],
            "near": sub & near_d,
            "my_c": my_c, "st_c": (my3 & below_c) != 0, "d_lo": dl[:fine],
            **near_t, "flip": flip, "limit": limit,
            "exm1": exm1,
            "e_top": ex == fmt.exp_max - 1, "e_top1": ex == fmt.exp_max - 2,
        })
        my_c, d_lo, sub, flip = v["my_c"], v["d_lo"], v["sub"], v["flip"]
        my_al = (my_c >> d_lo)[:p + 3]
        lost = (1 << fine) - 1                # bits the fine shift can lose
        below_f = Cat(*(_gt_const(d_lo, i) for i in range(lost)))
        sticky = v["st_c"] | ((my_c[:lost] & below_f) != 0)
        # far subtrahend, sticky bit ORed into its last bit (which lies
        # below the guard and round bits), complemented here (p+4 bits): the
        # addition after the cut adds it as it comes, with carry-in ``sub``
        # (bf16: the sticky bit registered apart, ORed in after the cut)
        y_far = Cat(my_al if self._raw_d else my_al | sticky, Const(0, 1))
        # the near difference's magnitude (fp32: 2y - 2x when flipped)
        t_near = v["t_raw"] if self._raw_d else Mux(flip, v["t_yx"], v["t_xy"])
        keep = ("mx", "ex", "sub", "nan", "inf", "inf_sign", "near",
                "exm1", "e_top", "e_top1")
        v = pipe.cut(1, {
            **{k: v[k] for k in keep},
            "sign": v["sign"] if self._raw_d else v["sign"] ^ (flip & sub),
            "y_far": y_far ^ _rep(sub, p + 4),
            "t_near": t_near,
            **({"limit": v["limit"], "sticky": sticky} if self._raw_d
               else {"u_near": t_near | v["limit"]}),
        })

        return self._step2(pipe, v, ("t_near",), v["t_near"] == 0)


class FPMinMax(CheckedComponent):
    """Float min or max (``max`` high), combinational.

    NaN-propagating: any NaN input gives the canonical NaN and raises
    ``nan``. Orders -0 below +0; otherwise IEEE order. Subnormals compare by
    value (no flush to zero). ``take_b``: ``r`` is ``b`` unless ``nan``
    (else ``a``), for a caller that registers the choice and selects later.
    """

    @staticmethod
    def check(fmt: FloatFormat = FP32) -> None:
        if not isinstance(fmt, FloatFormat):
            raise ValueError(f"fmt must be a FloatFormat, not {fmt!r}")

    def __init__(self, fmt: FloatFormat = FP32):
        self._fmt = fmt
        super().__init__({
            "a": In(fmt.layout),
            "b": In(fmt.layout),
            "max": In(1),
            "r": Out(fmt.layout),
            "nan": Out(1),
            "take_b": Out(1),
        })

    @property
    def fmt(self) -> FloatFormat:
        return self._fmt

    def elaborate(self, platform):
        m = Module()
        fmt, a, b = self._fmt, self.a, self.b
        n = fmt.exp_bits + fmt.frac_bits
        mag_a, mag_b = a.as_value()[:n], b.as_value()[:n]
        a_lt_b = Mux(a.sign != b.sign, a.sign,
                     Mux(a.sign, mag_a > mag_b, mag_a < mag_b))
        take_b = ~(a_lt_b ^ self.max)
        nan = _is_nan(fmt, a) | _is_nan(fmt, b)
        m.d.comb += [
            self.nan.eq(nan),
            self.take_b.eq(take_b),
            self.r.eq(Mux(nan, fmt.qnan, Mux(take_b, b.as_value(), a.as_value()))),
        ]
        return m


class FP32ToBF16(wiring.Component):
    """binary32 -> bfloat16, round to nearest, ties to even; combinational.

    Subnormals are rounded like any value (no flush to zero); a finite input
    that rounds to infinity raises ``ovf``; any NaN gives 0x7FC0. ``ovf`` is
    a compare of the input alone (no carry chain before it): exponent 254,
    the seven kept fraction bits ones and the first dropped bit one (the
    kept LSB is one, so a tie rounds up too).
    """

    def __init__(self):
        super().__init__({"i": In(32), "o": Out(16), "ovf": Out(1)})

    def elaborate(self, platform):
        m = Module()
        i = FP32.layout(self.i)
        nan = _is_nan(FP32, i)
        rounded = ((self.i + 0x7FFF + self.i[16]) >> 16)[:16]
        m.d.comb += [
            self.o.eq(Mux(nan, BF16.qnan, rounded)),
            self.ovf.eq((i.exp == 0xFE) & (self.i[16:23] == 0x7F) & self.i[15]),
        ]
        return m


class BF16ToFP32(wiring.Component):
    """bfloat16 -> binary32, exact (NaN payloads kept); combinational."""

    def __init__(self):
        super().__init__({"i": In(16), "o": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(Cat(Const(0, 16), self.i))
        return m
