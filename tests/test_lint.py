# amaranth: UnusedElaboratable=no
"""Every engine's Verilog verilated with ``-Wall`` (``--cc``, which also finds
combinational loops through one vector, UNOPTFLAT, that ``--lint-only`` does not): the
warnings by type are printed, and none may be of a type beyond Amaranth's own style (the
generator's implicit widths and case defaults, ``-Wall``'s unused bits, initial values and
file names)."""

import collections
import re
import subprocess

import pytest

from codnn.engines import ENGINES
from codnn.flows import generate
from codnn.sim.runner import GENERATOR_STYLE_WARNINGS
from codnn.sim.simulators import use_simulator

#: What ``-Wall`` adds that Amaranth's output trips by design: bits of a payload a design
#: does not read, registers' initial values in their declaration, a module per file.
_WALL_STYLE = ("UNUSEDSIGNAL", "PROCASSINIT", "DECLFILENAME")
#: Small configurations, so that linting stays quick; the rest keep their defaults.
_SMALL = {"fmix32": {"lanes": 2}, "systolic": {"rows": 2, "cols": 2, "alpha": 2},
          "tq": {"rows": 1, "cols": 2, "g": 4, "budget": 4, "beta": 2}}
_LANES = (1, 8)
_NIC = {"compressor", "decompressor", "loopback", "terngrad", "terngrad_decoder", "maxabs"}


#: Linted in ``make test-long``: the NIC engines at 8 lanes and the largest designs.
_LONG = {"framepath", "network", "rice_loopback"}


_CONFIGS = [(engine, {"lanes": lanes}) for engine in sorted(_NIC) for lanes in _LANES] + [
    (engine, _SMALL.get(engine, {})) for engine in sorted(set(ENGINES) - _NIC)]


@pytest.mark.parametrize("engine,params", [
    pytest.param(engine, params, marks=pytest.mark.long)
    if engine in _LONG or params.get("lanes") == 8 else (engine, params)
    for engine, params in _CONFIGS])
def test_verilog_has_no_warning_beyond_the_generators_style(engine, params, tmp_path):
    manifest = generate(engine, params, tmp_path)
    use_simulator("verilator")
    result = subprocess.run(["verilator", "--cc", "-Wall", "--Mdir", "obj",
                             manifest["verilog"]],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    counts = collections.Counter(re.findall(r"%Warning-(\w+)", result.stderr))
    print(f"{engine} {params}: {dict(sorted(counts.items()))}")
    other = {name: n for name, n in counts.items()
             if name not in GENERATOR_STYLE_WARNINGS + _WALL_STYLE}
    assert not other, f"{engine}: {other}\n{result.stderr[:3000]}"
    errors = [line for line in result.stderr.splitlines()
              if line.startswith("%Error") and "Exiting due to" not in line]
    assert not errors, errors
