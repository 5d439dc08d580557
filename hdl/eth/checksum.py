"""Ones'-complement (RFC 1071) arithmetic for the IPv4 and ICMP checksums."""

from __future__ import annotations

from amaranth.hdl import Cat, Value


def oc_add(a, b) -> Value:
    """``a + b`` in 16-bit ones'-complement arithmetic (end-around carry);
    the result is 0 only if both are 0."""
    s = Value.cast(a).as_unsigned() + Value.cast(b).as_unsigned()
    return (s[:16] + s[16])[:16]


def oc_sum(words) -> Value:
    """Ones'-complement sum of 16-bit values, as a balanced tree."""
    words = list(words)
    while len(words) > 1:
        words = [oc_add(words[i], words[i + 1]) if i + 1 < len(words) else words[i]
                 for i in range(0, len(words), 2)]
    return Value.cast(words[0])


def be_bytes(value, nbytes: int) -> list[Value]:
    """The bytes of a big-endian integer field, most significant first."""
    value = Value.cast(value)
    return [value[8 * (nbytes - 1 - i):8 * (nbytes - i)] for i in range(nbytes)]


def be_word(hi, lo) -> Value:
    """A 16-bit word from its high and low bytes."""
    return Cat(lo, hi)
