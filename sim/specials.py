"""Tables of special floating-point values (raw bits), shared by the golden
model's tests and the hardware tests."""

from __future__ import annotations


def _specials(exp_bits: int, frac_bits: int, qnan: int) -> list[int]:
    width = 1 + exp_bits + frac_bits
    sign = 1 << (width - 1)
    exp_max = (1 << exp_bits) - 1
    frac_max = (1 << frac_bits) - 1
    one = ((exp_max >> 1) << frac_bits)
    pos = [
        0,                                   # +0
        1,                                   # smallest subnormal
        2, 3,                                # its neighbours
        frac_max,                            # largest subnormal
        frac_max - 1,
        1 << frac_bits,                      # smallest normal
        (1 << frac_bits) + 1,
        (exp_max - 1) << frac_bits | frac_max,       # largest normal
        (exp_max - 1) << frac_bits | (frac_max - 1),
        (exp_max - 1) << frac_bits,                  # 2^emax
        one, one + 1, one - 1,                       # 1.0 and its neighbours
        one | (1 << (frac_bits - 1)),                # 1.5
        (one + (1 << frac_bits)),                    # 2.0
        (one - ((frac_bits + 1) << frac_bits)),      # 2^-(p): half an ulp of 1
        (one - ((frac_bits + 2) << frac_bits)),      # a quarter ulp of 1
        (one - ((frac_bits + 1) << frac_bits)) | 1,  # just above half an ulp
        exp_max << frac_bits,                        # +inf
        qnan,                                        # canonical quiet NaN
        qnan | 1,                                    # quiet NaN with payload
        (exp_max << frac_bits) | 1,                  # signalling NaN
        (exp_max << frac_bits) | frac_max,           # all-ones NaN
    ]
    return sorted(set(pos + [p | sign for p in pos]))


FP32_SPECIALS: list[int] = _specials(8, 23, 0x7FC00000)
BF16_SPECIALS: list[int] = _specials(8, 7, 0x7FC0)
INT32_SPECIALS: list[int] = sorted({0, 1, 2, 0x7FFFFFFF, 0x7FFFFFFE, 0x80000000, 0x80000001,
                                    0xFFFFFFFF, 0xFFFFFFFE, 0x40000000, 0xC0000000})
