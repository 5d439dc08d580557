"""hdl/fp.py against the golden model (sim/arith.py), bit-exact: every pair
of the special-value tables, random pairs biased to hard cases (close
exponents, cancellation, subnormals, overflow), pipeline holds (``en`` low),
several depths; min/max and the bf16 <-> fp32 conversions."""

from __future__ import annotations

import numpy as np
import pytest

from netagg.hdl.fp import BF16, FP32, BF16ToFP32, FP32ToBF16, FPAdd, FPMinMax
from netagg.sim import arith
from netagg.sim.drive import simulate
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS
from netagg.wire import DType, Op

U32 = np.uint32


def rand_pairs(rng, n, fmt):
    """Random operand pairs: a third uniform bits, the rest with exponents
    close together (near path, cancellation), tiny (subnormals) or huge
    (overflow)."""
    E, F = fmt.exp_bits, fmt.frac_bits
    w = fmt.width
    a = rng.integers(0, 1 << w, n, dtype=np.uint64)
    b = rng.integers(0, 1 << w, n, dtype=np.uint64)
    kind = rng.integers(0, 4, n)
    ea = (a >> F) & ((1 << E) - 1)
    delta = rng.integers(-2, 3, n)
    eb_close = np.clip(ea.astype(np.int64) + delta, 0, (1 << E) - 2).astype(np.uint64)
    eb_tiny = rng.integers(0, 3, n).astype(np.uint64)
    eb_huge = rng.integers((1 << E) - 3, (1 << E) - 1, n).astype(np.uint64)
    ea = np.where(kind == 2, rng.integers(0, 3, n).astype(np.uint64), ea)
    ea = np.where(kind == 3, rng.integers((1 << E) - 3, (1 << E) - 1, n).astype(np.uint64), ea)
    eb = np.where(kind == 1, eb_close, np.where(kind == 2, eb_tiny, eb_huge))
    # near-cancellation: b's fraction close to a's
    fb_close = (a & ((1 << F) - 1)) ^ rng.integers(0, 4, n).astype(np.uint64)
    fb = np.where(rng.random(n) < 0.5, b & ((1 << F) - 1), fb_close)
    sign_mask = np.uint64(1 << (w - 1))
    a = np.where(kind == 0, a, (a & ~np.uint64(((1 << E) - 1) << F)) | (ea << np.uint64(F)))
    b2 = (b & sign_mask) | (eb << np.uint64(F)) | fb
    b = np.where(kind == 0, b, b2)
    return a.astype(U32), b.astype(U32)


def special_pairs(table):
    t = np.array(table, dtype=U32)
    return np.repeat(t, len(t)), np.tile(t, len(t))


def run_adder(dut, a, b, *, holds=0.0, seed=0):
    """Feed one pair per cycle with ``en`` high (randomly low with
    probability ``holds``, which must freeze the pipeline); return
    (r, nan, ovf) arrays in input order."""
    rng = np.random.default_rng(seed)
    lat = dut.latency
    out = []

    async def tb(ctx):
        if lat == 0:
            for x, y in zip(a.tolist(), b.tolist(), strict=True):
                ctx.set(dut.a.as_value(), x)
                ctx.set(dut.b.as_value(), y)
                out.append((ctx.get(dut.r.as_value()), ctx.get(dut.nan), ctx.get(dut.ovf)))
            return
        k = 0
        issued = 0          # beats issued with en high
        while len(out) < len(a):
            en = not (holds and rng.random() < holds)
            ctx.set(dut.en, en)
            if k < len(a):
                ctx.set(dut.a.as_value(), int(a[k]))
                ctx.set(dut.b.as_value(), int(b[k]))
            if en:
                if issued >= lat:
                    out.append((ctx.get(dut.r.as_value()), ctx.get(dut.nan), ctx.get(dut.ovf)))
                issued += 1
                k += 1
            await ctx.tick()

    simulate(dut, tb, clock=1e-8 if lat else None)
    got = np.array(out, dtype=np.uint64)
    return got[:, 0].astype(U32), got[:, 1].astype(bool), got[:, 2].astype(bool)


def check_add(fmt, a, b, got):
    dtype, mode = (DType.FP32, "fp32") if fmt is FP32 else (DType.BF16, "bf16")
    er, en, eo = arith.combine(dtype, Op.SUM, a, b, mode)
    r, nan, ovf = got
    bad = np.nonzero((r != er) | (nan != en) | (ovf != eo))[0]
    assert bad.size == 0, f"{bad.size}/{a.size} mismatches, first: " + "; ".join(
        f"{a[i]:#x}+{b[i]:#x}: got ({r[i]:#x},{nan[i]:d},{ovf[i]:d}) "
        f"expected ({er[i]:#x},{en[i]:d},{eo[i]:d})" for i in bad[:5])


@pytest.mark.parametrize("fmt,table", [(FP32, FP32_SPECIALS), (BF16, BF16_SPECIALS)],
                         ids=["fp32", "bf16"])
def test_add_specials(fmt, table):
    dut = FPAdd(fmt, stages=4)
    a, b = special_pairs(table)
    check_add(fmt, a, b, run_adder(dut, a, b))


@pytest.mark.parametrize("out_reg", [True, False], ids=["out_reg", "open"])
@pytest.mark.parametrize("stages", range(FPAdd.MAX_STAGES + 1))
@pytest.mark.parametrize("fmt", [FP32, BF16], ids=["fp32", "bf16"])
def test_add_random(fmt, stages, out_reg):
    rng = np.random.default_rng(stages * 2 + (fmt is BF16))
    n = 1500 if stages >= 3 else (300 if stages else 60)  # shallow pipelines simulate slowly
    a, b = rand_pairs(rng, n, fmt)
    dut = FPAdd(fmt, stages=stages, out_reg=out_reg)
    assert dut.latency == stages
    check_add(fmt, a, b, run_adder(dut, a, b, holds=0.3 if stages else 0.0, seed=stages))


@pytest.mark.parametrize("out_reg", [True, False], ids=["out_reg", "open"])
@pytest.mark.parametrize("fmt", [FP32, BF16], ids=["fp32", "bf16"])
def test_add_subnormal_beside_normal(fmt, out_reg):
    """A subnormal (or zero) operand beside a normal one of every small
    exponent: every alignment distance up to past saturation, both orders,
    both signs (the subnormal's alignment is one less than the raw exponent
    difference)."""
    rng = np.random.default_rng(7)
    F, w, n = fmt.frac_bits, fmt.width, 2000
    sign = rng.integers(0, 2, (2, n)).astype(np.uint64) << np.uint64(w - 1)
    frac = rng.integers(0, 1 << F, (2, n), dtype=np.uint64)
    e_norm = rng.integers(1, fmt.precision + 6, n).astype(np.uint64)
    x = sign[0] | (e_norm << np.uint64(F)) | frac[0]
    y = sign[1] | frac[1]                                 # exponent 0
    swap = rng.random(n) < 0.5
    a, b = np.where(swap, y, x).astype(U32), np.where(swap, x, y).astype(U32)
    check_add(fmt, a, b, run_adder(FPAdd(fmt, stages=5, out_reg=out_reg), a, b, holds=0.2))


@pytest.mark.parametrize("out_reg", [True, False], ids=["out_reg", "open"])
@pytest.mark.parametrize("fmt", [FP32, BF16], ids=["fp32", "bf16"])
def test_add_rounding_overflow(fmt, out_reg):
    """Sums at the top of the range: both operands within a few units in
    the last place of the largest finite value or a few binades below it,
    either sign, so that the far path's carry and top-bit cases round to
    infinity, tie or stay finite (the overflow flag formed before or after
    the rounding step, ``out_reg``)."""
    rng = np.random.default_rng(11)
    F, w, n = fmt.frac_bits, fmt.width, 3000
    # a: the largest finite value or a binade below it (whose sum with a
    # value of its binade carries into the top one), a few ulps less
    e_a = np.where(rng.random(n) < 0.5, fmt.exp_max - 1, fmt.exp_max - 2).astype(np.uint64)
    a = (e_a << np.uint64(F)) + np.uint64((1 << F) - 1) - rng.integers(0, 4, n).astype(np.uint64)
    e_b = np.minimum(rng.integers(fmt.exp_max - F - 4, fmt.exp_max, n).astype(np.uint64),
                     e_a)
    frac_b = np.where(rng.random(n) < 0.5, 0, rng.integers(0, 1 << F, n)).astype(np.uint64)
    b = (e_b << np.uint64(F)) | frac_b
    # or (with a) a few ulps below a: the carry case with the guard bit clear
    b = np.where(rng.random(n) < 0.2, a - rng.integers(0, 4, n).astype(np.uint64), b)
    signs = rng.integers(0, 4, n).astype(np.uint64)
    a |= (signs & np.uint64(1)) << np.uint64(w - 1)
    b |= (signs & np.uint64(1)) << np.uint64(w - 1)    # mostly the same sign
    b ^= ((signs == 3).astype(np.uint64)) << np.uint64(w - 1)
    a, b = a.astype(U32), b.astype(U32)
    _, _, eo = arith.combine(DType.FP32 if fmt is FP32 else DType.BF16, Op.SUM, a, b,
                             "fp32" if fmt is FP32 else "bf16")
    assert 100 < eo.sum() < n - 100
    check_add(fmt, a, b, run_adder(FPAdd(fmt, stages=5, out_reg=out_reg), a, b))


def test_rand_pairs_cover_hard_cases():
    """The generator reaches the near path, subnormal results and overflow."""
    a, b = rand_pairs(np.random.default_rng(0), 4000, FP32)
    r, _, ovf = arith.combine(DType.FP32, Op.SUM, a, b, "fp32")
    ea, eb = (a >> 23) & 0xFF, (b >> 23) & 0xFF
    near = ((a ^ b) >> 31 == 1) & (np.abs(ea.astype(int) - eb.astype(int)) <= 1)
    assert near.sum() > 300
    assert (((r >> 23) & 0xFF) == 0).sum() > 100       # zero or subnormal results
    assert ovf.sum() > 50


@pytest.mark.parametrize("kwargs", [{"fmt": "fp32"}, {"stages": -1}, {"stages": 7},
                                    {"stages": 1.5}, {"out_reg": 1}])
def test_add_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        FPAdd(**kwargs)


def dut_ports(dut, names):
    out = []
    for n in names:
        p = getattr(dut, n)
        out.append(p.as_value() if hasattr(p, "as_value") else p)
    return out


def comb(dut, in_names, inputs, out_names):
    res = []

    async def tb(ctx):
        ins, outs = dut_ports(dut, in_names), dut_ports(dut, out_names)
        for vals in inputs:
            for port, val in zip(ins, vals, strict=True):
                ctx.set(port, int(val))
            res.append(tuple(ctx.get(p) for p in outs))

    simulate(dut, tb, clock=None)
    return np.array(res, dtype=np.uint64)


@pytest.mark.parametrize("fmt,table", [(FP32, FP32_SPECIALS), (BF16, BF16_SPECIALS)],
                         ids=["fp32", "bf16"])
def test_minmax(fmt, table):
    rng = np.random.default_rng(3)
    sa, sb = special_pairs(table)
    ra, rb = rand_pairs(rng, 1000, fmt)
    a, b = np.concatenate([sa, ra]), np.concatenate([sb, rb])
    dtype, mode = (DType.FP32, "fp32") if fmt is FP32 else (DType.BF16, "bf16")
    for op in (Op.MIN, Op.MAX):
        dut = FPMinMax(fmt)
        mx = np.full(a.shape, op is Op.MAX)
        got = comb(dut, ("a", "b", "max"), zip(a, b, mx, strict=True), ("r", "nan"))
        er, en, _ = arith.combine(dtype, op, a, b, mode)
        np.testing.assert_array_equal(got[:, 0], er)
        np.testing.assert_array_equal(got[:, 1].astype(bool), en)


def test_fp32_to_bf16():
    rng = np.random.default_rng(4)
    a, _ = rand_pairs(rng, 3000, FP32)
    x = np.concatenate([np.array(FP32_SPECIALS, dtype=U32), a,
                        # ties and near-ties around every rounding boundary kind
                        (a & U32(0xFFFF0000)) | U32(0x8000), (a & U32(0xFFFF0000)) | U32(0x7FFF),
                        (a & U32(0xFFFF0000)) | U32(0x8001),
                        np.array([0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000, 0x7F7F7FFF], dtype=U32)])
    got = comb(FP32ToBF16(), ("i",), zip(x, strict=True), ("o", "ovf"))
    er, eo = arith.fp32_to_bf16(x)
    np.testing.assert_array_equal(got[:, 0], er)
    np.testing.assert_array_equal(got[:, 1].astype(bool), eo)
    assert eo.sum() >= 2                                     # overflow was exercised


def test_fp32_to_bf16_overflow_edge():
    # every sign and kept fraction with the exponents around the largest
    # finite one, each with the dropped half at the rounding boundaries
    hi = np.array([(s << 15) | (e << 7) | f for s in (0, 1) for e in (0xFC, 0xFD, 0xFE, 0xFF)
                   for f in range(128)], dtype=U32)
    lo = np.array([0x0000, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=U32)
    x = ((hi[:, None] << U32(16)) | lo[None, :]).ravel()
    got = comb(FP32ToBF16(), ("i",), zip(x, strict=True), ("o", "ovf"))
    er, eo = arith.fp32_to_bf16(x)
    np.testing.assert_array_equal(got[:, 0], er)
    np.testing.assert_array_equal(got[:, 1].astype(bool), eo)
    assert eo.sum() == 2 * 3                                 # 0x7F7F8000.. per sign


def test_bf16_to_fp32_all():
    x = np.arange(1 << 16, dtype=U32)[::7]
    got = comb(BF16ToFP32(), ("i",), zip(x, strict=True), ("o",))
    np.testing.assert_array_equal(got[:, 0], arith.bf16_to_fp32(x))
