"""Shared test setup: one build folder for the whole session, so compiled simulation models
and synthesis runs are reused across tests (and across xdist workers, under a lock)."""

import os
import shutil
from pathlib import Path

import pytest

BUILD_ROOT = Path(__file__).resolve().parent.parent / "build" / "tests"
os.environ.setdefault("CODNN_BUILD_DIR", str(BUILD_ROOT))


@pytest.fixture
def icarus():
    """The simulator name ``"icarus"``, or a skip saying why Icarus cannot run here."""
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed: install the Debian package "
                    "'iverilog' (make test does so when run as root)")
    return "icarus"


@pytest.fixture
def build_root():
    return Path(os.environ["CODNN_BUILD_DIR"])
