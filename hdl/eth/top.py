"""Verilog export of the Ethernet switch (the ``netagg sim --frontend
ethernet`` device under test)."""

from __future__ import annotations

from amaranth.back import verilog

from netagg.ctrlproto import DEFAULT_CTRL_PORT
from netagg.hdl.eth.switch import EthernetSwitch
from netagg.params import Params

TOPLEVEL = "netagg_eth"

_PREAMBLE = """\
// netagg_eth: the Ethernet switch at its GMII pins ({params})
/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
/* verilator lint_off CASEINCOMPLETE */
/* verilator lint_off UNOPTFLAT */
"""


def verilog_text(params: Params, *, ports: int = 2, fp_stages=None, ctrl_key=None,
                 ctrl_port: int = DEFAULT_CTRL_PORT) -> str:
    """Verilog-2005 of ``netagg_eth``: one clock ``clk`` (the GMII byte clock
    and the core clock), synchronous reset ``rst``, per port ``rx__<p>__dv``,
    ``rx__<p>__er``, ``rx__<p>__data``, ``tx__<p>__en``, ``tx__<p>__er``,
    ``tx__<p>__data``, and the control port of docs/core.md; with
    ``ctrl_key`` the control plane over UDP at ``ctrl_port``."""
    top = EthernetSwitch(params, ports=ports, fp_stages=fp_stages, ctrl_key=ctrl_key,
                         ctrl_port=ctrl_port)
    text = verilog.convert(top, name=TOPLEVEL, emit_src=False)
    desc = ", ".join(f"{k}={v}" for k, v in params.to_dict().items())
    ctrl = "off" if ctrl_key is None else f"udp port {ctrl_port}"
    return _PREAMBLE.format(params=f"{desc}, ports={ports}, fp_stages={fp_stages}, "
                                   f"control plane {ctrl}") + text


def write_verilog(params: Params, path, *, ports: int = 2, fp_stages=None, ctrl_key=None,
                  ctrl_port: int = DEFAULT_CTRL_PORT) -> None:
    with open(path, "w") as f:
        f.write(verilog_text(params, ports=ports, fp_stages=fp_stages, ctrl_key=ctrl_key,
                             ctrl_port=ctrl_port))
