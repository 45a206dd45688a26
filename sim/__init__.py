"""Simulation of codnn's gateware: the cocotb runner, testbenches that hold the RTL against
``golden/``, and helpers for Amaranth's own simulator."""
