"""Planted bugs: mutations of the real design, applied from the test side
while the formal harness is elaborated (hdl/ is not edited). Each one is a
plausible mistake that one of the properties must catch:

=================  ==========================================  ============
mutation           the bug                                     caught by
=================  ==========================================  ============
double_combine     the slot-word read loses the contributor    once
                   bitmaps: a resent contribution is combined
                   again
no_range_check     the job table reports every job's slot      isolation
                   count as unbounded: a message of one job
                   reaches the next job's slot
lost_verdict       the verdict of a duplicate is not emitted   verdicts
counter_swap       drop_bad_header and drop_bad_length         verdicts
                   counted at each other's address
short_multicast    a completed round goes to workers 0..W-2    results
repeat_destination a three-worker round's last RESULT goes to   fanout
                   worker 1 again, not to worker 2             (multicast)
stuck_egress       the egress never presents again after it    progress
                   was once held back                          (multicast)
worker_low_byte    the job table checks the worker id's low    verdicts
                   byte only (worker 256 passes as worker 0:
                   the bug fixed in b676bc4)
offset_low_half    the decision compares the low 16 bits of    verdicts
                   the offset only (a message whose offset
                   differs above them is no MISMATCH)
=================  ==========================================  ============
"""

from __future__ import annotations

import contextlib
import sys
import types

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, wiring

MUTATIONS = {
    "double_combine": "once",
    "no_range_check": "isolation",
    "lost_verdict": "verdicts",
    "counter_swap": "verdicts",
    "short_multicast": "results",
    "repeat_destination": "fanout",
    "stuck_egress": "progress",
    "worker_low_byte": "verdicts",
    "offset_low_half": "verdicts",
}


class Forward(wiring.Component):
    """A component with ``inner``'s signature that forwards every port to it,
    except those ``edit(m, path, inner_value, outer_value)`` rewrites: it
    returns the value to drive instead (None: plain forwarding)."""

    def __init__(self, inner, edit):
        self._inner = inner
        self._edit = edit
        super().__init__(inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = self._inner
        outer = dict((path, (member, value))
                     for path, member, value in self.signature.flatten(self))
        for path, member, ivalue in self._inner.signature.flatten(self._inner):
            _, ovalue = outer[path]
            if isinstance(ivalue, Const):      # always_ready streams
                continue
            new = self._edit(m, path, ivalue, ovalue)
            if member.flow == wiring.In:
                m.d.comb += ivalue.eq(ovalue if new is None else new)
            else:
                m.d.comb += ovalue.eq(ivalue if new is None else new)
        return m


@contextlib.contextmanager
def _patched(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _wrapping(module, name, edit):
    cls = getattr(module, name)

    def make(*args, **kwargs):
        return Forward(cls(*args, **kwargs), edit)
    return _patched(module, name, make)


def _double_combine(stack):
    def is_slot_words(memory):
        shape = memory.shape
        return (isinstance(shape, data.ArrayLayout) and shape.length == 2
                and "bits" in dict(shape.elem_shape))
    hdl_modules = [mod for name, mod in sys.modules.items()
                   if name.startswith("netagg.hdl.") and hasattr(mod, "registered_read")]
    for mod in hdl_modules:
        orig = mod.registered_read

        def mutant(m, memory, addr, *, orig=orig, **kwargs):
            value = orig(m, memory, addr, **kwargs)
            if not is_slot_words(memory):
                return value
            lost = Signal(memory.shape, name="mutant_state")
            m.d.comb += lost.eq(value)
            for c in range(2):
                m.d.comb += lost[c].bits.eq(0)
            return lost
        stack.enter_context(_patched(mod, "registered_read", mutant))


def _no_range_check(stack):
    from netagg.hdl import core

    def edit(m, path, inner, outer):
        if path == ("lookup_slot_ok",):        # every slot in range
            return Const(1, 1)
        return None
    stack.enter_context(_wrapping(core, "JobTable", edit))


def _lost_verdict(stack):
    from netagg.hdl import core, layouts

    def edit(m, path, inner, outer):
        if path == ("verdict", "valid"):
            parent = inner_parent[0]
            return inner & (parent.verdict.payload.code != layouts.Verdict.DUPLICATE)
        return None
    inner_parent = []
    cls = core.SlotTable

    def make(*args, **kwargs):
        table = cls(*args, **kwargs)
        inner_parent.append(table)
        return Forward(table, edit)
    stack.enter_context(_patched(core, "SlotTable", make))


def _counter_swap(stack):
    from netagg import regmap
    from netagg.hdl import core
    names = list(regmap.CORE_COUNTERS)
    a, b = names.index("drop_bad_header"), names.index("drop_bad_length")
    names[a], names[b] = names[b], names[a]
    fake = types.SimpleNamespace(**{k: getattr(regmap, k) for k in dir(regmap)
                                    if not k.startswith("__")})
    fake.CORE_COUNTERS = tuple(names)
    stack.enter_context(_patched(core, "regmap", fake))


def _worker_low_byte(stack):
    from netagg.hdl import core

    def edit(m, path, inner, outer):
        if path == ("lookup_worker",):         # the high byte is lost
            return outer[:8]
        return None
    stack.enter_context(_wrapping(core, "JobTable", edit))


def _offset_low_half(stack):
    from netagg.hdl import slot_table
    made = []

    def edit(m, path, inner, outer):
        if path == ("states",):           # each copy's offset above bit 16
            fwd = made[-1]                # taken from the message's own
            states = Signal(inner.shape(), name="mutant_states")
            m.d.comb += states.eq(outer)
            for src in range(len(outer)):
                for copy in range(2):
                    m.d.comb += states[src][copy].offset[16:].eq(fwd.desc.meta.offset[16:])
            return states
        return None
    cls = slot_table.Decision

    def make(*args, **kwargs):
        made.append(Forward(cls(*args, **kwargs), edit))
        return made[-1]
    make.desc_terms_of = cls.desc_terms_of     # (the slot table calls it on the class)
    stack.enter_context(_patched(slot_table, "Decision", make))


def _short_multicast(stack):
    from netagg.hdl import core

    def edit(m, path, inner, outer):
        if path == ("res_desc", "payload"):
            short = Signal(inner.shape(), name="mutant_res_desc")
            m.d.comb += short.eq(inner)
            with m.If(inner.multicast):
                m.d.comb += short.workers.eq(inner.workers - 1)
            return short
        return None
    stack.enter_context(_wrapping(core, "SlotTable", edit))


def _repeat_destination(stack):
    from netagg.hdl import core

    def edit(m, path, inner, outer):
        if path == ("o", "payload"):
            wrong = Signal(inner.shape(), name="mutant_o_payload")
            m.d.comb += wrong.eq(inner)
            with m.If(inner.header.worker == 2):
                m.d.comb += wrong.header.worker.eq(1)
            return wrong
        return None
    stack.enter_context(_wrapping(core, "Multicast", edit))


def _stuck_egress(stack):
    from netagg.hdl import core
    state = {}

    def edit(m, path, inner, outer):
        if "stuck" not in state:
            state["stuck"] = Signal(name="mutant_stuck")
        stuck = state["stuck"]
        if path == ("o", "valid"):
            return inner & ~stuck
        if path == ("o", "ready"):
            return outer & ~stuck
        return None

    cls = core.Multicast

    def make(*args, **kwargs):
        state.clear()
        mc = Forward(cls(*args, **kwargs), edit)
        orig_elab = mc.elaborate

        def elaborate(platform):
            m = orig_elab(platform)
            with m.If(mc.o.valid & ~mc.o.ready):
                m.d.sync += state["stuck"].eq(1)
            return m
        mc.elaborate = elaborate
        return mc
    stack.enter_context(_patched(core, "Multicast", make))


_APPLY = {
    "double_combine": _double_combine,
    "no_range_check": _no_range_check,
    "lost_verdict": _lost_verdict,
    "counter_swap": _counter_swap,
    "short_multicast": _short_multicast,
    "repeat_destination": _repeat_destination,
    "stuck_egress": _stuck_egress,
    "worker_low_byte": _worker_low_byte,
    "offset_low_half": _offset_low_half,
}


@contextlib.contextmanager
def applied(name):
    """Apply mutation ``name`` (None: the design as it is) while inside."""
    if name is None:
        yield
        return
    if name not in _APPLY:
        raise ValueError(f"unknown mutation {name!r} (choose from {', '.join(MUTATIONS)})")
    with contextlib.ExitStack() as stack:
        _APPLY[name](stack)
        yield
