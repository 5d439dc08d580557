"""`netagg uart` (netagg.host.uart) end to end over a pseudo-terminal: a
board emulated by the golden model behind the bridge's link format
(netagg.uartlink, netagg.regmap) answers the real client, and the RESULT
frames equal those of `netagg model` on the same pcap."""

from __future__ import annotations

import json
import os
import threading

import pytest

from netagg import pcap, regmap, uartlink
from netagg.cli import main
from netagg.frames import Endpoint, build_frame
from netagg.jobs import Job, JobTable
from netagg.params import Params
from netagg.sim.frame_model import run_model_seq
from netagg.sim.message_model import Switch
from netagg.sim.traffic import random_traffic

PARAMS = Params(workers=3, slots=8, elements=4, lanes=2, jobs=2)
JOBS = JobTable([Job(id=0, workers=3, slot_base=0, slots=4),
                 Job(id=1, workers=2, slot_base=4, slots=4)], PARAMS)
SEED = 11


class EmulatedBoard(threading.Thread):
    """The bridge's side of the link, on the master end of a pty: MSG frames
    go through the golden model (VERDICT, then its RESULTs), CTRL frames read
    and write a register file (core counters from the model), SYNC is
    answered at once (the model is done with everything before it)."""

    def __init__(self, fd: int, jobs: JobTable):
        super().__init__(daemon=True)
        self.fd, self.switch = fd, Switch(PARAMS, jobs)
        self.writes: list[tuple[int, int]] = []
        self.regs: dict[int, int] = {}
        self.stop = threading.Event()

    def send(self, body: bytes) -> None:
        os.write(self.fd, uartlink.slip_encode(body))

    def handle(self, frame: bytes) -> None:
        kind, body = frame[0], frame[1:]
        if kind == uartlink.MSG:
            tag = body[:2]
            outcome = self.switch.receive(bytes(body[2:]))
            self.send(bytes([uartlink.VERDICT]) + tag + bytes([int(outcome.verdict)]))
            for result in outcome.results:
                self.send(bytes([uartlink.RESULT]) + tag + result.pack())
        elif kind == uartlink.CTRL:
            write, addr = body[0] & 1, int.from_bytes(body[1:3], "big")
            data = int.from_bytes(body[3:7], "big")
            if write:
                self.writes.append((addr, data))
                self.regs[addr] = data
            if addr >= regmap.BRIDGE_BASE:
                value = 0
            elif addr >= regmap.COUNTER_BASE:
                name = regmap.CORE_COUNTERS[addr - regmap.COUNTER_BASE]
                value = self.switch.counters.get(name, 0)
            else:
                value = self.regs.get(addr, 0)
            self.send(bytes([uartlink.CTRLREP]) + addr.to_bytes(2, "big")
                      + value.to_bytes(4, "big"))
        elif kind == uartlink.SYNC:
            self.send(bytes([uartlink.SYNCREP]))

    def run(self) -> None:
        decoder = uartlink.SlipDecoder()
        while not self.stop.is_set():
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                return
            for frame in decoder.feed(data):
                self.handle(frame)


@pytest.fixture
def board():
    master, slave = os.openpty()
    emu = EmulatedBoard(master, JOBS)
    emu.start()
    yield emu, os.ttyname(slave)
    emu.stop.set()
    os.close(slave)
    os.close(master)


def write_inputs(tmp_path):
    messages = random_traffic(PARAMS, JOBS, 120, seed=SEED)
    print(f"seed {SEED}: {len(messages)} messages")
    frames = []
    for i, payload in enumerate(messages):
        src = Endpoint.from_strings(f"02:00:00:00:00:{i % 7:02x}", f"10.0.0.{i % 7 + 1}",
                                    5000 + i % 3)
        dst = Endpoint.from_strings("02:00:00:00:00:ff", "10.0.0.254", PARAMS.port)
        frames.append(build_frame(payload, src, dst))
    frames.insert(3, b"\x00" * 60)                  # not a netagg frame: ignored
    pcap.write(tmp_path / "in.pcap", frames)
    (tmp_path / "jobs.json").write_text(JOBS.to_json())
    return frames


def test_netagg_uart_matches_model(board, tmp_path, capsys):
    emu, device = board
    frames = write_inputs(tmp_path)
    argv = ["uart", "--device", device, "--jobs-config", str(tmp_path / "jobs.json"),
            "--in", str(tmp_path / "in.pcap"), "--out", str(tmp_path / "out.pcap"),
            "--stats", str(tmp_path / "stats.json"), "--timeout", "5",
            "--workers", "3", "--slots", "8", "--elements", "4", "--lanes", "2", "--jobs", "2"]
    assert main(argv) == 0, capsys.readouterr().err
    assert emu.writes == regmap.job_writes(JOBS)
    want, stats = run_model_seq(PARAMS, JOBS, frames)
    got = pcap.read_frames(tmp_path / "out.pcap")
    assert got == [frame for _, frame in want]
    assert len(got) > 0
    board_stats = json.loads((tmp_path / "stats.json").read_text())
    for name in ("rx", "tx", "results", "retransmit", "ignored"):
        assert board_stats[name] == stats[name], name
    assert set(regmap.BRIDGE_COUNTERS) <= set(board_stats)


def test_netagg_uart_silent_board_is_one_line(tmp_path, capsys):
    master, slave = os.openpty()        # nobody answers on the master side
    try:
        write_inputs(tmp_path)
        argv = ["uart", "--device", os.ttyname(slave), "--in", str(tmp_path / "in.pcap"),
                "--timeout", "0.2", "--workers", "3", "--slots", "8", "--elements", "4",
                "--lanes", "2", "--jobs", "2"]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("netagg: error: no VERDICT from the board") and err.count("\n") == 1
    finally:
        os.close(slave)
        os.close(master)


def test_netagg_uart_missing_device(tmp_path, capsys):
    write_inputs(tmp_path)
    assert main(["uart", "--device", str(tmp_path / "nope"), "--in",
                 str(tmp_path / "in.pcap")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("netagg: error:") and "nope" in err and err.count("\n") == 1
