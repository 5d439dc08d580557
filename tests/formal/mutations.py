"""Planted bugs: mutations of the real design applied from the test side
while the formal harness is elaborated (hdl/ is not edited)."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def applied(name):
    if name is None:
        yield
        return
    raise ValueError(f"unknown mutation {name!r}")
