"""The netagg hardware, in Amaranth HDL."""
