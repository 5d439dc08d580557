"""The golden-model switch against protocol.md: validation order, every drop
reason, every branch of the slot pseudo-code, multicast, retransmission,
job isolation, status bits; hypothesis properties against an independent
set-based transcription of the pseudo-code."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netagg.jobs import Job, JobTable
from netagg.params import ParamError, Params
from netagg.payload import Message
from netagg.sim import arith
from netagg.sim.message_model import Switch, make_contrib
from netagg.sim.specials import BF16_SPECIALS, FP32_SPECIALS, INT32_SPECIALS
from netagg.sim.traffic import Traffic
from netagg.wire import COUNTERS, STATUS_NAN, STATUS_OVERFLOW, DType, Header, MsgType, Op, Verdict

FP32, BF16, INT32 = DType.FP32, DType.BF16, DType.INT32
SUM, MIN, MAX = Op.SUM, Op.MIN, Op.MAX
P = Params(workers=4, slots=16, elements=8, lanes=4, jobs=4)


def f32(x: float) -> int:
    return struct.unpack(">I", struct.pack(">f", x))[0]


def table(params=P, *jobs):
    jobs = jobs or (Job(0, 3, 0, 4), Job(1, 2, 4, 2), Job(2, 2, 6, 2, enabled=False))
    return JobTable(jobs, params)


def switch(params=P, *jobs) -> Switch:
    return Switch(params, table(params, *jobs))


def counters(sw: Switch, **nonzero) -> dict:
    expected = dict.fromkeys(COUNTERS, 0)
    expected.update(nonzero)
    return expected


# -- validation ----------------------------------------------------------

GOOD = dict(job=0, slot=1, ver=0, worker=2, values=[f32(1.0), f32(2.0)])


def msg(**changes) -> bytes:
    kw = dict(GOOD)
    kw.update(changes)
    return make_contrib(kw.pop("job"), kw.pop("slot"), kw.pop("ver"), kw.pop("worker"),
                        kw.pop("values"), **kw)


BAD = {
    "short": (Verdict.BAD_LENGTH, msg()[:15]),
    "empty": (Verdict.BAD_LENGTH, b""),
    "version0": (Verdict.BAD_HEADER, msg(version=0)),
    "version2": (Verdict.BAD_HEADER, msg(version=2)),
    "type_result": (Verdict.BAD_HEADER, msg(type=MsgType.RESULT)),
    "type_other": (Verdict.BAD_HEADER, msg(type=7)),
    "reserved": (Verdict.BAD_HEADER, msg(reserved=0x40)),
    "status": (Verdict.BAD_HEADER, msg(status=1)),
    "status_high": (Verdict.BAD_HEADER, msg(status=0x8000)),
    "dtype3": (Verdict.BAD_HEADER, msg(dtype=3)),
    "dtype15": (Verdict.BAD_HEADER, msg(dtype=15)),
    "op3": (Verdict.BAD_HEADER, msg(op=3)),
    "count0": (Verdict.BAD_LENGTH, msg(values=[], count=0)),
    "count_over_k": (Verdict.BAD_LENGTH, msg(values=[0] * 9)),
    "payload_long": (Verdict.BAD_LENGTH, msg() + b"\0"),
    "payload_short": (Verdict.BAD_LENGTH, msg()[:-1]),
    "payload_missing": (Verdict.BAD_LENGTH, msg()[:16]),
    "count_vs_payload": (Verdict.BAD_LENGTH, msg(count=3)),
    "bf16_with_4_byte_elements": (Verdict.BAD_LENGTH, msg(dtype=BF16)[:16] + msg()[16:]),
    "job_over_j": (Verdict.BAD_JOB, msg(job=4)),
    "job_255": (Verdict.BAD_JOB, msg(job=255)),
    "job_unlisted": (Verdict.BAD_JOB, msg(job=3)),
    "job_disabled": (Verdict.BAD_JOB, msg(job=2, slot=0, worker=0)),
    "slot_past_range": (Verdict.BAD_SLOT, msg(slot=4)),
    "slot_of_other_job": (Verdict.BAD_SLOT, msg(job=1, slot=2, worker=0)),
    "slot_max": (Verdict.BAD_SLOT, msg(slot=0xFFFF)),
    "worker_past_w": (Verdict.BAD_WORKER, msg(worker=3)),
    "worker_w_max": (Verdict.BAD_WORKER, msg(job=1, worker=2)),
    # Bad in two ways: the earlier check counts.
    "short_and_bad_version": (Verdict.BAD_LENGTH, msg(version=3)[:8]),
    "header_and_length": (Verdict.BAD_HEADER, msg(version=2, count=5)),
    "header_and_job": (Verdict.BAD_HEADER, msg(status=2, job=9)),
    "unbuilt_dtype_and_length": (Verdict.BAD_HEADER, msg(dtype=4, count=0, values=[])),
    "length_and_job": (Verdict.BAD_LENGTH, msg(job=9, count=1)),
    "job_and_slot": (Verdict.BAD_JOB, msg(job=9, slot=100)),
    "job_and_worker": (Verdict.BAD_JOB, msg(job=3, worker=100)),
    "slot_and_worker": (Verdict.BAD_SLOT, msg(slot=100, worker=100)),
}


@pytest.mark.parametrize("name", list(BAD))
def test_drop_reason(name):
    verdict, data = BAD[name]
    sw = switch()
    before = sw.copy_state(0, 1, 0)
    outcome = sw.receive(data)
    assert outcome.verdict is verdict
    assert outcome.results == []
    assert sw.counters == counters(sw, rx=1, **{verdict.counter: 1})
    assert sw.copy_state(0, 1, 0) == before


def test_dtype_and_op_not_built_are_bad_header():
    params = P.replace(dtypes=("int32", "bf16"), ops=("sum", "max"))
    sw = switch(params)
    assert sw.receive(msg(dtype=FP32)).verdict is Verdict.BAD_HEADER
    assert sw.receive(msg(dtype=INT32, op=MIN)).verdict is Verdict.BAD_HEADER
    assert sw.receive(msg(dtype=INT32, op=MAX)).verdict is Verdict.ACCEPT
    assert sw.receive(msg(dtype=BF16, op=SUM, slot=2)).verdict is Verdict.ACCEPT
    assert sw.counters["drop_bad_header"] == 2


def test_count_up_to_k_and_bf16_lengths():
    sw = switch()
    assert sw.receive(msg(values=list(range(8)), dtype=INT32)).verdict is Verdict.ACCEPT
    data = msg(values=[0x3F80] * 3, dtype=BF16, slot=2)
    assert len(data) == 16 + 6
    assert sw.receive(data).verdict is Verdict.ACCEPT


def test_dropped_messages_change_no_state():
    """Drops in the middle of a round: the round completes as if they were
    never sent, and each drop counted once, with rx counting them all."""
    sw = switch()
    vals = [[f32(1.5), f32(-2.0)], [f32(0.25), f32(8.0)], [f32(3.0), f32(1e-3)]]
    assert sw.receive(msg(worker=0, values=vals[0])).verdict is Verdict.ACCEPT
    for _, data in BAD.values():
        sw.receive(data)
    sw.receive(msg(worker=1, values=vals[1]))
    out = sw.receive(msg(worker=2, values=vals[2]))
    expected, _, _ = arith.reduce(FP32, SUM, [np.array(v, dtype=np.uint32) for v in vals])
    assert [list(r.values) for r in out.results] == [list(expected)] * 3
    assert sw.counters["rx"] == 3 + len(BAD)
    drops = sum(v for k, v in sw.counters.items() if k.startswith("drop_"))
    assert drops == len(BAD)


def test_receive_accepts_message_objects():
    sw = switch()
    m = Message(Header(job=1, slot=0, worker=0, count=1, dtype=INT32),
                np.array([5], dtype=np.uint32))
    assert sw.receive(m).verdict is Verdict.ACCEPT
    m2 = Message(m.header.replace(worker=1), np.array([7], dtype=np.uint32))
    assert [int(r.values[0]) for r in sw.receive(m2).results] == [12, 12]


# -- the pseudo-code, branch by branch -----------------------------------

def test_round_open_combine_complete_multicast():
    sw = switch()
    a, b, c = [f32(1.0), f32(2.5)], [f32(-3.0), f32(0.5)], [f32(0.125), f32(1e30)]
    o1 = sw.receive(msg(worker=1, values=a, offset=77))
    assert o1 == type(o1)(Verdict.ACCEPT, [])
    assert sw.copy_state(0, 1, 0).bits == {1} and sw.copy_state(0, 1, 0).n == 1
    assert sw.copy_state(0, 1, 0).meta == (FP32, SUM, 2, 77)
    o2 = sw.receive(msg(worker=0, values=b, offset=77))
    assert o2.verdict is Verdict.ACCEPT and o2.results == []
    state = sw.copy_state(0, 1, 0)
    assert (state.bits, state.n, state.done) == ({0, 1}, 2, False)
    o3 = sw.receive(msg(worker=2, values=c, offset=77))
    assert o3.verdict is Verdict.ACCEPT
    # (1 + -3) + 0.125 = -1.875 ; (2.5 + 0.5) + 1e30 = 1e30 (rounded in fp32)
    expected = [f32(-1.875), f32(np.float32(3.0) + np.float32(1e30))]
    assert [r.header.worker for r in o3.results] == [0, 1, 2]
    for dest, r in enumerate(o3.results):
        assert r.header == Header(version=1, type=MsgType.RESULT, reserved=0, ver=0, job=0,
                                  dtype=FP32, op=SUM, slot=1, worker=dest, offset=77,
                                  count=2, status=3)
        assert list(r.values) == expected
    state = sw.copy_state(0, 1, 0)
    assert (state.bits, state.n, state.done) == ({0, 1, 2}, 3, True)
    assert sw.counters == counters(sw, rx=3, tx=3, results=1)


def test_result_wire_bytes():
    """A RESULT packs to the documented bytes (status = n | nan<<8 | ovf<<9)."""
    sw = switch()
    sw.receive(make_contrib(1, 1, 1, 0, [0x7F7F], dtype=BF16, op=SUM, offset=0x01020304))
    r = sw.receive(make_contrib(1, 1, 1, 1, [0x7F7F], dtype=BF16, op=SUM,
                                offset=0x01020304)).results[0]
    assert r.pack() == bytes([0x11, 0x01, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00,
                              0x01, 0x02, 0x03, 0x04, 0x00, 0x01, 0x02, 0x02,
                              0x7F, 0x80])


def test_mismatch_in_open_round_changes_nothing():
    for change in (dict(dtype=INT32), dict(op=MAX), dict(offset=1),
                   dict(values=[f32(1.0)])):
        sw = switch()
        sw.receive(msg(worker=0))
        before = sw.copy_state(0, 1, 0)
        out = sw.receive(msg(worker=1, **change))
        assert out.verdict is Verdict.MISMATCH and out.results == []
        assert sw.copy_state(0, 1, 0) == before
        assert sw.counters == counters(sw, rx=2, drop_mismatch=1)
        # The round still completes with matching contributions.
        sw.receive(msg(worker=1))
        assert len(sw.receive(msg(worker=2)).results) == 3


def test_mismatch_does_not_discard_from_other_copy():
    sw = switch()
    for w in range(3):
        sw.receive(msg(worker=w, ver=0))
    sw.receive(msg(worker=0, ver=1))                 # opens ver 1 with meta m
    assert sw.copy_state(0, 1, 0).bits == {1, 2}
    out = sw.receive(msg(worker=1, ver=1, offset=5))  # mismatch
    assert out.verdict is Verdict.MISMATCH
    assert sw.copy_state(0, 1, 0).bits == {1, 2}      # 1 can still get its result
    assert sw.receive(msg(worker=1, ver=0)).verdict is Verdict.RETRANSMIT


def test_duplicate_in_open_round():
    sw = switch()
    sw.receive(msg(worker=0, values=[f32(1.0), f32(1.0)]))
    before = sw.copy_state(0, 1, 0)
    # Metadata of a duplicate is not compared: still a duplicate.
    for dup in (msg(worker=0, values=[f32(9.0), f32(9.0)]), msg(worker=0, op=MIN, count=1,
                                                                  values=[0])):
        out = sw.receive(dup)
        assert out.verdict is Verdict.DUPLICATE and out.results == []
    assert sw.copy_state(0, 1, 0) == before
    assert sw.counters == counters(sw, rx=3, drop_duplicate=2)
    sw.receive(msg(worker=1, values=[f32(2.0), f32(2.0)]))
    out = sw.receive(msg(worker=2, values=[f32(4.0), f32(4.0)]))
    assert list(out.results[0].values) == [f32(7.0)] * 2


def test_retransmission_after_lost_result():
    sw = switch()
    for w in range(3):
        last = sw.receive(msg(worker=w, values=[f32(w), f32(-w)], offset=9))
    lost = last.results[1]                            # worker 1's RESULT is lost
    # Worker 1 resends: it gets the stored RESULT, and only it.
    out = sw.receive(msg(worker=1, values=[f32(100.0), f32(100.0)], offset=9))
    assert out.verdict is Verdict.RETRANSMIT
    assert out.results == [lost]
    # Metadata is not compared on retransmission: the stored RESULT anyway.
    out = sw.receive(msg(worker=1, op=MAX, dtype=INT32, offset=1234, values=[1]))
    assert out.results == [lost]
    assert sw.counters == counters(sw, rx=5, tx=5, results=1, retransmit=2)
    state = sw.copy_state(0, 1, 0)
    assert state.done and state.n == 3


def test_result_available_until_every_worker_moved_on():
    """o.bits.discard(w): the previous round's RESULT stays available to a
    worker until it contributes to the slot's next round (other copy)."""
    sw = switch()
    for w in range(3):
        done = sw.receive(msg(worker=w, ver=0, values=[f32(w), 0]))
    result0 = done.results
    sw.receive(msg(worker=0, ver=1))
    assert sw.copy_state(0, 1, 0).bits == {1, 2}
    assert sw.copy_state(0, 1, 0).done
    # Workers 1 and 2 have not moved on: their results are still there.
    assert sw.receive(msg(worker=2, ver=0)).results == [result0[2]]
    assert sw.receive(msg(worker=1, ver=0)).results == [result0[1]]
    sw.receive(msg(worker=1, ver=1))
    sw.receive(msg(worker=2, ver=1))                  # completes ver 1
    assert sw.copy_state(0, 1, 0).bits == set()
    assert sw.copy_state(0, 1, 1).done
    # Worker 0 contributes ver 0 again: a new round (c.done, w not in bits).
    out = sw.receive(msg(worker=0, ver=0, op=MAX, values=[f32(-1.0), f32(2.0)]))
    assert out.verdict is Verdict.ACCEPT
    state = sw.copy_state(0, 1, 0)
    assert (state.bits, state.n, state.done, state.meta) == ({0}, 1, False, (FP32, MAX, 2, 0))
    assert sw.copy_state(0, 1, 1).bits == {1, 2}     # discarded 0 from ver 1


def test_no_discard_while_other_copy_open():
    sw = switch()
    sw.receive(msg(worker=0, ver=0))
    sw.receive(msg(worker=0, ver=1))                  # ver 0 not done: bits kept
    assert sw.copy_state(0, 1, 0).bits == {0}
    assert sw.copy_state(0, 1, 1).bits == {0}
    assert sw.receive(msg(worker=0, ver=0)).verdict is Verdict.DUPLICATE


def test_new_round_on_done_copy_while_others_still_wait():
    """A worker that moves on to ver 0 again while other workers are still
    in the old ver-0 round (they never contributed to ver 1) opens a new
    round: the old result is then gone for them (pseudo-code, literally)."""
    sw = switch()
    for w in range(3):
        sw.receive(msg(worker=w, ver=0, values=[1, 2], dtype=INT32))
    out = sw.receive(msg(worker=0, ver=0, values=[5, 6], dtype=INT32))
    assert out.verdict is Verdict.RETRANSMIT          # w in c.bits: a retransmission
    sw.receive(msg(worker=0, ver=1, values=[5, 6], dtype=INT32))
    out = sw.receive(msg(worker=0, ver=0, values=[5, 6], dtype=INT32))
    assert out.verdict is Verdict.ACCEPT              # a new round on ver 0
    assert sw.copy_state(0, 1, 0).bits == {0}
    # Worker 1 was in the old round's bits, but the new round replaced them:
    # its message is a new contribution now.
    assert sw.receive(msg(worker=1, ver=0, values=[1, 1], dtype=INT32)).verdict is Verdict.ACCEPT


def test_single_worker_job():
    """W = 1: every contribution completes its round; the RESULT is the
    contribution unchanged but for NaN canonicalisation."""
    params = P.replace(workers=1)
    sw = switch(params, Job(0, 1, 0, 2))
    vals = [0x7F800001, 0xFFC12345, 0x80000000, 0x00000001, 0x7F800000, f32(-3.5)]
    out = sw.receive(make_contrib(0, 0, 0, 0, vals))
    assert out.verdict is Verdict.ACCEPT
    (r,) = out.results
    assert list(r.values) == [0x7FC00000, 0x7FC00000] + vals[2:]
    assert r.header.status == 1 | STATUS_NAN
    assert r.header.worker == 0
    # bf16 in fp32 accumulation mode: widened and rounded back exactly.
    bvals = [0x7F81, 0xFFFF, 0x8000, 0x0001, 0xFF80, 0x7F7F]
    out = sw.receive(make_contrib(0, 1, 0, 0, bvals, dtype=BF16, op=MIN))
    assert list(out.results[0].values) == [0x7FC0, 0x7FC0] + bvals[2:]
    assert out.results[0].header.status == 1 | STATUS_NAN
    # Same copy again: the worker is in its bits, so it is a retransmission.
    again = sw.receive(make_contrib(0, 0, 0, 0, [0]))
    assert again.verdict is Verdict.RETRANSMIT and again.results == [r]
    # The other copy: a new round, discarding the worker from ver 0.
    sw.receive(make_contrib(0, 0, 1, 0, [f32(1.0)], op=MAX))
    assert sw.copy_state(0, 0, 0).bits == set()
    out = sw.receive(make_contrib(0, 0, 0, 0, [7, 8], dtype=INT32))
    assert out.verdict is Verdict.ACCEPT and list(out.results[0].values) == [7, 8]
    assert out.results[0].header.status == 1


def test_jobs_are_isolated():
    """Two jobs use the same relative slot and ver: separate copies. A job
    cannot reach past its range into another job's slots."""
    sw = switch()
    sw.receive(make_contrib(0, 0, 0, 0, [10], dtype=INT32))
    sw.receive(make_contrib(1, 0, 0, 0, [1], dtype=INT32))
    # Job 0's slot 4 would be job 1's absolute slot 4: refused.
    assert sw.receive(make_contrib(0, 4, 0, 1, [1000], dtype=INT32)).verdict is Verdict.BAD_SLOT
    out1 = sw.receive(make_contrib(1, 0, 0, 1, [2], dtype=INT32))
    assert [(r.header.job, r.header.worker, int(r.values[0])) for r in out1.results] == [
        (1, 0, 3), (1, 1, 3)]
    # Job 1 completing did not touch job 0's round; different metadata in job 0.
    assert sw.copy_state(0, 0, 0).n == 1
    sw.receive(make_contrib(0, 0, 0, 1, [20], dtype=INT32))
    out0 = sw.receive(make_contrib(0, 0, 0, 2, [30], dtype=INT32))
    assert [int(r.values[0]) for r in out0.results] == [60] * 3
    assert [r.header.job for r in out0.results] == [0] * 3


def test_misbehaving_worker_spoils_only_its_job():
    sw = switch()
    sw.receive(make_contrib(1, 1, 0, 0, [f32(1.0)]))
    # A job-0 worker floods job 0's slots with junk and bad messages.
    for slot in range(4):
        for ver in (0, 1):
            sw.receive(make_contrib(0, slot, ver, 0, [0x7F800001] * 8))
            sw.receive(make_contrib(0, slot, ver, 0, [1], dtype=INT32))
            sw.receive(make_contrib(0, slot + 4, ver, 0, [1]))
    out = sw.receive(make_contrib(1, 1, 0, 1, [f32(2.0)]))
    assert [int(r.values[0]) for r in out.results] == [f32(3.0)] * 2
    assert out.results[0].header.status == 2


def test_multicast_order_and_interleaving():
    sw = switch()
    sw.receive(make_contrib(1, 0, 0, 1, [1], dtype=INT32))
    sw.receive(make_contrib(0, 2, 1, 2, [1], dtype=INT32))
    sw.receive(make_contrib(0, 2, 1, 0, [1], dtype=INT32))
    out = sw.receive(make_contrib(0, 2, 1, 1, [1], dtype=INT32))
    assert [(r.header.job, r.header.slot, r.header.ver, r.header.worker) for r in out.results] == [
        (0, 2, 1, 0), (0, 2, 1, 1), (0, 2, 1, 2)]
    out = sw.receive(make_contrib(1, 0, 0, 0, [1], dtype=INT32))
    assert [r.header.worker for r in out.results] == [0, 1]
    assert sw.counters == counters(sw, rx=5, tx=5, results=2)


# -- status bits ---------------------------------------------------------

def round_status(values, dtype=FP32, op=SUM, params=P):
    """Run one round of len(values) workers; returns (result bits, status)."""
    w = len(values)
    sw = switch(params.replace(workers=max(w, 1)), Job(0, w, 0, 1))
    for i, v in enumerate(values):
        out = sw.receive(make_contrib(0, 0, 0, i, v, dtype=dtype, op=op))
    assert len(out.results) == w
    statuses = {r.header.status for r in out.results}
    assert len(statuses) == 1
    return [int(x) for x in out.results[0].values], statuses.pop()


def test_nan_from_min_max_input():
    for op in (MIN, MAX):
        vals, status = round_status([[f32(1.0), f32(2.0)], [f32(3.0), 0x7FA00000]], op=op)
        assert vals[1] == 0x7FC00000 and vals[0] == f32(1.0 if op is MIN else 3.0)
        assert status == 2 | STATUS_NAN


def test_nan_sticky_even_if_not_in_result():
    # A NaN in the first contribution: min gives NaN; the flag covers the round.
    vals, status = round_status([[0x7F800001]], op=MIN)
    assert vals == [0x7FC00000] and status == 1 | STATUS_NAN
    # inf + -inf makes a NaN from non-NaN inputs.
    vals, status = round_status([[0x7F800000], [0xFF800000], [f32(1.0)]])
    assert vals == [0x7FC00000] and status == 3 | STATUS_NAN


def test_fp32_overflow():
    big = 0x7F7FFFFF
    vals, status = round_status([[big, f32(1.0)], [big, f32(1.0)]])
    assert vals == [0x7F800000, f32(2.0)] and status == 2 | STATUS_OVERFLOW
    # Negative overflow, then a NaN: both flags.
    vals, status = round_status([[0xFF7FFFFF], [0xFF7FFFFF], [0x7F800000]])
    assert vals == [0x7FC00000] and status == 3 | STATUS_NAN | STATUS_OVERFLOW
    # inf + finite is not an overflow.
    vals, status = round_status([[0x7F800000], [big]])
    assert vals == [0x7F800000] and status == 2


def test_int32_wrap_is_sticky():
    vals, status = round_status([[0x7FFFFFFF], [1], [0xFFFFFFFF]], dtype=INT32)
    assert vals == [0x7FFFFFFF] and status == 3 | STATUS_OVERFLOW
    vals, status = round_status([[0x7FFFFFFF], [0xFFFFFFFF], [1]], dtype=INT32)
    assert vals == [0x7FFFFFFF] and status == 3
    vals, status = round_status([[0x80000000], [0x80000000]], dtype=INT32, op=MIN)
    assert vals == [0x80000000] and status == 2


def test_bf16_fp32_mode_final_rounding_overflow():
    """bf16 max + 2^119 is finite in binary32 but a tie to odd below 2^128:
    rounds to +inf when the result is sent (mode fp32); in mode bf16 the
    addition itself overflows, and a later -2^119 cannot bring it back."""
    bmax, half_ulp, neg_half_ulp = 0x7F7F, 0x7B00, 0xFB00
    acc, _ = arith.to_acc(BF16, np.array([bmax], dtype=np.uint32), "fp32")
    _, _, ovf = arith.combine(BF16, SUM, acc, np.array([half_ulp], dtype=np.uint32), "fp32")
    assert not ovf.any()          # the addition is exact in binary32
    vals, status = round_status([[bmax], [half_ulp]], dtype=BF16)
    assert vals == [0x7F80] and status == 2 | STATUS_OVERFLOW
    vals, status = round_status([[bmax], [half_ulp], [neg_half_ulp]], dtype=BF16)
    assert vals == [bmax] and status == 3
    p16 = P.replace(bf16_accumulate="bf16")
    vals, status = round_status([[bmax], [half_ulp], [neg_half_ulp]], dtype=BF16, params=p16)
    assert vals == [0x7F80] and status == 3 | STATUS_OVERFLOW


def test_bf16_modes_differ_in_rounding():
    # 1 + 2^-8 + 2^-8: bf16 mode rounds each step (1 + 2^-8 ties to 1), fp32 mode
    # sums exactly to 1 + 2^-7, which is a bf16 value.
    one, tiny = 0x3F80, 0x3B80
    assert round_status([[one], [tiny], [tiny]], dtype=BF16)[0] == [0x3F81]
    p16 = P.replace(bf16_accumulate="bf16")
    assert round_status([[one], [tiny], [tiny]], dtype=BF16, params=p16)[0] == [0x3F80]


def test_every_counter_counts_its_own_event(seed):
    """Message by message: a drop adds one to ``rx`` and to its verdict's
    counter only; a new contribution adds to ``rx`` and, when it completes
    a round, one to ``results`` and W to ``tx``; a retransmission one to
    ``retransmit`` and ``tx``. Over every kind of message, every counter of
    protocol.md moves."""
    sw = switch()
    tm = Traffic(P, sw.jobs, random.Random(seed))
    job = sw.jobs[0]
    round0 = tm.round(job, 0)
    cases = [(v, m) for v, m in tm.malformed()] + tm.mismatches(job, 1)
    cases += [(Verdict.ACCEPT, m) for m in round0] + [(Verdict.RETRANSMIT, round0[0])]
    moved = set()
    for want, m in cases:
        before = dict(sw.counters)
        out = sw.receive(m)
        assert out.verdict == want
        delta = {k: sw.counters[k] - before[k] for k in sw.counters if sw.counters[k] != before[k]}
        if want.counter is not None:
            assert delta == {"rx": 1, want.counter: 1}
        elif want == Verdict.RETRANSMIT:
            assert delta == {"rx": 1, "retransmit": 1, "tx": 1}
        elif out.results:
            assert delta == {"rx": 1, "results": 1, "tx": job.workers}
        else:
            assert delta == {"rx": 1}
        moved |= set(delta)
    assert moved == set(COUNTERS) and set(sw.counters) == set(COUNTERS)


def test_job_list_is_validated_against_params():
    sw = Switch(P, [Job(0, 4, 0, 16)])
    assert sw.jobs.get(0) == Job(0, 4, 0, 16)
    with pytest.raises(ParamError, match="workers"):
        Switch(P, [Job(0, 5, 0, 16)])
    with pytest.raises(ParamError, match="not within"):
        Switch(P, JobTable([Job(0, 4, 0, 32)], P.replace(slots=32)))


def test_result_values_are_read_only():
    vals = round_status([[1], [2]], dtype=INT32)
    assert vals[0] == [3]
    sw = switch(P, Job(0, 1, 0, 1))
    r = sw.receive(make_contrib(0, 0, 0, 0, [1], dtype=INT32)).results[0]
    with pytest.raises(ValueError):
        r.values[0] = 5


# -- hypothesis properties -----------------------------------------------

def _bits(dtype):
    specials = {FP32: FP32_SPECIALS, BF16: BF16_SPECIALS, INT32: INT32_SPECIALS}[dtype]
    top = 0xFFFF if dtype is BF16 else 0xFFFFFFFF
    return st.one_of(st.sampled_from(specials), st.integers(0, top))


@st.composite
def rounds(draw, dtypes=(FP32, BF16, INT32)):
    dtype = draw(st.sampled_from(dtypes))
    op = draw(st.sampled_from([SUM, MIN, MAX]))
    w = draw(st.integers(1, 5))
    count = draw(st.integers(1, 4))
    contribs = [draw(st.lists(_bits(dtype), min_size=count, max_size=count)) for _ in range(w)]
    order = draw(st.permutations(range(w)))
    return dtype, op, contribs, order


PH = Params(workers=5, slots=4, elements=4, lanes=2, jobs=2)


def _run_round(dtype, op, contribs, order, mode, dups=()):
    """Contributions in ``order``; after the k-th arrival, for every d in
    ``dups`` with d % W == k, a worker that already contributed resends junk
    (a duplicate, or a retransmission once the round is complete). Returns
    the round's multicast."""
    params = PH.replace(bf16_accumulate=mode)
    sw = Switch(params, JobTable([Job(1, len(contribs), 2, 2)], params))
    results = None
    seen = []
    for k, w in enumerate(order):
        out = sw.receive(make_contrib(1, 1, 1, w, contribs[w], dtype=dtype, op=op, offset=3))
        assert out.verdict is Verdict.ACCEPT
        seen.append(w)
        if out.results:
            results = out.results
        for d in dups:
            if d % len(order) != k:
                continue
            again = seen[d % len(seen)]
            junk = [(x * 7 + 1) & 0xFFFF for x in contribs[again]]
            dup = sw.receive(make_contrib(1, 1, 1, again, junk, dtype=dtype, op=op))
            if results is None:
                assert dup.verdict is Verdict.DUPLICATE and dup.results == []
            else:
                assert dup.verdict is Verdict.RETRANSMIT
                assert dup.results == [results[again]]
    return results


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.sampled_from(["fp32", "bf16"]))
def test_result_is_reduce_in_arrival_order(case, mode):
    dtype, op, contribs, order = case
    results = _run_round(dtype, op, contribs, order, mode)
    arrived = [np.array(contribs[w], dtype=np.uint32) for w in order]
    expected, nan, ovf = arith.reduce(dtype, op, arrived, mode)
    status = len(contribs) | (STATUS_NAN if nan else 0) | (STATUS_OVERFLOW if ovf else 0)
    assert [r.header.worker for r in results] == list(range(len(contribs)))
    for r in results:
        assert list(r.values) == list(expected)
        assert r.header.status == status
        assert (r.header.job, r.header.slot, r.header.ver, r.header.offset) == (1, 1, 1, 3)
        assert (r.header.dtype, r.header.op, r.header.count) == (dtype, op, len(contribs[0]))


@settings(max_examples=100, deadline=None)
@given(rounds(), st.lists(st.integers(0, 10), max_size=6), st.sampled_from(["fp32", "bf16"]))
def test_duplicates_never_change_a_result(case, dups, mode):
    dtype, op, contribs, order = case
    clean = _run_round(dtype, op, contribs, order, mode)
    noisy = _run_round(dtype, op, contribs, order, mode, dups)
    assert noisy == clean


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 0xFFFFFFFF), min_size=3, max_size=3),
                min_size=1, max_size=5), st.data())
def test_int32_sum_independent_of_order(contribs, data):
    order = data.draw(st.permutations(range(len(contribs))))
    a = _run_round(INT32, SUM, contribs, list(range(len(contribs))), "fp32")
    b = _run_round(INT32, SUM, contribs, order, "fp32")
    assert [list(r.values) for r in a] == [list(r.values) for r in b]
    total = [sum(c[i] for c in contribs) % (1 << 32) for i in range(3)]
    assert list(a[0].values) == total


class ReferenceSwitch:
    """protocol.md's pseudo-code transcribed with sets and dicts, for the
    data plane only (validation is assumed passed), to cross-check the
    bitmask implementation on random traffic."""

    def __init__(self, jobs):
        self.jobs = {j.id: j for j in jobs}
        self.copies = {}

    def copy(self, key):
        return self.copies.setdefault(key, {"bits": set(), "n": 0, "done": False,
                                            "meta": None, "contribs": []})

    def receive(self, job, slot, ver, w, meta, values):
        j = self.jobs[job]
        base = j.slot_base + slot
        c, o = self.copy((base, ver)), self.copy((base, 1 - ver))
        if w not in c["bits"]:
            if c["n"] > 0 and not c["done"] and meta != c["meta"]:
                return "mismatch", []
            if o["done"]:
                o["bits"].discard(w)
            if c["n"] == 0 or c["done"]:
                c.update(contribs=[values], meta=meta, bits={w}, n=1, done=False)
            else:
                c["contribs"].append(values)
                c["bits"].add(w)
                c["n"] += 1
            if c["n"] == j.workers:
                c["done"] = True
                return "accept", [(d, c) for d in range(j.workers)]
            return "accept", []
        if c["done"]:
            return "retransmit", [(w, c)]
        return "duplicate", []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1),
                          st.integers(0, 2), st.integers(0, 1), st.integers(1, 2),
                          st.lists(st.integers(0, 0xFFFFFFFF), min_size=2, max_size=2)),
                max_size=60))
def test_random_traffic_matches_reference(traffic):
    jobs = [Job(0, 3, 0, 2), Job(1, 2, 2, 2)]
    params = PH
    sw = Switch(params, JobTable(jobs, params))
    ref = ReferenceSwitch(jobs)
    for job, slot, ver, worker, op, count, values in traffic:
        worker %= jobs[job].workers
        values = values[:count]
        meta = (int(INT32), op, count, 0)
        out = sw.receive(make_contrib(job, slot, ver, worker, values, dtype=INT32, op=op))
        verdict, sends = ref.receive(job, slot, ver, worker, meta, values)
        assert out.verdict.name.lower() == verdict
        assert [r.header.worker for r in out.results] == [d for d, _ in sends]
        for r, (_, c) in zip(out.results, sends, strict=True):
            expected, _, ovf = arith.reduce(INT32, Op(c["meta"][1]), [np.array(v, np.uint32)
                                                          for v in c["contribs"]])
            assert list(r.values) == list(expected)
            assert r.header.status == c["n"] | (STATUS_OVERFLOW if ovf else 0)
            assert (r.header.job, r.header.slot, r.header.ver) == (job, slot, ver)
            assert (r.header.op, r.header.count) == c["meta"][1:3]
