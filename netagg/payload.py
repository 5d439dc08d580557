"""Payload codec of netagg messages: element bits to big-endian bytes and
back, and :class:`Message` (a header with its payload's raw element bits).

Pure Python and NumPy; the header itself is :mod:`netagg.wire`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from netagg.wire import DType, Header


def element_dtype(dtype: DType) -> np.dtype:
    """Big-endian NumPy dtype of one wire element (raw bits, unsigned)."""
    return np.dtype(">u2") if DType(dtype) is DType.BF16 else np.dtype(">u4")


def encode_values(dtype: DType, bits) -> bytes:
    """Raw element bits (any integer array) to payload bytes."""
    return np.asarray(bits, dtype=np.uint64).astype(element_dtype(dtype)).tobytes()


def decode_values(dtype: DType, payload: bytes) -> np.ndarray:
    """Payload bytes to raw element bits as uint32 (bf16 in the low 16 bits)."""
    return np.frombuffer(payload, dtype=element_dtype(dtype)).astype(np.uint32)


@dataclasses.dataclass(frozen=True)
class Message:
    """A netagg message: header and the payload's raw element bits (uint32,
    bf16 in the low 16 bits)."""

    header: Header
    values: np.ndarray

    def pack(self) -> bytes:
        return self.header.pack() + encode_values(self.header.dtype, self.values)

    def __eq__(self, other):
        return (isinstance(other, Message) and self.header == other.header
                and np.array_equal(self.values, other.values))

    def __hash__(self):
        return hash((self.header, self.values.tobytes()))
