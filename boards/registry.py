"""The boards netagg builds for, one record each (docs/boards.md): platform,
top, LEDs and defaults. ``netagg build --board`` offers exactly these names.

Importing this module imports no Amaranth: the platform and the top are
named ``"module:attribute"`` and loaded by :meth:`Board.platform` and
:meth:`Board.make_top`.
"""

from __future__ import annotations

import dataclasses
import importlib

OOC_ECP5 = "ooc-ecp5"


def _load(ref: str):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class Board:
    """One board.

    ``kind``: ``"bridge"`` (the UART bridge: a host drives the core over
    the serial port, ``netagg uart``), ``"ethernet"`` (the Ethernet switch:
    hosts reach the core over the board's ports, docs/ethernet.md),
    ``"selftest"`` (the on-chip self-test, no host link) or ``"core"``
    (the bare core out of context, no board, no bitstream). ``leds``: the platform resources
    ``(name, number)`` the top drives, in the order the top defines
    (``None``: the board has no LED for that signal). ``fp_stages``: the
    adder pipeline when the build does not give one (None: the lanes'
    default). ``params``: ``(name, value)`` pairs of build parameters
    (:class:`netagg.params.Params` fields) that ``netagg build`` uses for
    this board where the command line gives none, instead of the generic
    defaults (a configuration that fits the board's device); empty: the
    generic defaults. ``acc_ram``: the bridge core's accumulator form
    (None: the family's, :meth:`~netagg.hdl.lane_loop.LaneLoop.acc_ram_for`).
    ``nextpnr_opts``: options the board's build adds to nextpnr's.
    """

    name: str
    family: str                      # "ecp5" or "ice40"
    device: str                      # for the report
    kind: str
    platform_ref: str | None = None  # amaranth_boards class, "module:Class"
    top_ref: str | None = None       # board top class, "module:Class"
    leds: tuple = ()
    fp_stages: int | None = None
    baud: int = 115200               # the bridge's default UART rate
    params: tuple = ()               # the board's default build parameters
    acc_ram: str | None = None
    nextpnr_opts: str = ""           # added to the flow's nextpnr options

    def default_params(self) -> dict:
        """The board's default build parameters, ``{field: value}``."""
        return dict(self.params)

    @property
    def ooc(self) -> bool:
        """The bare core out of context (no top, no bitstream)."""
        return self.kind == "core"

    def platform(self):
        """A new Amaranth platform object of the board."""
        if self.platform_ref is None:
            raise ValueError(f"{self.name} has no board platform (out-of-context build)")
        return _load(self.platform_ref)()

    def make_top(self, params, *, fp_stages=None, jobs=None, baud: int | None = None,
                 ctrl_key: int | None = None, ctrl_port: int | None = None):
        """The board's top for ``params``: ``jobs`` is loaded into the job
        table at reset, ``baud`` the UART rate (bridge boards), ``ctrl_key``
        and ``ctrl_port`` the UDP control plane (Ethernet boards)."""
        if self.top_ref is None:
            raise ValueError(f"{self.name} has no board top (out-of-context build)")
        cls = _load(self.top_ref)
        if self.kind == "selftest":
            if jobs is not None:
                raise ValueError(f"the {self.name} self-test uses its own job table")
            return cls(params, fp_stages=fp_stages, led=self.leds[0])
        if self.kind == "ethernet":
            return cls(params, fp_stages=fp_stages, jobs=jobs, ctrl_key=ctrl_key,
                       ctrl_port=ctrl_port)
        if ctrl_key is not None:
            raise ValueError(f"the {self.name} top has no UDP control plane")
        from netagg.hdl.lane_loop import LaneLoop
        acc_ram = self.acc_ram or LaneLoop.acc_ram_for(params, self.family)
        return cls(params, fp_stages=fp_stages, jobs=jobs,
                   baud=self.baud if baud is None else baud, leds=self.leds, acc_ram=acc_ram)


BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("ulx3s", "ecp5", "LFE5U-85F-6 CABGA381", "bridge",
          "amaranth_boards.ulx3s:ULX3S_85F_Platform", "netagg.boards.tops:BridgeTop",
          leds=(("led", 0), ("led", 1), ("led", 2))),
    Board("colorlight-5a75b", "ecp5", "LFE5U-25F-6 CABGA256", "ethernet",
          "amaranth_boards.colorlight_5a75b_r7_0:Colorlight_5A75B_R70Platform",
          "netagg.boards.eth_top:EthernetTop", leds=(("led", 0),),
          # fits the LFE5U-25F with room to spare and meets every clock
          # (docs/ethernet.md, "Board build"); the generic defaults need
          # more block RAM than the 25F has
          params=(("workers", 4), ("slots", 64), ("elements", 16), ("lanes", 2),
                  ("jobs", 2)),
          nextpnr_opts="--router router2"),
    Board("colorlight-5a75b-selftest", "ecp5", "LFE5U-25F-6 CABGA256", "selftest",
          "amaranth_boards.colorlight_5a75b_r7_0:Colorlight_5A75B_R70Platform",
          "netagg.boards.tops:SelfTestTop", leds=(("led", 0),)),
    Board("icebreaker", "ice40", "iCE40UP5K-SG48", "bridge",
          "amaranth_boards.icebreaker:ICEBreakerPlatform", "netagg.boards.tops:BridgeTop",
          leds=(("led_g", 0), None, ("led_r", 0)),
          fp_stages=0, acc_ram="compact"),   # 12 MHz: no adder pipeline, fewest cells
    Board(OOC_ECP5, "ecp5", "LFE5U-85F-6 CABGA381 (out of context)", "core"),
)}
"""Every board, by name (the ``--board`` choices, in this order)."""

NAMES = tuple(BOARDS)


def get(name: str) -> Board:
    """The board called ``name``; ValueError naming the choices if none is."""
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r} (choose from {', '.join(NAMES)})") from None
