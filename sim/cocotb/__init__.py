"""cocotb benches of the generated ``netagg_core`` Verilog.

:mod:`.tb` holds the test bench (drivers, monitors, scoreboard, traffic);
:mod:`.test_sim_run` is the cocotb test ``netagg sim`` runs and
:mod:`.test_regression` the regression (launched by
``tests/test_cocotb_core.py`` through :func:`netagg.sim.harness.run_cocotb`).
These modules import cocotb; they run inside a simulator.
"""
