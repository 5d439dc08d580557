"""netagg.torch: in-place all_reduce (fp32, bf16, int32), the DDP hook in a
2-rank DDP run through netagg serve (every rank's parameters bit-identical),
and the one-line error without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch  # the extra netagg[torch]: make setup and CI install it (no skip)
from serve_util import jobs_of, raise_any, run_ranks, seed, serving

import netagg.torch as nt
from netagg.host import Worker
from netagg.params import Params
from netagg.sim import arith
from netagg.wire import DType, Op

P = Params(workers=4, slots=16, elements=16, lanes=8, jobs=1)
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_all_reduce_in_place(dtype, op):
    g = torch.Generator().manual_seed(seed(50))
    # Float sums of 2 are order independent; of 3 they depend on arrival order.
    W = 2 if op == "sum" and dtype != "int32" else 3
    tdtype = getattr(torch, dtype)
    if dtype == "int32":
        ts = [torch.randint(-1000, 1000, (5, 13), generator=g, dtype=tdtype) for _ in range(W)]
    else:
        ts = [torch.randn(5, 13, generator=g).to(tdtype) for _ in range(W)]
    orig = [t.clone() for t in ts]
    with serving(P, jobs_of(P, (0, W, 0, 4)), loss=0.05, seed=seed(51)) as srv:
        def rank(r):
            with Worker(srv.address, job=0, rank=r, workers=W, slots=4, elements=16,
                        timeout=0.01, retries=60) as w:
                same = nt.all_reduce(ts[r], w, op=op)
                assert same is ts[r]
        raise_any(run_ranks(rank, W))
    wire = {"float32": DType.FP32, "bfloat16": DType.BF16, "int32": DType.INT32}[dtype]
    view = torch.int16 if dtype == "bfloat16" else torch.int32
    raw = [t.view(view).reshape(-1).numpy().view(np.uint16 if dtype == "bfloat16"
                                                 else np.uint32).astype(np.uint32)
           for t in orig]
    expect, _, _ = arith.reduce(wire, Op.from_name(op), raw, "fp32")
    for t in ts:
        assert t.dtype == tdtype and t.shape == (5, 13)
        got = t.view(view).reshape(-1).numpy().view(np.uint16 if dtype == "bfloat16"
                                                    else np.uint32)
        assert np.array_equal(got.astype(np.uint32), expect)


def test_hook_fp32_and_bf16_buckets():
    """The hook on GradBucket-like objects: sum through the switch, then
    division by the world size in the bucket's dtype, as a completed Future."""
    class Bucket:
        def __init__(self, t):
            self.t = t

        def buffer(self):
            return self.t

    g = torch.Generator().manual_seed(seed(52))
    W = 2
    for tdtype in (torch.float32, torch.bfloat16):
        grads = [torch.randn(100, generator=g).to(tdtype) for _ in range(W)]
        with serving(P, jobs_of(P, (0, W, 0, 4))) as srv:
            def rank(r, grads=grads):
                with Worker(srv.address, job=0, rank=r, workers=W, slots=4, elements=16) as w:
                    fut = nt.allreduce_hook(nt.HookState(w), Bucket(grads[r]))
                    assert fut.done()
                    return fut.value()
            out = run_ranks(rank, W)
            raise_any(out)
        total = (grads[0].float() + grads[1].float()).to(tdtype) if tdtype == torch.bfloat16 \
            else grads[0] + grads[1]
        summed = total / W
        for y in out:
            assert y.dtype == tdtype
            assert torch.equal(y.view(torch.int16 if tdtype == torch.bfloat16 else torch.int32),
                               summed.view(torch.int16 if tdtype == torch.bfloat16
                                           else torch.int32))


def test_ddp_example_two_ranks(tmp_path):
    out = tmp_path / "ddp.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "ddp_example.py"),
                           "--workers", "2", "--steps", "3", "--loss", "0.05",
                           "--seed", str(seed(53)), "--json", str(out), "--deadline", "240"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["netagg_params_bit_identical"] is True
    assert all(np.isfinite(report["netagg_final_loss"]))
    assert report["max_param_diff_netagg_vs_ddp"] < 1e-3
    assert report["serve_stats"]["results"] > 0


def test_import_without_torch_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n import netagg.torch\nexcept ImportError as e:\n print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    line = out.stdout.strip()
    assert "netagg[torch]" in line and "\n" not in line
