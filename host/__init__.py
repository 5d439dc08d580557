"""netagg.host: the host side of netagg (plain Python and NumPy).

* :mod:`netagg.host.worker`: the worker library (:class:`Worker`,
  :class:`AllReduceTimeout`): all-reduce NumPy arrays through a switch.
* :mod:`netagg.host.serve`: ``netagg serve``, a switch on a UDP socket.
* :mod:`netagg.host.ctl`: ``netagg ctl``, the UDP control plane client.
* :mod:`netagg.host.uart`: the client of the UART bridge boards (``netagg uart``).
"""

from netagg.host.worker import AllReduceTimeout, JobConfigError, Stats, Worker

__all__ = ["AllReduceTimeout", "JobConfigError", "Stats", "Worker"]
