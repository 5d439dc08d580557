"""sim/arith.py against the exact reference (tests/exact.py), bit for bit.

Random operands are drawn as bit patterns, not as uniform floats: exponents
over the whole range, clustered at the subnormal and overflow ends and
around 1; fractions with random runs of trailing zeros (exact ties); second
operands aligned a few binades below the first (rounding and sticky bits),
or the first's negation nudged by a few ulps (near and exact cancellation);
specials mixed in.  The sum tests check that the sample really contains
ties, subnormal results, cancellations and overflows.
"""

from __future__ import annotations

import exact as ex
import numpy as np
import pytest

from netagg.sim import arith
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS, INT32_SPECIALS
from netagg.wire import DType, Op

N_SUM = 100_000
N_MINMAX = 50_000   # min/max are simpler and their reference is as slow: fewer pairs
N_LONG = 1_000_000  # per (format, mode, op) in the slow run
N_SUB = 20_000      # pairs for combine() on raw accumulators and the coverage count
FMTS = {DType.FP32: ex.FP32, DType.BF16: ex.BF16}
SPECIALS = {DType.FP32: FP32_SPECIALS, DType.BF16: BF16_SPECIALS, DType.INT32: INT32_SPECIALS}
# (dtype, mode) pairs: fp32 and int32 have one accumulator, bf16 two.
FLOAT_CASES = [(DType.FP32, "fp32"), (DType.BF16, "bf16"), (DType.BF16, "fp32")]
ALL_CASES = FLOAT_CASES + [(DType.INT32, "fp32")]
OPS = list(Op)


def _case_id(case):
    dtype, mode = case
    return dtype.wire if dtype is not DType.BF16 else f"bf16-acc{mode}"


# ---------------------------------------------------------------- operand generation

def _u64(x):
    return np.asarray(x, dtype=np.uint64)


def _fraction(rng, n, fmt):
    fb = fmt.frac_bits
    fmax = (1 << fb) - 1
    uniform = rng.integers(0, 1 << fb, n, dtype=np.uint64)
    tz = rng.integers(0, fb + 1, n).astype(np.uint64)
    zeros = uniform & ~((_u64(1) << tz) - _u64(1))            # random trailing zeros
    few = rng.choice(_u64([0, 1, 2, fmax, fmax - 1, 1 << (fb - 1), (1 << (fb - 1)) | 1]), n)
    kind = rng.integers(0, 3, n)
    return np.select([kind == 0, kind == 1], [uniform, zeros], few)


def _exponent(rng, n, fmt):
    emax, bias = fmt.exp_max, fmt.bias
    kind = rng.integers(0, 4, n)
    return np.select(
        [kind == 0, kind == 1, kind == 2],
        [rng.integers(0, emax + 1, n),                 # anywhere (inf/NaN included)
         rng.integers(0, 4, n),                        # subnormal and smallest normals
         rng.integers(emax - 4, emax, n)],             # largest binades
        rng.integers(bias - 12, bias + 13, n),         # around 1
    ).astype(np.uint64)


def _assemble(fmt, sign, exp, frac):
    return (_u64(sign) << _u64(fmt.width - 1)) | (_u64(exp) << _u64(fmt.frac_bits)) | _u64(frac)


def _specials_draw(rng, n, dtype):
    return rng.choice(_u64(SPECIALS[dtype]), n)


def float_pairs(rng, n, dtype):
    """n (a, b) pairs of raw float bits (uint64 arrays) for dtype."""
    fmt = FMTS[dtype]
    signbit = _u64(fmt.sign_bit)
    inf = _u64(fmt.inf(False))
    a = _assemble(fmt, rng.integers(0, 2, n), _exponent(rng, n, fmt), _fraction(rng, n, fmt))
    a = np.where(rng.random(n) < 0.03, _specials_draw(rng, n, dtype), a)

    independent = _assemble(fmt, rng.integers(0, 2, n), _exponent(rng, n, fmt),
                            _fraction(rng, n, fmt))
    # Aligned: a few binades below (or just above) a's, random sign.
    ea = ((a >> _u64(fmt.frac_bits)) & _u64(fmt.exp_max)).astype(np.int64)
    d = rng.integers(-2, fmt.frac_bits + 5, n)
    eb = np.clip(ea - d, 0, fmt.exp_max - 1)
    aligned = _assemble(fmt, rng.integers(0, 2, n), eb, _fraction(rng, n, fmt))
    # Near cancellation: |a| nudged by a few ulps, mostly with the opposite sign.
    mag = (a & ~signbit).astype(np.int64)
    nudged = np.clip(mag + rng.integers(-3, 4, n), 0, int(inf) - 1).astype(np.uint64)
    flip = np.where(rng.random(n) < 0.8, signbit, _u64(0))
    near = (a & signbit) ^ flip | nudged

    kind = rng.integers(0, 10, n)
    b = np.select([kind < 3, kind < 6, kind < 9], [independent, aligned, near],
                  _specials_draw(rng, n, dtype))
    swap = rng.random(n) < 0.5
    return np.where(swap, b, a), np.where(swap, a, b)


def int32_pairs(rng, n):
    def one():
        kind = rng.integers(0, 4, n)
        uniform = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        small = (rng.integers(-300, 300, n) & 0xFFFFFFFF).astype(np.uint64)
        edge = (rng.choice(_u64([0x7FFFFFFF, 0x80000000]), n).astype(np.int64)
                + rng.integers(-300, 300, n)) & 0xFFFFFFFF
        return np.select([kind == 0, kind == 1, kind == 2],
                         [uniform, small, edge.astype(np.uint64)],
                         _specials_draw(rng, n, DType.INT32))
    return one(), one()


def all_pairs(values):
    v = _u64(values)
    return np.repeat(v, len(v)), np.tile(v, len(v))


# ---------------------------------------------------------------- model vs reference

def model_fold(dtype, op, rows, mode):
    """to_acc, combine..., from_acc with per-element flags."""
    acc, nan = arith.to_acc(dtype, rows[0], mode)
    ovf = np.zeros(nan.shape, dtype=bool)
    for row in rows[1:]:
        acc, n2, o2 = arith.combine(dtype, op, acc, row, mode)
        nan, ovf = nan | n2, ovf | o2
    out, o3 = arith.from_acc(dtype, acc, mode)
    return out, nan, ovf | o3


def ref_fold(dtype, op, rows, mode):
    cols = np.stack([_u64(r) for r in rows], axis=1).tolist()
    d, o = dtype.wire, op.wire
    res = [ex.fold(d, o, col, mode) for col in cols]
    bits, nan, ovf = zip(*res, strict=True) if res else ((), (), ())
    return _u64(bits), np.array(nan, dtype=bool), np.array(ovf, dtype=bool)


def ref_pairwise(fn, a, b):
    res = [fn(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    bits, nan, ovf = zip(*res, strict=True) if res else ((), (), ())
    return _u64(bits), np.array(nan, dtype=bool), np.array(ovf, dtype=bool)


def assert_same(what, operands, got, want):
    """got/want: (bits, nan, ovf) arrays; operands: tuple of arrays."""
    assert len(got) == len(want), what
    for name, g, w in zip(("bits", "nan", "ovf"), got, want, strict=False):
        g, w = np.asarray(g).astype(np.uint64), np.asarray(w).astype(np.uint64)
        assert g.shape == w.shape, (what, name, g.shape, w.shape)
        bad = np.flatnonzero(g != w)
        if bad.size:
            show = [
                "(" + ", ".join(f"{int(o[i]):#x}" for o in operands)
                + f") -> model {int(g[i]):#x}, exact {int(w[i]):#x}"
                for i in bad[:8]
            ]
            pytest.fail(f"{what}: {name} differs on {bad.size} of {g.size}:\n  "
                        + "\n  ".join(show))


def check_pairs(dtype, op, mode, a, b, n_combine=None):
    """Every level at which arith can be compared on (a, b) pairs: the whole
    pipeline on all pairs, combine() alone on the first n_combine."""
    what = f"{dtype.wire}/{op.wire}/acc={mode}"
    # Whole pipeline: first contribution a, second b, result as sent.
    assert_same(what + " pipeline", (a, b), model_fold(dtype, op, [a, b], mode),
                ref_fold(dtype, op, [a, b], mode))
    a, b = a[:n_combine], b[:n_combine]
    # combine() on raw accumulator bits (NaN payloads, signalling NaNs in acc).
    if dtype is DType.INT32:
        fn = lambda x, y: ex.int32_op(op.wire, x, y)  # noqa: E731
        acc = a
    elif dtype is DType.BF16 and mode == "fp32":
        fn = lambda x, y: ex.float_op(ex.FP32, op.wire, x, ex.bf16_to_fp32(y))  # noqa: E731
        acc = _u64([ex.bf16_to_fp32(x) if not ex.is_nan(ex.BF16, x) else (x << 16)
                    for x in a.tolist()])               # raw widening keeps NaN payloads
    else:
        fn = lambda x, y: ex.float_op(FMTS[dtype], op.wire, x, y)  # noqa: E731
        acc = a
    assert_same(what + " combine", (acc, b), arith.combine(dtype, op, acc, b, mode),
                ref_pairwise(fn, acc, b))


def random_pairs(case, op, n, seed):
    dtype, mode = case
    rng = np.random.default_rng([seed, int(dtype), int(op), mode == "fp32"])
    a, b = float_pairs(rng, n, dtype)
    check_pairs(dtype, op, mode, a, b, n_combine=N_SUB)
    if op is Op.SUM:
        check_sum_coverage(FMTS[dtype], a[:N_SUB], b[:N_SUB])


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.wire)
@pytest.mark.parametrize("case", FLOAT_CASES, ids=_case_id)
def test_float_random_pairs(case, op):
    random_pairs(case, op, N_SUM if op is Op.SUM else N_MINMAX, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.wire)
@pytest.mark.parametrize("case", FLOAT_CASES, ids=_case_id)
def test_float_random_pairs_long(case, op):
    random_pairs(case, op, N_LONG, seed=1)


def check_sum_coverage(fmt, a, b):
    """The random sample exercises what it claims to (a test of the generator):
    at least 0.5 % of the pairs in each class."""
    n = len(a)
    count = dict.fromkeys(("tie", "inexact", "exact", "subnormal result", "zero result",
                           "cancellation", "overflow", "nan"), 0)
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        bits, nan, ovf = ex.add(fmt, x, y)
        how = ex.add_how(fmt, x, y)
        s, vx, vy = ex.decode(fmt, bits), ex.decode(fmt, x), ex.decode(fmt, y)
        count["tie"] += how == ex.TIE
        count["inexact"] += how in (ex.BELOW_HALF, ex.ABOVE_HALF)
        count["exact"] += how == ex.EXACT
        count["subnormal result"] += s.kind == ex.FINITE and s.mant < (1 << fmt.frac_bits)
        count["zero result"] += s.kind == ex.ZERO
        count["overflow"] += ovf
        count["nan"] += nan
        # Massive cancellation: the sum is at least 4 binades below the larger operand.
        if vx.kind == vy.kind == s.kind == ex.FINITE and vx.neg != vy.neg:
            top = max(vx.mant.bit_length() + vx.exp, vy.mant.bit_length() + vy.exp)
            count["cancellation"] += s.mant.bit_length() + s.exp + 4 <= top
    for name, c in count.items():
        assert c >= n // 200, f"{fmt.name} sample has only {c} of {n}: {name}"


@pytest.mark.parametrize("mode", ["bf16", "fp32"])
def test_bf16_sum_double_rounding_region(mode):
    """bf16 sums whose exact value does not fit binary32 (operands 15 to 30
    binades apart): arith rounds to binary32 first, then to bf16 (mode
    "bf16") or keeps the binary32 sum (mode "fp32"); the reference rounds
    the exact sum once."""
    rng = np.random.default_rng(19)
    n = 20_000
    fmt = ex.BF16
    ea = rng.integers(31, fmt.exp_max, n)
    eb = ea - rng.integers(15, 31, n)
    a = _assemble(fmt, rng.integers(0, 2, n), ea, _fraction(rng, n, fmt))
    b = _assemble(fmt, rng.integers(0, 2, n), eb, rng.integers(0, 1 << fmt.frac_bits, n))
    swap = rng.random(n) < 0.5
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    check_pairs(DType.BF16, Op.SUM, mode, a, b, n_combine=5_000)
    # The binary32 step really rounds in most of these pairs.
    wide_inexact = sum(ex.add_how(ex.FP32, ex.bf16_to_fp32(x), ex.bf16_to_fp32(y)) != ex.EXACT
                       for x, y in zip(a.tolist(), b.tolist(), strict=True))
    assert wide_inexact > n // 2


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.wire)
@pytest.mark.parametrize("case", ALL_CASES, ids=_case_id)
def test_special_pairs(case, op):
    dtype, mode = case
    a, b = all_pairs(SPECIALS[dtype])
    check_pairs(dtype, op, mode, a, b)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.wire)
def test_int32_random_pairs(op):
    rng = np.random.default_rng([7, int(op)])
    a, b = int32_pairs(rng, N_SUM)
    check_pairs(DType.INT32, op, "fp32", a, b, n_combine=N_SUB)
    if op is Op.SUM:
        ovf = arith.combine(DType.INT32, op, a, b)[2]
        assert N_SUM // 50 < ovf.sum() < N_SUM // 2


def test_fp32_to_bf16():
    rng = np.random.default_rng(11)
    n = 100_000
    a, _ = float_pairs(rng, n, DType.FP32)
    # Halfway and next-to-halfway low halves, and bf16-exact values.
    low = rng.choice(_u64([0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF]), n)
    near = (a & _u64(0xFFFF0000)) | low
    x = np.concatenate([_u64(FP32_SPECIALS), _u64([b << 16 for b in BF16_SPECIALS]),
                        np.where(rng.random(n) < 0.5, a, near)])
    got = arith.fp32_to_bf16(x)
    want = [ex.fp32_to_bf16(v) for v in x.tolist()]
    bits, ovf = zip(*want, strict=True)
    assert_same("fp32_to_bf16", (x,), (got[0], np.zeros(len(x)), got[1]),
                (_u64(bits), np.zeros(len(x)), np.array(ovf)))
    assert np.sum(ovf) > 100


@pytest.mark.parametrize("case", ALL_CASES, ids=_case_id)
def test_one_contributor(case):
    dtype, mode = case
    rng = np.random.default_rng(13)
    if dtype is DType.INT32:
        x = np.concatenate([_u64(INT32_SPECIALS), int32_pairs(rng, 10_000)[0]])
        want = x
        want_nan = np.zeros(len(x), dtype=bool)
    else:
        fmt = FMTS[dtype]
        x = np.concatenate([_u64(SPECIALS[dtype]), float_pairs(rng, 10_000, dtype)[0]])
        want_nan = np.array([ex.is_nan(fmt, v) for v in x.tolist()])
        want = np.where(want_nan, _u64(fmt.qnan), x)
    for op in OPS:
        got = model_fold(dtype, op, [x], mode)
        assert_same(f"one contributor {dtype.wire}/{mode}", (x,), got,
                    (want, want_nan, np.zeros(len(x), dtype=bool)))
        out, nan, ovf = arith.reduce(dtype, op, [x], mode)
        assert_same("reduce, one contributor", (x,), (out,), (want,))
        assert (nan, ovf) == (bool(want_nan.any()), False)


def reduction_rows(rng, dtype, k, n):
    """k contributions of n elements: similar magnitudes with mixed signs
    (cancellation-prone), plus occasional specials and outliers."""
    if dtype is DType.INT32:
        return list(int32_pairs(rng, n * k)[0].reshape(k, n))
    fmt = FMTS[dtype]
    base = _exponent(rng, n, fmt)
    rows = []
    for _ in range(k):
        exp = np.clip(base.astype(np.int64) + rng.integers(-3, 2, n), 0, fmt.exp_max - 1)
        v = _assemble(fmt, rng.integers(0, 2, n), exp, _fraction(rng, n, fmt))
        pick = rng.random(n)
        other = float_pairs(rng, n, dtype)[1]
        v = np.where(pick < 0.15, other, v)
        rows.append(v)
    return rows


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.wire)
@pytest.mark.parametrize("case", ALL_CASES, ids=_case_id)
def test_reductions(case, op):
    dtype, mode = case
    rng = np.random.default_rng([17, int(dtype), int(op), mode == "fp32"])
    group = 4
    for k in (2, 3, 5, 8, 16):
        n = 2000 // k
        rows = reduction_rows(rng, dtype, k, n)
        want = ref_fold(dtype, op, rows, mode)
        what = f"{k}-way {dtype.wire}/{op.wire}/acc={mode}"
        assert_same(what, tuple(rows), model_fold(dtype, op, rows, mode), want)
        # arith.reduce on groups of a few elements: flags or-ed per group.
        for g in range(0, n, group):
            sl = slice(g, g + group)
            out, nan, ovf = arith.reduce(dtype, op, [r[sl] for r in rows], mode)
            assert_same(what + " reduce", tuple(r[sl] for r in rows), (out,), (want[0][sl],))
            assert (nan, ovf) == (bool(want[1][sl].any()), bool(want[2][sl].any())), what
