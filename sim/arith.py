"""Bit-exact element arithmetic of the golden model (``docs/arithmetic.md``).

All functions work on raw element bits held in ``uint32`` arrays (bf16 in the
low 16 bits) and are vectorised over a packet's elements.

Contract (protocol.md, Arithmetic):

* fp32 / bf16 sum: IEEE 754 addition, round to nearest, ties to even;
  subnormals fully supported; overflow gives the signed infinity;
  x + (-x) = +0; (-0) + (-0) = -0; inf + (-inf) = NaN.
* Every NaN produced is canonical: 0x7FC00000 (fp32), 0x7FC0 (bf16).
* min / max on floats propagate NaN and order -0 below +0.
* int32: two's complement, wrapping; min / max are signed.
* Flags: ``nan`` is set per element when an input or the result is NaN;
  ``ovf`` when a finite float sum rounds to infinity, or an int32 addition
  wraps.

The accumulator of a slot copy holds bf16 rounds as bf16 bits in mode
``"bf16"`` and as binary32 bits in mode ``"fp32"`` (bf16 inputs widened
exactly, rounded once by :func:`from_acc` when the result is sent).

bf16 additions are computed as binary32 additions of the exactly widened
operands, then rounded to bf16: binary32 has 24 >= 2*8 + 2 significand bits,
so the double rounding is innocuous (Figueroa 1995); the tests check this
against exact rational arithmetic.
"""

from __future__ import annotations

import numpy as np

from netagg.wire import DType, Op

FP32_QNAN = 0x7FC00000
BF16_QNAN = 0x7FC0
_U32 = np.uint32


def _u32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(_U32)


def is_nan_fp32(bits) -> np.ndarray:
    bits = _u32(bits)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)


def is_inf_fp32(bits) -> np.ndarray:
    return (_u32(bits) & 0x7FFFFFFF) == 0x7F800000


def is_nan_bf16(bits) -> np.ndarray:
    bits = _u32(bits)
    return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x007F) != 0)


def is_inf_bf16(bits) -> np.ndarray:
    return (_u32(bits) & 0x7FFF) == 0x7F80


def bf16_to_fp32(bits) -> np.ndarray:
    """Exact widening (NaN payloads are kept; canonicalise separately)."""
    return (_u32(bits) & 0xFFFF) << 16


def fp32_to_bf16(bits) -> tuple[np.ndarray, np.ndarray]:
    """Round binary32 to bfloat16, nearest, ties to even.

    Returns (bf16 bits, overflow): overflow is set where a finite input
    rounds to infinity. NaN gives the canonical bf16 NaN.
    """
    bits = _u32(bits).astype(np.uint64)
    nan = is_nan_fp32(bits)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    rounded = rounded.astype(_U32) & 0xFFFF
    ovf = ~nan & ~is_inf_fp32(bits) & is_inf_bf16(rounded)
    return np.where(nan, _U32(BF16_QNAN), rounded).astype(_U32), ovf


def _f32(bits) -> np.ndarray:
    return _u32(bits).view(np.float32)


def _fp32_add(a, b):
    a, b = _u32(a), _u32(b)
    with np.errstate(all="ignore"):
        r = (_f32(a) + _f32(b)).view(_U32)
    nan = is_nan_fp32(a) | is_nan_fp32(b) | is_nan_fp32(r)
    ovf = ~is_nan_fp32(a) & ~is_nan_fp32(b) & ~is_inf_fp32(a) & ~is_inf_fp32(b) & is_inf_fp32(r)
    return np.where(nan, _U32(FP32_QNAN), r).astype(_U32), nan, ovf


def _bf16_add(a, b):
    a, b = _u32(a) & 0xFFFF, _u32(b) & 0xFFFF
    with np.errstate(all="ignore"):
        wide = (_f32(bf16_to_fp32(a)) + _f32(bf16_to_fp32(b))).view(_U32)
    r, _ = fp32_to_bf16(wide)
    nan = is_nan_bf16(a) | is_nan_bf16(b) | is_nan_bf16(r)
    ovf = ~is_nan_bf16(a) & ~is_nan_bf16(b) & ~is_inf_bf16(a) & ~is_inf_bf16(b) & is_inf_bf16(r)
    return np.where(nan, _U32(BF16_QNAN), r).astype(_U32), nan, ovf


def _float_key(bits, width):
    """Integer key ordering non-NaN floats, -0 below +0."""
    bits = _u32(bits).astype(np.int64)
    sign = (bits >> (width - 1)) & 1
    mag = bits & ((1 << (width - 1)) - 1)
    return np.where(sign == 1, -mag - 1, mag)


def _float_minmax(a, b, op, width):
    a, b = _u32(a), _u32(b)
    if width == 32:
        nan, qnan = is_nan_fp32(a) | is_nan_fp32(b), FP32_QNAN
    else:
        a, b = a & 0xFFFF, b & 0xFFFF
        nan, qnan = is_nan_bf16(a) | is_nan_bf16(b), BF16_QNAN
    ka, kb = _float_key(a, width), _float_key(b, width)
    take_a = (ka <= kb) if op is Op.MIN else (ka >= kb)
    r = np.where(take_a, a, b)
    return np.where(nan, _U32(qnan), r).astype(_U32), nan, np.zeros_like(nan)


def _int32(a, b, op):
    a, b = _u32(a), _u32(b)
    sa, sb = a.view(np.int32), b.view(np.int32)
    zero = np.zeros(a.shape, dtype=bool)
    if op is Op.SUM:
        r = (a.astype(np.uint64) + b.astype(np.uint64)).astype(_U32)
        ovf = (((a ^ r) & (b ^ r)) >> 31).astype(bool)
        return r, zero, ovf
    r = np.minimum(sa, sb) if op is Op.MIN else np.maximum(sa, sb)
    return r.view(_U32), zero, zero


def acc_is_fp32(dtype: DType, mode: str) -> bool:
    """Whether a copy of this dtype accumulates in binary32."""
    return DType(dtype) is DType.FP32 or (DType(dtype) is DType.BF16 and mode == "fp32")


def to_acc(dtype: DType, bits, mode: str = "fp32"):
    """A round's first contribution as accumulator bits: (acc, nan flags).

    Values are unchanged but for NaN canonicalisation (and the exact bf16
    widening in mode ``"fp32"``).
    """
    dtype, bits = DType(dtype), _u32(bits)
    if dtype is DType.INT32:
        return bits, np.zeros(bits.shape, dtype=bool)
    if dtype is DType.BF16:
        nan = is_nan_bf16(bits)
        acc = bf16_to_fp32(bits) if mode == "fp32" else bits & 0xFFFF
    else:
        nan = is_nan_fp32(bits)
        acc = bits
    qnan = FP32_QNAN if acc_is_fp32(dtype, mode) else BF16_QNAN
    return np.where(nan, _U32(qnan), acc).astype(_U32), nan


def combine(dtype: DType, op: Op, acc, bits, mode: str = "fp32"):
    """acc (accumulator bits) combined with a contribution's raw bits.

    Returns (new acc, nan flags, overflow flags), per element.
    """
    dtype, op = DType(dtype), Op(op)
    if dtype is DType.INT32:
        return _int32(acc, bits, op)
    if dtype is DType.BF16 and mode == "fp32":
        bits = bf16_to_fp32(bits)
    if acc_is_fp32(dtype, mode):
        return _fp32_add(acc, bits) if op is Op.SUM else _float_minmax(acc, bits, op, 32)
    return _bf16_add(acc, bits) if op is Op.SUM else _float_minmax(acc, bits, op, 16)


def from_acc(dtype: DType, acc, mode: str = "fp32"):
    """Accumulator bits to the RESULT's wire bits: (bits, overflow flags)."""
    dtype, acc = DType(dtype), _u32(acc)
    if dtype is DType.BF16 and mode == "fp32":
        return fp32_to_bf16(acc)
    return acc, np.zeros(acc.shape, dtype=bool)


def reduce(dtype: DType, op: Op, contributions, mode: str = "fp32"):
    """Left-to-right reduction of a list of contributions (raw bits), as a
    slot copy does it. Returns (result bits, nan, overflow) with the flags
    or-ed over elements and operations."""
    acc, nan = to_acc(dtype, contributions[0], mode)
    nan_any, ovf_any = bool(nan.any()), False
    for bits in contributions[1:]:
        acc, nan, ovf = combine(dtype, op, acc, bits, mode)
        nan_any |= bool(nan.any())
        ovf_any |= bool(ovf.any())
    out, ovf = from_acc(dtype, acc, mode)
    return out, nan_any, ovf_any | bool(ovf.any())
