"""Long bit-exact run of the floating-point adders under Verilator (cocotb),
against the golden model (sim/arith.py):

* 10**7 random fp32 pairs (uniform bits, close exponents and cancellation,
  subnormals, overflow), through FP32 FPAdd;
* every one of the 65,536 bf16 values against 256 chosen second operands
  (the special-value table and a spread of others, in both operand orders),
  through BF16 FPAdd.

Operands are streamed in bulk: the Verilog top instantiates N32 fp32 and
N16 bf16 adders side by side (one module each, from amaranth.back.verilog),
one wide word per cycle; results are compared in numpy in batches.
Marked slow: `make test-slow` (or `pytest -m slow tests/test_arith_slow.py`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

N32, N16 = 16, 32
FP32_PAIRS = 10_000_000
BF16_SECOND = 256
BATCH = 2048            # cycles per comparison batch
U32 = np.uint32


def fp32_operands(rng, n):
    """Random fp32 pairs mixing uniform bits with hard cases."""
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    kind = rng.integers(0, 4, n)
    ea = (a >> 23) & 0xFF
    ea = np.where(kind == 2, rng.integers(0, 3, n).astype(np.uint64), ea)
    ea = np.where(kind == 3, rng.integers(252, 255, n).astype(np.uint64), ea)
    close = np.clip(ea.astype(np.int64) + rng.integers(-2, 3, n), 0, 254).astype(np.uint64)
    eb = np.where(kind == 1, close, np.where(kind == 2, rng.integers(0, 3, n).astype(np.uint64),
                                             rng.integers(252, 255, n).astype(np.uint64)))
    fb = np.where(rng.random(n) < 0.5, b & 0x7FFFFF, (a & 0x7FFFFF) ^ rng.integers(0, 4, n)
                  .astype(np.uint64))
    a2 = (a & ~np.uint64(0xFF << 23)) | (ea << np.uint64(23))
    b2 = (b & np.uint64(1 << 31)) | (eb << np.uint64(23)) | fb
    return (np.where(kind == 0, a, a2).astype(U32), np.where(kind == 0, b, b2).astype(U32))


def bf16_second_operands(count=BF16_SECOND):
    """The special-value table, then values near 1.0 (cancellation against
    every exponent band) alternating with uniform bit patterns."""
    from netagg.sim.specials import BF16_SPECIALS
    rng = np.random.default_rng(16)
    mid = (rng.integers(0, 1 << 16, 512, dtype=np.uint64) & 0x807F) \
        | (rng.integers(118, 138, 512).astype(np.uint64) << 7)
    uniform = rng.integers(0, 1 << 16, 512, dtype=np.uint64)
    chosen = list(dict.fromkeys(BF16_SPECIALS))
    for v in np.stack([mid, uniform], axis=1).ravel().tolist():
        if len(chosen) >= count:
            break
        if v not in chosen:
            chosen.append(v)
    return np.array(chosen[:count], dtype=U32)


def bf16_pairs(count=BF16_SECOND):
    """(a, b): every bf16 value against each chosen operand, alternating the
    operand order."""
    allv = np.arange(1 << 16, dtype=U32)
    second = bf16_second_operands(count)
    a = np.empty((len(second), 1 << 16), dtype=U32)
    b = np.empty_like(a)
    for j, c in enumerate(second):
        if j % 2:
            a[j], b[j] = c, allv
        else:
            a[j], b[j] = allv, c
    return a.ravel(), b.ravel()


def _pack(arr, dtype):
    return int.from_bytes(np.ascontiguousarray(arr, dtype=dtype).tobytes(), "little")


def _unpack(value, n, dtype):
    size = np.dtype(dtype).itemsize
    return np.frombuffer(value.to_bytes(n * size, "little"), dtype=dtype).astype(U32)


def _bits_fast(value, n):
    raw = np.frombuffer(value.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


try:
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def bulk_adders(dut):
        """Stream all pairs, compare every result bit-exactly in batches."""
        from netagg.sim import arith
        from netagg.wire import DType, Op

        lat = int(os.environ["NETAGG_LATENCY"])
        n32 = int(os.environ.get("NETAGG_FP32_PAIRS", FP32_PAIRS))
        rng = np.random.default_rng(32)
        a32, b32 = fp32_operands(rng, -(-n32 // N32) * N32)
        n16 = int(os.environ.get("NETAGG_BF16_SECOND", BF16_SECOND))
        a16, b16 = bf16_pairs(n16)
        c32, c16 = len(a32) // N32, len(a16) // N16
        a32, b32 = a32.reshape(c32, N32), b32.reshape(c32, N32)
        a16, b16 = a16.reshape(c16, N16), b16.reshape(c16, N16)
        cycles = max(c32, c16)
        Clock(dut.clk, 10, unit="ns").start()
        dut.rst.value = 0
        checked = {"fp32": 0, "bf16": 0}
        pending = []        # (cycle, r32, nan32, ovf32, r16, nan16, ovf16)

        def compare(rows):
            idx = np.array([r[0] for r in rows])
            for name, arr_a, arr_b, count, n, off, dt, mode, ity in (
                    ("fp32", a32, b32, c32, N32, 1, DType.FP32, "fp32", "<u4"),
                    ("bf16", a16, b16, c16, N16, 4, DType.BF16, "bf16", "<u2")):
                sel = idx < count
                if not sel.any():
                    continue
                ia = arr_a[idx[sel]].ravel()
                ib = arr_b[idx[sel]].ravel()
                rs = [r for r, s in zip(rows, sel, strict=True) if s]
                got_r = np.concatenate([_unpack(r[off], n, ity) for r in rs])
                got_n = np.concatenate([_bits_fast(r[off + 1], n) for r in rs])
                got_o = np.concatenate([_bits_fast(r[off + 2], n) for r in rs])
                er, en, eo = arith.combine(dt, Op.SUM, ia, ib, mode)
                bad = np.nonzero((got_r != er) | (got_n != en) | (got_o != eo))[0]
                assert bad.size == 0, f"{name}: {bad.size} mismatches, first: " + "; ".join(
                    f"{ia[i]:#x}+{ib[i]:#x} got ({got_r[i]:#x},{got_n[i]:d},{got_o[i]:d}) "
                    f"expected ({er[i]:#x},{en[i]:d},{eo[i]:d})" for i in bad[:5])
                checked[name] += ia.size

        packed = {}

        def inputs(c):
            if c not in packed:
                packed.clear()
                for k in range(c, min(c + BATCH, cycles)):
                    packed[k] = (
                        _pack(a32[k], "<u4") if k < c32 else 0,
                        _pack(b32[k], "<u4") if k < c32 else 0,
                        _pack(a16[k], "<u2") if k < c16 else 0,
                        _pack(b16[k], "<u2") if k < c16 else 0)
            return packed[c]

        t0 = time.time()
        for c in range(cycles + lat):
            await FallingEdge(dut.clk)
            if c >= lat:
                pending.append((c - lat,
                                dut.r32.value.to_unsigned(), dut.nan32.value.to_unsigned(),
                                dut.ovf32.value.to_unsigned(),
                                dut.r16.value.to_unsigned(), dut.nan16.value.to_unsigned(),
                                dut.ovf16.value.to_unsigned()))
                if len(pending) >= BATCH:
                    compare(pending)
                    pending = []
            if c < cycles:
                x = inputs(c)
                dut.a32.value, dut.b32.value, dut.a16.value, dut.b16.value = x
        if pending:
            compare(pending)
        assert checked["fp32"] == c32 * N32 and checked["bf16"] == (1 << 16) * n16
        dut._log.info("checked %d fp32 and %d bf16 pairs in %.0f s",
                      checked["fp32"], checked["bf16"], time.time() - t0)


def _top_verilog(stages, build: Path):
    """Verilog: one fp32 and one bf16 adder module, and a top instantiating
    N32 and N16 of them side by side."""
    from amaranth.back import verilog

    from netagg.hdl.fp import BF16, FP32, FPAdd

    v32 = verilog.convert(FPAdd(FP32, stages=stages), name="fpadd32")
    v16 = verilog.convert(FPAdd(BF16, stages=stages), name="fpadd16")
    top = f"""
module bulk(input clk, input rst,
  input [{32 * N32 - 1}:0] a32, input [{32 * N32 - 1}:0] b32,
  output [{32 * N32 - 1}:0] r32, output [{N32 - 1}:0] nan32, output [{N32 - 1}:0] ovf32,
  input [{16 * N16 - 1}:0] a16, input [{16 * N16 - 1}:0] b16,
  output [{16 * N16 - 1}:0] r16, output [{N16 - 1}:0] nan16, output [{N16 - 1}:0] ovf16);
  genvar i;
  generate
    for (i = 0; i < {N32}; i = i + 1) begin : g32
      fpadd32 u(.clk(clk), .rst(rst), .en(1'b1), .a(a32[32*i +: 32]), .b(b32[32*i +: 32]),
                .r(r32[32*i +: 32]), .nan(nan32[i]), .ovf(ovf32[i]));
    end
    for (i = 0; i < {N16}; i = i + 1) begin : g16
      fpadd16 u(.clk(clk), .rst(rst), .en(1'b1), .a(a16[16*i +: 16]), .b(b16[16*i +: 16]),
                .r(r16[16*i +: 16]), .nan(nan16[i]), .ovf(ovf16[i]));
    end
  endgenerate
endmodule
"""
    build.mkdir(parents=True, exist_ok=True)
    path = build / "bulk.v"
    path.write_text(v32 + v16 + top)
    return path


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.cocotb
def test_adders_bulk_verilator(tmp_path):
    from cocotb_test.simulator import run

    from netagg.hdl.lane import DEFAULT_STAGES

    venv_bin = str(Path(__file__).resolve().parents[1] / ".venv" / "bin")
    os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    src = _top_verilog(DEFAULT_STAGES, tmp_path)
    run(
        simulator="verilator",
        verilog_sources=[str(src)],
        toplevel="bulk",
        module="test_arith_slow",
        python_search=[str(Path(__file__).parent)],
        sim_build=str(tmp_path / "sim_build"),
        timescale="1ns/1ps",
        extra_env={"NETAGG_LATENCY": str(DEFAULT_STAGES),
                   "NETAGG_FP32_PAIRS": os.environ.get("NETAGG_FP32_PAIRS", str(FP32_PAIRS)),
                   "NETAGG_BF16_SECOND": os.environ.get("NETAGG_BF16_SECOND",
                                                        str(BF16_SECOND))},
        compile_args=["-Wno-fatal"],
        make_args=["-j2", "CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O1"],
    )
