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
    combinational steps; registers advance when ``en`` is high."""

    def __init__(self, m: Module, en: Value, cuts: set[int], name: str):
        self.m, self.en, self.cuts, self.name = m, en, cuts, name

    def cut(self, point: int, vals: dict) -> dict:
        if point not in self.cuts:
            return vals
        out = {}
        for key, val in vals.items():
            val = Value.cast(val)
            reg = Signal(val.shape(), name=f"{self.name}_p{point}_{key}", reset_less=True)
            with self.m.If(self.en):
                self.m.d.sync += reg.eq(val)
            out[key] = reg
        return out


# Cut points of the adder, after each of its steps:
#   0 order operands by raw exponent (an E-bit compare drives the swap
#     multiplexers), exponent difference, the near path's flip (equal
#     exponents, |b| > |a|: a compare whose result is only registered),
#     classify specials;
#   1 far path: alignment shift and sticky bit; near path: subtraction
#     (complemented when flipped), shift-limit mask;
#   2 far path: addition; near path: leading-zero count;
#   3 normalisation of both paths (one exponent adder for both), path
#     selection: the raw sum as significand, guard, sticky, biased exponent;
#   4 rounding increment, overflow;
#   5 specials, packing: the output.
# A depth of n registers uses the cut set _ADD_CUTS[n].
_ADD_CUTS = {
    0: set(),
    1: {5},
    2: {2, 5},
    3: {1, 3, 5},
    4: {0, 2, 3, 5},
    5: {0, 1, 2, 3, 5},
    6: {0, 1, 2, 3, 4, 5},
}


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
    and sticky bits; then a separate rounding and packing step. The
    operands are ordered by exponent only; the magnitude order, which the
    near path needs when the exponents are equal, is computed in parallel
    and applied after the first cut (the near difference is complemented),
    so that no wide compare drives the swap multiplexers.

    Timing: ``stages`` pipeline registers (0 to 6; 0 is combinational).
    Throughput one operation per cycle (initiation interval 1); the result of
    operands presented on a cycle with ``en`` high appears ``latency``
    (= ``stages``) cycles with ``en`` high later; the pipeline holds while
    ``en`` is low.
    """

    MAX_STAGES = max(_ADD_CUTS)

    @classmethod
    def check(cls, fmt: FloatFormat = FP32, *, stages: int = 5) -> None:
        if not isinstance(fmt, FloatFormat):
            raise ValueError(f"fmt must be a FloatFormat, not {fmt!r}")
        if not isinstance(stages, int) or not 0 <= stages <= cls.MAX_STAGES:
            raise ValueError(f"stages must be an int in 0..{cls.MAX_STAGES}, not {stages!r}")

    def __init__(self, fmt: FloatFormat = FP32, *, stages: int = 5):
        self._fmt = fmt
        self._stages = stages
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
        pipe = _Pipe(m, self.en, _ADD_CUTS[self._stages], "add")
        a, b = self.a, self.b

        # -- step 0: order by exponent, exponent difference, specials -----
        # The operands are ordered by their raw exponents only (a short
        # compare straight from the inputs drives the swap multiplexers):
        # the same order as the effective exponents' (subnormals count as
        # exponent 1) except for exp 0 against exp 1, which are equal
        # effectively. The far path adds or subtracts in that order; the
        # near path subtracts both ways and keeps the non-negative one, the
        # choice (equal exponents, |y| > |x|) computed here in parallel.
        a_nan, b_nan = _is_nan(fmt, a), _is_nan(fmt, b)
        a_inf, b_inf = _is_inf(fmt, a), _is_inf(fmt, b)
        eff_sub = a.sign ^ b.sign
        ea = Cat(a.exp[0] | (a.exp == 0), a.exp[1:])   # effective exponents
        eb = Cat(b.exp[0] | (b.exp == 0), b.exp[1:])
        ma = Cat(a.frac, a.exp != 0)                    # significands
        mb = Cat(b.frac, b.exp != 0)
        swap = b.exp > a.exp
        d_ab, d_ba = ea - eb, eb - ea                   # E+1 bits
        v = pipe.cut(0, {
            "mx": Mux(swap, mb, ma), "my": Mux(swap, ma, mb),
            # d = ex - ey >= 0, E bits (saturated after the cut)
            "ex": Mux(swap, eb, ea), "d": Mux(swap, d_ba, d_ab)[:E],
            "flip": (a.exp == b.exp) & (b.frac > a.frac),
            "sub": eff_sub, "sign": Mux(swap, b.sign, a.sign),
            "nan": a_nan | b_nan | (a_inf & b_inf & eff_sub),
            "inf": a_inf | b_inf,
            "inf_sign": Mux(a_inf, a.sign, b.sign),
        })

        # -- step 1: far alignment and sticky; near subtraction ------------
        # alignment shift saturated: a shift >= p+3 moves all of y into the
        # sticky bit
        dw = (p + 3).bit_length()
        d = v["d"]
        dc = d[:dw] | Cat(*([d[dw:] != 0] * dw)) if E > dw else d
        near = v["sub"] & (d[1:] == 0)
        my3 = Cat(Const(0, 3), v["my"])                       # p+3 bits
        my_al = (my3 >> dc)[:p + 3]
        below = Cat(*(_gt_const(dc, i) for i in range(p + 3)))   # bits shifted out
        sticky = (my3 & below) != 0
        # near path, exact: 2x - y (d = 1) or 2x - 2y (d = 0); a flipped
        # pair (d = 0, |y| > |x|) gets t = x + ~y = -(y - x) - 1, whose
        # complement ~t = y - x > 0 is taken by the next steps' logic
        # (t ^ flip), and never is all ones (y - x is even)
        flip = v["flip"]
        x1 = Cat(Const(0, 1), v["mx"])                        # p+1 bits
        y1 = Mux(d[0], v["my"], Cat(Const(0, 1), v["my"]))
        t_near = (x1 + ~y1 + ~flip)[:p + 1]
        # a left shift by ex-1 brings bit p-(ex-1) to the top: mark it, so
        # that the leading-zero count never exceeds ex-1 (subnormal results)
        limit = Cat(*(v["ex"] == p + 1 - i for i in range(p + 1)))
        keep = ("mx", "ex", "sub", "flip", "nan", "inf", "inf_sign")
        v = pipe.cut(1, {
            **{k: v[k] for k in keep}, "near": near,
            "sign": v["sign"] ^ (near & flip),
            "my_al": my_al | sticky, "t_near": t_near, "limit": limit,
        })

        # -- step 2: far addition; near leading zeros ----------------------
        mx3 = Cat(Const(0, 3), v["mx"], Const(0, 1))          # p+4 bits
        my3 = Cat(v["my_al"], Const(0, 1))
        s_far = (mx3 + Mux(v["sub"], ~my3, my3) + v["sub"])[:p + 4]
        flip_n = Cat(*([v["flip"]] * (p + 1)))
        sh = _lzc_pad((v["t_near"] ^ flip_n) | v["limit"])
        keep = ("ex", "sub", "sign", "near", "flip", "nan", "inf", "inf_sign", "t_near")
        v = pipe.cut(2, {
            **{k: v[k] for k in keep},
            "s_far": s_far, "sh": sh,
            "zero": v["t_near"] == 0,      # exact cancellation (near path)
        })

        # -- step 3: normalise both paths, select ---------------------------
        s = v["s_far"]
        carry, top = s[p + 3], s[p + 2]
        f_mant = Signal(p, name="f_mant")
        f_guard = Signal(name="f_guard")
        f_sticky = Signal(name="f_sticky")
        f_exp = Signal(E + 1, name="f_exp")          # biased exponent field
        near = v["near"]
        # one adder for every exponent: ex - sh (near), ex + 1, ex, ex - 1
        # (far: carry, top bit, neither), as ex + delta + cin
        delta = Signal(E + 1, name="exp_delta")
        cin = Signal(name="exp_cin")
        with m.If(near):
            m.d.comb += [delta.eq(~Cat(v["sh"], Const(0, E + 1 - len(v["sh"])))), cin.eq(1)]
        with m.Elif(carry):
            m.d.comb += delta.eq(1)
        with m.Elif(~top & v["sub"]):
            m.d.comb += delta.eq((1 << (E + 1)) - 1)
        exp_sum = (Cat(cin, v["ex"], Const(0, 1)) + Cat(cin, delta))[1:E + 2]
        with m.If(carry):
            m.d.comb += [f_mant.eq(s[4:p + 4]), f_guard.eq(s[3]), f_sticky.eq(s[:3] != 0)]
        with m.Elif(top | ~v["sub"]):
            m.d.comb += [f_mant.eq(s[3:p + 3]), f_guard.eq(s[2]), f_sticky.eq(s[:2] != 0)]
        with m.Else():
            m.d.comb += [f_mant.eq(s[2:p + 2]), f_guard.eq(s[1]), f_sticky.eq(s[0])]
        m.d.comb += f_exp.eq(Mux(~carry & ~top & ~v["sub"], 0, exp_sum))
        flip_n = Cat(*([v["flip"]] * (p + 1)))
        n_shifted = ((v["t_near"] ^ flip_n) << v["sh"])[:p + 1]
        n_exp = Mux(n_shifted[p], exp_sum[:E], 0)
        v = pipe.cut(3, {
            "mant": Mux(near, n_shifted[1:], f_mant),
            "guard": Mux(near, n_shifted[0], f_guard),
            "sticky": ~near & f_sticky,
            "exp": Mux(near, n_exp, f_exp),
            "sign": v["sign"] & ~(near & v["zero"]),
            **{k: v[k] for k in ("nan", "inf", "inf_sign")},
        })

        # -- step 4: round to nearest even, overflow -----------------------
        inc = v["guard"] & (v["sticky"] | v["mant"][0])
        packed = (Cat(v["mant"][:F], v["exp"]) + inc)[:E + F + 1]
        frac_ones = v["mant"][:F] == (1 << F) - 1
        overflow = (v["exp"] >= fmt.exp_max) | ((v["exp"] == fmt.exp_max - 1) & frac_ones & inc)
        v = pipe.cut(4, {
            "packed": packed[:E + F], "overflow": overflow,
            **{k: v[k] for k in ("sign", "nan", "inf", "inf_sign")},
        })

        # -- step 5: specials, pack -----------------------------------------
        inf_bits = fmt.exp_max << F
        res = Signal(fmt.width, name="res")
        with m.If(v["nan"]):
            m.d.comb += res.eq(fmt.qnan)
        with m.Elif(v["inf"]):
            m.d.comb += res.eq(Cat(Const(inf_bits, E + F), v["inf_sign"]))
        with m.Elif(v["overflow"]):
            m.d.comb += res.eq(Cat(Const(inf_bits, E + F), v["sign"]))
        with m.Else():
            m.d.comb += res.eq(Cat(v["packed"], v["sign"]))
        v = pipe.cut(5, {"r": res, "nan": v["nan"],
                         "ovf": ~v["nan"] & ~v["inf"] & v["overflow"]})

        m.d.comb += [
            self.r.eq(v["r"]),
            self.nan.eq(v["nan"]),
            self.ovf.eq(v["ovf"]),
        ]
        return m


class FPMinMax(CheckedComponent):
    """Float min or max (``max`` high), combinational.

    NaN-propagating: any NaN input gives the canonical NaN and raises
    ``nan``. Orders -0 below +0; otherwise IEEE order. Subnormals compare by
    value (no flush to zero).
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
            self.r.eq(Mux(nan, fmt.qnan, Mux(take_b, b.as_value(), a.as_value()))),
        ]
        return m


class FP32ToBF16(wiring.Component):
    """binary32 -> bfloat16, round to nearest, ties to even; combinational.

    Subnormals are rounded like any value (no flush to zero); a finite input
    that rounds to infinity raises ``ovf``; any NaN gives 0x7FC0.
    """

    def __init__(self):
        super().__init__({"i": In(32), "o": Out(16), "ovf": Out(1)})

    def elaborate(self, platform):
        m = Module()
        i = FP32.layout(self.i)
        nan, inf = _is_nan(FP32, i), _is_inf(FP32, i)
        rounded = ((self.i + 0x7FFF + self.i[16]) >> 16)[:16]
        r = BF16.layout(rounded)
        m.d.comb += [
            self.o.eq(Mux(nan, BF16.qnan, rounded)),
            self.ovf.eq(~nan & ~inf & _is_inf(BF16, r)),
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
