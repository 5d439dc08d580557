"""hdl/lane.py against the golden model (sim/arith.py), bit-exact: special
pairs, random pairs of every dtype and op, first beats, random input gaps and
output stalls, and the exact latency with o.ready held high."""

from __future__ import annotations

import numpy as np
import pytest

from netagg.hdl.lane import Lane, decode_sel
from netagg.hdl.layouts import DType as HwDType
from netagg.hdl.layouts import Op as HwOp
from netagg.sim import arith
from netagg.sim.drive import simulate
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS, INT32_SPECIALS
from netagg.wire import DType, Op

U32 = np.uint32


def rand_fp32(rng, n):
    """fp32 bits mixing uniform bits, subnormals and numbers near each other."""
    kind = rng.integers(0, 3, n)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)
    small = (bits & U32(0x807FFFFF)) | (rng.integers(0, 3, n).astype(U32) << 23)
    mid = (bits & U32(0x807FFFFF)) | (rng.integers(120, 136, n).astype(U32) << 23)
    return np.where(kind == 0, bits, np.where(kind == 1, small, mid)).astype(U32)


def rand_bf16(rng, n):
    return (rand_fp32(rng, n) >> 16).astype(U32)


def golden(beats, mode):
    """Expected (r, nan, ovf) for a list of beats (a, b, dtype, op, first)."""
    out = []
    for a, b, dtype, op, first in beats:
        if first:
            r, nan = arith.to_acc(dtype, np.array([b], dtype=U32), mode)
            out.append((int(r[0]), int(nan[0]), 0))
        else:
            r, nan, ovf = arith.combine(dtype, op, np.array([a], dtype=U32),
                                        np.array([b], dtype=U32), mode)
            out.append((int(r[0]), int(nan[0]), int(ovf[0])))
    return out


def golden_batch(beats, mode):
    """Same as :func:`golden`, vectorised per (dtype, op, first) group."""
    n = len(beats)
    a = np.array([x[0] for x in beats], dtype=U32)
    b = np.array([x[1] for x in beats], dtype=U32)
    keys = [(x[2], x[3], x[4]) for x in beats]
    r = np.zeros(n, dtype=U32)
    nan = np.zeros(n, dtype=bool)
    ovf = np.zeros(n, dtype=bool)
    for key in set(keys):
        idx = np.array([i for i, k in enumerate(keys) if k == key])
        dtype, op, first = key
        if first:
            r[idx], nan[idx] = arith.to_acc(dtype, b[idx], mode)
        else:
            r[idx], nan[idx], ovf[idx] = arith.combine(dtype, op, a[idx], b[idx], mode)
    return list(zip(r.tolist(), nan.astype(int).tolist(), ovf.astype(int).tolist(), strict=True))


def run_lane(dut, beats, *, gaps=0.0, stalls=0.0, seed=0):
    """Stream beats through a Lane; return the output beats in order and the
    cycle of each accept and each output (for latency checks)."""
    rng = np.random.default_rng(seed)
    out, t_in, t_out = [], [], []

    async def tb(ctx):
        k = cycle = 0
        while len(out) < len(beats):
            present = k < len(beats) and not (gaps and rng.random() < gaps)
            ready = not (stalls and rng.random() < stalls)
            ctx.set(dut.o.ready, ready)
            if present:
                a, b, dtype, op, first = beats[k]
                if dut.decoded:
                    # the caller's registered decode and bf16 widening
                    sel = decode_sel(HwDType(dtype.value), HwOp(op.value), first)
                    ctx.set(dut.sel, {k_: int(v) for k_, v in sel.items()})
                    if dtype is DType.BF16:
                        b = (b & 0xFFFF) << 16
                ctx.set(dut.i.payload, {"a": a, "b": b, "dtype": dtype.value,
                                        "op": op.value, "first": first})
            ctx.set(dut.i.valid, present)
            if ctx.get(dut.o.valid) and ready:
                p = ctx.get(dut.o.payload)
                out.append((p.r, p.nan, p.ovf))
                t_out.append(cycle)
            if present and ctx.get(dut.i.ready):
                k += 1
                t_in.append(cycle)
            await ctx.tick()
            cycle += 1
            assert cycle < 20 * len(beats) + 100, "lane stopped"

    simulate(dut, tb)
    return out, t_in, t_out


def make_beats(rng, n, dtypes, ops, mode):
    beats = []
    dts = [DType[d.upper()] for d in dtypes]
    ops_ = [Op[o.upper()] for o in ops]
    for _ in range(n):
        dtype = dts[rng.integers(len(dts))]
        op = ops_[rng.integers(len(ops_))]
        first = int(rng.random() < 0.1)
        if dtype is DType.INT32:
            a, b = (int(v) for v in rng.integers(0, 1 << 32, 2, dtype=np.uint64))
            if rng.random() < 0.3:
                a = INT32_SPECIALS[rng.integers(len(INT32_SPECIALS))]
        elif dtype is DType.FP32 or mode == "fp32":
            a = int(rand_fp32(rng, 1)[0])
            b = int(rand_bf16(rng, 1)[0]) if dtype is DType.BF16 else int(rand_fp32(rng, 1)[0])
            if dtype is DType.BF16 and rng.random() < 0.5:
                a = int(arith.bf16_to_fp32(b ^ int(rng.integers(0, 4)))[()])
        else:
            a, b = (int(v) for v in rand_bf16(rng, 2))
            if rng.random() < 0.2:
                b |= int(rng.integers(0, 1 << 16)) << 16   # garbage above a bf16 element
        beats.append((a, b, dtype, op, first))
    return beats


def special_beats(dtype, ops, mode):
    table = {DType.FP32: FP32_SPECIALS, DType.BF16: BF16_SPECIALS,
             DType.INT32: INT32_SPECIALS}[dtype]
    beats = []
    for op in ops:
        for x in table:
            beats.append((0, x, dtype, Op[op.upper()], 1))
            for y in table:
                a = x
                if dtype is DType.BF16 and mode == "fp32":
                    a = x << 16              # the accumulator holds the widened value
                beats.append((a, y, dtype, Op[op.upper()], 0))
    return beats


def check(beats, got, mode):
    exp = golden_batch(beats, mode)
    assert len(got) == len(exp)
    bad = [(i, beats[i], g, e) for i, (g, e) in enumerate(zip(got, exp, strict=True)) if g != e]
    assert not bad, f"{len(bad)} mismatches, first: " + "; ".join(
        f"#{i} a={b[0]:#x} b={b[1]:#x} {b[2].name} {b[3].name} first={b[4]}: "
        f"got ({g[0]:#x},{g[1]},{g[2]}) expected ({e[0]:#x},{e[1]},{e[2]})"
        for i, b, g, e in bad[:5])


def test_golden_batch_matches_per_beat():
    rng = np.random.default_rng(7)
    for mode in ("fp32", "bf16"):
        beats = make_beats(rng, 300, ("int32", "fp32", "bf16"), ("sum", "min", "max"), mode)
        assert golden_batch(beats, mode) == golden(beats, mode)


@pytest.mark.parametrize("mode", ["fp32", "bf16"])
def test_specials(mode):
    dut = Lane(bf16_accumulate=mode, stages=3)
    beats = []
    for dtype in (DType.FP32, DType.BF16, DType.INT32):
        beats += special_beats(dtype, ("sum", "min", "max"), mode)
    got, _, _ = run_lane(dut, beats)
    check(beats, got, mode)


@pytest.mark.parametrize("stages", [1, 3, 5])
@pytest.mark.parametrize("mode", ["fp32", "bf16"])
def test_random_with_stalls(mode, stages):
    rng = np.random.default_rng(100 * stages + (mode == "bf16"))
    dut = Lane(bf16_accumulate=mode, stages=stages)
    n = 1500 if stages >= 2 else 300        # a combinational adder simulates slowly
    beats = make_beats(rng, n, ("int32", "fp32", "bf16"), ("sum", "min", "max"), mode)
    got, _, _ = run_lane(dut, beats, gaps=0.3, stalls=0.4, seed=stages)
    check(beats, got, mode)


@pytest.mark.parametrize("mode,stages", [("fp32", 5), ("bf16", 5), ("fp32", 1), ("bf16", 2)])
def test_decoded_form(mode, stages):
    """``decoded=True`` (the lane loop's form: registered selects and a
    pre-widened ``b`` from the caller): same results, same latency; the
    early results through one register stage (stages 1) and through two
    (stages >= 2: the operands registered again first)."""
    rng = np.random.default_rng(300 + (mode == "bf16") + 10 * stages)
    dut = Lane(bf16_accumulate=mode, stages=stages, decoded=True)
    assert dut.latency == Lane.latency_of(stages)
    beats = make_beats(rng, 1500, ("int32", "fp32", "bf16"), ("sum", "min", "max"), mode)
    for dtype in (DType.FP32, DType.BF16, DType.INT32):
        beats += special_beats(dtype, ("sum", "min", "max"), mode)
    got, t_in, t_out = run_lane(dut, beats, gaps=0.3)
    check(beats, got, mode)
    assert [o - i for i, o in zip(t_in, t_out, strict=True)] == [dut.latency] * len(beats)


@pytest.mark.parametrize("stages", [0, 5])
def test_fixed_latency(stages):
    rng = np.random.default_rng(stages)
    dut = Lane(stages=stages)
    assert dut.latency == stages + 1
    beats = make_beats(rng, 400 if stages else 80, ("int32", "fp32", "bf16"),
                       ("sum", "min", "max"), "fp32")
    got, t_in, t_out = run_lane(dut, beats, gaps=0.3)
    check(beats, got, "fp32")
    assert [o - i for i, o in zip(t_in, t_out, strict=True)] == [dut.latency] * len(beats)
    assert t_in == sorted(set(t_in))


@pytest.mark.parametrize("dtypes,ops,mode", [
    (("fp32",), ("sum",), "fp32"),
    (("bf16",), ("sum", "max"), "bf16"),
    (("bf16",), ("min",), "fp32"),
    (("int32",), ("sum", "min", "max"), "fp32"),
    (("int32", "bf16"), ("sum",), "bf16"),
])
def test_subsets(dtypes, ops, mode):
    rng = np.random.default_rng(len(dtypes) * 10 + len(ops))
    dut = Lane(dtypes=dtypes, ops=ops, bf16_accumulate=mode, stages=2)
    beats = make_beats(rng, 400, dtypes, ops, mode)
    got, _, _ = run_lane(dut, beats, gaps=0.2, stalls=0.2)
    check(beats, got, mode)


@pytest.mark.parametrize("kwargs", [
    {"dtypes": ("fp64",)}, {"dtypes": ()}, {"ops": ("mul",)}, {"ops": ()},
    {"bf16_accumulate": "fp16"}, {"stages": -1}, {"stages": 99}, {"stages": 2.0},
    {"dtypes": "fp32"}, {"ops": None}, {"decoded": 1},
])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        Lane(**kwargs)
