"""Shared test setup: one build folder for the whole session, so compiled simulation models
and synthesis runs are reused across tests (and across xdist workers, under a lock)."""

import os
import shutil
from pathlib import Path

import pytest

BUILD_ROOT = Path(__file__).resolve().parent.parent / "build" / "tests"
os.environ.setdefault("CODNN_BUILD_DIR", str(BUILD_ROOT))


def pytest_collection_modifyitems(config, items):
    """The tests marked ``long`` at the start of each xdist worker's first share, dealt in
    turn, so that each worker begins with its long tests and none is left with one while
    the others have finished (worksteal hands worker ``k`` the ``k``-th contiguous share of
    what is left, ``len // workers_left`` tests, and steals from the end of a queue)."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    long = [item for item in items if item.get_closest_marker("long")]
    rest = [item for item in items if not item.get_closest_marker("long")]
    ordered, start = [], 0
    for k in range(workers):
        share = long[k::workers]
        take = max(0, (len(items) - len(ordered)) // (workers - k) - len(share))
        ordered += share + rest[start:start + take]
        start += take
    items[:] = ordered + rest[start:]


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
