"""Layouts of the slot table and of its parts (docs/architecture.md, Slot
table): the slot word in block RAM, the accumulator word, the decision's
mode, the request the decision hands to the issue queue, and the RESULT
descriptor and beats the slot table hands to the multicast back-end."""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from netagg.hdl import layouts
from netagg.params import Params

__all__ = ["Mode", "copy_state", "slot_state", "acc_word", "round_meta", "issue_request",
           "result_desc", "result_beat", "beat_count_bits", "data_addr_bits"]


def copy_state(params: Params) -> data.StructLayout:
    """One copy of a slot: contributor bitmap, count, done flag, round
    metadata, and ``open`` = ``n != 0 and not done`` kept beside them (one
    bit read instead of a compare, on the decision's path; a cleared word,
    all zeros, is consistent)."""
    return data.StructLayout({
        "bits": unsigned(params.workers),
        "n": unsigned(layouts.bits_for(params.workers + 1)),
        "done": unsigned(1),
        "open": unsigned(1),
        "dtype": layouts.DType,
        "op": layouts.Op,
        "count": unsigned(layouts.bits_for(params.elements + 1)),
        "offset": unsigned(32),
    })


def slot_state(params: Params) -> data.ArrayLayout:
    """Both copies of a slot (index = ver), one block RAM word."""
    return data.ArrayLayout(copy_state(params), 2)


def acc_word(params: Params) -> data.StructLayout:
    """One beat of a copy's accumulators, with the round's sticky flags for
    the beat's valid lanes."""
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(32), params.lanes),
        "nan": unsigned(1),
        "ovf": unsigned(1),
    })


def round_meta(params: Params) -> data.StructLayout:
    """The fields that identify a round's data (all contributions agree)."""
    return data.StructLayout({
        "dtype": layouts.DType,
        "op": layouts.Op,
        "count": unsigned(layouts.bits_for(params.elements + 1)),
        "offset": unsigned(32),
    })


class Mode(enum.Enum, shape=2):
    """What the issue queue does with a decided message."""
    LANES = 0        # combine the payload into the copy (first or later contribution)
    RETRANSMIT = 1   # discard the payload, resend the stored result
    DISCARD = 2      # discard the payload (a dropped message)


def beat_count_bits(params: Params) -> int:
    """Bits of a count of payload beats, 0..K/L."""
    return layouts.bits_for(params.beats + 1)


def data_addr_bits(data_beats: int) -> int:
    """Bits of a payload buffer address (``data_beats`` a power of two)."""
    return layouts.bits_for(data_beats)


def issue_request(params: Params, data_beats: int) -> data.StructLayout:
    """A decided message handed to the issue queue: which copy, how many beats,
    where its payload is, and what the lanes do with it."""
    return data.StructLayout({
        "rtx": unsigned(1),          # a retransmission: read the copy out, no lanes
        "slot": unsigned(layouts.bits_for(params.slots)),   # absolute slot
        "ver": unsigned(1),          # the copy
        "first": unsigned(1),        # first contribution of a round: r = to_acc(b)
        "result": unsigned(1),       # its beats go out as RESULT beats
        "dtype": layouts.DType,      # of the round
        "op": layouts.Op,
        "beats": unsigned(beat_count_bits(params)),          # beats to issue, >= 1
        "count": unsigned(layouts.bits_for(params.elements + 1)),  # elements (lane mask)
        # first payload beat, mod 2 x data_beats (its payload is held until
        # it leaves the queue)
        "data_addr": unsigned(data_addr_bits(data_beats) + 1),
    })


def result_desc(params: Params) -> data.StructLayout:
    """A RESULT to send: the round's header fields and its destinations."""
    return data.StructLayout({
        "meta": layouts.message_meta(params),  # the round; worker = unicast destination
        "tag": unsigned(layouts.TAG_BITS),
        "multicast": unsigned(1),     # to workers 0..workers-1, else to meta.worker
        "workers": unsigned(8),
        "n": unsigned(layouts.bits_for(params.workers + 1)),
        "beats": unsigned(layouts.bits_for(params.beats + 1)),
    })


def result_beat(params: Params) -> data.StructLayout:
    """One beat of a RESULT, as the slot table sends it."""
    return data.StructLayout({
        "data": data.ArrayLayout(unsigned(32), params.lanes),
        "mask": unsigned(params.lanes),   # lanes holding elements (< count)
        "bf16": unsigned(1),              # a bf16 round (data widened to binary32)
        "nan": unsigned(1),
        "ovf": unsigned(1),
        "last": unsigned(1),
    })
