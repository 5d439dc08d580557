"""Components whose parameters are checked before the component exists.

Amaranth warns about an elaboratable that is created and never used. A
constructor that refuses its parameters by raising from ``__init__`` leaves
such an object behind (``__new__`` has already run). A
:class:`CheckedComponent` runs its ``check`` class method from ``__new__``,
before the object is created, so a refused construction builds nothing and
needs no silencing.
"""

from __future__ import annotations

from amaranth.lib import wiring

__all__ = ["CheckedComponent"]


class CheckedComponent(wiring.Component):
    """A :class:`wiring.Component` whose constructor arguments are checked by
    ``cls.check(*args, **kwargs)`` (a class or static method that raises
    ``ValueError`` or ``TypeError``) before the object is created."""

    @classmethod
    def check(cls, *args, **kwargs) -> None:
        """Raise if the constructor arguments are refused (default: accept)."""

    def __new__(cls, *args, src_loc_at=0, **kwargs):
        cls.check(*args, **kwargs)
        return super().__new__(cls, *args, src_loc_at=1 + src_loc_at, **kwargs)
