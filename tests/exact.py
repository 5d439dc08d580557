"""Exact reference arithmetic for the golden model's tests.

Independent of ``sim/arith.py`` and of the machine's floating point: every
finite value is decoded to an exact integer pair (value = mant * 2**exp,
sign apart), sums are exact Python integers, and rounding to a format is
done explicitly (nearest, ties to even, gradual underflow, overflow to the
signed infinity).  Everything works on one element at a time, on raw bits
(Python ints), and returns raw bits.

Spec rules implemented (protocol.md, Arithmetic): x + (-x) = +0,
(-0) + (-0) = -0, inf + (-inf) = NaN, canonical NaNs 0x7FC00000 / 0x7FC0,
NaN-propagating min/max with -0 < +0, int32 wrapping with signed min/max.

Flags, per combination: ``nan`` when an input or the result is NaN; ``ovf``
when a finite float sum rounds to infinity, an int32 addition wraps, or a
finite binary32 accumulator rounds to a bf16 infinity.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import NamedTuple


class Fmt:
    """A binary interchange format: 1 sign bit, exp_bits, frac_bits."""

    __slots__ = ("name", "exp_bits", "frac_bits", "qnan", "width", "sign_bit", "exp_max",
                 "bias", "emin", "qmin", "frac_mask", "hidden")

    def __init__(self, name: str, exp_bits: int, frac_bits: int, qnan: int):
        self.name, self.exp_bits, self.frac_bits, self.qnan = name, exp_bits, frac_bits, qnan
        self.width = 1 + exp_bits + frac_bits
        self.sign_bit = 1 << (self.width - 1)
        self.exp_max = (1 << exp_bits) - 1          # the inf/NaN exponent field
        self.bias = (1 << (exp_bits - 1)) - 1
        self.emin = 1 - self.bias                   # exponent of the smallest normal
        self.qmin = self.emin - frac_bits           # exponent of the smallest subnormal
        self.frac_mask = (1 << frac_bits) - 1
        self.hidden = 1 << frac_bits

    def __repr__(self) -> str:
        return f"Fmt({self.name})"

    def inf(self, neg: bool) -> int:
        return (self.sign_bit if neg else 0) | (self.exp_max << self.frac_bits)

    def zero(self, neg: bool) -> int:
        return self.sign_bit if neg else 0


FP32 = Fmt("fp32", 8, 23, 0x7FC00000)
BF16 = Fmt("bf16", 8, 7, 0x7FC0)

# Decoded value kinds.
ZERO, FINITE, INF, NAN = "zero", "finite", "inf", "nan"


class Value(NamedTuple):
    """A decoded float: kind, sign, and for finite values mant * 2**exp."""

    kind: str
    neg: bool
    mant: int = 0
    exp: int = 0


_new_value = tuple.__new__   # Value(...) without the Python-level __new__ (hot path)


def decode(fmt: Fmt, bits: int) -> Value:
    bits = int(bits)
    if bits < 0 or bits >> fmt.width:
        raise ValueError(f"{bits:#x} is not a {fmt.name} bit pattern")
    neg = bits >= fmt.sign_bit
    e = (bits >> fmt.frac_bits) & fmt.exp_max
    f = bits & fmt.frac_mask
    if e == fmt.exp_max:
        return _new_value(Value, (NAN if f else INF, neg, 0, 0))
    if e == 0:
        if f == 0:
            return _new_value(Value, (ZERO, neg, 0, 0))
        return _new_value(Value, (FINITE, neg, f, fmt.qmin))
    return _new_value(Value, (FINITE, neg, f | fmt.hidden, e - fmt.bias - fmt.frac_bits))


def is_nan(fmt: Fmt, bits: int) -> bool:
    return decode(fmt, bits).kind == NAN


def to_fraction(fmt: Fmt, bits: int):
    """The exact value: a Fraction for finite values (zeros lose their sign),
    +-float('inf') for infinities, None for NaN."""
    v = decode(fmt, bits)
    if v.kind == NAN:
        return None
    if v.kind == INF:
        return float("-inf") if v.neg else float("inf")
    q = Fraction(v.mant) * Fraction(2) ** v.exp
    return -q if v.neg else q


# Rounding outcomes reported by round_exact (for test coverage statistics).
EXACT, BELOW_HALF, TIE, ABOVE_HALF = "exact", "below", "tie", "above"


def round_exact(fmt: Fmt, neg: bool, mant: int, exp: int) -> tuple[int, str]:
    """Round (-1)**neg * mant * 2**exp (mant >= 0) into fmt.

    Nearest, ties to even; gradual underflow (results below the smallest
    normal keep the subnormal quantum 2**qmin); a magnitude that rounds (with
    unbounded exponent) beyond the largest finite value gives the signed
    infinity; a value that rounds to zero keeps its sign.  Returns (bits,
    how) where how tells where the discarded part lay (EXACT, BELOW_HALF,
    TIE or ABOVE_HALF of the quantum).
    """
    if mant < 0:
        raise ValueError("mant must be >= 0")
    sign = fmt.sign_bit if neg else 0
    if mant == 0:
        return sign, EXACT
    top = mant.bit_length() - 1 + exp          # 2**top <= |value| < 2**(top+1)
    q = max(top, fmt.emin) - fmt.frac_bits     # quantum exponent at that binade
    if q <= exp:
        n, how = mant << (exp - q), EXACT
    else:
        shift = q - exp
        n, rem = mant >> shift, mant & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem == 0:
            how = EXACT
        elif rem < half:
            how = BELOW_HALF
        elif rem > half:
            how, n = ABOVE_HALF, n + 1
        else:
            how = TIE
            n += n & 1                         # to even
    if n == 0:
        return sign, how
    if n == 1 << (fmt.frac_bits + 1):          # carried into the next binade
        n, q = n >> 1, q + 1
    if n < (1 << fmt.frac_bits):               # subnormal (only when q == qmin)
        assert q == fmt.qmin
        return sign | n, how
    biased = q + fmt.frac_bits + fmt.bias
    if biased >= fmt.exp_max:
        return fmt.inf(neg), how
    return sign | (biased << fmt.frac_bits) | (n - (1 << fmt.frac_bits)), how


def round_fraction(fmt: Fmt, x: Fraction, neg_zero: bool = False) -> int:
    """Round an exact rational into fmt (bits).  Zero gives -0 if neg_zero."""
    x = Fraction(x)
    if x == 0:
        return fmt.zero(neg_zero)
    neg, x = x < 0, abs(x)
    num, den = x.numerator, x.denominator
    # Scale to an integer with enough extra bits that the discarded part is
    # represented faithfully: mant = floor(x * 2**k), sticky bit if inexact.
    k = fmt.frac_bits + 64 - (num.bit_length() - den.bit_length())
    scaled, rest = divmod(num << k, den) if k >= 0 else divmod(num, den << -k)
    mant = (scaled << 1) | (1 if rest else 0)   # the sticky bit sits below all kept bits
    return round_exact(fmt, neg, mant, -k - 1)[0]


def _exact_sum(va: Value, vb: Value) -> tuple[int, int]:
    """The exact sum of two finite-or-zero values as (signed int, exp)."""
    if va.kind == ZERO:
        va, vb = vb, va
    if vb.kind == ZERO:
        return (-va.mant if va.neg else va.mant), va.exp
    e = va.exp if va.exp < vb.exp else vb.exp
    x = va.mant << (va.exp - e)
    y = vb.mant << (vb.exp - e)
    return (-x if va.neg else x) + (-y if vb.neg else y), e


def add(fmt: Fmt, a: int, b: int) -> tuple[int, bool, bool]:
    """Exact a + b rounded once into fmt: (bits, nan, ovf)."""
    va, vb = decode(fmt, a), decode(fmt, b)
    if va.kind == NAN or vb.kind == NAN:
        return fmt.qnan, True, False
    if va.kind == INF or vb.kind == INF:
        if va.kind == INF and vb.kind == INF and va.neg != vb.neg:
            return fmt.qnan, True, False
        return fmt.inf(va.neg if va.kind == INF else vb.neg), False, False
    if va.kind == ZERO and vb.kind == ZERO:
        return fmt.zero(va.neg and vb.neg), False, False
    total, e = _exact_sum(va, vb)
    if total == 0:                      # exact cancellation: +0 in round-to-nearest
        return fmt.zero(False), False, False
    bits, _ = round_exact(fmt, total < 0, abs(total), e)
    return bits, False, bits & ~fmt.sign_bit == fmt.inf(False)


def add_how(fmt: Fmt, a: int, b: int) -> str | None:
    """Where the exact finite sum a + b fell between fmt's neighbours (EXACT,
    BELOW_HALF, TIE, ABOVE_HALF), or None for non-finite operands."""
    va, vb = decode(fmt, a), decode(fmt, b)
    if va.kind in (NAN, INF) or vb.kind in (NAN, INF):
        return None
    if va.kind == ZERO and vb.kind == ZERO:
        return EXACT
    total, e = _exact_sum(va, vb)
    return round_exact(fmt, total < 0, abs(total), e)[1]


def _order_key(fmt: Fmt, v: Value) -> tuple[int, int]:
    """Total order on non-NaN values with -0 < +0: (value in units of the
    smallest subnormal, exact as every finite value is a multiple of it;
    zero tiebreak).  Infinities lie beyond every finite value."""
    if v.kind == INF:
        mag = 1 << (fmt.exp_max + fmt.frac_bits + 2)
    elif v.kind == ZERO:
        return (0, -1 if v.neg else 0)
    else:
        mag = v.mant << (v.exp - fmt.qmin)
    return (-mag if v.neg else mag, 0)


def minmax(fmt: Fmt, op: str, a: int, b: int) -> tuple[int, bool, bool]:
    """min or max of a and b: (bits, nan, ovf=False)."""
    if op not in ("min", "max"):
        raise ValueError(op)
    va, vb = decode(fmt, a), decode(fmt, b)
    if va.kind == NAN or vb.kind == NAN:
        return fmt.qnan, True, False
    ka, kb = _order_key(fmt, va), _order_key(fmt, vb)
    if ka == kb:
        assert a == b
    pick_a = ka <= kb if op == "min" else ka >= kb
    return (a if pick_a else b), False, False


def convert(src: Fmt, dst: Fmt, bits: int) -> tuple[int, bool]:
    """Convert a src value into dst (nearest, ties to even): (bits, ovf).
    NaN gives dst's canonical NaN; ovf when a finite value becomes infinite."""
    v = decode(src, bits)
    if v.kind == NAN:
        return dst.qnan, False
    if v.kind == INF:
        return dst.inf(v.neg), False
    if v.kind == ZERO:
        return dst.zero(v.neg), False
    out, _ = round_exact(dst, v.neg, v.mant, v.exp)
    return out, decode(dst, out).kind == INF


def fp32_to_bf16(bits: int) -> tuple[int, bool]:
    return convert(FP32, BF16, bits)


@functools.cache
def bf16_to_fp32(bits: int) -> int:
    out, ovf = convert(BF16, FP32, bits)
    assert not ovf
    return out


def canonical(fmt: Fmt, bits: int) -> int:
    return fmt.qnan if is_nan(fmt, bits) else bits


# ---------------------------------------------------------------- int32

def _signed32(x: int) -> int:
    x = int(x) & 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def int32_op(op: str, a: int, b: int) -> tuple[int, bool, bool]:
    """int32 sum (wrapping), signed min or max: (bits, nan=False, ovf)."""
    sa, sb = _signed32(a), _signed32(b)
    if op == "sum":
        s = sa + sb
        return s & 0xFFFFFFFF, False, not -(1 << 31) <= s < (1 << 31)
    if op == "min":
        return min(sa, sb) & 0xFFFFFFFF, False, False
    if op == "max":
        return max(sa, sb) & 0xFFFFFFFF, False, False
    raise ValueError(op)


# ---------------------------------------------------------------- reductions

def float_op(fmt: Fmt, op: str, a: int, b: int) -> tuple[int, bool, bool]:
    return add(fmt, a, b) if op == "sum" else minmax(fmt, op, a, b)


def _fold_float(fmt: Fmt, op: str, values) -> tuple[int, bool, bool]:
    acc = values[0]
    nan_any = ovf_any = False
    if is_nan(fmt, acc):
        acc, nan_any = fmt.qnan, True
    for v in values[1:]:
        acc, nan, ovf = add(fmt, acc, v) if op == "sum" else minmax(fmt, op, acc, v)
        nan_any |= nan
        ovf_any |= ovf
    return acc, nan_any, ovf_any


def fold(dtype: str, op: str, values, mode: str = "fp32") -> tuple[int, bool, bool]:
    """Left-to-right combination ((v0 op v1) op v2) ... of one element's
    contributions, as a slot copy does it.  dtype is "int32", "fp32" or
    "bf16"; mode ("bf16" or "fp32") is the bf16 accumulation mode.
    Returns (result bits, nan, ovf), flags or-ed over the combinations."""
    if op not in ("sum", "min", "max"):
        raise ValueError(op)
    values = list(values)
    if not values:
        raise ValueError("no contributions")
    if dtype == "int32":
        acc, ovf_any = values[0] & 0xFFFFFFFF, False
        for v in values[1:]:
            acc, _, ovf = int32_op(op, acc, v)
            ovf_any |= ovf
        return acc, False, ovf_any
    if dtype == "fp32":
        return _fold_float(FP32, op, values)
    if dtype == "bf16" and mode == "bf16":
        return _fold_float(BF16, op, values)
    if dtype == "bf16" and mode == "fp32":
        acc, nan_any, ovf_any = _fold_float(FP32, op, [bf16_to_fp32(v) for v in values])
        out, ovf = fp32_to_bf16(acc)
        return out, nan_any, ovf_any or ovf
    raise ValueError(f"bad dtype/mode {dtype}/{mode}")
