"""Sanity tests of the exact reference (tests/exact.py) itself.

Expected values are derived by hand (comments give the derivation), never
taken from the code under test.  A brute-force nearest-value search over all
bf16 values cross-checks the rounding algorithm independently.
"""

from __future__ import annotations

import bisect
import random
from fractions import Fraction

import exact as ex
import pytest
from exact import BF16, FP32

ONE32 = 0x3F800000          # 1.0: biased exponent 127
TWO_M24 = 0x33800000        # 2^-24: biased 103 = 0x67; half an ulp of 1.0
TWO_M23 = 0x34000000        # 2^-23: one ulp of 1.0
MAX32 = 0x7F7FFFFF          # (2^24 - 1) * 2^104
HALF_ULP_MAX32 = 0x73000000  # 2^103: biased 230 = 0xE6
INF32, NINF32 = 0x7F800000, 0xFF800000
ONE16 = 0x3F80
TWO_M8 = 0x3B80             # 2^-8: biased 119 = 0x77; half an ulp of 1.0 in bf16
MAX16 = 0x7F7F              # 255 * 2^120
HALF_ULP_MAX16 = 0x7B00     # 2^119: biased 246 = 0xF6
INF16 = 0x7F80


def test_decode_values():
    assert ex.to_fraction(FP32, ONE32) == 1
    assert ex.to_fraction(FP32, 0xBFC00000) == Fraction(-3, 2)
    assert ex.to_fraction(FP32, 0x00000001) == Fraction(1, 2**149)
    assert ex.to_fraction(FP32, 0x007FFFFF) == Fraction(2**23 - 1, 2**149)
    assert ex.to_fraction(FP32, 0x00800000) == Fraction(1, 2**126)
    assert ex.to_fraction(FP32, MAX32) == (2**24 - 1) * 2**104
    assert ex.to_fraction(FP32, NINF32) == float("-inf")
    assert ex.to_fraction(FP32, 0x7F800001) is None
    assert ex.to_fraction(BF16, 0x0001) == Fraction(1, 2**133)
    assert ex.to_fraction(BF16, 0x0080) == Fraction(1, 2**126)
    assert ex.to_fraction(BF16, MAX16) == 255 * 2**120
    assert ex.to_fraction(BF16, 0xC040) == -3
    assert ex.decode(FP32, 0x80000000) == ex.Value(ex.ZERO, True)
    with pytest.raises(ValueError):
        ex.decode(BF16, 0x10000)


@pytest.mark.parametrize("a, b, want", [
    (ONE32, ONE32, 0x40000000),                    # 1 + 1 = 2
    (ONE32, TWO_M24, ONE32),                       # 1 + 2^-24: tie, 1.0 is even
    (0x3F800001, TWO_M24, 0x3F800002),             # (1 + 2^-23) + 2^-24: tie, up to even
    (ONE32, 0x33800001, 0x3F800001),               # just above the tie: up
    (ONE32, 0x337FFFFF, ONE32),                    # just below the tie: down
    (ONE32, TWO_M23 | 0x80000000, 0x3F7FFFFE),     # 1 - 2^-23 = 0xFFFFFE * 2^-24
    (ONE32, TWO_M24 | 0x80000000, 0x3F7FFFFF),     # 1 - 2^-24 = 0xFFFFFF * 2^-24
    (ONE32, 0xB3000000, ONE32),                    # 1 - 2^-25: tie between 1-2^-24 (odd) and 1
    (0x3DCCCCCD, 0x3E4CCCCD, 0x3E99999A),          # 0.1f + 0.2f = 40265319 * 2^-27 -> 0.3f
    (0x00000001, 0x00000001, 0x00000002),          # subnormals add exactly
    (0x007FFFFF, 0x00000001, 0x00800000),          # largest subnormal + min = smallest normal
    (0x00800000, 0x80000001, 0x007FFFFF),          # and back down
    (MAX32, HALF_ULP_MAX32, INF32),                # max + half ulp: tie to even = 2^128 -> inf
    (MAX32, 0x72FFFFFF, MAX32),                    # max + a bit under half ulp stays
    (MAX32 | 0x80000000, HALF_ULP_MAX32 | 0x80000000, NINF32),
    (MAX32, MAX32, INF32),
    (ONE32, 0xBF800000, 0x00000000),               # x + (-x) = +0
    (0x80000001, 0x00000001, 0x00000000),
    (0x80000000, 0x80000000, 0x80000000),          # (-0) + (-0) = -0
    (0x80000000, 0x00000000, 0x00000000),
    (0x00000000, 0x80000000, 0x00000000),
    (0x80000000, 0x80000001, 0x80000001),
    (INF32, MAX32 | 0x80000000, INF32),
    (NINF32, NINF32, NINF32),
])
def test_fp32_add(a, b, want):
    bits, nan, ovf = ex.add(FP32, a, b)
    assert bits == want
    assert not nan
    finite_in = all(ex.decode(FP32, x).kind != ex.INF for x in (a, b))
    assert ovf == (finite_in and want in (INF32, NINF32))
    assert ex.add(FP32, b, a) == (bits, nan, ovf)


@pytest.mark.parametrize("a, b", [
    (INF32, NINF32), (NINF32, INF32), (0x7F800001, ONE32), (ONE32, 0xFFFFFFFF),
    (0x7FC00001, INF32), (0xFFC00000, 0x7F800001),
])
def test_fp32_add_nan(a, b):
    assert ex.add(FP32, a, b) == (0x7FC00000, True, False)


@pytest.mark.parametrize("a, b, want, ovf", [
    (ONE16, TWO_M8, ONE16, False),                 # 1 + 2^-8: tie, to even 1.0
    (0x3F81, TWO_M8, 0x3F82, False),               # (1 + 2^-7) + 2^-8: tie, up to even
    (ONE16, 0x3B81, 0x3F81, False),                # above the tie
    (ONE16, 0x3A00, ONE16, False),                 # 1 + 2^-11
    (MAX16, HALF_ULP_MAX16, INF16, True),          # max + half ulp -> inf
    (MAX16, 0x7A80, MAX16, False),                 # max + 2^118 stays
    (0x0001, 0x0001, 0x0002, False),               # 2^-133 subnormals
    (0x007F, 0x0001, 0x0080, False),
    (0x3F80, 0xBF80, 0x0000, False),
    (0x8000, 0x8000, 0x8000, False),
    (INF16, 0xFF80, 0x7FC0, False),
])
def test_bf16_add(a, b, want, ovf):
    bits, nan, got_ovf = ex.add(BF16, a, b)
    assert (bits, got_ovf) == (want, ovf)
    assert nan == (want == 0x7FC0)


@pytest.mark.parametrize("fp32, bf16, ovf", [
    (0x3F800000, 0x3F80, False),
    (0x3F808000, 0x3F80, False),                   # 1 + 2^-8: tie to even
    (0x3F818000, 0x3F82, False),                   # (1 + 2^-7) + 2^-8: tie, up
    (0x3F808001, 0x3F81, False),                   # above the tie
    (0x3F807FFF, 0x3F80, False),                   # below the tie
    (0xBF808001, 0xBF81, False),
    (0x7F7F7FFF, 0x7F7F, False),                   # just under max_bf16 + half ulp
    (0x7F7F8000, 0x7F80, True),                    # max_bf16 + half ulp: tie, 0x7F7F odd -> inf
    (0x7F7FFFFF, 0x7F80, True),
    (0xFF7FFFFF, 0xFF80, True),
    (0x00000001, 0x0000, False),                   # 2^-149 -> +0
    (0x80000001, 0x8000, False),                   # -> -0
    (0x00008000, 0x0000, False),                   # 2^-134: tie between 0 and 2^-133
    (0x00018000, 0x0002, False),                   # 3 * 2^-134: tie, up to 2 * 2^-133
    (0x00008001, 0x0001, False),
    (0x007FFFFF, 0x0080, False),                   # largest fp32 subnormal -> smallest normal
    (0x7F800000, 0x7F80, False),
    (0x7F800001, 0x7FC0, False),                   # sNaN whose truncation would be inf
    (0xFFFFFFFF, 0x7FC0, False),
    (0x80000000, 0x8000, False),
])
def test_fp32_to_bf16(fp32, bf16, ovf):
    assert ex.fp32_to_bf16(fp32) == (bf16, ovf)


def test_bf16_to_fp32():
    assert ex.bf16_to_fp32(0x3F80) == 0x3F800000
    assert ex.bf16_to_fp32(0x0001) == 0x00010000
    assert ex.bf16_to_fp32(0xFF80) == 0xFF800000
    assert ex.bf16_to_fp32(0x7F81) == 0x7FC00000


@pytest.mark.parametrize("op, a, b, want", [
    ("min", 0x00000000, 0x80000000, 0x80000000),   # -0 < +0
    ("min", 0x80000000, 0x00000000, 0x80000000),
    ("max", 0x80000000, 0x00000000, 0x00000000),
    ("max", 0x00000000, 0x80000000, 0x00000000),
    ("max", 0xBF800000, 0xC0000000, 0xBF800000),   # max(-1, -2) = -1
    ("min", 0xBF800000, 0xC0000000, 0xC0000000),
    ("min", NINF32, 0xFF7FFFFF, NINF32),
    ("max", INF32, MAX32, INF32),
    ("min", 0x00000001, 0x80000001, 0x80000001),
    ("max", 0x00000001, 0x00000000, 0x00000001),
])
def test_fp32_minmax(op, a, b, want):
    assert ex.minmax(FP32, op, a, b) == (want, False, False)


@pytest.mark.parametrize("op", ["min", "max"])
def test_minmax_nan(op):
    assert ex.minmax(FP32, op, ONE32, 0x7F800001) == (0x7FC00000, True, False)
    assert ex.minmax(FP32, op, 0xFFC00000, NINF32) == (0x7FC00000, True, False)
    assert ex.minmax(BF16, op, 0xFF81, INF16) == (0x7FC0, True, False)


@pytest.mark.parametrize("op, a, b, want, ovf", [
    ("sum", 0x7FFFFFFF, 0x00000001, 0x80000000, True),
    ("sum", 0xFFFFFFFF, 0x00000001, 0x00000000, False),   # -1 + 1
    ("sum", 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, True),    # -2^31 - 1 wraps
    ("sum", 0x80000000, 0x80000000, 0x00000000, True),
    ("sum", 0x40000000, 0x3FFFFFFF, 0x7FFFFFFF, False),
    ("min", 0x80000000, 0x7FFFFFFF, 0x80000000, False),
    ("max", 0xFFFFFFFF, 0x00000000, 0x00000000, False),
    ("min", 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFE, False),
])
def test_int32(op, a, b, want, ovf):
    assert ex.int32_op(op, a, b) == (want, False, ovf)


def test_fold():
    # Left to right: (1 + 2^-24) + 2^-24 = 1 twice over; the other order is 1 + 2^-23.
    assert ex.fold("fp32", "sum", [ONE32, TWO_M24, TWO_M24]) == (ONE32, False, False)
    assert ex.fold("fp32", "sum", [TWO_M24, TWO_M24, ONE32]) == (0x3F800001, False, False)
    # bf16: per-step rounding loses 2 * 2^-8, the binary32 accumulator keeps it.
    assert ex.fold("bf16", "sum", [ONE16, TWO_M8, TWO_M8], "bf16") == (ONE16, False, False)
    assert ex.fold("bf16", "sum", [ONE16, TWO_M8, TWO_M8], "fp32") == (0x3F81, False, False)
    # Overflow only in the final rounding (fp32 mode), or transient in bf16 mode.
    assert ex.fold("bf16", "sum", [MAX16, HALF_ULP_MAX16], "fp32") == (INF16, False, True)
    m = [MAX16, HALF_ULP_MAX16, HALF_ULP_MAX16 | 0x8000]
    assert ex.fold("bf16", "sum", m, "fp32") == (MAX16, False, False)
    assert ex.fold("bf16", "sum", m, "bf16") == (INF16, False, True)
    # One contributor: unchanged but for NaN canonicalisation.
    assert ex.fold("fp32", "sum", [0x7F800001]) == (0x7FC00000, True, False)
    assert ex.fold("bf16", "max", [0xFF81], "fp32") == (0x7FC0, True, False)
    assert ex.fold("bf16", "min", [0x8001], "bf16") == (0x8001, False, False)
    assert ex.fold("int32", "sum", [0x7FFFFFFF, 1, 0xFFFFFFFF]) == (0x7FFFFFFF, False, True)
    assert ex.fold("int32", "max", [5, 0x80000000, 7]) == (7, False, False)


def test_round_fraction():
    # 1/3 = 1.0101...b * 2^-2: floor(2^25 / 3) = 0xAAAAAA, remainder 2/3 > 1/2: up.
    assert ex.round_fraction(FP32, Fraction(1, 3)) == 0x3EAAAAAB
    assert ex.round_fraction(FP32, Fraction(-1, 3)) == 0xBEAAAAAB
    assert ex.round_fraction(BF16, Fraction(1, 3)) == 0x3EAB        # 0xAA then 1010... -> 0xAB
    assert ex.round_fraction(FP32, Fraction(0)) == 0
    assert ex.round_fraction(FP32, Fraction(0), neg_zero=True) == 0x80000000
    assert ex.round_fraction(FP32, Fraction(1, 2**150)) == 0          # tie to even 0
    assert ex.round_fraction(FP32, Fraction(3, 2**151)) == 1          # 0.75 quantum -> 1
    assert ex.round_fraction(FP32, Fraction(-1, 2**151)) == 0x80000000
    assert ex.round_fraction(FP32, Fraction(2**128)) == INF32
    assert ex.round_fraction(FP32, Fraction(2**128 - 2**103)) == INF32  # max + half ulp
    assert ex.round_fraction(FP32, Fraction(2**128 - 2**103 - 1)) == MAX32
    assert ex.round_fraction(BF16, Fraction(10**40)) == INF16


def _bf16_table():
    """Every non-negative finite bf16 value, ascending, with its bits."""
    bits = [b for b in range(0x7F80)]
    return [ex.to_fraction(BF16, b) for b in bits], bits


def _brute_round_bf16(values, bits, x: Fraction) -> int:
    """Nearest bf16 by search over all values; ties to the even pattern;
    overflow at max + half ulp (IEEE 754 clause 4.3.1)."""
    neg, x = x < 0, abs(x)
    sign = 0x8000 if neg else 0
    limit = Fraction(255 * 2**120 + 2**119)
    if x >= limit:
        return sign | INF16
    i = bisect.bisect_left(values, x)
    if i < len(values) and values[i] == x:
        return sign | bits[i]
    lo, hi = i - 1, min(i, len(values) - 1)
    if x > values[-1]:
        return sign | bits[-1]
    dlo, dhi = x - values[lo], values[hi] - x
    if dlo < dhi:
        return sign | bits[lo]
    if dhi < dlo:
        return sign | bits[hi]
    return sign | (bits[lo] if bits[lo] % 2 == 0 else bits[hi])


def test_round_matches_brute_force_bf16():
    values, bits = _bf16_table()
    rng = random.Random(1234)
    cases = []
    for _ in range(4000):
        i = rng.randrange(len(values) - 1)
        lo, hi = values[i], values[i + 1]
        kind = rng.randrange(4)
        if kind == 0:
            x = (lo + hi) / 2                                  # exact tie
        elif kind == 1:
            x = lo + (hi - lo) * Fraction(rng.randrange(1, 1000), 1000)
        elif kind == 2:
            x = (lo + hi) / 2 + (hi - lo) * Fraction(rng.choice([-1, 1]), 2**40)
        else:
            x = lo
        cases.append(-x if rng.randrange(2) else x)
    top = values[-1]
    cases += [top + 2**119, top + 2**119 - 1, top + 2**118, Fraction(1, 2**134),
              Fraction(3, 2**135), Fraction(1, 2**200)]
    for x in cases:
        want = _brute_round_bf16(values, bits, x)
        got = ex.round_fraction(BF16, x, neg_zero=x < 0)
        assert got == want, (x, hex(got), hex(want))


def test_minmax_zero_against_nonzero():
    # -0 sits between the negative and the positive values, just below +0.
    for zero in (0x00000000, 0x80000000):
        assert ex.minmax(FP32, "min", 0x80000001, zero)[0] == 0x80000001
        assert ex.minmax(FP32, "max", 0x80000001, zero)[0] == zero
        assert ex.minmax(FP32, "min", 0x00000001, zero)[0] == zero
        assert ex.minmax(FP32, "max", zero, 0x00000001)[0] == 0x00000001
        assert ex.minmax(FP32, "min", NINF32, zero)[0] == NINF32
        assert ex.minmax(FP32, "max", INF32, zero)[0] == INF32
