"""The control register map of the netagg core and its board front ends
(``docs/core.md``): one definition, used by the hardware (job table, core
counters, UART bridge), the simulation benches and every host-side client.

Pure Python: imports nothing but the standard library.

Addresses are 16 bits, values 32 bits.

* ``JOB_BASE + JOB_REGS * j + r``: job ``j``'s register ``r``:
  ``JOB_CTRL`` = {enable (bit 0), workers (bits 15..8)}, ``JOB_BASE_SLOT``
  = first slot, ``JOB_NSLOTS`` = number of slots.
* ``COUNTER_BASE + i``: the core counter ``CORE_COUNTERS[i]`` (read only).
* ``BRIDGE_BASE + i``: the UART bridge counter ``BRIDGE_COUNTERS[i]``.
* ``ETH_BASE + ETH_PORT_STRIDE * p + i``: Ethernet port ``p``'s counter
  ``ETH_COUNTERS[i]`` (docs/ethernet.md; named ``eth<p>_<name>`` in stats).
"""

from __future__ import annotations

from netagg.wire import COUNTERS

JOB_BASE = 0x0000
JOB_REGS = 4
"""Registers per job entry (three used, the fourth reads 0)."""
JOB_CTRL, JOB_BASE_SLOT, JOB_NSLOTS = 0, 1, 2

JOB_ENABLE_BIT = 0
JOB_WORKERS_SHIFT = 8
JOB_WORKERS_BITS = 8
JOB_BASE_BITS = 16
JOB_NSLOTS_BITS = 17

COUNTER_BASE = 0x8000
CORE_COUNTERS: tuple[str, ...] = COUNTERS + ("stall",)
"""The core's counters, readable at ``COUNTER_BASE + index``: protocol.md's
then ``stall`` (cycles a combine waited on a hazard and nothing issued)."""

BRIDGE_BASE = 0xC000
BRIDGE_COUNTERS: tuple[str, ...] = ("bad_frame", "rx_overrun", "rx_frame_error",
                                    "verdict_overflow")
"""The UART bridge's counters, readable at ``BRIDGE_BASE + index``."""

ETH_BASE = 0xD000
ETH_PORT_STRIDE = 0x10
ETH_COUNTERS: tuple[str, ...] = ("rx", "tx", "drop_fcs", "drop_runt", "drop_too_long",
                                 "drop_overflow", "arp_replies", "icmp_replies", "ignored")
"""An Ethernet port's counters (docs/ethernet.md), readable at
``ETH_BASE + ETH_PORT_STRIDE * port + index``: frames received (every frame
the MAC saw, dropped ones included) and sent, each drop reason, the ARP and
ICMP echo replies sent, and the frames delivered that were neither netagg
messages nor answered (their sum over the ports is the stats' ``ignored``)."""


def eth_counter_name(port: int, name: str) -> str:
    """The stats name of Ethernet port ``port``'s counter ``name``."""
    if name not in ETH_COUNTERS:
        raise KeyError(f"no Ethernet counter named {name!r}")
    return f"eth{port}_{name}"


def eth_counter_addr(port: int, name: str) -> int:
    """Address of Ethernet port ``port``'s counter ``name``."""
    if not 0 <= port < (0x10000 - ETH_BASE) // ETH_PORT_STRIDE:
        raise ValueError(f"no Ethernet port {port}")
    if name not in ETH_COUNTERS:
        raise KeyError(f"no Ethernet counter named {name!r}")
    return ETH_BASE + ETH_PORT_STRIDE * port + ETH_COUNTERS.index(name)


def job_addr(job: int, reg: int) -> int:
    """Address of register ``reg`` of job entry ``job``."""
    if not 0 <= reg < JOB_REGS:
        raise ValueError(f"job register {reg} is not below {JOB_REGS}")
    return JOB_BASE + JOB_REGS * job + reg


def job_ctrl_word(enable: bool, workers: int) -> int:
    """The value of a job's ``JOB_CTRL`` register."""
    if not 0 <= workers < 1 << JOB_WORKERS_BITS:
        raise ValueError(f"workers={workers} does not fit in {JOB_WORKERS_BITS} bits")
    return (int(bool(enable)) << JOB_ENABLE_BIT) | (workers << JOB_WORKERS_SHIFT)


def job_entry_words(enable: bool, workers: int, slot_base: int, slots: int) -> list[int]:
    """The values of a job's registers 0..JOB_REGS-2, in register order."""
    return [job_ctrl_word(enable, workers), slot_base, slots]


def job_writes(jobs) -> list[tuple[int, int]]:
    """Control writes (addr, value) that load a :class:`netagg.jobs.JobTable`:
    for every entry 0..J-1, slot base and count, then enable and W (so a job
    is enabled only once its range is in place); unlisted or disabled jobs
    are written disabled."""
    writes = []
    for j in range(jobs.params.jobs):
        job = jobs[j] if j in jobs else None
        if job is not None and job.enabled:
            writes += [(job_addr(j, JOB_BASE_SLOT), job.slot_base),
                       (job_addr(j, JOB_NSLOTS), job.slots),
                       (job_addr(j, JOB_CTRL), job_ctrl_word(True, job.workers))]
        else:
            writes.append((job_addr(j, JOB_CTRL), job_ctrl_word(False, 0)))
    return writes


def counter_addr(name: str) -> int:
    """Address of a core, bridge or Ethernet (``eth<p>_<name>``) counter by name."""
    if name in CORE_COUNTERS:
        return COUNTER_BASE + CORE_COUNTERS.index(name)
    if name in BRIDGE_COUNTERS:
        return BRIDGE_BASE + BRIDGE_COUNTERS.index(name)
    if name.startswith("eth") and "_" in name and name[3:name.index("_")].isdigit():
        port, _, rest = name[3:].partition("_")
        return eth_counter_addr(int(port), rest)
    raise KeyError(f"no counter named {name!r}")
