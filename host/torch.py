"""PyTorch on netagg (``netagg.torch``; extra ``netagg[torch]``): a DDP
communication hook and an in-place ``all_reduce`` through a
:class:`netagg.host.Worker` (``docs/host.md``).

* :func:`allreduce_hook`: ``ddp.register_comm_hook(HookState(worker),
  allreduce_hook)``. Sums the bucket's flat gradient over all ranks through
  the switch, divides it by the world size (the Worker's ``workers``) in
  the bucket's dtype, and returns a completed ``torch.futures.Future``
  holding the result. fp32 and bf16 buckets; the dtype is kept.
* :func:`all_reduce`: ``all_reduce(tensor, worker, op="sum")`` in place, like
  ``torch.distributed.all_reduce``, for fp32, bf16 and int32 CPU tensors.

Every rank computes the same division of the same switch RESULT, so the
ranks' gradients (and so their parameters) stay bit-identical.
"""

try:
    import torch
except ImportError:
    raise ImportError("netagg.torch needs PyTorch, which is not installed: "
                      "pip install 'netagg[torch]'") from None

import dataclasses

import numpy as np

from netagg.host.worker import Worker

_OPS = ("sum", "min", "max")


@dataclasses.dataclass
class HookState:
    """The state of :func:`allreduce_hook`: the rank's Worker, and how many
    buckets it has reduced."""

    worker: Worker
    buckets: int = 0


def _numpy_bits(tensor: torch.Tensor) -> tuple[np.ndarray, str | None]:
    """A NumPy view of a contiguous CPU tensor's elements, and the Worker
    dtype argument it needs."""
    if tensor.device.type != "cpu":
        raise ValueError(f"netagg.torch works on CPU tensors, not {tensor.device}")
    if tensor.dtype == torch.float32:
        return tensor.numpy(), None
    if tensor.dtype == torch.int32:
        return tensor.numpy(), None
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16), "bf16"
    raise TypeError(f"netagg.torch reduces float32, bfloat16 and int32 tensors, "
                    f"not {tensor.dtype}")


def _reduced(tensor: torch.Tensor, worker: Worker, op: str) -> torch.Tensor:
    """A new tensor: ``tensor`` all-reduced through the switch."""
    flat = tensor.detach().contiguous().reshape(-1)
    arr, dtype = _numpy_bits(flat)
    y = worker.allreduce(arr, op=op, dtype=dtype)
    if dtype == "bf16":
        return torch.from_numpy(y.view(np.int16)).view(torch.bfloat16).reshape(tensor.shape)
    return torch.from_numpy(y).reshape(tensor.shape)


def all_reduce(tensor: torch.Tensor, worker: Worker, op: str = "sum") -> torch.Tensor:
    """All-reduce ``tensor`` in place through ``worker`` (``op``: sum, min,
    max); returns it."""
    if op not in _OPS:
        raise ValueError(f"op must be sum, min or max, not {op!r}")
    if tensor.numel() == 0:
        return tensor
    result = _reduced(tensor, worker, op)
    with torch.no_grad():
        tensor.copy_(result)
    return tensor


def allreduce_hook(state: HookState, bucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients summed over the ranks
    through the switch, divided by the world size."""
    buf = bucket.buffer()
    if buf.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"allreduce_hook reduces float32 and bfloat16 buckets, not {buf.dtype}")
    result = _reduced(buf, state.worker, "sum")
    result.div_(state.worker.workers)
    state.buckets += 1
    fut = torch.futures.Future()
    fut.set_result(result)
    return fut


__all__ = ["HookState", "all_reduce", "allreduce_hook"]
