"""Golden model, packet codec, pcap I/O and simulation harness.

Everything here except :mod:`netagg.sim.harness` and the cocotb benches is
plain Python and NumPy: importable without Amaranth or cocotb.
"""
