"""``netagg.torch``: PyTorch on netagg (extra ``netagg[torch]``); the
implementation is :mod:`netagg.host.torch`. Importing it without torch
fails with one line naming the extra."""

from netagg.host.torch import HookState, all_reduce, allreduce_hook

__all__ = ["HookState", "all_reduce", "allreduce_hook"]
