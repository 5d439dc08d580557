"""Build-time parameters of a netagg core, shared by the golden model, the
hardware generator, the simulators, the board builds and the CLI.

Pure Python: importable without Amaranth or cocotb.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re

DTYPE_NAMES = ("int32", "fp32", "bf16")
OP_NAMES = ("sum", "min", "max")
BF16_ACC_MODES = ("bf16", "fp32")

DEFAULT_SWITCH_MAC = "02:00:00:00:a6:a6"
DEFAULT_SWITCH_IP = "10.166.166.1"
DEFAULT_PORT = 42662


class ParamError(ValueError):
    """An invalid build parameter; its message is one line meant for a user."""


def parse_mac(text: str) -> bytes:
    if not re.fullmatch(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}", text):
        raise ParamError(f"invalid MAC address {text!r} "
                         "(expected six hex bytes: 02:00:00:00:a6:a6)")
    return bytes(int(b, 16) for b in text.split(":"))


def parse_ip(text: str) -> bytes:
    try:
        return ipaddress.IPv4Address(text).packed
    except ValueError:
        raise ParamError(f"invalid IPv4 address {text!r}") from None


@dataclasses.dataclass(frozen=True)
class Params:
    """Build-time parameters (see ``docs/cli.md``, "Build-time parameters").

    workers: W_max, the most workers one job can have (1..255).
    slots: S, slots in total, each with two copies (1..65536).
    elements: K, elements a slot holds, the most a packet may carry.
    lanes: L, elements combined per clock cycle; must divide K.
    jobs: J, job table entries (1..256; the header's job field is 8 bits).
    dtypes, ops: which dtypes and ops the core is built with.
    bf16_accumulate: "fp32" (widen, sum in binary32, round once) or "bf16".
    port: UDP destination port of netagg messages.
    switch_mac, switch_ip: the switch's own address (source of RESULT frames).
    """

    workers: int = 8
    slots: int = 256
    elements: int = 64
    lanes: int = 8
    jobs: int = 4
    dtypes: tuple[str, ...] = DTYPE_NAMES
    ops: tuple[str, ...] = OP_NAMES
    bf16_accumulate: str = "fp32"
    port: int = DEFAULT_PORT
    switch_mac: str = DEFAULT_SWITCH_MAC
    switch_ip: str = DEFAULT_SWITCH_IP

    def __post_init__(self):
        for name in ("workers", "slots", "elements", "lanes", "jobs", "port"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParamError(f"{name} must be a positive integer, not {value!r}")
        if self.workers > 255:
            raise ParamError(f"workers (W_max) must be in 1..255, not {self.workers}")
        if self.slots > 65536:
            raise ParamError(f"slots (S) must be in 1..65536, not {self.slots}")
        if self.jobs > 256:
            raise ParamError(
                f"jobs (J) must be in 1..256 (the job field is 8 bits), not {self.jobs}")
        if self.elements > 65535:
            raise ParamError(f"elements (K) must be in 1..65535, not {self.elements}")
        if self.elements % self.lanes:
            raise ParamError(
                f"lanes (L={self.lanes}) must divide elements (K={self.elements})")
        if self.port > 65535:
            raise ParamError(f"port must be in 1..65535, not {self.port}")
        object.__setattr__(self, "dtypes", self._names("dtypes", self.dtypes, DTYPE_NAMES))
        object.__setattr__(self, "ops", self._names("ops", self.ops, OP_NAMES))
        if self.bf16_accumulate not in BF16_ACC_MODES:
            raise ParamError(
                f"bf16-accumulate must be bf16 or fp32, not {self.bf16_accumulate!r}")
        parse_mac(self.switch_mac)
        parse_ip(self.switch_ip)

    @staticmethod
    def _names(what, names, allowed):
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        names = tuple(names)
        if not names:
            raise ParamError(f"{what} must name at least one of {', '.join(allowed)}")
        for n in names:
            if n not in allowed:
                raise ParamError(f"unknown {what[:-1]} {n!r} (choose from {', '.join(allowed)})")
        if len(set(names)) != len(names):
            raise ParamError(f"{what} lists a name twice: {','.join(names)}")
        # Canonical order, so that equal sets give equal Params.
        return tuple(n for n in allowed if n in names)

    @property
    def beats(self) -> int:
        """Payload beats of a full slot: K / L."""
        return self.elements // self.lanes

    @property
    def switch_mac_bytes(self) -> bytes:
        return parse_mac(self.switch_mac)

    @property
    def switch_ip_bytes(self) -> bytes:
        return parse_ip(self.switch_ip)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["dtypes"] = list(self.dtypes)
        d["ops"] = list(self.ops)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Params:
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})

    def replace(self, **changes) -> Params:
        return dataclasses.replace(self, **changes)
