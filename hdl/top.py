"""Verilog export of the core (``netagg generate``)."""

from __future__ import annotations

from amaranth.back import verilog

from netagg.hdl.core import NetaggCore
from netagg.params import Params


def verilog_text(params: Params, *, fp_stages=None) -> str:
    """Verilog-2005 of ``netagg_core`` for these parameters."""
    core = NetaggCore(params, fp_stages=fp_stages)
    return verilog.convert(core, name="netagg_core", emit_src=False)


def write_verilog(params: Params, path, *, fp_stages=None) -> None:
    with open(path, "w") as f:
        f.write(verilog_text(params, fp_stages=fp_stages))
