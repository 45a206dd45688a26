"""Amaranth 0.5 components of codnn: what becomes Verilog. One subpackage per engine.
Installed as ``codnn.hw`` (the folder ``hw/``)."""
