"""``netagg sim`` (sim/harness.py) end to end against ``netagg model``.

The equivalence rule of docs/cli.md: for every input, ``sim`` and ``model``
write the same RESULT frames in the same order for each (job, slot, ver,
worker), and the same counters (``sim`` adds ``cycles``). The inputs hold
ignored frames, drops of every kind, duplicates, retransmissions and
workers that change address.
"""

from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from netagg import cli, frames, pcap
from netagg.frames import Endpoint
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim import harness
from netagg.sim.message_model import make_contrib
from netagg.sim.specials import FP32_SPECIALS
from netagg.sim.traffic import Traffic, regression_jobs
from netagg.wire import COUNTERS, HEADER_BYTES, DType, Header, Op

BUILD = Path(__file__).resolve().parent.parent / "build" / "cocotb"
# The small configuration of tests/test_cocotb_core.py (same build).
SMALL = dict(lanes=4, elements=16, workers=2, slots=16, jobs=2,
             dtypes=("fp32", "bf16"), ops=("sum", "max"), bf16_accumulate="bf16")


@pytest.fixture(autouse=True)
def _cache(monkeypatch):
    monkeypatch.setenv(harness.ENV_CACHE, str(BUILD))


def _endpoint(i: int) -> Endpoint:
    return Endpoint(bytes([2, 0, 0, 0, i >> 8, i & 0xFF]), bytes([10, 1, i >> 8, i & 0xFF]),
                    20000 + i)


def _ignored_frames(params: Params) -> list[bytes]:
    """Frames that are not netagg messages."""
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    good = frames.build_frame(make_contrib(0, 0, 0, 0, [1]), _endpoint(1), sw)
    other_port = Endpoint(sw.mac, sw.ip, params.port + 1)
    tcp = bytearray(good)
    tcp[14 + 9] = 6                                   # IPv4 protocol TCP
    frag = bytearray(good)
    frag[14 + 6] = 0x20                               # more fragments
    arp = bytearray(good)
    arp[12:14] = b"\x08\x06"
    return [bytes(arp), bytes(tcp), bytes(frag), good[:30],
            frames.build_frame(make_contrib(0, 0, 0, 0, [1]), _endpoint(1), other_port)]


def handmade(params: Params) -> tuple[JobTable, list[bytes]]:
    """A short capture with one of each case (for the small configuration)."""
    jobs = JobTable([Job(0, 2, 0, 8), Job(1, 1, 10, 4)], params)
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    a0, a1, a0b, b0, stray = (_endpoint(i) for i in (1, 2, 3, 4, 5))
    fp, bf = DType.FP32, DType.BF16

    def f(src, job, slot, ver, worker, values, **kw):
        return frames.build_frame(make_contrib(job, slot, ver, worker, values, **kw), src, sw)

    ign = _ignored_frames(params)
    out = [
        ign[0],
        f(a0, 0, 0, 0, 0, [0x3F800000] * 5, dtype=fp),
        f(a1, 0, 0, 0, 1, [0x40000000] * 5, dtype=fp),                  # round complete
        f(a0, 0, 1, 0, 0, FP32_SPECIALS[:16], dtype=fp, op=Op.MAX),
        ign[1],
        f(a1, 0, 1, 0, 1, FP32_SPECIALS[-16:], dtype=fp, op=Op.MAX),     # complete
        f(a0b, 0, 0, 0, 0, [0x3F800000] * 5, dtype=fp),                 # retransmit, new address
        f(stray, 0, 9, 0, 1, [1], dtype=fp),                    # bad slot: address unchanged
        f(a1, 0, 2, 1, 1, [0x3F80, 0x7F80, 0xFF80], dtype=bf),
        f(a1, 0, 2, 1, 1, [0x3F80, 0x7F80, 0xFF80], dtype=bf),          # duplicate
        f(a0, 0, 2, 1, 0, [0x3F80, 0xFF80, 0x0001], dtype=bf, offset=3),  # mismatch
        f(a0b, 0, 2, 1, 0, [0x3F80, 0xFF80, 0x0001], dtype=bf),          # complete (nan)
        ign[2],
        f(b0, 1, 3, 0, 0, list(range(16)), dtype=fp),                   # W=1: complete at once
        f(b0, 5, 0, 0, 0, [1], dtype=fp),                               # bad job
        f(b0, 0, 0, 0, 2, [1], dtype=fp),                               # bad worker
        f(b0, 0, 0, 0, 0, [1, 2], dtype=fp, count=3),                   # bad length
        f(b0, 0, 0, 0, 0, [1], dtype=DType.INT32),                      # dtype not built
        f(b0, 0, 0, 0, 0, [1], dtype=fp, op=Op.MIN),                    # op not built
        f(b0, 0, 0, 0, 0, [1], dtype=fp, version=2),                    # bad header
        frames.build_frame(b"\x10\x00\x00", b0, sw),                    # shorter than a header
        f(a0b, 0, 0, 1, 0, [5] * 16, dtype=fp),                         # next round of slot 0
        f(a1, 0, 0, 0, 1, [0x40000000] * 5, dtype=fp),                  # old round: retransmit
        f(a1, 0, 0, 1, 1, [6] * 16, dtype=fp),                          # complete
        f(a1, 0, 0, 1, 1, [6] * 16, dtype=fp),                          # lost: retransmit
        f(a1, 0, 0, 0, 1, [7], dtype=fp),                               # both moved on: new round
        ign[3], ign[4],
    ]
    return jobs, out


def generated(params: Params, seed: int, jobs: JobTable | None = None
              ) -> tuple[JobTable, list[bytes]]:
    """Random traffic of the regression's generators, framed from per-worker
    addresses (some workers move), with ignored frames sprinkled in."""
    rng = random.Random(seed)
    jobs = jobs or regression_jobs(params)
    tm = Traffic(params, jobs, rng)
    msgs = tm.random_mix(waves=2, per_wave=3) + tm.lossy(rounds=6)
    msgs = tm.merge([msgs, [m for _, m in tm.malformed()[::3]]])
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    ignored = _ignored_frames(params)
    out = []
    for m in msgs:
        if rng.random() < 0.1:
            out.append(rng.choice(ignored))
        if len(m) >= HEADER_BYTES:
            h = Header.unpack(m)
            src = _endpoint(16 * h.job + h.worker % 16 + 256 * rng.choice((0, 0, 0, 1)))
        else:
            src = _endpoint(999)
        out.append(frames.build_frame(m, src, sw))
    return jobs, out


def _parse_out(frame: bytes) -> frames.Datagram:
    """An OUT frame (to the worker's UDP port)."""
    d = frames.parse(frame, None)
    assert d is not None, f"not a valid UDP frame: {frame.hex()}"
    return d


def _key(frame: bytes, port: int) -> tuple:
    d = _parse_out(frame)
    h = Header.unpack(d.payload)
    return h.job, h.slot, h.ver, h.worker


def assert_equivalent(params: Params, sim_pcap, model_pcap, sim_stats, model_stats):
    """The equivalence rule of docs/cli.md."""
    sim_frames = pcap.read_frames(sim_pcap)
    model_frames = pcap.read_frames(model_pcap)
    per_key = defaultdict(lambda: ([], []))
    for frame in sim_frames:
        per_key[_key(frame, params.port)][0].append(frame)
    for frame in model_frames:
        per_key[_key(frame, params.port)][1].append(frame)
    for key, (s, m) in per_key.items():
        assert s == m, f"RESULT frames for (job, slot, ver, worker) {key} differ"
    assert len(sim_frames) == len(model_frames)
    sim = json.loads(Path(sim_stats).read_text())
    model = json.loads(Path(model_stats).read_text())
    assert set(sim) == set(model) | {"cycles"}
    assert {k: sim[k] for k in model} == model
    assert isinstance(sim["cycles"], int)
    if model["tx"]:
        assert sim["cycles"] > 0
    return sim, model


def _run_both(tmp_path, params_args, jobs, records, simulator="icarus", sim_args=()):
    jobs_path, in_path = tmp_path / "jobs.json", tmp_path / "in.pcap"
    jobs_path.write_text(jobs.to_json())
    pcap.write(in_path, records)
    common = [*params_args, "--jobs-config", str(jobs_path), "--in", str(in_path)]
    assert cli.main(["model", *common, "--out", str(tmp_path / "model.pcap"),
                     "--stats", str(tmp_path / "model.json")]) == 0
    assert cli.main(["sim", *common, "--simulator", simulator, *sim_args,
                     "--out", str(tmp_path / "sim.pcap"),
                     "--stats", str(tmp_path / "sim.json")]) == 0
    return (tmp_path / "sim.pcap", tmp_path / "model.pcap",
            tmp_path / "sim.json", tmp_path / "model.json")


SMALL_ARGS = ["--lanes", "4", "--elements", "16", "--workers", "2", "--slots", "16",
              "--jobs", "2", "--dtypes", "fp32,bf16", "--ops", "sum,max",
              "--bf16-accumulate", "bf16"]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus"])
def test_sim_equals_model_handmade(tmp_path, capsys, simulator):
    params = Params(**SMALL)
    jobs, records = handmade(params)
    paths = _run_both(tmp_path, SMALL_ARGS, jobs, records, simulator)
    sim, model = assert_equivalent(params, *paths)
    # the capture's own facts, so the comparison cannot pass vacuously
    assert model["ignored"] == 5
    assert model["results"] == 5 and model["retransmit"] == 3
    for name in COUNTERS[4:]:
        assert model[name] >= 1, name
    out = pcap.read_frames(paths[0])
    retransmitted = [_parse_out(f) for f in out
                     if _key(f, params.port) == (0, 0, 0, 0)]
    assert [d.dst for d in retransmitted] == [_endpoint(1), _endpoint(3)]
    assert "netagg sim (icarus)" in capsys.readouterr().out


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator,sim_args", [
    ("icarus", ()),                                     # the default form: DP16KD + model
    ("icarus", ("--acc-ram", "memory")),                # the portable form
    pytest.param("verilator", (), marks=pytest.mark.verilator)])
def test_sim_equals_model_generated(tmp_path, simulator, sim_args):
    params = Params(**SMALL)
    jobs, records = generated(params, seed=7)
    paths = _run_both(tmp_path, SMALL_ARGS, jobs, records, simulator, sim_args)
    sim, model = assert_equivalent(params, *paths)
    assert model["ignored"] > 0 and model["retransmit"] > 0 and model["results"] > 0
    assert sum(model[n] for n in COUNTERS if n.startswith("drop_")) > 0


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus"])
def test_sim_empty_and_ignored_only(tmp_path, simulator):
    params = Params(**SMALL)
    jobs = JobTable([Job(0, 2, 0, 4)], params)
    paths = _run_both(tmp_path, SMALL_ARGS, jobs, _ignored_frames(params), simulator)
    sim, model = assert_equivalent(params, *paths)
    assert sim["ignored"] == 5 and sim["rx"] == 0 and sim["cycles"] == 0
    assert pcap.read_frames(paths[0]) == []


# -- without a simulator ---------------------------------------------------------

def test_build_key_tracks_hardware_parameters_only():
    p = Params(**SMALL)
    assert harness.build_key(p) == harness.build_key(p.replace(port=1234, switch_ip="1.2.3.4"))
    assert harness.build_key(p) != harness.build_key(p.replace(slots=32))
    assert harness.build_key(p) != harness.build_key(p, fp_stages=3)


def test_build_key_tracks_the_python_environment(monkeypatch):
    """A Verilator model links cocotb's libraries from the environment that
    built it: another environment (a fresh clone's venv) gets its own build."""
    p = Params(**SMALL)
    key = harness.build_key(p)
    monkeypatch.setattr(harness.sys, "prefix", "/elsewhere/.venv")
    assert harness.build_key(p) != key


def test_unknown_simulator_is_a_clear_error():
    with pytest.raises(harness.SimError, match="unknown simulator"):
        harness.run_cocotb(Params(**SMALL), harness.SIM_MODULE, simulator="vcs")


def _result(job, slot, ver, worker, values=(1,)):
    h = Header(version=1, type=1, ver=ver, job=job, dtype=DType.FP32, slot=slot,
               worker=worker, count=len(values), status=2)
    return (h.pack() + b"".join(v.to_bytes(4, "big") for v in values)).hex()


def test_frames_from_run_addresses_like_the_model():
    params = Params(**SMALL)
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    m = [make_contrib(0, 0, 0, w, [1]) for w in (0, 1)]
    recs = [frames.build_frame(m[0], _endpoint(1), sw), b"\0" * 60,
            frames.build_frame(m[1], _endpoint(2), sw)]
    from netagg.sim.frame_model import classify
    messages, ignored = classify(recs, params.port)
    assert ignored == 1
    run = {"verdicts": [0, 0], "results": [[1, _result(0, 0, 0, 0)], [1, _result(0, 0, 0, 1)]]}
    out = harness.frames_from_run(params, messages, run)
    assert [seq for seq, _ in out] == [2, 2]
    assert [_parse_out(f).dst for _, f in out] == [_endpoint(1), _endpoint(2)]
    assert _parse_out(out[0][1]).src == sw
    assert _parse_out(out[0][1]).payload[:HEADER_BYTES] == \
        bytes.fromhex(_result(0, 0, 0, 0))[:HEADER_BYTES]


def test_frames_from_run_rejects_inconsistent_runs():
    params = Params(**SMALL)
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    recs = [frames.build_frame(make_contrib(0, 0, 0, 0, [1]), _endpoint(1), sw)]
    from netagg.sim.frame_model import classify
    messages, _ = classify(recs, params.port)
    with pytest.raises(harness.SimError, match="verdicts"):
        harness.frames_from_run(params, messages, {"verdicts": [], "results": []})
    with pytest.raises(harness.SimError, match="dropped"):
        harness.frames_from_run(params, messages, {"verdicts": [4],
                                                   "results": [[0, _result(0, 0, 0, 0)]]})
    with pytest.raises(harness.SimError, match="unknown worker"):
        harness.frames_from_run(params, messages, {"verdicts": [0],
                                                   "results": [[0, _result(0, 0, 0, 1)]]})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", [pytest.param("verilator", marks=pytest.mark.verilator)])
def test_sim_tags_wrap_beyond_65536_messages(tmp_path, simulator):
    """More messages than tags: RESULTs and verdicts still map to their
    messages (addresses change along the way, so a wrong mapping shows)."""
    params = Params(**SMALL)
    jobs = JobTable([Job(0, 2, 0, 8), Job(1, 1, 10, 4)], params)
    sw = Endpoint(params.switch_mac_bytes, params.switch_ip_bytes, params.port)
    records = []
    n = (1 << 16) + 3000
    for i in range(n):
        m = make_contrib(1, i % 4, (i // 4) % 2, 0, [i & 0xFFFF], dtype=DType.FP32)
        records.append(frames.build_frame(m, _endpoint(i % 7), sw))
    paths = _run_both(tmp_path, SMALL_ARGS, jobs, records, simulator)
    sim, model = assert_equivalent(params, *paths)
    assert model["results"] == n and model["rx"] == n


def test_sim_without_cocotb_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    # (a cocotb that cannot be imported: `netagg sim` reports it in one line)
    monkeypatch.setitem(sys.modules, "cocotb", None)
    with pytest.raises(harness.SimError, match="needs cocotb, which is not installed"):
        harness.toolchain_id()
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [dict(id=0, workers=2, slot_base=0, slots=4)]}))
    pcap.write(tmp_path / "in.pcap", [])
    argv = ["sim", "--jobs-config", str(jobs), "--in", str(tmp_path / "in.pcap"),
            "--out", str(tmp_path / "out.pcap"), "--lanes", "1", "--elements", "4",
            "--workers", "2", "--slots", "4", "--jobs", "1", "--dtypes", "int32", "--ops", "sum"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "netagg: error:" in err and "cocotb" in err, err
