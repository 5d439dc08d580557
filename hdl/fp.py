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


def _lzc(v: Value) -> tuple[Value, Value]:
    """Leading zeros of ``v`` as a tree: (all zero, count); count is
    meaningless when all zero."""
    n = len(v)
    if n == 1:
        return ~v[0], Const(0, 1)
    half = 1 << ((n - 1).bit_length() - 1)   # largest power of two below n
    lo_w = half                               # low part: `half` bits
    hi = v[lo_w:]
    lo = v[:lo_w]
    hz, hc = _lzc(hi)
    lz, lc = _lzc(lo)
    width = (n).bit_length()
    hi_n = len(hi)
    # when the high part is all zero: hi_n + count(lo)
    return hz & lz, Mux(hz, hi_n + lc, hc)[:width]


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


# Cut points of the adder, after each of its five steps:
#   0 unpack, order operands, specials; 1 far-path alignment, near-path
#   subtraction; 2 far-path addition, near-path leading-zero count;
#   3 normalisation and path selection (the raw sum: significand, guard,
#   sticky, exponent); 4 rounding and packing (the output).
# A depth of n registers uses the first n cut sets below.
_ADD_CUTS = {
    0: set(),
    1: {4},
    2: {3, 4},
    3: {0, 3, 4},
    4: {0, 2, 3, 4},
    5: {0, 1, 2, 3, 4},
}


class FPAdd(wiring.Component):
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
    and sticky bits; then a separate rounding and packing step.

    Timing: ``stages`` pipeline registers (0 to 5; 0 is combinational).
    Throughput one operation per cycle (initiation interval 1); the result of
    operands presented on a cycle with ``en`` high appears ``latency``
    (= ``stages``) cycles with ``en`` high later; the pipeline holds while
    ``en`` is low.
    """

    MAX_STAGES = max(_ADD_CUTS)

    def __init__(self, fmt: FloatFormat = FP32, *, stages: int = 3):
        if not isinstance(fmt, FloatFormat):
            raise ValueError(f"fmt must be a FloatFormat, not {fmt!r}")
        if not isinstance(stages, int) or not 0 <= stages <= self.MAX_STAGES:
            raise ValueError(f"stages must be an int in 0..{self.MAX_STAGES}, not {stages!r}")
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

        # -- step 0: unpack, order by magnitude, classify ------------------
        a_nan, b_nan = _is_nan(fmt, a), _is_nan(fmt, b)
        a_inf, b_inf = _is_inf(fmt, a), _is_inf(fmt, b)
        eff_sub = a.sign ^ b.sign
        a_mag = a.as_value()[:E + F]
        b_mag = b.as_value()[:E + F]
        swap = b_mag > a_mag
        x = fmt.layout(Mux(swap, b.as_value(), a.as_value()))
        y = fmt.layout(Mux(swap, a.as_value(), b.as_value()))
        x_norm, y_norm = x.exp != 0, y.exp != 0
        ex = Mux(x_norm, x.exp, 1)              # effective exponents
        ey = Mux(y_norm, y.exp, 1)
        d = (ex - ey)[:E]                       # >= 0 as |x| >= |y|
        v = pipe.cut(0, {
            "mx": Cat(x.frac, x_norm), "my": Cat(y.frac, y_norm),
            "ex": ex, "d": d, "sub": eff_sub, "sign": x.sign,
            "nan": a_nan | b_nan | (a_inf & b_inf & eff_sub),
            "inf": a_inf | b_inf,
            "inf_sign": Mux(a_inf, a.sign, b.sign),
        })

        # -- step 1: far-path alignment; near-path subtraction -------------
        lim = p + 3
        dc = Mux(v["d"] > lim, lim, v["d"])
        wide = Cat(Const(0, p + 3), Const(0, 3), v["my"])   # (my << 3) << (p+3)
        shifted = (wide >> dc)[:2 * (p + 3)]
        my_al = shifted[p + 3:] | (shifted[:p + 3] != 0)     # sticky in the LSB
        near = v["sub"] & (v["d"] < 2)
        x1 = Cat(Const(0, 1), v["mx"])                       # p+1 bits
        y1 = Mux(v["d"][0], v["my"], Cat(Const(0, 1), v["my"]))
        s_near = (x1 - y1)[:p + 1]                           # exact, >= 0
        pass1 = {k: v[k] for k in ("mx", "ex", "sub", "sign", "nan", "inf", "inf_sign")}
        v = pipe.cut(1, {**pass1, "my_al": my_al, "near": near, "s_near": s_near})

        # -- step 2: far-path addition; near-path leading zeros -------------
        mx3 = Cat(Const(0, 3), v["mx"], Const(0, 1))         # p+4 bits
        my3 = Cat(v["my_al"], Const(0, 1))
        s_far = (mx3 + Mux(v["sub"], ~my3, my3) + v["sub"])[:p + 4]
        zero, lz = _lzc(v["s_near"])
        shmax = (v["ex"] - 1)[:E]
        sh = Mux(zero | (lz > shmax), shmax, lz)
        pass2 = {k: v[k] for k in ("ex", "sub", "sign", "nan", "inf", "inf_sign", "near", "s_near")}
        v = pipe.cut(2, {**pass2, "s_far": s_far, "sh": sh, "zero": zero})

        # -- step 3: normalise both paths, select ---------------------------
        s = v["s_far"]
        carry, top = s[p + 3], s[p + 2]
        f_mant = Signal(p, name="f_mant")
        f_guard = Signal(name="f_guard")
        f_sticky = Signal(name="f_sticky")
        f_em1 = Signal(E + 1, name="f_em1")                  # exponent - 1
        with m.If(carry):
            m.d.comb += [f_mant.eq(s[4:p + 4]), f_guard.eq(s[3]), f_sticky.eq(s[:3] != 0),
                         f_em1.eq(v["ex"])]
        with m.Elif(top | ~v["sub"]):
            m.d.comb += [f_mant.eq(s[3:p + 3]), f_guard.eq(s[2]), f_sticky.eq(s[:2] != 0),
                         f_em1.eq(v["ex"] - 1)]
        with m.Else():
            m.d.comb += [f_mant.eq(s[2:p + 2]), f_guard.eq(s[1]), f_sticky.eq(s[0]),
                         f_em1.eq(v["ex"] - 2)]
        n_shifted = (v["s_near"] << v["sh"])[:p + 1]
        n_em1 = Mux(v["zero"], 0, (v["ex"] - 1 - v["sh"])[:E + 1])
        near = v["near"]
        v = pipe.cut(3, {
            "mant": Mux(near, n_shifted[1:], f_mant),
            "guard": Mux(near, n_shifted[0], f_guard),
            "sticky": ~near & f_sticky,
            "em1": Mux(near, n_em1, f_em1),
            "sign": v["sign"] & ~(near & v["zero"]),
            **{k: v[k] for k in ("nan", "inf", "inf_sign")},
        })

        # -- step 4: round to nearest even, pack, specials ------------------
        inc = v["guard"] & (v["sticky"] | v["mant"][0])
        packed = ((v["em1"] << F) + v["mant"] + inc)[:E + F + 1]
        overflow = packed[F:] >= fmt.exp_max
        inf_bits = fmt.exp_max << F
        res = Signal(fmt.width, name="res")
        with m.If(v["nan"]):
            m.d.comb += res.eq(fmt.qnan)
        with m.Elif(v["inf"]):
            m.d.comb += res.eq(Cat(Const(inf_bits, E + F), v["inf_sign"]))
        with m.Elif(overflow):
            m.d.comb += res.eq(Cat(Const(inf_bits, E + F), v["sign"]))
        with m.Else():
            m.d.comb += res.eq(Cat(packed[:E + F], v["sign"]))
        v = pipe.cut(4, {"r": res, "nan": v["nan"], "ovf": ~v["nan"] & ~v["inf"] & overflow})

        m.d.comb += [
            self.r.eq(v["r"]),
            self.nan.eq(v["nan"]),
            self.ovf.eq(v["ovf"]),
        ]
        return m


class FPMinMax(wiring.Component):
    """Float min or max (``max`` high), combinational.

    NaN-propagating: any NaN input gives the canonical NaN and raises
    ``nan``. Orders -0 below +0; otherwise IEEE order. Subnormals compare by
    value (no flush to zero).
    """

    def __init__(self, fmt: FloatFormat = FP32):
        if not isinstance(fmt, FloatFormat):
            raise ValueError(f"fmt must be a FloatFormat, not {fmt!r}")
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
