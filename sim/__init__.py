"""Simulation of codnn's gateware: the cocotb runner, testbenches that hold the RTL against
``codnn.golden``, their kit (stimulus, packet captures) and helpers for Amaranth's own
simulator. Installed as ``codnn.sim`` (the folder ``sim/``)."""

import os
from pathlib import Path

__all__ = ["default_build_root"]


def default_build_root():
    """Return ``$CODNN_BUILD_DIR`` or ``./build``, as an absolute path (here, not in
    ``runner``, so that NumPy-only commands find it without loading Amaranth)."""
    return Path(os.environ.get("CODNN_BUILD_DIR", "build")).resolve()
