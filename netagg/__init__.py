"""netagg: an open FPGA in-network aggregation core.

Subpackages: :mod:`netagg.sim` (NumPy golden model, codec, pcap, simulation
harness), :mod:`netagg.hdl` (Amaranth design), :mod:`netagg.boards` (board
tops and builds). :mod:`netagg.params` holds the build-time parameters shared
by all of them; :mod:`netagg.cli` is the ``netagg`` command line.
"""

__version__ = "0.1.0"
