"""amaranth.sim helpers for the Ethernet front end's tests: GMII drivers and
monitors at the byte level (not tests themselves)."""

from __future__ import annotations

from netagg import frames as fr

PREAMBLE = b"\x55" * 7 + b"\xd5"


async def gmii_send(ctx, gmii, wire: bytes, *, gap: int = 12, er_at: int | None = None,
                    preamble: bytes = PREAMBLE, domain: str = "sync"):
    """Drive one frame (``wire``: bytes after the SFD, FCS included) onto a
    GMII receive port in clock domain ``domain``, then ``gap`` idle cycles."""
    for i, byte in enumerate(preamble + wire):
        ctx.set(gmii.dv, 1)
        ctx.set(gmii.data, byte)
        ctx.set(gmii.er, int(er_at is not None and i - len(preamble) == er_at))
        await ctx.tick(domain)
    ctx.set(gmii.dv, 0)
    ctx.set(gmii.er, 0)
    ctx.set(gmii.data, 0)
    for _ in range(gap):
        await ctx.tick(domain)


class GmiiMonitor:
    """Collects the frames a GMII transmit port sends: ``frames`` holds
    (bytes after the SFD with FCS, gap before in cycles, any er)."""

    def __init__(self, gmii, domain: str = "sync"):
        self.gmii = gmii
        self.domain = domain
        self.frames: list[tuple[bytes, int | None, bool]] = []
        self.errors: list[str] = []

    async def run(self, ctx):
        cur, er, idle = None, False, None
        async for _, _, en, er_bit, data in ctx.tick(self.domain).sample(self.gmii.en, self.gmii.er,
                                                                self.gmii.data):
            if en:
                if cur is None:
                    cur, er, gap, idle = bytearray(), False, idle, 0
                    self._gap = gap
                cur.append(data)
                er |= bool(er_bit)
            else:
                if cur is not None:
                    self._finish(bytes(cur), er)
                    cur = None
                idle = 0 if idle is None and not self.frames else (idle or 0) + 1

    def _finish(self, raw: bytes, er: bool):
        if raw[:8] != PREAMBLE:
            self.errors.append(f"bad preamble {raw[:8].hex()}")
        self.frames.append((raw[8:], self._gap, er))

    def payloads(self) -> list[bytes]:
        """The frames without FCS, each checked: its FCS right, no er."""
        out = []
        for wire, _gap, er in self.frames:
            assert not er, "frame sent with GMII er"
            assert fr.fcs_ok(wire), f"bad FCS on {wire.hex()}"
            out.append(wire[:-4])
        return out
