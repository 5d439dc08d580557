"""hdl/intalu.py against the golden model (sim/arith.py), bit-exact: every
pair of INT32_SPECIALS and random pairs, for add (with overflow) and signed
min/max."""

from __future__ import annotations

import numpy as np
import pytest

from netagg.hdl.intalu import IntAdd, IntMinMax
from netagg.sim import arith
from netagg.sim.drive import simulate
from netagg.sim.specials import INT32_SPECIALS
from netagg.wire import DType, Op

U32 = np.uint32


def operands():
    t = np.array(INT32_SPECIALS, dtype=U32)
    rng = np.random.default_rng(5)
    r = rng.integers(0, 1 << 32, (2, 2000), dtype=np.uint64).astype(U32)
    # near the wrap-around: large same-sign magnitudes
    big = (rng.integers(0x3FFF0000, 0x7FFFFFFF, (2, 500), dtype=np.uint64).astype(U32)
           | (rng.integers(0, 2, (1, 500), dtype=np.uint64).astype(U32) << 31))
    a = np.concatenate([np.repeat(t, len(t)), r[0], big[0]])
    b = np.concatenate([np.tile(t, len(t)), r[1], big[1]])
    return a, b


def comb(dut, names, inputs, out_names):
    res = []

    async def tb(ctx):
        for vals in inputs:
            for n, v in zip(names, vals, strict=True):
                ctx.set(getattr(dut, n), int(v))
            res.append(tuple(ctx.get(getattr(dut, n)) for n in out_names))

    simulate(dut, tb, clock=None)
    return np.array(res, dtype=np.uint64)


def test_add():
    a, b = operands()
    got = comb(IntAdd(32), ("a", "b"), zip(a, b, strict=True), ("r", "ovf"))
    er, _, eo = arith.combine(DType.INT32, Op.SUM, a, b)
    np.testing.assert_array_equal(got[:, 0], er)
    np.testing.assert_array_equal(got[:, 1].astype(bool), eo)
    assert 100 < eo.sum() < len(a) // 2


@pytest.mark.parametrize("op", [Op.MIN, Op.MAX])
def test_minmax(op):
    a, b = operands()
    mx = np.full(a.shape, op is Op.MAX)
    got = comb(IntMinMax(32), ("a", "b", "max"), zip(a, b, mx, strict=True), ("r",))
    er, _, _ = arith.combine(DType.INT32, op, a, b)
    np.testing.assert_array_equal(got[:, 0], er)


@pytest.mark.parametrize("cls", [IntAdd, IntMinMax])
def test_bad_width(cls):
    with pytest.raises(ValueError):
        cls(1)
