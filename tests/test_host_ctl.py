"""The UDP control plane: the datagram format (netagg.ctrlproto), netagg
serve --ctrl-key (job table loaded at run time, counters, wrong keys and
malformed datagrams dropped, counted, changing nothing) and netagg ctl
(load-jobs, counters, read, write; no answer -> one line, exit 1)."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
from serve_util import raise_any, run_ranks, serving

from netagg import ctrlproto as cp
from netagg import regmap
from netagg.cli import main
from netagg.host import Worker
from netagg.params import Params

P = Params(workers=4, slots=32, elements=16, lanes=8, jobs=2)
KEY = 0x0123456789ABCDEF
HEX = "0123456789abcdef"


def test_format_round_trip_and_refusals():
    acc = [cp.read(0x8000), cp.write(regmap.job_addr(1, 0), 0x201), cp.read(0xFFFF)]
    data = cp.encode_request(77, KEY, acc)
    assert len(data) == cp.HEADER_BYTES + 8 * len(acc)
    assert cp.decode_request(data, KEY) == (77, acc)
    with pytest.raises(cp.CtrlError) as e:
        cp.decode_request(data, KEY ^ 1)
    assert e.value.reason == "bad_key"
    bad = [data[:15], data[:-1], data + b"\0", bytes([2]) + data[1:], data[:1] + b"\1" + data[2:],
           data[:14] + b"\0\1" + data[16:], data[:12] + b"\0\0" + data[14:],
           data[:12] + b"\0\4" + data[14:], data[:16] + b"\2" + data[17:],
           data[:17] + b"\1" + data[18:], cp.encode_reply(77, KEY, acc)]
    for d in bad:
        with pytest.raises(cp.CtrlError) as e:
            cp.decode_request(d, KEY)
        assert e.value.reason == "malformed", d.hex()
    with pytest.raises(ValueError):
        cp.encode_request(1, KEY, [])
    with pytest.raises(ValueError):
        cp.encode_request(1, KEY, [cp.read(0)] * (cp.MAX_ACCESSES + 1))
    assert cp.parse_key("0x" + HEX) == KEY
    for text in ("", "xyz", "1" * 17):
        with pytest.raises(ValueError):
            cp.parse_key(text)
    assert cp.params_from_info(cp.info_values(P, cp.FRONTEND_SERVE)) == P


def ctl(port, *args, key=HEX, timeout="1"):
    return main(["ctl", "--switch", f"127.0.0.1:{port}", "--key", key, "--timeout", timeout,
                 *args])


def test_serve_control_plane(tmp_path, capsys):
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [{"id": 1, "workers": 2, "slot_base": 4,
                                          "slots": 4}]}))
    with serving(P, None, ctrl_key=KEY, ctrl_port=0) as srv:
        port = srv.ctrl.address[1]
        assert ctl(port, "load-jobs", str(jobs)) == 0
        assert "job 1 (W=2, slots 4..7)" in capsys.readouterr().out
        x = np.arange(40, dtype=np.int32)

        def rank(r):
            with Worker(srv.address, job=1, rank=r, workers=2, slots=4, elements=16,
                        timeout=0.01, retries=100) as w:
                return w.allreduce(x), w.stats.resends
        out = run_ranks(rank, 2)
        raise_any(out)
        assert all(np.array_equal(y, 2 * x) for y, _ in out)
        # (a loaded machine may resend after the 10 ms timeout: each resend
        # is one more datagram received, and a RESULT again at most)
        resends = sum(n for _, n in out)

        assert ctl(port, "counters", "--json") == 0
        counters = json.loads(capsys.readouterr().out)
        assert set(counters) >= set(regmap.CORE_COUNTERS) | set(cp.CTRL_COUNTERS) | set(
            cp.SERVE_COUNTERS)
        assert counters["rx"] == 6 + resends
        assert 3 <= counters["results"] <= 3 + resends

        # Wrong key and malformed datagrams: dropped, counted, nothing changed.
        before = srv.ctrl.regs.copy()
        assert ctl(port, "write", "0x0004", "0", key="ffff", timeout="0.2") == 1
        err = capsys.readouterr().err
        assert err.startswith("netagg: error: no answer") and err.count("\n") == 1
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            good = cp.encode_request(1, KEY, [cp.write(regmap.job_addr(1, 0), 0)])
            for junk in (b"", b"x" * 15, good[:-1], good + b"\0", bytes([9]) + good[1:]):
                s.sendto(junk, srv.ctrl.address)
        assert ctl(port, "read", hex(cp.CTRL_BASE + 2)) == 0
        assert capsys.readouterr().out.split()[1] == "5"
        assert srv.ctrl.regs == before and srv.ctrl.counters["ctrl_bad_key"] == 4
        assert srv.jobs.get(1) is not None

        # read / write a job register; disabling job 1 stops its traffic.
        assert ctl(port, "read", str(regmap.job_addr(1, regmap.JOB_CTRL))) == 0
        assert capsys.readouterr().out.split()[0] == f"0x{regmap.job_ctrl_word(True, 2):08x}"
        assert ctl(port, "write", str(regmap.job_addr(1, regmap.JOB_CTRL)), "0") == 0
        assert capsys.readouterr().out.split()[0] == "0x00000000"
        assert srv.jobs.get(1) is None
        assert ctl(port, "read", hex(cp.INFO_BASE)) == 0
        assert int(capsys.readouterr().out.split()[0], 16) == cp.INFO_ID

        # load-jobs checks JOBS.json against the switch's build (W_max = 4).
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"jobs": [{"id": 0, "workers": 5, "slot_base": 0,
                                             "slots": 4}]}))
        assert ctl(port, "load-jobs", str(bad)) == 1
        err = capsys.readouterr().err
        assert err.startswith("netagg: error: ") and "workers" in err
    assert srv.final["ctrl_ok"] >= 6


def test_ctl_no_answer(capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert ctl(port, "counters", timeout="0.2") == 1
    err = capsys.readouterr().err
    assert err.startswith("netagg: error: no answer") and err.count("\n") == 1
    assert ctl(port, "read", "0", timeout="0.2") == 1
    assert main(["ctl", "--switch", "nonsense", "--key", HEX, "read", "0"]) == 1
    assert main(["ctl", "--switch", "127.0.0.1", "--key", "zz", "read", "0"]) == 1
    assert main(["ctl", "--switch", "127.0.0.1", "--key", HEX]) == 2


def test_serve_load_jobs_trading_ranges(tmp_path, capsys):
    """A table whose jobs trade slot ranges with the loaded one loads as a
    whole: the entries are taken from the registers after each request, not
    one by one as written (job 0's new range overlaps job 1's old one)."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps({"jobs": [{"id": 0, "workers": 2, "slot_base": 0, "slots": 16},
                                          {"id": 1, "workers": 3, "slot_base": 16,
                                           "slots": 16}]}))
    second.write_text(json.dumps({"jobs": [{"id": 0, "workers": 4, "slot_base": 16,
                                            "slots": 16},
                                           {"id": 1, "workers": 2, "slot_base": 0,
                                            "slots": 8}]}))
    with serving(P, None, ctrl_key=KEY, ctrl_port=0) as srv:
        port = srv.ctrl.address[1]
        for path in (first, second):
            assert ctl(port, "load-jobs", str(path)) == 0
            want = [(j["id"], j["workers"], j["slot_base"], j["slots"])
                    for j in json.loads(path.read_text())["jobs"]]
            got = [(j.id, j.workers, j.slot_base, j.slots) for j in srv.jobs if j.enabled]
            assert got == want, path.name
        capsys.readouterr()
        x = np.arange(16, dtype=np.int32)

        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=4, slots=16, elements=16,
                        timeout=0.01, retries=100) as w:
                return w.allreduce(x)
        out = run_ranks(rank, 4)
        raise_any(out)
        assert all(np.array_equal(y, 4 * x) for y in out)
