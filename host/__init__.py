"""netagg.host: the host side of netagg (plain Python and NumPy).

* :mod:`netagg.host.uart`: the client of the UART bridge boards (``netagg uart``).
"""
