"""netagg on FPGA boards: UART bridge, on-chip self-test, board tops, builds
and their reports (``docs/boards.md``)."""
